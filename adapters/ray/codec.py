"""SchedulingRequest -> Problem, and Plan -> SchedulingReply (docs/ray-semantics.md §1).

The codec reads each protobuf map once, in its own iteration order (Ray's float
sums follow that order, so the engine is handed the same order), and keeps the
original messages so the reply can echo them back by index.
"""
from __future__ import annotations

import copy
import time
import uuid
from dataclasses import dataclass, field
from itertools import chain, compress, repeat
from operator import attrgetter, eq, is_, is_not, methodcaller

import numpy as np
from typing import Callable, Optional

from ray.autoscaler.v2.scheduler import SchedulingReply, SchedulingRequest
from ray.core.generated.instance_manager_pb2 import Instance, LaunchRequest, TerminationRequest

from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
from vecsched.engine.model.node_columns import FlatMaps, NodeColumns, pick
from vecsched.engine.model.ippr import K8S_NEW, K8S_NONE, K8S_OTHER, IpprState
from vecsched.engine.model.requests import GangSpec, RequestSpec
from vecsched.engine.model.dtypes import PRIVATE_PREFIX, Cause, Status
from vecsched.engine.model.plan import Plan
from vecsched.engine.model.problem import Problem, ProblemError

from . import wire
from .settings import ray_settings


@dataclass
class Decoded:
    problem: Problem
    instances: list            # the request's AutoscalerInstance list (node_source indexes it)
    requests: list             # ResourceRequest message of each run
    gangs: list                # GangResourceRequest messages
    constraints: list          # ClusterResourceConstraint messages (0 or 1)
    request: SchedulingRequest
    cache: "SpecCache"         # this tick's decoded specs, for the next tick


def _request_spec(rr, where: str, count: int = 1) -> RequestSpec:
    """One ResourceRequest message as a RequestSpec (bundle, constraint, selectors)."""
    pcs = rr.placement_constraints
    if len(pcs) > 1:
        raise ProblemError(f"{where}.placement_constraints",
                           f"has {len(pcs)} constraints; at most one is supported")
    aff = anti = None
    for pc in pcs:
        if pc.HasField("affinity"):
            aff = (pc.affinity.label_name, pc.affinity.label_value)
        elif pc.HasField("anti_affinity"):
            anti = (pc.anti_affinity.label_name, pc.anti_affinity.label_value)
        else:
            raise ProblemError(f"{where}.placement_constraints[0]",
                               "is neither an affinity nor an anti-affinity")
    sels = [[(c.label_key, int(c.operator), list(c.label_values)) for c in sel.label_constraints]
            for sel in rr.label_selectors] if rr.label_selectors else ()
    bundle = _pb_dict(rr.resources_bundle)      # the map's own order: Ray sums in it
    return RequestSpec(bundle, count, sels, aff, anti, sum=sum(bundle.values()))


@dataclass
class SpecCache:
    """Bundles and placement groups decoded in earlier ticks, by their bytes: a
    pending group is sent again every tick until it is placed. Equal bytes are
    equal messages with their map entries in the same order. Every group's
    bundles are in ``bundles``, so equal bundles stay one object (one row)."""
    bundles: dict = field(default_factory=dict)   # bytes -> RequestSpec
    gangs: dict = field(default_factory=dict)     # bytes -> (GangSpec, its bundles' bytes,
    #                                                           bundle bytes -> spec)


def _gang_specs(req: SchedulingRequest, old: SpecCache) -> tuple[list, SpecCache]:
    """Every placement group as a GangSpec, and the cache for the next tick (the
    entries this tick used)."""
    now = SpecCache()
    gangs = req.gang_resource_requests
    keys = list(map(_SERIALIZE, gangs))
    hits = list(map(old.gangs.get, keys))
    for i in [i for i, hit in enumerate(hits) if hit is None]:
        # a group not seen last tick; its bundles seen before keep their spec (the
        # old cache holds every bundle of every group it holds)
        hits[i] = _gang_spec(gangs[i], i, old.bundles, now.bundles)
    now.gangs = dict(zip(keys, hits))
    for hit in hits:
        now.bundles.update(hit[2])
    return [hit[0] for hit in hits], now


def _gang_spec(g, i: int, old: dict, now: dict) -> tuple:
    """(GangSpec, bundle bytes, bundle bytes -> spec). ``old``/``now``: bundle bytes -> RequestSpec of
    earlier ticks / of this one (a placement group's bundles are mostly equal,
    and many groups alike)."""
    selectors = bool(g.bundle_selectors)
    used = g.bundle_selectors[0].resource_requests if selectors else g.requests
    specs, keys = [], []
    for b, r in enumerate(used):
        key = r.SerializeToString()
        spec = now.get(key) or old.get(key)
        if spec is None:
            field_ = "bundle_selectors[0].resource_requests" if selectors else "requests"
            spec = _request_spec(r, f"gang_resource_requests[{i}].{field_}[{b}]")
        now[key] = spec
        specs.append(spec)
        keys.append(key)
    # Ray orders gangs by the legacy list even when bundle_selectors are used; a
    # decoded request has at most one placement constraint.
    n_pc = (sum(len(r.placement_constraints) for r in g.requests) if selectors else
            sum((s.affinity is not None) + (s.anti_affinity is not None) for s in specs))
    return (GangSpec(requests=specs, sort_key=(n_pc, len(g.requests)), name=g.details), keys,
            dict(zip(keys, specs)))


def _type_spec(key: str, cfg, req: SchedulingRequest) -> NodeTypeSpec:
    # Ray looks a config up by its key, and gives the nodes it makes from it the
    # config's own name (docs/ray-compat.md "key and name").
    return NodeTypeSpec(
        name=key,
        resources=dict(cfg.resources),
        min_workers=cfg.min_worker_nodes,
        max_workers=cfg.max_worker_nodes,
        priority=cfg.priority,
        idle_timeout_s=cfg.idle_timeout_s,
        labels=dict(cfg.labels),
        launch_hash=cfg.launch_config_hash or "",
        availability=req.cloud_resource_availabilities.get(key, 1.0),
        recoverable=req.recoverable_resource_availabilities.get(key, 1.0),
        ippr_max=_group_max(req, key),
        launch_as=cfg.name if cfg.name != key else None,
    )


def _group_max(req: SchedulingRequest, key: str):
    if req.ippr_specs and key in req.ippr_specs.groups:
        g = req.ippr_specs.groups[key]
        return (g.max_cpu, g.max_memory)
    return None


def _ippr_state(st) -> IpprState:
    k8s = {None: K8S_NONE, "new": K8S_NEW}.get(st.k8s_resize_status, K8S_OTHER)
    return IpprState(current_cpu=st.current_cpu, current_memory=st.current_memory,
                     desired_cpu=st.desired_cpu, desired_memory=st.desired_memory,
                     max_cpu=st.max_cpu(), max_memory=st.max_memory(),
                     resizing=st.resizing_at is not None, k8s=k8s,
                     failed=st.last_failed_at is not None, raylet=st.raylet_id is not None)


def _pb_dict(m) -> dict:
    """A protobuf map as a dict, in the map's own iteration order (the order Ray
    sums in); twice as fast as dict(m), which goes through the Mapping ABC."""
    return {k: m[k] for k in m}


_RUNNING = Instance.RAY_RUNNING


def _node_spec(inst, req: SchedulingRequest, ippr: bool) -> NodeSpec:
    im = inst.im_instance
    if im is None:
        return NodeSpec(type="", status=None)
    status = im.status
    rn = inst.ray_node
    if status == _RUNNING and rn is not None:
        labels = _pb_dict(rn.labels) if rn.labels else {}
        if rn.dynamic_labels:
            labels.update(_pb_dict(rn.dynamic_labels))
        spec = NodeSpec(im.instance_type, status, im.node_kind, _pb_dict(rn.total_resources),
                        _pb_dict(rn.available_resources), labels, rn.idle_duration_ms,
                        im.node_id, im.launch_config_hash)
    else:
        spec = NodeSpec(im.instance_type, status, im.node_kind)
    if ippr:
        st = _ippr_status(inst, req)
        if st is not None:
            state = _ippr_state(st)
            state.raylet = state.raylet or bool(status == _RUNNING and rn is not None
                                                and im.node_id)
            spec.ippr = state
    return spec


_RAY_NODE = attrgetter("ray_node")
_IM_RN = attrgetter("im_instance", "ray_node")


def _node_columns(req: SchedulingRequest, ippr: bool) -> NodeColumns:
    """Every instance as columns, one attribute over all instances at a time (the
    codec's hot loop: each protobuf map is read once, in its own order)."""
    insts = req.current_instances
    ims, rns = zip(*map(_IM_RN, insts)) if insts else ((), ())   # one pass over the list
    if ippr or any(map(is_, ims, repeat(None))):   # IPPR states, or an instance without
        # an instance-manager record: one NodeSpec per instance (rare ticks)
        return NodeColumns.of([_node_spec(inst, req, ippr) for inst in insts])
    return _node_columns_of(insts, ims, rns=rns)


def _node_columns_of(insts: list, ims: list, use_wire: bool = True,
                     rns=None) -> NodeColumns:
    """``rns``: each instance's ray node, if already read."""
    status = list(map(_STATUS, ims))
    rns = list(map(_RAY_NODE, insts)) if rns is None else rns
    n = len(insts)
    mapped = np.flatnonzero(np.fromiter(map(eq, status, repeat(_RUNNING)), bool, n)
                            & np.fromiter(map(is_not, rns, repeat(None)), bool, n))
    on, im_on = pick(rns, mapped), pick(ims, mapped)
    scan = wire.start(on) if use_wire and on else None
    # read while the nodes' bytes are scanned (on another core: the scan holds no GIL)
    types, kinds = list(map(_TYPE, ims)), list(map(_KIND, ims))
    node_ids, hashes = list(map(_NODE_ID, im_on)), list(map(_HASH, im_on))
    got = scan.result() if scan is not None else None
    if got is not None:
        total, avail, labels, idle, dynamic = got
        if dynamic.any():
            labels = _labels(on, dynamic.tolist())
    else:
        dynamic = list(map(len, map(_DYNAMIC, on)))
        total, avail = FlatMaps.of_pair(list(map(_TOTAL, on)), list(map(_AVAIL, on)))
        labels, idle = _labels(on, dynamic), list(map(_IDLE, on))
    return NodeColumns(type=types, status=status, kind=kinds, mapped=mapped, total=total,
                       available=avail, labels=labels, idle_ms=idle, ray_node_id=node_ids,
                       launch_hash=hashes)


def _labels(on: list, dynamic: list) -> FlatMaps:
    """The nodes' labels, each node's dynamic labels merged over them."""
    labels = list(map(_LABELS, on))
    for j in [j for j, d in enumerate(dynamic) if d]:
        merged = _pb_dict(labels[j])
        merged.update(_pb_dict(on[j].dynamic_labels))
        labels[j] = merged
    return FlatMaps.of(labels)


_SERIALIZE = methodcaller("SerializeToString")
_STATUS, _TYPE, _KIND = attrgetter("status"), attrgetter("instance_type"), attrgetter("node_kind")
_NODE_ID, _HASH = attrgetter("node_id"), attrgetter("launch_config_hash")
_TOTAL, _AVAIL = attrgetter("total_resources"), attrgetter("available_resources")
_LABELS, _DYNAMIC = attrgetter("labels"), attrgetter("dynamic_labels")
_IDLE = attrgetter("idle_duration_ms")


def decode(req: SchedulingRequest, cache: Optional[SpecCache] = None) -> Decoded:
    """``cache``: the placement groups and bundles decoded last tick (optional);
    ``Decoded.cache`` is this tick's, to pass to the next."""
    if len(req.cluster_resource_constraints) > 1:
        raise ProblemError("cluster_resource_constraints",
                           f"has {len(req.cluster_resource_constraints)} entries; at most 1")
    types = [_type_spec(k, cfg, req) for k, cfg in req.node_type_configs.items()]
    ippr = bool(req.ippr_statuses and req.ippr_specs)
    nodes = _node_columns(req, ippr)
    runs, msgs = [], []
    for i, rbc in enumerate(req.resource_requests):
        if rbc.count < 0:
            raise ProblemError(f"resource_requests[{i}].count", f"is negative ({rbc.count})")
        runs.append(_request_spec(rbc.request, f"resource_requests[{i}]", int(rbc.count)))
        msgs.append(rbc.request)
    constraint = None
    if req.cluster_resource_constraints:
        constraint = []
        for i, rbc in enumerate(req.cluster_resource_constraints[0].resource_requests):
            where = f"cluster_resource_constraints[0].resource_requests[{i}]"
            if rbc.count < 0:
                raise ProblemError(f"{where}.count", f"is negative ({rbc.count})")
            constraint.append(_request_spec(rbc.request, where, int(rbc.count)))
    gangs, specs = _gang_specs(req, cache if cache is not None else SpecCache())
    p = build_problem(types, nodes, runs,
                      max_num_nodes=req.max_num_nodes,
                      idle_timeout_s=req.idle_timeout_s,
                      pending_idle_timeout_s=req.pending_idle_timeout_s,
                      disable_launch_config_check=req.disable_launch_config_check,
                      gangs=gangs, constraint=constraint,
                      cloud_availability=req.cloud_resource_availabilities,
                      recoverable_availability=req.recoverable_resource_availabilities,
                      **ray_settings())
    for n in np.flatnonzero(p.node_ippr["attached"]):
        inst = req.current_instances[int(p.node_source[n])]
        if inst.im_instance.status == Instance.RAY_RUNNING and inst.im_instance.node_id:
            # Ray writes the raylet id into the caller's status object (§2.1 item 5).
            _ippr_status(inst, req).raylet_id = inst.im_instance.node_id
    return Decoded(p, list(req.current_instances), msgs, list(req.gang_resource_requests),
                   list(req.cluster_resource_constraints), req, specs)


def _ippr_status(inst, req: SchedulingRequest):
    """The IPPR status Ray attaches to this instance's node, if any (by the
    node's type: a pending node made from a config carries the config's name)."""
    if not (req.ippr_statuses and req.ippr_specs):
        return None
    if inst.cloud_instance_id not in req.ippr_statuses:
        return None
    im = inst.im_instance
    node_type = im.instance_type
    cfg = req.node_type_configs.get(node_type)
    if cfg is not None and not (im.status == Instance.RAY_RUNNING and inst.ray_node is not None):
        node_type = cfg.name
    if node_type not in req.ippr_specs.groups:
        return None
    return req.ippr_statuses[inst.cloud_instance_id]


# The efficient mode's CONSOLIDATE (vecsched.engine.efficient.consolidate) has no value in Ray
# 2.60's TerminationRequest.Cause: UNKNOWN (0) would break Ray's event logger (its
# cause -> text map has the four named causes only). So it goes to Ray as OUTDATED, its
# details starting with this prefix and ending with the drain deadline in seconds (the
# plan's value, in ms); ``engine_cause`` and ``drain_deadline_ms`` read them back. Stock
# Ray's RayStopper stops the ray node for every cause but IDLE; with
# ``adapters/ray/drain.py``'s stopper installed a consolidated node is drained instead
# (GCS DrainNode, reason PREEMPTION, with the deadline).
CONSOLIDATION_DETAILS = "consolidation:"


def engine_cause(tr) -> int:
    """The engine's cause of a ``TerminationRequest`` (CONSOLIDATE read back from
    its details)."""
    c = int(tr.cause)
    if c == Cause.OUTDATED and tr.details.startswith(CONSOLIDATION_DETAILS):
        return Cause.CONSOLIDATE
    return c


_DEADLINE_TAG = "drain deadline "


def drain_deadline_ms(tr) -> int:
    """The drain deadline (ms from the drain request) a consolidation termination
    carries in its details; 0 when it carries none (stop at once)."""
    d = tr.details
    if not d.startswith(CONSOLIDATION_DETAILS) or _DEADLINE_TAG not in d:
        return 0
    text = d.rsplit(_DEADLINE_TAG, 1)[1].split(" ", 1)[0]
    try:
        return max(0, int(round(float(text) * 1000)))
    except ValueError:
        return 0


def _details(cause: int, value: int, node_type: str, has_ray: bool, p: Problem,
             t: int) -> str:
    if cause == Cause.CONSOLIDATE:
        return (f"{CONSOLIDATION_DETAILS} a {node_type} node with few GPUs in use whose "
                f"running work fits on another running node (sent as OUTDATED: Ray has "
                f"no consolidation cause); {_DEADLINE_TAG}{value / 1000:g} s")
    if cause == Cause.OUTDATED:
        return f"node from {node_type} has outdated config"
    if cause == Cause.IDLE:
        timeout = p.type_idle_timeout_s[t] if p.type_configured[t] else float("nan")
        if timeout != timeout:
            timeout = p.idle_timeout_s
        what = "idle" if has_ray else "pending and not needed"
        return f"{what} for {value / 1000} secs > timeout={timeout} secs"
    if cause == Cause.MAX_NUM_NODES:
        return f"Terminating node due to MAX_NUM_NODES: max_num_nodes={value}, max_num_nodes_per_type=None"
    return f"Terminating node due to MAX_NUM_NODE_PER_TYPE: max_num_nodes=None, max_num_nodes_per_type={value}"


def encode(d: Decoded, plan: Plan, *, new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
           now_ns: Callable[[], int] = time.time_ns) -> SchedulingReply:
    p = d.problem
    to_launch = [
        LaunchRequest(instance_type=p.type_names[t], count=int(plan.launch[t]), id=new_id(),
                      request_ts_ms=now_ns() // 1000)   # microseconds, as Ray does (quirk Q5)
        for t in plan.launch_order
    ]
    to_terminate = []
    for n, cause, value, status in zip(plan.term_node, plan.term_cause, plan.term_value,
                                       plan.term_status):
        n, cause, value = int(n), int(cause), int(value)
        inst = d.instances[int(p.node_source[n])]
        im = inst.im_instance
        t = int(p.node_type[n])
        tr = TerminationRequest(
            id=new_id(), instance_id=im.instance_id,
            cause=Cause.OUTDATED if cause == Cause.CONSOLIDATE else cause,
            instance_type=p.type_names[t], instance_status=int(status))
        if not p.node_outdated[n]:
            ray_id = im.node_id if int(status) == Status.RAY_RUNNING and inst.ray_node else ""
            tr.ray_node_id = ray_id
            tr.details = _details(cause, value, p.type_names[t], bool(p.node_has_ray[n]), p, t)
        if cause == Cause.IDLE:
            tr.idle_duration_ms = value
        elif cause == Cause.MAX_NUM_NODES:
            tr.max_num_nodes = value
        elif cause == Cause.MAX_NUM_NODE_PER_TYPE:
            tr.max_num_nodes_per_type = value
        to_terminate.append(tr)
    infeasible = []
    for s in plan.run_order:
        k = int(plan.infeasible[s])
        if k:
            infeasible.extend([d.requests[int(s)]] * k)   # count-expanded, as Ray (Q10)
    cluster = {p.resources[r]: float(plan.cluster_resources[r]) for r in _total_keys(p, plan)
               if not p.resources[r].startswith(PRIVATE_PREFIX)}
    live = np.ones(p.N, bool)
    live[plan.term_node] = False
    for name, value in chain.from_iterable(compress(p.node_private, live.tolist())):
        cluster[name] = cluster.get(name, 0.0) + float(value)
    return SchedulingReply(
        to_launch=to_launch,
        to_terminate=to_terminate,
        cluster_resources=cluster,
        infeasible_resource_requests=infeasible,
        infeasible_gang_resource_requests=[d.gangs[int(g)] for g in plan.gang_order
                                           if plan.gang_infeasible[int(g)]],
        infeasible_cluster_resource_constraints=list(d.constraints) if plan.constraint_infeasible
        else [],
        to_ippr=_to_ippr(d, plan),
    )


def _to_ippr(d: Decoded, plan: Plan) -> list:
    """Copies of the statuses with a resize to send, this tick's resizes queued on
    them (Ray returns its working copies; the caller's objects are not resized)."""
    out = []
    for n, queued in zip(plan.ippr_send, plan.ippr_queued):
        inst = d.instances[int(d.problem.node_source[int(n)])]
        st = copy.deepcopy(_ippr_status(inst, d.request))
        if queued:
            st.queue_resize_request(desired_cpu=st.max_cpu(), desired_memory=st.max_memory())
        out.append(st)
    return out


def _total_keys(p: Problem, plan: Plan) -> list[int]:
    """Columns named in the totals of some node that is not being terminated."""
    live = np.ones(p.N, bool)
    live[plan.term_node] = False
    orders = np.concatenate([p.node_order[live], p.type_order[plan.new_template]])
    named = orders[orders >= 0]
    return np.flatnonzero(np.bincount(named)).tolist() if named.size else []
