"""What each heuristic gang pass finds, and what ``gang_pass_work`` leaves out
(docs/efficient.md, "Pass work").

    .venv/bin/python -m bench.gang_passes                               # the default grid
    .venv/bin/python -m bench.gang_passes --nodes 1000 --groups 700,1000 --seeds 10-13
    .venv/bin/python -m bench.gang_passes --json passes.jsonl

On seeded ``cluster_v2`` ticks (saturated), every one of the five passes of
``engine/efficient/gang_place.py`` is run (``gang_pass_work`` unlimited) and its key
recorded after ``improve``: bundles left unplaced, launch price. Then the tick is run
again with the default options and the passes that ran are recorded: whether their best
equals the best of five (else how much more it costs, or how many more bundles it leaves
unplaced). A pass's work units are the tick's placement-group units (``gang_batch``: a
STRICT_PACK group that goes on one node is one unit), fewer than its bundles. The
pending plain demand follows the nodes as in ``bench/compare_ray.py`` (1k nodes: 1k
units, 3k: 10k, 10k: 100k). Deterministic: the figures do not depend on the machine.
"""
from __future__ import annotations

import argparse
import json
import sys

from bench.benchmarks import common
from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient import gang_place

UNITS = {1000: 1000, 3000: 10000, 10000: 100000}


def _ints(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi) + 1)) if hi else [int(lo)]
    return out


def record(nodes: int, groups: int, seed: int) -> dict:
    """Every pass's (unplaced bundles, launch price) on one tick, by index in PASSES
    (all five run), and the passes the default options run on it."""
    keys: dict = {}
    ran: list = []
    real_pass, real_improve = gang_place._pass, gang_place.improve
    current = []

    def each_pass(st, costs, opts, batches, order, how, tight):
        bad, place = real_pass(st, costs, opts, batches, order, how, tight)
        largest = list(order) == gang_place.gang_order(st.p, costs, True)
        v = gang_place.PASSES.index((how, largest, tight))
        ran.append(v)
        current[:] = [v, gang_place._unplaced(st.p, bad)]
        return bad, place

    def each_improve(st, costs, batches, place, base=None):
        out = real_improve(st, costs, batches, place, base)
        v, unplaced = current
        keys[v] = (unplaced, gang_place._placed_price(costs, out))
        return out
    gang_place._pass, gang_place.improve = each_pass, each_improve
    try:
        spec = common.cluster_v2(nodes=nodes, units=UNITS.get(nodes, nodes), seed=seed,
                                 gangs=groups)
        p = common.engine_problem(spec)
        schedule(p, mode="efficient", options=EfficientOptions(gang_pass_work=10 ** 12,
                                                               gang_cpsat_bundles=0))
        ran.clear()
        schedule(p, mode="efficient", options=EfficientOptions(gang_cpsat_bundles=0))
    finally:
        gang_place._pass, gang_place.improve = real_pass, real_improve
    units = int(sum(gang_place.gang_batch(p, g)[2].sum() for g in range(p.G)))
    return {"nodes": nodes, "groups": groups, "seed": seed, "bundles": int(p.gang_ptr[-1]),
            "units": units, "keys": {str(v): list(k) for v, k in sorted(keys.items())},
            "passes_run": list(ran)}


def verdict(row: dict) -> str:
    keys = {int(v): tuple(k) for v, k in row["keys"].items()}
    best = min((k, v) for v, k in keys.items())[0]
    got = min(keys[v] for v in row["passes_run"])
    if got == best:
        return "same"
    if got[0] > best[0]:
        return f"{got[0] - best[0]} more unplaced"
    return f"+{(got[1] - best[1]) / best[1] * 100:.2f} % price"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", default="1000,10000", help="comma list (1000, 3000, 10000)")
    ap.add_argument("--groups", default="50,100,200,500,1000")
    ap.add_argument("--seeds", default="0-3", help="e.g. 0-3 or 4,5")
    ap.add_argument("--json", metavar="PATH", help="append one JSON line per tick")
    a = ap.parse_args(argv)
    skipped, worse = 0, []
    print("| nodes | groups | seed | bundles | work units a pass | passes run (PASSES index) "
          "| best of five (unplaced, price) | default |")
    print("|---|---|---|---|---|---|---|---|")
    for n in _ints(a.nodes):
        for g in _ints(a.groups):
            for s in _ints(a.seeds):
                row = record(n, g, s)
                ran = row["passes_run"]
                v = verdict(row)
                skipped += len(ran) < len(gang_place.PASSES)
                if v != "same":
                    worse.append(v)
                best = min(tuple(k) for k in row["keys"].values())
                print(f"| {n} | {g} | {s} | {row['bundles']} | {row['units']} | {ran} | {best} "
                      f"| {v} |", flush=True)
                if a.json:
                    with open(a.json, "a") as f:
                        f.write(json.dumps(dict(row, verdict=v)) + "\n")
    print(f"\nticks where the default skips passes: {skipped}; of them worse than the best "
          f"of five: {len(worse)} {worse}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
