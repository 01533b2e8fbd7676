"""A base install (no ``cli`` extra, or no ``ray``) gets one ``error:`` line naming the
extra to install, before any work - not a ModuleNotFoundError. The missing module is
simulated in a subprocess by a ``None`` in ``sys.modules`` (Python's own marker for a
module that must not be imported)."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.kits.paths import REPO

_SHIM = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None
from vecsched.adapters.cli.main import main
sys.exit(main({argv!r}))
"""


def _run(blocked: tuple, argv: list) -> subprocess.CompletedProcess:
    code = _SHIM.format(blocked=blocked, argv=argv)
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                           text=True, timeout=300)


CASES = [
    (("rich",), ["demo"], "vecsched demo needs the 'cli' extra (rich is not installed): "
                          "pip install 'vecsched[cli]'"),
    # checked before the arguments' own checks: the trace name is never looked at
    (("rich",), ["demo", "--trace", "nope"], "pip install 'vecsched[cli]'"),
    (("matplotlib",), ["replay", "--scheduler", "baseline"], "pip install 'vecsched[cli]'"),
    (("ray",), ["explain", "dump.json"], "vecsched explain needs the 'ray' extra (ray is not "
                                         "installed): pip install 'vecsched[ray]'"),
    (("ray",), ["kuberay-demo"], "pip install 'vecsched[ray]'"),
    (("redis",), ["ha-demo"], "pip install 'vecsched[ha]'"),
]


@pytest.mark.parametrize("blocked,argv,expected", CASES,
                         ids=[f"{b[0]}-{' '.join(a)}" for b, a, _ in CASES])
def test_missing_extra_is_one_line(blocked, argv, expected):
    out = _run(blocked, argv)
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2, out.stderr
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], lines
    assert "Traceback" not in out.stderr and out.stdout == ""


def test_demo_without_ray_runs_without_rays_scheduler_and_says_so():
    """Ray is optional for the demo: the argument check still runs first."""
    out = _run(("ray",), ["demo", "--nodes", "-1"])
    assert out.returncode == 2 and "argument --nodes: must be >= 1" in out.stderr


def test_warmup_needs_no_extra():
    """Images install vecsched (with Ray or not) and warm up at build time: no rich."""
    out = _run(("rich",), ["warmup", "--engine-only"])
    assert out.returncode == 0, out.stderr
    assert "entry kernels" in out.stdout and "[red]" not in out.stdout
