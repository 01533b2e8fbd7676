"""Where OR-Tools does not import (a broken install: it is a core dependency), the
replay refuses the efficient mode with its CP-SAT steps on, and EngineScheduler builds
with them off (the engine's own refusal: tests/engine/efficient/test_ortools_required.py)."""
from __future__ import annotations

import pytest

from tests.kits.no_ortools import BLOCK, run_child as _run

pytest.importorskip("ray.autoscaler.v2.scheduler")


def test_missing_ortools_refuses_the_replay_and_engine_scheduler():
    out = _run(BLOCK + """
from vecsched.engine.solver import SolverUnavailable
from vecsched.adapters.replay import make
try:
    make("efficient")
except SolverUnavailable as e:
    print("replay refused")
from vecsched.adapters.ray.scheduler import EngineScheduler
from vecsched.engine.efficient import EfficientOptions
s = EngineScheduler(mode="efficient", options=EfficientOptions(gang_cpsat_bundles=0))
print("heuristics-only scheduler built")
""")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split("\n")[:2] == ["replay refused", "heuristics-only scheduler built"]
