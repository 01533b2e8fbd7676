"""Seeded gang-heavy ticks for the CP-SAT cross-check (tests and bench).

APPEND-ONLY (bench/benchmarks/bench_solver.py times on it): never change what
``gang_tick`` or ``plain_tick`` returns for given arguments; add a new function.

A Ray-like cluster: six worker groups (CPU nodes of 8 / 32 / 96 CPUs, GPU nodes
with 1 / 4 / 8 GPUs, each with an ``accelerator_type`` marker; each group in
zone ``a`` or ``b``, both zones among the CPU and among the GPU groups), a few
running nodes part used, and placement groups of 2-8
bundles with mixed strategies (PACK, SPREAD, STRICT_PACK, STRICT_SPREAD) until
the tick holds ``bundles`` bundles: Ray-train style groups (one bundle shape
repeated: a CPU head or GPU workers), a share of mixed ones and a few with a
zone selector. Quantities sit on a dyadic grid (quarter CPUs, half GPUs, whole
GiB) so every scheduler sees exact sums. No constraint, no IPPR, no outdated
node and no type above its max, so every scheduler's plan compares with the
model's optimum (``vecsched.engine.solver.Instance.notes`` is empty).
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import Status
from vecsched.engine.model.requests import GangSpec

GIB = float(2 ** 30)
STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")

TYPES = [
    ("cpu-8", {"CPU": 8.0, "memory": 32 * GIB}),
    ("cpu-32", {"CPU": 32.0, "memory": 128 * GIB}),
    ("cpu-96", {"CPU": 96.0, "memory": 384 * GIB}),
    ("gpu-t4-1", {"CPU": 8.0, "memory": 32 * GIB, "GPU": 1.0, "accelerator_type:T4": 1.0}),
    ("gpu-a10g-4", {"CPU": 48.0, "memory": 192 * GIB, "GPU": 4.0,
                    "accelerator_type:A10G": 1.0}),
    ("gpu-a100-8", {"CPU": 96.0, "memory": 1024 * GIB, "GPU": 8.0,
                    "accelerator_type:A100": 1.0}),
]


def _bundle(rng) -> dict:
    roll = rng.random()
    if roll < 0.45:       # a GPU worker
        return {"CPU": float(rng.choice([2, 4, 8, 12])), "GPU": float(rng.choice([0.5, 1, 1, 2])),
                "memory": GIB * float(rng.choice([8, 16, 32, 64]))}
    return {"CPU": float(rng.integers(1, 33)) / 2, "memory": GIB * float(rng.choice([2, 4, 8, 16]))}


def gang_tick(seed: int, bundles: int = 100, nodes: int = 12, plain: bool = False):
    """A Problem with placement groups totalling ``bundles`` bundles (see the
    module docstring); ``plain`` adds a few plain request runs too."""
    rng = np.random.default_rng(seed)
    types = []
    zones = [["a", "b", "a"], ["b", "a", "b"]][int(rng.integers(2))] * 2
    for (name, res), zone in zip(TYPES, zones):
        labels = {"zone": zone}
        types.append(NodeTypeSpec(name, res, max_workers=int(rng.integers(bundles // 8 + 2,
                                                                           bundles // 2 + 4)),
                                  labels=labels))
    insts = []
    for i in range(nodes):
        t = types[int(rng.integers(len(types)))]
        total = dict(t.resources)
        avail = {k: (v * float(rng.choice([0.0, 0.25, 0.5, 1.0])) if not k.startswith("acc")
                     else v) for k, v in total.items()}
        insts.append(NodeSpec(t.name, Status.RAY_RUNNING, total=total, available=avail,
                              labels=dict(t.labels), ray_node_id=f"n{i}", idle_ms=0))
    gangs, left, g = [], bundles, 0
    while left > 0:
        nb = min(left, int(rng.integers(2, 9)))
        strategy = STRATEGIES[int(rng.integers(4))]
        label = f"_PG_{g:06x}"
        pc = ({"affinity": (label, "")} if strategy == "STRICT_PACK" else
              {"anti_affinity": (label, "")} if strategy == "STRICT_SPREAD" else {})
        sel = [[("zone", "in", [str(rng.choice(["a", "b"]))])]] if rng.random() < 0.1 else []
        if strategy == "STRICT_PACK":      # one node must hold the whole group
            base = {"CPU": float(rng.integers(1, 9)) / 2, "memory": GIB * float(rng.choice([1, 2, 4]))}
            if rng.random() < 0.4:
                base["GPU"] = 0.5
            shapes = [base] * nb
        elif rng.random() < 0.7:           # Ray-train style: one shape repeated
            shapes = [_bundle(rng)] * nb
        else:
            shapes = [_bundle(rng) for _ in range(nb)]
        reqs = [RequestSpec(dict(b), label_selectors=sel, **pc) for b in shapes]
        gangs.append(GangSpec(reqs, name=f"{g:06x}:{strategy}:PENDING"))
        left -= nb
        g += 1
    requests = []
    if plain:
        for _ in range(int(rng.integers(1, 4))):
            requests.append(RequestSpec(_bundle(rng), count=int(rng.integers(1, 9))))
    return build_problem(types, insts, requests, gangs=gangs, idle_timeout_s=60.0)


def plain_tick(seed: int, units: int = 100, nodes: int = 12):
    """``gang_tick``'s cluster with plain demand only: about ``units`` units in
    4-10 request runs of ``_bundle`` shapes (what every scheduler, the FFD
    baseline included, places)."""
    rng = np.random.default_rng(seed + 10_000)
    types = []
    zones = [["a", "b", "a"], ["b", "a", "b"]][int(rng.integers(2))] * 2
    for (name, res), zone in zip(TYPES, zones):
        types.append(NodeTypeSpec(name, res, max_workers=int(rng.integers(units // 8 + 2,
                                                                          units // 2 + 4)),
                                  labels={"zone": zone}))
    insts = []
    for i in range(nodes):
        t = types[int(rng.integers(len(types)))]
        total = dict(t.resources)
        avail = {k: (v * float(rng.choice([0.0, 0.25, 0.5, 1.0])) if not k.startswith("acc")
                     else v) for k, v in total.items()}
        insts.append(NodeSpec(t.name, Status.RAY_RUNNING, total=total, available=avail,
                              labels=dict(t.labels), ray_node_id=f"n{i}", idle_ms=0))
    runs = int(rng.integers(4, 11))
    counts = rng.multinomial(units - runs, np.ones(runs) / runs) + 1
    requests = [RequestSpec(_bundle(rng), count=int(c)) for c in counts]
    return build_problem(types, insts, requests, idle_timeout_s=60.0)
