"""One packing loop of ``_try_schedule`` in one call: pick, commit, repeat
(engine/raycompat/packer.py ``Packer._loop``, its slow readable twin; the tests compare
the two). Every packing loop of the packer runs here: inside a transaction the
packer saves the candidates' rows first (Context.save_packing), and a per-win
callback (in-place resizes) runs on the winners afterwards.

Runs of identical picks are taken at once as the twin does (``_batch``): a
winner's strict twins (running nodes equal in everything a walk reads) or fresh
copies of a template take the same units while nothing else could win
instead.

Records are kernels/records.py's. Outputs: the winners in order (``won``), and
per pick the slice of ``won`` it made and its units per run (``ev_ptr``,
``ev_tau``), from which the caller lists placements.
"""
import numpy as np

from ._jit import njit, njit_inner
from .pack import _better, _commit
from .pick import _invalidate, _pick_core
from .slots import _clone, _copy_demand, _mark


@njit_inner
def _twins(i, cs, n, cl, out):
    """Positions after i of alive candidates in i's strict class; returns how many."""
    c = cl.of[cs.slot[i]]
    if c < 0 or c < cl.strict_from:
        return 0
    k = 0
    for j in range(i + 1, n):
        if cs.alive[j] and cl.of[cs.slot[j]] == c:
            out[k] = j
            k += 1
    return k


@njit_inner
def _all_below(i, cs, n, slots):
    """Whether every other alive candidate that places something has a pick key
    strictly below candidate i's (a tie would go to the earlier one)."""
    for j in range(n):
        if j == i or not (cs.alive[j] and cs.fresh[j] and cs.placed[j]):
            continue
        if not _better(cs, i, j, slots):
            return False
    return True


@njit_inner
def _batch(i, cs, n, slots, left, limit):
    """How many times in a row candidate i's pick repeats exactly (Packer._batch)."""
    K = left.shape[0]
    tk = cs.taken
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
        if j == i or not (cs.alive[j] and cs.fresh[j]):
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
    if others and not _all_below(i, cs, n, slots):
        return 1
    return r


@njit_inner(hot=True)
def _any_alive(cs, n):
    """Whether any of cs[:n] is still a candidate."""
    for i in range(n):
        if cs.alive[i]:
            return True
    return False


@njit_inner(alloc=True)
def _grow_events(ev_ptr, ev_tau, E):
    """The event arrays, doubled when event E + 1 has no room."""
    if E + 1 < ev_ptr.shape[0]:
        return ev_ptr, ev_tau
    p = np.zeros(2 * ev_ptr.shape[0], dtype=np.int64)
    t = np.zeros((2 * ev_tau.shape[0], ev_tau.shape[1]), dtype=np.int64)
    for e in range(ev_ptr.shape[0]):
        p[e] = ev_ptr[e]
    for e in range(ev_tau.shape[0]):
        for k in range(ev_tau.shape[1]):
            t[e, k] = ev_tau[e, k]
    return p, t


@njit_inner
def _compact(cs, n):
    """Drop the dead entries of cs[:n], order kept; returns the new n."""
    k = 0
    for j in range(n):
        if cs.alive[j]:
            cs.slot[k], cs.fresh[k], cs.placed[k] = cs.slot[j], cs.fresh[j], cs.placed[j]
            for r in range(cs.taken.shape[1]):
                cs.taken[k, r] = cs.taken[j, r]
            cs.label_score[k], cs.gpu_ok[k], cs.match[k] = (cs.label_score[j], cs.gpu_ok[j],
                                                            cs.match[j])
            cs.util_min[k], cs.util_mean[k] = cs.util_min[j], cs.util_mean[j]
            cs.alive[k] = True
            k += 1
    return k


@njit
def _run_loop(cs, n, cl, ps, runs, left, mode, M, won, scr):
    """Packer._loop over candidates cs[:n] (records.Cands), classes cl, on ps
    (records.PackState), for runs/left (K,); scr: pick.py's ``_pick_scratch``
    with room for the classes. mode (records.LoopMode): with ``templates`` the
    candidates are pristine templates (winners are cloned into new slots at M,
    M+1, ...; ``avail`` per-type launches left, ``room`` most winners, -1 none;
    cs must have room for T more entries). Otherwise candidates are nodes; a
    winner's strict twins may win with it. Returns (number of winners in
    ``won``, new left, new M, number of candidates, picks as ev_ptr/ev_tau,
    template of each new slot).

    Why one long function: what is left here is the bookkeeping that threads the
    loop's state from one pick to the next; the steps themselves are already
    helpers (``_pick_core``, ``_twins``, ``_batch``, ``_clone``, ``_commit``,
    ``_invalidate``, ``_compact``, ``_grow_events``). That state is four counters
    (winners ``nw``, picks ``E``, next slot ``M``, candidates ``n``) and the
    event arrays, which ``_grow_events`` may replace by larger ones. A numba
    function cannot rebind its caller's scalars or arrays, so each split-off
    step would take and return a tuple of them (and the ``tau``/``old``/``chg``
    scratch rows) on every pick of the hottest loop of the tick; in one frame
    numba keeps them in registers and the scratch is allocated once per call.
    """
    typ = ps.slots.type
    avail, room = mode.avail, mode.room
    K = runs.shape[0]
    M0 = M
    nw = np.int64(0)
    E = np.int64(0)
    ev_ptr = np.zeros(16, dtype=np.int64)
    ev_tau = np.zeros((16, K), dtype=np.int64)
    scratch = np.zeros(K, dtype=np.int64)
    # The units per run of this pick, the counts before it, the runs it changed.
    buf = np.empty((3, K), dtype=np.int64)
    tau, old, chg = buf[0], buf[1], buf[2]
    left = left.copy()                 # lowered in place, pick by pick
    tw = np.empty(max(n, 1), dtype=np.int64)
    from_tmpl = np.empty(won.shape[0], dtype=np.int64)
    cap = cs.slot.shape[0]
    while left.sum() > 0 and _any_alive(cs, n):
        if room >= 0 and nw >= room:
            break
        i = _pick_core(cs, n, cl, ps, runs, left, scr)
        if i < 0:
            break
        m = cs.slot[i]
        tslot = m
        for k in range(K):
            tau[k] = cs.taken[i, k]
        t = typ[m]
        if mode.templates:
            limit = avail[t] if room < 0 else min(avail[t], room - nw)
            ntw = 0
        else:
            ntw = _twins(i, cs, n, cl, tw)
            limit = 1 + ntw
        r = _batch(i, cs, n, ps.slots, left, limit) if limit > 1 and mode.batching else 1
        if mode.templates:
            s = M
            M += 1
            _clone(s, m, ps)
            from_tmpl[s - M0] = m
            m = s
        _mark(m, ps.marks)
        _commit(m, ps, runs, left, scratch)
        ev_ptr, ev_tau = _grow_events(ev_ptr, ev_tau, E)
        for k in range(K):
            ev_tau[E, k] = tau[k]
        won[nw] = m
        nw += 1
        for j in range(r - 1):
            if mode.templates:
                s = M
                M += 1
                _clone(s, m, ps)
                from_tmpl[s - M0] = tslot
            else:
                s = cs.slot[tw[j]]
                _mark(s, ps.marks)
                _copy_demand(s, m, ps)
                cs.alive[tw[j]] = False
            won[nw] = s
            nw += 1
        E += 1
        ev_ptr[E] = nw
        nchg = np.int64(0)
        for k in range(K):
            old[k] = left[k]
            left[k] -= r * tau[k]
            if left[k] != old[k]:
                chg[nchg] = k
                nchg += 1
        cs.alive[i] = False
        _invalidate(cs, n, chg, nchg, old, left)
        if mode.templates:
            avail[t] -= r
            if avail[t] > 0:
                if n == cap:
                    n = _compact(cs, n)
                cs.slot[n] = tslot             # a fresh template of the type, at the end
                cs.alive[n] = True
                cs.fresh[n] = False
                n += 1
    return nw, left, M, n, ev_ptr[: E + 1], ev_tau[:E], from_tmpl[: M - M0]
