"""Improving a packing of the tick's placement groups by consolidation moves
(Karpenter's consolidation, applied to the plan before anything launches):

1. **Empty a new node**: new nodes, least filled first (dearest first on ties),
   try to move every bundle they hold onto the other nodes (existing first,
   first fit, selectors and anti-affinity respected); when all fit, the node is
   not launched.
2. **Merge two new nodes into one**: when one node of some type holds what two
   new nodes hold for less than the two cost, it replaces them (repeated while
   any pair gains, dearest pairs first).
3. **Replace a new node by a cheaper one**: each remaining new node becomes
   the cheapest type with launch room that holds its bundles (their sum fits,
   every selector holds on the type's labels).

A packing is a list of placements (gang, item, slot, units, slot type) where
a new node's slot is ``("new", j)``; ``batches[g]`` gives an item's request row
and bundle (``gangs.gang_batch``). A move never splits a STRICT_PACK item (it is
one unit) and never puts two units of one anti-affinity group on a node.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.fits import anti_mask, fit_count, selector_mask
from .cost import Costs
from .state import State


class Packing:
    def __init__(self, st: State, batches, place: list):
        p = st.p
        self.st, self.p, self.batches = st, p, batches
        M = st.M
        self.free = {m: st.free[m].copy() for m in np.flatnonzero(st.alive[:M]).tolist()}
        self.label = {m: st.label[m].copy() for m in self.free}
        self.type = {m: int(st.type[m]) for m in self.free}
        self.content: dict = {}
        self.room = st.type_room.copy()
        self.glob = st.global_room
        for g, i, slot, n, t in place:
            if slot not in self.free:           # launched by the pass: a new node
                slot = ("new", slot)
            if slot not in self.free:
                self.free[slot] = p.type_free[t].copy()
                self.label[slot] = p.type_label[t].copy()
                self.type[slot] = t
                self.room[t] -= 1
                if self.glob > 0:
                    self.glob -= 1
            self._add(slot, g, i, n)

    def new_slots(self) -> list:
        return [m for m in self.free if isinstance(m, tuple)]

    def _qty_row(self, g: int, i: int):
        rows, qty = self.batches[g][0], self.batches[g][1]
        return qty[i], int(rows[i])

    def _add(self, slot, g: int, i: int, n: int) -> None:
        q, r = self._qty_row(g, i)
        self.free[slot] = np.maximum(self.free[slot] - n * q, 0.0)
        key, val = (int(x) for x in self.p.req.anti[r])
        if key >= 0:
            self.label[slot][key] = val
        self.content.setdefault(slot, []).append([g, i, n])

    def fits(self, slot, g: int, i: int) -> bool:
        q, r = self._qty_row(g, i)
        lab = self.label[slot][None, :]
        return bool(fit_count(self.free[slot][None, :], q)[0] >= 1 and
                    selector_mask(self.p, r, lab)[0] and anti_mask(self.p, r, lab)[0])

    def placements(self) -> list:
        return [(g, i, slot, n, self.type[slot]) for slot, items in self.content.items()
                for g, i, n in items if n > 0]


def improve(st: State, costs: Costs, batches, place: list) -> list:
    """The placements after both moves (module docstring)."""
    pk = Packing(st, batches, place)
    _empty_new_nodes(pk, costs)
    _merge_pairs(pk, costs)
    _cheaper_types(pk, costs)
    return pk.placements()


def _fill(pk: Packing, slot) -> float:
    cap = pk.p.type_free[pk.type[slot]]
    on = cap > 0
    return float(((cap[on] - pk.free[slot][on]) / cap[on]).max()) if on.any() else 1.0


def _empty_new_nodes(pk: Packing, costs: Costs) -> None:
    order = sorted(pk.new_slots(), key=lambda m: (_fill(pk, m), -costs.price[pk.type[m]], m))
    for m in order:
        units = []
        for g, i, n in pk.content.get(m, []):
            units += [(g, i)] * n
        units.sort(key=lambda u: -float(costs.size(pk._qty_row(*u)[0])[0]))
        saved = ({k: v.copy() for k, v in pk.free.items()},
                 {k: v.copy() for k, v in pk.label.items()},
                 {k: [list(x) for x in v] for k, v in pk.content.items()})
        targets = [s for s in pk.free if s != m and not isinstance(s, tuple)] + \
            [s for s in pk.new_slots() if s != m]
        ok = True
        for g, i in units:
            for s in targets:
                if pk.fits(s, g, i):
                    pk._add(s, g, i, 1)
                    break
            else:
                ok = False
                break
        if ok:
            t = pk.type[m]
            for d in (pk.free, pk.label, pk.type):
                del d[m]
            pk.content.pop(m, None)
            pk.room[t] += 1
            if pk.glob >= 0:
                pk.glob += 1
        else:
            pk.free, pk.label, pk.content = saved


def _cheapest_holder(pk: Packing, costs: Costs, items: list, below: float, free_up=()):
    """The cheapest type (price < ``below``, launch room counting the nodes in
    ``free_up`` as given back) whose fresh node holds ``items`` [(g, i, n)], or -1."""
    p = pk.p
    load = sum(n * pk._qty_row(g, i)[0] for g, i, n in items)
    rows = [pk._qty_row(g, i)[1] for g, i, _ in items]
    anti = [tuple(int(x) for x in p.req.anti[r]) for r in rows]
    anti = [a for a, (_, _, n) in zip(anti, items) for _ in range(n) if a[0] >= 0]
    if len(set(anti)) < len(anti):
        return -1                       # two units of one anti-affinity group
    back = {}
    for m in free_up:
        back[pk.type[m]] = back.get(pk.type[m], 0) + 1
    best, best_price = -1, below
    for t in np.argsort(costs.price, kind="stable").tolist():
        if costs.price[t] >= best_price or not p.type_configured[t]:
            continue
        if pk.room[t] + back.get(t, 0) <= 0:
            continue
        cap = p.type_free[t]
        if np.any(load > cap + 1e-9 * np.abs(cap)):
            continue
        lab = p.type_label[t][None, :]
        if all(selector_mask(p, r, lab)[0] and anti_mask(p, r, lab)[0] for r in rows):
            best, best_price = t, costs.price[t]
    return best


def _set_node(pk: Packing, m, t: int, items: list) -> None:
    p = pk.p
    pk.type[m] = t
    pk.free[m] = p.type_free[t].copy()
    pk.label[m] = p.type_label[t].copy()
    pk.content[m] = []
    for g, i, n in items:
        pk._add(m, g, i, n)


def _merge_pairs(pk: Packing, costs: Costs, rounds: int = 64) -> None:
    for _ in range(rounds):
        slots = sorted(pk.new_slots(), key=lambda m: (-costs.price[pk.type[m]], m))
        done = False
        for a_i, a in enumerate(slots):
            for b in slots[a_i + 1:]:
                items = pk.content.get(a, []) + pk.content.get(b, [])
                pair = costs.price[pk.type[a]] + costs.price[pk.type[b]]
                t = _cheapest_holder(pk, costs, items, pair, free_up=(a, b))
                if t < 0:
                    continue
                pk.room[pk.type[a]] += 1
                pk.room[pk.type[b]] += 1
                pk.room[t] -= 1
                for d in (pk.free, pk.label, pk.type):
                    del d[b]
                pk.content.pop(b, None)
                if pk.glob >= 0:
                    pk.glob += 1
                _set_node(pk, a, t, [list(x) for x in items])
                done = True
                break
            if done:
                break
        if not done:
            return


def _cheaper_types(pk: Packing, costs: Costs) -> None:
    for m in pk.new_slots():
        items = pk.content.get(m, [])
        if not items:
            continue
        t0 = pk.type[m]
        t = _cheapest_holder(pk, costs, items, costs.price[t0])
        if t >= 0:
            pk.room[t0] += 1
            pk.room[t] -= 1
            _set_node(pk, m, t, [list(x) for x in items])
