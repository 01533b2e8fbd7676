"""Every placement group of a tick in one call (§3.7): per gang, Ray's
``_try_schedule`` over the current node list (pre-filter, existing nodes with
NodeStateCache classes, then new nodes from templates) and all or nothing.

This is engine/raycompat/packer.py's ``Packer.run`` for the demand source, one pick at a
time, without the in-place-resize pass (the caller keeps gangs in Python when a
node has IPPR attached). Packer.run is its slow readable twin; the tests
compare the two on random problems.

Records are kernels/records.py's; ``ps.src`` is the demand source, and
``ps.marks.ghash`` (the digest of each slot's loose key, NaN: to compute) is
kept between calls: whoever changes a slot's rows sets it to NaN.

A non-running slot's class is looked up when it enters the list and again
when it wins in a placed gang; classes are found by digest and confirmed by
comparing the whole key, and keep their members in list order
(kernels/pendclass.py). Only a class's first member is a candidate of a gang's
picks; the others wait behind it and the next one takes its place, at its own
position, when it wins. A gang of one run reuses the trial walks of earlier gangs on slots that
have not changed since (kernels/walkcache.py).
"""
import numpy as np
from typing import NamedTuple

from ._jit import njit, njit_inner
from .fitindex import _fit_index, _unit_holders, _unit_index
from .listorder import NOUT, ONE, START, _list_order, _placed
from .loop import _run_loop
from .nodeclass import _class_of, _class_table, _room_for
from .pendclass import _firsts, _join_head, _join_tail, _leave, _pend_classes, _pend_room
from .pick import _pick_core, _pick_scratch
from .records import Cands, Classes, LoopMode, Source
from .runclass import _all_keys, _left, _materialize, _run_classes
from .slots import _mark, _win
from .sort import _sort_by
from .walkcache import _keep, _prefill, _walk_cache, _walk_class

_RUNNING = 5      # Status.RAY_RUNNING


class Journal(NamedTuple):
    """The demand rows and labels of the existing slots a gang changed, as they
    were before (entry j: slot[j]), to put back if the gang fails."""
    slot: np.ndarray        # (n,) i8
    rows: Source            # (n, ...) each a copy of the slot's demand rows
    label: np.ndarray       # (n, L) i4


@njit_inner(alloc=True)
def _journal(n, R, H, L):
    """Room to save the demand rows and labels of n slots."""
    rows = Source(np.empty((n, R), dtype=np.float64), np.empty((n, R), dtype=np.bool_),
                  np.empty((n, R), dtype=np.bool_), np.empty(n, dtype=np.bool_),
                  np.empty(n, dtype=np.bool_), np.empty((n, H), dtype=np.int32),
                  np.empty(n, dtype=np.int64))
    return Journal(np.empty(n, dtype=np.int64), rows, np.empty((n, L), dtype=np.int32))


@njit_inner(hot=True)
def _copy_rows(a, i, b, j, label_a, label_b):
    """Demand rows i of a (records.Source) and label row i of label_a into row
    j of b and label_b."""
    for r in range(a.free.shape[1]):
        b.free[j, r], b.present[j, r], b.placed_res[j, r] = (a.free[i, r], a.present[i, r],
                                                             a.placed_res[i, r])
    for h in range(a.hist.shape[1]):
        b.hist[j, h] = a.hist[i, h]
    for c in range(label_a.shape[1]):
        label_b[j, c] = label_a[i, c]
    b.placed_gpu[j], b.placed_any[j], b.nhist[j] = a.placed_gpu[i], a.placed_any[i], a.nhist[i]


@njit_inner
def _save(j, m, keep, ps):
    """Journal entry j: slot m's demand rows and labels as they are now."""
    keep.slot[j] = m
    _copy_rows(ps.src, m, keep.rows, j, ps.slots.label, keep.label)


@njit_inner
def _restore(n, keep, ps):
    """Put back the first n journal entries."""
    for j in range(n):
        _copy_rows(keep.rows, j, ps.src, keep.slot[j], keep.label, ps.slots.label)


@njit_inner
def _distinct(a, use, out):
    """The distinct values of a[k] where use[k] > 0, into out; returns how many."""
    n = 0
    for k in range(a.shape[0]):
        if use[k] <= 0:
            continue
        new = True
        for j in range(n):
            if out[j] == a[k]:
                new = False
                break
        if new:
            out[n] = a[k]
            n += 1
    return n


@njit_inner
def _insert(j, i, nf, key, cs):
    """Slot j joins the candidates cs[:nf] after position i, in list order;
    returns nf + 1."""
    p = i + 1
    while p < nf and key[cs.slot[p]] < key[j]:
        p += 1
    for a in range(nf, p, -1):
        cs.slot[a], cs.alive[a], cs.fresh[a] = cs.slot[a - 1], cs.alive[a - 1], cs.fresh[a - 1]
        cs.placed[a] = cs.placed[a - 1]
        for k in range(cs.taken.shape[1]):
            cs.taken[a, k] = cs.taken[a - 1, k]
        cs.label_score[a], cs.gpu_ok[a], cs.match[a] = (cs.label_score[a - 1],
                                                        cs.gpu_ok[a - 1], cs.match[a - 1])
        cs.util_min[a], cs.util_mean[a] = cs.util_min[a - 1], cs.util_mean[a - 1]
    cs.slot[p], cs.alive[p], cs.fresh[p], cs.placed[p] = j, True, False, False
    return nf + 1


@njit_inner
def _merge_by_key(a, b, key, out):
    """The slots of a and b (each in list order) merged in list order into out;
    returns how many."""
    i, j, n = 0, 0, 0
    while i < a.shape[0] or j < b.shape[0]:
        if j >= b.shape[0] or (i < a.shape[0] and key[a[i]] < key[b[j]]):
            out[n] = a[i]
            i += 1
        else:
            out[n] = b[j]
            j += 1
        n += 1
    return n


@njit_inner
def _reclass(won, nw, new, nnew, cls, pc, tab, ps, lm, rep):
    """After a placed gang: its non-running winners won[:nw] (pick order) leave
    their classes and join the head of their new ones; its launches new[:nnew]
    join the tail of theirs (``pc`` and ``tab`` have room for them)."""
    status, rq = ps.slots.status, ps.rq
    for i in range(nw):
        m = won[i]
        if status[m] != _RUNNING and cls[m] >= 0:
            _leave(pc, cls[m], m)
    for i in range(nw - 1, -1, -1):
        m = won[i]
        if status[m] != _RUNNING:
            c = _class_of(m, tab, ps, lm)
            cls[m] = c
            _join_head(pc, c, m, tab, rep, rq)
    for j in range(nnew):
        m = new[j]
        c = _class_of(m, tab, ps, lm)
        cls[m] = c
        _join_tail(pc, c, m, tab, rep, rq)


@njit
def _pack_gangs(nodes, M, gr, launch, ps, shared):
    """Schedule gangs 0..G-1 (already in Ray's order) one after another.

    nodes: the node list (slot ids); M: slots in use (clones go at M, M+1, ...
    and the arrays must have room for every unit of every gang, at most the
    launches the types' max_workers leave); gr (records.GangRuns): each gang's
    runs (request row, units) in Ray's order and each run's resource shape;
    launch (records.Launch): the template slot of each configured type and the
    caps; shared: the label column single-gang anti-affinity keys share (-1:
    none; engine/raycompat/labelcols.py), cleared on the nodes a placed gang
    wrote it on. Returns (infeasible (G,), new node list, new M, template of each
    new slot).

    Ray's node list is kept as an order key per slot (kernels/listorder.py),
    rewritten per placed gang for the nodes it wins, the running nodes it visits
    or stops visiting and its launches. The non-running nodes are kept by class
    (kernels/pendclass.py): a gang reads the first member of each class that
    holds one of its shapes, not every non-running node. Running nodes no gang
    can tell apart are a class too (kernels/runclass.py), listed once per shape
    (fitindex.UnitIndex) and re-keyed as one (``base``). So a gang costs time in
    its holders alone, the classes of its shapes and its picks, not in the list.

    Why one long function: numba compiles it as one frame, so the ~30 scratch
    arrays are allocated once per tick and sized for the largest gang, and the
    per-gang steps (candidate merge, existing-node picks, template launches, undo,
    list reorder) share them without passing them through calls: split into
    helpers, each call would take a dozen of them (or a record of them).
    Locals a record is made from carry that record's field names (``Cands``:
    slot, alive, fresh, taken, placed, label_score ...; ``GangRuns``: ptr, run,
    cnt, shape); ``*_all`` arrays are the tick's room of which a gang uses a
    prefix.
    """
    slots, src, rq = ps.slots, ps.src, ps.rq
    type_, status = slots.type, slots.status
    free = src.free
    ptr, run, cnt, shape = gr.ptr, gr.run, gr.cnt, gr.shape
    G = ptr.shape[0] - 1
    T = launch.pristine.shape[0]
    R = free.shape[1]
    H = src.hist.shape[1]
    L = slots.label.shape[1]
    S = gr.shape_row.shape[0]
    Mcap = free.shape[0]
    M0 = M
    bad = np.zeros(G, dtype=np.bool_)
    units = 0
    for g in range(G):
        units += cnt[ptr[g]: ptr[g + 1]].sum()
    nn = nodes.shape[0]
    cap_nodes = nn + units
    lo = _list_order(nodes, status, Mcap, cap_nodes)
    key = lo.key
    lst = np.empty(cap_nodes, dtype=np.int64)          # the list's slots, in no order
    nrun = np.int64(0)
    running = np.empty(nn, dtype=np.int64)
    for i in range(nn):
        m = nodes[i]
        lst[i] = m
        if status[m] == _RUNNING:
            running[nrun] = m
            nrun += 1
    ix = _fit_index(gr.shape_row, running[:nrun], free, rq)
    mark = np.full(Mcap, -1, dtype=np.int64)
    lm = np.empty(R, dtype=np.bool_)
    # The class of each non-running slot of the list (-1: running, or not in it).
    cls = np.full(Mcap, -1, dtype=np.int32)   # IDX, as the Python packer's
    npend = lo.ctr[NOUT]
    # Running nodes that hold no shape of any gang are never a candidate: their
    # classes are not needed (a class's members hold the same shapes).
    tab = _class_table(npend + ix.some.shape[0] + 64, R, L)   # grows as classes are founded
    need = np.zeros(R, dtype=np.bool_)         # the columns some gang asks for
    for s in range(S):
        for r in range(R):
            if rq.qty[gr.shape_row[s], r] > 0.0:
                need[r] = True
    rc = _run_classes(ix.some, ps, Mcap, tab, lm, need)
    ux = _unit_index(ix, rc)
    # Each class's zone key (kernels/listorder.py; all start in the back) and
    # the last gang that visited it.
    base = np.full(rc.head.shape[0], START, dtype=np.int64)
    markc = np.full(rc.head.shape[0], -1, dtype=np.int64)
    pc = _pend_room(_pend_classes(tab.nxt.shape[0], Mcap, S), tab.nxt.shape[0], npend)
    for i in range(npend):
        m = lo.out[i]
        c = _class_of(m, tab, ps, lm)
        cls[m] = c
        _join_tail(pc, c, m, tab, gr.shape_row, rq)
    from_tmpl = np.full(Mcap - M0, -1, dtype=np.int64)
    # Nodes of each type in the list (only launches change it).
    have = np.zeros(T, dtype=np.int64)
    for i in range(nn):
        have[type_[nodes[i]]] += 1
    # Scratch for the largest gang, reused by every gang.
    K_max, g_max = np.int64(1), np.int64(1)
    for g in range(G):
        K_max = max(K_max, ptr[g + 1] - ptr[g])
        g_max = max(g_max, cnt[ptr[g]: ptr[g + 1]].sum())
    C_max = cap_nodes + T + g_max
    keep = _journal(g_max, R, H, L)
    scr = _pick_scratch(1, R, K_max, H)
    changed_all = np.empty(K_max, dtype=np.int64)
    left_all = np.empty(K_max, dtype=np.int64)
    live_all = np.empty(K_max, dtype=np.int32)
    shapes_all = np.empty(K_max, dtype=np.int32)
    won_all = np.empty(g_max, dtype=np.int64)
    scratch_all = np.zeros(K_max, dtype=np.int64)
    tmpl_slot = np.empty(C_max, dtype=np.int64)     # the template loop's candidates
    held = np.empty(max(nrun, 1), dtype=np.int64)
    firsts = np.empty(C_max, dtype=np.int64)
    tmp = np.empty(C_max, dtype=np.int64)
    block = np.empty(C_max, dtype=np.int64)
    slot = np.empty(C_max, dtype=np.int64)
    won_in = np.full(Mcap, -1, dtype=np.int64)   # the gang a slot last won in
    alive = np.zeros(C_max, dtype=np.bool_)
    fresh = np.zeros(C_max, dtype=np.bool_)
    placed = np.zeros(C_max, dtype=np.bool_)
    taken_all = np.zeros(C_max * K_max, dtype=np.int64)    # a gang's (C, K) view is contiguous
    label_score, gpu_ok = np.zeros(C_max, dtype=np.int64), np.zeros(C_max, dtype=np.int64)
    match = np.zeros(C_max, dtype=np.int64)
    util_min, util_mean = np.zeros(C_max, dtype=np.float64), np.zeros(C_max, dtype=np.float64)
    avail = np.zeros(T, dtype=np.int64)
    # (no classes among templates, template mode and batching on): read from
    # arrays so the template loop compiles for the Python caller's types, not literals.
    one, yes = np.full(1, 1, dtype=np.int64), np.full(1, True, dtype=np.bool_)
    solo = Classes(np.full(Mcap, -1, dtype=np.int32), one[0] - 1, one[0] - 1)  # no classes
    among = Classes(cls, one[0], one[0])
    wc = _walk_cache(Mcap)
    for g in range(G):
        runs = run[ptr[g]: ptr[g + 1]]
        left = left_all[: ptr[g + 1] - ptr[g]]
        for k in range(left.shape[0]):
            left[k] = cnt[ptr[g] + k]
        if left.sum() == 0:
            continue                    # nothing to place: the list stays as it is
        K = runs.shape[0]
        scratch = scratch_all[:K]
        changed = changed_all[:K]
        Mg = M
        nkeep = np.int64(0)               # journal entries: existing slots committed by this gang
        # §4.2 pre-filter: running nodes that hold no unit of any live shape wait at the end.
        if K == 1:                       # the usual gang: one run, nothing to sort
            live = runs
            shapes = shape[ptr[g]: ptr[g] + 1]
        else:
            live = live_all[: _distinct(runs, left, live_all)]
            shapes = shapes_all[: _distinct(shape[ptr[g]: ptr[g + 1]], left, shapes_all)]
        # The gang's candidates in list order: of its holders, the ones alone or
        # first in their class (kernels/runclass.py), and of the non-running nodes
        # the first member of each class that holds a unit of a live shape (Ray's
        # NodeStateCache; the others place nothing, or wait in their class behind
        # the first member and take its place, at their own position, when it wins).
        nh = _unit_holders(ux, shapes, free, rq, rc, mark, markc, g, held)
        hs = held[:nh]
        _sort_by(hs, key, tmp[:nh])
        nr = _firsts(pc, shapes, g, firsts)
        fs = firsts[:nr]
        _sort_by(fs, key, tmp[:nr])
        nf = _merge_by_key(hs, fs, key, slot)
        taken = taken_all[: C_max * K].reshape((C_max, K))
        ec = Cands(slot, alive, fresh, taken, placed, label_score, gpu_ok, match,    # existing
                   util_min, util_mean)                                           # nodes
        for i in range(nf):
            alive[i] = True
            placed[i] = False
            fresh[i] = False
        # §4.3 existing nodes, in list order.
        e = _walk_class(runs, shape[ptr[g]], rq)
        if e >= 0:
            _prefill(ec, nf, e, runs[0], left[0], ps, wc)
        nw = np.int64(0)
        while left.sum() > 0 and nw < nf:
            i = _pick_core(ec, nf, solo, ps, runs, left, scr)
            if e >= 0 and nw == 0:
                _keep(ec, nf, e, ps, wc)
            if i < 0:
                break
            m = slot[i]
            wc.version[m] += 1
            _save(nkeep, m, keep, ps)
            nkeep += 1
            _mark(m, ps.marks)
            _win(m, i, ec, nf, ps, runs, left, scratch, changed)
            if status[m] != _RUNNING and pc.nxt[m] >= 0:
                nf = _insert(pc.nxt[m], i, nf, key, ec)   # the next member tries the class
            elif status[m] == _RUNNING and rc.of[m] >= 0 and rc.nxt[m] >= 0:
                _materialize(rc.nxt[m], rc.of[m], base, key, lo.ctr[ONE])
                nf = _insert(rc.nxt[m], i, nf, key, ec)
            block[nw] = m
            won_in[m] = g
            nw += 1
        # §4.5 new nodes: one template per type with room, in config order.
        launched = np.int64(0)
        won = tmpl_slot[:0]
        if left.sum() > 0:
            nt = np.int64(0)
            for t in range(T):
                avail[t] = launch.type_max[t] - have[t] if launch.configured[t] else 0
                if avail[t] > 0:
                    tmpl_slot[nt] = launch.pristine[t]
                    alive[nt] = True
                    fresh[nt] = False
                    nt += 1
            room = -1 if launch.max_nodes < 0 else max(0, launch.max_nodes - nn)
            won = won_all[: left.sum()]
            tc = Cands(tmpl_slot, alive, fresh, taken, placed, label_score, gpu_ok, match,
                       util_min, util_mean)
            launched, left, M1, _, _, _, tmpl = _run_loop(tc, nt, among, ps, runs, left,
                                                   LoopMode(yes[0], avail, room, yes[0]),
                                                   M, won, scr)
            for s in range(M, M1):
                from_tmpl[s - M0] = tmpl[s - M]
                wc.version[s] += 1
            M = M1
        if left.sum() > 0:                 # all or nothing: put everything back
            bad[g] = True
            _restore(nkeep, keep, ps)
            for j in range(nkeep):
                ps.marks.ghash[keep.slot[j]] = np.nan
                wc.version[keep.slot[j]] += 1
            M = Mg
            continue
        if shared >= 0:                    # its own anti-affinity key: read by no one else
            for i in range(nw):
                slots.label[block[i], shared] = -1
            for j in range(launched):
                slots.label[won[j], shared] = -1
        # The winners go in front, the visited nodes after them, launches at the end.
        _placed(lo, block, nw, hs, g, mark, won_in, status, won, launched, rc, base, markc)
        tab = _room_for(tab, nw + launched)
        pc = _pend_room(pc, tab.nxt.shape[0], nw + launched)
        _reclass(block, nw, won, launched, cls, pc, tab, ps, lm, gr.shape_row)
        _left(block, nw, rc, base, key, lo.ctr[ONE], ux, free, rq)
        for j in range(launched):
            lst[nn] = won[j]
            nn += 1
        for j in range(Mg, M):
            have[type_[j]] += 1
    _all_keys(rc, base, key, lo.ctr[ONE])
    out = lst[:nn]
    _sort_by(out, key, tmp[:nn])
    return bad, out.astype(nodes.dtype), M, from_tmpl[: M - M0].copy()
