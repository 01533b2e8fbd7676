"""Plan fingerprints of the efficient mode on seeded placement-group problems, to
check that a rewrite of its gang path (a speed-up, a refactor) plans exactly as before.

    .venv/bin/python -m bench.gang_equivalence record bench/gang_equivalence.json
    .venv/bin/python -m bench.gang_equivalence check bench/gang_equivalence.json
    .venv/bin/python -m bench.gang_equivalence check FILE --only heuristic   # one option set

Problems: ``cluster_v2`` with placement groups (200-1,000 nodes, several seeds),
``tests/kits/ganggen.py`` gang ticks (50 and 200 bundles, the efficient tests'
problems) and ``tests/kits/raygen.py`` states with groups (selectors, every strategy,
constraints, pending and outdated nodes). Each is planned with two fixed option sets:
``default`` (``EfficientOptions()``: CP-SAT and the neighbourhood search) and
``heuristic`` (``gang_cpsat_bundles=0``: the passes and ``improve.py`` alone). A plan's
fingerprint is the sha256 of every Plan array, the gang placements and the
infeasible groups. ``check`` prints each problem whose fingerprint differs and the
stats of both, and exits 1 when any does. It runs with ``PYTHONHASHSEED=0`` (it
re-executes itself so): when it was written the model numbered resource columns in the
order a request's protobuf maps listed them, which follows the string hash; they are in
name order now (tests/adapters/ray/test_column_order.py), and the seed is kept so the
recorded fingerprints stay comparable.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions

PLAN_ARRAYS = ("launch", "term_node", "term_cause", "term_value", "term_status", "infeasible",
               "infeasible_why", "run_order", "place_slot", "place_run", "place_count",
               "new_type", "cluster_resources", "gang_infeasible")

OPTION_SETS = {"default": {}, "heuristic": {"gang_cpsat_bundles": 0}}


def problems():
    """(name, Problem) pairs, in a fixed order."""
    from bench.benchmarks.common import cached_problem_v2
    from tests.kits.ganggen import gang_tick
    for nodes, units, gangs, seeds in ((200, 1000, 50, (0, 1, 2)), (500, 2000, 100, (0, 1)),
                                       (1000, 1000, 50, (0, 1))):
        for seed in seeds:
            yield (f"cluster_v2-{nodes}-{units}-{gangs}-s{seed}",
                   cached_problem_v2(nodes=nodes, units=units, shapes=20, gangs=gangs, seed=seed))
    for seed in range(4):
        yield f"gang_tick-50-s{seed}", gang_tick(seed, bundles=50)
    yield "gang_tick-200-s1", gang_tick(1, bundles=200)
    from vecsched.adapters.ray.codec import decode
    from tests.kits.raygen import make_request
    for seed in range(60):
        p = decode(make_request(seed)).problem
        if p.G:
            yield f"raygen-s{seed}", p


def fingerprint(plan, p) -> str:
    """sha256 of the plan's arrays; ``cluster_resources`` as its sorted values: on
    raygen problems its column order was seen to depend on the process's history
    (seed 44: two columns swapped between runs of main's own code, the problem's
    ``resources`` the same), which is not the gang path's doing."""
    h = hashlib.sha256()
    for name in PLAN_ARRAYS:
        a = getattr(plan, name)
        if name == "cluster_resources":
            a = np.sort(a)
        a = np.ascontiguousarray(a)
        h.update(name.encode() + str(a.dtype).encode() + str(a.shape).encode() + a.tobytes())
    gp = np.ascontiguousarray(plan.stats.get("gang_place", np.zeros((0, 3), np.int64)))
    h.update(b"gang_place" + gp.tobytes())
    return h.hexdigest()[:20]


def run(only=None) -> dict:
    out = {}
    for name, p in problems():
        for oname, kw in OPTION_SETS.items():
            if only and oname != only:
                continue
            t = time.perf_counter()
            plan = schedule(p, mode="efficient", options=EfficientOptions(**kw))
            secs = time.perf_counter() - t
            stats = {k: v for k, v in plan.stats.items() if k.startswith("gang_") and
                     k != "gang_place"}
            out[f"{name}/{oname}"] = {"fp": fingerprint(plan, p), "stats": stats,
                                      "secs": round(secs, 3)}
            print(f"{name}/{oname}: {out[f'{name}/{oname}']['fp']} {secs:.3f} s {stats}",
                  flush=True)
    return out


def main(argv=None) -> int:
    if os.environ.get("PYTHONHASHSEED") != "0":
        # the Ray codec's resource column order follows string hashing: pin it, so
        # that the raygen problems (and so their plans' bytes) are the same each run
        os.environ["PYTHONHASHSEED"] = "0"
        os.execv(sys.executable, [sys.executable, "-m", "bench.gang_equivalence"] +
                 list(sys.argv[1:] if argv is None else argv))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("record", "check"))
    ap.add_argument("file")
    ap.add_argument("--only", choices=tuple(OPTION_SETS), default=None)
    args = ap.parse_args(argv)
    got = run(args.only)
    if args.what == "record":
        with open(args.file, "w") as f:
            json.dump(got, f, indent=1, sort_keys=True)
        return 0
    with open(args.file) as f:
        want = json.load(f)
    bad = [k for k in got if k in want and want[k]["fp"] != got[k]["fp"]]
    for k in bad:
        print(f"DIFFERS {k}: was {want[k]['stats']}, now {got[k]['stats']}")
    print(f"{len(got) - len(bad)} of {len(got)} plans identical; "
          f"time {sum(v['secs'] for v in got.values()):.1f} s now, "
          f"{sum(want[k]['secs'] for k in got if k in want):.1f} s recorded")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
