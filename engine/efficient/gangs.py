"""Placement groups in the efficient mode: each all or nothing, best of k.

Order: groups with STRICT_* constraints first (they have the fewest ways to
fit), then the largest (normalised size of their bundles), then input order.

For one group, every packing below is tried on scratch and the cheapest kept
(price of its new nodes, then fewer new nodes, then the earlier packing):

1. bundles largest first, existing nodes first, new nodes scored with the
   mode's ``fill_credit`` (``engine.efficient.pack``);
2. the same with ``fill_credit`` 0 (each new node judged by what the group fills);
3. bundles in the group's own order, ``fill_credit`` 0;
4. CP-SAT (``engine.solver``) on the group alone, over the tick's nodes as they
   are now and new nodes of every type with launch room, hinted with the best
   of 1-3, when OR-Tools is installed and the group has at most
   ``gang_cpsat_bundles`` bundles and 1-3 did not already launch nothing.

A forming group is never stranded: its bundles are packed onto the most
advanced nodes first, so a group whose nodes are booting is planned onto them
again, and ``tick.cancel_pending`` keeps any pending node a group of the tick
could use.
"""
from __future__ import annotations

import numpy as np

from ..fits import gang_items, gang_strategy
from ..solver.cpsat import have_ortools
from ..solver.instance import EXISTING, NEW, build_slot_instance
from .cost import Costs
from .options import EfficientOptions
from .pack import on_existing, on_new
from .state import State


def gang_batch(p, g: int):
    """Gang g's items as a batch: (request rows, bundles, units, per item the
    bundle positions of each unit); equal unmerged bundles are one item with a
    count, a merged STRICT_PACK item is one unit standing for all its bundles."""
    rows, qty, want, members = [], [], [], []
    seen: dict = {}
    for q_vec, q, mem in gang_items(p, g):
        key = (int(p.req.ident[q]), q_vec.tobytes()) if len(mem) == 1 else ("merged", mem[0])
        j = seen.get(key)
        if j is None:
            seen[key] = len(rows)
            rows.append(q)
            qty.append(q_vec)
            want.append(1)
            members.append([list(mem)])
        else:
            want[j] += 1
            members[j].append(list(mem))
    R = p.R
    return (np.asarray(rows, np.int64), np.asarray(qty, float).reshape(len(rows), R),
            np.asarray(want, np.int64), members)


def gang_order(p, costs: Costs) -> list[int]:
    strict = np.asarray([gang_strategy(p, g).startswith("STRICT") for g in range(p.G)], bool)
    size = np.asarray([float(costs.size(p.req.qty[p.gang_req[p.gang_ptr[g]:p.gang_ptr[g + 1]]])
                             .sum()) for g in range(p.G)], float)
    return np.lexsort((np.arange(p.G), -size, ~strict)).tolist()


def place_gangs(st: State, costs: Costs, opts: EfficientOptions, stats: dict):
    """Place every gang; returns ((G,) bool infeasible, processing order, (B, 3)
    rows (gang, bundle position, slot))."""
    p = st.p
    order = gang_order(p, costs)
    bad = np.zeros(p.G, bool)
    place: list = []
    use_cpsat = opts.gang_cpsat_bundles > 0 and have_ortools()
    for g in order:
        rows, qty, want, members = gang_batch(p, g)
        best = None
        for v, (sort, credit) in enumerate(((True, opts.fill_credit), (True, 0.0), (False, 0.0))):
            snap = st.snapshot()
            got = _heuristic(st, costs, rows, qty, want, sort, credit, opts.keep_gpu_for_gpu)
            if got is not None:
                key = (_cost(st, costs, snap), len(st.new_types) - len(snap[5]), v)
                if best is None or key < best[0]:
                    best = (key, ("heuristic", sort, credit), got)
            st.restore(snap)
        nb = int(want.sum())
        if use_cpsat and nb <= opts.gang_cpsat_bundles and (best is None or best[0][0] > 0):
            stats["cpsat_gangs"] = stats.get("cpsat_gangs", 0) + 1
            sol = _cpsat(st, costs, opts, g, rows, best)
            if sol is not None and (best is None or sol[0] < best[0][0]):
                stats["cpsat_better"] = stats.get("cpsat_better", 0) + 1
                best = ((sol[0], 0, -1), ("cpsat",), sol[1])
        if best is None:
            bad[g] = True
            continue
        how = best[1]
        if how[0] == "heuristic":
            out = _heuristic(st, costs, rows, qty, want, how[1], how[2], opts.keep_gpu_for_gpu)
        else:
            out = _apply(st, qty, rows, best[2])
        for slot, i, n, *_ in out:
            for _ in range(n):
                place.extend((g, b, slot) for b in members[i].pop(0))
    gp = np.asarray(sorted(place), np.int64).reshape(-1, 3)
    return bad, order, gp


def _cost(st: State, costs: Costs, snap) -> float:
    new = st.new_types[len(snap[5]):]
    return float(sum(costs.price[t] for t in new))


def _heuristic(st, costs, rows, qty, want, sort: bool, credit: float, keep_gpu: bool):
    """One packing of the gang; the placements (slot, item, units), or None."""
    order = np.argsort(-costs.size(qty), kind="stable") if sort else np.arange(len(rows))
    r, q, w = rows[order], qty[order], want[order]
    out: list = []
    left = on_existing(st, costs, r, q, w, 0, keep_gpu, out)
    if left.any():
        left = on_new(st, costs, r, q, left, 0, keep_gpu, credit, out)
    if left.any():
        return None
    return [(slot, int(order[i]), n, int(st.type[slot])) for slot, i, n in out]


def _cpsat(st: State, costs: Costs, opts: EfficientOptions, g: int, rows, best):
    """(cost, placements as (class kind, slot or type, item, units)) of the CP-SAT
    packing of gang g on the current slots, or None."""
    from ..solver.cpsat import solve
    p = st.p
    M = st.M
    alive = np.flatnonzero(st.alive[:M])
    inst = build_slot_instance(p, [g], (st.free[:M], st.label[:M], st.type[:M], alive),
                               st.type_room, st.global_room, costs.price)
    hint = None
    if best is not None:
        hint = _hint(inst, st, rows, best[2])
    res = solve(inst, hint=hint, deterministic_limit=opts.cpsat_dtime)
    if not res.feasible or not res.placed_gangs.all():
        return None
    cost = float(sum(costs.price[t] * n for t, n in enumerate(res.launches.tolist())))
    # item i of the instance is the batch item with the same request row, in order
    item_of = _item_map(inst, rows)
    out = []
    for i, k, j, n in res.assignment.tolist():
        if inst.kind[k] == EXISTING:
            out.append(("slot", int(inst.nodes[k][j]), item_of[i], n))
        else:
            out.append(("new", (int(inst.ctype[k]), int(k), int(j)), item_of[i], n))
    return cost, out


def _item_map(inst, rows) -> dict:
    """Instance item -> batch item (both list a gang's items in the same order)."""
    return {i: i for i in range(inst.I)} if len(rows) == inst.I else \
        {i: int(np.flatnonzero(rows == inst.row[i])[0]) for i in range(inst.I)}


def _hint(inst, st: State, rows, placements):
    """The heuristic packing as a model assignment (bins of a class are
    interchangeable: the used ones are numbered in order of use), or None."""
    cls_of = {}
    for k in np.flatnonzero(inst.kind == EXISTING).tolist():
        for n in inst.nodes[k].tolist():
            cls_of[n] = k
    new_k = {int(inst.ctype[k]): k for k in np.flatnonzero(inst.kind == NEW).tolist()}
    item_of = {v: i for i, v in _item_map(inst, rows).items()}
    nxt: dict = {}
    where: dict = {}
    out = []
    for slot, i, n, t in placements:
        if slot not in where:
            k = cls_of.get(slot)
            if k is None:
                k = new_k.get(t)
            if k is None or i not in item_of:
                return None
            where[slot] = (k, nxt.get(k, 0))
            nxt[k] = nxt.get(k, 0) + 1
        k, j = where[slot]
        if j >= inst.bins[k]:
            return None
        out.append((item_of[i], k, j, n))
    return np.asarray(out, np.int64).reshape(-1, 4)


def _apply(st: State, qty, rows, placements) -> list:
    """Commit a CP-SAT packing: launch its new nodes, place its units."""
    from .pack import _put
    p = st.p
    slot_of: dict = {}
    out = []
    for kind, where, i, n in placements:
        if kind == "slot":
            slot = where
        else:
            if where not in slot_of:
                slot_of[where] = st.launch(where[0])
            slot = slot_of[where]
        r = int(rows[i])
        _put(st, 0, slot, i, n, qty[i], r, p.req.anti[r, 0] >= 0, out)
    return out
