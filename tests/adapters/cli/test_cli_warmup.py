"""``vecsched warmup`` on an empty numba cache compiles (and says so, as the
CLI does on a first run), then a second run only loads the cache."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from vecsched.adapters.cli.warmup import SPINNER_TEXT

from tests.kits.paths import REPO as ROOT


def _warmup(cache_dir, *args, shipped=None):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), COLUMNS="200",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    env.pop("VECSCHED_KERNEL_CACHE", None)
    if shipped is not None:
        env["VECSCHED_KERNEL_CACHE"] = str(shipped)
    return subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "warmup", *args], env=env,
                          cwd=str(ROOT), capture_output=True, text=True, timeout=900)


def _engine_warmup_only(cache_dir):
    """``vecsched.engine.warmup()`` (the ray-compat mode's kernels only) in a child."""
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir))
    env.pop("VECSCHED_KERNEL_CACHE", None)
    code = "from vecsched.engine import warmup; warmup()"
    return subprocess.run([sys.executable, "-c", code], env=env, cwd=str(ROOT),
                          capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_warmup_compiles_once_then_loads_the_cache(tmp_path):
    # A cache warm for the ray-compat mode only is cold for a start in either mode:
    # the check names the efficient mode's kernels, which a warm-up then compiles.
    assert _engine_warmup_only(tmp_path).returncode == 0
    half = _warmup(tmp_path, "--check", "--engine-only")
    assert half.returncode == 1, (half.stdout, half.stderr)
    assert half.stdout.startswith("cold: 10 of 18 entry kernels not in the cache (_gang_pass, "), \
        half.stdout
    first = _warmup(tmp_path)
    assert first.returncode == 0, first.stderr
    assert SPINNER_TEXT in first.stdout and "compiled in" in first.stdout
    assert any(tmp_path.rglob("*.nbi")), "nothing written to NUMBA_CACHE_DIR"
    second = _warmup(tmp_path)
    assert second.returncode == 0, second.stderr
    assert SPINNER_TEXT not in second.stdout and "loaded from the cache" in second.stdout
    warm = _warmup(tmp_path, "--check")
    assert warm.returncode == 0 and warm.stdout.startswith("warm: all "), warm.stdout
    # The same cache shipped read only (VECSCHED_KERNEL_CACHE), numba's own empty:
    # warm, and a warm-up loads it and writes nothing to either directory.
    before = _files(tmp_path)
    own = tmp_path / "own"
    own.mkdir()
    shipped = _warmup(own, "--check", shipped=tmp_path)
    assert shipped.returncode == 0 and "(read only)" in shipped.stdout, shipped.stdout
    third = _warmup(own, shipped=tmp_path)
    assert third.returncode == 0 and "loaded from the cache" in third.stdout, third.stdout
    assert _files(tmp_path) == before
    assert not any(own.rglob("*.nb*"))


def _files(d: Path) -> dict:
    return {str(f): (f.stat().st_size, f.stat().st_mtime_ns) for f in d.rglob("*.nb*")}


def _cpus(d: Path) -> set:
    """The CPU models numba's cache indexes under ``d`` hold code for (the second
    part of each entry's codegen key; an index is a format version, then the
    pickled (source stamp, {key: data file}))."""
    import pickle
    cpus = set()
    for f in d.rglob("*.nbi"):
        with open(f, "rb") as fh:
            pickle.load(fh)
            _stamp, overloads = pickle.loads(fh.read())
        cpus.update(key[1][1] for key in overloads)
    return cpus


@pytest.mark.slow
def test_a_portable_cache_is_generic_and_warm_when_shipped(tmp_path):
    # `warmup --portable` builds numba's generic CPU code (in a child interpreter:
    # numba reads NUMBA_CPU_NAME when it starts), which a shipped cache's reader
    # loads on this machine, whose CPU is not "generic".
    built = tmp_path / "built"
    built.mkdir()
    got = _warmup(built, "--portable", "--engine-only")
    assert got.returncode == 0, got.stderr
    assert "compiled for any CPU of this architecture (portable)" in got.stdout, got.stdout
    assert _cpus(built) == {"generic"}
    own = tmp_path / "own"
    own.mkdir()
    before = _files(built)
    warm = _warmup(own, "--check", "--engine-only", shipped=built)
    assert warm.returncode == 0 and warm.stdout.startswith("warm: all 18 "), warm.stdout
    loaded = _warmup(own, "--engine-only", shipped=built)
    assert loaded.returncode == 0 and "loaded from the cache" in loaded.stdout, loaded.stdout
    assert _files(built) == before and not any(own.rglob("*.nb*"))
    # Not shipped, numba's own cache holds no entry for this CPU: cold.
    cold = _warmup(built, "--check", "--engine-only")
    assert cold.returncode == 1 and cold.stdout.startswith("cold: 18 of 18 "), cold.stdout


def test_portable_needs_a_cache_directory(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("NUMBA_CACHE_DIR", "VECSCHED_KERNEL_CACHE")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                        if p)
    got = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "warmup",
                          "--portable"], env=env, cwd=str(tmp_path), capture_output=True,
                         text=True, timeout=300)
    assert got.returncode == 2 and got.stdout == ""
    assert "--portable builds a cache to ship: set NUMBA_CACHE_DIR" in got.stderr
    both = _warmup(tmp_path, "--portable", "--check")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr, both.stderr


def test_check_says_cold_on_an_empty_cache_without_compiling(tmp_path):
    got = _warmup(tmp_path, "--check", "--engine-only")
    assert got.returncode == 1, (got.stdout, got.stderr)
    assert got.stdout.startswith("cold: ") and len(got.stdout.strip().splitlines()) == 1
    assert "run vecsched warmup" in got.stdout
    assert not any(tmp_path.rglob("*.nbi"))            # nothing compiled, nothing saved


class _Session:
    """What the test session's warm-up hook reads of a pytest session."""

    def __init__(self, lines: list):
        tr = type("TR", (), {"write_line": staticmethod(lines.append)})()
        manager = type("PM", (), {"get_plugin": staticmethod(lambda name: tr)})()
        option = type("Opt", (), {"collectonly": False})()
        self.config = type("Cfg", (), {"option": option, "pluginmanager": manager})()
        self.items = ["a test"]


@pytest.mark.parametrize("cached", [False, True, None])
def test_the_test_session_compiles_a_cold_cache_first_and_says_so(monkeypatch, cached):
    """tests/conftest.py: on a cold cache the kernels compile before the first test with
    a line before and after (not silently inside whichever test needs them first); a
    warm cache, or one it cannot read, is left alone."""
    import tests.conftest as session_hooks
    import vecsched.engine.warmup  # noqa: F401 (the hook acts when tests use the engine)
    from vecsched.adapters.cli import warmup
    calls: list = []
    monkeypatch.setattr(warmup, "warm_parts", lambda codec=True: (lambda: calls.append(1),
                                                                  ("k1", "k2")))
    monkeypatch.setattr(warmup, "kernels_cached", lambda kernels: cached)
    monkeypatch.delenv("VECSCHED_TEST_NO_WARMUP", raising=False)
    lines: list = []
    session_hooks.pytest_collection_finish(_Session(lines))
    if cached is False:
        assert calls == [1] and len(lines) == 2
        assert lines[0].startswith("vecsched: compiling the engine's 2 numba kernels once")
        assert lines[1].startswith("vecsched: kernels compiled in ")
    else:
        assert calls == [] and lines == []
