"""The replay's raylet stand-in keeps CPU-only work off GPU nodes as Ray 2.60's raylet
does (RAY_scheduler_avoid_gpu_nodes, default on; adapters/replay/cluster.py), checked
by hand and against a live local Ray cluster."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.adapters.replay.cluster import Cluster
from vecsched.adapters.replay.placement_groups import Gangs

COLS = ["CPU", "GPU"]
GPU_NODE = {"CPU": 2.0, "GPU": 1.0}
CPU_NODE = {"CPU": 2.0}


def _cluster(shapes, unit_shape, avoid=True, gangs=None):
    U = len(unit_shape)
    c = Cluster(COLS, shapes, np.zeros(U), np.full(U, 100.0), np.asarray(unit_shape, np.int32),
                gangs, avoid_gpu_nodes=avoid)
    c.add_node("gpu", "g", dict(GPU_NODE), 0.0)         # joins first: first-fit would pick it
    c.add_node("cpu", "c", dict(CPU_NODE), 0.0)
    for u in range(U):
        c.arrive(u)
    return c


def _where(c) -> list:
    return [c.ids[int(n)] if n >= 0 else None for n in c.node_of]


def test_cpu_only_units_take_nodes_without_gpus_first_then_fall_back():
    c = _cluster([{"CPU": 1.0}], [0, 0, 0])
    assert c.place(0.0) == 3
    assert _where(c) == ["cpu", "cpu", "gpu"]          # the GPU node only once cpu is full
    off = _cluster([{"CPU": 1.0}], [0, 0, 0], avoid=False)
    off.place(0.0)
    assert _where(off) == ["gpu", "gpu", "cpu"]        # the setting off: plain first-fit


def test_gpu_units_and_fractional_gpus_go_anywhere():
    c = _cluster([{"CPU": 1.0, "GPU": 0.5}, {"CPU": 1.0}], [0, 1])
    c.place(0.0)
    assert _where(c) == ["gpu", "cpu"]


def test_placement_group_bundles_are_not_steered():
    """Ray's bundle policies run with avoid_gpu_nodes off: a PACK group of CPU-only
    bundles goes first-fit, the GPU node included."""
    gangs = Gangs(np.asarray([0, 2], np.int64), np.asarray([0, 1], np.int64), ("PACK",),
                  ("0a",), np.zeros(2, np.int32), ("overlay",))
    c = _cluster([{"CPU": 1.0}], [0, 0], gangs=gangs)
    assert c.place(0.0) == 2
    assert _where(c) == ["gpu", "gpu"]


@pytest.mark.cluster
def test_the_rule_is_rays_on_a_live_cluster():
    """A live Ray 2.60 cluster with the same nodes (a GPU node started first) places
    three one-CPU actors as the stand-in does: two on the CPU node, then the GPU node."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster as RayCluster
    c = _cluster([{"CPU": 1.0}], [0, 0, 0])
    c.place(0.0)
    standin = _where(c)
    cluster = RayCluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        gpu = cluster.add_node(num_cpus=2, num_gpus=1)
        cpu = cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        ray.init(address=cluster.address)

        @ray.remote(num_cpus=1)
        class Holder:
            def node(self):
                return ray.get_runtime_context().get_node_id()

        name = {gpu.node_id: "gpu", cpu.node_id: "cpu"}
        held, live = [], []
        for _ in range(3):                  # one at a time, each holding its CPU
            held.append(Holder.remote())
            live.append(name[ray.get(held[-1].node.remote(), timeout=60)])
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert live == standin == ["cpu", "cpu", "gpu"]
