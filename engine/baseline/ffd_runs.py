"""Plain demand in the first-fit-decreasing baseline (``ffd.py``).

Runs go largest first (`size_order`); the units of a run go to the first
existing node with room, then to the first node opened earlier this tick, then
to new nodes of the first configured type that can hold one unit; only where
the run's label selectors hold. A run with an anti-affinity puts at most one
unit on a node and none on a node carrying its label (Ray adds the label on
placement, docs/ray-semantics.md §4.7).

Runs are placed with counts (``min_r floor(free[r] / qty[r])`` units per node),
never unit by unit, so a tick costs O(S * (N + J) * R) numpy work.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vecsched.engine.model.assemble import Placements
from vecsched.engine.model.dtypes import CNT, CODE, IDX
from vecsched.engine.model.fits import anti_mask, selector_mask
from vecsched.engine.model.problem import Problem
from vecsched.engine.tick.reasons import why_rows
from .ffd_tick import FfdTick

# Relative slack when counting how many units fit, so that 0.3 / 0.1 (which is
# 2.9999999999999996 in binary64) counts as 3. Far below validate's 1e-9.
FIT_SLACK = 1e-12


def size_order(problem: Problem) -> np.ndarray:
    """(S,) i4 run indices, largest first; ties keep input order.

    "Size" is the request vector compared lexicographically over the columns
    GPU, then CPU, then memory, then every other column in column order. GPU
    leads because GPU nodes are the scarce, expensive ones; CPU and memory are
    the usual binding resources after it.
    """
    S = problem.S
    lead = [c for c in (problem.gpu_col, problem.col("CPU"), problem.col("memory")) if c >= 0]
    cols = lead + [r for r in range(problem.R) if r not in lead]
    # np.lexsort: the LAST key is the primary one. Negated quantities sort
    # descending; the run index as the least significant key keeps input order.
    keys = [np.arange(S)] + [-problem.shape_qty[:, r] for r in reversed(cols)]
    return np.lexsort(keys).astype(IDX)


def fit(free: np.ndarray, qty: np.ndarray, limit: int) -> np.ndarray:
    """(M,) i8 units of one shape that fit on each row, capped at ``limit``.

    free (M, R), qty (R,). A zero entry of the shape always fits, so only the
    positive columns bound the count; a shape with none fits without bound.
    """
    pos = qty > 0
    if not pos.any():
        return np.full(free.shape[0], limit, dtype=CNT)
    k = np.floor((free[:, pos] / qty[pos]).min(axis=1) * (1.0 + FIT_SLACK))
    return np.clip(k, 0, limit).astype(CNT)


def _first_fit(fits: np.ndarray, want: int) -> np.ndarray:
    """(M,) i8 units per row when ``want`` units go to the rows in order, each
    row taking as many as it fits before the next row gets any."""
    before = np.cumsum(fits) - fits
    return np.clip(want - before, 0, fits)


@dataclass
class _Run:
    """One run while it is placed: its index, unit shape, units still to place,
    units a node may take, the slots it already labelled (anti-affinity), and
    where its selectors hold ((N,) existing nodes, (T,) types)."""
    s: int
    q: np.ndarray
    want: int
    per_node: int
    mine: set
    node_ok: np.ndarray
    type_ok: np.ndarray


class _Placed:
    """Placement chunks in the order they were made."""

    def __init__(self):
        self.slots: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []
        self.runs: list[np.ndarray] = []

    def record(self, slot: np.ndarray, take: np.ndarray, s: int) -> None:
        self.slots.append(slot.astype(IDX))
        self.counts.append(take.astype(CNT))
        self.runs.append(np.full(len(slot), s, dtype=IDX))

    def placements(self) -> Placements:
        return Placements.of_chunks(self.slots, self.runs, self.counts)


def pack_runs(tick: FfdTick) -> tuple[np.ndarray, np.ndarray, np.ndarray, Placements]:
    """Place every run (see the module docstring); returns (run order, units
    left per run, the reason per run, placements)."""
    p = tick.p
    run_order = size_order(p)
    infeasible = np.zeros(p.S, dtype=CNT)
    why = np.zeros(p.S, dtype=CODE)
    placed = _Placed()
    marked: dict = {}           # anti-affinity label -> slots a run of this tick labelled
    for s in run_order.tolist():
        want = int(p.shape_count[s])
        if want == 0:
            continue
        run = _run_of(p, s, want, marked)
        _on_existing(tick, run, placed)
        _on_opened(tick, run, placed)
        _on_new(tick, run, placed)
        if run.want:
            infeasible[s] = run.want
    short = np.flatnonzero(infeasible)
    if len(short):
        why[short] = why_rows(p, short, capped=tick.global_left == 0)
    return run_order, infeasible, why, placed.placements()


def _run_of(p: Problem, s: int, want: int, marked: dict) -> _Run:
    anti = tuple(int(x) for x in p.req.anti[s])
    return _Run(s=s, q=p.shape_qty[s], want=want,
                per_node=1 if anti[0] >= 0 else want,
                mine=marked.setdefault(anti, set()) if anti[0] >= 0 else set(),
                node_ok=selector_mask(p, s, p.node_label) & anti_mask(p, s, p.node_label),
                type_ok=selector_mask(p, s, p.type_label) & anti_mask(p, s, p.type_label))


def _on_existing(tick: FfdTick, run: _Run, placed: _Placed) -> None:
    """Existing nodes, in node order."""
    N = tick.p.N
    ok = tick.alive & run.node_ok
    ok[[n for n in run.mine if n < N]] = False
    take = _first_fit(np.where(ok, fit(tick.free, run.q, run.per_node), 0), run.want)
    hit = np.flatnonzero(take)
    if hit.size:
        tick.free[hit] = np.maximum(tick.free[hit] - take[hit, None] * run.q, 0.0)
        placed.record(hit, take[hit], run.s)
        run.mine.update(hit.tolist())
        run.want -= int(take.sum())


def _on_opened(tick: FfdTick, run: _Run, placed: _Placed) -> None:
    """New nodes opened earlier this tick, in slot order."""
    new, N = tick.new, tick.p.N
    if not run.want or not new.types:
        return
    ok = run.type_ok[np.asarray(new.types)]
    ok[[n - N for n in run.mine if n >= N]] = False
    take = _first_fit(np.where(ok, fit(new.free, run.q, run.per_node), 0), run.want)
    hit = np.flatnonzero(take)
    if hit.size:
        new.free[hit] = np.maximum(new.free[hit] - take[hit, None] * run.q, 0.0)
        placed.record(N + hit, take[hit], run.s)
        run.mine.update((N + hit).tolist())
        run.want -= int(take.sum())


def _on_new(tick: FfdTick, run: _Run, placed: _Placed) -> None:
    """Open new nodes: the first configured type that holds one unit and has
    budget, then the next."""
    N, q = tick.p.N, run.q
    for t in tick.configured:
        if run.want == 0 or tick.global_left == 0:
            break
        k = int(fit(tick.cap[t:t + 1], q, run.per_node)[0]) if run.type_ok[t] else 0
        if k == 0 or tick.type_left[t] == 0:
            continue
        m = min(-(-run.want // k), int(tick.type_left[t]), tick.global_left)
        take = np.minimum(k, run.want - k * np.arange(m, dtype=CNT))
        j = tick.open_new(int(t), np.maximum(tick.cap[t] - take[:, None] * q, 0.0))
        placed.record(N + j + np.arange(m), take, run.s)
        run.mine.update(range(N + j, N + j + m))
        run.want -= int(take.sum())
