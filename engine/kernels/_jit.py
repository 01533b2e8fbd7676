"""All numba options in one place.

``cache=True`` keeps compiled kernels on disk (next to the sources, or in
NUMBA_CACHE_DIR; read only from VECSCHED_KERNEL_CACHE, _cache.py) so a warm start
skips compilation. fastmath stays off: the
score must round exactly as CPython does (Ray computes it in Python floats).
"""
import numba
from numba.core.registry import CPUDispatcher

from ._cache import shipped, tied
from ._linked import LinkedOnlyCompiler

# forceinline is explicit everywhere: numba passes it on to callees compiled
# from within a kernel that sets it and not they themselves.
OPTS = dict(cache=True, nogil=True, fastmath=False, boundscheck=False, no_cfunc_wrapper=True,
            forceinline=False)


def njit(*args, **kw):
    """numba.njit with OPTS; a cached kernel also reads a cache shipped with the
    install (_cache.py, ``VECSCHED_KERNEL_CACHE``), and its cache entries hold only
    for the package's kernel sources as they are (``_cache.tied``)."""
    got = numba.njit(*args, **{**OPTS, **kw})
    if args and callable(args[0]):
        return tied(shipped(got))
    return lambda fn: tied(shipped(got(fn)))


def njit_leaf(*args, hot=False, **kw):
    """A kernel that allocates nothing: compiled without numba's reference
    counting. Array arguments and views are borrowed from the caller, so no
    atomic increment/decrement is paid per array per call (these were half of
    the gang kernel's time). It must not create or return an array.
    ``hot``: always inlined into its callers (a small helper called per
    candidate: no call, no records copied into its arguments)."""
    return njit(*args, **{"_nrt": False, "forceinline": hot, **kw})


class _Inner(CPUDispatcher):
    def __call__(self, *args, **kw):
        raise TypeError(f"{self.py_func.__qualname__} runs inside kernels only (compiled "
                        "without a Python entry point)")

    def add_overload(self, cres):
        # no machine code of its own to register for calls from Python
        self.overloads[tuple(cres.signature.args)] = cres


def njit_inner(fn=None, *, hot=False, alloc=False, merged=False):
    """``njit_leaf`` for a helper only kernels call: no Python entry point is
    compiled for it (each one costs as much as a small kernel), nor machine code of
    its own: it is linked into its callers (``_linked.py``). ``alloc``: it
    makes arrays (numba's reference counting on, as ``njit``). ``merged``: its
    code is merged into its caller's before typing (numba's ``inline="always"``),
    so it is not compiled and optimised on its own as well: for a helper with one
    call site (numba optimises each compiled function with all it calls)."""
    if fn is None:
        return lambda f: njit_inner(f, hot=hot, alloc=alloc, merged=merged)
    opts = {k: v for k, v in OPTS.items() if k != "cache"}
    d = _Inner(fn, targetoptions={**opts, "nopython": True, "_nrt": alloc, "forceinline": hot,
                                  **({"inline": "always"} if merged else {})},
               pipeline_class=LinkedOnlyCompiler)
    return d    # not cached on its own, no machine code of its own: its callers' hold its code
