"""The classic first-fit-decreasing (FFD) packer: the quality baseline.

This is the greedy a user would write without Ray's utilisation scoring. Plans
from the engine are compared with it on packing quality (nodes launched, units
left unplaced). It is deliberately simple, deterministic and not Ray-exact.

One tick, in order:

1. pending nodes the builder marked outdated are terminated (OUTDATED);
2. per worker group, nodes above ``max_worker_nodes`` are terminated
   (MAX_NUM_NODE_PER_TYPE; never the head, never a REQUESTED or RAY_STOP_REQUESTED instance);
3. new nodes are launched until every group has ``min_worker_nodes``;
4. placement groups, all or nothing, in Ray's gang order (``baseline_gangs.py``);
   then demand: runs largest first (see `size_order`); the units of a run go to the
   first existing node with room, then to the first already-opened new node,
   then to new nodes of the first configured type that can hold one unit; only
   where the run's label selectors hold, and a run with an anti-affinity puts at
   most one unit on a node and none on a node carrying its label (Ray adds the
   label on placement, RAY_V2_SEMANTICS.md 4.7);
5. idle running nodes that received nothing are terminated (IDLE), never
   taking a group below ``min_worker_nodes``.

Runs are placed with counts (``min_r floor(free[r] / qty[r])`` units per node),
never unit by unit, so a tick costs O(S * (N + J) * R) numpy work.
"""
from __future__ import annotations

import numpy as np

from .ffd_gangs import pack_gangs
from vecsched.engine.model.dtypes import CNT, CODE, IDX, QTY, Cause, Kind, Status, Why
from vecsched.engine.model.fits import anti_mask, selector_mask
from vecsched.engine.model.plan import Plan
from vecsched.engine.model.problem import Problem

# Relative slack when counting how many units fit, so that 0.3 / 0.1 (which is
# 2.9999999999999996 in binary64) counts as 3. Far below validate's 1e-9.
_FIT_SLACK = 1e-12
# "No cap" for the global node budget (max_num_nodes = -1).
_NO_CAP = 1 << 62


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


def type_free(problem: Problem) -> np.ndarray:
    """(T, R) f8 free resources of a brand-new node of each type."""
    return problem.type_free


def _fit(free: np.ndarray, qty: np.ndarray, limit: int) -> np.ndarray:
    """(M,) i8 units of one shape that fit on each row, capped at ``limit``.

    free (M, R), qty (R,). A zero entry of the shape always fits, so only the
    positive columns bound the count; a shape with none fits without bound.
    """
    pos = qty > 0
    if not pos.any():
        return np.full(free.shape[0], limit, dtype=CNT)
    k = np.floor((free[:, pos] / qty[pos]).min(axis=1) * (1.0 + _FIT_SLACK))
    return np.clip(k, 0, limit).astype(CNT)


def _first_fit(fits: np.ndarray, want: int) -> np.ndarray:
    """(M,) i8 units per row when ``want`` units go to the rows in order, each
    row taking as many as it fits before the next row gets any."""
    before = np.cumsum(fits) - fits
    return np.clip(want - before, 0, fits)


class _NewNodes:
    """The nodes this tick opens: their types and free resources, in slot order."""

    def __init__(self, R: int):
        self.types: list[int] = []
        self.free = np.zeros((0, R), dtype=QTY)

    def open(self, t: int, free_rows: np.ndarray) -> int:
        """Open ``len(free_rows)`` nodes of type t; returns the first new index j."""
        j = len(self.types)
        self.types.extend([t] * len(free_rows))
        self.free = np.concatenate([self.free, free_rows])
        return j


def schedule_baseline(problem: Problem) -> Plan:
    """First-fit-decreasing plan for one tick (see the module docstring)."""
    p = problem
    N, T, S = p.N, p.T, p.S
    configured = np.flatnonzero(p.type_configured)
    cap = type_free(p)
    terms: list[tuple[int, int, int]] = []          # (node, cause, value) in reply order
    gone = p.node_outdated.copy()                    # nodes not in the cluster after this tick

    # Never the head; never a REQUESTED or RAY_STOP_REQUESTED instance: its termination is an illegal
    # lifecycle move (quirk Q13), it is left for a later tick.
    terminable = (p.node_kind != Kind.HEAD) & ~np.isin(p.node_status, Status.UNTERMINABLE)

    # 1. Outdated pending nodes (already emptied by the builder).
    for n in np.flatnonzero(p.node_outdated & terminable):
        terms.append((int(n), Cause.OUTDATED, 0))

    # 2. Groups above max_worker_nodes.
    for t in configured:
        members = np.flatnonzero(~gone & (p.node_type == t))
        excess = len(members) - int(p.type_max[t])
        if excess <= 0:
            continue
        cand = members[terminable[members]]
        # Victims: pending nodes (no ray yet) first, then the longest idle;
        # ties to the lowest node index.
        victims = cand[np.lexsort((cand, -p.node_idle_ms[cand], p.node_has_ray[cand]))][:excess]
        for n in victims:
            terms.append((int(n), Cause.MAX_NUM_NODE_PER_TYPE, int(p.type_max[t])))
        gone[victims] = True

    # Launch budgets: per group (max minus the nodes it keeps) and global.
    alive = ~gone
    type_count = np.bincount(p.node_type[alive], minlength=T).astype(CNT)
    type_left = np.where(p.type_configured, np.maximum(p.type_max - type_count, 0), 0)
    global_left = _NO_CAP if p.max_num_nodes < 0 else max(p.max_num_nodes - int(alive.sum()), 0)

    new = _NewNodes(p.R)

    # 3. min_worker_nodes, in type order, before any demand.
    for t in configured:
        m = min(int(p.type_min[t] - type_count[t]), int(type_left[t]), global_left)
        if m > 0:
            new.open(int(t), np.repeat(cap[t:t + 1], m, axis=0))
            type_left[t] -= m
            global_left -= m

    # 4. Placement groups, then demand, largest run first.
    free = p.node_free.copy()
    gang_bad, gang_order, gang_received, global_left = pack_gangs(
        p, free, alive, new, cap, configured, type_left, global_left)
    fits_ever = np.maximum(p.node_total, p.node_free)[alive]   # could an existing node ever hold it
    run_order = size_order(p)
    infeasible = np.zeros(S, dtype=CNT)
    why = np.zeros(S, dtype=CODE)
    slots: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    runs: list[np.ndarray] = []

    def record(slot: np.ndarray, take: np.ndarray, s: int) -> None:
        slots.append(slot.astype(IDX))
        counts.append(take.astype(CNT))
        runs.append(np.full(len(slot), s, dtype=IDX))

    marked: dict = {}           # anti-affinity label -> slots a run of this tick labelled
    for s in run_order:
        q = p.shape_qty[s]
        want = int(p.shape_count[s])
        if want == 0:
            continue
        anti = tuple(int(x) for x in p.req.anti[s])
        per_node = 1 if anti[0] >= 0 else want
        mine = marked.setdefault(anti, set()) if anti[0] >= 0 else set()
        node_ok = selector_mask(p, s, p.node_label) & anti_mask(p, s, p.node_label)
        type_ok = selector_mask(p, s, p.type_label) & anti_mask(p, s, p.type_label)
        # existing nodes, in node order
        ok = alive & node_ok
        ok[[n for n in mine if n < N]] = False
        take = _first_fit(np.where(ok, _fit(free, q, per_node), 0), want)
        hit = np.flatnonzero(take)
        if hit.size:
            free[hit] = np.maximum(free[hit] - take[hit, None] * q, 0.0)
            record(hit, take[hit], s)
            mine.update(hit.tolist())
            want -= int(take.sum())
        # new nodes opened earlier this tick, in slot order
        if want and new.types:
            ok = type_ok[np.asarray(new.types)]
            ok[[n - N for n in mine if n >= N]] = False
            take = _first_fit(np.where(ok, _fit(new.free, q, per_node), 0), want)
            hit = np.flatnonzero(take)
            if hit.size:
                new.free[hit] = np.maximum(new.free[hit] - take[hit, None] * q, 0.0)
                record(N + hit, take[hit], s)
                mine.update((N + hit).tolist())
                want -= int(take.sum())
        # open new nodes: first configured type that holds one unit and has budget
        for t in configured:
            if want == 0 or global_left == 0:
                break
            k = int(_fit(cap[t:t + 1], q, per_node)[0]) if type_ok[t] else 0
            if k == 0 or type_left[t] == 0:
                continue
            m = min(-(-want // k), int(type_left[t]), global_left)
            take = np.minimum(k, want - k * np.arange(m, dtype=CNT))
            j = new.open(int(t), np.maximum(cap[t] - take[:, None] * q, 0.0))
            record(N + j + np.arange(m), take, s)
            mine.update(range(N + j, N + j + m))
            type_left[t] -= m
            global_left -= m
            want -= int(take.sum())
        if want:
            infeasible[s] = want
            why[s] = _why(q, cap[configured], type_left[configured], global_left,
                          fits_ever[node_ok[alive]], type_ok[configured])

    place_slot = np.concatenate(slots) if slots else np.zeros(0, dtype=IDX)
    place_count = np.concatenate(counts) if counts else np.zeros(0, dtype=CNT)
    place_run = np.concatenate(runs) if runs else np.zeros(0, dtype=IDX)
    new_type = np.asarray(new.types, dtype=IDX)

    # 5. Idle termination: longest idle first, ties to the lowest node index.
    received = np.zeros(N, dtype=bool)
    received[place_slot[place_slot < N]] = True
    received |= gang_received
    kept = type_count + np.bincount(new_type, minlength=T)
    timeout_s = np.where(np.isnan(p.type_idle_timeout_s), p.idle_timeout_s, p.type_idle_timeout_s)
    idle = (alive & p.node_has_ray & ~received & terminable
            & (p.node_idle_ms > timeout_s[p.node_type] * 1000.0))   # NaN timeout: never
    cand = np.flatnonzero(idle)
    for n in cand[np.lexsort((cand, -p.node_idle_ms[cand]))]:
        t = p.node_type[n]
        if kept[t] - 1 >= p.type_min[t]:
            kept[t] -= 1
            gone[n] = True
            terms.append((int(n), Cause.IDLE, int(p.node_idle_ms[n])))

    launch = np.bincount(new_type, minlength=T).astype(CNT)
    _, first = np.unique(new_type, return_index=True)
    launch_order = tuple(int(t) for t in new_type[np.sort(first)])
    term_node = np.array([n for n, _, _ in terms], dtype=IDX)
    cluster = p.node_total[~gone].sum(axis=0) + launch.astype(QTY) @ p.type_cap
    return Plan(
        resources=p.resources,
        type_names=p.type_names,
        n_nodes=N,
        launch=launch,
        launch_order=launch_order,
        term_node=term_node,
        term_cause=np.array([c for _, c, _ in terms], dtype=CODE),
        term_value=np.array([v for _, _, v in terms], dtype=CNT),
        term_status=p.node_status[term_node].astype(CODE),
        infeasible=infeasible,
        infeasible_why=why,
        run_order=run_order,
        place_slot=place_slot,
        place_run=place_run,
        place_count=place_count,
        new_type=new_type,
        cluster_resources=np.ascontiguousarray(cluster, dtype=QTY),
        gang_infeasible=gang_bad,
        gang_order=gang_order,
        stats={"scheduler": "baseline"},
    )


def _why(qty: np.ndarray, cap: np.ndarray, type_left: np.ndarray, global_left: int,
         fits_ever: np.ndarray, type_ok: np.ndarray) -> int:
    """Reason a run kept unplaced units, given the configured types' free rows
    cap (T', R), their remaining budgets (T',), what the existing nodes it may use
    could hold and which types its label selectors admit (T',)."""
    holds = (_fit(cap, qty, 1) > 0) & type_ok
    if not holds.any():
        # No type fits. If an existing node could hold a unit (e.g. a running node
        # larger than any config), the run is blocked because no more such nodes
        # can be added: report that as a max_workers block.
        return Why.MAX_WORKERS if (_fit(fits_ever, qty, 1) > 0).any() else Why.NO_NODE_TYPE_FITS
    if global_left == 0 and (type_left[holds] > 0).any():
        return Why.MAX_NUM_NODES      # a fitting group still had room: the global cap stopped it
    return Why.MAX_WORKERS
