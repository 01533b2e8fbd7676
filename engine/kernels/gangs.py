"""Every placement group of a tick in one call (§3.7): per gang, Ray's
``_try_schedule`` over the current node list (pre-filter, existing nodes with
NodeStateCache classes, then new nodes from templates) and all or nothing.

This is engine/packer.py's ``Packer.run`` for the demand source, one pick at a
time, without the in-place-resize pass (the caller keeps gangs in Python when a
node has IPPR attached). Packer.run is its slow readable twin; the tests
compare the two on random problems.

Array groups, as tuples:
  slots  (total, order, label, type, status, kind, rec, prio, avail)
  src    (free, present, placed_res, placed_gpu, placed_any, hist, nhist)  demand
  marks  (rcls, crcls, lcls, clcls)  class caches a changed slot leaves
  ghash  (M,) the digest of each slot's loose key (NaN: to compute), kept
         between calls; whoever changes a slot's rows sets it to NaN.

A non-running slot's class is looked up once and kept until the slot changes;
classes are found by digest and confirmed by comparing the whole key.
"""
import numpy as np

from numba import types
from numba.typed import Dict

from ._jit import njit
from .fit import _fits_any
from .pack import _commit
from .pick import _invalidate, _refresh_pick

_RUNNING = 5      # Status.RAY_RUNNING


@njit
def _listed(order_row, R):
    out = np.zeros(R, dtype=np.bool_)
    for j in range(order_row.shape[0]):
        if order_row[j] >= 0:
            out[order_row[j]] = True
    return out


@njit
def _loose_hash(m, slots, src, lm):
    """A digest of slot m's loose key: equal keys give equal digests (a float
    chain over the columns, an integer sum over the labels, which is wide)."""
    total, label, typ, kind = slots[0], slots[2], slots[3], slots[5]
    free, present = src[0], src[1]
    h = typ[m] * 31.0 + kind[m]
    for r in range(total.shape[1]):
        h = h * 1.0000001 + (total[m, r] + 0.5 if lm[r] else 0.25)
        h = h * 1.0000003 + (free[m, r] + 0.5 if present[m, r] else 0.25)
    acc = np.int64(0)
    row = label[m]
    for j in range(row.shape[0]):
        acc += (np.int64(row[j]) + 2) * (2 * j + 1)
    return h * 1.0000007 + (acc % 1000003)


@njit
def _class_table(n, R, L, label_dtype):
    """Room for n classes: each keeps a copy of its key, so a class outlives the
    slot that founded it. (digest -> first class, next class of equal digest,
    type, kind, listed, totals, present, free, labels, [classes used])."""
    head = Dict.empty(key_type=types.float64, value_type=types.int64)
    return (head, np.full(n, -1, dtype=np.int64), np.empty(n, dtype=np.int64),
            np.empty(n, dtype=np.int64), np.empty((n, R), dtype=np.bool_), np.empty((n, R)),
            np.empty((n, R), dtype=np.bool_), np.empty((n, R)),
            np.empty((n, L), dtype=label_dtype), np.zeros(1, dtype=np.int64))


@njit
def _same_key(c, m, tab, slots, src, lm):
    """Whether slot m's loose key equals class c's: type, kind, listed totals,
    availability and labels."""
    total, label, typ, kind = slots[0], slots[2], slots[3], slots[5]
    free, present = src[0], src[1]
    if tab[2][c] != typ[m] or tab[3][c] != kind[m]:
        return False
    for r in range(total.shape[1]):
        if tab[4][c, r] != lm[r] or tab[6][c, r] != present[m, r]:
            return False
        if lm[r] and tab[5][c, r] != total[m, r]:
            return False
        if present[m, r] and tab[7][c, r] != free[m, r]:
            return False
    for j in range(label.shape[1]):
        if tab[8][c, j] != label[m, j]:
            return False
    return True


@njit
def _class_of(m, tab, slots, src, ghash):
    """Slot m's class (Ray's NodeStateCache key, compared exactly), founding a
    new one when no class has its key."""
    R = slots[0].shape[1]
    lm = _listed(slots[1][m], R)
    if np.isnan(ghash[m]):
        ghash[m] = _loose_hash(m, slots, src, lm)
    h = ghash[m]
    head, nxt = tab[0], tab[1]
    c = head[h] if h in head else -1
    last = -1
    while c >= 0:
        if _same_key(c, m, tab, slots, src, lm):
            return c
        last = c
        c = nxt[c]
    c = tab[9][0]
    tab[9][0] = c + 1
    if last < 0:
        head[h] = c
    else:
        nxt[last] = c
    tab[2][c], tab[3][c] = slots[3][m], slots[5][m]
    tab[4][c], tab[5][c] = lm, slots[0][m]
    tab[6][c], tab[7][c] = src[1][m], src[0][m]
    tab[8][c] = slots[2][m]
    return c


@njit
def _pick_loop(cands, nc, alive, valid, tk, did, ks, cls, ncls, slots, src, implicit, exact,
               runs, left, rq, gpu_col, conserve_gpu):
    """One pick of the loop: the position of the best candidate, or -1."""
    total, order, label, rec, prio, avail = (slots[0], slots[1], slots[2], slots[6], slots[7],
                                             slots[8])
    free, present, placed_res, placed_gpu, hist, nhist = (src[0], src[1], src[2], src[3],
                                                          src[5], src[6])
    return _refresh_pick(cands[:nc], alive[:nc], valid[:nc], cls, ncls, total, order, free,
                         present, placed_res, placed_gpu, label, hist, nhist, rec, prio, avail,
                         implicit, exact, runs, left, rq, gpu_col, conserve_gpu, tk[:nc],
                         did[:nc], ks[0][:nc], ks[1][:nc], ks[2][:nc], ks[3][:nc], ks[4][:nc])


@njit
def _win(m, i, alive, valid, tk, nc, src, slots, implicit, exact, runs, left, rq, scratch):
    """Commit candidate i (slot m) and mark stale what its pick changed;
    returns the new remaining counts."""
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    label = slots[2]
    tau = tk[i].copy()
    _commit(m, free, present, placed_res, placed_gpu, placed_any, label, hist, nhist,
            implicit, exact, runs, left, rq, scratch)
    new_left = left - tau
    alive[i] = False
    changed = np.flatnonzero(left != new_left)
    _invalidate(valid[:nc], tk[:nc], changed, left, new_left)
    return new_left


@njit
def _clone(s, m, slots, src):
    total, order, label, typ, status, kind, rec, prio, avail = slots
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    total[s], order[s], label[s] = total[m], order[m], label[m]
    typ[s], status[s], kind[s], rec[s], prio[s], avail[s] = (typ[m], status[m], kind[m],
                                                             rec[m], prio[m], avail[m])
    free[s], present[s], placed_res[s] = free[m], present[m], placed_res[m]
    placed_gpu[s], placed_any[s], hist[s], nhist[s] = (placed_gpu[m], placed_any[m], hist[m],
                                                      nhist[m])


@njit
def _journal(n, R, H, L, hist_dtype, label_dtype):
    """Room to save the demand rows and labels of n slots."""
    return (np.empty(n, dtype=np.int64), np.empty((n, R)), np.empty((n, R), dtype=np.bool_),
            np.empty((n, R), dtype=np.bool_), np.empty(n, dtype=np.bool_),
            np.empty(n, dtype=np.bool_), np.empty((n, H), dtype=hist_dtype),
            np.empty(n, dtype=np.int64), np.empty((n, L), dtype=label_dtype))


@njit
def _save(j, m, keep, src, label):
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    keep[0][j] = m
    keep[1][j], keep[2][j], keep[3][j] = free[m], present[m], placed_res[m]
    keep[4][j], keep[5][j], keep[6][j], keep[7][j] = (placed_gpu[m], placed_any[m], hist[m],
                                                      nhist[m])
    keep[8][j] = label[m]


@njit
def _restore(n, keep, src, label):
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    for j in range(n):
        m = keep[0][j]
        free[m], present[m], placed_res[m] = keep[1][j], keep[2][j], keep[3][j]
        placed_gpu[m], placed_any[m], hist[m], nhist[m] = (keep[4][j], keep[5][j], keep[6][j],
                                                          keep[7][j])
        label[m] = keep[8][j]


@njit
def _pack_gangs(nodes, M, g_ptr, g_run, g_cnt, pristine, type_max, type_configured,
                max_num_nodes, slots, src, marks, ghash, implicit, exact, rq, gpu_col,
                conserve_gpu):
    """Schedule gangs 0..G-1 (already in Ray's order) one after another.

    nodes: the node list (slot ids); M: slots in use (clones go at M, M+1, ...
    and the arrays must have room for every unit of every gang); g_ptr/g_run/
    g_cnt: each gang's runs (request row, units) in Ray's order; pristine (T,)
    the template slot of each configured type (-1 otherwise).
    Returns (infeasible (G,), new node list, new M, template of each new slot).
    """
    total, order, label, typ, status = slots[0], slots[1], slots[2], slots[3], slots[4]
    free = src[0]
    rcls, crcls, lcls, clcls = marks
    qty, cols, ncols = rq[0], rq[1], rq[2]
    G = g_ptr.shape[0] - 1
    T = pristine.shape[0]
    R = total.shape[1]
    H = src[5].shape[1]
    L = label.shape[1]
    M0 = M
    bad = np.zeros(G, dtype=np.bool_)
    units = 0
    for g in range(G):
        units += g_cnt[g_ptr[g]: g_ptr[g + 1]].sum()
    cap_nodes = nodes.shape[0] + units
    cur = np.empty(cap_nodes, dtype=nodes.dtype)
    nn = nodes.shape[0]
    cur[:nn] = nodes
    nxt = np.empty(cap_nodes, dtype=nodes.dtype)
    # Class of each non-running slot (-1: running, or to look up again).
    cls = np.full(total.shape[0], -1, dtype=np.int64)
    pend0 = 0
    for i in range(nn):
        if status[cur[i]] != _RUNNING:
            pend0 += 1
    # A class is founded at most once per slot seen, per commit and per undo.
    tab = _class_table(pend0 + 2 * units + 1, R, L, label.dtype)
    from_tmpl = np.full(total.shape[0] - M0, -1, dtype=np.int64)
    # Nodes of each type in the list (only launches change it).
    have = np.zeros(T, dtype=np.int64)
    for i in range(nn):
        have[typ[cur[i]]] += 1
    # Scratch for the largest gang, reused by every gang.
    K_max, g_max = 1, 1
    for g in range(G):
        K_max = max(K_max, g_ptr[g + 1] - g_ptr[g])
        g_max = max(g_max, g_cnt[g_ptr[g]: g_ptr[g + 1]].sum())
    C_max = cap_nodes + T + g_max
    keep = _journal(g_max, R, H, L, src[5].dtype, label.dtype)
    cands = np.empty(C_max, dtype=nodes.dtype)
    tail = np.empty(cap_nodes, dtype=nodes.dtype)
    alive = np.zeros(C_max, dtype=np.bool_)
    valid = np.zeros(C_max, dtype=np.bool_)
    did = np.zeros(C_max, dtype=np.bool_)
    tk_all = np.zeros((C_max, K_max), dtype=np.int64)
    ks = (np.zeros(C_max, dtype=np.int64), np.zeros(C_max, dtype=np.int64),
          np.zeros(C_max, dtype=np.int64), np.zeros(C_max), np.zeros(C_max))
    avail = np.zeros(T, dtype=np.int64)
    for g in range(G):
        runs = g_run[g_ptr[g]: g_ptr[g + 1]]
        left = g_cnt[g_ptr[g]: g_ptr[g + 1]].copy()
        K = runs.shape[0]
        scratch = np.zeros(K, dtype=np.int64)
        Mg = M
        nkeep = 0               # journal entries: existing slots committed by this gang
        # §4.2 pre-filter: running nodes that hold no unit of any live shape wait at the end.
        live = np.unique(runs[left > 0])
        fits = _fits_any(free, cur[:nn], live, qty, cols, ncols)
        nc = 0
        nt = 0
        for i in range(nn):
            m = cur[i]
            if status[m] == _RUNNING and not fits[i] and live.shape[0] > 0:
                tail[nt] = m
                nt += 1
            else:
                cands[nc] = m
                nc += 1
        for i in range(nc):
            m = cands[i]
            if cls[m] < 0 and status[m] != _RUNNING:
                cls[m] = _class_of(m, tab, slots, src, ghash)
        ncls = tab[9][0]
        alive[:nc] = True
        valid[:nc] = False
        did[:nc] = False
        tk = tk_all[:, :K]
        if live.shape[0] > 0:
            none = _fits_any(free, cands[:nc], live, qty, cols, ncols)
            for i in range(nc):
                if not none[i]:
                    valid[i] = True       # holds no unit of anything: places nothing
                    tk[i] = 0
        # §4.3 existing nodes, in list order.
        nw = 0
        while left.sum() > 0 and alive[:nc].any():
            i = _pick_loop(cands, nc, alive, valid, tk, did, ks, cls, ncls, slots, src,
                           implicit, exact, runs, left, rq, gpu_col, conserve_gpu)
            if i < 0:
                break
            m = cands[i]
            _save(nkeep, m, keep, src, label)
            nkeep += 1
            rcls[m] = -1
            crcls[m] = -1
            lcls[m] = -2
            clcls[m] = -2
            ghash[m] = np.nan
            cls[m] = -1
            left = _win(m, i, alive, valid, tk, nc, src, slots, implicit, exact, runs, left,
                        rq, scratch)
            nxt[nw] = m
            nw += 1
        for i in range(nc):
            if alive[i]:
                nxt[nw] = cands[i]
                nw += 1
        nxt[nw: nw + nt] = tail[:nt]
        nw += nt
        # §4.5 new nodes: one template per type with room, in config order.
        if left.sum() > 0:
            nc = 0
            for t in range(T):
                avail[t] = type_max[t] - have[t] if type_configured[t] else 0
                if avail[t] > 0:
                    cands[nc] = pristine[t]
                    alive[nc] = True
                    valid[nc] = False
                    nc += 1
            room = -1 if max_num_nodes < 0 else max(0, max_num_nodes - nw)
            launched = 0
            while left.sum() > 0 and alive[:nc].any():
                if room >= 0 and launched >= room:
                    break
                i = _pick_loop(cands, nc, alive, valid, tk, did, ks, cls, ncls, slots, src,
                               implicit, exact, runs, left, rq, gpu_col, conserve_gpu)
                if i < 0:
                    break
                m = cands[i]
                s = M
                M += 1
                _clone(s, m, slots, src)
                from_tmpl[s - M0] = m
                ghash[s] = np.nan
                left = _win(s, i, alive, valid, tk, nc, src, slots, implicit, exact, runs,
                            left, rq, scratch)
                nxt[nw] = s
                nw += 1
                launched += 1
                t = typ[m]
                avail[t] -= 1
                if avail[t] > 0:
                    cands[nc] = m          # a fresh template of the type, at the end
                    alive[nc] = True
                    valid[nc] = False
                    nc += 1
        if left.sum() > 0:                 # all or nothing: put everything back
            bad[g] = True
            _restore(nkeep, keep, src, label)
            for j in range(nkeep):
                ghash[keep[0][j]] = np.nan
                cls[keep[0][j]] = -1
            M = Mg
            continue
        for j in range(Mg, M):
            have[typ[j]] += 1
        cur, nxt = nxt, cur
        nn = nw
    return bad, cur[:nn].copy(), M, from_tmpl[: M - M0].copy()
