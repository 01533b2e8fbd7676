"""The cheapest node type that holds what one or two new nodes of the efficient mode's
gang packing hold (engine/efficient/improve.py, moves 2 and 3).

Types are tried in ``tsort`` order (ascending price, stable) and the first that
qualifies is the cheapest: its price is below ``below``; it is configured
(``conf``); it has launch room (``room``, counting the nodes being replaced, of types
``ta`` and ``tb`` (-1: none), as given back); the load fits its capacity with a
relative tolerance (``cap_tol`` = cap + 1e-9 |cap|, (T, R)); and every request row
on the nodes allows it (``ok`` (P, T): per node, its rows' selectors and
anti-affinity on the type's labels, all of them).

Nodes are numbered 0..P-1 (the packing's new nodes). ``load`` (P, R) is what a node
holds, summed item by item in its content order; ``item_ptr`` (P + 1,) and
``item_nq`` (I, R) list each node's items (units times bundle) in that order, so a
pair's load is the first node's load plus the second's items one by one, rounding
as a sum over the two lists would. ``aptr`` (P + 1,) / ``aids`` list each node's
anti-affinity labels as sorted distinct ids; ``adup`` (P,) says a node already holds
one label twice (then nothing holds it).
"""
import numpy as np

from ._jit import njit, njit_inner


@njit_inner(hot=True)
def _fits_type(load, t, cap_tol):
    for r in range(load.shape[0]):
        if load[r] > cap_tol[t, r]:
            return False
    return True


@njit_inner(hot=True)
def _share(aids, aptr, a, b):
    """Whether nodes a and b hold a common anti-affinity label (sorted id lists)."""
    i, j = aptr[a], aptr[b]
    while i < aptr[a + 1] and j < aptr[b + 1]:
        if aids[i] == aids[j]:
            return True
        if aids[i] < aids[j]:
            i += 1
        else:
            j += 1
    return False


@njit
def cheapest_type(load, ok, a, tsort, price, conf, room, ta, tb, cap_tol, below):
    """The cheapest type (module docstring) for node a's load alone, or -1."""
    for j in range(tsort.shape[0]):
        t = tsort[j]
        if price[t] >= below or not conf[t]:
            continue
        back = (1 if ta == t else 0) + (1 if tb == t else 0)
        if room[t] + back <= 0 or not ok[a, t]:
            continue
        if _fits_type(load[a], t, cap_tol):
            return t
    return -1


@njit
def first_merge(order, ntype, load, item_ptr, item_nq, ok, aptr, aids, adup, tsort, price,
                conf, room, cap_tol):
    """The first pair (a, b), a before b in ``order``, that one node of a type
    cheaper than the two together holds, and that type: (a, b, t), or (-1, -1, -1)."""
    P = order.shape[0]
    R = load.shape[1]
    acc = np.empty(R)
    for x in range(P):
        a = order[x]
        if adup[a]:
            continue
        for y in range(x + 1, P):
            b = order[y]
            if adup[b] or _share(aids, aptr, a, b):
                continue
            ta, tb = ntype[a], ntype[b]
            below = price[ta] + price[tb]
            summed = False
            for j in range(tsort.shape[0]):
                t = tsort[j]
                if price[t] >= below or not conf[t] or not ok[a, t] or not ok[b, t]:
                    continue
                back = (1 if ta == t else 0) + (1 if tb == t else 0)
                if room[t] + back <= 0:
                    continue
                if not summed:
                    for r in range(R):
                        acc[r] = load[a, r]
                    for it in range(item_ptr[b], item_ptr[b + 1]):
                        for r in range(R):
                            acc[r] += item_nq[it, r]
                    summed = True
                if _fits_type(acc, t, cap_tol):
                    return a, b, t
    return -1, -1, -1
