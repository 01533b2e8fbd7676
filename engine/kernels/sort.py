"""Ordering inside kernels: a stable merge sort of indices by an int64 key
(numba's np.argsort compiles its quicksort for every caller's types, which cost
more compile time than the kernels that called it).

It merges the ascending runs the input already has (a natural merge sort): the
holders a placement group visits come out of the fit index in the order the
list had at the start, and Ray's list keeps the relative order of most nodes
from one group to the next, so they are mostly sorted already. Sorted input
costs one pass; r runs cost log2(r) passes, random input as many as a plain
bottom-up merge sort."""
from ._jit import njit_inner


@njit_inner(hot=True)
def _run_end(src, key, lo, n):
    """The end of the ascending (non-descending) run of src that starts at lo."""
    e = lo + 1
    while e < n and key[src[e]] >= key[src[e - 1]]:
        e += 1
    return e


@njit_inner
def _sort_by(idx, key, tmp):
    """Sort idx (n,) in place so that key[idx] ascends; equal keys keep their
    order. tmp: (n,) room."""
    n = idx.shape[0]
    if n < 2 or _run_end(idx, key, 0, n) == n:
        return
    src, dst = idx, tmp
    runs = n
    while runs > 1:
        runs = 0
        lo = 0
        while lo < n:
            mid = _run_end(src, key, lo, n)
            hi = _run_end(src, key, mid, n) if mid < n else n
            a, b, k = lo, mid, lo
            while a < mid and b < hi:
                if key[src[b]] < key[src[a]]:      # ties: the left run first (stable)
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
            runs += 1
            lo = hi
        src, dst = dst, src
    if src is not idx:
        for i in range(n):
            idx[i] = src[i]
