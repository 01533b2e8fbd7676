"""Placing units on a tick's nodes: existing nodes first, then new ones.

A batch is a list of rows: request row ``rows[i]`` (its selectors and
anti-affinity), bundle ``qty[i]`` and ``want[i]`` units. Both steps return the
placements as (slot, i, units) and what is left per row.

- **Existing nodes** (alive slots, including nodes this tick already launched):
  rows largest first (GPU demand first); a row's units go first-fit over the
  nodes that take them, ordered: without GPUs for demand without GPUs (GPU
  nodes kept for GPU work), most advanced first (running, then booting, then
  new: what is left unneeded is the cheapest to drop), lowest slot. (A
  tightest-fit order was measured no better on the openb replay.)
- **New nodes**: while units are left, every type with launch room is tried:
  one node is filled from the remaining units by the dot-product rule (the unit
  whose normalised bundle points most along the node's normalised free room
  next; Panigrahy et al. 2011), then the types are scored by shape fit per price
  discounted by how little of the node this tick fills (``fill_credit``). The
  best type's packing is repeated for as many identical nodes as the counts
  allow, then the types are scored again.

How it runs: a row's walk over existing nodes is the numba kernel
``effp_existing._fill_row`` (over ``State.walk``: only the nodes that could hold
the bundle at the start of the tick, plus the ones launched since); the choice
of new nodes (every candidate type's trial and score, the counts) is the kernel
``effp_choose._choose_launches``; the identical nodes of a packing are launched at once
(``State.launch_many``). Changes to existing slots are journaled
(``State.keep_rows``) so that snapshots are cheap. Placements go to ``out``: a
list of (slot, i, units) triples, or a ``Chunks`` of arrays (the demand path).
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.kernels.effp_existing import _fill_row, _walk_order
from vecsched.engine.kernels.effp_choose import _choose_launches
from vecsched.engine.kernels.effp_fill import _dot_fill
from vecsched.engine.model.fits import FIT_SLACK, anti_mask, fit_count, selector_mask
from .cost import Costs
from .state import State


def _order(costs: Costs, qty: np.ndarray, gpu_col: int) -> np.ndarray:
    """Rows GPU demand first, then largest normalised size, then index."""
    size = costs.size(qty)
    gpu = qty[:, gpu_col] > 0 if gpu_col >= 0 else np.zeros(len(qty), bool)
    return np.lexsort((np.arange(len(qty)), -size, ~gpu))


def on_existing(st: State, costs: Costs, rows, qty, want, source: int, keep_gpu: bool,
                out, tight: bool = False) -> np.ndarray:
    """Place what fits on alive slots; returns the units left per row. ``tight``:
    among equally advanced nodes, the one left with the least normalised room
    first (best fit) instead of the lowest slot. The walk over the nodes is the
    kernel ``effp_existing._fill_row``, over the nodes that could hold the row's
    bundle at the start of the tick (``State.walk``) and those launched since."""
    p = st.p
    left = np.array(want, np.int64)
    qty = np.ascontiguousarray(qty, np.float64)
    g = p.gpu_col
    M, N = st.M, st.N
    slots, counts, saved = st.scratch(M)
    view = st.view(source)
    spare_all = keep_gpu and g >= 0
    inv_ref = costs.inv_ref
    todo = _order(costs, qty, g).tolist() if len(qty) > 1 else range(len(qty))
    for i in todo:
        want_i = int(left[i])
        if want_i == 0:
            continue
        q = qty[i]
        r = int(rows[i])
        spare = bool(spare_all and not q[g] > 0)
        order = _walk_order(st.walk(source, q, spare), st.ready, st.gpu, spare, N, M)
        if not order.size:
            continue
        key, val = st.anti[r]
        n = _fill_row(view, order, st.ready, st.gpu, spare, _node_ok(st, r, M), st.label,
                      key, val, q, want_i, tight, inv_ref, slots, counts, saved)
        if n:
            placed = _record(st, source, slots[:n], saved[:n], i, counts[:n], key, val, out)
            left[i] = want_i - placed
    return left


def _node_ok(st: State, r: int, M: int) -> np.ndarray:
    """(M,) bool: slot may take request row r as far as liveness and label
    selectors go (anti-affinity is the kernel's)."""
    p = st.p
    if p.req.sel_ptr[r + 1] > p.req.sel_ptr[r]:
        return st.alive[:M] & selector_mask(p, r, st.label[:M])
    return st.alive


def _record(st: State, source: int, slots: np.ndarray, saved: np.ndarray, i: int,
            counts: np.ndarray, key: int, val: int, out) -> int:
    """Book the units the kernel placed on ``slots`` (their rows before it in
    ``saved``, for the journal): the nodes received demand, the row's
    anti-affinity label (``key`` >= 0) is set on them, (slot, i, units) go to
    ``out``; returns the units placed. ``slots``, ``saved`` and ``counts`` are
    views of the caller's scratch (``State.scratch``): copied to keep."""
    st.keep_rows(slots, source, saved)
    st.received[slots] = True
    if key >= 0:
        st.label[slots, key] = val
    out.add(slots.copy(), np.full(len(slots), i, np.int64), counts.copy())
    return int(counts.sum())


def _put(st: State, source: int, m: int, i: int, n: int, q, r: int, anti: bool,
         out: list) -> None:
    """n units of row i (request row r, bundle q) on slot m, one at a time."""
    st.keep_rows(np.asarray([m]), source)
    view = st.view(source)          # looked up each time: a launch may grow the arrays
    view[m] = np.maximum(view[m] - n * q, 0.0)
    st.received[m] = True
    if anti:
        key, val = st.anti[r]
        st.label[m, key] = val
    out.append((m, i, n))


def allowed_types(st: State, costs: Costs, rows, qty, keep_gpu: bool) -> np.ndarray:
    """(S', T) bool: a new node of type t may take a unit of row i (configured,
    fits a fresh node, selectors and anti-affinity hold on the type's labels,
    and GPU types are kept for GPU demand while a type without GPUs with
    launch room takes it)."""
    p = st.p
    S = len(rows)
    out = np.zeros((S, p.T), bool)
    for i in range(S):
        out[i] = _type_ok(st, int(rows[i]), qty[i])
    g = p.gpu_col
    if keep_gpu and g >= 0:
        room = launch_room(st)
        no_gpu = qty[:, g] <= 0
        cpu_ok = (out & ~costs.type_gpu[None, :] & room[None, :]).any(axis=1)
        out[no_gpu & cpu_ok] &= ~costs.type_gpu[None, :]
    return out


def _type_ok(st: State, r: int, q: np.ndarray) -> np.ndarray:
    """(T,) bool: a fresh node of each type may take a unit of bundle q with
    request row r's selectors and anti-affinity (type labels and capacities do
    not change in a tick: kept per (row, bundle) in ``st.type_ok``, which
    ``prime_type_ok`` fills for many rows at once)."""
    key = (r, q.tobytes())
    got = st.type_ok.get(key)
    if got is None:
        p = st.p
        got = st.type_ok[key] = p.type_configured & (fit_count(p.type_free, q) > 0) \
            & selector_mask(p, r, p.type_label) & anti_mask(p, r, p.type_label)
    return got


def prime_type_ok(st: State, rows: np.ndarray, qty: np.ndarray) -> None:
    """``_type_ok`` of every (request row, bundle) pair of ``rows`` (n,) and ``qty``
    (n, R), computed in a few array operations (the same arithmetic, row by row, as
    ``fit_count``, ``selector_mask`` and ``anti_mask``) and kept in ``st.type_ok``."""
    p = st.p
    qty = np.ascontiguousarray(qty, np.float64)
    if not len(rows):
        return
    tf = np.asarray(p.type_free, np.float64)
    pos = qty > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(pos[:, None, :], tf[None, :, :] / np.where(pos, qty, 1.0)[:, None, :],
                         np.inf).min(axis=2)
        fits = np.floor(ratio * (1.0 + FIT_SLACK)) >= 1
    ok = fits & p.type_configured[None, :]
    key, val = p.req.anti[rows, 0].astype(np.int64), p.req.anti[rows, 1]
    L = p.type_label.shape[1]
    has = (key >= 0) & (key < L)
    if has.any():
        ok[has] &= p.type_label[:, key[has]].T != val[has, None]
    for j in np.flatnonzero(p.req.sel_ptr[rows + 1] > p.req.sel_ptr[rows]).tolist():
        ok[j] &= selector_mask(p, int(rows[j]), p.type_label)
    for j in range(len(rows)):
        st.type_ok.setdefault((int(rows[j]), qty[j].tobytes()), ok[j])


def launch_room(st: State) -> np.ndarray:
    """(T,) bool: ``st.can_launch`` of every type."""
    return (st.type_room > 0) & (st.global_room != 0)


def trial(free0: np.ndarray, qty: np.ndarray, avail: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """(S',) units of each row one fresh node (free room ``free0`` (R,)) takes, by
    the dot-product rule (``effp_fill``). ``groups`` (S',): anti-affinity group
    of each row (-1 none); a node takes at most one unit of a group."""
    return _dot_fill(np.ascontiguousarray(free0, np.float64), np.ascontiguousarray(qty, np.float64),
                     np.asarray(avail, np.int64), np.asarray(groups, np.int64))


def on_new(st: State, costs: Costs, rows, qty, want, source: int, keep_gpu: bool,
           fill_credit: float, out: list) -> np.ndarray:
    """Launch nodes for what is left (module docstring); returns units left per row.
    The choice of types and counts is the kernel ``effp_choose._choose_launches``;
    the launches are made here, in its order."""
    p = st.p
    left = np.asarray(want, np.int64).copy()
    if not left.any():
        return left
    qty = np.ascontiguousarray(qty, np.float64)
    allowed = allowed_types(st, costs, rows, qty, keep_gpu)
    n, types, counts, units, left = _choose_launches(
        costs.type_free, st.type_room, int(st.global_room), allowed, left, qty,
        _anti_groups(p, rows), costs.size(qty), costs.price, costs.running_by_kind,
        costs.type_gpu, costs.fit_ref, float(fill_credit))
    for j in range(n):
        _launch_filled(st, source, int(types[j]), int(counts[j]), units[j], qty, rows, out)
    return left


def _launch_filled(st: State, source: int, t: int, m: int, kk: np.ndarray, qty, rows,
                   out: list) -> None:
    """Launch m nodes of type t, each holding kk (S',) units of the rows."""
    p = st.p
    first = st.launch_many(t, m)
    view = st.view(source)
    end = first + m
    room = view[first].copy()
    on = np.flatnonzero(kk).tolist()
    for i in on:
        room = np.maximum(room - int(kk[i]) * qty[i], 0.0)
    view[first:end] = room
    st.received[first:end] = True
    for i in on:
        key, val = st.anti[int(rows[i])]
        if key >= 0:
            st.label[first:end, key] = val
    rows_on = np.asarray(on, np.int64)
    out.add(np.repeat(np.arange(first, end, dtype=np.int64), len(on)),
            np.tile(rows_on, m), np.tile(kk[rows_on], m))


def _anti_groups(p, rows) -> np.ndarray:
    out = np.full(len(rows), -1, np.int64)
    ids: dict = {}
    for i, (key, val) in enumerate(p.req.anti[np.asarray(rows, np.int64)].tolist()):
        if key >= 0:
            out[i] = ids.setdefault((key, val), len(ids))
    return out


def place_batch(st: State, costs: Costs, rows, qty, want, source: int, keep_gpu: bool,
                fill_credit: float, out: list, tight: bool = False) -> np.ndarray:
    """Existing nodes, then new ones; returns the units left per row. With
    ``keep_gpu`` the rows with GPU demand go first, so that the rows without can
    use what the GPU nodes launched for them leave free (after every node
    without GPUs) before a node is launched for them."""
    left = np.asarray(want, np.int64).copy()
    g = st.p.gpu_col
    if len(rows) > 1 and keep_gpu and g >= 0:
        gpu = qty[:, g] > 0
        parts = (gpu, ~gpu) if gpu.any() and (~gpu).any() else (np.ones(len(rows), bool),)
    else:
        parts = (np.ones(len(rows), bool),)
    for part in parts:
        idx = np.flatnonzero(part & (left > 0))
        if not idx.size:
            continue
        sub = Chunks()
        lp = on_existing(st, costs, rows[idx], qty[idx], left[idx], source, keep_gpu, sub, tight)
        if lp.any():
            lp = on_new(st, costs, rows[idx], qty[idx], lp, source, keep_gpu, fill_credit, sub)
        left[idx] = lp
        slots, local, units = sub.arrays()
        if isinstance(out, Chunks):
            out.add(slots, idx[local], units)
        else:
            out.extend(zip(slots.tolist(), idx[local].tolist(), units.tolist()))
    return left


class Chunks:
    """Placements (slot, row, units) as arrays, in the order they were made: what
    ``place_batch`` fills when given one instead of a list of triples (the
    demand of a large tick is tens of thousands of them). ``append`` / ``extend``
    take triples too."""

    def __init__(self):
        self.parts: list = []

    def add(self, slots: np.ndarray, rows: np.ndarray, units: np.ndarray) -> None:
        if len(slots):
            self.parts.append((slots, rows, units))

    def append(self, triple) -> None:
        self.extend([triple])

    def extend(self, triples) -> None:
        a = np.asarray(list(triples), np.int64).reshape(-1, 3)
        self.add(a[:, 0], a[:, 1], a[:, 2])

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if not self.parts:
            z = np.zeros(0, np.int64)
            return z, z, z
        return tuple(np.concatenate([p[j] for p in self.parts]).astype(np.int64)
                     for j in range(3))
