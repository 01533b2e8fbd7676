"""The cluster side of a replay: a stand-in for Ray's raylets and the GCS's placement
group scheduler (and the GCS resource view).

Ray's autoscaler never places work; raylets and the GCS do, and the autoscaler sees what
is left over as pending demand. This module plays that part, deliberately simply:

- **Order.** Pending work is visited oldest first: independent units grouped by shape
  (a shape at the time of its oldest pending unit; ties: first appearance in the trace)
  and placement groups (at the time they became pending) in one order, shapes before
  groups at equal times. Within a shape the oldest units go first. Work that does not
  fit is skipped, so it never blocks the work behind it (no head-of-line blocking).
- **Independent units.** A shape goes first-fit over the placeable nodes in the order
  they joined the cluster (the head first), as many units per node as fit:
  ``min_r floor(free[r] / qty[r])``.
- **GPU nodes avoided for CPU-only work**, as Ray 2.60's raylet does by default
  (``RAY_scheduler_avoid_gpu_nodes``, default on: the hybrid scheduling policy of Ray's
  cluster resource scheduler, which places tasks and actors). A unit whose bundle asks
  for no GPU first goes to a node without GPUs (no ``GPU`` in its totals) that has the
  room now; only when no such node has room does it go to any node, GPU nodes
  included. A unit that asks for a GPU goes to any node. Placement-group bundles are
  placed without this rule (Ray's bundle policies do not apply it), and a group's
  members run in their bundles. ``avoid_gpu_nodes=False`` is Ray with the setting off.
  (What the raylet picks among the nodes with room - the least utilised below a
  spread threshold, at random among the top k - is not modelled: first-fit here.)
- **Placement groups** are placed atomically (every bundle or none), over the same
  nodes in the same order, by strategy: STRICT_PACK puts the summed bundle on the first
  node that holds it; PACK does the same if one node can, else places the bundles one by
  one first-fit; STRICT_SPREAD places each bundle on the first node holding none of the
  group's bundles yet; SPREAD prefers such a node and falls back to any node that fits.
  A placed bundle reserves its resources on the node, and its member unit runs in it.
- **Placeable** means RAY_RUNNING. A node being drained (RAY_STOP_REQUESTED, RAY_STOPPING)
  keeps what runs on it but takes nothing new.
- **Holding.** A placed unit holds its resources for its duration, then frees them; a
  group's members all have the group's duration (``gangs.py``), so they leave together.
- **Idle time** (what the autoscaler's idle termination reads) is 0 while anything runs
  on the node, else the time since the last unit left it (or since it joined).
- **Loss.** When a node leaves (preempted, stopped, terminated) its running units go back
  to pending with their full duration, and are counted as requeued (what they ran
  so far is thrown away: ``lost_seconds``). A placement group
  that loses a bundle goes back to pending entire: its members on other nodes stop too
  (a gang job restarts), and all its members count as requeued.
- **Resources.** A node offers exactly its worker group's resources (CPU, memory, GPU,
  ``accelerator_type:<model>``); a real raylet also reports ``object_store_memory`` and
  ``node:<ip>``, which no trace demand uses, so they are left out. A node hosting
  bundles of a placement group reports them as Ray 2.60's GCS does (checked on a live
  ``ray.init``): totals ``<r>_group_<i>_<pg>`` (bundle i's quantity),
  ``<r>_group_<pg>`` (the sum of the bundles on the node), ``bundle_group_<i>_<pg>`` 1000
  and ``bundle_group_<pg>`` 1000 per bundle; a running member holds its bundle's indexed
  and wildcard quantities (all of them, so those entries are left out of the
  availability, as the GCS leaves out exhausted entries) and 0.001 of each
  ``bundle_group`` entry; and the node carries the dynamic label ``_PG_<pg>: ""``.
- **Implicit per-node slots** (``node:__internal_implicit_resource_<app>``, what a
  per-node cap becomes, ``vecsched.adapters.traces.cap_slot``): every node holds 1 of each
  without declaring it. As Ray 2.60's GCS reports them (checked on a live
  ``ray.init``), they are absent from a node's totals, and in its available map only
  while some of the slot is held (``(1 - held)``; gone again once free).
- **Arithmetic.** Quantities are held in Ray's fixed point (1e-4 units, as the raylet's
  ``FixedPoint``), so freeing exactly undoes placing; the autoscaler is shown
  ``(total - used) / 1e4`` as floats. The raylet truncates a quantity to whole units;
  the stand-in rounds, which differs only by float noise for the quantities traces give
  (0.29 CPU is 2899.99... units), except for a slot's 1/c: there it truncates as Ray
  does (1/6 holds 1666 units, so six fit in 10000; rounded, only five would).
"""
from __future__ import annotations

import heapq
import math
from collections import deque

import numpy as np

from vecsched.engine.model.dtypes import IMPLICIT_PREFIX

from .placement_groups import Gangs

SCALE = 10_000          # Ray's RESOURCE_UNIT_SCALING
BUNDLE_UNITS = 1000.0   # a bundle's bundle_group_* quantity
BUNDLE_TASK = 0.001     # what a task in a bundle holds of it


class Cluster:
    """Nodes, their used resources, and the pending / running units of a replay."""

    def __init__(self, columns, shapes, arrival_s, duration_s, unit_shape, gangs: Gangs = None,
                 avoid_gpu_nodes: bool = True):
        self.columns = list(columns)
        self.col = {c: i for i, c in enumerate(self.columns)}
        R = len(self.columns)
        self.avoid_gpu_nodes = bool(avoid_gpu_nodes)
        gpu = self.col.get("GPU")
        self.implicit = np.array([c.startswith(IMPLICIT_PREFIX) for c in self.columns],
                                 dtype=bool)
        self.implicit_cols = [(c, self.col[c]) for c in self.columns
                              if c.startswith(IMPLICIT_PREFIX)]
        self.shapes = list(shapes)
        self.shape_fp = np.zeros((len(shapes), R), dtype=np.int64)
        for s, sh in enumerate(shapes):
            for k, v in sh.items():
                x = float(v) * SCALE
                self.shape_fp[s, self.col[k]] = int(x) if self.implicit[self.col[k]] \
                    else int(round(x))
        self.shape_pos = [np.flatnonzero(row > 0) for row in self.shape_fp]
        # shapes that ask for no GPU (Ray's ResourceRequest.Has(GPU) is false)
        self.shape_cpu_only = (np.ones(len(shapes), bool) if gpu is None
                               else self.shape_fp[:, gpu] <= 0)
        self._gpu_col = gpu
        self.arrival = arrival_s
        self.arrived = 0                 # units arrived so far (play_until)
        self.duration = duration_s
        self.unit_shape = unit_shape
        U = arrival_s.size
        self.gangs = gangs if gangs is not None else Gangs.none(U)
        # units
        self.pending_since = np.full(U, np.nan)
        self.placed_at = np.full(U, np.nan)
        self.node_of = np.full(U, -1, dtype=np.int64)
        self.gen = np.zeros(U, dtype=np.int64)
        self.queues: list[deque] = [deque() for _ in shapes]
        self.n_pending = 0
        self.n_running = 0
        self.n_done = 0
        self.requeued = 0
        self.lost_seconds = np.zeros(R)          # resource-seconds of runs cut short (requeued)
        self.waits: list[float] = []            # pending time of every placement
        self.used_seconds = np.zeros(R)          # resource-seconds held by units
        self._events: list[tuple] = []           # (end_s, seq, unit, gen)
        self._seq = 0
        # placement groups
        G = self.gangs.G
        self.gang_arrived = np.zeros(G, dtype=np.int64)
        self.gang_since = np.full(G, np.nan)     # pending since (NaN: not pending)
        self.gang_pending: list[int] = []        # pending groups, in the order they became so
        self.gang_fp = [self.shape_fp[self.unit_shape[self.gangs.members(g)]]
                        for g in range(G)]
        self.bundle_of = np.full(U, -1, dtype=np.int64)   # member unit -> its bundle index
        for g in range(G):
            self.bundle_of[self.gangs.members(g)] = np.arange(len(self.gangs.members(g)))
        # nodes
        self.ids: list[str] = []
        self.types: list[str] = []
        self.total_maps: list[dict] = []
        self.total = np.zeros((0, R), dtype=np.int64)
        self.used = np.zeros((0, R), dtype=np.int64)
        self.placeable = np.zeros(0, dtype=bool)
        self.alive = np.zeros(0, dtype=bool)
        self.running: list[set] = []
        self.idle_since: list[float] = []
        self.slot_of: dict[str, int] = {}
        self.dirty = False                       # something changed since the last placement

    # ---- nodes -------------------------------------------------------------------------
    def add_node(self, instance_id: str, type_name: str, resources: dict, now: float) -> int:
        slot = len(self.ids)
        row = np.zeros((1, len(self.columns)), dtype=np.int64)
        for k, v in resources.items():
            row[0, self.col[k]] = int(round(float(v) * SCALE))
        row[0, self.implicit] = SCALE              # 1 of every implicit slot
        self.ids.append(instance_id)
        self.types.append(type_name)
        self.total_maps.append(dict(resources))
        self.total = np.concatenate([self.total, row])
        self.used = np.concatenate([self.used, np.zeros_like(row)])
        self.placeable = np.append(self.placeable, True)
        self.alive = np.append(self.alive, True)
        self.running.append(set())
        self.idle_since.append(float(now))
        self.slot_of[instance_id] = slot
        self.dirty = True
        return slot

    def set_placeable(self, slot: int, placeable: bool) -> None:
        if self.placeable[slot] != placeable:
            self.placeable[slot] = placeable
            self.dirty = self.dirty or placeable

    def remove_node(self, slot: int, now: float) -> int:
        """The node left the cluster: its running units go back to pending, and so do
        the placement groups it hosted a bundle of (every member)."""
        lost = sorted(self.running[slot])
        groups = sorted({int(self.gangs.unit_gang[u]) for u in lost} - {-1})
        for u in lost:
            if self.gangs.unit_gang[u] >= 0:
                continue
            self._stop(u, now, lost=True)
            self.requeued += 1
            self._enqueue(u, now)
        self.running[slot] = set()
        for g in groups:
            for u in self.gangs.members(g):
                u = int(u)
                other = int(self.node_of[u])
                if other < 0:
                    continue
                self.running[other].discard(u)
                self._stop(u, now, lost=True)
                if other != slot and not self.running[other]:
                    self.idle_since[other] = now
            self.requeued += len(self.gangs.members(g))
            self._gang_pending(g, now)
        self.used[slot] = 0
        self.alive[slot] = False
        self.placeable[slot] = False
        del self.slot_of[self.ids[slot]]
        return len(lost)

    def view(self, slot: int, now: float) -> tuple[dict, dict, int]:
        """(total, available, idle ms) of a node as the GCS reports it; ``labels`` gives
        its dynamic labels."""
        total = self.total_maps[slot]
        free = self.total[slot] - self.used[slot]
        avail = {k: float(free[self.col[k]]) / SCALE for k in total}
        for k, j in self.implicit_cols:            # a slot shows only while held
            if self.used[slot, j]:
                avail[k] = float(free[j]) / SCALE
        idle = 0 if self.running[slot] else int(round((now - self.idle_since[slot]) * 1000))
        members = self._members_on(slot)
        if not members:
            return total, avail, max(idle, 0)
        total, avail = dict(total), dict(avail)
        for u in members:
            pg = self.gangs.pg_id[int(self.gangs.unit_gang[u])]
            i = int(self.bundle_of[u])
            for k, v in self.shapes[int(self.unit_shape[u])].items():
                if v > 0:
                    total[f"{k}_group_{i}_{pg}"] = float(v)
                    total[f"{k}_group_{pg}"] = total.get(f"{k}_group_{pg}", 0.0) + float(v)
            total[f"bundle_group_{i}_{pg}"] = BUNDLE_UNITS
            total[f"bundle_group_{pg}"] = total.get(f"bundle_group_{pg}", 0.0) + BUNDLE_UNITS
            avail[f"bundle_group_{i}_{pg}"] = BUNDLE_UNITS - BUNDLE_TASK
            avail[f"bundle_group_{pg}"] = (avail.get(f"bundle_group_{pg}", 0.0)
                                           + BUNDLE_UNITS - BUNDLE_TASK)
        return total, avail, max(idle, 0)

    def labels(self, slot: int) -> dict:
        """The node's dynamic labels: ``_PG_<pg>: ""`` for each group it hosts a bundle of."""
        return {f"_PG_{self.gangs.pg_id[int(self.gangs.unit_gang[u])]}": ""
                for u in self._members_on(slot)}

    def _members_on(self, slot: int) -> list:
        """Placement group members running on the node, by (group, bundle)."""
        if not self.gangs.G:
            return []
        members = [u for u in self.running[slot] if self.gangs.unit_gang[u] >= 0]
        return sorted(members, key=lambda u: (int(self.gangs.unit_gang[u]),
                                              int(self.bundle_of[u])))

    # ---- units -------------------------------------------------------------------------
    def _enqueue(self, u: int, now: float) -> None:
        self.pending_since[u] = now
        self.queues[int(self.unit_shape[u])].append(u)
        self.n_pending += 1
        self.dirty = True

    def _gang_pending(self, g: int, now: float) -> None:
        self.gang_since[g] = now
        self.gang_pending.append(g)
        members = self.gangs.members(g)
        self.pending_since[members] = now
        self.n_pending += len(members)
        self.dirty = True

    def arrive(self, u: int) -> None:
        g = int(self.gangs.unit_gang[u])
        if g < 0:
            self._enqueue(u, float(self.arrival[u]))
            return
        self.gang_arrived[g] += 1                 # the group is pending once all are in
        if self.gang_arrived[g] == len(self.gangs.members(g)):
            self._gang_pending(g, float(self.arrival[u]))

    def _stop(self, u: int, now: float, lost: bool = False) -> None:
        """A running unit stops (done, or ``lost`` with its node: its run so far is
        thrown away too); account its resource-seconds."""
        slot = int(self.node_of[u])
        s = int(self.unit_shape[u])
        self.used[slot] -= self.shape_fp[s]
        held = self.shape_fp[s] / SCALE * (now - self.placed_at[u])
        self.used_seconds += held
        if lost:
            self.lost_seconds += held
        self.node_of[u] = -1
        self.gen[u] += 1
        self.n_running -= 1

    def play_until(self, until: float) -> None:
        """Arrivals (in trace order) and completions up to ``until``, placing after each
        event time; ``arrived`` counts the units that have arrived."""
        arr, U = self.arrival, self.arrival.size
        while True:
            t_arr = arr[self.arrived] if self.arrived < U else math.inf
            t = min(t_arr, self.next_completion())
            if t > until:
                return
            while self.arrived < U and arr[self.arrived] <= t:
                self.arrive(self.arrived)
                self.arrived += 1
            self.complete_until(t)
            self.place(t)

    def next_completion(self) -> float:
        while self._events:
            end, _, u, gen = self._events[0]
            if gen == self.gen[u]:
                return end
            heapq.heappop(self._events)          # a unit requeued since: stale
        return np.inf

    def complete_until(self, t: float) -> int:
        """Finish every running unit whose end time is <= t."""
        n = 0
        while self.next_completion() <= t:
            end, _, u, gen = heapq.heappop(self._events)
            slot = int(self.node_of[u])
            self.running[slot].discard(u)
            self._stop(u, end)
            if not self.running[slot]:
                self.idle_since[slot] = end
            self.n_done += 1
            self.dirty = True
            n += 1
        return n

    def _start(self, u: int, slot: int, now: float) -> None:
        self.node_of[u] = slot
        self.placed_at[u] = now
        self.waits.append(now - self.pending_since[u])
        self.running[slot].add(u)
        heapq.heappush(self._events, (now + float(self.duration[u]), self._seq, u,
                                      int(self.gen[u])))
        self._seq += 1

    def _work_order(self) -> list[tuple]:
        """Pending work oldest first: (since, 0, shape) and (since, 1, group)."""
        work = [(self.pending_since[q[0]], 0, s) for s, q in enumerate(self.queues) if q]
        work += [(self.gang_since[g], 1, g) for g in self.gang_pending]
        return sorted(work)

    def place(self, now: float) -> int:
        """One placement pass (see the module docstring); returns units placed."""
        if not self.dirty:
            return 0
        self.dirty = False
        if self.n_pending == 0 or not self.placeable.any():
            return 0
        placed = 0
        idx = np.flatnonzero(self.placeable)        # join order, the head first
        total = self.total[idx]
        used = self.used[idx]
        gpu_node = (total[:, self._gpu_col] > 0 if self._gpu_col is not None
                    else np.zeros(idx.size, bool))
        avoid = self.avoid_gpu_nodes and gpu_node.any()
        for _, kind, s in self._work_order():
            if kind == 1:
                placed += self._place_gang(s, idx, total, used, now)
                continue
            q = self.queues[s]
            want = len(q)
            pos = self.shape_pos[s]
            if pos.size == 0:
                fits = np.full(idx.size, want, dtype=np.int64)
            else:
                free = total[:, pos] - used[:, pos]
                fits = (free // self.shape_fp[s, pos]).min(axis=1)
            if not fits.any():
                continue
            if avoid and self.shape_cpu_only[s]:
                # nodes without GPUs first (first-fit), then GPU nodes for the rest: unit
                # by unit (oldest first) this is the raylet's rule, as every node without
                # GPUs that has room is used before any fallback
                order = np.concatenate([np.flatnonzero(~gpu_node), np.flatnonzero(gpu_node)])
            else:
                order = np.arange(idx.size)
            take = np.zeros_like(fits)
            take[order] = _first_fit(fits[order], want)
            for j in order[take[order] > 0]:
                k = int(take[j])
                slot = int(idx[j])
                used[j] += k * self.shape_fp[s]
                for _ in range(k):
                    self._start(q.popleft(), slot, now)
                    self.n_pending -= 1
                    self.n_running += 1
            placed += int(take.sum())
            if self.n_pending == 0:
                break
        self.used[idx] = used
        return placed

    def _place_gang(self, g: int, idx, total, used, now: float) -> int:
        """Place every bundle of group g or none (see the module docstring)."""
        rows = self.gang_fp[g]
        where = _gang_slots(self.gangs.strategy[g], rows, total - used)
        if where is None:
            return 0
        members = self.gangs.members(g)
        for j, u in zip(where, members):
            used[j] += self.shape_fp[int(self.unit_shape[u])]
            self._start(int(u), int(idx[j]), now)
        self.gang_pending.remove(g)
        self.gang_since[g] = np.nan
        self.n_pending -= len(members)
        self.n_running += len(members)
        return len(members)

    def pending_runs(self) -> list[tuple[int, int]]:
        """(shape, count) of pending independent units, shapes in order of their oldest
        pending unit."""
        order = sorted((self.pending_since[q[0]], s) for s, q in enumerate(self.queues) if q)
        return [(s, len(self.queues[s])) for _, s in order]

    def pending_gangs(self) -> list[int]:
        """Pending placement groups, in the order they became pending."""
        return sorted(self.gang_pending, key=lambda g: (self.gang_since[g], g))

    def finish(self, now: float) -> None:
        """Account the resource-seconds of units still running at the end."""
        for slot, units in enumerate(self.running):
            for u in units:
                s = int(self.unit_shape[u])
                self.used_seconds += self.shape_fp[s] / SCALE * (now - self.placed_at[u])


def _first_fit(fits: np.ndarray, want: int) -> np.ndarray:
    """(M,) units per row when ``want`` units go to the rows in order, each row taking
    as many as it fits (``fits``) before the next row gets any."""
    before = np.cumsum(fits) - fits
    return np.clip(want - before, 0, fits)


def _fits_on(free: np.ndarray, need: np.ndarray) -> np.ndarray:
    """(M,) bool: rows of free (M, R) that hold need (R,)."""
    return (free >= need).all(axis=1)


def _gang_slots(strategy: str, rows: np.ndarray, free: np.ndarray):
    """Row index into ``free`` for each bundle of ``rows`` (B, R), or None if the group
    does not fit as its strategy asks."""
    B = rows.shape[0]
    if strategy in ("STRICT_PACK", "PACK"):
        one = np.flatnonzero(_fits_on(free, rows.sum(axis=0)))
        if one.size:
            return [int(one[0])] * B
        if strategy == "STRICT_PACK":
            return None
    free = free.copy()
    used_by_group = np.zeros(free.shape[0], dtype=bool)
    out = []
    for b in range(B):
        ok = _fits_on(free, rows[b])
        if strategy in ("SPREAD", "STRICT_SPREAD"):
            fresh = np.flatnonzero(ok & ~used_by_group)
            if fresh.size:
                j = int(fresh[0])
            elif strategy == "SPREAD" and ok.any():
                j = int(np.flatnonzero(ok)[0])
            else:
                return None
        else:
            hit = np.flatnonzero(ok)
            if not hit.size:
                return None
            j = int(hit[0])
        free[j] -= rows[b]
        used_by_group[j] = True
        out.append(j)
    return out
