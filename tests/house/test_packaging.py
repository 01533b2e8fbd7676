"""Packaging: the embedded footprint (engine + Ray adapter import neither matplotlib nor
rich) and the bundled traces declared as package data. The wheel itself is built,
installed into a fresh venv and run from outside the checkout by .ci/wheel_smoke.sh."""
from __future__ import annotations

import fnmatch
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.kits.paths import REPO

_FOOTPRINT = """
import sys
import vecsched.engine as engine
from vecsched.engine import warmup
import vecsched.adapters.traces, vecsched.adapters.sim.lifecycle, vecsched.adapters.replay
mods = {m for m in ("matplotlib", "rich") if m in sys.modules}
try:
    import ray.autoscaler.v2.scheduler  # noqa: F401
except ImportError:
    pass
else:
    from vecsched.adapters.ray import EngineScheduler
    import vecsched.adapters.ray.install, vecsched.adapters.sim.raycluster  # noqa: F401
    EngineScheduler()
    mods |= {m for m in ("matplotlib", "rich") if m in sys.modules}
print(sorted(mods))
"""


def test_engine_and_ray_adapter_import_neither_matplotlib_nor_rich():
    out = subprocess.run([sys.executable, "-c", _FOOTPRINT], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout


def test_the_footprint_check_sees_an_import():
    """The check above fails when a module does import matplotlib."""
    code = _FOOTPRINT.replace("import vecsched.engine as engine\n",
                              "import vecsched.engine as engine\nimport matplotlib\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0 and "No module named 'matplotlib'" in out.stderr:
        pytest.skip("matplotlib is not installed")
    assert "matplotlib" in out.stdout


def test_every_bundled_file_is_package_data():
    from vecsched.adapters import traces as T
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["vecsched.data"]
    files = sorted(p.name for p in T.DATA_DIR.iterdir() if p.is_file() and p.suffix != ".py")
    assert set(T.BUNDLED.values()) | {"README.md", "NOTICE"} <= set(files)
    for name in files:
        assert any(fnmatch.fnmatch(name, g) for g in globs), name
    assert "rich" not in " ".join(config["project"]["dependencies"])
    assert "matplotlib" not in " ".join(config["project"]["dependencies"])
    assert any(d.startswith("rich") for d in config["project"]["optional-dependencies"]["cli"])


def test_every_package_folder_is_installed_under_vecsched():
    """pyproject lists the packages by hand (the folders are mapped into the namespace):
    every folder with an __init__.py under engine/, adapters/ and data/ is listed as
    vecsched.<folder>, nothing else is, and nothing is installed outside vecsched."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    found = {"vecsched." + ".".join(p.parent.relative_to(REPO).parts)
             for root in ("engine", "adapters", "data")
             for p in (REPO / root).rglob("__init__.py") if "__pycache__" not in p.parts}
    assert listed == found, (sorted(listed - found), sorted(found - listed))
    assert {n.split(".")[0] for n in listed} == {"vecsched"}
    dirs = config["tool"]["setuptools"]["package-dir"]
    assert dirs == {"vecsched.engine": "engine", "vecsched.adapters": "adapters",
                    "vecsched.data": "data"}
    scripts = config["project"]["scripts"].values()
    assert all(s.startswith("vecsched.") for s in scripts), scripts


def test_lifecycle_and_simulated_ray_cluster_public_names():
    """The simulated lifecycle's public names (the replay and the HA world build on them)
    and the simulated Ray cluster's import from their packages."""
    from vecsched.adapters.sim.lifecycle import (InstanceStore, ReconcileConfig, SimClock,  # noqa: F401
                                                 SimNodeType, SimProvider, run, sequential_ids)
    clock = SimClock()
    store = InstanceStore(clock, sequential_ids("i-"), ReconcileConfig(upscaling_speed=1.0))
    prov = SimProvider(store, {"a": SimNodeType(alloc_latency_s=1, install_latency_s=1)}, 0)
    store.apply_plan({"a": 1})
    run(store, prov, clock, 10)
    assert store["i-000000"].cloud_instance_id in prov.clouds
    assert prov.clouds[store["i-000000"].cloud_instance_id].instance_id == "i-000000"
    assert set(prov.stats) >= {"launches", "allocations", "preemptions", "drains",
                               "terminations", "termination_failures"}
    pytest.importorskip("ray.autoscaler.v2.scheduler")
    from vecsched.adapters.sim import raycluster as sim
    assert {"SimAutoscaler", "SimCloudProvider", "SimGcs", "autoscaling_config",
            "ray_clock"} <= set(dir(sim))
