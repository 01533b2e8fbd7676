"""Emptying one new node of the efficient mode's gang packing (engine/efficient/improve.py,
move 1): every unit it holds moves, first fit, onto the other live slots.

Slots are dense rows: ``free`` (S, R) free room, ``label`` (S, L) label value per key
(-1 absent), ``live`` (S,) whether the slot is still in the packing. Units are rows of
``uq`` (U, R), in the order they are tried; unit u carries the anti-affinity label
``ukey[u] == uval[u]`` (key -1: none) and its label selectors as row ``mask_of[u]`` of
``masks`` (K, S) (-1: no selector), computed by the caller over the slots' labels.

A unit fits on a slot when one more unit fits its free room (every positive column:
the free-to-bundle ratio, times ``slack``, at least 1: ``engine/model/fits.fit_count``),
its selectors hold and the slot does not carry its anti-affinity label. Placing it
subtracts the bundle from the slot's free room (clipped at 0) and sets the label.

``bmax`` (ceil(S / BLOCK), R) bounds the free room of each block of ``BLOCK``
consecutive slots from above (``block_max``; free room only shrinks while nodes are
emptied, so a bound taken before stays one): a block where one column's bound
cannot hold the unit is skipped whole. Division and the slack product are monotonic,
so no slot that fits is ever skipped and the first fit is the same.
"""
import numpy as np

from ._jit import njit, njit_inner

BLOCK = 64


@njit
def block_max(free):
    """(ceil(S / BLOCK), R) the largest free room per column in each block of slots."""
    S, R = free.shape
    nb = (S + BLOCK - 1) // BLOCK
    out = np.zeros((nb, R))
    for s in range(S):
        b = s // BLOCK
        for r in range(R):
            if free[s, r] > out[b, r]:
                out[b, r] = free[s, r]
    return out


@njit_inner(hot=True)
def _one_fits(free, s, q, slack):
    """Whether one unit of bundle q (R,) fits in slot s's free row."""
    low = np.inf
    anypos = False
    for r in range(q.shape[0]):
        if q[r] > 0:
            anypos = True
            x = free[s, r] / q[r]
            if x < low:
                low = x
    if not anypos:
        return True
    return low * slack >= 1.0


@njit_inner(hot=True)
def _allowed(label, s, key, val, masks, k):
    """Selectors (mask row k, -1 none) and anti-affinity (key, val) allow slot s."""
    if k >= 0 and not masks[k, s]:
        return False
    if key >= 0 and key < label.shape[1] and label[s, key] == val:
        return False
    return True


@njit_inner(hot=True)
def _block_may_fit(bmax, b, q, slack):
    """Whether some slot of block b may hold one unit of q (bmax bounds its room)."""
    for r in range(q.shape[0]):
        if q[r] > 0 and (bmax[b, r] / q[r]) * slack < 1.0:
            return False
    return True


@njit
def empty_node(free, label, live, m, uq, ukey, uval, masks, mask_of, slack, bmax):
    """Move every unit off slot m (module docstring), first fit over the live slots
    in slot order, m excluded; ``bmax`` from ``block_max`` of ``free`` (or of an
    earlier ``free`` no row of which was smaller). Returns (ok, targets (U,)): on success ``free`` and
    ``label`` hold the moves and targets[u] is unit u's slot; when a unit fits
    nowhere both arrays are restored as they were and ok is False."""
    U = uq.shape[0]
    S, R = free.shape
    tgt = np.full(U, -1, np.int64)
    old_free = np.empty((U, R))
    old_lab = np.full(U, -1, np.int32)
    for u in range(U):
        key = ukey[u]
        at = -1
        for b in range(bmax.shape[0]):
            if not _block_may_fit(bmax, b, uq[u], slack):
                continue
            for s in range(b * BLOCK, min(S, (b + 1) * BLOCK)):
                if s == m or not live[s]:
                    continue
                if not _one_fits(free, s, uq[u], slack):
                    continue
                if not _allowed(label, s, key, uval[u], masks, mask_of[u]):
                    continue
                at = s
                break
            if at >= 0:
                break
        if at < 0:
            for v in range(u - 1, -1, -1):
                s = tgt[v]
                for r in range(R):
                    free[s, r] = old_free[v, r]
                if ukey[v] >= 0 and ukey[v] < label.shape[1]:
                    label[s, ukey[v]] = old_lab[v]
            return False, tgt
        tgt[u] = at
        for r in range(R):
            old_free[u, r] = free[at, r]
            x = free[at, r] - uq[u, r]
            free[at, r] = x if x >= 0.0 else 0.0
        if key >= 0 and key < label.shape[1]:
            old_lab[u] = label[at, key]
            label[at, key] = uval[u]
    return True, tgt
