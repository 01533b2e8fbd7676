"""Placement groups in the first-fit-decreasing baseline (``ffd.py``).

The baseline packs every placement group of a tick before the plain runs, as Ray does,
all or nothing, in Ray's gang order (``gang_key`` descending, ties in input order: the
strict groups and the larger ones first). A group is read from its bundles' placement
constraints the way Ray's scheduler reads them: an affinity on every bundle is
STRICT_PACK, an anti-affinity STRICT_SPREAD, none PACK or SPREAD (both packed).

- STRICT_PACK: the summed bundle goes where one unit of a run would (first existing
  node with room, then the first node opened this tick, then a new node of the first
  configured type that holds it).
- STRICT_SPREAD: each bundle goes first-fit to a node holding none of the group yet and
  not labelled with the group's anti-affinity label (the nodes the GCS marks as hosting
  it), existing nodes first, then opened ones, then a new node.
- PACK / SPREAD: each bundle first-fit, existing nodes, then opened ones, then new.

Every bundle goes only where its label selectors hold (on the node's labels, or the
type's for a node opened this tick); a STRICT_PACK group's summed bundle only where
every member's do.

A group that does not fit entirely changes nothing (its tentative new nodes are not
opened) and is reported infeasible.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vecsched.engine.model.dtypes import IDX, QTY
from vecsched.engine.model.fits import selector_mask
from vecsched.engine.model.problem import Problem
from .ffd_runs import FIT_SLACK
from .ffd_tick import FfdTick


def _holds(free: np.ndarray, qty: np.ndarray) -> np.ndarray:
    """(M,) bool: rows of free (M, R) that hold one unit of qty (R,), with the slack
    ``ffd_runs.fit`` counts with (0.3 / 0.1 holds 3 units)."""
    pos = qty > 0
    if not pos.any():
        return np.ones(free.shape[0], bool)
    return (free[:, pos] / qty[pos]).min(axis=1) * (1.0 + FIT_SLACK) >= 1.0


def gang_order(p: Problem) -> np.ndarray:
    """(G,) i4 gangs in Ray's order: ``gang_key`` descending, ties in input order."""
    G = p.G
    if G == 0:
        return np.zeros(0, IDX)
    return np.lexsort((np.arange(G), -p.gang_key[:, 1], -p.gang_key[:, 0])).astype(IDX)


@dataclass(frozen=True)
class _Bundles:
    """A group's bundles as placed: one unit shape per row of ``qty`` (a
    STRICT_PACK group: one summed row); ``old_ok[b]`` (N,) / ``type_ok[b]`` (T,):
    where bundle b's label selectors hold; ``spread``: None, or (N,) the nodes
    already hosting a STRICT_SPREAD group (one bundle per node)."""
    qty: np.ndarray
    old_ok: list
    type_ok: list
    spread: np.ndarray | None


def pack_gangs(tick: FfdTick) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Pack every gang (see the module docstring), updating the tick's free
    resources, opened nodes and budgets in place.

    Returns (infeasible (G,) bool, order (G,) i4, received (N,) bool: existing
    nodes that got a bundle)."""
    p = tick.p
    order = gang_order(p)
    infeasible = np.zeros(p.G, bool)
    received = np.zeros(p.N, bool)
    for g in order:
        got = _try(_bundles_of(p, int(g)), tick)
        if got is None:
            infeasible[g] = True
            continue
        free_after, new_free, opened, tick.type_left[:], tick.global_left = got
        received |= (free_after != tick.free).any(axis=1)
        tick.free[:] = free_after
        n_old = len(tick.new.types)
        tick.new.free = new_free[:n_old]
        for k, t in enumerate(opened):
            tick.new.open(t, new_free[n_old + k:n_old + k + 1])
    return infeasible, order, received


def _bundles_of(p: Problem, g: int) -> _Bundles:
    """Group g's bundles read as Ray's scheduler reads their constraints."""
    req = p.req
    rows = p.gang_req[p.gang_ptr[g]:p.gang_ptr[g + 1]]
    qty = req.qty[rows].astype(QTY)
    aff = req.aff[rows, 0] >= 0
    anti = req.anti[rows, 0] >= 0
    old_ok = [selector_mask(p, int(q), p.node_label) for q in rows.tolist()]
    type_ok = [selector_mask(p, int(q), p.type_label) for q in rows.tolist()]
    if rows.size and aff.all():
        return _Bundles(qty.sum(axis=0, keepdims=True), [np.logical_and.reduce(old_ok)],
                        [np.logical_and.reduce(type_ok)], None)
    spread = None
    if rows.size and anti.all():
        key, val = int(req.anti[rows[0], 0]), int(req.anti[rows[0], 1])
        spread = (p.node_label[:, key] == val) if key < p.node_label.shape[1] else \
            np.zeros(p.N, bool)
    return _Bundles(qty, old_ok, type_ok, spread)


def _try(b: _Bundles, tick: FfdTick):
    """Place the bundles on copies of the tick's free resources, opened nodes and
    budgets; returns (free, opened nodes' free, types opened, type budgets, global
    budget) after them, or None if any bundle does not fit."""
    free = tick.free.copy()
    new_free = tick.new.free.copy()
    new_types = np.asarray(tick.new.types, np.int64)
    type_left, global_left = tick.type_left.copy(), tick.global_left
    cap, alive = tick.cap, tick.alive
    opened: list[int] = []
    taken_old = np.zeros(free.shape[0], bool) if b.spread is None else b.spread.copy()
    taken_new = np.zeros(new_free.shape[0], bool)
    for i in range(b.qty.shape[0]):
        q = b.qty[i]
        ok = alive & b.old_ok[i] & _holds(free, q)
        if b.spread is not None:
            ok &= ~taken_old
        hit = np.flatnonzero(ok)
        if hit.size:
            n = int(hit[0])
            free[n] = np.maximum(free[n] - q, 0.0)
            taken_old[n] = True
            continue
        ok = b.type_ok[i][new_types] & _holds(new_free, q)
        if b.spread is not None:
            ok &= ~taken_new
        hit = np.flatnonzero(ok)
        if hit.size:
            j = int(hit[0])
            new_free[j] = np.maximum(new_free[j] - q, 0.0)
            taken_new[j] = True
            continue
        if global_left == 0:
            return None
        for t in tick.configured:
            if type_left[t] > 0 and b.type_ok[i][t] and _holds(cap[t:t + 1], q)[0]:
                break
        else:
            return None
        type_left[t] -= 1
        global_left -= 1
        opened.append(int(t))
        new_types = np.append(new_types, t)
        new_free = np.concatenate([new_free, np.maximum(cap[t:t + 1] - q, 0.0)])
        taken_new = np.append(taken_new, True)
    return free, new_free, opened, type_left, global_left
