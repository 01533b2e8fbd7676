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


@njit_inner(hot=True)
def _before(ntype, rank, price, x, y):
    """Whether node x comes before node y: dearer type first, then lower rank."""
    px, py = price[ntype[x]], price[ntype[y]]
    if px != py:
        return px > py
    return rank[x] < rank[y]


@njit_inner(hot=True)
def _pair_type(a, b, ntype, load, head, nxt, item_nq, ok, ahead, anxt, aids, stamp, pair,
               tsort, price, conf, room, cap_tol, acc):
    """The cheapest type holding nodes a and b together (module docstring), or -1;
    ``acc`` receives their summed load when it was needed."""
    k = ahead[a]
    while k >= 0:
        stamp[aids[k]] = pair
        k = anxt[k]
    k = ahead[b]
    while k >= 0:
        if stamp[aids[k]] == pair:
            return -1                       # a common anti-affinity label
        k = anxt[k]
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
            for r in range(acc.shape[0]):
                acc[r] = load[a, r]
            it = head[b]
            while it >= 0:
                for r in range(acc.shape[0]):
                    acc[r] += item_nq[it, r]
                it = nxt[it]
            summed = True
        if _fits_type(acc, t, cap_tol):
            return t
    return -1


@njit
def merge_rounds(order0, ntype0, rank, load0, item_ptr, item_nq, ok0, aptr, aids, adup,
                 tsort, price, conf, room0, cap_tol, rounds):
    """The first mergeable pair (a before b in the order, the cheapest type holding
    both; tests/engine/efficient/merge_reference.py searches it alone) merged, up to
    ``rounds`` times, each merge applied before the next search: node a then holds a's and b's items (its load their sum, item by
    item), its types are those both allowed, its labels both lists, its type t; b is
    gone; the launch room gives back a's and b's old types and takes t; a moves to
    its place in the order (dearer type first, then ``rank``). ``order0`` must be in
    that order. Returns the merges (k, 3) as (a, b, t), in the order made.

    Why one long function: the rounds share per-node linked lists of items and
    anti-affinity ids, the ``checked`` / ``last`` memory that lets a round resume
    instead of rescanning, and the working load, type and room arrays; numba compiles
    it as one frame, and split into set-up, search and apply helpers each call would
    take a dozen of those arrays."""
    P = order0.shape[0]
    R = load0.shape[1]
    ntype = ntype0.copy()
    load = load0.copy()
    ok = ok0.copy()
    room = room0.copy()
    order = order0.copy()
    n = P
    # items and anti-affinity ids as linked lists per node, so merging is relinking
    I = item_nq.shape[0]
    head = np.full(P, -1, np.int64)
    tail = np.full(P, -1, np.int64)
    nxt = np.full(I, -1, np.int64)
    A = aids.shape[0]
    ahead = np.full(P, -1, np.int64)
    atail = np.full(P, -1, np.int64)
    anxt = np.full(A, -1, np.int64)
    for j in range(P):
        for it in range(item_ptr[j], item_ptr[j + 1]):
            if head[j] < 0:
                head[j] = it
            else:
                nxt[tail[j]] = it
            tail[j] = it
        for k in range(aptr[j], aptr[j + 1]):
            if ahead[j] < 0:
                ahead[j] = k
            else:
                anxt[atail[j]] = k
            atail[j] = k
    top = 0
    for k in range(A):
        if aids[k] + 1 > top:
            top = aids[k] + 1
    stamp = np.full(top, -1, np.int64)
    out = np.full((rounds, 3), -1, np.int64)
    acc = np.empty(R)
    # checked[u]: every pair (u, v), v after u, was rejected and still would be, except
    # a pair with ``last`` (the node the previous merge changed); room given back to a
    # type that had none clears them all (a pair rejected for want of room may pass)
    checked = np.zeros(P, np.bool_)
    last = -1
    done = 0
    pair = 0
    while done < rounds:
        fa, fb, ft, fx = -1, -1, -1, -1
        at_last = -1                # where ``last`` is in the order
        for x in range(n):
            if order[x] == last:
                at_last = x
        for x in range(n):
            a = order[x]
            if adup[a]:
                continue
            y0, y1 = x + 1, n
            if checked[a]:          # of its pairs only (a, last) may pass now
                if at_last <= x:
                    continue
                y0, y1 = at_last, at_last + 1
            for y in range(y0, y1):
                b = order[y]
                if adup[b]:
                    continue
                pair += 1
                t = _pair_type(a, b, ntype, load, head, nxt, item_nq, ok, ahead, anxt, aids,
                               stamp, pair, tsort, price, conf, room, cap_tol, acc)
                if t >= 0:
                    fa, fb, ft, fx = a, b, t, x
                    break
            if fa >= 0:
                break
        if fa < 0:
            break
        out[done, 0], out[done, 1], out[done, 2] = fa, fb, ft
        done += 1
        for x in range(fx):
            checked[order[x]] = True
        checked[fa] = False
        last = fa
        # apply: a holds both, b is gone
        for r in range(R):
            load[fa, r] = acc[r]
        if head[fb] >= 0:
            if head[fa] < 0:
                head[fa] = head[fb]
            else:
                nxt[tail[fa]] = head[fb]
            tail[fa] = tail[fb]
        if ahead[fb] >= 0:
            if ahead[fa] < 0:
                ahead[fa] = ahead[fb]
            else:
                anxt[atail[fa]] = ahead[fb]
            atail[fa] = atail[fb]
        for t in range(ok.shape[1]):
            ok[fa, t] = ok[fa, t] and ok[fb, t]
        for t in (ntype[fa], ntype[fb]):
            if room[t] <= 0:
                checked[:] = False
        room[ntype[fa]] += 1
        room[ntype[fb]] += 1
        room[ft] -= 1
        ntype[fa] = ft
        # the order without a and b, then a at its place
        w = 0
        for x in range(n):
            if order[x] != fa and order[x] != fb:
                order[w] = order[x]
                w += 1
        n = w
        at = n
        for x in range(n):
            if _before(ntype, rank, price, fa, order[x]):
                at = x
                break
        for x in range(n, at, -1):
            order[x] = order[x - 1]
        order[at] = fa
        n += 1
    return out[:done]
