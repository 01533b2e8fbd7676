"""One packing loop of ``_try_schedule`` in one call: pick, commit, repeat
(engine/packer.py ``Packer._loop``, its slow readable twin; the tests compare
the two). Used outside transactions and without a per-win callback: the plain
request phase and the request_resources() constraint's Python path keep the
twin.

Runs of identical picks are taken at once as the twin does (``_batch``): a
winner's strict twins (running nodes equal in everything a walk reads) or fresh
copies of a template take the same units while nothing else could win
instead.

Array groups are those of kernels/gangs.py. Outputs: the winners in order
(``won``), and per pick the slice of ``won`` it made and its units per run
(``ev_ptr``, ``ev_tau``), from which the caller lists placements.
"""
import numpy as np

from ._jit import njit, njit_leaf
from .pack import _better, _commit
from .pick import _invalidate, _pick_scratch
from .slots import _clone, _mark, _pick_loop


@njit_leaf
def _twins(i, cands, n, alive, cls, strict_from, out):
    """Positions after i of alive candidates in i's strict class; returns how many."""
    c = cls[cands[i]]
    if c < 0 or c < strict_from:
        return 0
    k = 0
    for j in range(i + 1, n):
        if alive[j] and cls[cands[j]] == c:
            out[k] = j
            k += 1
    return k


@njit_leaf
def _all_below(i, n, alive, valid, did, ks, cands, slots):
    """Whether every other alive candidate that places something has a pick key
    strictly below candidate i's (a tie would go to the earlier one)."""
    rec, prio, avail = slots[6], slots[7], slots[8]
    mi = cands[i]
    for j in range(n):
        if j == i or not (alive[j] and valid[j] and did[j]):
            continue
        mj = cands[j]
        if not _better(ks[0][i], ks[1][i], ks[2][i], ks[3][i], ks[4][i], rec[mi], prio[mi],
                       avail[mi], ks[0][j], ks[1][j], ks[2][j], ks[3][j], ks[4][j], rec[mj],
                       prio[mj], avail[mj]):
            return False
    return True


@njit_leaf
def _batch(i, n, alive, valid, did, tk, ks, cands, slots, left, limit):
    """How many times in a row candidate i's pick repeats exactly (Packer._batch)."""
    K = left.shape[0]
    r = limit
    anyk = False
    for k in range(K):
        t = tk[i, k]
        if t > 0:
            anyk = True
            if t == left[k]:
                return 1
            r = min(r, left[k] // t)
    if not anyk or r <= 1:
        return 1
    others = False
    for j in range(n):
        if j == i or not (alive[j] and valid[j]):
            continue
        others = True
        ro = np.int64(1) << 62
        for k in range(K):
            t = tk[i, k]
            if t > 0:
                if tk[j, k] == left[k]:
                    ro = 0
                    break
                ro = min(ro, (left[k] - tk[j, k]) // t)
        r = min(r, ro + 1)
        if r <= 1:
            return 1
    if others and not _all_below(i, n, alive, valid, did, ks, cands, slots):
        return 1
    return r


@njit
def _grow_events(ev_ptr, ev_tau, E):
    if E + 1 < ev_ptr.shape[0]:
        return ev_ptr, ev_tau
    p = np.zeros(2 * ev_ptr.shape[0], dtype=np.int64)
    p[: ev_ptr.shape[0]] = ev_ptr
    t = np.zeros((2 * ev_tau.shape[0], ev_tau.shape[1]), dtype=np.int64)
    t[: ev_tau.shape[0]] = ev_tau
    return p, t


@njit
def _run_loop(cands, n, alive, valid, tk, did, ks, cls, ncls, strict_from, slots, src, marks,
              ghash, implicit, exact, runs, left, rq, gpu_col, conserve_gpu, templates, avail,
              room, batching, M, won):
    """Packer._loop. ``templates``: candidates are pristine templates (winners are
    cloned into new slots at M, M+1, ...; ``avail`` per-type launches left,
    ``room`` most winners, -1 none; the picker arrays must have room for T more
    entries). Otherwise candidates are nodes; a winner's strict twins may win
    with it. Returns (number of winners in ``won``, new left, new M, number of
    candidates, picks as ev_ptr/ev_tau, template of each new slot)."""
    scr = _pick_scratch(ncls, src[0].shape[1], runs.shape[0], src[5].shape[1], src[5].dtype,
                        slots[2].dtype)
    return _run_loop_on(cands, n, alive, valid, tk, did, ks, cls, ncls, strict_from, slots, src,
                        marks, ghash, implicit, exact, runs, left, rq, gpu_col, conserve_gpu,
                        templates, avail, room, batching, M, won, scr)


@njit
def _run_loop_on(cands, n, alive, valid, tk, did, ks, cls, ncls, strict_from, slots, src, marks,
                 ghash, implicit, exact, runs, left, rq, gpu_col, conserve_gpu, templates, avail,
                 room, batching, M, won, scr):
    """_run_loop on the caller's pick scratch (pick.py ``_pick_scratch``, room for
    ncls classes and the runs)."""
    free, present, placed_res, placed_gpu, placed_any, hist, nhist = src
    label, typ = slots[2], slots[3]
    K = runs.shape[0]
    M0 = M
    nw = 0
    E = 0
    ev_ptr = np.zeros(16, dtype=np.int64)
    ev_tau = np.zeros((16, K), dtype=np.int64)
    scratch = np.zeros(K, dtype=np.int64)
    # The units per run of this pick, the counts before it, the runs it changed.
    buf = np.empty((3, K), dtype=np.int64)
    tau, old, chg = buf[0], buf[1], buf[2]
    left = left.copy()                 # lowered in place, pick by pick
    tw = np.empty(max(n, 1), dtype=np.int64)
    from_tmpl = np.empty(won.shape[0], dtype=np.int64)
    cap = cands.shape[0]
    while left.sum() > 0 and alive[:n].any():
        if room >= 0 and nw >= room:
            break
        i = _pick_loop(cands, n, alive, valid, tk, did, ks, cls, ncls, slots, src,
                       implicit, exact, runs, left, rq, gpu_col, conserve_gpu, scr)
        if i < 0:
            break
        m = cands[i]
        tslot = m
        for k in range(K):
            tau[k] = tk[i, k]
        t = typ[m]
        if templates:
            limit = avail[t] if room < 0 else min(avail[t], room - nw)
            ntw = 0
        else:
            ntw = _twins(i, cands, n, alive, cls, strict_from, tw)
            limit = 1 + ntw
        r = _batch(i, n, alive, valid, did, tk, ks, cands, slots, left, limit) \
            if limit > 1 and batching else 1
        if templates:
            s = M
            M += 1
            _clone(s, m, slots, src)
            from_tmpl[s - M0] = m
            m = s
        _mark(m, marks, ghash)
        _commit(m, free, present, placed_res, placed_gpu, placed_any, label, hist, nhist,
                implicit, exact, runs, left, rq, scratch)
        ev_ptr, ev_tau = _grow_events(ev_ptr, ev_tau, E)
        ev_tau[E] = tau
        won[nw] = m
        nw += 1
        for j in range(r - 1):
            if templates:
                s = M
                M += 1
                _clone(s, m, slots, src)
                from_tmpl[s - M0] = tslot
            else:
                s = cands[tw[j]]
                _mark(s, marks, ghash)
                free[s], present[s], placed_res[s] = free[m], present[m], placed_res[m]
                placed_gpu[s], placed_any[s], hist[s], nhist[s] = (placed_gpu[m], placed_any[m],
                                                                  hist[m], nhist[m])
                label[s] = label[m]
                alive[tw[j]] = False
            won[nw] = s
            nw += 1
        E += 1
        ev_ptr[E] = nw
        nchg = 0
        for k in range(K):
            old[k] = left[k]
            left[k] -= r * tau[k]
            if left[k] != old[k]:
                chg[nchg] = k
                nchg += 1
        alive[i] = False
        _invalidate(valid[:n], tk[:n], chg[:nchg], old, left)
        if templates:
            avail[t] -= r
            if avail[t] > 0:
                if n == cap:                   # drop dead entries, order kept
                    k = 0
                    for j in range(n):
                        if alive[j]:
                            cands[k], valid[k], did[k] = cands[j], valid[j], did[j]
                            tk[k] = tk[j]
                            ks[0][k], ks[1][k], ks[2][k] = ks[0][j], ks[1][j], ks[2][j]
                            ks[3][k], ks[4][k] = ks[3][j], ks[4][j]
                            alive[k] = True
                            k += 1
                    n = k
                cands[n] = tslot               # a fresh template of the type, at the end
                alive[n] = True
                valid[n] = False
                n += 1
    return nw, left, M, n, ev_ptr[: E + 1], ev_tau[:E], from_tmpl[: M - M0]

