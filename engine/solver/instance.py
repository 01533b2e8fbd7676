"""The data of one tick's placement model (no ortools here): items, bin classes,
integer capacities, budgets, prices.

- **Items** are the tick's gang bundles after the STRICT_PACK merge
  (``vecsched.engine.model.fits.gang_items``), equal bundles of one gang merged into one item
  with a multiplicity, and (``include_plain``) the plain request runs, one item
  per run with its count as multiplicity. A gang is placed all or nothing; a run
  may be placed in part.
- **Bin classes** are interchangeable bins: existing nodes grouped by (free
  resources, labels) - identical ones are one class with a count; the nodes the
  min-worker rule launches anyway (zero cost, ``forced``); and per configured
  type the new nodes the tick may launch (the type's price each, at most the
  type's ``max_worker_nodes`` room and the global ``max_num_nodes`` room).
- **Bins materialised** per class are capped by a bound no optimal packing
  needs to exceed: an optimal packing can be rewritten (same cost, same items)
  so that no two bins of a class could be merged; then at most one bin of the
  class holds at most half its capacity in every resource, every other one holds
  more than half in some resource, so there are at most ``2 * sum_r D_r / cap_r + 1``
  bins without an anti-affinity item (D: the demand that may go there) plus one per
  anti-affinity unit. A new-node class is *dominated* when another costs no more,
  holds as much and takes every item it takes, with room to spare: optimising
  leaves it out (checking a given plan, which may have launched it, does not).
- **Integers.** Each kept column (one that an item asks for) gets a scale: the
  least power of ten that makes every value of the column integral (within
  1e-7 relative), divided by the values' gcd. A column with no such scale is
  scaled to about 2**40 and rounded conservatively (demands up, capacities
  down) and ``exact`` says so.

Prices: ``vecsched.engine.solver.prices``. The objective charges ``big`` per unplaced bundle or unit, then the prices of
the new nodes (so: place as much as possible, then pay as little as possible).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from vecsched.engine.model.fits import BIG_COUNT, anti_mask, gang_items, selector_mask
from vecsched.engine.model.problem import Problem
from .prices import price_scale, price_vector

EXISTING, FORCED, NEW = 0, 1, 2     # bin class kinds
_TOL = 1e-7                         # relative tolerance of "integral" after scaling
_MAX_INT = float(2 ** 52)


class SolverUnavailable(ImportError):
    """OR-Tools is not installed (``pip install vecsched[solver]``)."""


@dataclass(frozen=True, eq=False)
class Instance:
    problem: Problem
    cols: np.ndarray            # (R',) problem columns the model keeps
    scale: np.ndarray           # (R',) f8 multiplier to the integer grid
    exact: bool                 # every kept column scaled exactly
    # items
    qty: np.ndarray             # (I, R') i8 demand per unit (scaled, rounded up)
    mult: np.ndarray            # (I,) i8 units
    gang: np.ndarray            # (I,) i4 gang position in ``gangs``, -1 for a run
    run: np.ndarray             # (I,) i4 plain run, -1 for a gang item
    spread: np.ndarray          # (I,) i4 anti-affinity group (distinct bins), -1 none
    row: np.ndarray             # (I,) i4 request row (selectors, constraint)
    gangs: np.ndarray           # (G',) i4 problem gang index of each modelled gang
    gang_bundles: np.ndarray    # (G',) i8 bundles of each (before the merge)
    bundle_item: tuple          # (G',) arrays: item of each of the gang's bundles
    # bin classes
    cap: np.ndarray             # (K, R') i8 capacity (scaled, rounded down)
    cost: np.ndarray            # (K,) i8 price of one bin (0: existing or forced)
    count: np.ndarray           # (K,) i8 bins that exist or may be opened
    bins: np.ndarray            # (K,) i8 bins materialised in the model
    dominated: np.ndarray       # (K,) bool new-node classes an optimum needs none of
    kind: np.ndarray            # (K,) i1 EXISTING / FORCED / NEW
    ctype: np.ndarray           # (K,) i4 node type
    nodes: tuple                # (K,) arrays: existing nodes of the class, index order
    compat: np.ndarray          # (I, K) bool item may go on a bin of the class
    fitmax: np.ndarray          # (I, K) i8 units of the item one bin holds alone
    forced: np.ndarray          # (T,) i8 nodes min_worker_nodes launches anyway
    type_budget: np.ndarray     # (T,) i8 launches allowed beyond ``forced``
    global_budget: int          # launches allowed beyond ``forced`` over all types, -1 none
    price: np.ndarray           # (T,) f8 per node-hour
    price_scale: float          # cost = round(price * price_scale)
    big: int                    # objective weight of one unplaced bundle or unit
    include_plain: bool
    notes: tuple = field(default=())   # why a plan's cost may not compare (constraints, IPPR...)

    @property
    def I(self) -> int:
        return int(self.mult.shape[0])

    @property
    def K(self) -> int:
        return int(self.cost.shape[0])

    @property
    def n_bundles(self) -> int:
        return int(self.gang_bundles.sum())

    @property
    def comparable(self) -> bool:
        return not self.notes


# ---- building ---------------------------------------------------------------------------

def build_instance(p: Problem, *, gangs=None, include_plain: bool = True, prices=None,
                   gpu_weight: float = 1.0, exclude=None) -> Instance:
    """The model data of one tick. ``gangs``: problem gang indices to model (default
    all); ``exclude`` (N,) bool: existing nodes to leave out (e.g. the ones a plan
    terminates; outdated nodes are always left out)."""
    gangs = np.arange(p.G) if gangs is None else np.asarray(gangs, np.int64)
    gone = p.node_outdated.copy()
    if exclude is not None:
        gone |= np.asarray(exclude, bool)
    alive = ~gone
    have = np.bincount(p.node_type[alive], minlength=p.T)
    conf = p.type_configured
    forced = np.where(conf, np.maximum(p.type_min - have, 0), 0).astype(np.int64)
    budget = np.where(conf, np.maximum(p.type_max - have - forced, 0), 0).astype(np.int64)
    if p.max_num_nodes >= 0:
        glob = max(p.max_num_nodes - int(alive.sum()) - int(forced.sum()), 0)
    else:
        glob = -1
    return _assemble(p, gangs, include_plain, price_vector(p, prices, gpu_weight),
                     (p.node_free, p.node_label_full(), p.node_type, np.flatnonzero(alive)),
                     forced, budget, glob, tuple(_notes(p, alive)))


def build_slot_instance(p: Problem, gangs, slots, type_room, global_room: int,
                        price: np.ndarray) -> Instance:
    """The model of some gangs on a tick in progress (the efficient mode's):
    ``slots`` = (free (M, R), labels (M, L), types (M,), alive slot ids) are all
    bins already paid for (existing nodes and nodes launched earlier in the tick),
    ``type_room`` (T,) / ``global_room`` (-1: none) the launches still allowed."""
    return _assemble(p, np.asarray(gangs, np.int64), False, np.asarray(price, float), slots,
                     np.zeros(p.T, np.int64), np.asarray(type_room, np.int64), int(global_room),
                     ())


def _assemble(p: Problem, gangs, include_plain, price, slots, forced, budget, glob,
              notes) -> Instance:
    conf = p.type_configured
    items = _items(p, gangs, include_plain)
    q_raw = np.asarray([it[0] for it in items]).reshape(len(items), p.R)
    cols = np.flatnonzero((q_raw > 0).any(axis=0))
    rows = np.asarray([it[1] for it in items], np.int64)
    raw_caps, labels, kinds, ctypes, nodes = _classes(p, slots, forced, budget, conf, cols,
                                                      _label_keys(p, rows))
    cap_raw = np.concatenate(raw_caps)[:, cols] if raw_caps else np.zeros((0, len(cols)))
    scale, exact = _scales(q_raw[:, cols], cap_raw)
    qty = _to_int(q_raw[:, cols], scale, up=True)
    cap = _to_int(cap_raw, scale, up=False)
    I, K = len(items), cap.shape[0]
    mult = np.asarray([it[3] for it in items], np.int64)
    spread = _spread_groups(p, rows)
    compat = np.zeros((I, K), bool)
    lab = np.asarray(labels).reshape(K, len(p.label_keys))
    for i, q in enumerate(rows.tolist()):
        compat[i] = selector_mask(p, q, lab) & anti_mask(p, q, lab)
    fitmax = np.zeros((I, K), np.int64)
    for i in range(I):
        pos = qty[i] > 0
        f = (cap[:, pos] // qty[i, pos]).min(axis=1) if pos.any() else \
            np.full(K, BIG_COUNT, np.int64)
        f = np.minimum(f, 1 if spread[i] >= 0 else mult[i])
        fitmax[i] = np.where(compat[i], f, 0)
    compat &= fitmax > 0
    count = np.asarray([len(n) if k == EXISTING else (forced[t] if k == FORCED else budget[t])
                        for k, t, n in zip(kinds, ctypes, nodes)], np.int64)
    if glob >= 0:
        count = np.where(np.asarray(kinds) == NEW, np.minimum(count, glob), count)
    need = _bin_bound(qty, cap, mult, compat, spread, np.full(len(count), BIG_COUNT))
    bins = np.minimum(need, count)
    pscale = price_scale(price[conf])
    cost = np.asarray([0 if k != NEW else int(round(price[t] * pscale))
                       for k, t in zip(kinds, ctypes)], np.int64)
    dominated = _dominated(np.asarray(kinds), cap, cost, compat, count, need)
    big = int((cost * bins).sum()) + 1
    gang_pos = {int(g): j for j, g in enumerate(gangs.tolist())}
    gang_of = np.asarray([gang_pos[it[2]] if it[2] >= 0 else -1 for it in items], np.int32)
    run_of = np.asarray([it[4] for it in items], np.int32)
    bundle_item = []
    for g in gangs.tolist():
        nb = int(p.gang_ptr[g + 1] - p.gang_ptr[g])
        arr = np.full(nb, -1, np.int64)
        for i, it in enumerate(items):
            if it[2] == g:
                arr[it[5]] = i
        bundle_item.append(arr)
    return Instance(
        problem=p, cols=cols, scale=scale, exact=exact, qty=qty, mult=mult, gang=gang_of,
        run=run_of, spread=spread, row=rows.astype(np.int32), gangs=gangs.astype(np.int32),
        gang_bundles=np.asarray([p.gang_ptr[g + 1] - p.gang_ptr[g] for g in gangs.tolist()],
                                np.int64),
        bundle_item=tuple(bundle_item), cap=cap, cost=cost, count=count, bins=bins,
        dominated=dominated,
        kind=np.asarray(kinds, np.int8), ctype=np.asarray(ctypes, np.int32), nodes=tuple(nodes),
        compat=compat, fitmax=fitmax, forced=forced, type_budget=budget, global_budget=glob,
        price=price, price_scale=pscale, big=big, include_plain=include_plain, notes=notes)


def _items(p: Problem, gangs: np.ndarray, include_plain: bool) -> list:
    """(bundle (R,), row, problem gang or -1, units, run or -1, bundle positions)."""
    out = []
    for g in gangs.tolist():
        merged: dict = {}
        for qty, q, members in gang_items(p, g):
            if len(members) == 1:       # an unmerged bundle: equal requests share an item
                key = (int(p.req.ident[q]), qty.tobytes())
            else:
                key = ("merged", members[0])
            if key in merged:
                j = merged[key]
                out[j][3] += 1
                out[j][5].extend(members)
            else:
                merged[key] = len(out)
                out.append([qty, q, g, 1, -1, list(members)])
    if include_plain:
        for s in range(p.S):
            if p.shape_count[s] > 0:
                out.append([p.shape_qty[s].copy(), s, -1, int(p.shape_count[s]), s, []])
    return out


def _label_keys(p: Problem, rows: np.ndarray) -> np.ndarray:
    """Label keys the items' selectors or anti-affinities read."""
    t = p.req
    keys = set()
    for q in rows.tolist():
        for s in range(int(t.sel_ptr[q]), int(t.sel_ptr[q + 1])):
            keys.update(t.con_key[int(t.sel_con_ptr[s]): int(t.sel_con_ptr[s + 1])].tolist())
        if t.anti[q, 0] >= 0:
            keys.add(int(t.anti[q, 0]))
    return np.asarray(sorted(keys), np.int64)


def _classes(p: Problem, slots, forced, budget, conf, cols, lkeys):
    """Raw capacities (list of (1, R) rows), labels, kinds, types and nodes per
    class. Existing nodes are one class when they agree on the kept columns and
    on the labels the items read."""
    caps, labels, kinds, ctypes, nodes = [], [], [], [], []
    node_free, node_label, node_type, idx = slots
    seen: dict = {}
    free = node_free[:, cols]
    lab = node_label[:, lkeys]
    for n in np.asarray(idx).tolist():
        key = (free[n].tobytes(), lab[n].tobytes())
        k = seen.get(key)
        if k is None:
            seen[key] = len(caps)
            caps.append(node_free[n:n + 1])
            labels.append(node_label[n])
            kinds.append(EXISTING)
            ctypes.append(int(node_type[n]))
            nodes.append([n])
        else:
            nodes[k].append(n)
    for kind, counts in ((FORCED, forced), (NEW, budget)):
        for t in np.flatnonzero(conf & (counts > 0)).tolist():
            caps.append(p.type_free[t:t + 1])
            labels.append(p.type_label[t])
            kinds.append(kind)
            ctypes.append(t)
            nodes.append([])
    return caps, labels, kinds, ctypes, [np.asarray(n, np.int64) for n in nodes]


def _spread_groups(p: Problem, rows: np.ndarray) -> np.ndarray:
    """(I,) anti-affinity group per item: items with the same anti-affinity
    label may not share a bin (a placement adds the label the next one rejects)."""
    out = np.full(len(rows), -1, np.int32)
    ids: dict = {}
    for i, q in enumerate(rows.tolist()):
        key, val = (int(x) for x in p.req.anti[q])
        if key >= 0:
            out[i] = ids.setdefault((key, val), len(ids))
    return out


def _scales(qty: np.ndarray, cap: np.ndarray) -> tuple[np.ndarray, bool]:
    R = qty.shape[1]
    scale = np.ones(R)
    exact = True
    for r in range(R):
        vals = np.concatenate([qty[:, r], cap[:, r]])
        vals = vals[vals > 0]
        if vals.size == 0:
            continue
        found = None
        for k in range(10):
            x = vals * 10.0 ** k
            if x.max() >= _MAX_INT:
                break
            if np.all(np.abs(x - np.round(x)) <= _TOL * np.maximum(1.0, x)):
                g = int(np.gcd.reduce(np.round(x).astype(np.int64)))
                found = 10.0 ** k / max(g, 1)
                break
        if found is None:
            found = 2.0 ** 40 / float(vals.max())
            exact = False
        scale[r] = found
    return scale, exact


def _to_int(x: np.ndarray, scale: np.ndarray, up: bool) -> np.ndarray:
    y = x * scale
    near = np.abs(y - np.round(y)) <= _TOL * np.maximum(1.0, np.abs(y))
    out = np.where(near, np.round(y), np.ceil(y) if up else np.floor(y))
    return out.astype(np.int64)


def _bin_bound(qty, cap, mult, compat, spread, count) -> np.ndarray:
    """(K,) bins per class no optimal packing needs to exceed (module docstring)."""
    K = cap.shape[0]
    out = np.zeros(K, np.int64)
    for k in range(K):
        on = compat[:, k]
        if not on.any():
            continue
        units = int(mult[on].sum())
        load = (qty[on] * mult[on, None]).sum(axis=0).astype(float)
        c = cap[k].astype(float)
        share = float(np.sum(np.where(c > 0, load / np.where(c > 0, c, 1.0), 0.0)))
        anti = int(mult[on & (spread >= 0)].sum())
        bound = int(math.floor(2.0 * share)) + 1 + anti
        out[k] = min(int(count[k]), units, bound)
    return out


def _dominated(kinds, cap, cost, compat, count, need) -> np.ndarray:
    """(K,) bool: new-node classes no optimal packing needs. Class B is dominated
    by class A when A costs no more, holds at least as much in every column,
    takes every item B takes, and A's launch room is not binding (it covers the
    bins A could ever need, ``need`` counting all demand A may take, which
    includes B's): B's bins can then be swapped for A's at no extra cost. Of two
    identical classes the later one is dropped."""
    K = len(kinds)
    out = np.zeros(K, bool)
    new = np.flatnonzero(kinds == NEW)
    for b in new.tolist():
        for a in new.tolist():
            if a == b or out[a] or cost[a] > cost[b] or count[a] < need[a]:
                continue
            if not (np.all(cap[a] >= cap[b]) and np.all(compat[:, a] >= compat[:, b])):
                continue
            same = cost[a] == cost[b] and np.array_equal(cap[a], cap[b]) and \
                np.array_equal(compat[:, a], compat[:, b])
            if same and a > b:
                continue
            out[b] = True
            break
    return out


def _notes(p: Problem, alive) -> list[str]:
    """Why a plan of this tick may not compare with the model's optimum."""
    out = []
    if p.has_constraint:
        out.append("a request_resources() constraint (its launches are not modelled)")
    if p.node_ippr["attached"].any():
        out.append("in-place resize (IPPR) nodes (a resize changes capacity)")
    if p.node_outdated.any():
        out.append("outdated nodes (Ray packs demand onto them, quirk Q1)")
    have = np.bincount(p.node_type[alive], minlength=p.T)
    if (p.type_configured & (have > p.type_max)).any():
        out.append("a type above max_worker_nodes (its cut is a policy choice)")
    if 0 <= p.max_num_nodes < int(alive.sum()):
        out.append("more nodes than max_num_nodes (the cut is a policy choice)")
    return out
