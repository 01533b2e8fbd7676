"""Helpers only kernels call (engine/kernels/_linked.py) are lowered and linked into
their callers but never made machine code on their own; their callers compute the
same, are cached with the helpers' code inside and load without compiling them."""
from __future__ import annotations

import numpy as np
import pytest

from tests.kits.source_module import load_module
from vecsched.engine.kernels._linked import _LinkedOnlyLibrary, _Unrunnable

KERNEL = '''
import numpy as np
from vecsched.engine.kernels._jit import njit, njit_inner


@njit_inner(hot=True)
def _leaf(a, i):
    return a[i] * 3 + 1


@njit_inner(alloc=True)
def _mid(a):
    out = np.empty(a.size, np.int64)
    for i in range(a.size):
        out[i] = _leaf(a, i)
    return out


@njit_inner(merged=True)
def _last(a):
    return a[a.size - 1]


@njit
def run(a):
    b = _mid(a)
    return b.sum() + _last(b)
'''


def _expected(a):
    b = [int(x) * 3 + 1 for x in a]
    return sum(b) + b[-1]


def test_helpers_are_linked_only_and_their_callers_run_and_load_from_the_cache(tmp_path):
    path = tmp_path / "kern_linked.py"
    path.write_text(KERNEL)
    a = np.arange(7, dtype=np.int64) - 2

    first = load_module(path, "kern_linked_a")
    assert first.run(a) == _expected(a)
    assert first.run.stats.cache_misses and not first.run.stats.cache_hits
    for helper in (first._leaf, first._mid):
        (cres,) = helper.overloads.values()
        assert isinstance(cres.library, _LinkedOnlyLibrary)
        assert isinstance(cres.entry_point, _Unrunnable)
        with pytest.raises(TypeError, match="linked into kernels only"):
            cres.library.get_pointer_to_function(cres.fndesc.llvm_func_name)
        assert "cpython" not in cres.library.get_llvm_str()     # no Python wrapper lowered
    with pytest.raises(TypeError, match="runs inside kernels only"):
        first._mid(a)

    again = load_module(path, "kern_linked_b")    # a new process would do the same
    b = np.array([5, -4, 0, 9], dtype=np.int64)
    assert again.run(b) == _expected(b)
    assert again.run.stats.cache_hits and not again.run.stats.cache_misses
    assert not again._mid.overloads and not again._leaf.overloads   # not compiled at all

