"""The efficient mode's placement-group passes, each in one call
(vecsched.engine.efficient.gang_place; the joint pass: ``_gang_pass``'s docstring).

The myopic pass is the same as ``gang_place._pass_py``'s (its readable twin; tests
compare the two): groups in the given order; per group the packing variants that run
differently (``todo``: item order largest first or as given, and a fill credit),
each a trial of ``place.place_batch`` on the group's items: per part (the rows
with GPU demand first when GPU nodes are kept for GPU work), existing nodes first
(``effp_existing``, rows GPU demand first, then largest, then position), then new
nodes for what is left (``effp_choose``, launched as ``State.launch_many`` does).
A trial that leaves a unit unplaced fails. The first trial that launches nothing,
or the last one, is kept if it is the cheapest so far (launch price summed node by
node as Python sums it, then launches, then variant); otherwise every trial is
undone and the cheapest one runs again. A group no trial places is infeasible.

State: the efficient ``State``'s slot arrays, changed in place while the pass runs
and put back before it returns, and per walk (the existing slots that could hold
a bundle at the start of the tick, ``State.walk``) a cursor past its first slots
that no longer can: the walk starts there, skipping only slots the twin's walk
visits and passes over (an existing slot's room only shrinks within a trial; an
undo puts the cursors back too). ``ctr`` holds [M, global room, journal length,
journal floor]: every change of a slot below the floor (the largest slot count
at a snapshot) is journaled (the slot, its free row before, the anti-affinity
label column it sets and that column's value before, its received flag before),
and an undo writes the journal back newest first, as ``State.restore`` does;
slots launched after a snapshot are dropped by lowering M and clearing ``alive``.
The caller's ``type_room`` is not changed.

Returns (G,) bool infeasible and (P, 5) placements (group, item of the group,
slot, units, slot type) in the twin's order (``_gang_pass``, both passes).
"""
import numpy as np

from ._jit import njit, njit_inner
from .effp_choose import _choose_launches
from .effp_existing import _fill_row, _node_fit, _walk_order
from .sort import _sort_by

NEW_READY = 1        # vecsched.engine.efficient.state.NEW_READY (kernels import no model)


@njit_inner
def _keep(ctr, jslot, jfree, jkey, jlab, jrecv, m, row, key, label, received):
    """Journal slot m's free row before a change (``row``), the label column
    ``key`` (-1: none) and its received flag, if a snapshot knows the slot."""
    if m >= ctr[3]:
        return
    j = ctr[2]
    jslot[j] = m
    for r in range(row.shape[0]):
        jfree[j, r] = row[r]
    jkey[j] = key
    jlab[j] = label[m, key] if key >= 0 else 0
    jrecv[j] = received[m]
    ctr[2] = j + 1


@njit_inner
def _undo(ctr, to, M, room, room0, cur, cur0, jslot, jfree, jkey, jlab, jrecv, free, label,
          alive, received):
    """Back to a snapshot: journal position ``to``, M slots, rooms ``room0``, walk
    cursors ``cur0``."""
    for j in range(ctr[2] - 1, to - 1, -1):
        m = jslot[j]
        for r in range(free.shape[1]):
            free[m, r] = jfree[j, r]
        if jkey[j] >= 0:
            label[m, jkey[j]] = jlab[j]
        received[m] = jrecv[j]
    ctr[2] = to
    for m in range(M, ctr[0]):
        alive[m] = False
    ctr[0] = M
    for t in range(room.shape[0]):
        room[t] = room0[t]
    for w in range(cur.shape[0]):
        cur[w] = cur0[w]


@njit_inner
def _launch(ctr, room, t, count, free, label, typ, gpu, alive, ready, received, type_free,
            type_label, type_gpu):
    """``count`` new nodes of type t (``State.launch_many``); returns the first slot."""
    m = ctr[0]
    for s in range(m, m + count):
        for r in range(free.shape[1]):
            free[s, r] = type_free[t, r]
        for k in range(label.shape[1]):
            label[s, k] = type_label[t, k]
        typ[s] = t
        gpu[s] = type_gpu[t]
        alive[s] = True
        ready[s] = NEW_READY
        received[s] = False
    ctr[0] = m + count
    room[t] -= count
    if ctr[1] > 0:
        ctr[1] = max(ctr[1] - count, 0)
    return m


@njit_inner
def _full_prefix(nodes, free, alive, q, cols):
    """How many of ``nodes`` (existing slots), from the first, can no longer take a
    unit of bundle q (dead, or no room by ``effp_existing``'s own fit test; an
    existing node's room only shrinks within a trial). The walk skips them for the
    rest of the trial: they are nodes the twin's walk visits and passes over.
    ``cols``: room for q's positive columns."""
    ncols = 0
    for r in range(q.shape[0]):
        if q[r] > 0:
            cols[ncols] = r
            ncols += 1
    k = 0
    while k < nodes.shape[0]:
        m = nodes[k]
        if alive[m] and _node_fit(free, m, q, cols, ncols, False) > 0:
            return k
        k += 1
    return k


@njit_inner(alloc=True, merged=True)
def _existing(st, jr, items, ord_, part, left, tight, tb, nt):
    """``place.on_existing`` for the rows ``part`` (positions in ``ord_``, ascending):
    their units left in ``left``, placements appended to ``tb`` from ``nt``;
    returns the new count."""
    (free, label, typ, gpu, alive, ready, received, ctr, room, N, cur) = st
    (jslot, jfree, jkey, jlab, jrecv, slots, counts, saved) = jr
    (item_qty, item_key, item_val, item_size, item_gpu, item_spare, item_walk, walk_ptr, walk,
     inv_ref) = items
    P = part.shape[0]
    pos = part.copy()
    if P > 1:
        tmp = np.empty(P, np.int64)
        neg = np.empty(ord_.shape[0])
        cpu = np.zeros(ord_.shape[0], np.int64)
        for s in range(P):
            neg[part[s]] = -item_size[ord_[part[s]]]
            cpu[part[s]] = 0 if item_gpu[ord_[part[s]]] else 1
        _sort_by(pos, neg, tmp)
        _sort_by(pos, cpu, tmp)
    M = ctr[0]
    cols = np.empty(free.shape[1], np.int64)
    for s in pos:
        if left[s] == 0:
            continue
        it = ord_[s]
        spare = item_spare[it]
        w = item_walk[it]
        lo, hi = walk_ptr[w] + cur[w], walk_ptr[w + 1]
        order = _walk_order(walk[lo:hi], ready, gpu, spare, N, M)
        if order.shape[0] == 0:
            continue
        key, val = item_key[it], item_val[it]
        n = _fill_row(free, order, ready, gpu, spare, alive, label, key, val, item_qty[it],
                      left[s], tight, inv_ref, slots, counts, saved)
        cur[w] += _full_prefix(walk[lo:hi], free, alive, item_qty[it], cols)
        for j in range(n):
            m = slots[j]
            _keep(ctr, jslot, jfree, jkey, jlab, jrecv, m, saved[j], key, label, received)
            received[m] = True
            if key >= 0:
                label[m, key] = val
            tb[nt, 0], tb[nt, 1], tb[nt, 2] = m, s, counts[j]
            nt += 1
            left[s] -= counts[j]
    return nt


@njit_inner(alloc=True, merged=True)
def _new(st, types, items, ord_, part, left, credit, keep_gpu, tb, nt):
    """``place.on_new`` for the rows ``part`` with units left: the launches of
    ``effp_choose``, made and filled as ``place._launch_filled``; returns the new
    count of placements in ``tb``."""
    (free, label, typ, gpu, alive, ready, received, ctr, room, N, cur) = st
    (type_free, type_label, type_gpu, price, running, fit_ref, item_ok) = types
    (item_qty, item_key, item_val, item_size, item_gpu, item_spare, item_walk, walk_ptr, walk,
     inv_ref) = items
    P, T, R = part.shape[0], type_free.shape[0], free.shape[1]
    allowed = np.empty((P, T), np.bool_)
    qty = np.empty((P, R))
    groups = np.full(P, -1, np.int64)
    size = np.empty(P)
    lp = np.empty(P, np.int64)
    ng = 0
    for a in range(P):
        it = ord_[part[a]]
        for r in range(R):
            qty[a, r] = item_qty[it, r]
        size[a] = item_size[it]
        lp[a] = left[part[a]]
        for t in range(T):
            allowed[a, t] = item_ok[it, t]
        if item_key[it] >= 0:
            for b in range(a):
                jt = ord_[part[b]]
                if item_key[jt] == item_key[it] and item_val[jt] == item_val[it]:
                    groups[a] = groups[b]
                    break
            if groups[a] < 0:
                groups[a] = ng
                ng += 1
        if keep_gpu and not item_gpu[it]:
            cpu_ok = False
            for t in range(T):
                if allowed[a, t] and not type_gpu[t] and room[t] > 0 and ctr[1] != 0:
                    cpu_ok = True
            if cpu_ok:
                for t in range(T):
                    if type_gpu[t]:
                        allowed[a, t] = False
    n, ts, ms, units, lp2 = _choose_launches(type_free, room, ctr[1], allowed, lp, qty, groups,
                                             size, price, running, type_gpu, fit_ref, credit)
    for j in range(n):
        t, m = ts[j], ms[j]
        first = _launch(ctr, room, t, m, free, label, typ, gpu, alive, ready, received,
                        type_free, type_label, type_gpu)
        fill = type_free[t].copy()
        for a in range(P):
            k = units[j, a]
            if k != 0:
                for r in range(R):
                    x = fill[r] - k * qty[a, r]
                    fill[r] = x if (x >= 0.0 or x != x) else 0.0
        for s in range(first, first + m):
            for r in range(R):
                free[s, r] = fill[r]
            received[s] = True
            for a in range(P):
                it = ord_[part[a]]
                if units[j, a] != 0 and item_key[it] >= 0:
                    label[s, item_key[it]] = item_val[it]
        for s in range(first, first + m):
            for a in range(P):
                if units[j, a] != 0:
                    tb[nt, 0], tb[nt, 1], tb[nt, 2] = s, part[a], units[j, a]
                    nt += 1
    for a in range(P):
        left[part[a]] = lp2[a]
    return nt


@njit_inner(alloc=True)
def _trial(st, jr, types, items, ord_, want, credit, keep_gpu, tight, tb):
    """``place.place_batch`` of the items ``ord_`` (global item numbers, in the
    trial's order) wanting ``want``; returns (every unit placed, placements in tb,
    units left per position)."""
    S = ord_.shape[0]
    item_gpu = items[4]
    left = want.copy()
    nparts = 1
    if S > 1 and keep_gpu:
        has_gpu, has_cpu = False, False
        for s in range(S):
            if item_gpu[ord_[s]]:
                has_gpu = True
            else:
                has_cpu = True
        if has_gpu and has_cpu:
            nparts = 2
    nt = np.int64(0)        # not a literal: one compiled _existing / _new
    for k in range(nparts):
        cnt = 0
        part = np.empty(S, np.int64)
        for s in range(S):
            if left[s] > 0 and (nparts == 1 or item_gpu[ord_[s]] == (k == 0)):
                part[cnt] = s
                cnt += 1
        if cnt == 0:
            continue
        part = part[:cnt]
        nt = _existing(st, jr, items, ord_, part, left, tight, tb, nt)
        more = False
        for s in part:
            if left[s] > 0:
                more = True
        if more:
            nt = _new(st, types, items, ord_, part, left, credit, keep_gpu, tb, nt)
    for s in range(S):
        if left[s] > 0:
            return False, nt, left
    return True, nt, left


@njit
def _gang_pass(joint, st, jr, types, items, gptr, item_want, g_order, largest, todo, ntodo,
               credits, sorts, keep_gpu, tight, n_out):
    """The myopic pass, or with ``joint`` the joint one (``gang_place._joint``: the
    items of every group not yet dropped, groups in ``g_order``, packed as one batch
    with fill credit 0; the groups left incomplete are dropped, the batch undone and
    packed again, until every packed group is whole). ``gptr`` (G + 1,): each
    group's items (global numbers); ``largest`` (I,): per group its items largest
    first (local numbers); ``todo`` (G, V) / ``ntodo`` (G,): the variants to run;
    ``credits`` / ``sorts`` (V,): each variant's fill credit and whether it sorts;
    ``n_out``: room for the placements (the pass's units). The State is put back.

    Why one long function: numba optimises a compiled function together with every
    helper it calls, once per level of calls; the two passes as helpers of one entry
    cost two more levels (about 4 s of LLVM on a cold start), and they share the
    set-up, the undo and the output."""
    (free, label, typ, gpu, alive, ready, received, ctr, room, N, cur) = st
    (jslot, jfree, jkey, jlab, jrecv, slots, counts, saved) = jr
    price = types[3]
    G = gptr.shape[0] - 1
    M0, pos0, glob0 = ctr[0], ctr[2], ctr[1]
    room0 = room.copy()
    cur0 = cur.copy()
    ctr[3] = max(ctr[3], M0)
    bad = np.zeros(G, np.bool_)
    out = np.empty((max(n_out, 1), 5), np.int64)
    no = 0
    tb = np.empty((max(n_out, 1), 3), np.int64)
    while joint:
        n = 0
        for g in g_order:
            if not bad[g]:
                n += gptr[g + 1] - gptr[g]
        ord_ = np.empty(n, np.int64)
        gang = np.empty(n, np.int64)
        n = 0
        for g in g_order:
            if not bad[g]:
                for it in range(gptr[g], gptr[g + 1]):
                    ord_[n], gang[n] = it, g
                    n += 1
        ok, nt, left = _trial(st, jr, types, items, ord_, item_want[ord_], 0.0, keep_gpu, tight,
                              tb)
        if ok:
            for k in range(nt):
                m, s = tb[k, 0], tb[k, 1]
                out[k, 0], out[k, 1], out[k, 2] = gang[s], ord_[s] - gptr[gang[s]], m
                out[k, 3], out[k, 4] = tb[k, 2], typ[m]
            no = nt
            break
        for s in range(n):
            if left[s] > 0:
                bad[gang[s]] = True
        _undo(ctr, pos0, M0, room, room0, cur, cur0, jslot, jfree, jkey, jlab, jrecv, free,
              label, alive, received)
        ctr[1] = glob0
    for g in g_order:
        if joint:
            break
        lo, hi = gptr[g], gptr[g + 1]
        S = hi - lo
        best_v, kept = -1, False
        best_p, best_n = 0.0, 0
        nt = np.int64(0)
        for j in range(ntodo[g]):
            v = todo[g, j]
            ord_ = lo + (largest[lo:hi] if sorts[v] else np.arange(S))
            snapM, snapJ, snapG = ctr[0], ctr[2], ctr[1]
            snap_room = room.copy()
            snap_cur = cur.copy()
            ctr[3] = max(ctr[3], snapM)
            ok, nt, _ = _trial(st, jr, types, items, ord_, item_want[ord_], credits[v],
                               keep_gpu, tight, tb)
            if ok:
                pr = 0.0
                for s in range(snapM, ctr[0]):
                    pr += price[typ[s]]
                nl = ctr[0] - snapM
                if best_v < 0 or pr < best_p or (pr == best_p and nl < best_n):
                    best_v, best_p, best_n = v, pr, nl
                    if j == ntodo[g] - 1 or (pr == 0.0 and nl == 0):
                        kept = True
                        break
            _undo(ctr, snapJ, snapM, room, snap_room, cur, snap_cur, jslot, jfree, jkey, jlab,
                  jrecv, free, label, alive, received)
            ctr[1] = snapG
        if best_v < 0:
            bad[g] = True
            continue
        ord_ = lo + (largest[lo:hi] if sorts[best_v] else np.arange(S))
        if not kept:
            ok, nt, _ = _trial(st, jr, types, items, ord_, item_want[ord_], credits[best_v],
                               keep_gpu, tight, tb)
        for k in range(nt):
            m = tb[k, 0]
            out[no, 0], out[no, 1], out[no, 2] = g, ord_[tb[k, 1]] - lo, m
            out[no, 3], out[no, 4] = tb[k, 2], typ[m]
            no += 1
    _undo(ctr, pos0, M0, room, room0, cur, cur0, jslot, jfree, jkey, jlab, jrecv, free, label,
          alive, received)
    ctr[1] = glob0
    return bad, out[:no]
