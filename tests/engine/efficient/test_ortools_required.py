"""OR-Tools and the efficient mode: where OR-Tools does not import (a broken install:
it is a core dependency), the mode refuses to run with its CP-SAT steps on (a typed
error naming the option), instead of planning differently from an install that has it; with them off it plans
the same on every install. "Missing" is simulated in a child process by an import hook
that refuses ``ortools`` (tests/kits/no_ortools.py); the replay's and EngineScheduler's
refusal is tests/adapters/ray/test_efficient_without_ortools.py."""
from __future__ import annotations

from tests.kits.no_ortools import BLOCK, run_child as _run

PLAN = """
import json
from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from tests.kits.ganggen import gang_tick
p = gang_tick(1, bundles=20)
plan = schedule(p, mode="efficient", options=EfficientOptions(gang_cpsat_bundles=0))
print(json.dumps({"launch": plan.launch.tolist(), "slots": plan.place_slot.tolist(),
                  "terms": plan.term_node.tolist(), "gang_bad": plan.gang_infeasible.tolist()}))
"""


def test_missing_ortools_is_a_typed_error_naming_the_option():
    out = _run(BLOCK + """
from vecsched.engine.solver import SolverUnavailable, have_ortools
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine import schedule
from tests.kits.ganggen import gang_tick
assert not have_ortools()
for make in (lambda: EfficientOptions(),
             lambda: schedule(gang_tick(1, bundles=20), mode="efficient")):
    try:
        make()
    except SolverUnavailable as e:
        assert isinstance(e, ImportError)
        assert "options.gang_cpsat_bundles=200" in str(e), e
        assert "pip install" in str(e) and "gang_cpsat_bundles=0" in str(e), e
        print("refused")
    else:
        print("planned without CP-SAT")
""")
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.split() == ["refused", "refused"], out.stdout


def test_without_cpsat_the_plans_are_the_same_on_every_install():
    """gang_cpsat_bundles=0 needs no OR-Tools, and plans as it does where OR-Tools is
    installed (here: the same 20-bundle gang tick in two processes)."""
    blocked, installed = _run(BLOCK + PLAN), _run(PLAN)
    assert blocked.returncode == 0, blocked.stderr[-3000:]
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert blocked.stdout == installed.stdout and '"launch"' in blocked.stdout
