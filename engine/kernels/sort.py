"""Ordering inside kernels: a stable merge sort of indices by an int64 key
(numba's np.argsort compiles its quicksort for every caller's types, which cost
more compile time than the kernels that called it)."""
from ._jit import njit_inner


@njit_inner
def _sort_by(idx, key, tmp):
    """Sort idx (n,) in place so that key[idx] ascends; equal keys keep their
    order. tmp: (n,) room."""
    n = idx.shape[0]
    width = 1
    src, dst = idx, tmp
    while width < n:
        lo = 0
        while lo < n:
            mid = min(lo + width, n)
            hi = min(lo + 2 * width, n)
            a, b, k = lo, mid, lo
            while a < mid and b < hi:
                if key[src[b]] < key[src[a]]:
                    dst[k] = src[b]
                    b += 1
                else:
                    dst[k] = src[a]
                    a += 1
                k += 1
            while a < mid:
                dst[k] = src[a]
                a += 1
                k += 1
            while b < hi:
                dst[k] = src[b]
                b += 1
                k += 1
            lo = hi
        src, dst = dst, src
        width *= 2
    if src is not idx:
        for i in range(n):
            idx[i] = src[i]
