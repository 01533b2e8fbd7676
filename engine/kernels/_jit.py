"""All numba options in one place.

``cache=True`` keeps compiled kernels on disk (next to the sources, or in
NUMBA_CACHE_DIR) so a warm start skips compilation. fastmath stays off: the
score must round exactly as CPython does (Ray computes it in Python floats).
"""
import numba

OPTS = dict(cache=True, nogil=True, fastmath=False, boundscheck=False)


def njit(*args, **kw):
    return numba.njit(*args, **{**OPTS, **kw})


def njit_leaf(*args, **kw):
    """A kernel that allocates nothing: compiled without numba's reference
    counting. Array arguments and views are borrowed from the caller, so no
    atomic increment/decrement is paid per array per call (these were half of
    the gang kernel's time). It must not create or return an array."""
    return njit(*args, **{"_nrt": False, **kw})
