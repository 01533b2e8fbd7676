"""The reserve: room for one more unit of each kind of demand that is waiting.

Demand reaches the autoscaler only when the cluster had no room for it. A bundle
that is pending at a tick is arriving faster than the cluster frees room for it,
and if the plan launches exactly what is pending, the next unit of it to arrive
finds no room and waits for a whole node boot (about 90 s on the replay's cloud),
while a few ticks would have done. Ray leaves such room by accident (its packing
strands capacity on half-empty nodes); the efficient mode packs tightly, so it
keeps it on purpose, and only for what is waiting now: after the tick's real
demand is placed, one more unit of each pending plain bundle goes on the room
that is left, existing nodes first, then new ones, by the same packing.

Those units are not in the plan (no unit is behind them): what they change is
that the nodes holding them are kept (neither idle-terminated nor cancelled) and
that, where no node has the room, one is launched.

Which bundles: demand rows with no label selector, no anti-affinity and no
per-node cap (implicit slot). A capped bundle is a replica of a deployment
(a Ray Serve cap, ``max_replicas_per_node``), and replicas come in bursts that a
tick already sees whole; room for one more of them is seldom used and is paid for
over a whole boot (measured on the suite's services workload: with capped
bundles reserved too, cost 2-3 % above the better of Ray's and FFD's; without,
below both). Gang bundles and the ``request_resources()`` constraint are not
demand that waits here.

On by default (``EfficientOptions.reserve``; ``reserve=False`` turns it off).
Measured on the workload suite, seeds 0-3 (docs/suite.md): with it every target of
the efficient mode holds on 31 of 36 cells, without it on 20 (the misses without it were
pending p50 and p95). The reserve is paid in node-hours: on the services workload,
where the efficient mode's cost is within 0.5 % of FFD's without it, seeds 1-3 end
0.4-1.4 % above FFD's cost. On one tick in isolation it is dearer by
design (room nobody asked for yet), so single-tick quality is judged without it.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.problem import Problem


def reserve_shapes(p: Problem) -> np.ndarray:
    """Demand rows to keep room for one more unit of: pending, no label selector,
    no anti-affinity, no per-node cap (module docstring)."""
    s = np.flatnonzero(np.asarray(p.shape_count) > 0)
    if not s.size:
        return s.astype(np.int64)
    req = p.req
    plain = (req.sel_ptr[s + 1] <= req.sel_ptr[s]) & (req.anti[s, 0] < 0)
    implicit = np.asarray(p.implicit, bool)
    if implicit.any():
        plain &= ~(p.shape_qty[s][:, implicit] > 0).any(axis=1)
    return s[plain].astype(np.int64)


def place_reserve(st, costs, opts) -> int:
    """One more unit of each ``reserve_shapes`` row on the tick's remaining room
    (existing nodes, then new ones); the placements are dropped, the nodes they
    went on are marked as receiving demand. Returns the units that found or made
    room."""
    from .place import Chunks, place_batch
    p = st.p
    rows = reserve_shapes(p)
    if not rows.size:
        return 0
    left = place_batch(st, costs, rows, p.shape_qty[rows], np.ones(rows.size, np.int64), 0,
                       opts.keep_gpu_for_gpu, opts.fill_credit, Chunks())
    return int(rows.size - left.sum())
