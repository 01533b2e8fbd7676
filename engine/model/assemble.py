"""Plan assembly shared by the three policies (ray-compat, efficient, baseline).

Each policy keeps its own state while it decides a tick; at the end it states
what it decided as `Decisions` (new nodes, terminations, placements, what was
left unplaced and why, the cluster's totals after the tick) and `assemble_plan`
turns that into the `Plan` every adapter reads. The parts all policies derived
the same way live here once: launches per type and their first-appearance
order, each terminated node's status, the array types of every field, and a
new node's config defaulting to its type.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dtypes import CNT, CODE, IDX, QTY
from .plan import Plan
from .problem import Problem


@dataclass(frozen=True)
class Terminations:
    """Terminated Problem nodes in reply order, with the cause and the value it names."""
    node: np.ndarray            # (K,) i4
    cause: np.ndarray           # (K,) i1 dtypes.Cause
    value: np.ndarray           # (K,) i8 the cap, the idle ms, or 0

    @classmethod
    def of_list(cls, terms: list[tuple[int, int, int]]) -> "Terminations":
        """From (node, cause, value) tuples in reply order."""
        return cls(node=np.asarray([n for n, _, _ in terms], IDX),
                   cause=np.asarray([c for _, c, _ in terms], CODE),
                   value=np.asarray([v for _, _, v in terms], CNT))


@dataclass(frozen=True)
class Placements:
    """Units placed this tick: ``count`` units of run ``run`` on node slot ``slot``
    (< N an existing node, N + j the j-th new node, -1 a node cut before launch)."""
    slot: np.ndarray            # (P,) i4
    run: np.ndarray             # (P,) i4
    count: np.ndarray           # (P,) i8

    @classmethod
    def of_triples(cls, triples: list[tuple[int, int, int]], n_runs: int) -> "Placements":
        """From (slot, run, units) triples, merged to one row per (slot, run) in
        slot order, then run order."""
        slots = np.asarray([m for m, _, _ in triples], np.int64)
        runs = np.asarray([i for _, i, _ in triples], np.int64)
        units = np.asarray([k for _, _, k in triples], np.int64)
        if len(slots):
            width = max(n_runs, 1)
            keys, inverse = np.unique(slots * width + runs, return_inverse=True)
            units = np.bincount(inverse, weights=units)
            slots, runs = keys // width, keys % width
        return cls(slots.astype(IDX), runs.astype(IDX), units.astype(CNT))

    @classmethod
    def of_chunks(cls, slots: list, runs: list, counts: list) -> "Placements":
        """From lists of equally long arrays, concatenated in the order given."""
        if not slots:
            return cls(np.zeros(0, IDX), np.zeros(0, IDX), np.zeros(0, CNT))
        return cls(np.concatenate(slots).astype(IDX), np.concatenate(runs).astype(IDX),
                   np.concatenate(counts).astype(CNT))


@dataclass(frozen=True)
class Decisions:
    """What one policy decided in a tick, before it becomes a `Plan`.

    ``new_type``: the type of new node slot N + j, in launch order;
    ``new_template``: the config each was made from (None: its type);
    ``cluster_resources``: the totals of the nodes kept plus the new ones.
    """
    new_type: np.ndarray
    terms: Terminations
    placements: Placements
    infeasible: np.ndarray      # (S,) units of each run left unplaced
    infeasible_why: np.ndarray  # (S,) dtypes.Why
    run_order: np.ndarray       # (S,) runs in the order they were packed
    cluster_resources: np.ndarray
    new_template: np.ndarray | None = None


def launch_counts(new_type: np.ndarray, n_types: int) -> np.ndarray:
    """(T,) i8 new nodes per type."""
    return np.bincount(np.asarray(new_type, np.int64), minlength=n_types).astype(CNT)


def launch_order(new_type: np.ndarray) -> tuple[int, ...]:
    """Types with launches, in the order of their first new node."""
    new_type = np.asarray(new_type)
    _, first = np.unique(new_type, return_index=True)
    return tuple(int(t) for t in new_type[np.sort(first)])


def kept_totals(p: Problem, kept: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """(R,) f8 totals of the existing nodes ``kept`` ((N,) bool) plus ``launch``
    ((T,) new nodes per type) at their configs' capacities."""
    total = p.node_total[kept].sum(axis=0) + np.asarray(launch, QTY) @ p.type_cap
    return np.ascontiguousarray(total, dtype=QTY)


def assemble_plan(p: Problem, d: Decisions, **extra) -> Plan:
    """The Plan of ``d`` for ``p``. ``extra``: the Plan fields a policy fills
    beyond the common ones (gangs, constraint, IPPR, pending timestamps, stats)."""
    new_type = np.asarray(d.new_type, IDX)
    template = new_type if d.new_template is None else np.asarray(d.new_template, IDX)
    term_node = np.asarray(d.terms.node, IDX)
    return Plan(
        resources=p.resources,
        type_names=p.type_names,
        n_nodes=p.N,
        launch=launch_counts(new_type, p.T),
        launch_order=launch_order(new_type),
        term_node=term_node,
        term_cause=np.asarray(d.terms.cause, CODE),
        term_value=np.asarray(d.terms.value, CNT),
        term_status=p.node_status[term_node].astype(CODE),
        infeasible=np.asarray(d.infeasible, CNT),
        infeasible_why=np.asarray(d.infeasible_why, CODE),
        run_order=np.asarray(d.run_order, IDX),
        place_slot=np.asarray(d.placements.slot, IDX),
        place_run=np.asarray(d.placements.run, IDX),
        place_count=np.asarray(d.placements.count, CNT),
        new_type=new_type,
        new_template=template,
        cluster_resources=np.ascontiguousarray(d.cluster_resources, dtype=QTY),
        **extra,
    )
