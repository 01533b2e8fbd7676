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


def _warmup(cache_dir, *args):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache_dir), COLUMNS="200",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH"))
                                          if p))
    return subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "warmup", *args], env=env,
                          cwd=str(ROOT), capture_output=True, text=True, timeout=900)


@pytest.mark.slow
def test_warmup_compiles_once_then_loads_the_cache(tmp_path):
    first = _warmup(tmp_path)
    assert first.returncode == 0, first.stderr
    assert SPINNER_TEXT in first.stdout and "compiled in" in first.stdout
    assert any(tmp_path.rglob("*.nbi")), "nothing written to NUMBA_CACHE_DIR"
    second = _warmup(tmp_path)
    assert second.returncode == 0, second.stderr
    assert SPINNER_TEXT not in second.stdout and "loaded from the cache" in second.stdout
