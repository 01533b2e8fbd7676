"""The cluster side of a replay: a stand-in for Ray's raylets and the GCS's placement
group scheduler (and the GCS resource view).

Ray's autoscaler never places work; raylets and the GCS do, and the autoscaler sees what
is left over as pending demand. This module plays that part, deliberately simply:

- **Placement** (``placement.py``): oldest work first, first-fit over the placeable
  nodes in join order, GPU nodes avoided for CPU-only work as Ray's raylet does,
  placement groups atomically by strategy.
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

from .placement import place
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
        self.gpu_col = gpu                 # the GPU column, None without GPUs
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

    def start_unit(self, u: int, slot: int, now: float) -> None:
        """Unit ``u`` starts on node ``slot`` at ``now`` (its resources are the caller's
        to take: ``placement.place``)."""
        self.node_of[u] = slot
        self.placed_at[u] = now
        self.waits.append(now - self.pending_since[u])
        self.running[slot].add(u)
        heapq.heappush(self._events, (now + float(self.duration[u]), self._seq, u,
                                      int(self.gen[u])))
        self._seq += 1

    def place(self, now: float) -> int:
        """One placement pass (``placement.place``); returns units placed."""
        return place(self, now)

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

