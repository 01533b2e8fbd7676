"""Every tick's decision of short replays, digested: proof that a change to the replay
keeps decisions and figures identical (not "close").

    .venv/bin/python bench/replay_digest.py --out before.json     # before the change
    .venv/bin/python bench/replay_digest.py --out after.json      # after it
    .venv/bin/python bench/replay_digest.py --compare before.json after.json

Each case (``CASES``: short windows of every suite workload, the gang overlay, a time
window with a warm start, a cloud that fails launches and preempts nodes) is replayed
with every scheduler of ``SCHEDULERS`` (the engine with ``--check-ray``), decisions
recorded (``Decision.key()`` per tick). Per case and scheduler the output holds the
SHA-256 of the decision keys, the tick count, and the summary and per-tick series
with wall-time figures left out (``TIMING``): everything else must be equal.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from vecsched.adapters.replay import (GangOverlay, Replay, ReplayConfig,  # noqa: E402
                                      Window, load, make)

SCHEDULERS = ("engine", "baseline", "ray", "efficient", "efficient-proxy",
              "efficient-consolidate")
ROWS = Window(start=None, pods=300, arrival_scale=200.0)
CASES = {
    "openb": ("openb", ROWS, 0.0, ReplayConfig(seed=0)),
    "openb-gangs": ("openb", ROWS, 0.2, ReplayConfig(seed=0)),
    "cpu250": ("openb_cpu250", ROWS, 0.0, ReplayConfig(seed=0)),
    "gpushare100-gangs": ("openb_gpushare100", ROWS, 0.2, ReplayConfig(seed=0)),
    "gpuspec33": ("openb_gpuspec33", ROWS, 0.0, ReplayConfig(seed=0)),
    "services": ("services", Window(start=0, pods=150, arrival_scale=1.0), 0.0,
                 ReplayConfig(seed=0)),
    "openb-warm": ("openb", Window(last_s=12 * 3600.0, arrival_scale=200.0), 0.0,
                   ReplayConfig(seed=0)),
    "openb-flaky-cloud": ("openb", ROWS, 0.2,
                          ReplayConfig(seed=1, launch_failure_rate=0.1,
                                       preemption_rate_per_h=2.0, max_concurrent_launches=3)),
}
# Wall-time figures: they differ run to run, so they are left out of the comparison.
TIMING = {"tick_p50_ms", "tick_p99_ms", "tick_max_ms", "scheduler_s", "check_ray_s",
          "wall_s", "seconds"}


def _plain(x):
    """A JSON-able copy of ``x`` (numpy arrays and scalars as lists and floats), timing
    keys left out of dicts."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items() if k not in TIMING}
    if isinstance(x, (list, tuple)):
        return [_plain(v) for v in x]
    if hasattr(x, "tolist"):
        return x.tolist()
    return x


def digest(case: str, scheduler: str) -> dict:
    trace_name, window, gangs, config = CASES[case]
    trace = load(trace_name, None, window, GangOverlay(gangs, seed=config.seed))
    sched = make(scheduler, check_ray=scheduler == "engine")
    r = Replay(trace, sched, config, record_decisions=True).run()
    series = {k: v for k, v in r.series.items() if k != "tick_s"}
    return {"decisions_sha256": hashlib.sha256(repr(r.decisions).encode()).hexdigest(),
            "ticks": len(r.decisions), "metrics": _plain(r.metrics),
            "series": _plain(series), "check": _plain(r.check)}


def compare(a: dict, b: dict) -> list:
    """The (case, scheduler, key) whose values differ, and the cells only one side has."""
    out = []
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            out.append((key, "only in one file"))
            continue
        for k in sorted(set(a[key]) | set(b[key])):
            if a[key].get(k) != b[key].get(k):
                out.append((key, k))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="write the digests here (JSON)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--schedulers", default=",".join(SCHEDULERS))
    ap.add_argument("--compare", nargs=2, metavar=("BEFORE", "AFTER"))
    args = ap.parse_args(argv)
    if args.compare:
        a, b = (json.load(open(p)) for p in args.compare)
        diff = compare(a, b)
        for d in diff:
            print("differs:", *d)
        print(f"{len(set(a) & set(b))} cells compared, {len(diff)} differences")
        return 1 if diff else 0
    out = {}
    for case in args.cases.split(","):
        for s in args.schedulers.split(","):
            d = digest(case, s)
            out[f"{case}/{s}"] = d
            print(f"{case}/{s}: {d['ticks']} ticks {d['decisions_sha256'][:16]}", flush=True)
            if args.out:
                with open(args.out, "w") as f:
                    json.dump(out, f, indent=1, sort_keys=True, default=float)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
