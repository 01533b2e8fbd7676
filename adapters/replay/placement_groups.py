"""Placement groups in a replay: the trace's own gangs and a seeded gang overlay.

The bundled openb trace has no gangs (its ``group_id`` column is null), so a replay that
should exercise placement groups adds them with a **gang overlay** (``vecsched replay
--gangs SHARE``, ``GangOverlay``):

- **Who.** About ``share`` of the window's units become members of placement groups.
  Units are walked in arrival order; at each unit not yet grouped, a group starts with
  probability ``q = share / (E[k] (1 - share) + share)`` (``E[k]`` the mean group
  size), so the expected share of grouped units is ``share``. A group takes the next
  ``k`` eligible units, ``k`` uniform in ``[min_size, max_size]`` (2-8 by default),
  consecutive in arrival order (a job submits its workers together). Eligible: not in a
  trace gang and fitting some worker group on its own. A group cut short by the end of
  the window keeps its members if it has at least two.
- **Bundles.** Each member keeps its own resource bundle (the trace's pod), so the
  overlay changes when demand comes and goes, not how much is asked.
- **Strategy.** Uniform over PACK, SPREAD, STRICT_PACK and STRICT_SPREAD. A STRICT_PACK
  group whose summed bundle fits no worker group is made PACK instead (counted in
  ``demoted``): it could never be placed, and an infeasible group says nothing about a
  scheduler's packing.
- **Together.** Every member arrives with the group's first member, and every member
  lasts as long as the group's longest one: a group holds all its bundles until its last
  member is done, and leaves at once.
- **Seeded.** One numpy Generator seeded with ``(seed, 0x9A46)``; the same window, share
  and seed give the same groups. ``describe()`` states what was drawn.

Groups the trace itself names (a non-null ``group_id``) are replayed as PACK groups (the
schema records no strategy), or STRICT_SPREAD when their rows carry ``max_per_node`` 1
(schema version 2), arriving with their first member and leaving with their last, like
overlay groups.

How the cluster places a group and how the scheduler sees one are in ``cluster.py``
(atomic placement, per strategy) and ``simulation.py`` (the GCS encoding).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import numpy as np

STRATEGIES = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
_STREAM = 0x9A46                    # the overlay's own random stream next to the seed


@dataclass(frozen=True)
class GangOverlay:
    """The share of units grouped into placement groups, the group sizes and the seed
    (see the module docstring)."""
    share: float = 0.0
    seed: int = 0
    min_size: int = 2
    max_size: int = 8

    def __post_init__(self):
        s = self.share
        if not isinstance(s, (int, float, np.integer, np.floating)) or isinstance(s, bool) \
                or not math.isfinite(s) or not 0 <= s <= 1:
            raise ValueError(f"gangs.share must be a number within [0, 1], got {s!r}")
        for name in ("min_size", "max_size", "seed"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise ValueError(f"gangs.{name} must be an integer >= 0, got {v!r}")
        if not 2 <= self.min_size <= self.max_size:
            raise ValueError(f"gangs.min_size must be within [2, max_size], got "
                             f"{self.min_size} (max_size {self.max_size})")


@dataclass(frozen=True)
class Gangs:
    """The placement groups of a loaded trace: members as CSR over units."""
    ptr: np.ndarray                  # (G+1,) i8 group -> its members in ``units``
    units: np.ndarray                # (B,) i8 member units, bundle order
    strategy: tuple                  # (G,) one of STRATEGIES
    pg_id: tuple                     # (G,) hex id (the GCS's ``_PG_<hex>`` label)
    unit_gang: np.ndarray            # (U,) i4 group of each unit, -1 independent
    source: tuple = ()               # (G,) "trace" or "overlay"
    demoted: int = 0                 # STRICT_PACK groups made PACK (fit no type)

    @property
    def G(self) -> int:
        return len(self.strategy)

    def members(self, g: int) -> np.ndarray:
        return self.units[self.ptr[g]:self.ptr[g + 1]]

    @classmethod
    def none(cls, n_units: int) -> "Gangs":
        return cls(np.zeros(1, np.int64), np.zeros(0, np.int64), (), (),
                   np.full(n_units, -1, np.int32))

    def describe(self) -> str:
        if not self.G:
            return "no placement groups"
        sizes = np.diff(self.ptr)
        by = {s: self.strategy.count(s) for s in STRATEGIES if s in self.strategy}
        parts = [f"{self.G} placement groups of {int(sizes.min())}-{int(sizes.max())} "
                 f"bundles ({int(sizes.sum())} units, {int(sizes.sum()) / max(1, self.unit_gang.size):.0%})",
                 ", ".join(f"{n} {s}" for s, n in by.items())]
        n_trace = sum(1 for s in self.source if s == "trace")
        if n_trace:
            parts.append(f"{n_trace} from the trace's group_id")
        if self.demoted:
            parts.append(f"{self.demoted} STRICT_PACK made PACK (no worker group holds them)")
        return "; ".join(parts)


def pg_hex(g: int) -> str:
    """A 36-hex-digit placement group id (Ray's 18-byte PlacementGroupID), stable per group."""
    return f"{g + 1:08x}" + "7c" * 14


def build(unit_count: int, trace_groups: Sequence[Optional[str]], overlay: GangOverlay,
          eligible: np.ndarray, fits_merged: Callable[[np.ndarray], bool],
          spread_groups=frozenset()) -> Gangs:
    """The groups of a window of ``unit_count`` units in arrival order: first the
    trace's (``trace_groups[u]``: the row's group_id or None; STRICT_SPREAD for the
    ids in ``spread_groups``, PACK otherwise), then the overlay's over the ``eligible``
    units; ``fits_merged(units)`` says whether a STRICT_PACK group of those units fits
    some worker group."""
    members: list[list[int]] = []
    strategy: list[str] = []
    source: list[str] = []
    taken = np.zeros(unit_count, bool)
    first_of: dict[str, int] = {}
    for u, gid in enumerate(trace_groups):
        if gid is None:
            continue
        g = first_of.get(gid)
        if g is None:
            g = first_of[gid] = len(members)
            members.append([])
            strategy.append("STRICT_SPREAD" if gid in spread_groups else "PACK")
            source.append("trace")
        members[g].append(u)
        taken[u] = True
    demoted = 0
    if overlay.share > 0:
        rng = np.random.default_rng([int(overlay.seed), _STREAM])
        mean_k = (overlay.min_size + overlay.max_size) / 2.0
        s = float(overlay.share)
        q = 1.0 if s >= 1 else s / (mean_k * (1.0 - s) + s)
        pool = np.flatnonzero(eligible & ~taken)
        i = 0
        while i < pool.size:
            if rng.random() >= q:
                i += 1
                continue
            k = int(rng.integers(overlay.min_size, overlay.max_size + 1))
            strat = STRATEGIES[int(rng.integers(len(STRATEGIES)))]
            group = pool[i:i + k]
            i += k
            if group.size < 2:
                break
            if strat == "STRICT_PACK" and not fits_merged(group):
                strat = "PACK"
                demoted += 1
            members.append([int(u) for u in group])
            strategy.append(strat)
            source.append("overlay")
    unit_gang = np.full(unit_count, -1, np.int32)
    for g, m in enumerate(members):
        unit_gang[m] = g
    sizes = [len(m) for m in members]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    units = np.asarray([u for m in members for u in m], np.int64)
    return Gangs(ptr, units, tuple(strategy), tuple(pg_hex(g) for g in range(len(members))),
                 unit_gang, tuple(source), demoted)


def together(gangs: Gangs, arrival: np.ndarray, duration: np.ndarray
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Members arrive with their group's first member and last as long as its longest:
    (arrival, duration, order) where ``order`` re-sorts units by the new arrival
    (stable), since a trace group's members may have arrived apart."""
    arrival = arrival.copy()
    duration = duration.copy()
    for g in range(gangs.G):
        m = gangs.members(g)
        arrival[m] = arrival[m].min()
        duration[m] = duration[m].max()
    return arrival, duration, np.argsort(arrival, kind="stable")


def permute(gangs: Gangs, order: np.ndarray) -> Gangs:
    """The same groups after units were re-ordered by ``order`` (new unit j = old
    ``order[j]``)."""
    if not gangs.G:
        return Gangs.none(order.size)
    new_of_old = np.empty_like(order)
    new_of_old[order] = np.arange(order.size)
    return Gangs(gangs.ptr, new_of_old[gangs.units], gangs.strategy, gangs.pg_id,
                 gangs.unit_gang[order], gangs.source, gangs.demoted)
