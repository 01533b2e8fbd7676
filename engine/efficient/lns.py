"""Large-neighbourhood search over a packing of the tick's placement groups.

The packing of every gang at once (best pass, then CP-SAT within its budget) can
leave a node or two too many on large ticks: one solve over 200 bundles runs out
of work before it finds the optimum. Here the packing is improved a few gangs at
a time: a *neighbourhood* is the gangs on a few of the least-filled new nodes
(three consecutive in order of fill, then two, then one; once all are tried, four
to six);
everything else stays where it is (its new nodes are launched, so their room left
is free to the neighbourhood), and CP-SAT re-packs just those gangs, hinted with
where they are now, within a small work limit. The new packing is kept when its
new nodes cost strictly less; then the next neighbourhood. Every step is
deterministic (fixed order, one worker, deterministic-time limits).

A packing is a list of (gang, item, slot, units, slot type) where a new node's
slot is a ``("new", j)`` key (``gangs.py``); ``batches[g]`` gives gang g's items.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.kernels.eff_items import add_items
from vecsched.engine.solver.instance import EXISTING, NEW, build_slot_instance
from .budget import Allowance, model_cells
from .cost import Costs
from .state import State


def improve_lns(st: State, costs: Costs, batches, place: list, *, nodes: int = 3,
                dtime: float = 0.2, budget: float = 1.0, max_bundles: int = 80,
                guard=None, allowance: Allowance | None = None) -> list:
    """A packing no dearer than ``place`` (the same gangs placed). ``st`` is the
    state before any gang is placed and is left so. ``nodes``: new nodes per
    neighbourhood; ``dtime``: work limit per re-pack; ``budget``: total work
    (deterministic seconds); ``allowance``: the tick budget's (``budget.Allowance``:
    each re-pack is charged its model size and work, and the search stops, anytime,
    when the next one cannot be afforded); ``guard``: the tick's wall-clock guard
    (``budget.Guard``), which stops the search likewise when the tick's wall time
    is spent."""
    from vecsched.engine.solver.cpsat import solve
    allow = allowance if allowance is not None else Allowance(None)
    spent = 0.0
    tried: set = set()
    while spent < budget and allow.left > 0 and not (guard is not None and guard.spent()):
        hood = _next_hood(st, costs, batches, place, nodes, max_bundles, tried)
        if hood is None:
            return place
        tried.add(hood)
        snap = st.snapshot()
        try:
            fixed = [pl for pl in place if pl[0] not in hood]
            key_of = commit_keys(st, batches, fixed)
            gangs = np.asarray(sorted(hood), np.int64)
            M = st.M
            alive = np.flatnonzero(st.alive[:M])
            inst = build_slot_instance(st.p, gangs, (st.free[:M], st.labels_of(M), st.type[:M],
                                                     alive), st.type_room, st.global_room,
                                       costs.price)
            offset = {}
            at = 0
            for g in gangs.tolist():
                offset[g] = at
                at += len(batches[g][0])
            if at != inst.I:
                continue
            moved = [pl for pl in place if pl[0] in hood]
            cells = model_cells(inst)
            limit = allow.limit(cells, min(dtime, budget))
            if limit <= 0:
                allow.refuse()
                return place            # the next re-pack cannot be afforded
            hint = hint_of(inst, moved, offset, key_of)
            res = solve(inst, hint=hint, deterministic_limit=limit,
                        time_limit_s=guard.remaining() if guard is not None else None)
            allow.charge(cells, float(res.deterministic_s))
            if guard is not None:
                guard.cut(res.status)
            spent += max(float(res.deterministic_s), 1e-3)
            if not res.feasible or not bool(np.all(res.placed_gangs)):
                continue
            old = _new_price(costs, moved, key_of)
            new = float(sum(costs.price[t] * n for t, n in enumerate(res.launches.tolist())))
            if new >= old - 1e-9:
                continue
            fresh = 1 + max([k[1] for _, _, k, _, _ in place if isinstance(k, tuple)] + [-1])
            place = fixed + _read_back(st, inst, res, gangs, offset, key_of, fresh)
            tried.clear()               # the packing changed: every hood is new again
        finally:
            st.restore(snap)
    return place


def _fill(costs: Costs, p, batches, place: list) -> dict:
    """Per new-node key: (normalised size of what it holds / of its type, type)."""
    held: dict = {}
    for g, i, slot, n, t in place:
        if isinstance(slot, tuple):
            s, _ = held.get(slot, (0.0, t))
            held[slot] = (s + n * float(costs.size(batches[g][1][i])[0]), t)
    return {k: (s / max(float(costs.size(p.type_free[t])[0]), 1e-12), t)
            for k, (s, t) in held.items()}


def _next_hood(st, costs, batches, place, nodes: int, max_bundles: int, tried: set):
    """The first untried neighbourhood: the gangs on ``nodes`` consecutive new nodes
    in order of fill (least first, dearer first on ties, then key)."""
    fill = _fill(costs, st.p, batches, place)
    order = sorted(fill, key=lambda k: (fill[k][0], -costs.price[fill[k][1]], k[1]))
    on: dict = {}
    for g, i, slot, n, t in place:
        on.setdefault(slot, set()).add(g)
    # narrow first (cheap solves), then wider once every narrow one is tried
    for w in sorted({nodes, 2, 1}, reverse=True) + [nodes + 1, nodes + 2, nodes + 3]:
        cap = max_bundles if w <= nodes else max_bundles * w // nodes
        for a in range(len(order)):
            keys = order[a:a + w]
            if len(keys) < w:
                break
            hood = frozenset().union(*(on[k] for k in keys))
            size = sum(int(batches[g][2].sum()) for g in hood)
            if hood and size <= cap and hood not in tried:
                return hood
    return None


def commit_keys(st: State, batches, place: list) -> dict:
    """Launch and place ``place`` on ``st``; returns new-node key -> slot. New nodes
    are launched in order of first use; the rows every placement changes are
    journaled once, before any of them changes, so a restore undoes it all (as one
    ``place._put`` per placement would); the room and labels are then changed in
    one kernel call, placement by placement (``eff_items.add_items``)."""
    p = st.p
    new: dict = {}                  # new-node key -> its type, in order of first use
    for _, _, slot, _, t in place:
        if isinstance(slot, tuple) and slot not in new:
            new[slot] = t
    slot_of: dict = {}
    keys, types = list(new), list(new.values())
    j = 0
    while j < len(keys):            # a run of one type is launched at once (same slots)
        k = j + 1
        while k < len(keys) and types[k] == types[j]:
            k += 1
        first = st.launch_many(types[j], k - j)
        slot_of.update(zip(keys[j:k], range(first, first + k - j)))
        j = k
    P = len(place)
    if not P:
        return slot_of
    slots = np.fromiter((slot_of[x[2]] if isinstance(x[2], tuple) else x[2] for x in place),
                        np.int64, P)
    qty = np.asarray([batches[g][1][i] for g, i, _, _, _ in place], np.float64).reshape(P, p.R)
    anti = st.anti_arr[np.fromiter((batches[g][0][i] for g, i, _, _, _ in place), np.int64, P)]
    st.keep_rows(np.unique(slots), 0)
    add_items(st.free, st.label, slots, qty, np.fromiter((x[3] for x in place), np.int64, P),
              np.ascontiguousarray(anti[:, 0], np.int64), np.ascontiguousarray(anti[:, 1], np.int64))
    st.received[slots] = True
    return slot_of


def _new_price(costs: Costs, moved: list, key_of: dict) -> float:
    """What the moved gangs' own new nodes cost (nodes the fixed part shares stay)."""
    own = {slot: t for _, _, slot, _, t in moved if isinstance(slot, tuple) and slot not in key_of}
    return float(sum(costs.price[t] for t in own.values()))


def hint_of(inst, place: list, offset, key_of: dict | None = None):
    """A packing as a model assignment (item ``offset[g] + i``), or None. New-node
    keys in ``key_of`` were launched (they are existing bins now); bins of a class
    are interchangeable, so they are numbered in order of use."""
    key_of = key_of or {}
    cls_of = {}
    for k in np.flatnonzero(inst.kind == EXISTING).tolist():
        for n in inst.nodes[k].tolist():
            cls_of[n] = k
    new_k = {int(inst.ctype[k]): k for k in np.flatnonzero(inst.kind == NEW).tolist()}
    nxt: dict = {}
    where: dict = {}
    out = []
    for g, i, slot, n, t in place:
        real = key_of.get(slot, slot) if isinstance(slot, tuple) else slot
        if real not in where:
            k = cls_of.get(real) if not isinstance(real, tuple) else None
            if k is None:
                k = new_k.get(t)
            if k is None:
                return None
            where[real] = (k, nxt.get(k, 0))
            nxt[k] = nxt.get(k, 0) + 1
        k, j = where[real]
        if j >= inst.bins[k]:
            return None
        out.append((int(offset[g]) + i, k, j, n))
    return np.asarray(out, np.int64).reshape(-1, 4)


def _read_back(st: State, inst, res, gangs, offset: dict, key_of: dict,
               fresh: int) -> list:
    """The solve's placements as packing rows: existing slots (and the fixed part's
    new nodes, by their keys) stay; its launches get fresh new-node keys."""
    key_back = {slot: key for key, slot in key_of.items()}
    starts = np.asarray([offset[g] for g in gangs.tolist()], np.int64)
    new_key: dict = {}
    out = []
    for i, k, j, n in res.assignment.tolist():
        gi = int(np.searchsorted(starts, i, side="right") - 1)
        g = int(gangs[gi])
        if inst.kind[k] == EXISTING:
            slot = int(inst.nodes[k][j])
            t = int(st.type[slot])
            slot = key_back.get(slot, slot)
        else:
            t = int(inst.ctype[k])
            if (k, j) not in new_key:
                new_key[k, j] = ("new", fresh + len(new_key))
            slot = new_key[k, j]
        out.append((g, i - offset[g], slot, n, t))
    return out
