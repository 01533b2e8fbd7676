"""Kernels loaded from a cache built at install time and read only afterwards.

numba keeps compiled kernels in a directory it must be able to write: beside
the sources (``__pycache__``) or under ``NUMBA_CACHE_DIR``. An image whose
files are read-only at run time (Kubernetes' ``readOnlyRootFilesystem``, a
wheel installed by root and run by another user) cannot use a cache built when
the image was: every container compiles again (15-25 s).

``VECSCHED_KERNEL_CACHE=<dir>`` names such a cache: a directory that
``NUMBA_CACHE_DIR=<dir> vecsched warmup`` filled at build time (numba's own
layout, one sub-directory per source directory). When it is set before the
engine is imported, each kernel looks there first, loads what it finds and
never writes there: a kernel or specialisation it does not hold is compiled in
memory, not saved (numba's own locators take over only when the directory has
nothing for that kernel's source). numba keys each entry by the source's
content and the machine's CPU, so a cache built for other sources or another
CPU is simply not used - except a portable one: built with
``NUMBA_CPU_NAME=generic`` (``vecsched warmup --portable``), its code runs on any
CPU of the same architecture, and a shipped cache's generic entries are loaded
when it has none for this CPU (an image built on one machine, run on others).
This reaches into numba's caching classes (numba 0.68); if they change,
``shipped`` leaves the kernel with numba's own cache.
"""
from __future__ import annotations

import functools
import hashlib
import os

from numba.core import caching

ENV = "VECSCHED_KERNEL_CACHE"


class ShippedLocator(caching._SourceFileBackedLocatorMixin, caching._CacheLocator):
    """The directory ``VECSCHED_KERNEL_CACHE`` names, laid out as under
    ``NUMBA_CACHE_DIR``; read only (``ensure_cache_path`` creates nothing)."""

    def __init__(self, py_func, py_file, path: str):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        self._cache_path = path

    def get_cache_path(self) -> str:
        return self._cache_path

    def ensure_cache_path(self) -> None:
        if not os.path.isdir(self._cache_path):
            raise OSError(f"{ENV}: {self._cache_path} is not a directory")

    @classmethod
    def from_function(cls, py_func, py_file):
        root = os.environ.get(ENV)
        if not root or not os.path.exists(py_file):
            return None
        path = os.path.join(root, cls.get_suitable_cache_subpath(py_file))
        return cls(py_func, py_file, path) if os.path.isdir(path) else None


class _ShippedImpl(caching.CompileResultCacheImpl):
    _locator_classes = [ShippedLocator] + list(caching.CompileResultCacheImpl._locator_classes)


PORTABLE_CPU = "generic"     # NUMBA_CPU_NAME of a cache that any CPU of its architecture runs


def portable_magic(codegen) -> tuple:
    """numba's codegen key (target triple, CPU name, CPU features) of code built
    for this architecture with ``NUMBA_CPU_NAME=generic``, which sets no features."""
    return (codegen.magic_tuple()[0], PORTABLE_CPU, "")


class _Portable:
    """A codegen as numba's cache index sees it (its key only), built generic."""

    def __init__(self, codegen):
        self._magic = portable_magic(codegen)

    def magic_tuple(self) -> tuple:
        return self._magic


class ShippedCache(caching.FunctionCache):
    """numba's per-function cache, looking in the shipped directory first and
    never saving there."""

    _impl_class = _ShippedImpl

    def _save_overload(self, sig, data):
        if isinstance(self._impl.locator, ShippedLocator):
            return                      # read only: kept in memory for this process
        super()._save_overload(sig, data)

    def _load_overload(self, sig, target_context):
        got = super()._load_overload(sig, target_context)
        if got is not None or not self._enabled or not self.read_only:
            return got
        # none for this CPU: the same architecture's portable entry, if shipped
        key = self._index_key(sig, _Portable(target_context.codegen()))
        data = self._cache_file.load(key)
        return None if data is None else self._impl.rebuild(target_context, data)

    @property
    def read_only(self) -> bool:
        return isinstance(self._impl.locator, ShippedLocator)


@functools.lru_cache(maxsize=None)
def sources_digest(directory: str = os.path.dirname(os.path.abspath(__file__))) -> bytes:
    """sha256 of every ``.py`` file of ``directory`` (names and contents, in name order)."""
    h = hashlib.sha256()
    for name in sorted(os.listdir(directory)):
        if name.endswith(".py"):
            h.update(name.encode() + b"\0")
            with open(os.path.join(directory, name), "rb") as f:
                h.update(f.read())
            h.update(b"\0")
    return h.digest()


def tied(d):
    """The cached kernel ``d`` with its cache entries valid only for these exact
    kernel sources, all of them. numba dates a kernel's entries by its own source
    file; a kernel has the helpers of other files of this package compiled into it,
    and an entry made before one of them changed would load the old helper's code
    (an edited helper, a ``git pull`` that changed only the helper's file). The
    entries' stamp is numba's and this package's digest together; an older entry
    is not fresh and is compiled again. ``d`` unchanged when numba's classes are not
    as expected."""
    cache_file = getattr(getattr(d, "_cache", None), "_cache_file", None)
    if cache_file is None or not hasattr(cache_file, "_source_stamp"):
        return d
    cache_file._source_stamp = (cache_file._source_stamp, sources_digest())
    return d


def shipped(d):
    """The dispatcher ``d`` (compiled with cache=True) with a ShippedCache when
    ``VECSCHED_KERNEL_CACHE`` is set; ``d`` unchanged otherwise."""
    if not os.environ.get(ENV) or type(getattr(d, "_cache", None)) is not caching.FunctionCache:
        return d
    try:
        d._cache = ShippedCache(d.py_func)
    except Exception:                   # numba's classes changed: its own cache stays
        pass
    return d
