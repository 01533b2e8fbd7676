"""The efficient mode's tick time beside ray-compat's, in one process, on
``cluster_v2`` problems with placement groups (docs/efficient.md "Speed").

    .venv/bin/python -m bench.efficient_scaling                 # every row, median of 5
    .venv/bin/python -m bench.efficient_scaling --rows headline --repeat 3
    .venv/bin/python -m bench.efficient_scaling --json out.json
    .venv/bin/python -m bench.efficient_scaling --rows scale --repeat 3   # 10k-50k nodes

Rows: the three sizes of the efficient mode's speed targets (1k nodes / 1k units / 50 groups, 3k / 10k / 200,
10k / 100k / 1,000), a node sweep (1k -> 10k nodes at 10k units / 200 groups) and
a group sweep (50 -> 1,000 groups at 1k nodes / 1k units); ``scale``, not run by
default, the largest clusters (10k / 100k / 1,000 to 50k / 1M / 5,000), with each
mode's peak resident-memory growth per tick. Each cell is the median
wall time of ``--repeat`` calls of ``vecsched.engine.schedule`` (default options)
after one untimed call; the first call of each mode in the process (numba's
compile, or its load from the on-disk cache, and OR-Tools' import) is reported
separately. The efficient column says what its gang step did on the last call
(``gang_bound_met``: CP-SAT skipped by the lower bound; ``gang_cpsat``: it ran).
Wall clock on a shared machine: noisy; ratios from one process only.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

from bench.benchmarks.common import cached_problem_v2
from bench.benchmarks.peak_rss import PeakRss, mib
from vecsched.engine import schedule

HEADLINE = [(1000, 1000, 50), (3000, 10000, 200), (10000, 100000, 1000)]
NODES = [(n, 10000, 200) for n in (1000, 2000, 5000, 10000)]
GROUPS = [(1000, 1000, g) for g in (50, 100, 200, 500, 1000)]
# The largest clusters (not in the default run: minutes, and GiBs at 50k nodes).
SCALE = [(10000, 100000, 1000), (30000, 300000, 3000), (50000, 1000000, 0),
         (50000, 100000, 1000), (50000, 1000000, 5000)]
ROWS = {"headline": HEADLINE, "nodes": NODES, "groups": GROUPS, "scale": SCALE}


def _time(fn, repeat: int, peaks: list | None = None) -> tuple[float, object]:
    """Median seconds of ``repeat`` calls and the last result; each call's peak
    resident-memory growth appended to ``peaks``."""
    out, times = None, []
    for _ in range(repeat):
        with PeakRss() as mem:
            t = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - t)
        if peaks is not None:
            peaks.append(mem.growth)
    return statistics.median(times), out


def first_calls() -> dict:
    """Each mode's first call in the process (compile or cache load, imports)."""
    p = cached_problem_v2(nodes=200, units=1000, shapes=20, gangs=20)
    out = {}
    for mode in ("ray-compat", "efficient"):
        t = time.perf_counter()
        schedule(p, mode=mode)
        first = time.perf_counter() - t
        warm, _ = _time(lambda: schedule(p, mode=mode), 3)
        out[mode] = {"first_s": first, "warm_s": warm}
    return out


def row(nodes: int, units: int, gangs: int, repeat: int) -> dict:
    p = cached_problem_v2(nodes=nodes, units=units, shapes=20, gangs=gangs)
    schedule(p)
    rpk, epk = [], []
    ray, _ = _time(lambda: schedule(p), repeat, rpk)
    schedule(p, mode="efficient")
    eff, plan = _time(lambda: schedule(p, mode="efficient"), repeat, epk)
    how = [k for k in ("gang_bound_met", "gang_cpsat", "gang_cpsat_better", "gang_lns_better")
           if plan.stats.get(k)]
    return {"nodes": nodes, "units": units, "gangs": gangs, "ray_s": ray, "eff_s": eff,
            "ratio": eff / ray, "gang_pass": plan.stats.get("gang_pass"), "gang_steps": how,
            "ray_peak_mib": mib(max(rpk)), "eff_peak_mib": mib(max(epk))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="headline,nodes,groups")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    res = {"first_calls": first_calls(), "rows": []}
    for mode, v in res["first_calls"].items():
        print(f"first call {mode}: {v['first_s']:.2f} s (warm {v['warm_s'] * 1e3:.1f} ms, "
              f"200 nodes / 1k units / 20 groups)", flush=True)
    print("| set | nodes | units | groups | ray-compat ms | efficient ms | ratio | gang steps "
          "| peak RSS growth MiB: ray-compat / efficient |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    done = {}
    for name in args.rows.split(","):
        for n, u, g in ROWS[name]:
            r = done.get((n, u, g)) or row(n, u, g, args.repeat)
            done[(n, u, g)] = r
            res["rows"].append(dict(r, set=name))
            print(f"| {name} | {n:,} | {u:,} | {g:,} | {r['ray_s'] * 1e3:.1f} | "
                  f"{r['eff_s'] * 1e3:.1f} | {r['ratio']:.1f}x | {r['gang_pass']} "
                  f"{'+'.join(r['gang_steps']) or '-'} | {r['ray_peak_mib']:.0f} / "
                  f"{r['eff_peak_mib']:.0f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
