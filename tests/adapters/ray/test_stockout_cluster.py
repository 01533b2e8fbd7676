"""A live local Ray 2.60 cluster whose cloud refuses one worker type: the efficient mode
launches the next type that fits within two ticks and the task runs.

The cluster is test_ray_cluster.py's ``LocalCluster`` (its own GCS port, Ray's fake
multi-node provider, only its own processes stopped) with two GPU worker types of the
same shape: ``gpu_spot`` (cheap, 1.0 per node-hour, every launch refused by the provider,
tests/kits/refusing_provider.py) and ``gpu1`` (4.5). The efficient mode first asks for
the cheap one; Ray's adapter of the provider turns the refusal into an
ALLOCATION_FAILED record, which the scheduler's availability memory reads on the next
tick and holds ``gpu_spot`` out, so ``gpu1`` is launched instead. Ray's own scheduler
would keep asking for whichever type its score ranks first (both score alike; Ray's
availability scores do not learn from ALLOCATION_FAILED, docs/ray-semantics.md §14).
"""
from __future__ import annotations

import ast
import json
import re
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
import yaml  # noqa: E402

from tests.kits import ray_local_cluster as trc  # noqa: E402
from tests.kits.ray_local_cluster import cluster_factory  # noqa: E402,F401

REPO = Path(__file__).resolve().parents[3]
TYPES = {"gpu_spot": {"CPU": 1, "GPU": 1, "spot_market": 1}, "gpu1": {"CPU": 1, "GPU": 1}}
PRICES = {"gpu_spot": 1.0, "gpu1": 4.5, trc.HEAD_TYPE: 1.0}
_TICK = re.compile(r"vecsched tick (\d+) decided by engine[^:]*: launch (\{[^}]*\})")


class RefusingCluster(trc.LocalCluster):
    def _write_config(self):
        super()._write_config()
        cfg = yaml.safe_load(self.config_path.read_text())
        cfg["provider"]["module"] = "tests.kits.refusing_provider.RefusingProvider"
        cfg["provider"]["refused_type"] = "gpu_spot"
        types = {trc.HEAD_TYPE: cfg["available_node_types"][trc.HEAD_TYPE]}
        for name, res in TYPES.items():
            types[name] = {"resources": dict(res), "node_config": {}, "min_workers": 0,
                           "max_workers": 2}
        cfg["available_node_types"] = types
        cfg["max_workers"] = 4
        self.config_path.write_text(yaml.safe_dump(cfg))


@ray.remote(num_cpus=1, num_gpus=1)
def _gpu_task():
    return ray.get_runtime_context().get_node_id()


def _launch_ticks(c) -> list:
    log = "\n".join(p.read_text(errors="replace") for p in c.logs_dir.glob("monitor.log*"))
    out = []
    for tick, launch in _TICK.findall(log):
        out.append((int(tick), ast.literal_eval(launch)))        # the log prints a dict
    return out


@pytest.mark.cluster
def test_efficient_mode_launches_another_type_when_one_is_refused(cluster_factory):  # noqa: F811
    env = {"VECSCHED_EFFICIENT_OPTIONS": json.dumps({"prices": PRICES}),
           "PYTHONPATH": str(REPO)}
    c = cluster_factory("refuse", via="hook", mode="efficient", extra_env=env)
    c.__class__ = RefusingCluster       # the factory's teardown, this config
    c._write_config()
    with c.phase("head + autoscaler up"):
        c.start()
    with c.phase("engine warm"):
        c.wait(lambda: (c.stats() or {}).get("warmup_s") is not None, 180,
               "the engine's kernels (the engine decides from then on)")
    with c.phase("driver connect"):
        ray.init(address=c.gcs_address, logging_level="warning", log_to_driver=False)
    with c.phase("GPU task placed"):
        node = ray.get(_gpu_task.remote(), timeout=240)
    res = next(n["Resources"] for n in ray.nodes() if n["NodeID"] == node)
    assert res.get("GPU") == 1 and "spot_market" not in res, res     # a gpu1 node
    ray.shutdown()
    time.sleep(2 * trc.TICK_S)
    ticks = _launch_ticks(c)
    spot = [t for t, launch in ticks if "gpu_spot" in launch]
    od = [t for t, launch in ticks if "gpu1" in launch]
    assert spot and od, ticks
    assert od[0] - spot[0] <= 2, ticks          # the fallback within two ticks
    assert len(spot) == 1, ticks                # the refused type was not asked again
    s = c.stats()
    assert s["mode"] == "efficient" and s["engine_errors"] == 0, s
