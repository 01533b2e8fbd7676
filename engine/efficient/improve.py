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

Here the packing is dense (``Packing``): slot rows are the alive existing nodes in
index order, then the new nodes in order of first use; the scans over them are the
numba kernels ``engine/kernels/eff_empty.py`` (move 1) and ``eff_merge.py`` (moves 2
and 3). Selector masks are computed once per selector set over all slots: moves set
only anti-affinity labels, which no selector names (``_selectors_see_anti``: when
one does, the masks are recomputed before every unit).
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.kernels.eff_empty import block_max, empty_node
from vecsched.engine.kernels.eff_items import add_items, seg_sums
from vecsched.engine.kernels.eff_merge import cheapest_type, merge_rounds
from vecsched.engine.model.fits import FIT_SLACK, anti_mask, selector_mask
from .cost import Costs
from .state import State

SLACK = 1.0 + FIT_SLACK


class Base:
    """What every ``Packing`` of one State and one list of groups shares: the groups'
    items in one table (item (g, i) is row ``gptr[g] + i``), the alive existing nodes
    and which of them have room for some item (``_may_take``). The passes of
    ``gang_place`` each end with the State put back as it was before them, so they
    share one."""

    def __init__(self, st: State, batches):
        p = st.p
        gptr = np.zeros(len(batches) + 1, np.int64)
        gptr[1:] = np.cumsum([len(b[0]) for b in batches])
        self.gptr = gptr.tolist()
        self.item_qty = np.concatenate([b[1] for b in batches]) if batches else \
            np.zeros((0, p.R))
        self.item_row = np.concatenate([b[0] for b in batches]).astype(np.int64) if batches \
            else np.zeros(0, np.int64)
        self.rows = self.item_row.tolist()
        self.alive = np.flatnonzero(st.alive[:st.M])
        self.may = _may_take(st.free[self.alive], self.item_qty)
        self._size = None

    def item_size(self, costs: Costs) -> list:
        """Each item's normalised size, as ``costs.size`` of its bundle alone gives
        it: one (1, R) product per item, stacked (a product's last bit depends on
        its matrix's shape, not on the matrices beside it in a stack)."""
        if self._size is None:
            q = np.ascontiguousarray(self.item_qty, np.float64)
            self._size = (q[:, None, :] @ costs.inv_ref)[:, 0].tolist()
        return self._size


class Packing:
    """Dense slots (module docstring): ``free`` (S, R), ``label`` (S, L), ``type``
    (S,), ``live`` (S,), ``new`` (S,) whether a slot is a new node, ``key[s]`` its
    placement slot (node index, or ``("new", j)``), ``content`` slot -> [g, i, n]
    items in the order they were added (a dict: its key order is the output's)."""

    def __init__(self, st: State, batches, place: list, base: Base | None = None):
        p = st.p
        self.st, self.p, self.batches = st, p, batches
        b = base if base is not None else Base(st, batches)
        self._gptr, self.item_qty, self.item_row, self._rows = \
            b.gptr, b.item_qty, b.item_row, b.rows
        self.base = b
        alive = b.alive[b.may | np.isin(b.alive, [slot for _, _, slot, _, _ in place
                                                  if not isinstance(slot, tuple)])]
        key = alive.tolist()
        new_t = []
        row_of = {k: s for s, k in enumerate(key)}
        for _, _, slot, _, t in place:
            k = _key(row_of, slot)
            if k not in row_of:
                row_of[k] = len(key)
                key.append(k)
                new_t.append(t)
        E, S = len(alive), len(key)
        self.key, self.row_of, self.E = key, row_of, E
        new_ix = np.asarray(new_t, np.int64)
        self.free = np.concatenate([st.free[alive], p.type_free[new_ix]])
        # each row written once (a 50k-node tick's labels have a column per group key)
        self.label = np.empty((S, st.label.shape[1]), st.label.dtype)
        np.take(st.label, alive, axis=0, out=self.label[:E])
        for t in np.unique(new_ix).tolist():
            self.label[E:][new_ix == t] = st.type_label[t]
        self.type = np.concatenate([st.type[alive].astype(np.int64),
                                    np.asarray(new_t, np.int64)])
        self.live = np.ones(S, bool)
        self.new = np.arange(S) >= E
        self.content: dict = {}
        self.room = st.type_room.copy()
        self.glob = st.global_room
        for t in new_t:
            self.room[t] -= 1
            if self.glob > 0:
                self.glob -= 1
        self._add_all(place)

    def new_slots(self) -> list:
        """The live new nodes' rows, in order of first use."""
        return np.flatnonzero(self.live & self.new).tolist()

    def qty_row(self, g: int, i: int):
        j = self._gptr[g] + i
        return self.item_qty[j], self._rows[j]

    def _add_all(self, place: list) -> None:
        """``_add`` of every placement, in order (the room and labels in one kernel
        call, ``eff_items.add_items``)."""
        P, R = len(place), self.p.R
        slots = np.fromiter((self.row_of[_key(self.row_of, x[2])] for x in place), np.int64, P)
        gptr = self._gptr
        j = np.fromiter((gptr[x[0]] + x[1] for x in place), np.int64, P)
        qty = np.ascontiguousarray(self.item_qty[j], np.float64).reshape(P, R)
        anti = self.st.anti_arr[self.item_row[j]].reshape(P, 2)
        add_items(self.free, self.label, slots, qty,
                  np.fromiter((x[3] for x in place), np.int64, P),
                  np.ascontiguousarray(anti[:, 0], np.int64),
                  np.ascontiguousarray(anti[:, 1], np.int64))
        for (g, i, _, n, _), s in zip(place, slots.tolist()):
            self.content.setdefault(s, []).append([g, i, n])

    def _add(self, s: int, g: int, i: int, n: int) -> None:
        q, r = self.qty_row(g, i)
        self.free[s] = np.maximum(self.free[s] - n * q, 0.0)
        key, val = (int(x) for x in self.st.anti_arr[r])
        if key >= 0:
            self.label[s, key] = val
        self.content.setdefault(s, []).append([g, i, n])

    def drop(self, s: int) -> None:
        """Slot s (a new node) leaves the packing: its launch room comes back."""
        self.live[s] = False
        self.content.pop(s, None)
        self.room[self.type[s]] += 1
        if self.glob >= 0:
            self.glob += 1

    def set_node(self, s: int, t: int, items: list) -> None:
        """New node s becomes a fresh node of type t holding ``items``."""
        p = self.p
        self.type[s] = t
        self.free[s] = p.type_free[t]
        self.label[s] = self.st.type_label[t]
        self.content[s] = []
        for g, i, n in items:
            self._add(s, g, i, n)

    def placements(self) -> list:
        return [(g, i, self.key[s], n, int(self.type[s])) for s, items in self.content.items()
                for g, i, n in items if n > 0]


def _may_take(free: np.ndarray, item_qty: np.ndarray) -> np.ndarray:
    """(n,) bool: which rows of ``free`` (n, R) have room for one unit of some
    item (``item_qty`` (I, R): every group's items), by the moves' own test (``eff_empty``: every positive
    column's free-to-bundle ratio, times SLACK, at least 1). Existing nodes only
    take units here, so one without room for any item never takes part in a move:
    leaving it out of the packing changes no move (the scans keep their order)
    and spares copying every node's labels (a 10k-node tick has a few hundred
    with room)."""
    qty = np.unique(item_qty, axis=0) if len(item_qty) else np.zeros((0, free.shape[1]))
    out = np.zeros(len(free), bool)
    for q in qty:
        pos = q > 0
        if not pos.any():
            return np.ones(len(free), bool)
        out |= (free[:, pos] / q[pos]).min(axis=1) * SLACK >= 1.0
    return out


def _key(row_of: dict, slot):
    """A pass's slot as a packing key: an alive existing node's index as is, a node
    the pass launched as ``("new", slot)``."""
    return slot if not isinstance(slot, tuple) and slot in row_of else ("new", slot)


def improve(st: State, costs: Costs, batches, place: list, base: Base | None = None) -> list:
    """The placements after the three moves (module docstring). ``base``: a ``Base``
    of ``st`` as it is now and of ``batches`` (made here when None)."""
    pk = Packing(st, batches, place, base)
    _empty_new_nodes(pk, costs)
    types = _TypeFit(pk, costs)
    _merge_pairs(pk, costs, types)
    _cheaper_types(pk, costs, types)
    return pk.placements()


# ---- move 1: empty a new node ----------------------------------------------------------

def _fills(pk: Packing, slots: list) -> np.ndarray:
    """Per slot, the largest used share of any column its type has."""
    cap = pk.p.type_free[pk.type[slots]]
    on = cap > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(on, (cap - pk.free[slots]) / np.where(on, cap, 1.0), -np.inf)
    return np.where(on.any(axis=1), share.max(axis=1, initial=-np.inf), 1.0)


def _selectors_see_anti(p) -> bool:
    """Whether any selector names a key some row uses as its anti-affinity label."""
    t = p.req
    anti = set(t.anti[t.anti[:, 0] >= 0, 0].tolist())
    return bool(anti) and bool(anti & set(np.asarray(t.con_key).tolist()))


class _Masks:
    """Selector masks over the packing's slots, one row per distinct selector set."""

    def __init__(self, pk: Packing):
        self.pk, self.rows, self.of, self._table = pk, [], {}, None

    def index(self, r: int) -> int:
        t = self.pk.p.req
        if int(t.sel_ptr[r + 1]) <= int(t.sel_ptr[r]):
            return -1
        k = t.sel_key[r]
        if k not in self.of:
            self.of[k] = len(self.rows)
            self.rows.append(selector_mask(self.pk.p, r, self.pk.label))
            self._table = None
        return self.of[k]

    def table(self) -> np.ndarray:
        if self._table is None:
            S = len(self.pk.key)
            self._table = np.asarray(self.rows, bool).reshape(len(self.rows), S)
        return self._table


def _units(pk: Packing, costs: Costs, m: int) -> list:
    """Slot m's units one by one, largest (normalised size) first, stable."""
    units = []
    for g, i, n in pk.content.get(m, []):
        units += [(g, i)] * n
    size, gptr = pk.base.item_size(costs), pk._gptr
    units.sort(key=lambda u: -size[gptr[u[0]] + u[1]])
    return units


def _unit_arrays(pk: Packing, units: list, masks: _Masks):
    p, gptr = pk.p, pk._gptr
    j = np.fromiter((gptr[g] + i for g, i in units), np.int64, len(units))
    uq = np.ascontiguousarray(pk.item_qty[j], float).reshape(len(units), p.R)
    rows = pk.item_row[j]
    anti = pk.st.anti_arr[rows].reshape(len(units), 2)
    mask_of = np.asarray([masks.index(r) for r in rows.tolist()], np.int64)
    return uq, anti[:, 0].astype(np.int64), anti[:, 1].astype(np.int32), mask_of


def _empty_new_nodes(pk: Packing, costs: Costs) -> None:
    new = pk.new_slots()
    if not new:
        return
    fill = _fills(pk, new)
    price = costs.price[pk.type[new]]
    order = [new[j] for j in sorted(range(len(new)),
                                    key=lambda j: (fill[j], -price[j], pk.key[new[j]]))]
    stale = _selectors_see_anti(pk.p)
    masks = _Masks(pk)
    bmax = block_max(pk.free)           # free room only shrinks here: stays a bound
    for m in order:
        units = _units(pk, costs, m)
        if stale:
            ok, tgt = _empty_stale(pk, m, units, bmax)
        else:
            uq, ukey, uval, mask_of = _unit_arrays(pk, units, masks)
            ok, tgt = empty_node(pk.free, pk.label, pk.live, m, uq, ukey, uval, masks.table(),
                                 mask_of, SLACK, bmax)
        if not ok:
            continue
        for (g, i), s in zip(units, tgt.tolist()):
            pk.content.setdefault(s, []).append([g, i, 1])
        pk.drop(m)


def _empty_stale(pk: Packing, m: int, units: list, bmax):
    """``empty_node`` one unit at a time, the selector masks recomputed before each
    (a selector names an anti-affinity key, so a move may change them)."""
    saved = (pk.free.copy(), pk.label.copy())
    tgt = []
    for u in units:
        masks = _Masks(pk)
        uq, ukey, uval, mask_of = _unit_arrays(pk, [u], masks)
        ok, at = empty_node(pk.free, pk.label, pk.live, m, uq, ukey, uval, masks.table(),
                            mask_of, SLACK, bmax)
        if not ok:
            pk.free[:], pk.label[:] = saved
            return False, np.zeros(0, np.int64)
        tgt.append(int(at[0]))
    return True, np.asarray(tgt, np.int64)


# ---- moves 2 and 3: merge pairs, cheaper types -------------------------------------------

class _TypeFit:
    """What the type search needs that does not change: types by ascending price
    (stable), capacities with their tolerance, and per request row whether each
    type's labels allow it (selectors and anti-affinity)."""

    def __init__(self, pk: Packing, costs: Costs):
        p = pk.p
        self.tsort = np.argsort(costs.price, kind="stable").astype(np.int64)
        self.cap_tol = p.type_free + 1e-9 * np.abs(p.type_free)
        self.conf = np.asarray(p.type_configured, bool)
        self.price = np.asarray(costs.price, float)
        self.row_ok: dict = {}
        self.anti_id: dict = {}
        self.cache: dict = {}

    def ok(self, pk: Packing, r: int) -> np.ndarray:
        if r not in self.row_ok:
            p = pk.p
            self.row_ok[r] = selector_mask(p, r, p.type_label) & anti_mask(p, r, p.type_label)
        return self.row_ok[r]

    def node(self, pk: Packing, s: int):
        """Slot s's (load (R,), items (k, R) units x bundle, allowed types (T,), sorted
        distinct anti-affinity ids, whether one is held twice); kept until ``forget``."""
        got = self.cache.get(s)
        if got is not None:
            return got
        p = pk.p
        acc, nq, held = 0, [], []
        ok = np.ones(p.T, bool)
        for g, i, n in pk.content.get(s, []):
            q, r = pk.qty_row(g, i)
            acc = acc + n * q
            nq.append(n * q)
            ok &= self.ok(pk, r)
            key, val = (int(x) for x in p.req.anti[r])
            if key >= 0:
                held += [self.anti_id.setdefault((key, val), len(self.anti_id))] * n
        load = np.zeros(p.R) + acc
        got = (load, np.asarray(nq, float).reshape(-1, p.R), ok, sorted(set(held)),
               len(set(held)) < len(held))
        self.cache[s] = got
        return got

    def forget(self, *slots) -> None:
        for s in slots:
            self.cache.pop(s, None)

    def _fill(self, pk: Packing, slots: list) -> None:
        """``node`` of each of ``slots`` (not cached, distinct) at once: the same
        values (loads summed item by item in content order, anti-affinity ids given
        in the same order), kept as ``node`` keeps them."""
        p = pk.p
        gptr = pk._gptr
        ent_j, ent_n, ptr = [], [], [0]
        for s in slots:
            for g, i, n in pk.content.get(s, []):
                ent_j.append(gptr[g] + i)
                ent_n.append(n)
            ptr.append(len(ent_j))
        j = np.asarray(ent_j, np.int64)
        nq = np.asarray(ent_n, np.int64)[:, None] * pk.item_qty[j].reshape(len(j), p.R)
        load = seg_sums(np.asarray(ptr, np.int64), np.ascontiguousarray(nq, np.float64))
        rows = pk.item_row[j]
        row_ok = np.asarray([self.ok(pk, r) for r in rows.tolist()], bool).reshape(len(j), p.T)
        anti = p.req.anti[rows].tolist()
        for k, s in enumerate(slots):
            a, b = ptr[k], ptr[k + 1]
            held = []
            for e in range(a, b):
                key, val = anti[e]
                if key >= 0:
                    held += [self.anti_id.setdefault((key, val), len(self.anti_id))] * ent_n[e]
            ok = row_ok[a:b].all(axis=0) if b > a else np.ones(p.T, bool)
            self.cache[s] = (load[k], nq[a:b], ok, sorted(set(held)), len(set(held)) < len(held))

    def nodes(self, pk: Packing, slots: list):
        """The kernels' per-node arrays for ``slots`` (module docstring of eff_merge)."""
        p = pk.p
        self._fill(pk, [s for s in slots if s not in self.cache])
        got = [self.cache[s] for s in slots]
        load = np.asarray([x[0] for x in got], float).reshape(len(slots), p.R)
        ok = np.asarray([x[2] for x in got], bool).reshape(len(slots), p.T)
        ptr = np.zeros(len(slots) + 1, np.int64)
        ptr[1:] = np.cumsum([len(x[1]) for x in got])
        nq = np.concatenate([x[1] for x in got]) if got else np.zeros((0, p.R))
        aptr = np.zeros(len(slots) + 1, np.int64)
        aptr[1:] = np.cumsum([len(x[3]) for x in got])
        aids = np.asarray([a for x in got for a in x[3]], np.int64)
        adup = np.asarray([x[4] for x in got], bool)
        return load, ptr, nq, ok, aptr, aids, adup


def _merge_pairs(pk: Packing, costs: Costs, tf: _TypeFit, rounds: int = 64) -> None:
    """Up to ``rounds`` merges, each the first pair (dearest first) that one cheaper
    node holds, searched after the previous one is made (``eff_merge.merge_rounds``);
    then replayed on the packing in the order made."""
    slots = pk.new_slots()
    if len(slots) < 2:
        return
    load, ptr, nq, ok, aptr, aids, adup = tf.nodes(pk, slots)
    ntype = pk.type[slots]
    rank = np.empty(len(slots), np.int64)
    rank[sorted(range(len(slots)), key=lambda j: pk.key[slots[j]])] = np.arange(len(slots))
    order = np.lexsort((rank, -tf.price[ntype])).astype(np.int64)
    merges = merge_rounds(order, ntype, rank, load, ptr, nq, ok, aptr, aids, adup, tf.tsort,
                          tf.price, tf.conf, pk.room, tf.cap_tol, rounds)
    for a, b, t in merges.tolist():
        sa, sb = slots[a], slots[b]
        items = [list(x) for x in pk.content.get(sa, []) + pk.content.get(sb, [])]
        pk.room[pk.type[sa]] += 1
        pk.drop(sb)
        pk.room[t] -= 1
        pk.set_node(sa, int(t), items)
        tf.forget(sa, sb)


def _cheaper_types(pk: Packing, costs: Costs, tf: _TypeFit) -> None:
    for s in pk.new_slots():
        items = pk.content.get(s, [])
        if not items:
            continue
        load, _, ok, _, dup = tf.node(pk, s)
        if dup:
            continue
        t0 = int(pk.type[s])
        t = cheapest_type(load[None, :], ok[None, :], 0, tf.tsort, tf.price, tf.conf, pk.room,
                          -1, -1, tf.cap_tol, tf.price[t0])
        if t >= 0:
            pk.room[t0] += 1
            pk.room[t] -= 1
            pk.set_node(s, int(t), [list(x) for x in items])
