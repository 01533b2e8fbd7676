"""Where a replay's cost and GPU-hours go, beside the trace's lower bound
(``bounds.py``): the split ``bench/replay_efficient.py --split`` made for GPU-hours,
for cost too, for any workload.

``Excess(replay)`` is a ``Replay.run`` progress callback; after the run,
``split(metrics)`` gives, for GPU-hours and for cost:

- **booting**: from ALLOCATED to the ray node joining (RAY_RUNNING), or to the end of
  the record if it never joined (cancelled while booting); exact, from the records;
- **up while arriving** / **up in the tail**: the nodes the cluster holds (RAY_RUNNING
  and draining), sampled at every tick, up to the last arrival / after it (the tail,
  when nothing new arrives and the nodes stay up for their last units); for GPU-hours
  also what running units held of them (**used**), so free = up - used;
- **rest**: what is left of the metric: nodes that left ray waiting for the cloud to
  terminate them, and the sampling's rounding;
- **bound share while arriving**: how the lower bound (``cost_lower_bound``,
  ``gpu_hours_lower_bound``) is shared between the two periods: as the trace's covering
  LP is (its per-tick optimum summed on each side of the last arrival);
- ``excess_parts``: metric / bound - 1, and its parts as shares of the bound: booting,
  up while arriving less the bound there, up in the tail less the bound there, rest
  (they sum to the excess).
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.dtypes import Status as S

from .bounds import CoverBound
from .cluster import SCALE

_PARTS = ("up while arriving", "up in the tail", "used while arriving", "used in the tail")


class Excess:
    """The progress callback of ``Replay.run`` (module docstring)."""

    def __init__(self, replay):
        self.r = replay
        self.last = float(replay.trace.arrival_s[-1]) if replay.trace.n_units else 0.0
        prices = replay.trace.prices
        types = replay.trace.types
        self.price = {t.name: float(prices[t.name]) if prices.get(t.name) is not None else 0.0
                      for t in types}
        self.gpus = {t.name: float(t.resources.get("GPU", 0.0)) for t in types}
        self.acc = {"gpu": dict.fromkeys(_PARTS, 0.0), "cost": dict.fromkeys(_PARTS[:2], 0.0)}

    def __call__(self, done: int, total: int) -> None:
        c, dt = self.r.cluster, self.r.cfg.tick_s
        if not len(c.total):
            return
        part = "in the tail" if (done - 1) * dt > self.last else "while arriving"
        h = dt / 3600.0
        on = np.flatnonzero(c.alive)
        self.acc["cost"]["up " + part] += sum(self.price[c.types[i]] for i in on) * h
        g = c.col.get("GPU")
        if g is None:
            return
        self.acc["gpu"]["up " + part] += float(c.total[on, g].sum()) / SCALE * h
        self.acc["gpu"]["used " + part] += float(c.used[on, g].sum()) / SCALE * h

    def _booting(self) -> dict:
        end = (len(self.r.metrics.tick_s) - 1) * self.r.cfg.tick_s * 1e9
        out = {"gpu": 0.0, "cost": 0.0}
        for rec in self.r.store:
            alloc = rec.times_ns(S.ALLOCATED)
            if not alloc:
                continue
            joined = rec.entered_ns(S.RAY_RUNNING)
            stop = rec.times_ns(S.TERMINATED)
            upto = min(x for x in (joined, min(stop) if stop else None, end) if x is not None)
            hours = max(0.0, upto - min(alloc)) / 3.6e12
            out["gpu"] += self.gpus[rec.instance_type] * hours
            out["cost"] += self.price[rec.instance_type] * hours
        return out

    def split(self, metrics: dict) -> dict:
        """{"gpu_hours": parts, "cost": parts} (module docstring, without the bound: a
        caller may share one bound between runs, ``excess_parts``); cost is None
        without prices."""
        booting = self._booting()
        end = (len(self.r.metrics.tick_s) - 1) * self.r.cfg.tick_s
        lp = CoverBound.of(self.r.trace, self.r.cfg.tick_s, end).lp_by_period(self.last)
        out = {}
        for key, what in (("gpu_hours", "gpu"), ("cost", "cost")):
            total = metrics[key]
            if total is None:
                out[key] = None
                continue
            acc = self.acc[what]
            parts = {"booting": booting[what], "up while arriving": acc["up while arriving"],
                     "up in the tail": acc["up in the tail"]}
            if what == "gpu":
                parts["used while arriving"] = acc["used while arriving"]
                parts["used in the tail"] = acc["used in the tail"]
            parts["rest"] = total - parts["booting"] - parts["up while arriving"] \
                - parts["up in the tail"]
            arriving, tail = lp[what]
            parts["bound share while arriving"] = (arriving / (arriving + tail)
                                                   if arriving + tail > 0 else 1.0)
            out[key] = parts
        return out


def excess_parts(parts: dict, total: float, bound: float) -> dict:
    """The excess over ``bound`` (total / bound - 1) and its parts, as shares of the
    bound: booting, up while arriving less the bound there, up in the tail less the
    bound there, rest (module docstring); {} without a bound."""
    if not parts or not bound:
        return {}
    share = parts["bound share while arriving"]
    return {"excess": total / bound - 1,
            "booting": parts["booting"] / bound,
            "while arriving": (parts["up while arriving"] - bound * share) / bound,
            "in the tail": (parts["up in the tail"] - bound * (1 - share)) / bound,
            "rest": parts["rest"] / bound}
