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

from ._jit import njit, njit_leaf
from .fit import _fits_any
from .loop import _run_loop
from .nodeclass import _class_of, _class_table
from .pick import _pick_scratch
from .slots import _mark, _pick_loop, _win

_RUNNING = 5      # Status.RAY_RUNNING


@njit
def _journal(n, R, H, L, hist_dtype, label_dtype):
    """Room to save the demand rows and labels of n slots."""
    return (np.empty(n, dtype=np.int64), np.empty((n, R)), np.empty((n, R), dtype=np.bool_),
            np.empty((n, R), dtype=np.bool_), np.empty(n, dtype=np.bool_),
            np.empty(n, dtype=np.bool_), np.empty((n, H), dtype=hist_dtype),
            np.empty(n, dtype=np.int64), np.empty((n, L), dtype=label_dtype))


@njit_leaf
def _save(j, m, keep, src, label):
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    keep[0][j] = m
    for r in range(free.shape[1]):
        keep[1][j, r], keep[2][j, r], keep[3][j, r] = free[m, r], present[m, r], placed_res[m, r]
    for h in range(hist.shape[1]):
        keep[6][j, h] = hist[m, h]
    for c in range(label.shape[1]):
        keep[8][j, c] = label[m, c]
    keep[4][j], keep[5][j], keep[7][j] = placed_gpu[m], placed_any[m], nhist[m]


@njit_leaf
def _restore(n, keep, src, label):
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    for j in range(n):
        m = keep[0][j]
        for r in range(free.shape[1]):
            free[m, r], present[m, r], placed_res[m, r] = keep[1][j, r], keep[2][j, r], \
                keep[3][j, r]
        for h in range(hist.shape[1]):
            hist[m, h] = keep[6][j, h]
        for c in range(label.shape[1]):
            label[m, c] = keep[8][j, c]
        placed_gpu[m], placed_any[m], nhist[m] = keep[4][j], keep[5][j], keep[7][j]


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
    total, label, typ, status = slots[0], slots[2], slots[3], slots[4]
    free = src[0]
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
    cls = np.full(total.shape[0], -1, dtype=np.int32)   # IDX, as the Python packer's
    pend0 = 0
    for i in range(nn):
        if status[cur[i]] != _RUNNING:
            pend0 += 1
    # A class is founded at most once per slot seen, per commit and per undo.
    n_tab = pend0 + 2 * units + 1
    tab = _class_table(n_tab, R, L, label.dtype)
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
    scr = _pick_scratch(n_tab, R, K_max, H, src[5].dtype, label.dtype)
    changed = np.empty(K_max, dtype=np.int64)
    cands = np.empty(C_max, dtype=nodes.dtype)
    tail = np.empty(cap_nodes, dtype=nodes.dtype)
    alive = np.zeros(C_max, dtype=np.bool_)
    valid = np.zeros(C_max, dtype=np.bool_)
    did = np.zeros(C_max, dtype=np.bool_)
    tk_all = np.zeros(C_max * K_max, dtype=np.int64)     # a gang's (C, K) view is contiguous
    ks = (np.zeros(C_max, dtype=np.int64), np.zeros(C_max, dtype=np.int64),
          np.zeros(C_max, dtype=np.int64), np.zeros(C_max), np.zeros(C_max))
    avail = np.zeros(T, dtype=np.int64)
    # (no classes among templates, template mode and batching on): read from an
    # array so the template loop compiles for the Python caller's types, not literals.
    opts = np.ones(2, dtype=np.int64)
    for g in range(G):
        runs = g_run[g_ptr[g]: g_ptr[g + 1]]
        left = g_cnt[g_ptr[g]: g_ptr[g + 1]].copy()
        K = runs.shape[0]
        scratch = np.zeros(K, dtype=np.int64)
        chg = changed[:K]
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
                # A candidate that holds no unit of anything places nothing.
                valid[nc] = live.shape[0] > 0 and not fits[i]
                nc += 1
        for i in range(nc):
            m = cands[i]
            if cls[m] < 0 and status[m] != _RUNNING:
                cls[m] = _class_of(m, tab, slots, src, ghash)
        ncls = tab[9][0]
        alive[:nc] = True
        did[:nc] = False
        tk = tk_all[: C_max * K].reshape((C_max, K))
        for i in range(nc):
            if valid[i]:
                tk[i] = 0
        # §4.3 existing nodes, in list order.
        nw = 0
        while left.sum() > 0 and alive[:nc].any():
            i = _pick_loop(cands, nc, alive, valid, tk, did, ks, cls, ncls, slots, src,
                           implicit, exact, runs, left, rq, gpu_col, conserve_gpu, scr)
            if i < 0:
                break
            m = cands[i]
            _save(nkeep, m, keep, src, label)
            nkeep += 1
            _mark(m, marks, ghash)
            cls[m] = -1
            _win(m, i, alive, valid, tk, nc, src, slots, implicit, exact, runs, left, rq,
                 scratch, chg)
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
            won = np.empty(left.sum(), dtype=np.int64)
            k, left, M1, _, _, _, tmpl = _run_loop(
                cands, np.int64(nc), alive, valid, tk, did, ks, cls, opts[0], opts[0], slots,
                src, marks, ghash, implicit, exact, runs, left, rq, gpu_col, conserve_gpu,
                opts[1] > 0, avail, room, opts[1] > 0, M, won)
            from_tmpl[M - M0: M1 - M0] = tmpl
            M = M1
            nxt[nw: nw + k] = won[:k]
            nw += k
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
