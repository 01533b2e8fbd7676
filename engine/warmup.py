"""Compile every kernel once on tiny typed inputs (numba caches them on disk)."""
from __future__ import annotations

import time

# The read-only kernel cache (VECSCHED_KERNEL_CACHE), for kernels compiled outside the
# engine (the Ray codec's scan): they read it as the engine's kernels do.
from vecsched.engine.kernels._cache import shipped  # noqa: F401
# A shipped cache built for any CPU of the architecture (``vecsched warmup --portable``).
from vecsched.engine.kernels._cache import PORTABLE_CPU, portable_magic  # noqa: F401
# Helpers only such kernels call: linked into them, no code of their own (_linked.py).
from vecsched.engine.kernels._jit import njit_inner  # noqa: F401


def warmup(efficient: bool = False) -> float:
    """Run one tiny tick that reaches every kernel (fits, walks, picks, classes,
    labels, anti-affinity, constraints, gangs, idle termination) in ray-compat mode,
    and with ``efficient`` the same tick in the efficient mode too (without its CP-SAT
    steps: its own kernels, about 3 s more on a cold cache); returns seconds."""
    from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
    from vecsched.engine.model.requests import GangSpec, RequestSpec
    from .schedule import schedule

    t0 = time.perf_counter()
    types = [NodeTypeSpec("cpu", {"CPU": 4.0, "memory": 8.0}, max_workers=8,
                          labels={"zone": "a"}),
             NodeTypeSpec("gpu", {"CPU": 8.0, "GPU": 1.0, "memory": 3.0}, max_workers=4)]
    run = dict(total={"CPU": 4.0, "memory": 8.0, "node:x": 1.0}, ray_node_id="n",
               available={"CPU": 1.5, "memory": 8.0, "node:x": 1.0}, idle_ms=90_000)
    nodes = [NodeSpec("cpu", **run), NodeSpec("cpu", **{**run, "total": {
        "CPU": 4.0, "memory": 8.0, "node:y": 1.0}, "available": {
        "CPU": 1.5, "memory": 8.0, "node:y": 1.0}}), NodeSpec("gpu", status=1)]
    reqs = [RequestSpec({"CPU": 1.0}, 3), RequestSpec({"GPU": 0.3, "CPU": 0.1}, 2),
            RequestSpec({"CPU": 0.5}, 2, label_selectors=[[("zone", "in", ["a"])]])]
    gangs = [GangSpec([RequestSpec({"CPU": 1.0}, anti_affinity=("_PG_w", ""))] * 2),
             GangSpec([RequestSpec({"CPU": 1.0}, affinity=("_PG_v", ""))] * 2)]
    p = build_problem(types, nodes, reqs, idle_timeout_s=60.0, gangs=gangs,
                      constraint=[RequestSpec({"CPU": 2.0}, 2)], pending_idle_timeout_s=30.0)
    schedule(p, now_s=1.0)
    if efficient:
        from .efficient import EfficientOptions

        # groups and demand that need new nodes, so its improvement moves (empty,
        # merge, cheaper type) run as well
        big = NodeTypeSpec("big", {"CPU": 16.0, "memory": 32.0}, max_workers=2)
        grow = [GangSpec([RequestSpec({"CPU": 3.0}, anti_affinity=("_PG_w", ""))] * 3),
                gangs[1]]
        q = build_problem(types + [big], nodes[:1] + nodes[2:],
                          [RequestSpec({"CPU": 1.0}, 7)] + reqs[1:], idle_timeout_s=60.0,
                          gangs=grow, pending_idle_timeout_s=30.0)
        for prob in (p, q):
            schedule(prob, now_s=1.0, mode="efficient",
                     options=EfficientOptions(gang_cpsat_bundles=0))
    return time.perf_counter() - t0


def entry_kernels(efficient: bool = False) -> tuple:
    """The kernels a tick calls from Python: what ``warmup()`` compiles or
    loads from numba's cache (the others are compiled into these); with
    ``efficient``, the efficient mode's too (``warmup(efficient=True)``)."""
    from vecsched.engine.kernels.fit import _fits_any, _minimal_rows
    from vecsched.engine.kernels.gangs import _pack_gangs
    from vecsched.engine.kernels.labels import _labels_held
    from vecsched.engine.kernels.loop import _run_loop
    from vecsched.engine.kernels.pick import _pick_scratch
    from vecsched.engine.kernels.rows import _row_ids
    from vecsched.engine.kernels.score import _victim_util

    raycompat = (_pack_gangs, _run_loop, _fits_any, _minimal_rows, _labels_held,
                 _pick_scratch, _row_ids, _victim_util)
    return raycompat + (_efficient_kernels() if efficient else ())


def _efficient_kernels() -> tuple:
    """The efficient mode's kernels that its Python calls (its CP-SAT steps have none;
    ``effp_fill``'s two entry points are called by its tests only)."""
    from vecsched.engine.kernels.eff_empty import block_max, empty_node
    from vecsched.engine.kernels.eff_items import add_items, seg_sums
    from vecsched.engine.kernels.eff_merge import cheapest_type, merge_rounds
    from vecsched.engine.kernels.effp_choose import _choose_launches
    from vecsched.engine.kernels.effp_existing import _fill_row, _walk_order
    from vecsched.engine.kernels.effp_pass import _gang_pass

    return (_gang_pass, _choose_launches, _walk_order, _fill_row, block_max, empty_node,
            add_items, seg_sums, cheapest_type, merge_rounds)
