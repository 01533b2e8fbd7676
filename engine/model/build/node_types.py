"""The node types of a tick as arrays: the configured ones (validated here),
then the types only seen on instances or given as a config's ``launch_as``
(no config: no caps, no template).

A type is a node label, as Ray's ``SchedulingNode.node_type``: what nodes are
counted, capped, idle-timed, tie-broken and launched by. A configured type is
also a template (its key's config). A node made from a config - a pending
instance, a min-worker or new node - carries the config's own name, which Ray
lets differ from its key (``NodeTypeConfig.name``): ``TypeArrays.launch_as``."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import check
from .columns import TickColumns
from vecsched.engine.model.dtypes import CNT, IDX, QTY
from vecsched.engine.model.errors import ProblemError


def type_index(types: Sequence) -> dict:
    """Configured type name -> index; the names are checked (non-empty, unique)."""
    if not types:
        raise ProblemError("node_type_configs", "is empty: at least one node type is needed")
    index: dict[str, int] = {}
    for i, ts in enumerate(types):
        if not isinstance(ts.name, str) or not ts.name:
            raise ProblemError(f"node_type_configs[{i}].name", "must be a non-empty string")
        if ts.name in index:
            raise ProblemError(f"node_type_configs[{ts.name!r}]", "is given twice")
        if ts.launch_as is not None and (not isinstance(ts.launch_as, str) or not ts.launch_as):
            raise ProblemError(f"node_type_configs[{ts.name!r}].name",
                               f"must be a non-empty string, got {ts.launch_as!r}")
        index[ts.name] = i
    return index


def launch_names(types: Sequence, index: dict, extra: list) -> list:
    """The type names configs launch as that are neither configured nor in
    ``extra`` (types seen on instances), in config order."""
    seen = set(extra)
    out = []
    for ts in types:
        n = ts.launch_as
        if n is not None and n not in index and n not in seen:
            seen.add(n)
            out.append(n)
    return out


@dataclass
class TypeArrays:
    names: tuple            # (T,) configured types first, then types seen only on instances
    configured: np.ndarray  # (T,) bool
    cap: np.ndarray         # (T, R) config resources
    order: np.ndarray       # (T, R) config resource columns in dict order, -1 padded
    free: np.ndarray        # (T, R) a new node's free resources (1.0: absent implicit)
    min: np.ndarray
    max: np.ndarray
    priority: np.ndarray
    idle: np.ndarray        # NaN: not set
    recoverable: np.ndarray
    availability: np.ndarray
    label: np.ndarray       # (T, L) label value id, -1 absent
    launch_hash: tuple
    launch_as: np.ndarray   # (T,) the type a node made from this config carries

    @property
    def T(self) -> int:
        return len(self.names)


def type_arrays(types: Sequence, extra: Sequence[str], c: TickColumns,
                 cloud: dict, recoverable: dict) -> TypeArrays:
    """Arrays of the configured ``types`` and the ``extra`` type names; label
    values are added to ``c.values``. ``cloud`` / ``recoverable``: availability
    scores of the extra types by name (1.0 when absent)."""
    vocab, R, L = c.vocab, len(c.vocab), len(c.lvocab)
    T = len(types) + len(extra)
    a = TypeArrays(
        names=tuple(ts.name for ts in types) + tuple(extra),
        configured=np.arange(T) < len(types),
        cap=np.zeros((T, R), dtype=QTY), order=np.full((T, R), -1, dtype=IDX), free=None,
        min=np.zeros(T, dtype=CNT), max=np.zeros(T, dtype=CNT),
        priority=np.zeros(T, dtype=CNT), idle=np.full(T, np.nan, dtype=QTY),
        recoverable=np.ones(T, dtype=QTY), availability=np.ones(T, dtype=QTY),
        label=np.full((T, L), -1, dtype=IDX), launch_hash=None,
        launch_as=np.arange(T, dtype=IDX))
    hashes = [""] * T
    for t, ts in enumerate(types):
        where = f"node_type_configs[{ts.name!r}]"
        for k, v in ts.resources.items():
            a.cap[t, vocab[k]] = check.qty(v, f"{where}.resources[{k!r}]")
        a.order[t, : len(ts.resources)] = [vocab[k] for k in ts.resources]
        a.min[t] = check.count(ts.min_workers, f"{where}.min_worker_nodes")
        a.max[t] = check.count(ts.max_workers, f"{where}.max_worker_nodes")
        if a.min[t] > a.max[t]:
            raise ProblemError(f"{where}.min_worker_nodes",
                               f"{a.min[t]} exceeds max_worker_nodes {a.max[t]}")
        a.priority[t] = check.integer(ts.priority, f"{where}.priority")
        a.idle[t] = check.timeout(ts.idle_timeout_s, f"{where}.idle_timeout_s")
        a.availability[t] = check.fraction(ts.availability,
                                           f"cloud_resource_availabilities[{ts.name!r}]")
        a.recoverable[t] = check.fraction(ts.recoverable,
                                          f"recoverable_resource_availabilities[{ts.name!r}]")
        for k, v in ts.labels.items():
            a.label[t, c.lvocab[k]] = c.values.add(str(v)) if v is not None else -1
        hashes[t] = ts.launch_hash or ""
    a.launch_hash = tuple(hashes)
    at = {n: t for t, n in enumerate(a.names)}
    for t, ts in enumerate(types):
        if ts.launch_as is not None:
            a.launch_as[t] = at[ts.launch_as]
    for t, n in enumerate(extra, start=len(types)):
        a.availability[t] = check.fraction(cloud.get(n, 1.0),
                                           f"cloud_resource_availabilities[{n!r}]")
        a.recoverable[t] = check.fraction(recoverable.get(n, 1.0),
                                          f"recoverable_resource_availabilities[{n!r}]")
    a.free = new_node_free(a.cap, a.order, c.implicit)
    return a


def new_node_free(cap: np.ndarray, order: np.ndarray, implicit: np.ndarray) -> np.ndarray:
    """Free resources of a new node of each type: its config, and 1.0 for an
    implicit column the config does not list (Ray's missing-means-1.0)."""
    free = cap.copy()
    present = np.zeros(cap.shape, dtype=bool)
    t, j = np.nonzero(order >= 0)
    present[t, order[t, j]] = True
    free[:, implicit] = np.where(present[:, implicit], free[:, implicit], 1.0)
    return free
