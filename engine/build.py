"""Build a validated Problem from plain Python values (the boundary of the engine).

This is where bad input is caught: every quantity, count, timeout and name is
checked here, once, and a `ProblemError` names the offending field. It also owns
which instances become scheduling nodes (RAY_V2_SEMANTICS.md §2.1).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Optional, Sequence

import numpy as np

from .dtypes import CNT, IDX, IMPLICIT_PREFIX, PRIVATE_PREFIX, QTY, GPU, Kind, Status
from .problem import Problem, ProblemError, order_mask
from . import ippr as _ippr
from .build_nodes import encode_running, new_names
from .node_columns import NodeColumns
from .node_screen import screen
from .ippr import IpprState
from .requests import GangSpec, RequestSpec, collect_names, encode
from .vocab import Vocab

MAX_COUNT = 1 << 40          # larger request counts or caps are rejected as absurd
MAX_QTY = 1e18               # larger quantities are rejected (memory in bytes is ~1e12)


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


def _qty(value, where: str) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ProblemError(where, f"quantity must be a number, got {value!r}") from None
    if math.isnan(v):
        raise ProblemError(where, "quantity is NaN")
    if v < 0:
        raise ProblemError(where, f"quantity is negative ({v})")
    if v > MAX_QTY or math.isinf(v):
        raise ProblemError(where, f"quantity is too large ({v})")
    return v


def _count(value, where: str, lo: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ProblemError(where, f"must be an integer, got {value!r}")
    v = int(value)
    if v < lo:
        raise ProblemError(where, f"must be >= {lo}, got {v}")
    if v > MAX_COUNT:
        raise ProblemError(where, f"is too large ({v} > {MAX_COUNT})")
    return v


def _timeout(value, where: str) -> float:
    if value is None:
        return math.nan
    v = _qty(value, where)
    return v


def _fraction(value, where: str) -> float:
    v = _qty(value, where)
    if v > 1.0:
        raise ProblemError(where, f"must be within [0, 1], got {v}")
    return v


def _exact_columns(R: int, *mats: np.ndarray) -> np.ndarray:
    """(R,) bool: every value of the column is k * 2**-G for one G <= 30 with
    |k| < 2**51, so sums and k-fold products of them are exact in binary64."""
    exact = np.ones(R, dtype=bool)
    for r in range(R):
        vals = np.concatenate([m[:, r].ravel() for m in mats if m.size])
        vals = vals[vals != 0]
        if vals.size == 0:
            continue
        top = float(np.abs(vals).max())
        ok = False
        for g in range(31):
            scaled = vals * float(2 ** g)
            if top * 2 ** g >= 2.0 ** 51:
                break
            if np.all(scaled == np.floor(scaled)):
                ok = True
                break
        exact[r] = ok
    return exact


def _new_node_free(cap: np.ndarray, order: np.ndarray, implicit: np.ndarray) -> np.ndarray:
    free = cap.copy()
    present = np.zeros(cap.shape, dtype=bool)
    t, j = np.nonzero(order >= 0)
    present[t, order[t, j]] = True
    free[:, implicit] = np.where(present[:, implicit], free[:, implicit], 1.0)
    return free


def _order_row(keys, vocab: Vocab, R: int) -> np.ndarray:
    row = np.full(R, -1, dtype=IDX)
    for j, k in enumerate(keys):
        row[j] = vocab[k]
    return row


def build_problem(
    types: Sequence[NodeTypeSpec],
    nodes: Sequence[NodeSpec],
    requests: Sequence[RequestSpec],
    *,
    max_num_nodes: Optional[int] = None,
    idle_timeout_s: Optional[float] = None,
    disable_launch_config_check: bool = True,
    conserve_gpu: bool = True,
    vocab: Optional[Vocab] = None,
    label_vocab: Optional[Vocab] = None,
    gangs: Sequence[GangSpec] = (),
    constraint: Optional[Sequence[RequestSpec]] = None,
    pending_idle_timeout_s: Optional[float] = None,
) -> Problem:
    """Validate and encode one tick.

    ``requests`` are the plain request runs; ``constraint`` the request list of a
    ``request_resources()`` constraint (None: no constraint); ``gangs`` the
    placement groups. A RequestSpec's ``sum`` lets an adapter pass Ray's
    request-sort sum computed over the original map (its iteration order decides
    the last bit); by default it is summed in the bundle's own order.
    """
    if not types:
        raise ProblemError("node_type_configs", "is empty: at least one node type is needed")
    vocab = Vocab(vocab.names) if vocab is not None else Vocab()
    lvocab = Vocab(label_vocab.names) if label_vocab is not None else Vocab()
    values = Vocab(allow_empty=True)   # label values; "" is a value (PG markers)

    # ---- names first, so every column exists before arrays are sized --------------
    type_index: dict[str, int] = {}
    for i, ts in enumerate(types):
        if not isinstance(ts.name, str) or not ts.name:
            raise ProblemError(f"node_type_configs[{i}].name", "must be a non-empty string")
        if ts.name in type_index:
            raise ProblemError(f"node_type_configs[{ts.name!r}]", "is given twice")
        type_index[ts.name] = i
        for k in ts.resources:
            vocab.add(k)
        for k in ts.labels:
            lvocab.add(k)
    cols = NodeColumns.of(nodes)
    scr = screen(cols, type_index, disable_launch_config_check)
    kept = scr.kept.tolist()
    N = len(kept)
    is_run = scr.status == Status.RAY_RUNNING
    run_rows = np.flatnonzero(is_run & ~scr.outdated)   # all of them have maps (screen)
    map_rows = scr.map_row[run_rows]
    maps = (cols.total.take(map_rows, shared=True), cols.available.take(map_rows, shared=True),
            cols.labels.take(map_rows))
    lvocab.add_many(maps[2].names)

    # Gang bundles: one request row per distinct spec object (an adapter passes
    # one object for equal bundles), each bundle pointing at its row.
    gang_specs, first_bundle, bundle_row = [], [], []
    row_of: dict = {}
    for b in (b for g in gangs for b in g.requests):
        r = row_of.get(id(b))
        if r is None:
            r = row_of[id(b)] = len(gang_specs)
            gang_specs.append(b)
            first_bundle.append(len(bundle_row))
        bundle_row.append(r)
    all_specs = list(requests) + list(constraint or ()) + gang_specs
    collect_names(all_specs, vocab, lvocab)
    # Private columns (a raylet's node:<ip>): named by one node only, by no type or
    # request. They never decide anything, so each node's k-th private resource
    # shares the pseudo column PRIVATE_PREFIX + k instead of widening every row.
    cols_of = (maps[0].columns(vocab.ids), maps[1].columns(vocab.ids))
    known = len(vocab)
    named, n_private = new_names(maps[0], maps[1], *cols_of, IMPLICIT_PREFIX)
    for k in named:
        vocab.add(k)
    for j in range(n_private):
        vocab.add(f"{PRIVATE_PREFIX}{j}")
    node_ippr = [cols.ippr[i] for i in kept] if cols.ippr is not None else [None] * N
    any_ippr = any(ts.ippr_max is not None for ts in types) or (
        cols.ippr is not None and any(s is not None for s in node_ippr))
    if any_ippr:
        vocab.add("CPU")
        vocab.add("memory")
    if len(vocab) > known:             # names that got a column since
        cols_of = (maps[0].columns(vocab.ids), maps[1].columns(vocab.ids))

    R, L = len(vocab), len(lvocab)
    names = vocab.names
    T = len(types) + len(scr.extra_types)
    type_names = tuple(ts.name for ts in types) + tuple(scr.extra_types)

    # ---- node types -----------------------------------------------------------------
    type_cap = np.zeros((T, R), dtype=QTY)
    type_order = np.full((T, R), -1, dtype=IDX)
    type_min = np.zeros(T, dtype=CNT)
    type_max = np.zeros(T, dtype=CNT)
    type_priority = np.zeros(T, dtype=CNT)
    type_idle = np.full(T, np.nan, dtype=QTY)
    type_rec = np.ones(T, dtype=QTY)
    type_av = np.ones(T, dtype=QTY)
    type_label = np.full((T, L), -1, dtype=IDX)
    type_hash = [""] * T
    for t, ts in enumerate(types):
        where = f"node_type_configs[{ts.name!r}]"
        for k, v in ts.resources.items():
            type_cap[t, vocab[k]] = _qty(v, f"{where}.resources[{k!r}]")
        type_order[t] = _order_row(ts.resources.keys(), vocab, R)
        type_min[t] = _count(ts.min_workers, f"{where}.min_worker_nodes")
        type_max[t] = _count(ts.max_workers, f"{where}.max_worker_nodes")
        if type_min[t] > type_max[t]:
            raise ProblemError(f"{where}.min_worker_nodes",
                               f"{type_min[t]} exceeds max_worker_nodes {type_max[t]}")
        if isinstance(ts.priority, bool) or not isinstance(ts.priority, (int, np.integer)):
            raise ProblemError(f"{where}.priority", f"must be an integer, got {ts.priority!r}")
        type_priority[t] = int(ts.priority)
        type_idle[t] = _timeout(ts.idle_timeout_s, f"{where}.idle_timeout_s")
        type_av[t] = _fraction(ts.availability, f"cloud_resource_availabilities[{ts.name!r}]")
        type_rec[t] = _fraction(ts.recoverable, f"recoverable_resource_availabilities[{ts.name!r}]")
        for k, v in ts.labels.items():
            type_label[t, lvocab[k]] = values.add(str(v)) if v is not None else -1
        type_hash[t] = ts.launch_hash or ""
    configured = np.zeros(T, dtype=bool)
    configured[: len(types)] = True

    # ---- nodes ----------------------------------------------------------------------
    node_type = scr.type.astype(IDX)
    node_status = scr.status.astype(np.int8)
    node_kind = scr.kind.astype(np.int8)
    node_total = np.zeros((N, R), dtype=QTY)
    node_order = np.full((N, R), -1, dtype=IDX)
    node_free = np.zeros((N, R), dtype=QTY)
    node_present = np.zeros((N, R), dtype=bool)
    node_label = np.full((N, L), -1, dtype=IDX)
    node_idle = np.zeros(N, dtype=CNT)
    node_has_ray = np.zeros(N, dtype=bool)
    node_hash: list[str] = [""] * N
    node_private: list[tuple] = [()] * N
    implicit = vocab.implicit_mask()
    is_out = scr.outdated
    # A pending node is modelled from its type config (§2.1 item 4); an outdated
    # one is an empty, already-terminated node (RAY_V2_SEMANTICS §2.1 item 4).
    pend = np.flatnonzero(~is_run & ~is_out)
    if pend.size:
        t = node_type[pend]
        node_total[pend] = type_cap[t]
        node_order[pend] = type_order[t]
        node_free[pend] = type_cap[t]
        node_present[pend] = order_mask(type_order[t], R)
        node_label[pend] = type_label[t]
    clamped = encode_running(
        cols, map_rows, run_rows, scr.kept[run_rows], maps, cols_of, vocab, lvocab, values,
        PRIVATE_PREFIX,
        dict(node_total=node_total, node_order=node_order, node_free=node_free,
             node_present=node_present, node_label=node_label, node_idle=node_idle,
             node_has_ray=node_has_ray, node_hash=node_hash, node_private=node_private),
        _qty)
    node_free[:, implicit] = np.where(node_present[:, implicit], node_free[:, implicit], 1.0)

    # ---- demand: plain runs, the constraint's requests, then gang bundles ----------
    S, C = len(requests), len(constraint or ())
    wheres = _Wheres(S, C, [len(gs.requests) for gs in gangs], first_bundle)
    table = encode(all_specs, wheres, vocab, lvocab, values, _qty,
                   [rs.sum if rs.sum is not None else None for rs in all_specs])
    shape_count = np.zeros(S, dtype=CNT)
    for q, rs in enumerate(requests):
        shape_count[q] = _count(rs.count, f"{wheres[q]}.count")
    con_count = np.zeros(C, dtype=CNT)
    for q, rs in enumerate(constraint or ()):
        con_count[q] = _count(rs.count, f"{wheres[S + q]}.count")
    for q, rs in enumerate(gang_specs):
        if rs.count != 1:
            raise ProblemError(f"{wheres[S + C + q]}.count", f"a gang bundle is one unit, got {rs.count}")
    gang_ptr = np.zeros(len(gangs) + 1, dtype=IDX)
    gang_ptr[1:] = np.cumsum([len(gs.requests) for gs in gangs], dtype=np.int64)
    gang_req = (S + C + np.asarray(bundle_row, np.int64)).astype(IDX)
    gang_key = np.zeros((len(gangs), 2), dtype=CNT)
    for g, gs in enumerate(gangs):
        key = gs.sort_key
        if key is None:
            key = (int(table.n_pc[gang_req[gang_ptr[g]: gang_ptr[g + 1]]].sum()),
                   len(gs.requests))
        gang_key[g] = key

    ippr_nodes = _ippr.encode(node_ippr)
    type_ippr = np.full((T, 2), np.nan)
    for t, ts in enumerate(types):
        if ts.ippr_max is not None:
            type_ippr[t] = [_qty(x, f"ippr_specs.groups[{ts.name!r}].max") for x in ts.ippr_max]
    for key in ("cur", "desired", "max"):
        for n in np.flatnonzero(ippr_nodes["attached"]):
            for j, what in enumerate(("cpu", "memory")):
                _qty(ippr_nodes[key][n, j], f"instances[{kept[n]}].ippr.{key}_{what}")
    ippr_vals = np.zeros((0, R))
    if any_ippr:
        vals = np.concatenate([ippr_nodes[k].reshape(-1, 2) for k in ("cur", "desired", "max")]
                              + [np.nan_to_num(type_ippr)])
        ippr_vals = np.zeros((vals.shape[0], R))
        ippr_vals[:, vocab["CPU"]] = vals[:, 0]
        ippr_vals[:, vocab["memory"]] = vals[:, 1]

    if max_num_nodes is None:
        mnn = -1
    else:
        mnn = _count(max_num_nodes, "max_num_nodes")

    return Problem(
        resources=names,
        implicit=implicit,
        exact=_exact_columns(R, type_cap, node_total, node_free, table.qty, ippr_vals),
        label_keys=lvocab.names,
        label_values=values.names,
        gpu_col=vocab.get(GPU),
        type_names=type_names,
        type_configured=configured,
        type_cap=type_cap,
        type_free=_new_node_free(type_cap, type_order, implicit),
        type_order=type_order,
        type_min=type_min,
        type_max=type_max,
        type_priority=type_priority,
        type_idle_timeout_s=type_idle,
        type_recoverable=type_rec,
        type_availability=type_av,
        type_label=type_label,
        type_launch_hash=tuple(type_hash),
        type_ippr_max=type_ippr,
        node_source=np.asarray(kept, dtype=IDX),
        node_type=node_type,
        node_status=node_status,
        node_kind=node_kind,
        node_total=node_total,
        node_order=node_order,
        node_free=node_free,
        node_free_present=node_present,
        node_label=node_label,
        node_idle_ms=node_idle,
        node_has_ray=node_has_ray,
        node_outdated=is_out.copy(),
        node_launch_hash=tuple(node_hash),
        node_ippr=ippr_nodes,
        node_private=tuple(node_private),
        shape_qty=table.qty[:S],
        shape_present=table.present[:S],
        shape_count=shape_count,
        shape_sum=table.sum[:S],
        req=table,
        con_req=np.arange(S, S + C, dtype=IDX),
        con_count=con_count,
        has_constraint=constraint is not None,
        gang_ptr=gang_ptr,
        gang_req=gang_req,
        gang_key=gang_key,
        gang_names=tuple(g.name for g in gangs),
        pending_idle_timeout_s=_timeout(pending_idle_timeout_s, "pending_idle_timeout_s"),
        max_num_nodes=mnn,
        idle_timeout_s=_timeout(idle_timeout_s, "idle_timeout_s"),
        disable_launch_config_check=bool(disable_launch_config_check),
        conserve_gpu=bool(conserve_gpu),
        clamped=clamped,
        skipped=tuple(scr.skipped),
    )


class _Wheres:
    """The field name of each request row, made only when an error needs one."""

    def __init__(self, S: int, C: int, gang_sizes: list, first_bundle: list):
        self.S, self.C = S, C
        self.ptr = np.concatenate([[0], np.cumsum(gang_sizes, dtype=np.int64)])
        self.first = first_bundle       # gang row -> the first bundle that uses it

    def __getitem__(self, q: int) -> str:
        q = int(q)
        if q < self.S:
            return f"resource_requests[{q}]"
        if q < self.S + self.C:
            return f"cluster_resource_constraints[0].resource_requests[{q - self.S}]"
        k = self.first[q - self.S - self.C]
        g = int(np.searchsorted(self.ptr, k, side="right")) - 1
        return f"gang_resource_requests[{g}].requests[{k - int(self.ptr[g])}]"
