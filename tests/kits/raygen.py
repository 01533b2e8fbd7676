"""Seeded random SchedulingRequests for differential tests against Ray 2.60.

By default quantities sit on a dyadic grid (quarter CPUs, half GPUs, whole GiB)
so Ray's own float sums cannot flip exact ties between processes
(docs/ray-semantics.md §8). Two modes add what real clusters report:

- ``real=True``: Ray's real-world quantities. A raylet keeps resources in fixed
  point (``ray._raylet.RESOURCE_UNIT_SCALING`` = 10,000 units per resource, so
  ``ray_constants.MIN_RESOURCE_GRANULARITY`` = 0.0001) and reports them to the
  GCS as ``units / 10000``: 0.1 and 0.3 CPU, 0.25 GPU, an accelerator marker of
  0.001, availabilities computed in units then divided (so 4 - 0.3 reads 3.7,
  not the float ``4 - 0.3``), and memory and object store sizes as odd byte
  counts. Ray's scheduler then does its own float arithmetic on these values
  (sums, subtractions, utilisation cubes), which the engine must reproduce to
  the last bit; such a request must be given to both schedulers as one object
  (a copy may iterate its maps in another order, see ``same_object``).
- ``groups=True``: placement groups already placed on running nodes, reported
  as the GCS does (``CPU_group_<pg>``, ``CPU_group_<i>_<pg>``, ``bundle_group_<pg>``,
  ``bundle_group_<i>_<pg>`` in the node's maps, the ``_PG_<pg>`` dynamic label),
  some groups spread over several nodes, and tasks waiting on a bundle (plain
  requests, sometimes the constraint, naming those resources).
"""
from __future__ import annotations

import numpy as np
from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
from ray.autoscaler.v2.scheduler import SchedulingRequest
from ray.autoscaler.v2.schema import AutoscalerInstance, IPPRGroupSpec, IPPRSpecs, IPPRStatus
from ray.core.generated.autoscaler_pb2 import (AffinityConstraint, AntiAffinityConstraint,
                                               BundleSelector, ClusterResourceConstraint,
                                               GangResourceRequest, NodeState,
                                               PlacementConstraint, ResourceRequest,
                                               ResourceRequestByCount)
from ray.core.generated.common_pb2 import LabelSelector, LabelSelectorConstraint
from ray.core.generated.instance_manager_pb2 import Instance, NodeKind

from tests.kits.raygen_real import GIB, UNITS, odd_bytes, placed_groups, real_shape
PENDING = [Instance.QUEUED, Instance.REQUESTED, Instance.ALLOCATED, Instance.RAY_INSTALLING,
           Instance.RAY_STOP_REQUESTED]
GONE = [Instance.RAY_STOPPING, Instance.RAY_STOPPED, Instance.TERMINATING, Instance.TERMINATED,
        Instance.ALLOCATION_FAILED, Instance.RAY_INSTALL_FAILED, Instance.TERMINATION_FAILED,
        Instance.ALLOCATION_TIMEOUT]


def _type_resources(rng, real: bool = False) -> dict:
    cpu = float(rng.choice([1, 2, 4, 8, 16, 32, 48]))
    mem = float(rng.choice([2, 4, 8, 16, 64]))
    res = {"CPU": cpu, "memory": odd_bytes(rng, mem) if real else GIB * mem}
    if rng.random() < 0.35:
        res["GPU"] = float(rng.choice([1, 2, 4, 8]))
        if real and rng.random() < 0.5:
            res["accelerator_type:A100"] = 1.0
    if rng.random() < 0.15:
        res["ssd"] = float(rng.choice([1, 2]))
    if rng.random() < 0.1:
        res["TPU"] = 4.0
    keys = list(res)
    rng.shuffle(keys)                      # dict order matters for ties: vary it
    return {k: res[k] for k in keys}


def _shape(rng, types, real: bool = False) -> dict:
    if real:
        return real_shape(rng, types)
    roll = rng.random()
    if roll < 0.05:
        return {"CPU": 0.0}                # zero shapes fit anywhere (Q8/Q9)
    if roll < 0.08:
        return {"GPU": 0.0, "CPU": 1.0}    # names GPU with zero: counts as a GPU request
    if roll < 0.12:
        return {"CPU": 1000.0}             # larger than any node
    if roll < 0.2:
        t = types[int(rng.integers(len(types)))]
        return {k: v for k, v in t.items() if k in ("CPU", "GPU")}   # a whole node
    s = {"CPU": float(rng.integers(0, 17)) / 4}
    if rng.random() < 0.4:
        s["memory"] = GIB * float(rng.integers(1, 9))
    if rng.random() < 0.3:
        s["GPU"] = float(rng.choice([0.5, 1, 2]))
    if rng.random() < 0.07:
        s["ssd"] = 1.0
    if rng.random() < 0.05:
        s["node:__internal_implicit_resource_x"] = 0.5
    return s


ZONES = ["a", "b", "c"]
STRATEGIES = ["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]


def _selector(rng) -> LabelSelector:
    cons = []
    for _ in range(int(rng.integers(1, 3))):
        key = str(rng.choice(["zone", "market"]))
        vals = list(rng.choice(ZONES if key == "zone" else ["spot", "on-demand"],
                               size=int(rng.integers(1, 3)), replace=False))
        op = 1 if rng.random() < 0.7 else 2
        cons.append(LabelSelectorConstraint(label_key=key, operator=op,
                                            label_values=[str(v) for v in vals]))
    return LabelSelector(label_constraints=cons)


def _with_selectors(rng, rr: ResourceRequest, p: float) -> ResourceRequest:
    if rng.random() < p:
        for _ in range(int(rng.integers(1, 3))):
            rr.label_selectors.append(_selector(rng))
    return rr


def _gang(rng, type_res, g: int, hosted: dict, real: bool = False) -> GangResourceRequest:
    """A placement group encoded as the GCS encodes it (§3.7)."""
    pg = f"{g:04x}" + "ab" * 6
    strategy = STRATEGIES[int(rng.integers(4))]
    label = "_PG_" + pg
    nb = int(rng.integers(1, 6))
    base = _shape(rng, type_res, real)
    same = rng.random() < 0.6
    gang = GangResourceRequest(details=f"{pg}:{strategy}:PENDING")
    sel = BundleSelector()
    use_sel = rng.random() < 0.2
    for _ in range(nb):
        bundle = dict(base) if same else _shape(rng, type_res, real)
        pcs = pg_constraints(strategy, label)
        gang.requests.append(ResourceRequest(resources_bundle=bundle, placement_constraints=pcs))
        rr = ResourceRequest(resources_bundle=bundle, placement_constraints=pcs)
        if use_sel:
            rr.label_selectors.append(_selector(rng))
        sel.resource_requests.append(rr)
    gang.bundle_selectors.append(sel)
    if strategy == "STRICT_SPREAD" and rng.random() < 0.3:
        hosted[label] = ""        # a rescheduling group: some nodes already host it
    return gang


def _running(rng, name, res, head=False, i=0, real=False) -> AutoscalerInstance:
    total = dict(res)
    if rng.random() < 0.7:                 # raylets report these; tasks never use them
        total["object_store_memory"] = odd_bytes(rng, 1.0) if real else GIB
        total[f"node:10.0.0.{i}"] = 1.0
    avail = {}
    for k, v in total.items():
        if k.startswith("node:") or k == "object_store_memory" or k.startswith("accelerator"):
            avail[k] = v
            continue
        if rng.random() < 0.3:
            left = v                       # idle resource
        elif real and k == "memory":
            left = v - float(int(v * float(rng.random())) | 1)
        elif real:                         # used in units of 0.1 (a raylet's fixed point)
            units = round(v * UNITS)
            left = (units - min(units, int(rng.integers(0, int(v * 10) + 1)) * 1000)) / UNITS
        else:
            left = v * float(rng.integers(0, 5)) / 4
        if left == 0 and rng.random() < 0.5:
            continue                       # GCS may omit a fully used resource
        avail[k] = left
    idle = int(rng.choice([0, 0, 1000, 30_000, 90_000, 600_000]))
    ns = NodeState(node_id=bytes([i % 256, i // 256]), total_resources=total,
                   available_resources=avail, idle_duration_ms=idle)
    if rng.random() < 0.4:
        ns.labels["zone"] = str(rng.choice(ZONES))
    if rng.random() < 0.2:
        ns.labels["market"] = str(rng.choice(["spot", "on-demand"]))
    im = Instance(instance_id=f"i-{i}", instance_type=name, status=Instance.RAY_RUNNING,
                  node_id=f"n{i:04x}", node_kind=NodeKind.HEAD if head else NodeKind.WORKER,
                  launch_config_hash=str(rng.choice(["h1", "h1", "h0"])))
    return AutoscalerInstance(im_instance=im, ray_node=ns, cloud_instance_id=f"c-{i}")


def _ippr(rng, configs, insts):
    """KubeRay in-place resize specs for some groups and statuses for their pods."""
    groups = {}
    for name, cfg in configs.items():
        if name != "head" and "CPU" in cfg.resources and "memory" in cfg.resources \
                and rng.random() < 0.6:
            cpu, mem = cfg.resources["CPU"], cfg.resources["memory"]
            groups[name] = IPPRGroupSpec(min_cpu=cpu, max_cpu=cpu * float(rng.choice([1, 2, 4])),
                                         min_memory=int(mem), resize_timeout=60,
                                         max_memory=int(mem * float(rng.choice([1, 2]))))
    statuses = {}
    for x in insts:
        im = x.im_instance
        if im is None or im.instance_type not in groups or x.cloud_instance_id is None:
            continue
        if rng.random() < 0.3:
            continue
        g = groups[im.instance_type]
        cur_cpu, cur_mem = g.min_cpu, g.min_memory
        st = IPPRStatus(cloud_instance_id=x.cloud_instance_id, spec=g, current_cpu=cur_cpu,
                        current_memory=cur_mem, desired_cpu=cur_cpu, desired_memory=cur_mem)
        roll = rng.random()
        if roll < 0.15:                       # a resize was issued and is running
            st.desired_cpu, st.desired_memory = g.max_cpu, g.max_memory
            st.resizing_at = 1000
            st.k8s_resize_status = "inprogress"
        elif roll < 0.25:                     # queued last tick, not sent yet
            st.desired_cpu = g.max_cpu
            st.k8s_resize_status = "new"
            st.raylet_id = "r" if rng.random() < 0.5 else None
        elif roll < 0.32:
            st.last_failed_at = 900
        elif roll < 0.42:                     # Kubernetes suggested a lower cap
            st.suggested_max_cpu = cur_cpu + 1.0
        statuses[x.cloud_instance_id] = st
    if not groups:
        return None, {}
    return IPPRSpecs(groups=groups), statuses


def pg_constraints(strategy: str, label: str) -> list:
    """The placement constraint the GCS puts on each bundle of a group: an
    affinity (STRICT_PACK) or anti-affinity (STRICT_SPREAD) on its _PG_ label."""
    if strategy == "STRICT_PACK":
        return [PlacementConstraint(affinity=AffinityConstraint(label_name=label, label_value=""))]
    if strategy == "STRICT_SPREAD":
        return [PlacementConstraint(anti_affinity=AntiAffinityConstraint(label_name=label,
                                                                         label_value=""))]
    return []


def make_request(seed: int, *, max_nodes: int = 30, full: bool = True,
                 pending_idle_timeout_s=None, real: bool = False,
                 groups: bool = False) -> SchedulingRequest:
    """A random tick. ``full`` adds the features of the full-semantics issue:
    label selectors and labels, placement groups, a request_resources()
    constraint. ``real`` and ``groups``: see the module docstring (off, the
    request is the same as before they existed)."""
    rng = np.random.default_rng(seed)
    n_types = int(rng.integers(1, 6))
    n_nodes = int(rng.integers(0, max_nodes))
    roomy = rng.random() < 0.5          # caps above the existing share: launches happen
    configs, type_res = {}, []
    check_on = rng.random() < 0.25
    for t in range(n_types):
        res = _type_resources(rng, real)
        name = f"t{t}"
        mx = int(rng.integers(0, 8)) + (n_nodes // n_types if roomy else 0)
        mn = int(rng.integers(0, min(mx, 2) + 1)) if rng.random() < 0.3 else 0
        labels = {}
        if full and rng.random() < 0.5:
            labels["zone"] = str(rng.choice(ZONES))
        if full and rng.random() < 0.2:
            labels["market"] = "spot"
        configs[name] = NodeTypeConfig(
            name=name, min_worker_nodes=mn, max_worker_nodes=mx,
            idle_timeout_s=float(rng.choice([30, 120])) if rng.random() < 0.2 else None,
            priority=int(rng.integers(-1, 2)), resources=res, labels=labels,
            launch_config_hash=("h1" if check_on and rng.random() < 0.5 else ""))
        type_res.append(res)
    head_res = {"CPU": 4.0, "memory": 8 * GIB}
    configs["head"] = NodeTypeConfig(name="head", min_worker_nodes=0, max_worker_nodes=1,
                                     resources=head_res)
    names = list(configs)
    insts = [_running(rng, "head", head_res, head=True, i=0)]
    for i in range(1, n_nodes + 1):
        t = int(rng.integers(n_types))
        roll = rng.random()
        if roll < 0.6:
            insts.append(_running(rng, f"t{t}", type_res[t], i=i, real=real))
        elif roll < 0.9:
            st = PENDING[int(rng.integers(len(PENDING)))]
            kind = NodeKind.UNMANAGED if st in (Instance.QUEUED, Instance.REQUESTED) else NodeKind.WORKER
            name = f"t{t}" if rng.random() < 0.95 else "gone-type"
            insts.append(AutoscalerInstance(im_instance=Instance(
                instance_id=f"i-{i}", instance_type=name, status=st, node_kind=kind)))
        elif roll < 0.97:
            insts.append(AutoscalerInstance(im_instance=Instance(
                instance_id=f"i-{i}", instance_type=f"t{t}",
                status=GONE[int(rng.integers(len(GONE)))])))
        else:
            insts.append(AutoscalerInstance(im_instance=Instance(
                instance_id=f"i-{i}", instance_type=f"t{t}", status=Instance.RAY_RUNNING,
                node_id=f"n{i}"), ray_node=None))
    order = rng.permutation(len(insts))
    insts = [insts[j] for j in order]
    reqs = []
    for _ in range(int(rng.integers(0, 9))):
        rr = ResourceRequest(resources_bundle=_shape(rng, type_res, real))
        if full:
            _with_selectors(rng, rr, 0.25)
        reqs.append(ResourceRequestByCount(request=rr, count=int(rng.integers(1, 25))))
    gangs, constraints, hosted = [], [], {}
    if full:
        gangs = [_gang(rng, type_res, g, hosted, real) for g in range(int(rng.integers(0, 5)))]
        if hosted:
            running = [x for x in insts if x.ray_node is not None]
            for x in running[: max(1, len(running) // 3)]:
                for k, v in hosted.items():
                    if rng.random() < 0.5:
                        x.ray_node.dynamic_labels[k] = v
        if rng.random() < 0.3:
            cons = [ResourceRequestByCount(request=_with_selectors(
                rng, ResourceRequest(resources_bundle=_shape(rng, type_res, real)), 0.2),
                count=int(rng.integers(1, 6))) for _ in range(int(rng.integers(1, 4)))]
            constraints = [ClusterResourceConstraint(resource_requests=cons)]
    if groups:
        reqs, constraints = placed_groups(rng, insts, reqs, constraints, real)
    specs, statuses = _ippr(rng, configs, insts) if full and rng.random() < 0.3 else (None, {})
    avail = {n: float(rng.choice([0.0, 0.25, 0.5, 1.0])) for n in names if rng.random() < 0.2}
    recov = {n: float(rng.choice([0.0, 0.5, 1.0])) for n in names if rng.random() < 0.2}
    mnn = None if rng.random() < 0.7 else int(rng.integers(0, max_nodes + 5))
    return SchedulingRequest(
        disable_launch_config_check=not check_on,
        node_type_configs=configs,
        max_num_nodes=mnn,
        idle_timeout_s=None if rng.random() < 0.3 else 60.0,
        resource_requests=reqs,
        gang_resource_requests=gangs,
        cluster_resource_constraints=constraints,
        pending_idle_timeout_s=pending_idle_timeout_s,
        ippr_specs=specs,
        ippr_statuses=statuses,
        current_instances=insts,
        cloud_resource_availabilities=avail,
        recoverable_resource_availabilities=recov,
    )
