"""Seeded, append-only data generators for the benchmarks (docs/design.md §6 item 10).

The synthetic cluster is the one of docs/ray-semantics.md §12, so engine timings can
be read next to the Ray timings recorded there:

* 10 worker groups (cpu-8, cpu-32, cpu-96, highmem-16, spot-cpu-32 with priority -1
  and a ``market-type=spot`` label, gpu-t4-1 / gpu-a10g-4 / gpu-a100-8 with
  ``accelerator_type:*`` marker resources, tpu-v4-4 with a ``TPU`` resource, ssd-16
  with a custom ``ssd`` resource) plus a ``head`` type;
  ``max_worker_nodes`` = existing share + max(20, existing share);
* workers: 95 % RAY_RUNNING with raylet-style ``node:<ip>`` and
  ``object_store_memory`` totals, 5 % pending (QUEUED / REQUESTED / ALLOCATED /
  RAY_INSTALLING), plus 1 % terminated / stopping records the scheduler must skip;
* ``saturated``: CPU / GPU / TPU / ssd fully used, 20-40 % memory free, 1 % idle;
  ``fragmented``: every resource ~80 % +- 25 % used, 8 % idle;
* demand: K units in S distinct shapes (CPU, CPU+memory, fractional and whole GPU,
  GPU with an accelerator marker, TPU, ssd, and 2 infeasible shapes), counts split
  by random weight so they total exactly K;
* ``idle_timeout_s`` = 60, launch-config check disabled, no ``max_num_nodes``.

Every quantity sits on a dyadic grid (quarter CPUs and GPUs, whole GiB, accelerator
markers of 2**-10 instead of Ray's 0.001) so float sums are exact and Ray and the
engine cannot disagree on a tie through rounding (docs/ray-semantics.md §8).

``cluster_v1`` was written while the engine handed gang requests, label selectors,
placement constraints, cluster resource constraints, IPPR and
``pending_idle_timeout_s`` to Ray (``adapters/ray/codec.py: unsupported``), so it
produces none of them; its ``gangs`` argument must stay 0. Demand of those kinds
belongs in a new generator version.

APPEND-ONLY: never change what an existing generator returns for given arguments
(old benchmark results would silently stop being comparable). Add ``cluster_v2``
etc. instead, and a line to ``FINGERPRINTS``; ``check_fingerprints()`` (run by
``bench/smoke.sh``) fails when a published generator's output drifts.

The generator returns a plain, Ray-free ``ClusterSpec``; ``scheduling_request``
turns it into Ray's ``SchedulingRequest`` and ``engine_problem`` into the engine's
``Problem``, so engine-only and end-to-end benchmarks see the same cluster.
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
import sys
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

from vecsched.engine.model.dtypes import Kind, Status   # codes equal Ray's protobuf enums

GIB = float(2 ** 30)
MARK = 2.0 ** -10                       # accelerator marker request (Ray uses 0.001)
SCENARIOS = ("saturated", "fragmented")
IDLE_TIMEOUT_S = 60.0

PENDING = (Status.QUEUED, Status.REQUESTED, Status.ALLOCATED, Status.RAY_INSTALLING)
GONE = (Status.RAY_STOPPING, Status.RAY_STOPPED, Status.TERMINATING, Status.TERMINATED,
        Status.ALLOCATION_FAILED)


# ---- the plain description of one tick ------------------------------------------------
@dataclass(frozen=True)
class TypeDef:
    name: str
    resources: dict
    max_workers: int
    priority: int = 0
    labels: dict = field(default_factory=dict)


@dataclass(frozen=True)
class NodeDef:
    """One instance-manager record, joined with its GCS node when it has one."""
    instance_id: str
    type: str
    status: int                          # vecsched.engine.model.dtypes.Status == Ray's Instance enum
    kind: int                            # vecsched.engine.model.dtypes.Kind == Ray's NodeKind
    total: Optional[dict] = None         # GCS total_resources (None: no ray node)
    available: Optional[dict] = None     # GCS available_resources
    labels: dict = field(default_factory=dict)
    idle_ms: int = 0
    node_id: str = ""                    # hex ray node id ("" while pending)
    cloud_id: str = ""


@dataclass(frozen=True)
class ClusterSpec:
    generator: str
    params: dict
    types: list                          # [TypeDef], dict order of node_type_configs
    nodes: list                          # [NodeDef], order of current_instances
    demand: list                         # [(bundle dict, count)], order of resource_requests
    idle_timeout_s: float = IDLE_TIMEOUT_S
    gangs: list = field(default_factory=list)   # [(pg hex, strategy, [bundle dict])] (v2+)

    @property
    def units(self) -> int:
        return sum(c for _, c in self.demand)

    def summary(self) -> str:
        st = {}
        for n in self.nodes:
            k = Status.NAMES[n.status]
            st[k] = st.get(k, 0) + 1
        return (f"{self.generator}{self.params}: {len(self.nodes)} instances {st}, "
                f"{len(self.demand)} shapes, {self.units} units")


# ---- generator v1 ------------------------------------------------------------------------
# (name, resources, share of workers, priority, labels); "head" is configured last.
_TYPES_V1 = (
    ("cpu-8", {"CPU": 8.0, "memory": 32 * GIB}, 0.20, 0, {}),
    ("cpu-32", {"CPU": 32.0, "memory": 128 * GIB}, 0.18, 0, {}),
    ("cpu-96", {"CPU": 96.0, "memory": 384 * GIB}, 0.07, 0, {}),
    ("highmem-16", {"CPU": 16.0, "memory": 256 * GIB}, 0.08, 0, {}),
    ("spot-cpu-32", {"CPU": 32.0, "memory": 128 * GIB}, 0.12, -1, {"market-type": "spot"}),
    ("gpu-t4-1", {"CPU": 4.0, "GPU": 1.0, "memory": 16 * GIB,
                  "accelerator_type:T4": 1.0}, 0.11, 0, {}),
    ("gpu-a10g-4", {"CPU": 48.0, "GPU": 4.0, "memory": 192 * GIB,
                    "accelerator_type:A10G": 1.0}, 0.08, 0, {}),
    ("gpu-a100-8", {"CPU": 96.0, "GPU": 8.0, "memory": 1024 * GIB,
                    "accelerator_type:A100": 1.0}, 0.05, 0, {}),
    ("tpu-v4-4", {"CPU": 120.0, "TPU": 4.0, "memory": 256 * GIB}, 0.03, 0, {}),
    ("ssd-16", {"CPU": 16.0, "memory": 64 * GIB, "ssd": 4.0}, 0.08, 0, {}),
)
_HEAD_V1 = {"CPU": 8.0, "memory": 32 * GIB}
_ACCEL_V1 = (("accelerator_type:T4", 1), ("accelerator_type:A10G", 4),
             ("accelerator_type:A100", 8))   # marker, GPUs per node of that type
# Quantisation step per resource (dyadic, so sums and differences are exact).
_STEP = {"CPU": 0.25, "GPU": 0.25, "TPU": 1.0, "ssd": 1.0, "memory": GIB}
# Feasible shape kinds, cycled so every S gets a mix.
_KINDS_V1 = ("cpu", "cpu_mem", "gpu_frac", "cpu", "gpu_whole", "cpu_mem", "tpu", "ssd",
             "gpu_accel", "cpu_mem")
_INFEASIBLE_V1 = ({"CPU": 1024.0},                     # larger than any node type
                  {"CPU": 2.0, "fpga": 1.0})           # a resource no node type has


def _ip(i: int) -> str:
    return f"10.{(i >> 16) & 255}.{(i >> 8) & 255}.{i & 255}"


def _grid(v: float, step: float) -> float:
    return math.floor(v / step) * step


def _used_fraction(rng, scenario: str, r: str) -> float:
    if scenario == "saturated":
        return 1.0 if r != "memory" else 1.0 - (0.2 + 0.2 * rng.random())
    return min(1.0, max(0.0, 0.8 + 0.25 * (2.0 * rng.random() - 1.0)))


def _running_v1(rng, i: int, name: str, res: dict, scenario: str, idle_share: float,
                head: bool = False) -> NodeDef:
    total = dict(res)
    ip = _ip(i)
    total["object_store_memory"] = max(1.0, math.floor(res["memory"] / GIB * 0.3)) * GIB
    total[f"node:{ip}"] = 1.0
    if head:
        total["node:__internal_head__"] = 1.0
    idle = (not head) and rng.random() < idle_share
    avail = {}
    gpus_used = 0.0
    for r, v in res.items():
        if r.startswith("accelerator_type:"):
            continue
        if idle:
            left = v
        else:
            left = v - _grid(v * _used_fraction(rng, scenario, r), _STEP[r])
        if r == "GPU":
            gpus_used = v - left
        if left == 0 and rng.random() < 0.5:
            continue                   # GCS may omit a fully used resource
        avail[r] = left
    for r, v in res.items():
        if r.startswith("accelerator_type:"):
            avail[r] = v - MARK * math.ceil(gpus_used)   # one marker unit per busy GPU
    avail["object_store_memory"] = total["object_store_memory"]
    avail[f"node:{ip}"] = 1.0
    if head:
        avail["node:__internal_head__"] = 1.0
    labels = {"ray.io/node-group": name}
    if name.startswith("spot"):
        labels["market-type"] = "spot"
    idle_ms = int(rng.choice([30_000, 90_000, 600_000, 3_600_000])) if idle else 0
    return NodeDef(instance_id=f"i-{i:06d}", type=name, status=Status.RAY_RUNNING,
                   kind=Kind.HEAD if head else Kind.WORKER, total=total, available=avail,
                   labels=labels, idle_ms=idle_ms, node_id=f"{i:056x}", cloud_id=f"c-{i:06d}")


def _shape_v1(rng, kind: str) -> dict:
    if kind == "cpu":
        return {"CPU": float(rng.integers(1, 65)) / 4}
    if kind == "cpu_mem":
        return {"CPU": float(rng.integers(1, 33)) / 4, "memory": GIB * float(rng.integers(1, 65))}
    if kind == "gpu_frac":
        return {"CPU": float(rng.integers(1, 9)) / 4, "GPU": float(rng.integers(1, 4)) / 4}
    if kind == "gpu_whole":
        g = float((1, 1, 1, 2, 4, 8)[int(rng.integers(6))])
        s = {"CPU": float(rng.integers(1, 9)), "GPU": g}
        if rng.random() < 0.5:
            s["memory"] = GIB * float(rng.integers(1, 17))
        return s
    if kind == "gpu_accel":
        mark, gmax = _ACCEL_V1[int(rng.integers(len(_ACCEL_V1)))]
        return {"CPU": float(rng.integers(1, 5)), "GPU": float(rng.integers(1, gmax + 1)),
                mark: MARK}
    if kind == "tpu":
        return {"CPU": float(rng.integers(1, 9)), "TPU": float((1, 4)[int(rng.integers(2))])}
    if kind == "ssd":
        s = {"CPU": float(rng.integers(1, 17)) / 4, "ssd": 1.0}
        if rng.random() < 0.5:
            s["memory"] = GIB * float(rng.integers(1, 9))
        return s
    raise ValueError(kind)


def _split(rng, total: int, n: int) -> list:
    """n non-negative integer counts summing to total (>= 1 each when total >= n)."""
    if n == 0:
        return []
    w = -np.log(1.0 - np.array([rng.random() for _ in range(n)]))   # exponential weights
    base = 1 if total >= n else 0
    rest = total - base * n
    raw = w / w.sum() * rest
    cnt = np.floor(raw).astype(np.int64)
    short = rest - int(cnt.sum())
    for j in np.argsort(-(raw - cnt), kind="stable")[:short]:       # largest remainder
        cnt[j] += 1
    return [int(c) + base for c in cnt]


def cluster_v1(nodes: int = 1000, units: int = 1000, shapes: int = 20,
               scenario: str = "saturated", seed: int = 0, gangs: int = 0,
               degenerate: bool = False) -> ClusterSpec:
    """The §12 synthetic cluster: ``nodes`` worker instances that become scheduling
    nodes (95 % running, 5 % pending) plus the head and 1 % terminated records, and
    ``units`` request units in ``shapes`` distinct shapes (2 of them infeasible).

    The node side depends only on (nodes, scenario, seed) and the demand only on
    (units, shapes, seed, degenerate), so a demand sweep keeps the cluster fixed.
    ``degenerate`` adds two pre-filter-defeating shapes ({CPU: 0}, {memory: 1 GiB},
    docs/ray-semantics.md Q9) holding ~2 % of the units each, taken from the others.
    """
    if gangs:
        raise NotImplementedError(
            "cluster_v1(gangs > 0): this generator makes no gang requests (placement "
            "groups); it was written while the engine handed them to Ray's own scheduler "
            "(adapters/ray/codec.py unsupported()), where timing them would time Ray. "
            "Add a cluster_v2 generator with gangs instead of changing cluster_v1's output.")
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
    if nodes < 0 or units < 0 or shapes < 0:
        raise ValueError("nodes, units and shapes must be >= 0")
    if units and not shapes:
        raise ValueError("units > 0 needs shapes >= 1")
    params = dict(nodes=nodes, units=units, shapes=shapes, scenario=scenario, seed=seed)
    if degenerate:
        params["degenerate"] = True
    rng = np.random.default_rng([seed, 1, SCENARIOS.index(scenario)])
    idle_share = 0.01 if scenario == "saturated" else 0.08

    # ---- instances --------------------------------------------------------------------
    share = np.array([t[2] for t in _TYPES_V1])
    cum = np.cumsum(share / share.sum())
    n_run = int(round(0.95 * nodes))
    n_gone = int(round(0.01 * nodes))
    insts = [_running_v1(rng, 1, "head", _HEAD_V1, scenario, 0.0, head=True)]
    count = {t[0]: 0 for t in _TYPES_V1}
    for j in range(nodes):
        i = j + 2
        t = min(int(np.searchsorted(cum, rng.random(), side="right")), len(_TYPES_V1) - 1)
        name, res = _TYPES_V1[t][0], _TYPES_V1[t][1]
        count[name] += 1
        if j < n_run:
            insts.append(_running_v1(rng, i, name, res, scenario, idle_share))
        else:
            st = PENDING[int(rng.integers(len(PENDING)))]
            kind = Kind.UNMANAGED if st in (Status.QUEUED, Status.REQUESTED) else Kind.WORKER
            insts.append(NodeDef(instance_id=f"i-{i:06d}", type=name, status=st, kind=kind,
                                 cloud_id="" if kind == Kind.UNMANAGED else f"c-{i:06d}"))
    for j in range(n_gone):
        i = nodes + 2 + j
        t = min(int(np.searchsorted(cum, rng.random(), side="right")), len(_TYPES_V1) - 1)
        insts.append(NodeDef(instance_id=f"i-{i:06d}", type=_TYPES_V1[t][0],
                             status=GONE[int(rng.integers(len(GONE)))], kind=Kind.WORKER,
                             cloud_id=f"c-{i:06d}"))
    order = rng.permutation(len(insts))
    insts = [insts[k] for k in order]
    types = [TypeDef(name, dict(res), max_workers=count[name] + max(20, count[name]),
                     priority=prio, labels=dict(lab))
             for name, res, _, prio, lab in _TYPES_V1]
    types.append(TypeDef("head", dict(_HEAD_V1), max_workers=1))

    # ---- demand -------------------------------------------------------------------------
    rng = np.random.default_rng([seed, 2])
    n_inf = min(len(_INFEASIBLE_V1), max(0, shapes - 1))
    bundles = [dict(b) for b in _INFEASIBLE_V1[:n_inf]]
    seen = {tuple(b.items()) for b in bundles}
    for j in range(shapes - n_inf):
        kind = _KINDS_V1[j % len(_KINDS_V1)]
        for _ in range(64):            # distinct shapes; give up after 64 draws
            b = _shape_v1(rng, kind)
            if tuple(b.items()) not in seen:
                break
        seen.add(tuple(b.items()))
        bundles.append(b)
    inf_units = min(units, n_inf * max(1, units // 2000))
    counts = _split(rng, inf_units, n_inf) + _split(rng, units - inf_units, shapes - n_inf)
    demand = list(zip(bundles, counts))
    if degenerate and shapes:
        take = min(units // 25, sum(c for _, c in demand[n_inf:]))   # ~4 % of the units
        demand = _take_units(demand, n_inf, take)
        demand += [({"CPU": 0.0}, take - take // 2), ({"memory": GIB}, take // 2)]
    order = rng.permutation(len(demand))
    demand = [demand[k] for k in order if demand[k][1] > 0]
    return ClusterSpec("cluster_v1", params, types, insts, demand)


STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
_GANG_BUNDLES_V2 = ({"CPU": 1.0}, {"CPU": 4.0}, {"CPU": 2.0, "memory": 8 * GIB},
                    {"CPU": 8.0, "GPU": 1.0}, {"GPU": 1.0}, {"CPU": 16.0, "memory": 64 * GIB})


def cluster_v2(nodes: int = 1000, units: int = 1000, shapes: int = 20,
               scenario: str = "saturated", seed: int = 0, gangs: int = 0) -> ClusterSpec:
    """``cluster_v1``'s cluster and demand plus ``gangs`` placement groups as
    docs/ray-semantics.md §12 describes them: 2-8 equal bundles each, strategy uniform
    over PACK / SPREAD / STRICT_PACK / STRICT_SPREAD (encoded by the emitters the
    way the GCS encodes them)."""
    base = cluster_v1(nodes=nodes, units=units, shapes=shapes, scenario=scenario, seed=seed)
    rng = np.random.default_rng([seed, 3])
    out = []
    for g in range(gangs):
        strategy = STRATEGIES[int(rng.integers(len(STRATEGIES)))]
        bundle = dict(_GANG_BUNDLES_V2[int(rng.integers(len(_GANG_BUNDLES_V2)))])
        out.append((f"{g:08x}" + "0" * 24, strategy, [dict(bundle)
                                                      for _ in range(int(rng.integers(2, 9)))]))
    params = dict(base.params, gangs=gangs)
    return ClusterSpec("cluster_v2", params, base.types, base.nodes, base.demand,
                       base.idle_timeout_s, out)


def cluster_pr64175(nodes: int = 1337, units: int = 13315, scenario: str = "saturated",
                    seed: int = 0) -> ClusterSpec:
    """The production round of ray-project/ray PR #64175: ``cluster_v1``'s varied
    cluster (10 worker groups, GPU/TPU/custom resources) with every pending
    request the same 2-CPU task."""
    base = cluster_v1(nodes=nodes, units=1, shapes=1, scenario=scenario, seed=seed)
    params = dict(nodes=nodes, units=units, scenario=scenario, seed=seed)
    return ClusterSpec("cluster_pr64175", params, base.types, base.nodes,
                       [({"CPU": 2.0}, units)], base.idle_timeout_s)


def _take_units(demand: list, start: int, k: int) -> list:
    out = [list(d) for d in demand]
    j = start
    while k > 0 and any(c > 1 for _, c in out[start:]):
        if out[j][1] > 1:
            out[j][1] -= 1
            k -= 1
        j = start + (j - start + 1) % (len(out) - start)
    return [tuple(d) for d in out]


# ---- emitters ------------------------------------------------------------------------------
def scheduling_request(spec: ClusterSpec):
    """Ray's ``SchedulingRequest`` for ``spec`` (imports Ray)."""
    from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
    from ray.autoscaler.v2.scheduler import SchedulingRequest
    from ray.autoscaler.v2.schema import AutoscalerInstance
    from ray.core.generated.autoscaler_pb2 import (NodeState, ResourceRequest,
                                                   ResourceRequestByCount)
    from ray.core.generated.instance_manager_pb2 import Instance

    configs = {
        t.name: NodeTypeConfig(name=t.name, min_worker_nodes=0, max_worker_nodes=t.max_workers,
                               priority=t.priority, resources=dict(t.resources),
                               labels=dict(t.labels))
        for t in spec.types
    }
    insts = []
    for n in spec.nodes:
        im = Instance(instance_id=n.instance_id, instance_type=n.type, status=n.status,
                      node_kind=n.kind, node_id=n.node_id, launch_config_hash="h1",
                      cloud_instance_id=n.cloud_id)
        ray_node = None
        if n.total is not None:
            ray_node = NodeState(node_id=bytes.fromhex(n.node_id),
                                 instance_id=n.cloud_id, ray_node_type_name=n.type,
                                 total_resources=n.total, available_resources=n.available,
                                 labels=n.labels, idle_duration_ms=n.idle_ms)
        insts.append(AutoscalerInstance(im_instance=im, ray_node=ray_node,
                                        cloud_instance_id=n.cloud_id or None))
    reqs = [ResourceRequestByCount(request=ResourceRequest(resources_bundle=b), count=c)
            for b, c in spec.demand]
    return SchedulingRequest(
        disable_launch_config_check=True,
        node_type_configs=configs,
        max_num_nodes=None,
        idle_timeout_s=spec.idle_timeout_s,
        resource_requests=reqs,
        gang_resource_requests=[_gang_pb(g) for g in spec.gangs],
        current_instances=insts,
    )


def _gang_pb(gang):
    """A placement group as the GCS reports it (docs/ray-semantics.md §3.7): every
    bundle in the legacy ``requests`` and in ``bundle_selectors[0]``, STRICT_*
    strategies as an (anti-)affinity on ``_PG_<hex>``."""
    from ray.core.generated.autoscaler_pb2 import (AffinityConstraint, AntiAffinityConstraint,
                                                   BundleSelector, GangResourceRequest,
                                                   PlacementConstraint, ResourceRequest)
    pg, strategy, bundles = gang
    pcs = []
    if strategy == "STRICT_PACK":
        pcs = [PlacementConstraint(affinity=AffinityConstraint(label_name="_PG_" + pg))]
    elif strategy == "STRICT_SPREAD":
        pcs = [PlacementConstraint(anti_affinity=AntiAffinityConstraint(label_name="_PG_" + pg))]
    reqs = [ResourceRequest(resources_bundle=b, placement_constraints=pcs) for b in bundles]
    return GangResourceRequest(requests=reqs, details=f"{pg}:{strategy}:PENDING",
                               bundle_selectors=[BundleSelector(resource_requests=reqs)])


def engine_problem(spec: ClusterSpec, conserve_gpu: bool = True, shared_bundles: bool = False):
    """The engine ``Problem`` for ``spec``, built with ``vecsched.engine.model.build.builder`` (no Ray).

    ``conserve_gpu`` is Ray's AUTOSCALER_CONSERVE_GPU_NODES default. ``shared_bundles``:
    one RequestSpec per distinct (bundle, placement constraint), so equal placement-group
    bundles share a request row, as the Ray adapter's decode makes them.
    """
    from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem

    types = [NodeTypeSpec(t.name, dict(t.resources), max_workers=t.max_workers,
                          priority=t.priority, labels=dict(t.labels)) for t in spec.types]
    nodes = [NodeSpec(n.type, status=n.status, kind=n.kind, total=n.total,
                      available=n.available, labels=n.labels, idle_ms=n.idle_ms,
                      ray_node_id=n.node_id, launch_hash="h1" if n.total else "")
             for n in spec.nodes]
    reqs = [RequestSpec(dict(b), c) for b, c in spec.demand]
    from vecsched.engine.model.requests import GangSpec
    gangs, one = [], {}
    for pg, strategy, bundles in spec.gangs:
        key = {"STRICT_PACK": "affinity", "STRICT_SPREAD": "anti_affinity"}.get(strategy)
        pc = {key: ("_PG_" + pg, "")} if key else {}
        specs = [RequestSpec(dict(b), 1, **pc) for b in bundles]
        if shared_bundles:
            specs = [one.setdefault((tuple(b.items()), tuple(pc.items())), rs)
                     for b, rs in zip(bundles, specs)]
        gangs.append(GangSpec(specs, name=f"{pg}:{strategy}:PENDING"))
    return build_problem(types, nodes, reqs, idle_timeout_s=spec.idle_timeout_s,
                         disable_launch_config_check=True, conserve_gpu=conserve_gpu,
                         gangs=gangs)


def make_request(**kw):
    """``scheduling_request(cluster_v1(**kw))``."""
    return scheduling_request(cluster_v1(**kw))


def make_problem(**kw):
    """``engine_problem(cluster_v1(**kw))``."""
    return engine_problem(cluster_v1(**kw))


@functools.lru_cache(maxsize=4)
def cached_problem(**kw):
    """``make_problem`` memoised per process (a Problem is read-only), so repeated
    benchmark setups in one process build it once."""
    return make_problem(**kw)


@functools.lru_cache(maxsize=4)
def cached_problem_v2(**kw):
    """``engine_problem(cluster_v2(**kw))`` memoised per process."""
    return engine_problem(cluster_v2(**kw))


# ---- append-only guard -----------------------------------------------------------------------
def fingerprint(spec: ClusterSpec) -> str:
    """sha256 (first 16 hex) of the spec in its own order (dict order matters to Ray)."""
    d = asdict(spec)
    if not d["gangs"]:
        del d["gangs"]        # v1 specs hash as they did before gangs existed
    blob = json.dumps(d, sort_keys=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


# (generator, kwargs) -> fingerprint. Append a line per new generator; never edit one.
FINGERPRINTS = [
    ("cluster_v1", dict(nodes=200, units=1000, shapes=20, scenario="saturated", seed=0),
     "66b3b3717c5e49ee"),
    ("cluster_v1", dict(nodes=200, units=1000, shapes=20, scenario="fragmented", seed=1),
     "07b3e8059f018858"),
    ("cluster_v1", dict(nodes=50, units=3000, shapes=200, scenario="saturated", seed=2,
                        degenerate=True), "24aba27a7ec636aa"),
]
FINGERPRINTS += [
    ("cluster_v2", dict(nodes=200, units=1000, shapes=20, scenario="saturated", seed=0,
                        gangs=50), "6778e9e518ed8727"),
]
FINGERPRINTS += [
    ("cluster_pr64175", dict(nodes=300, units=3000, scenario="fragmented", seed=0),
     "fd3b0e3657c70f24"),
]
GENERATORS = {"cluster_v1": cluster_v1, "cluster_v2": cluster_v2,
              "cluster_pr64175": cluster_pr64175}


def check_fingerprints() -> list:
    """Names of published generator outputs that drifted (empty when all match)."""
    bad = []
    for gen, kw, want in FINGERPRINTS:
        got = fingerprint(GENERATORS[gen](**kw))
        if want is not None and got != want:
            bad.append(f"{gen}({kw}): fingerprint {got}, published {want}")
    return bad


if __name__ == "__main__":
    for gen, kw, want in FINGERPRINTS:
        spec = GENERATORS[gen](**kw)
        print(fingerprint(spec), want, spec.summary())
    bad = check_fingerprints()
    print("\n".join(bad) or "fingerprints: ok")
    sys.exit(1 if bad else 0)
