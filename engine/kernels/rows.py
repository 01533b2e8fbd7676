"""Group equal rows of a matrix (node equivalence classes), by hash then exact check."""
import numpy as np

from ._jit import njit
from .sort import _sort_by


@njit
def _row_ids(bits):
    """bits (n, w) uint64 (the float64 keys viewed as integers, -0.0 normalised):
    returns ((n,) class id per row, number of classes); equal rows share an id."""
    n, w = bits.shape
    h = np.empty(n, dtype=np.int64)
    for i in range(n):
        x = np.uint64(1469598103934665603)
        for j in range(w):
            x = (x ^ bits[i, j]) * np.uint64(1099511628211)
        h[i] = np.int64(x)          # the same bits: only equality matters
    order = np.arange(n)
    _sort_by(order, h, np.empty(n, dtype=np.int64))
    ids = np.full(n, -1, dtype=np.int32)
    nxt = 0
    i = 0
    while i < n:
        j = i
        while j < n and h[order[j]] == h[order[i]]:
            j += 1
        for a in range(i, j):
            r = order[a]
            if ids[r] >= 0:
                continue
            ids[r] = nxt
            for b in range(a + 1, j):
                s = order[b]
                if ids[s] >= 0:
                    continue
                same = True
                for k in range(w):
                    if bits[r, k] != bits[s, k]:
                        same = False
                        break
                if same:
                    ids[s] = nxt
            nxt += 1
        i = j
    return ids, nxt


def row_ids(key: np.ndarray):
    """Class id per row of a float matrix (equal rows, equal ids) and the count."""
    bits = np.ascontiguousarray(key + 0.0).view(np.uint64)
    return _row_ids(bits)
