"""The figures of docs/consolidation.md: the default openb replay (``vecsched replay``'s
window), per seed, with Ray's scheduler, the FFD baseline, the efficient mode without
consolidation, ``efficient-consolidate`` (drain, deadline 60 s, budget 1, stability
window 300 s), the old consolidation (stop at once, no budget: ``kill``) and other
settings (``VARIANTS``: deadlines, budgets, windows, the cluster quiet window
``quiet*``, replace moves); ``--workload`` replays another plain workload of the suite.

    python -m bench.consolidation_sweep --seeds 0 1 2 3 --out consolidation.json
    python -m bench.consolidation_sweep --workload services --schedulers ray quiet120

Prints one JSON line per (seed, scheduler) and writes them all to ``--out``.
"""
from __future__ import annotations

import argparse
import json
import os
import time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

KEYS = ("gpu_hours", "node_hours", "pending_p95_s", "restarts", "lost_gpu_hours",
        "lost_cpu_hours", "drained", "drain_deadline_hit", "consolidations",
        "disrupted_max_concurrent", "relaunch_after_consolidation", "never_placed",
        "cancelled_before_join")

VARIANTS = {
    "kill": dict(consolidate=0.25, drain_deadline_s=0.0, consolidate_budget=1000),
    "drain-60s": dict(consolidate=0.25, drain_deadline_s=60.0),
    "drain-180s": dict(consolidate=0.25, drain_deadline_s=180.0),
    "drain-60s-budget3": dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_budget=3,
                              consolidate_per_tick=3),
    "drain-60s-after300": dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_after_s=300.0),
    "drain-60s-after600": dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_after_s=600.0),
    "quiet120": dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_quiet_s=120.0),
    "quiet120-after300": dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_after_s=300.0,
                              consolidate_quiet_s=120.0),
    "quiet120-after120": dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_after_s=120.0,
                              consolidate_quiet_s=120.0),
    "quiet300": dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_quiet_s=300.0),
    "quiet120-budget2": dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_quiet_s=120.0,
                             consolidate_budget=2, consolidate_per_tick=2),
    "replace-after300": dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_after_s=300.0,
                             consolidate_replace=True),
    "replace-budget3": dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_budget=3,
                            consolidate_per_tick=3, consolidate_replace=True),
}


def scheduler(name: str):
    from vecsched.adapters.replay import make
    from vecsched.adapters.replay.efficient import EfficientSched
    from vecsched.engine.efficient import EfficientOptions
    if name in VARIANTS:
        return EfficientSched(options=EfficientOptions(**VARIANTS[name]), name=name)
    return make(name)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--schedulers", nargs="+",
                    default=["ray", "baseline", "efficient-proxy", "efficient-consolidate",
                             *VARIANTS])
    ap.add_argument("--groups", default=None,
                    help="worker groups: a bundled set (openb_nodes, pai2020_nodes, "
                         "spot2026_nodes) or a Parquet path; default: the trace's own")
    ap.add_argument("--workload", default="openb",
                    help="a plain workload of the suite (bench/suite.py: openb, cpu250, "
                         "gpushare100, gpuspec33, services), no gangs")
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    from vecsched.adapters.replay import Replay, ReplayConfig, load
    from bench.suite import WORKLOADS
    w = {x.name: x for x in WORKLOADS}[a.workload]
    trace = load(w.trace, a.groups, w.window)
    rows = []
    for seed in a.seeds:
        for name in a.schedulers:
            t = time.perf_counter()
            m = Replay(trace, scheduler(name), ReplayConfig(seed=seed)).run().metrics
            row = {"seed": seed, "workload": a.workload, "groups": a.groups, "scheduler": name,
                   "wall_s": time.perf_counter() - t,
                   "launches": m["instances"]["launched"], **{k: m[k] for k in KEYS}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
