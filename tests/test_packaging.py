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

REPO = Path(__file__).resolve().parent.parent

_FOOTPRINT = """
import sys
import engine
from engine import warmup
import adapters.traces, adapters.lifecycle, adapters.replay
mods = {m for m in ("matplotlib", "rich") if m in sys.modules}
try:
    import ray.autoscaler.v2.scheduler  # noqa: F401
except ImportError:
    pass
else:
    from adapters.ray import EngineScheduler
    import adapters.ray.install, adapters.ray.sim  # noqa: F401
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
    code = _FOOTPRINT.replace("import engine\n", "import engine\nimport matplotlib\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    if out.returncode != 0 and "No module named 'matplotlib'" in out.stderr:
        pytest.skip("matplotlib is not installed")
    assert "matplotlib" in out.stdout


def test_every_bundled_file_is_package_data():
    from adapters import traces as T
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    globs = config["tool"]["setuptools"]["package-data"]["adapters.traces"]
    files = sorted(p.name for p in T.DATA_DIR.iterdir() if p.is_file())
    assert set(T.BUNDLED.values()) | {"README.md"} <= set(files)
    for name in files:
        assert any(fnmatch.fnmatch(f"bundled/{name}", g) for g in globs), name
    assert "rich" not in " ".join(config["project"]["dependencies"])
    assert "matplotlib" not in " ".join(config["project"]["dependencies"])
    assert any(d.startswith("rich") for d in config["project"]["optional-dependencies"]["cli"])


def test_moved_names_keep_their_old_import_paths():
    """adapters.lifecycle's public names (others build on them) and the simulated Ray
    cluster's old module (adapters.ray.cloud, now adapters.ray.sim) still import."""
    from adapters.lifecycle import (InstanceStore, ReconcileConfig, SimClock,  # noqa: F401
                                    SimNodeType, SimProvider, run, sequential_ids)
    from adapters.lifecycle.provider import SimClock as C2, SimNodeType as N2  # noqa: F401
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
    from adapters.ray.cloud import (SimAutoscaler, SimCloudProvider, SimGcs,  # noqa: F401
                                    autoscaling_config, ray_clock)
    from adapters.ray import sim
    assert SimCloudProvider is sim.SimCloudProvider and SimGcs is sim.SimGcs
