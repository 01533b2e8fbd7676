"""Compile every kernel once on tiny typed inputs (numba caches them on disk)."""
from __future__ import annotations

import time


def warmup() -> float:
    """Run one tiny tick through every kernel; returns the seconds it took."""
    from .build import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
    from .schedule import schedule

    t0 = time.perf_counter()
    types = [NodeTypeSpec("cpu", {"CPU": 4.0, "memory": 8.0}, max_workers=4),
             NodeTypeSpec("gpu", {"CPU": 8.0, "GPU": 1.0, "memory": 3.0}, max_workers=2)]
    nodes = [NodeSpec("cpu", total={"CPU": 4.0, "memory": 8.0},
                      available={"CPU": 1.5, "memory": 8.0}, ray_node_id="n1"),
             NodeSpec("gpu", status=1)]
    reqs = [RequestSpec({"CPU": 1.0}, 3), RequestSpec({"GPU": 0.3, "CPU": 0.1}, 2)]
    p = build_problem(types, nodes, reqs, idle_timeout_s=60.0)
    schedule(p)
    return time.perf_counter() - t0
