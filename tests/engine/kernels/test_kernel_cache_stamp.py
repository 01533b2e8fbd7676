"""A kernel's disk-cache entries hold only for the kernel sources as they are
(engine/kernels/_cache.py ``tied``): numba dates an entry by the kernel's own file,
but helpers from the package's other files are compiled into it, and an entry made
before one of them changed must not be loaded."""
from __future__ import annotations

import numpy as np

import vecsched.engine.kernels._cache as kcache
from tests.kits.source_module import load_module

KERNEL = '''
import numpy as np
from vecsched.engine.kernels._jit import njit


@njit
def twice(x):
    return x * 2
'''


def _load(path, name):
    return load_module(path, name).twice


def test_an_entry_made_for_other_kernel_sources_is_compiled_again(tmp_path, monkeypatch):
    path = tmp_path / "kern.py"
    path.write_text(KERNEL)
    first = _load(path, "kern_a")
    assert first(np.int64(4)) == 8
    assert first.stats.cache_misses and not first.stats.cache_hits    # compiled, saved

    again = _load(path, "kern_b")                 # a new process would do the same
    assert again(np.int64(4)) == 8
    assert again.stats.cache_hits and not again.stats.cache_misses    # loaded

    # A helper elsewhere in the package changed (the digest differs), the kernel's
    # own file did not: its entry is not fresh.
    monkeypatch.setattr(kcache, "sources_digest", lambda *a: b"another set of sources")
    edited = _load(path, "kern_c")
    assert edited(np.int64(4)) == 8
    assert edited.stats.cache_misses and not edited.stats.cache_hits


def test_the_digest_covers_every_source_file_and_nothing_else(tmp_path):
    (tmp_path / "a.py").write_text("X = 1\n")
    (tmp_path / "b.py").write_text("Y = 2\n")
    (tmp_path / "notes.txt").write_text("not a source\n")
    before = kcache.sources_digest(str(tmp_path))
    kcache.sources_digest.cache_clear()
    (tmp_path / "notes.txt").write_text("still not a source\n")
    assert kcache.sources_digest(str(tmp_path)) == before
    kcache.sources_digest.cache_clear()
    (tmp_path / "b.py").write_text("Y = 3\n")
    assert kcache.sources_digest(str(tmp_path)) != before


def test_the_engine_kernels_carry_the_package_digest():
    from vecsched.engine.kernels.gangs import _pack_gangs
    from vecsched.engine.kernels.steps import sort_once
    for d in (_pack_gangs, sort_once):
        stamp = d._cache._cache_file._source_stamp
        assert isinstance(stamp, tuple) and stamp[1] == kcache.sources_digest()
