"""A kernel cache built at install time and read only afterwards
(engine/kernels/_cache.py, ``VECSCHED_KERNEL_CACHE``): a kernel loads from it,
a specialisation it does not hold compiles without writing there."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from tests.kits.paths import REPO as ROOT

KERNEL = textwrap.dedent("""
    from vecsched.engine.kernels._jit import njit

    @njit
    def twice(a):
        return a + a
""")

RUN = textwrap.dedent("""
    import json, sys
    import kmod
    got = [kmod.twice(a) for a in sys.argv[1:] and [float(x) for x in sys.argv[1:]] or [3]]
    s = kmod.twice.stats
    print(json.dumps({"got": got, "hits": sum(s.cache_hits.values()),
                      "misses": sum(s.cache_misses.values()),
                      "cache": type(kmod.twice._cache).__name__}))
""")


def _run(src, env_extra: dict, *args) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "VECSCHED_KERNEL_CACHE")}
    env.update(env_extra, PYTHONPATH=os.pathsep.join([str(src), str(ROOT)]))
    out = subprocess.run([sys.executable, "-c", RUN, *args], env=env, capture_output=True,
                         text=True, timeout=300, cwd=str(src))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _files(d) -> dict:
    return {str(f): (f.stat().st_size, f.stat().st_mtime_ns) for f in d.rglob("*.nb*")}


def test_shipped_cache_is_loaded_and_never_written(tmp_path):
    src, built = tmp_path / "src", tmp_path / "built"
    src.mkdir()
    built.mkdir()
    (src / "kmod.py").write_text(KERNEL)
    first = _run(src, {"NUMBA_CACHE_DIR": str(built)})          # the install-time build
    assert first["got"] == [6] and first["misses"] == 1 and first["hits"] == 0
    before = _files(built)
    assert before
    shipped = _run(src, {"VECSCHED_KERNEL_CACHE": str(built)})
    assert shipped == {"got": [6], "hits": 1, "misses": 0, "cache": "ShippedCache"}
    other = _run(src, {"VECSCHED_KERNEL_CACHE": str(built)}, "1.5")   # not in the cache
    assert other["got"] == [3.0] and other["misses"] == 1
    assert _files(built) == before                              # read only
    assert not any((src / "__pycache__").glob("*.nb*"))        # nor saved beside the source


def _other_cpu() -> str:
    """A CPU model LLVM knows that is not this machine's."""
    from llvmlite import binding as llvm
    return "nehalem" if llvm.get_host_cpu_name() != "nehalem" else "haswell"


def test_a_portable_cache_is_loaded_on_this_cpu_and_another_cpus_is_not(tmp_path):
    # `vecsched warmup --portable` builds with NUMBA_CPU_NAME=generic: code for any
    # CPU of the architecture, which a shipped cache's reader takes when it holds
    # nothing for its own CPU. An entry built for another CPU model is not taken.
    src = tmp_path / "src"
    src.mkdir()
    (src / "kmod.py").write_text(KERNEL)
    for cpu, expect_hit in (("generic", True), (_other_cpu(), False)):
        built = tmp_path / f"built-{cpu}"
        built.mkdir()
        first = _run(src, {"NUMBA_CACHE_DIR": str(built), "NUMBA_CPU_NAME": cpu})
        assert first["got"] == [6] and first["misses"] == 1, cpu
        before = _files(built)
        shipped = _run(src, {"VECSCHED_KERNEL_CACHE": str(built)})
        assert shipped["got"] == [6] and shipped["cache"] == "ShippedCache"
        assert (shipped["hits"], shipped["misses"]) == ((1, 0) if expect_hit else (0, 1)), cpu
        assert _files(built) == before                          # read only either way
    assert not any((src / "__pycache__").glob("*.nb*"))
