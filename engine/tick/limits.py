"""Limits: opt-in caps on the totals a cluster may ask the cloud for.

A limit caps the total of one resource (``CPU``, ``GPU``, ``memory``, any custom
name) or the cost per hour (``cost_per_hour``, from the worker groups' prices)
over the instances that count against it: every node of the tick's Problem, from
QUEUED to RAY_RUNNING (the instance store's schedulable statuses, as Karpenter
counts launched and launching NodeClaims against a NodePool's ``limits``), plus
the nodes the tick launches. Nodes the builder already marked outdated do not
count; nodes the tick itself terminates still do (they hold their capacity until
the cloud takes them back).

``Limits.total`` is cluster-wide, ``Limits.per_group`` per worker group. A limit
never terminates anything: a cluster already above one simply launches nothing
that would add to it. With no limit set nothing here runs (the policies see the
Problem they were given, so ray-compat stays Ray's).

docs/capacity.md describes the rule; ``vecsched.engine.tick.seam`` enforces it for
every policy.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from typing import Mapping, Optional

import numpy as np

from vecsched.engine.model.errors import ProblemError
from vecsched.engine.model.problem import Problem

COST = "cost_per_hour"          # the limit name of the cost per hour
_BIG = 1 << 40                  # "no bound" for a type's room


def _amount(value, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ProblemError(where, f"must be a number >= 0, got {value!r}")
    v = float(value)
    if not math.isfinite(v) or v < 0:
        raise ProblemError(where, f"must be a finite number >= 0, got {value!r}")
    return v


def _table(value, where: str) -> dict:
    """``value`` as a dict of name -> number, each checked (ProblemError naming it)."""
    if not isinstance(value, Mapping):
        raise ProblemError(where, f"must be a mapping of name -> number, got {value!r}")
    out = {}
    for k, v in value.items():
        if not isinstance(k, str) or not k:
            raise ProblemError(where, f"names must be non-empty strings, got {k!r}")
        out[k] = _amount(v, f"{where}[{k!r}]")
    return out


@dataclass(frozen=True)
class Limits:
    """Caps on totals (see the module docstring). ``prices``: worker group -> price
    per node-hour, needed by a ``cost_per_hour`` limit for every group it may
    launch."""
    total: Mapping[str, float] = field(default_factory=dict)
    per_group: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    prices: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self):
        object.__setattr__(self, "total", _table(self.total, "limits.total"))
        if not isinstance(self.per_group, Mapping):
            raise ProblemError("limits.per_group", "must be a mapping of worker group -> "
                               f"{{resource: number}}, got {self.per_group!r}")
        per_group = {}
        for g, m in self.per_group.items():
            if not isinstance(g, str) or not g:
                raise ProblemError("limits.per_group", f"worker group names must be "
                                   f"non-empty strings, got {g!r}")
            per_group[g] = _table(m, f"limits.per_group[{g!r}]")
        object.__setattr__(self, "per_group", per_group)
        object.__setattr__(self, "prices", _table(self.prices, "limits.prices"))

    @property
    def empty(self) -> bool:
        return not self.total and not any(self.per_group.values())

    def names(self) -> list[tuple[Optional[str], str]]:
        """Every limit as (group or None for cluster-wide, resource), in a fixed order."""
        out: list[tuple[Optional[str], str]] = [(None, r) for r in sorted(self.total)]
        for g in sorted(self.per_group):
            out += [(g, r) for r in sorted(self.per_group[g])]
        return out


@dataclass(frozen=True)
class LimitTable:
    """The limits of one tick as arrays over the Problem's types.

    ``cap`` (L,) the limit values; ``use`` (L,) what the instances counted already
    take; ``node_need`` (N, L) and ``type_need`` (T, L) what one existing node and
    one new node of each type add to each limit (0 where a limit does not apply:
    another group's, or a resource the type lacks)."""
    names: list
    cap: np.ndarray
    use: np.ndarray
    node_need: np.ndarray
    type_need: np.ndarray

    @property
    def headroom(self) -> np.ndarray:
        return self.cap - self.use


def table(p: Problem, limits: Limits) -> LimitTable:
    """The LimitTable of ``limits`` on ``p``; a ``cost_per_hour`` limit needs a price
    for every configured group it applies to that may launch (``max_worker_nodes`` >
    0; else ProblemError naming it); other nodes count 0."""
    _check_names(p, limits)
    names = limits.names()
    L = len(names)
    counted = ~p.node_outdated
    node_need = np.zeros((p.N, L))
    type_need = np.zeros((p.T, L))
    cap = np.zeros(L)
    for k, (group, res) in enumerate(names):
        cap[k] = limits.total[res] if group is None else limits.per_group[group][res]
        applies = np.ones(p.T, bool) if group is None else \
            np.asarray([n == group for n in p.type_names])
        type_need[:, k] = np.where(applies, _per_type(p, res, limits, group), 0.0)
        node_need[:, k] = np.where(applies[p.node_type] & counted, _per_node(p, res, limits), 0.0)
    use = node_need.sum(axis=0)
    return LimitTable(names, cap, use, node_need, type_need)


def _check_names(p: Problem, limits: Limits) -> None:
    """ProblemError naming the limit when a per-group limit names no worker group of
    ``p``, or a resource name differs only in case from one of ``p``'s (``gpu`` for
    ``GPU``: Ray's names are case-sensitive, so such a limit would cap nothing). A
    name no type, node or request of the tick has at all is kept: it caps nothing
    now and is valid once a group offering it is configured."""
    groups = set(p.type_names)
    for g in limits.per_group:
        if g not in groups:
            raise ProblemError(f"limits.per_group[{g!r}]", f"no worker group named {g!r} "
                               f"(groups: {', '.join(sorted(groups))})")
    known = {r.lower(): r for r in list(p.resources) + [COST]}
    for group, res in limits.names():
        hit = known.get(res.lower())
        if hit is not None and hit != res:
            where = "limits.total" if group is None else f"limits.per_group[{group!r}]"
            raise ProblemError(f"{where}[{res!r}]", f"no resource named {res!r}; did you "
                               f"mean {hit!r}? (names are case-sensitive)")


def _per_type(p: Problem, res: str, limits: Limits, group) -> np.ndarray:
    if res != COST:
        c = p.col(res)
        return p.type_cap[:, c].astype(float) if c >= 0 else np.zeros(p.T)
    out = np.zeros(p.T)
    for t, name in enumerate(p.type_names):
        price = limits.prices.get(name)
        if price is None:        # a group that may launch needs one (a head group: max 0)
            if p.type_configured[t] and p.type_max[t] > 0 and (group is None or group == name):
                where = "limits.total" if group is None else f"limits.per_group[{group!r}]"
                raise ProblemError(f"{where}[{COST!r}]",
                                   f"needs a price for worker group {name!r} (limits.prices)")
            price = 0.0
        out[t] = price
    return out


def _per_node(p: Problem, res: str, limits: Limits) -> np.ndarray:
    if res != COST:
        c = p.col(res)
        return p.node_total[:, c].astype(float) if c >= 0 else np.zeros(p.N)
    return np.asarray([limits.prices.get(p.type_names[t], 0.0) for t in p.node_type.tolist()],
                      float)


def type_room(lt: LimitTable, extra_use: Optional[np.ndarray] = None) -> np.ndarray:
    """(T,) i8 how many new nodes of each type, launched alone, keep every limit
    (given ``extra_use`` (L,) already spoken for)."""
    head = lt.headroom - (0.0 if extra_use is None else extra_use)
    need = lt.type_need
    with np.errstate(divide="ignore", invalid="ignore"):
        k = np.where(need > 0, np.floor(np.maximum(head, 0.0)[None, :] / need * (1 + 1e-12)),
                     _BIG)
    room = k.min(axis=1) if need.shape[1] else np.full(need.shape[0], _BIG)
    return np.clip(room, 0, _BIG).astype(np.int64)


def keep_within(lt: LimitTable, new_type: np.ndarray) -> np.ndarray:
    """(J,) bool: the new nodes (their types in launch order) kept when each is
    taken in order if it still fits every limit, else dropped."""
    head = lt.headroom.copy()
    keep = np.zeros(len(new_type), bool)
    for j, t in enumerate(np.asarray(new_type).tolist()):
        need = lt.type_need[t]
        if np.all(need <= head + 1e-9 * np.maximum(np.abs(lt.cap), 1.0)):
            keep[j] = True
            head -= need
    return keep


def asked(lt: LimitTable, new_type: np.ndarray) -> np.ndarray:
    """(L,) the totals after the tick: what is counted plus the launches."""
    launch = np.bincount(np.asarray(new_type, np.int64), minlength=lt.type_need.shape[0])
    return lt.use + launch @ lt.type_need


def label(name: tuple) -> str:
    """A limit's display name: ``GPU`` or ``gpu-group/GPU``."""
    group, res = name
    return res if group is None else f"{group}/{res}"
