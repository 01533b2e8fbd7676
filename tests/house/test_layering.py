"""The layering rules of docs/design.md §2, checked on the source.

Each rule is a function over the import graph (`tests/kits/import_graph.py`) that
returns what breaks it. The real tree must break none; a small synthetic tree written
to `tmp_path` that breaks the rule on purpose must be reported, so no rule can pass by
never looking.
"""
from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

from tests.kits.import_graph import Edge, Graph, cycles, forbidden, imported_on_import, scan, within
from tests.kits.paths import REPO

ENGINE = "vecsched.engine"
ADAPTERS = "vecsched.adapters"
KERNELS = "vecsched.engine.kernels"
# What a user runs beside production, never imported by it: the stand-ins, the replay,
# the sweeps and the command line.
NOT_PRODUCTION = ("vecsched.adapters.sim", "vecsched.adapters.replay",
                  "vecsched.adapters.sweep", "vecsched.adapters.cli")

# Where Ray may be imported (docs/design.md §2, "Where Ray is imported").
# Bindings to Ray's own classes import it on import:
RAY_ON_IMPORT = ("vecsched.adapters.ray", "vecsched.adapters.leader.ray_storage",
                 "vecsched.adapters.sim.raycluster", "vecsched.adapters.replay.demand_specs")
# ... except these packages, which stay importable without Ray (`install` checks Ray's
# version before Ray's scheduler module is loaded):
RAY_FREE_PACKAGES = ("vecsched.adapters.ray",)
# Code that uses Ray for one of its paths imports it inside the function that needs it:
RAY_IN_FUNCTIONS = ("vecsched.adapters.kuberay", "vecsched.adapters.monitor",
                    "vecsched.adapters.sim.kube", "vecsched.adapters.replay",
                    "vecsched.adapters.sweep", "vecsched.adapters.cli")
# Everything else (the engine, traces, the lease, the lifecycle and HA stand-ins, the
# metrics modules) never names Ray.

# The engine's dependencies: the standard library and these.
ENGINE_DEPENDENCIES = ("numpy", "numba", "ortools")


def _is_ray(name: str) -> bool:
    return within(name, "ray")


def _stdlib(name: str) -> bool:
    return name.split(".")[0] in sys.stdlib_module_names


def _vecsched(name: str) -> bool:
    return within(name, "vecsched")


# ---- the rules ------------------------------------------------------------------------
def production_imports_of_tools(graph: Graph) -> list[Edge]:
    """Production (the engine and every adapter outside NOT_PRODUCTION) importing a
    stand-in, the replay, a sweep or the command line."""
    def production(m: str) -> bool:
        return within(m, ENGINE, ADAPTERS) and not within(m, *NOT_PRODUCTION)
    return forbidden(graph, production, lambda t: within(t, *NOT_PRODUCTION))


def ray_on_import(module: str) -> bool:
    """Whether the design lets importing `module` import Ray."""
    return within(module, *RAY_ON_IMPORT) and module not in RAY_FREE_PACKAGES


def ray_where_not_allowed(graph: Graph) -> list[str]:
    """Ray imported outside the places the design allows, or on import where only a
    function may import it; and modules that must import without Ray but pull it in
    through another module."""
    out = []
    for e in forbidden(graph, _vecsched, _is_ray):
        if ray_on_import(e.source):
            continue
        if within(e.source, *RAY_IN_FUNCTIONS) and e.deferred:
            continue
        out.append(str(e))
    for m in sorted(graph.modules):
        if _vecsched(m) and not ray_on_import(m):
            pulled = sorted(t for t in imported_on_import(graph, m) if _is_ray(t))
            if pulled and not any(str(e).startswith(f"{m}:") for e in
                                  forbidden(graph, lambda s: s == m, _is_ray)):
                out.append(f"{m} imports Ray on import through another module "
                           f"({pulled[0]})")
    return out


def engine_outside_dependencies(graph: Graph) -> list[Edge]:
    """Engine modules importing anything but the standard library, numpy, numba,
    OR-Tools and the engine itself."""
    def allowed(t: str) -> bool:
        return _stdlib(t) or within(t, ENGINE, *ENGINE_DEPENDENCIES)
    return forbidden(graph, lambda m: within(m, ENGINE), lambda t: not allowed(t))


def kernel_owners(kernel: str) -> tuple[str, ...]:
    """Who may import a kernel module: the efficient mode's kernels (`eff*`) belong to
    engine/efficient, every other kernel to engine/raycompat; engine/warmup.py compiles
    the entry kernels; a kernel may use any other kernel."""
    short = kernel.rpartition(".")[2]
    owner = "vecsched.engine.efficient" if short.startswith("eff") else "vecsched.engine.raycompat"
    return owner, "vecsched.engine.warmup", KERNELS


def kernels_outside_their_owners(graph: Graph) -> list[Edge]:
    """Production code importing a kernel it does not own (the kernels package itself
    is owned by no one), and kernels importing anything but numpy, numba, the standard
    library and other kernels."""
    out = [e for e in forbidden(graph, _vecsched, lambda t: within(t, KERNELS))
           if not within(e.source, *kernel_owners(e.target)) or e.target == KERNELS
           and not within(e.source, KERNELS)]
    out += forbidden(graph, lambda m: within(m, KERNELS),
                     lambda t: not (_stdlib(t) or within(t, KERNELS, "numpy", "numba")))
    return out


# ---- the real tree --------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def _repo() -> Graph:
    return scan(REPO)


def test_production_never_imports_the_stand_ins_replay_sweeps_or_cli():
    graph = _repo()
    assert "vecsched.adapters.ray.codec" in graph.modules     # the production code is scanned
    assert production_imports_of_tools(graph) == []


def test_ray_is_imported_only_where_the_design_allows():
    graph = _repo()
    assert any(_is_ray(e.target) for e in graph.edges)       # Ray's imports are seen
    assert ray_where_not_allowed(graph) == []


def test_the_engine_imports_only_the_stdlib_numpy_numba_and_ortools():
    assert engine_outside_dependencies(_repo()) == []


def test_kernels_are_imported_only_by_their_owners():
    graph = _repo()
    assert forbidden(graph, lambda m: within(m, "vecsched.engine.efficient"),
                     lambda t: within(t, KERNELS))             # the owners' imports are seen
    assert kernels_outside_their_owners(graph) == []


def test_no_import_cycles():
    """Over the installed packages, the tests and the benchmarks alike."""
    graph = _repo()
    assert len(graph.modules) > 300
    assert cycles(graph) == []


_RAY_BLOCKED = """
import importlib, sys
sys.modules["ray"] = None          # `import ray` (or any ray.x) now raises ImportError
failed = []
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except Exception as exc:       # noqa: BLE001  (report every module that fails)
        failed.append(f"{name}: {type(exc).__name__}: {exc}")
print("\\n".join(failed))
"""


def _import_without_ray(names: list[str]) -> list[str]:
    res = subprocess.run([sys.executable, "-c", _RAY_BLOCKED, *names], cwd=REPO,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    return [line for line in res.stdout.splitlines() if line]


def test_every_module_the_design_keeps_ray_free_imports_without_ray():
    """The static rule above, checked by importing: with Ray blocked, every vecsched
    module outside RAY_ON_IMPORT imports (the engine alone, trace tools, the lease and
    the command line work on an install without the `ray` extra)."""
    names = [m for m in sorted(_repo().modules) if _vecsched(m) and not ray_on_import(m)]
    assert "vecsched.adapters.ray" in names and "vecsched.engine.schedule" in names
    assert _import_without_ray(names) == []


def test_a_module_that_needs_ray_fails_to_import_with_ray_blocked():
    """The blocking above is real: a Ray binding does fail."""
    assert _import_without_ray(["vecsched.adapters.ray.codec"]) != []


# ---- purpose-made breaks --------------------------------------------------------------
def _tree(root: Path, files: dict[str, str]) -> Graph:
    """A synthetic repository: `files` maps paths (under engine/, adapters/, tests/,
    bench/) to source; every folder gets an __init__.py."""
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for folder in [p for p in root.rglob("*") if p.is_dir()]:
        (folder / "__init__.py").touch()
    return scan(root)


def test_a_production_module_importing_the_replay_is_reported(tmp_path):
    graph = _tree(tmp_path, {
        "adapters/ray/codec.py": "from vecsched.adapters.replay.window import Window\n",
        "adapters/replay/window.py": "from vecsched.adapters.sim.lifecycle import clock\n",
        "adapters/sim/lifecycle/clock.py": "",
        "adapters/cli/main.py": "import vecsched.adapters.replay.window\n",
        "engine/schedule.py": "def f():\n    from ..adapters.cli import main\n",
    })
    found = [str(e) for e in production_imports_of_tools(graph)]
    assert found == [
        "vecsched.engine.schedule:2 imports vecsched.adapters.cli.main (in a function)",
        "vecsched.adapters.ray.codec:1 imports vecsched.adapters.replay.window"]


def test_ray_outside_its_places_is_reported(tmp_path):
    graph = _tree(tmp_path, {
        "adapters/ray/codec.py": "from ray.autoscaler.v2.scheduler import SchedulingRequest\n",
        "adapters/ray/__init__.py": "",
        "adapters/traces/schema.py": "def f():\n    import ray\n",
        "adapters/replay/cluster.py": "import ray.util\n",
        "adapters/replay/trace.py": "def f():\n    import ray\n",
        "adapters/metrics.py": "from vecsched.adapters.ray import codec\n",
        "engine/schedule.py": "from typing import TYPE_CHECKING\n"
                              "if TYPE_CHECKING:\n    import ray\n",
    })
    assert ray_where_not_allowed(graph) == [
        "vecsched.adapters.replay.cluster:1 imports ray.util",
        "vecsched.adapters.traces.schema:2 imports ray (in a function)",
        "vecsched.adapters.metrics imports Ray on import through another module "
        "(ray.autoscaler.v2.scheduler)",
    ]


def test_the_ray_package_init_importing_ray_is_reported(tmp_path):
    graph = _tree(tmp_path, {"adapters/ray/__init__.py": "from .codec import decode\n",
                             "adapters/ray/codec.py": "import ray\n"})
    assert ray_where_not_allowed(graph) == [
        "vecsched.adapters.ray imports Ray on import through another module (ray)"]


def test_an_engine_import_of_an_outside_package_is_reported(tmp_path):
    graph = _tree(tmp_path, {
        "engine/schedule.py": "import math, numpy\nfrom numba import njit\n"
                              "def f():\n    from ortools.sat.python import cp_model\n"
                              "import pyarrow\nfrom vecsched.adapters import files\n",
        "adapters/files.py": "import pyarrow\n",
    })
    assert [str(e) for e in engine_outside_dependencies(graph)] == [
        "vecsched.engine.schedule:5 imports pyarrow",
        "vecsched.engine.schedule:6 imports vecsched.adapters.files"]


def test_a_kernel_imported_by_a_stranger_is_reported(tmp_path):
    graph = _tree(tmp_path, {
        "engine/kernels/eff_items.py": "import numpy as np\nfrom .fit import _fit\n",
        "engine/kernels/fit.py": "import math\nimport pyarrow\n",
        "engine/efficient/place.py": "from vecsched.engine.kernels.eff_items import add\n",
        "engine/raycompat/packer.py": "from vecsched.engine.kernels.fit import _fit\n"
                                      "from vecsched.engine.kernels.eff_items import add\n",
        "engine/warmup.py": "def f():\n    from vecsched.engine.kernels.fit import _fit\n",
        "engine/baseline/ffd.py": "from vecsched.engine import kernels\n",
    })
    assert sorted(str(e) for e in kernels_outside_their_owners(graph)) == [
        "vecsched.engine.baseline.ffd:1 imports vecsched.engine.kernels",
        "vecsched.engine.kernels.fit:2 imports pyarrow",
        "vecsched.engine.raycompat.packer:2 imports vecsched.engine.kernels.eff_items"]


def test_an_import_cycle_is_reported(tmp_path):
    graph = _tree(tmp_path, {
        "engine/a.py": "from . import b\n",
        "engine/b.py": "def f():\n    from vecsched.engine import c\n",
        "engine/c.py": "import vecsched.engine.a\n",
        "engine/model/__init__.py": "from .plan import Plan\n",
        "engine/model/plan.py": "import vecsched.engine.model\n"
                                "from vecsched.engine.model import dtypes\n",
        "engine/model/dtypes.py": "",
    })
    assert cycles(graph) == [["vecsched.engine.a", "vecsched.engine.b", "vecsched.engine.c"]]
