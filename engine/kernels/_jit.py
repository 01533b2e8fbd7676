"""All numba options in one place.

``cache=True`` keeps compiled kernels on disk (next to the sources, or in
NUMBA_CACHE_DIR) so a warm start skips compilation. fastmath stays off: the
score must round exactly as CPython does (Ray computes it in Python floats).
"""
import numba

OPTS = dict(cache=True, nogil=True, fastmath=False, boundscheck=False)


def njit(*args, **kw):
    return numba.njit(*args, **{**OPTS, **kw})
