"""Which instances become scheduling nodes (docs/ray-semantics.md §2.1), over columns.

An instance without an instance-manager record, in a status from which
RAY_RUNNING cannot be reached, RAY_RUNNING without a Ray node (stale state) or
pending with an unknown type while the launch-config check is off (or a head)
is skipped with a reason. A pending instance of an unknown type with the check
on is kept as outdated. A bad status, kind or type raises a ProblemError naming
the first offending instance.
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat

import numpy as np

from vecsched.engine.model.dtypes import Kind, Status
from vecsched.engine.model.node_columns import NodeColumns
from vecsched.engine.model.errors import ProblemError

_NONE, _BAD = -1, -2
_STATUS = {None: _NONE, **{s: s for s in Status.NAMES if s >= 0}}
_KIND = {k: k for k in (Kind.UNMANAGED, Kind.HEAD, Kind.WORKER)}


@dataclass
class Screen:
    kept: np.ndarray          # instance index of each node, ascending
    outdated: np.ndarray      # (N,) bool: pending, of a type that is not configured
    status: np.ndarray        # (N,) status code
    kind: np.ndarray          # (N,) kind code
    type: np.ndarray          # (N,) type index (extra types after the configured ones)
    extra_types: list         # types not configured, first-seen among kept instances
    map_row: np.ndarray       # (N,) the node's row in the columns' maps, -1 if none
    skipped: list             # (instance index, reason), ascending


def _codes(values: list, table: dict) -> np.ndarray:
    """``table[v]`` per value, _BAD for a value not in it (or unhashable)."""
    try:
        return np.fromiter(map(table.get, values, repeat(_BAD)), np.int64, len(values))
    except TypeError:
        return np.fromiter((table.get(v, _BAD) if v.__hash__ else _BAD for v in values),
                           np.int64, len(values))


def screen(cols: NodeColumns, type_index: dict, disable_launch_config_check: bool) -> Screen:
    n = len(cols)
    status = _codes(cols.status, _STATUS)
    kind = _codes(cols.kind, _KIND)
    tcode = _codes(cols.type, type_index)
    sched = np.isin(status, Status.SCHEDULABLE)
    bad_type = np.zeros(n, bool)      # configured type names are non-empty strings
    for i in np.flatnonzero(tcode < 0).tolist():
        bad_type[i] = not (isinstance(cols.type[i], str) and cols.type[i])
    bad = (status == _BAD) | (sched & ((kind == _BAD) | bad_type))
    if bad.any():
        i = int(np.argmax(bad))
        if status[i] == _BAD:
            raise ProblemError(f"instances[{i}].status",
                               f"unknown instance status {cols.status[i]!r}")
        if kind[i] == _BAD:
            raise ProblemError(f"instances[{i}].kind", f"unknown node kind {cols.kind[i]!r}")
        raise ProblemError(f"instances[{i}].type", "must be a non-empty string")
    map_row = np.full(n, -1, np.int64)
    map_row[cols.mapped] = np.arange(cols.mapped.size)
    running = sched & (status == Status.RAY_RUNNING)
    stale = running & (map_row < 0)
    unknown = sched & ~running & (tcode < 0)
    dropped = unknown & (disable_launch_config_check | (kind == Kind.HEAD))
    keep = sched & ~stale & ~dropped
    kept = np.flatnonzero(keep)
    extra = (tcode[kept] < 0).nonzero()[0]
    extra_types = list(dict.fromkeys(cols.type[i] for i in kept[extra].tolist()))
    node_type = tcode[kept]
    if extra.size:
        at = {t: len(type_index) + j for j, t in enumerate(extra_types)}
        node_type[extra] = [at[cols.type[i]] for i in kept[extra].tolist()]
    return Screen(kept, unknown[kept], status[kept], kind[kept], node_type, extra_types,
                  map_row[kept], _skipped(cols, status, sched, stale, kind, keep,
                                          disable_launch_config_check))


def _skipped(cols, status, sched, stale, kind, keep, disabled: bool) -> list:
    out = []
    for i in np.flatnonzero(~keep).tolist():
        if status[i] == _NONE:
            why = "no instance-manager record"
        elif not sched[i]:
            why = f"status {Status.NAMES[int(status[i])]} cannot reach RAY_RUNNING"
        elif stale[i]:
            why = "RAY_RUNNING without a ray node (stale state)"
        elif not disabled:
            # Ray would terminate it as OUTDATED; a head is never terminated
            # (divergence D1 in docs/ray-compat.md), so it is left out.
            why = f"pending head of unknown type {cols.type[i]!r}"
        else:
            why = f"pending node of unknown type {cols.type[i]!r}"
        out.append((i, why))
    return out
