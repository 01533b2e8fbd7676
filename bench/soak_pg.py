"""Placement-group churn soak: one EngineScheduler over thousands of ticks of a
cluster whose placement groups come and go (benchmarks/churn.py), printing the
resource width, the tick time and the process RSS per window, and Ray 2.60's
decisions against the engine's on sampled ticks. Nothing is asserted on time;
the exit code is 1 if a sampled tick differs from Ray.

    .venv/bin/python -m bench.soak_pg                      # 2,000 ticks, 1,000 nodes, 200 groups, 10 replaced a tick
    .venv/bin/python -m bench.soak_pg --ticks 300 --check-every 0    # no Ray
"""
from __future__ import annotations

import argparse
import copy
import gc
import json
import statistics
import sys
import time
from pathlib import Path

from bench.churn import PgChurn


def rss_mib() -> float:
    """Resident set size of this process now (Linux /proc), MiB."""
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    import os
    return pages * os.sysconf("SC_PAGE_SIZE") / 2 ** 20


def width(sched) -> int:
    shape = getattr(sched, "last_shape", None)
    if shape:
        return shape["resources"]
    return len(sched._vocab)            # an EngineScheduler from before last_shape existed


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ticks", type=int, default=2000)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--groups", type=int, default=200)
    ap.add_argument("--replace", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--window", type=int, default=100, help="ticks per printed row")
    ap.add_argument("--check-every", type=int, default=100,
                    help="compare with Ray's scheduler every N ticks (0: never)")
    ap.add_argument("--json", help="write the rows to this file")
    args = ap.parse_args(argv)

    import vecsched.engine as engine
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler

    from vecsched.adapters.ray import EngineScheduler
    from vecsched.adapters.ray.compare import reply_diff

    t0 = time.perf_counter()
    engine.warmup()
    print(f"warm-up (compile or cache load) {time.perf_counter() - t0:.1f} s", flush=True)
    churn = PgChurn(nodes=args.nodes, groups=args.groups, replace=args.replace, seed=args.seed)
    sched = EngineScheduler(new_id=lambda: "id", now_ns=lambda: 0)
    rows, win, checked, differ = [], [], 0, []
    rss0 = None
    print("| ticks | width (min-max) | tick ms median (max) | CPU ms median "
          "| decode / engine / encode ms | RSS MiB | Ray checks |")
    print("|---|---|---|---|---|---|---|")
    for tick in range(args.ticks):
        req = churn.request()
        want = None
        if args.check_every and tick % args.check_every == args.check_every - 1:
            want = ResourceDemandScheduler().schedule(copy.deepcopy(req))
        t, c = time.perf_counter(), time.process_time()
        got = sched.schedule(req)
        dt, dc = time.perf_counter() - t, time.process_time() - c
        win.append((dt, width(sched), dict(sched.last_timing), dc))
        if want is not None:
            checked += 1
            problems = reply_diff(want, got)
            if problems:
                differ.append((tick, problems))
        churn.advance()
        if tick == 0:
            gc.collect()
            rss0 = rss_mib()
        if len(win) == args.window or tick == args.ticks - 1:
            ts = [w[0] * 1000 for w in win]
            cpu = statistics.median(w[3] * 1000 for w in win)
            ws = [w[1] for w in win]
            parts = [statistics.median(w[2][k] for w in win) * 1000
                     for k in ("decode_s", "engine_s", "encode_s")]
            gc.collect()
            row = dict(ticks=tick + 1, width_min=min(ws), width_max=max(ws),
                       tick_ms_median=statistics.median(ts), tick_ms_max=max(ts),
                       tick_cpu_ms_median=cpu,
                       decode_ms=parts[0], engine_ms=parts[1], encode_ms=parts[2],
                       rss_mib=rss_mib(), ray_checked=checked, ray_differ=len(differ))
            rows.append(row)
            print(f"| {row['ticks']} | {min(ws)}-{max(ws)} | {row['tick_ms_median']:.1f} "
                  f"({row['tick_ms_max']:.1f}) | {cpu:.1f} "
                  f"| {parts[0]:.1f} / {parts[1]:.1f} / {parts[2]:.1f} "
                  f"| {row['rss_mib']:.0f} | {checked} ({len(differ)} differ) |", flush=True)
            win = []
    print(f"RSS after the first tick {rss0:.0f} MiB, at the end {rss_mib():.0f} MiB; "
          f"{churn.dropped} groups found no room; Ray checked on {checked} ticks, "
          f"{len(differ)} differ")
    for tick, problems in differ[:5]:
        print(f"tick {tick}: " + "; ".join(problems)[:2000])
    if args.json:
        Path(args.json).write_text(json.dumps(dict(args=vars(args), rows=rows, rss_first=rss0,
                                                   differ=[t for t, _ in differ]), indent=1))
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
