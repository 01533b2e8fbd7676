"""The search for the first mergeable pair of ``engine/kernels/eff_merge.py``, one
round alone, on the kernel's own arrays: the step ``merge_rounds`` repeats, kept here as
the reference between the readable twin (``test_eff_kernels_gang.first_merge_twin``)
and the kernel that makes every round at once (``test_gang_speed_improve``)."""
import numpy as np

from vecsched.engine.kernels._jit import njit, njit_inner
from vecsched.engine.kernels.eff_merge import _fits_type


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
