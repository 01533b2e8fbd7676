"""Build a validated Problem from plain Python values (the boundary of the engine).

This is where bad input is caught: every quantity, count, timeout and name is
checked once, and a `ProblemError` names the offending field. ``build_problem``
assembles the parts, each built by the module named for it:

- ``node_screen``: which instances become scheduling nodes (§2.1);
- ``build_vocab``: the resource and label columns of the tick;
- ``build_types``: the node types; ``build_nodes``: the nodes;
- ``build_demand``: plain requests, the constraint's requests and the gangs;
- ``build_ippr``: KubeRay in-place resize states; ``build_check``: field checks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import numpy as np

from . import check
from .demand import DemandRows, demand_arrays
from .ippr_arrays import any_ippr, ippr_arrays, node_states
from .nodes import Running, node_arrays
from .node_types import launch_names, type_arrays, type_index
from .columns import tick_columns
from vecsched.engine.model.dtypes import CNT, GPU, IDX, IMPLICIT_PREFIX, Kind, Status
from vecsched.engine.model.exact_columns import exact_columns
from vecsched.engine.model.exact_columns import exact_columns as _exact_columns  # noqa: F401  (tests import it)
from vecsched.engine.model.ippr import IpprState
from vecsched.engine.model.node_columns import NodeColumns
from .screen import screen
from vecsched.engine.model.problem import Problem, ProblemError
from vecsched.engine.model.requests import GangSpec, RequestSpec


@dataclass
class NodeTypeSpec:
    name: str
    resources: Mapping[str, float]
    min_workers: int = 0
    max_workers: int = 0
    priority: int = 0
    idle_timeout_s: Optional[float] = None
    labels: Mapping[str, str] = field(default_factory=dict)
    launch_hash: str = ""
    availability: float = 1.0          # cloud_resource_availabilities[type]
    recoverable: float = 1.0           # recoverable_resource_availabilities[type]
    ippr_max: Optional[tuple[float, float]] = None   # IPPR group (max CPU, max memory)
    # The type nodes made from this config carry (Ray's NodeTypeConfig.name) when
    # it differs from ``name`` (the config's key): docs/ray-compat.md "key and name".
    launch_as: Optional[str] = None


@dataclass(slots=True)
class NodeSpec:
    """One instance as the instance manager and GCS see it.

    ``status`` None means there is no instance-manager record (ignored, like Ray).
    ``total``/``available`` None means GCS has no node for it: a pending node is then
    built from its type config; a RAY_RUNNING one is skipped (stale state).
    """
    type: str
    status: Optional[int] = Status.RAY_RUNNING
    kind: int = Kind.WORKER
    total: Optional[Mapping[str, float]] = None
    available: Optional[Mapping[str, float]] = None
    labels: Optional[Mapping[str, str]] = None
    idle_ms: int = 0
    ray_node_id: str = ""
    launch_hash: str = ""
    ippr: Optional[IpprState] = None    # KubeRay in-place resize state, if attached


def build_problem(
    types: Sequence[NodeTypeSpec],
    nodes: Sequence[NodeSpec],
    requests: Sequence[RequestSpec],
    *,
    max_num_nodes: Optional[int] = None,
    idle_timeout_s: Optional[float] = None,
    disable_launch_config_check: bool = True,
    conserve_gpu: bool = True,
    gangs: Sequence[GangSpec] = (),
    constraint: Optional[Sequence[RequestSpec]] = None,
    pending_idle_timeout_s: Optional[float] = None,
    implicit_prefix: str = IMPLICIT_PREFIX,
    pending_terminable: Sequence[int] = Status.PENDING_TERMINABLE,
    cloud_availability: Optional[Mapping[str, float]] = None,
    recoverable_availability: Optional[Mapping[str, float]] = None,
) -> Problem:
    """Validate and encode one tick.

    ``requests`` are the plain request runs; ``constraint`` the request list of a
    ``request_resources()`` constraint (None: no constraint); ``gangs`` the
    placement groups. A RequestSpec's ``sum`` lets an adapter pass Ray's
    request-sort sum computed over the original map (its iteration order decides
    the last bit); by default it is summed in the bundle's own order.

    Ray's own settings, as the adapter read them this tick: ``conserve_gpu``
    (``AUTOSCALER_CONSERVE_GPU_NODES``), ``implicit_prefix``
    (``IMPLICIT_RESOURCE_PREFIX``: a missing resource with it counts as 1.0) and
    ``pending_terminable`` (``PENDING_TERMINABLE_STATUSES``, in rank order).
    ``cloud_availability`` / ``recoverable_availability``: the request's scores
    by type name, for the types no config carries (configured types take
    theirs from their NodeTypeSpec); Ray looks them up by a node's type.
    """
    tix = type_index(types)
    cols = NodeColumns.of(nodes)
    scr = screen(cols, tix, disable_launch_config_check)
    run = Running.of(cols, scr)
    demand = DemandRows.of(requests, constraint, gangs)
    states = node_states(cols, scr)
    used_ippr = any_ippr(types, states)
    if not isinstance(implicit_prefix, str) or not implicit_prefix:
        raise ProblemError("implicit_prefix",
                           f"must be a non-empty string, got {implicit_prefix!r}")
    c = tick_columns(types, run.maps, demand.specs, used_ippr, implicit_prefix)
    extra = scr.extra_types + launch_names(types, tix, scr.extra_types)
    ta = type_arrays(types, extra, c, dict(cloud_availability or {}),
                     dict(recoverable_availability or {}))
    na = node_arrays(cols, scr, run, ta, c)
    da = demand_arrays(demand, c)
    ia = ippr_arrays(types, ta.T, states, scr.kept, c.vocab, used_ippr)
    R = len(c.vocab)
    return Problem(
        resources=c.vocab.names,
        implicit=c.implicit,
        exact=exact_columns(R, ta.cap, na.total, na.free, da.table.qty, ia.values),
        label_keys=c.lvocab.names,
        label_values=c.values.names,
        gpu_col=c.vocab.get(GPU),
        **_type_fields(ta, ia),
        **_node_fields(scr, ta, na, ia),
        **_demand_fields(demand, da, gangs, constraint is not None),
        clamped=na.clamped,
        skipped=tuple(scr.skipped),
        **_settings(max_num_nodes, idle_timeout_s, pending_idle_timeout_s,
                    disable_launch_config_check, conserve_gpu, pending_terminable),
    )


def _type_fields(ta, ia) -> dict:
    """The Problem's per-node-type arrays, from the type arrays and the in-place
    resize arrays."""
    return dict(
        type_names=ta.names,
        type_configured=ta.configured,
        type_cap=ta.cap,
        type_free=ta.free,
        type_order=ta.order,
        type_min=ta.min,
        type_max=ta.max,
        type_priority=ta.priority,
        type_idle_timeout_s=ta.idle,
        type_recoverable=ta.recoverable,
        type_availability=ta.availability,
        type_label=ta.label,
        type_launch_hash=ta.launch_hash,
        type_launch_as=ta.launch_as,
        type_ippr_max=ia.type_max,
    )


def _node_fields(scr, ta, na, ia) -> dict:
    """The Problem's per-node arrays. A pending node of a config's type is named by the
    type it launches as; a running one keeps its own type."""
    pend = (scr.status != Status.RAY_RUNNING) & ~scr.outdated
    node_type = np.where(pend, ta.launch_as[scr.type], scr.type)
    return dict(
        node_source=scr.kept.astype(IDX),
        node_type=node_type.astype(IDX),
        node_priority=np.where(ta.configured[scr.type], ta.priority[scr.type], 0).astype(CNT),
        node_status=scr.status.astype(np.int8),
        node_kind=scr.kind.astype(np.int8),
        node_total=na.total,
        node_order=na.order,
        node_free=na.free,
        node_free_present=na.present,
        node_label=na.label,
        node_idle_ms=na.idle,
        node_has_ray=na.has_ray,
        node_outdated=scr.outdated.copy(),
        node_launch_hash=tuple(na.launch_hash),
        node_ippr=ia.nodes,
        node_private=tuple(na.private),
    )


def _demand_fields(demand, da, gangs, has_constraint: bool) -> dict:
    """The Problem's demand arrays: the plain request shapes (the first ``S`` rows of
    the request table), the constraint's rows after them, and the gangs."""
    S = demand.S
    return dict(
        shape_qty=da.table.qty[:S],
        shape_present=da.table.present[:S],
        shape_count=da.shape_count,
        shape_sum=da.table.sum[:S],
        req=da.table,
        con_req=np.arange(S, S + demand.C, dtype=IDX),
        con_count=da.con_count,
        has_constraint=has_constraint,
        gang_ptr=da.gang_ptr,
        gang_req=da.gang_req,
        gang_key=da.gang_key,
        gang_names=tuple(g.name for g in gangs),
    )


def _settings(max_num_nodes, idle_timeout_s, pending_idle_timeout_s,
              disable_launch_config_check, conserve_gpu, pending_terminable) -> dict:
    """The tick's scalar settings, each checked (a ``ProblemError`` names the field)."""
    return dict(
        pending_idle_timeout_s=check.timeout(pending_idle_timeout_s, "pending_idle_timeout_s"),
        max_num_nodes=-1 if max_num_nodes is None else check.count(max_num_nodes,
                                                                   "max_num_nodes"),
        idle_timeout_s=check.timeout(idle_timeout_s, "idle_timeout_s"),
        disable_launch_config_check=bool(disable_launch_config_check),
        conserve_gpu=bool(conserve_gpu),
        pending_terminable=_statuses(pending_terminable),
    )


def _statuses(statuses) -> tuple:
    """Ray's PENDING_TERMINABLE_STATUSES as instance status codes, checked."""
    where = "ResourceDemandScheduler.PENDING_TERMINABLE_STATUSES"
    try:
        out = tuple(statuses)
    except TypeError:
        raise ProblemError(where, f"must be a sequence of statuses, got {statuses!r}") from None
    for s in out:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) \
                or int(s) not in Status.NAMES or int(s) < 0:
            raise ProblemError(where, f"{s!r} is not an instance status")
    return tuple(int(s) for s in out)
