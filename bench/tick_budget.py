"""Where an efficient tick's time goes under ``EfficientOptions.tick_budget_s``.

    .venv/bin/python -m bench.tick_budget                       # both generators, 1,000 nodes
    .venv/bin/python -m bench.tick_budget --budgets none,0.25 --bundles 100,200 --seeds 3

Per tick: the whole tick's wall time; of it, the lower bound (``gang_bound.py``), the
CP-SAT packing (``_cpsat``: model building plus the solve) and the neighbourhood search
(``lns.py``), the rest being the heuristics and the tick around them; and over every
CP-SAT solve of the tick, its deterministic seconds beside the solver's own wall
seconds (their ratio is this machine's speed in CP-SAT's work units; building the
model is outside both). Ticks: ``tests/kits/ganggen.py:gang_tick(seed, bundles,
nodes)`` and ``bench/benchmarks/common.cluster_v2(nodes, units=nodes, gangs=G,
seed)`` (G groups of 2-8 bundles). Wall-clock medians on this machine (noisy: other
jobs share it); the tick is run once untimed first (numba compiles, caches warm).
"""
from __future__ import annotations

import argparse
import time
from contextlib import contextmanager

import numpy as np

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient import gang_place
from vecsched.engine.solver import cpsat
from tests.kits.ganggen import gang_tick


class Split:
    """Seconds spent in the wrapped steps of one tick, and the solves' own figures."""

    def __init__(self):
        self.t = {"bound": 0.0, "cpsat": 0.0, "lns": 0.0}
        self.solve_wall = 0.0
        self.solve_dtime = 0.0
        self.solves = 0


@contextmanager
def split_timer(split: Split):
    """Wrap the gang steps (patched module attributes, restored on exit)."""
    saved = (gang_place.bound_met, gang_place._cpsat, gang_place.improve_lns, cpsat.solve)

    def timed(name, fn):
        def run(*a, **k):
            t = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                split.t[name] += time.perf_counter() - t
        return run

    def solve(*a, **k):
        res = saved[3](*a, **k)
        split.solve_wall += res.wall_s
        split.solve_dtime += res.deterministic_s
        split.solves += 1
        return res

    gang_place.bound_met = timed("bound", saved[0])
    gang_place._cpsat = timed("cpsat", saved[1])
    gang_place.improve_lns = timed("lns", saved[2])
    cpsat.solve = solve
    try:
        yield split
    finally:
        gang_place.bound_met, gang_place._cpsat, gang_place.improve_lns, cpsat.solve = saved


def problems(kind: str, sizes, seeds: int, nodes: int):
    """(label, Problem) pairs: gang_tick by bundles, cluster_v2 by groups."""
    if kind == "ganggen":
        for b in sizes:
            for s in range(seeds):
                yield f"ganggen b={b} s={s}", gang_tick(s, bundles=b, nodes=nodes)
    elif kind == "v2mixed":
        for g in sizes:
            for s in range(seeds):
                yield f"v2mixed G={g} s={s}", v2_mixed(nodes, g, s)
    else:
        from bench.benchmarks.common import cluster_v2, engine_problem
        for g in sizes:
            for s in range(seeds):
                p = engine_problem(cluster_v2(nodes=nodes, units=nodes, gangs=g, seed=s))
                yield f"v2 G={g} s={s}", p


def v2_mixed(nodes: int, groups: int, seed: int):
    """``cluster_v2``'s saturated cluster (no groups of its own) with ``groups``
    placement groups of ``gang_tick``'s bundle shapes (GPU workers and CPU bundles,
    mixed within a group on 30 %): where its equal-bundle groups meet the lower bound
    at once, these leave CP-SAT work to do."""
    from dataclasses import replace

    from bench.benchmarks.common import STRATEGIES, cluster_v2, engine_problem
    from tests.kits.ganggen import _bundle
    spec = cluster_v2(nodes=nodes, units=nodes, seed=seed, gangs=0)
    rng = np.random.default_rng([seed, 22])
    gangs = []
    for g in range(groups):
        strategy = STRATEGIES[int(rng.integers(len(STRATEGIES)))]
        n = int(rng.integers(2, 9))
        shapes = [_bundle(rng)] * n if rng.random() < 0.7 else [_bundle(rng) for _ in range(n)]
        gangs.append((f"{g:08x}" + "0" * 24, strategy, [dict(b) for b in shapes]))
    return engine_problem(replace(spec, gangs=gangs))


def measure(p, opts: EfficientOptions) -> dict:
    """One timed tick with its split."""
    sp = Split()
    with split_timer(sp):
        t = time.perf_counter()
        plan = schedule(p, mode="efficient", options=opts)
        total = time.perf_counter() - t
    steps = sum(sp.t.values())
    return {"total": total, "heur": total - steps, **sp.t, "solve_wall": sp.solve_wall,
            "dtime": sp.solve_dtime, "solves": sp.solves, "stats": plan.stats,
            "bundles": int(p.gang_ptr[-1]) if p.G else 0}


def _opts(budget: str) -> EfficientOptions:
    if budget == "none":
        return EfficientOptions(tick_budget_s=None)
    if budget == "heur":
        return EfficientOptions(gang_cpsat_bundles=0)
    if budget == "default":
        return EfficientOptions()
    return EfficientOptions(tick_budget_s=float(budget))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="heur,none,default,0.25",
                    help="comma list: heur (no CP-SAT), none, default, or seconds")
    ap.add_argument("--kind", default="ganggen,v2")
    ap.add_argument("--bundles", default="25,50,100,200", help="gang_tick's bundles")
    ap.add_argument("--groups", default="5,10,25,40", help="cluster_v2's groups")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=1, help="timed runs per tick (median)")
    args = ap.parse_args(argv)
    for kind in args.kind.split(","):
        sizes = [int(x) for x in (args.bundles if kind == "ganggen" else args.groups).split(",")]
        for label, p in problems(kind, sizes, args.seeds, args.nodes):
            schedule(p, mode="efficient", options=EfficientOptions(gang_cpsat_bundles=0))
            for b in args.budgets.split(","):
                opts = _opts(b)
                runs = [measure(p, opts) for _ in range(args.repeat)]
                r = runs[int(np.argsort([x["total"] for x in runs])[len(runs) // 2])]
                st = r["stats"]
                steps = "".join(c if k in st else "." for c, k in
                                (("B", "gang_bound_met"), ("C", "gang_cpsat"),
                                 ("c", "gang_cpsat_better"), ("L", "gang_lns_better")))
                ratio = r["solve_wall"] / r["dtime"] if r["dtime"] > 0 else float("nan")
                print(f"{label:18s} nb={r['bundles']:4d} {b:8s} total {r['total']:.3f} s  "
                      f"heur {r['heur']:.3f}  bound {r['bound']:.3f}  cpsat {r['cpsat']:.3f}  "
                      f"lns {r['lns']:.3f}  solves {r['solves']:3d} dtime {r['dtime']:.3f} "
                      f"wall {r['solve_wall']:.3f} (x{ratio:.2f})  guard "
                      f"{st.get('budget_guard', 0)} steps {steps}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
