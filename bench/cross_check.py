"""The CP-SAT cross-check on seeded ticks: solver time by bundle count, and the
gap of each scheduler's plan to the proven optimum (or bound).

    .venv/bin/python -m bench.cross_check                    # 25/50/100/200 bundles, 20 seeds
    .venv/bin/python -m bench.cross_check --bundles 100 --seeds 5

Gang ticks come from ``tests/kits/ganggen.py:gang_tick`` (placement groups of 2-8
bundles, mixed strategies, Ray-train-like shapes, six Ray-like worker groups);
plain ticks from ``plain_tick`` (the FFD baseline places no placement group,
so it is compared on those). The objective is the model's (``vecsched.engine.solver``):
unplaced bundles first, then the price of the launches (proxy 1 + GPUs per node).
Solver: one worker, seed 0, ``--dtime`` deterministic seconds; times are
wall-clock medians on this machine (noisy: other jobs share it). ``efficient`` runs
with the default tick budget (``EfficientOptions.tick_budget_s``),
``efficient-no-budget`` without one, ``efficient-heuristic`` without CP-SAT.
"""
from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from vecsched.engine import schedule
from vecsched.engine.baseline.ffd import schedule_baseline
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.solver import assignment_of_plan, build_instance, cross_check_plan, solve
from tests.kits.ganggen import gang_tick, plain_tick


EFFICIENT = EfficientOptions()


ONLY: tuple = ()


def schedulers(plain: bool):
    out = {"ray-compat": lambda p: schedule(p),
           "efficient": lambda p: schedule(p, mode="efficient", options=EFFICIENT),
           "efficient-no-budget": lambda p: schedule(
               p, mode="efficient", options=replace(EFFICIENT, tick_budget_s=None)),
           "efficient-heuristic": lambda p: schedule(
               p, mode="efficient", options=EfficientOptions(gang_cpsat_bundles=0))}
    if plain:
        out["ffd"] = schedule_baseline
    return {k: v for k, v in out.items() if not ONLY or k in ONLY or k == "efficient"}


def one(p, plain: bool, dtime: float) -> dict:
    inst = build_instance(p)
    plans = {}
    for name, fn in schedulers(plain).items():
        t = time.perf_counter()
        plans[name] = (fn(p), time.perf_counter() - t)
    eff = plans["efficient"][0]
    hint = assignment_of_plan(inst, eff, eff.stats.get("gang_place"))
    t0, c0 = time.perf_counter(), time.process_time()
    res = solve(inst, hint=hint, deterministic_limit=dtime)
    row = {"solve_s": time.perf_counter() - t0, "solve_cpu_s": time.process_time() - c0,
           "status": res.status, "optimum": res.objective, "bound": res.bound}
    for name, (plan, secs) in plans.items():
        chk = cross_check_plan(inst, plan, res, gang_place=plan.stats.get("gang_place"))
        row[name] = {"gap": chk.gap, "optimal": chk.optimal, "feasible": chk.feasible,
                     "tick_s": secs}
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundles", default="25,50,100,200")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--dtime", type=float, default=20.0)
    ap.add_argument("--plain", action="store_true", help="plain-demand ticks (units)")
    ap.add_argument("--eff-dtime", type=float, default=None,
                    help="the efficient mode's cpsat_dtime (default: its default)")
    ap.add_argument("--eff-bundles", type=int, default=None,
                    help="the efficient mode's gang_cpsat_bundles (default: its default)")
    ap.add_argument("--eff-budget", type=float, default=None,
                    help="the efficient mode's tick_budget_s (default: its default; "
                         "efficient-no-budget runs without one)")
    ap.add_argument("--schedulers", default="",
                    help="comma list to run (default: all; efficient always runs: it hints "
                         "the check)")
    args = ap.parse_args(argv)
    global EFFICIENT, ONLY
    ONLY = tuple(x for x in args.schedulers.split(",") if x)
    kw = {}
    if args.eff_dtime is not None:
        kw["cpsat_dtime"] = args.eff_dtime
    if args.eff_bundles is not None:
        kw["gang_cpsat_bundles"] = args.eff_bundles
    if args.eff_budget is not None:
        kw["tick_budget_s"] = args.eff_budget
    EFFICIENT = EfficientOptions(**kw)
    for B in [int(x) for x in args.bundles.split(",")]:
        rows = []
        for seed in range(args.seeds):
            p = plain_tick(seed, units=B) if args.plain else gang_tick(seed, bundles=B)
            rows.append(one(p, args.plain, args.dtime))
        st = [r["status"] for r in rows]
        print(f"{'units' if args.plain else 'bundles'} {B}: solve median "
              f"{np.median([r['solve_s'] for r in rows]):.3f} s (cpu "
              f"{np.median([r['solve_cpu_s'] for r in rows]):.3f} s), max "
              f"{max(r['solve_s'] for r in rows):.2f} s; proven optimal "
              f"{st.count('OPTIMAL')}/{len(st)}")
        for name in schedulers(args.plain):
            g = np.asarray([r[name]["gap"] for r in rows])
            feas = [r[name]["feasible"] for r in rows]
            print(f"  {name:20s} gap p50 {np.median(g):.4f} max {g.max():.4f}  within 2%: "
                  f"{np.mean(g <= 0.02):.0%}  optimal: "
                  f"{sum(r[name]['optimal'] for r in rows)}/{len(rows)}  feasible: "
                  f"{sum(f is True for f in feas)}/{len(feas)}  tick p50 "
                  f"{np.median([r[name]['tick_s'] for r in rows]):.3f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
