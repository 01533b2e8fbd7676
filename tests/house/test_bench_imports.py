"""The asv suite imports without Ray: asv imports every module of bench/benchmarks/ to
find its benchmarks, so one Ray import at module top would make the whole suite need
Ray (the engine's benchmarks do not). Ray is imported inside the functions that build
Ray's request (bench/benchmarks/common.py: scheduling_request)."""
from __future__ import annotations

import subprocess
import sys

from tests.kits.paths import REPO

_IMPORT_ALL = """
import importlib, pkgutil, sys
sys.modules["ray"] = None                  # any `import ray...` now raises ImportError
import bench.benchmarks as pkg
names = [m.name for m in pkgutil.iter_modules(pkg.__path__)]
for name in names:
    importlib.import_module(f"bench.benchmarks.{name}")
print(" ".join(sorted(names)))
"""


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                          text=True, timeout=600)


def test_every_benchmark_module_imports_without_ray():
    res = _run(_IMPORT_ALL)
    assert res.returncode == 0, res.stderr[-3000:]
    assert {"bench_engine", "common"} <= set(res.stdout.split())


def test_a_benchmark_module_importing_ray_fails_with_ray_blocked():
    """The blocking is real: the module that moved out of the suite for this reason
    (bench/churn.py, Ray's request at module top) fails to import."""
    res = _run(_IMPORT_ALL.replace('import bench.benchmarks as pkg', 'import bench.churn'))
    assert res.returncode != 0 and "ray" in res.stderr
