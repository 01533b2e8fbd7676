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
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.fits import BIG_COUNT, anti_mask, fit_count, selector_mask
from .cost import Costs
from .state import State


def _order(costs: Costs, qty: np.ndarray, gpu_col: int) -> np.ndarray:
    """Rows GPU demand first, then largest normalised size, then index."""
    size = costs.size(qty)
    gpu = qty[:, gpu_col] > 0 if gpu_col >= 0 else np.zeros(len(qty), bool)
    return np.lexsort((np.arange(len(qty)), -size, ~gpu))


def on_existing(st: State, costs: Costs, rows, qty, want, source: int, keep_gpu: bool,
                out: list, tight: bool = False) -> np.ndarray:
    """Place what fits on alive slots; returns the units left per row. ``tight``:
    among equally advanced nodes, the one left with the least normalised room
    first (best fit) instead of the lowest slot."""
    p = st.p
    left = np.asarray(want, np.int64).copy()
    view = st.view(source)
    g = p.gpu_col
    for i in _order(costs, qty, g).tolist():
        if left[i] == 0:
            continue
        M = st.M
        q = qty[i]
        r = int(rows[i])
        ok = st.alive[:M] & selector_mask(p, r, st.label[:M]) & anti_mask(p, r, st.label[:M])
        fit = np.where(ok, fit_count(view[:M], q), 0)
        anti = p.req.anti[r, 0] >= 0
        if anti:
            fit = np.minimum(fit, 1)
        cand = np.flatnonzero(fit > 0)
        if cand.size == 0:
            continue
        mismatch = st.gpu[cand] & ~(q[g] > 0) if (keep_gpu and g >= 0) else np.zeros(cand.size, bool)
        if tight:
            k = np.minimum(fit[cand], left[i])
            room = np.clip(view[cand] - k[:, None] * q, 0.0, None) @ costs.inv_ref
            order = np.lexsort((cand, room, -st.ready[cand], mismatch))
        else:
            order = np.lexsort((cand, -st.ready[cand], mismatch))
        for m in cand[order].tolist():
            if left[i] == 0:
                break
            n = int(min(fit[m], left[i]))
            _put(st, source, m, i, n, q, r, anti, out)
            left[i] -= n
    return left


def _put(st: State, source: int, m: int, i: int, n: int, q, r: int, anti: bool,
         out: list) -> None:
    view = st.view(source)          # looked up each time: a launch may grow the arrays
    view[m] = np.maximum(view[m] - n * q, 0.0)
    st.received[m] = True
    if anti:
        key, val = (int(x) for x in st.p.req.anti[r])
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
    conf = p.type_configured
    for i in range(S):
        r = int(rows[i])
        out[i] = conf & (fit_count(p.type_free, qty[i]) > 0) \
            & selector_mask(p, r, p.type_label) & anti_mask(p, r, p.type_label)
    g = p.gpu_col
    if keep_gpu and g >= 0:
        room = np.asarray([st.can_launch(t) for t in range(p.T)])
        no_gpu = qty[:, g] <= 0
        cpu_ok = (out & ~costs.type_gpu[None, :] & room[None, :]).any(axis=1)
        out[no_gpu & cpu_ok] &= ~costs.type_gpu[None, :]
    return out


def trial(free0: np.ndarray, qty: np.ndarray, avail: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """(S',) units of each row one fresh node (free room ``free0`` (R,)) takes, by
    the dot-product rule. ``groups`` (S',): anti-affinity group of each row (-1
    none); a node takes at most one unit of a group."""
    S = len(avail)
    k = np.zeros(S, np.int64)
    rem = free0.astype(float).copy()
    inv = np.where(free0 > 0, 1.0 / np.where(free0 > 0, free0, 1.0), 0.0)
    qn = qty * inv
    pos = qty > 0
    safe_q = np.where(pos, qty, 1.0)
    taken_groups: set = set()
    while True:
        cand = avail > k
        if not cand.any():
            break
        ratio = np.where(pos, rem[None, :] / safe_q, np.inf).min(axis=1)
        fit = np.where(np.isinf(ratio), BIG_COUNT,
                       np.floor(np.clip(ratio, 0.0, None) * (1.0 + 1e-12))).astype(np.int64)
        cand &= fit >= 1
        for i in np.flatnonzero(cand & (groups >= 0)).tolist():
            if int(groups[i]) in taken_groups:
                cand[i] = False
        if not cand.any():
            break
        score = np.where(cand, qn @ (rem * inv), -np.inf)
        i = int(np.argmax(score))
        if groups[i] >= 0:
            take = 1
            taken_groups.add(int(groups[i]))
        else:
            take = max(1, int(min(avail[i] - k[i], fit[i])) // 8)
        k[i] += take
        rem = np.maximum(rem - take * qty[i], 0.0)
    return k


def on_new(st: State, costs: Costs, rows, qty, want, source: int, keep_gpu: bool,
           fill_credit: float, out: list) -> np.ndarray:
    """Launch nodes for what is left (module docstring); returns units left per row."""
    p = st.p
    left = np.asarray(want, np.int64).copy()
    if not left.any():
        return left
    allowed = allowed_types(st, costs, rows, qty, keep_gpu)
    groups = _anti_groups(p, rows)
    size = costs.size(qty)
    while left.any():
        types = np.asarray([t for t in range(p.T)
                            if st.can_launch(t) and (allowed[:, t] & (left > 0)).any()], np.int64)
        if types.size == 0:
            break
        demand = np.stack([(allowed[:, t] * left) @ qty for t in types.tolist()])
        ceq, fit_rel = costs.fit(types, demand)
        best = None
        for j, t in enumerate(types.tolist()):
            avail = np.where(allowed[:, t], left, 0)
            k = trial(p.type_free[t], qty, avail, groups)
            filled = float(k @ size)
            if filled <= 0:
                continue
            fill = min(1.0, filled / ceq[j]) if ceq[j] > 0 else 1.0
            score = fit_rel[j] * (fill_credit + (1.0 - fill_credit) * fill)
            key = (score, filled, -t)
            if best is None or key > best[0]:
                best = (key, t, k)
        if best is None:
            break
        _, t, k = best
        on = k > 0
        m = max(1, int((left[on] // k[on]).min()))
        m = min(m, int(st.type_room[t]))
        if st.global_room >= 0:
            m = min(m, st.global_room)
        for _ in range(m):
            kk = np.minimum(k, left)
            if not kk.any():
                break
            slot = st.launch(t)
            for i in np.flatnonzero(kk).tolist():
                r = int(rows[i])
                _put(st, source, slot, i, int(kk[i]), qty[i], r, p.req.anti[r, 0] >= 0, out)
            left -= kk
    return left


def _anti_groups(p, rows) -> np.ndarray:
    out = np.full(len(rows), -1, np.int64)
    ids: dict = {}
    for i, r in enumerate(np.asarray(rows).tolist()):
        key, val = (int(x) for x in p.req.anti[r])
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
    gpu = qty[:, g] > 0 if g >= 0 else np.zeros(len(rows), bool)
    parts = (gpu, ~gpu) if keep_gpu and gpu.any() and (~gpu).any() else (np.ones(len(rows), bool),)
    for part in parts:
        idx = np.flatnonzero(part & (left > 0))
        if not idx.size:
            continue
        sub: list = []
        lp = on_existing(st, costs, rows[idx], qty[idx], left[idx], source, keep_gpu, sub, tight)
        if lp.any():
            lp = on_new(st, costs, rows[idx], qty[idx], lp, source, keep_gpu, fill_credit, sub)
        left[idx] = lp
        out.extend((m, int(idx[i]), n) for m, i, n in sub)
    return left
