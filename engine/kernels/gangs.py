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
classes are found by digest and confirmed by comparing the whole key. Only a
class's first member is a candidate of a gang's picks; the others wait in a
chain (``nxt``) and the next one takes its place, at its own position, when it
wins. A gang of one run reuses the trial walks of earlier gangs on slots that
have not changed since (kernels/walkcache.py).
"""
import numpy as np

from ._jit import njit, njit_leaf
from .fit import _fits_rows
from .fitindex import _fit_index, _holders
from .loop import _run_loop_on
from .nodeclass import _class_of, _class_table, _room_for
from .pick import _pick_scratch
from .slots import _mark, _pick_loop, _win
from .walkcache import _keep, _prefill, _walk_cache, _walk_class

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


@njit_leaf
def _by_key(a, key):
    """a sorted in place by key (insertion sort: a gang has tens of holders)."""
    for i in range(1, a.shape[0]):
        m = a[i]
        j = i
        while j > 0 and key[a[j - 1]] > key[m]:
            a[j] = a[j - 1]
            j -= 1
        a[j] = m


@njit
def _grown(a, n):
    b = np.full(max(n, 2 * a.shape[0]), -1, dtype=a.dtype)
    b[: a.shape[0]] = a
    return b


@njit_leaf
def _insert(j, i, nf, key, fc, alive, valid, did, tk, ks):
    """Slot j joins the candidates after position i, in list order; returns nf + 1."""
    p = i + 1
    while p < nf and key[fc[p]] < key[j]:
        p += 1
    for a in range(nf, p, -1):
        fc[a], alive[a], valid[a], did[a] = fc[a - 1], alive[a - 1], valid[a - 1], did[a - 1]
        for k in range(tk.shape[1]):
            tk[a, k] = tk[a - 1, k]
        ks[0][a], ks[1][a], ks[2][a] = ks[0][a - 1], ks[1][a - 1], ks[2][a - 1]
        ks[3][a], ks[4][a] = ks[3][a - 1], ks[4][a - 1]
    fc[p], alive[p], valid[p], did[p] = j, True, False, False
    return nf + 1


@njit
def _pack_gangs(nodes, M, g_ptr, g_run, g_cnt, g_shape, shape_row, pristine, type_max,
                type_configured, max_num_nodes, slots, src, marks, ghash, implicit, exact, rq,
                gpu_col, conserve_gpu):
    """Schedule gangs 0..G-1 (already in Ray's order) one after another.

    nodes: the node list (slot ids); M: slots in use (clones go at M, M+1, ...
    and the arrays must have room for every unit of every gang, at most the
    launches the types' max_workers leave); g_ptr/g_run/
    g_cnt: each gang's runs (request row, units) in Ray's order; g_shape: each
    run's resource shape, shape_row (S,) a request row of each shape; pristine
    (T,) the template slot of each configured type (-1 otherwise).
    Returns (infeasible (G,), new node list, new M, template of each new slot).

    Ray's node list is kept as an order key per slot: a gang moves its
    candidates (winners first, in pick order) in front of every other node and
    launches go at the end, so new keys are taken below the smallest and above
    the largest, and the nodes a gang does not visit keep theirs.
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
    nn = nodes.shape[0]
    cap_nodes = nn + units
    key = np.zeros(total.shape[0], dtype=np.int64)
    lst = np.empty(cap_nodes, dtype=np.int64)          # the list's slots, in no order
    pend = np.empty(cap_nodes, dtype=np.int64)         # its non-running slots, in order
    npend = 0
    nrun = 0
    running = np.empty(nn, dtype=np.int64)
    for i in range(nn):
        m = nodes[i]
        key[m] = i
        lst[i] = m
        if status[m] != _RUNNING:
            pend[npend] = m
            npend += 1
        else:
            running[nrun] = m
            nrun += 1
    front, back = np.int64(0), np.int64(nn)
    ix = _fit_index(shape_row, running[:nrun], free, qty, cols, ncols)
    mark = np.full(total.shape[0], -1, dtype=np.int64)
    # Class of each non-running slot (-1: running, or to look up again).
    cls = np.full(total.shape[0], -1, dtype=np.int32)   # IDX, as the Python packer's
    # A class is founded at most once per slot seen, per commit and per undo.
    tab = _class_table(npend + 64, R, L, label.dtype)     # grows as classes are founded
    from_tmpl = np.full(total.shape[0] - M0, -1, dtype=np.int64)
    # Nodes of each type in the list (only launches change it).
    have = np.zeros(T, dtype=np.int64)
    for i in range(nn):
        have[typ[nodes[i]]] += 1
    # Scratch for the largest gang, reused by every gang.
    K_max, g_max = 1, 1
    for g in range(G):
        K_max = max(K_max, g_ptr[g + 1] - g_ptr[g])
        g_max = max(g_max, g_cnt[g_ptr[g]: g_ptr[g + 1]].sum())
    C_max = cap_nodes + T + g_max
    keep = _journal(g_max, R, H, L, src[5].dtype, label.dtype)
    scr = _pick_scratch(tab[1].shape[0], R, K_max, H, src[5].dtype, label.dtype)
    changed = np.empty(K_max, dtype=np.int64)
    left_all = np.empty(K_max, dtype=np.int64)
    lm = np.empty(R, dtype=np.bool_)
    won_all = np.empty(g_max, dtype=np.int64)
    scratch_all = np.zeros(K_max, dtype=np.int64)
    cands = np.empty(C_max, dtype=np.int64)
    tcand = np.empty(C_max, dtype=np.int64)          # the template loop's candidates
    held = np.empty(max(nrun, 1), dtype=np.int64)
    block = np.empty(C_max, dtype=np.int64)
    fc = np.empty(C_max, dtype=np.int64)
    won_in = np.full(total.shape[0], -1, dtype=np.int64)   # the gang a slot last won in
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
    wc = _walk_cache(total.shape[0])
    solo = np.full(total.shape[0], -1, dtype=np.int32)   # picks see no classes
    nxt = np.full(total.shape[0], -1, dtype=np.int64)    # next member of the class
    # Per class, in the current gang: stamp, whether it holds a unit, last member.
    fst = np.full(tab[1].shape[0], -1, dtype=np.int64)
    fval = np.zeros(tab[1].shape[0], dtype=np.int64)
    tail = np.zeros(tab[1].shape[0], dtype=np.int64)
    for g in range(G):
        runs = g_run[g_ptr[g]: g_ptr[g + 1]]
        left = left_all[: g_ptr[g + 1] - g_ptr[g]]
        for k in range(left.shape[0]):
            left[k] = g_cnt[g_ptr[g] + k]
        if left.sum() == 0:
            continue                    # nothing to place: the list stays as it is
        K = runs.shape[0]
        scratch = scratch_all[:K]
        chg = changed[:K]
        Mg = M
        nkeep = 0               # journal entries: existing slots committed by this gang
        # §4.2 pre-filter: running nodes that hold no unit of any live shape wait at the end.
        if K == 1:                       # the usual gang: one run, nothing to sort
            live = runs
            shapes = g_shape[g_ptr[g]: g_ptr[g] + 1]
        else:
            live = np.unique(runs[left > 0])
            shapes = np.unique(g_shape[g_ptr[g]: g_ptr[g + 1]][left > 0])
        nh = _holders(ix, shapes, free, qty, cols, ncols, mark, g, held)
        hs = held[:nh]
        _by_key(hs, key)
        # Merge the holders and the pending nodes by key: the gang's candidates, and
        # apart the ones that hold a unit of something (the others place nothing,
        # so they never win; a class's members all hold or all do not).
        # A class is tried by its first member (Ray's NodeStateCache): only that
        # one is a candidate of the picks, the others wait in a chain behind it.
        tab = _room_for(tab, npend)       # at most one new class per pending node
        if fst.shape[0] < tab[1].shape[0]:
            fst, fval, tail = _grown(fst, tab[1].shape[0]), _grown(fval, tab[1].shape[0]), \
                _grown(tail, tab[1].shape[0])
        nc, nf, a, b = 0, 0, 0, 0
        while a < nh or b < npend:
            if b >= npend or (a < nh and key[hs[a]] < key[pend[b]]):
                m = hs[a]
                a += 1
                cands[nc] = m
                nc += 1
                fc[nf] = m
                nf += 1
                continue
            m = pend[b]
            b += 1
            cands[nc] = m
            nc += 1
            c = cls[m]
            if c < 0:
                c = cls[m] = _class_of(m, tab, slots, src, ghash, lm)
            if fst[c] != g:
                fst[c] = g
                fval[c] = _fits_rows(free, m, live, qty, cols, ncols)
                if fval[c]:
                    fc[nf] = m
                    nf += 1
                    tail[c] = m
                    nxt[m] = -1
            elif fval[c]:
                nxt[tail[c]] = m
                tail[c] = m
                nxt[m] = -1
        tk = tk_all[: C_max * K].reshape((C_max, K))
        for i in range(nf):
            alive[i] = True
            did[i] = False
            valid[i] = False
        # §4.3 existing nodes, in list order.
        e = _walk_class(runs, g_shape[g_ptr[g]], rq)
        if e >= 0:
            _prefill(fc, nf, valid, tk, did, ks, e, runs[0], left[0], slots, src, implicit, exact,
                     rq, wc)
        nw = 0
        while left.sum() > 0 and nw < nf:
            i = _pick_loop(fc, nf, alive, valid, tk, did, ks, solo, 0, slots, src,
                           implicit, exact, runs, left, rq, gpu_col, conserve_gpu, scr)
            if e >= 0 and nw == 0:
                _keep(fc, nf, valid, tk, did, ks, e, src, wc)
            if i < 0:
                break
            m = fc[i]
            wc[0][m] += 1
            _save(nkeep, m, keep, src, label)
            nkeep += 1
            _mark(m, marks, ghash)
            _win(m, i, alive, valid, tk, nf, src, slots, implicit, exact, runs, left, rq,
                 scratch, chg)
            if cls[m] >= 0:
                cls[m] = -1
                if nxt[m] >= 0:         # the next member now tries the class
                    nf = _insert(nxt[m], i, nf, key, fc, alive, valid, did, tk, ks)
            block[nw] = m
            won_in[m] = g
            nw += 1
        # §4.5 new nodes: one template per type with room, in config order.
        k = 0
        won = tcand[:0]
        if left.sum() > 0:
            nt = 0
            for t in range(T):
                avail[t] = type_max[t] - have[t] if type_configured[t] else 0
                if avail[t] > 0:
                    tcand[nt] = pristine[t]
                    alive[nt] = True
                    valid[nt] = False
                    nt += 1
            room = -1 if max_num_nodes < 0 else max(0, max_num_nodes - nn)
            won = won_all[: left.sum()]
            k, left, M1, _, _, _, tmpl = _run_loop_on(
                tcand, np.int64(nt), alive, valid, tk, did, ks, cls, opts[0], opts[0], slots,
                src, marks, ghash, implicit, exact, runs, left, rq, gpu_col, conserve_gpu,
                opts[1] > 0, avail, room, opts[1] > 0, M, won, scr)
            from_tmpl[M - M0: M1 - M0] = tmpl
            for s in range(M, M1):
                wc[0][s] += 1
            M = M1
        if left.sum() > 0:                 # all or nothing: put everything back
            bad[g] = True
            _restore(nkeep, keep, src, label)
            for j in range(nkeep):
                ghash[keep[0][j]] = np.nan
                cls[keep[0][j]] = -1
                wc[0][keep[0][j]] += 1
            M = Mg
            continue
        # The visited nodes go in front (winners first), launches at the end.
        front -= nc                        # the winners are candidates too
        npend = 0
        j = front
        for i in range(nw + nc):
            m = block[i] if i < nw else cands[i - nw]
            if i >= nw and won_in[m] == g:
                continue
            key[m] = j
            j += 1
            if status[m] != _RUNNING:
                pend[npend] = m
                npend += 1
        for j in range(k):
            m = won[j]
            key[m] = back
            back += 1
            lst[nn] = m
            nn += 1
            pend[npend] = m
            npend += 1
        for j in range(Mg, M):
            have[typ[j]] += 1
    out = lst[:nn]
    return bad, out[np.argsort(key[out])].astype(nodes.dtype), M, from_tmpl[: M - M0].copy()
