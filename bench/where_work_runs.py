"""Where each scheduler's nodes and work went, beside the trace's lower bound: why a
workload costs what it does above its limit (``docs/suite.md``, services).

    .venv/bin/python -m bench.where_work_runs services --schedulers engine,baseline,efficient
    .venv/bin/python -m bench.where_work_runs services_daily --compress 12 --seed 1

For one bundled trace, replayed whole (``--compress``: arrivals and durations that many
times shorter), per scheduler:

- node-hours per worker group, against the cost LP's optimal mix integrated over the
  replay (``CoverBound.lp_mix``: where the limit puts its capacity);
- unit-hours per (worker group, kind of unit): CPU-only, GPU units naming a model (by
  model) and GPU units naming none, sampled at every tick (5 s) over the nodes up: which
  work ended up on the nodes launched for which (the raylets place; the autoscaler only
  launches and terminates);
- the free GPU share of each GPU group's node-hours.

Prints one block per scheduler; ``--json`` writes the figures.
"""
from __future__ import annotations

import argparse
import collections
import json

import numpy as np

from vecsched.adapters.replay import Replay, ReplayConfig, Window, load, make
from vecsched.adapters.replay.bounds import CoverBound
from vecsched.adapters.replay.cluster import SCALE


class _Where:
    """``Replay.run``'s progress callback: unit-hours per (group, kind), GPU-hours up
    and used per group."""

    def __init__(self, replay):
        self.r = replay
        cols = replay.trace.columns
        self.models = [(replay.cluster.col[c], c.split(":", 1)[1]) for c in cols
                       if c.startswith("accelerator_type:")]
        self.units = collections.Counter()
        self.gpu = collections.Counter()

    def kind(self, fp, g) -> str:
        if g is None or fp[g] == 0:
            return "CPU-only"
        named = [m for j, m in self.models if fp[j] > 0]
        return f"GPU {named[0]}" if named else "GPU unnamed"

    def __call__(self, done: int, total: int) -> None:
        c, h = self.r.cluster, self.r.cfg.tick_s / 3600.0
        g = c.col.get("GPU")
        for i in np.flatnonzero(c.alive):
            t = c.types[i]
            for u in c.running[i]:
                self.units[(t, self.kind(c.shape_fp[c.unit_shape[u]], g))] += h
            if g is not None and c.total[i, g] > 0:
                self.gpu[(t, "up")] += c.total[i, g] / SCALE * h
                self.gpu[(t, "used")] += c.used[i, g] / SCALE * h


def run(trace, name: str, seed: int) -> dict:
    replay = Replay(trace, make(name), ReplayConfig(seed=seed))
    where = _Where(replay)
    m = replay.run(where).metrics
    groups = sorted({t for t, _ in where.units} | set(m["node_hours_by_type"]))
    return {"cost": m["cost"], "cost_lower_bound": m["cost_lower_bound"],
            "node_hours": {t: m["node_hours_by_type"].get(t, 0.0) for t in groups},
            "unit_hours": {f"{t} / {k}": v for (t, k), v in sorted(where.units.items())},
            "gpu_free_share": {t: 1 - where.gpu[(t, "used")] / where.gpu[(t, "up")]
                               for t in groups if where.gpu[(t, "up")] > 0}}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("trace", help="a bundled trace, replayed whole")
    ap.add_argument("--schedulers", default="engine,baseline,efficient")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--compress", type=float, default=1.0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    from vecsched.engine import warmup
    warmup()
    trace = load(a.trace, None, Window(start=0, pods=None, compress=a.compress,
                                       arrival_scale=1.0))
    cfg = ReplayConfig(seed=a.seed)
    last = float(trace.arrival_s[-1]) if trace.n_units else 0.0
    end = int(np.ceil((last + cfg.tail_s) / cfg.tick_s)) * cfg.tick_s
    out = {"lp_node_hours": CoverBound.of(trace, cfg.tick_s, end).lp_mix()}
    print("the cost LP's node-hours by group: " + ", ".join(
        f"{t} {v:.1f}" for t, v in out["lp_node_hours"].items()))
    for name in a.schedulers.split(","):
        r = out[name] = run(trace, name, a.seed)
        print(f"{name}: cost {r['cost']:.1f} (bound {r['cost_lower_bound']:.1f})")
        print("  node-hours: " + ", ".join(f"{t} {v:.1f}" for t, v in r["node_hours"].items()))
        print("  unit-hours: " + ", ".join(f"{k} {v:.1f}" for k, v in r["unit_hours"].items()))
        print("  free GPU share: " + ", ".join(f"{t} {v:.2f}"
                                              for t, v in r["gpu_free_share"].items()))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
