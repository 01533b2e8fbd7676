"""Placement groups in the first-fit-decreasing baseline (``baseline.py``).

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

import numpy as np

from vecsched.engine.model.dtypes import IDX, QTY
from vecsched.engine.model.fits import selector_mask
from vecsched.engine.model.problem import Problem

_FIT_SLACK = 1e-12


def _holds(free: np.ndarray, qty: np.ndarray) -> np.ndarray:
    """(M,) bool: rows of free (M, R) that hold one unit of qty (R,), with the slack
    ``baseline._fit`` counts with (0.3 / 0.1 holds 3 units)."""
    pos = qty > 0
    if not pos.any():
        return np.ones(free.shape[0], bool)
    return (free[:, pos] / qty[pos]).min(axis=1) * (1.0 + _FIT_SLACK) >= 1.0


def gang_order(p: Problem) -> np.ndarray:
    """(G,) i4 gangs in Ray's order: ``gang_key`` descending, ties in input order."""
    G = p.G
    if G == 0:
        return np.zeros(0, IDX)
    return np.lexsort((np.arange(G), -p.gang_key[:, 1], -p.gang_key[:, 0])).astype(IDX)


def pack_gangs(p: Problem, free: np.ndarray, alive: np.ndarray, new, cap: np.ndarray,
               configured: np.ndarray, type_left: np.ndarray, global_left: int
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Pack every gang (see the module docstring), updating ``free`` (existing nodes),
    ``new`` (the baseline's opened nodes) and ``type_left`` in place.

    Returns (infeasible (G,) bool, order (G,) i4, received (N,) bool: existing nodes that
    got a bundle, global_left)."""
    order = gang_order(p)
    infeasible = np.zeros(p.G, bool)
    received = np.zeros(p.N, bool)
    req = p.req
    for g in order:
        rows = p.gang_req[p.gang_ptr[g]:p.gang_ptr[g + 1]]
        qty = req.qty[rows].astype(QTY)
        aff = req.aff[rows, 0] >= 0
        anti = req.anti[rows, 0] >= 0
        old_ok = [selector_mask(p, int(q), p.node_label) for q in rows.tolist()]
        type_ok = [selector_mask(p, int(q), p.type_label) for q in rows.tolist()]
        if rows.size and aff.all():
            qty, spread = qty.sum(axis=0, keepdims=True), None
            old_ok = [np.logical_and.reduce(old_ok)]
            type_ok = [np.logical_and.reduce(type_ok)]
        elif rows.size and anti.all():
            key, val = int(req.anti[rows[0], 0]), int(req.anti[rows[0], 1])
            spread = (p.node_label[:, key] == val) if key < p.node_label.shape[1] else \
                np.zeros(p.N, bool)
        else:
            spread = None
        got = _try(qty, old_ok, type_ok, spread, free, alive, new.free, np.asarray(new.types,
                   np.int64), cap, configured, type_left.copy(), global_left)
        if got is None:
            infeasible[g] = True
            continue
        free_after, new_free, opened, type_left[:], global_left = got
        received |= (free_after != free).any(axis=1)
        free[:] = free_after
        n_old = len(new.types)
        new.free = new_free[:n_old]
        for k, t in enumerate(opened):
            new.open(t, new_free[n_old + k:n_old + k + 1])
    return infeasible, order, received, global_left


def _try(qty, old_ok, type_ok, spread, free, alive, new_free, new_types, cap, configured,
         type_left, global_left):
    """Place the bundles (rows of qty) on copies; None if any does not fit. ``old_ok[b]``
    (N,) / ``type_ok[b]`` (T,): where bundle b's label selectors hold."""
    free = free.copy()
    new_free = new_free.copy()
    opened: list[int] = []
    taken_old = np.zeros(free.shape[0], bool) if spread is None else spread.copy()
    taken_new = np.zeros(new_free.shape[0], bool)
    for b in range(qty.shape[0]):
        q = qty[b]
        ok = alive & old_ok[b] & _holds(free, q)
        if spread is not None:
            ok &= ~taken_old
        hit = np.flatnonzero(ok)
        if hit.size:
            n = int(hit[0])
            free[n] = np.maximum(free[n] - q, 0.0)
            taken_old[n] = True
            continue
        ok = type_ok[b][new_types] & _holds(new_free, q)
        if spread is not None:
            ok &= ~taken_new
        hit = np.flatnonzero(ok)
        if hit.size:
            j = int(hit[0])
            new_free[j] = np.maximum(new_free[j] - q, 0.0)
            taken_new[j] = True
            continue
        if global_left == 0:
            return None
        for t in configured:
            if type_left[t] > 0 and type_ok[b][t] and _holds(cap[t:t + 1], q)[0]:
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
