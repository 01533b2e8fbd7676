"""The cluster side of a replay: a stand-in for Ray's raylets (and the GCS resource view).

Ray's autoscaler never places work; raylets do, and the autoscaler sees what is left
over as pending demand. This module plays that part, deliberately simply:

- **Placement.** Pending units are grouped by shape. Shapes are visited in the order of
  their oldest pending unit (ties: first appearance in the trace); within a shape the
  oldest units go first. Each shape goes first-fit over the placeable nodes in the
  order they joined the cluster (the head first), as many units per node as fit:
  ``min_r floor(free[r] / qty[r])``. A shape that does not fit is skipped, so it never
  blocks the shapes behind it (no head-of-line blocking).
- **Placeable** means RAY_RUNNING. A node being drained (RAY_STOP_REQUESTED, RAY_STOPPING)
  keeps what runs on it but takes nothing new.
- **Holding.** A placed unit holds its resources for its duration, then frees them.
- **Idle time** (what the autoscaler's idle termination reads) is 0 while anything runs
  on the node, else the time since the last unit left it (or since it joined).
- **Loss.** When a node leaves (preempted, stopped, terminated) its running units go back
  to pending with their full duration, and are counted as requeued.
- **Resources.** A node offers exactly its worker group's resources (CPU, memory, GPU,
  ``accelerator_type:<model>``); a real raylet also reports ``object_store_memory`` and
  ``node:<ip>``, which no trace demand uses, so they are left out.
- **Arithmetic.** Quantities are held in Ray's fixed point (1e-4 units, as the raylet's
  ``FixedPoint``), so freeing exactly undoes placing; the autoscaler is shown
  ``(total - used) / 1e4`` as floats.
"""
from __future__ import annotations

import heapq
from collections import deque

import numpy as np

SCALE = 10_000          # Ray's RESOURCE_UNIT_SCALING


class Cluster:
    """Nodes, their used resources, and the pending / running units of a replay."""

    def __init__(self, columns, shapes, arrival_s, duration_s, unit_shape):
        self.columns = list(columns)
        self.col = {c: i for i, c in enumerate(self.columns)}
        R = len(self.columns)
        self.shape_fp = np.zeros((len(shapes), R), dtype=np.int64)
        for s, sh in enumerate(shapes):
            for k, v in sh.items():
                self.shape_fp[s, self.col[k]] = int(round(float(v) * SCALE))
        self.shape_pos = [np.flatnonzero(row > 0) for row in self.shape_fp]
        self.arrival = arrival_s
        self.duration = duration_s
        self.unit_shape = unit_shape
        U = arrival_s.size
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
        self.waits: list[float] = []            # pending time of every placement
        self.used_seconds = np.zeros(R)          # resource-seconds held by units
        self._events: list[tuple] = []           # (end_s, seq, unit, gen)
        self._seq = 0
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
        """The node left the cluster: its running units go back to pending."""
        lost = sorted(self.running[slot])
        for u in lost:
            self._stop(u, now)
            self.requeued += 1
            self._enqueue(u, now)
        self.running[slot] = set()
        self.used[slot] = 0
        self.alive[slot] = False
        self.placeable[slot] = False
        del self.slot_of[self.ids[slot]]
        return len(lost)

    def view(self, slot: int, now: float) -> tuple[dict, dict, int]:
        """(total, available, idle ms) of a node as the GCS reports it."""
        total = self.total_maps[slot]
        free = self.total[slot] - self.used[slot]
        avail = {k: float(free[self.col[k]]) / SCALE for k in total}
        idle = 0 if self.running[slot] else int(round((now - self.idle_since[slot]) * 1000))
        return total, avail, max(idle, 0)

    # ---- units -------------------------------------------------------------------------
    def _enqueue(self, u: int, now: float) -> None:
        self.pending_since[u] = now
        self.queues[int(self.unit_shape[u])].append(u)
        self.n_pending += 1
        self.dirty = True

    def arrive(self, u: int) -> None:
        self._enqueue(u, float(self.arrival[u]))

    def _stop(self, u: int, now: float) -> None:
        """A running unit stops (done or lost): account its resource-seconds."""
        slot = int(self.node_of[u])
        s = int(self.unit_shape[u])
        self.used[slot] -= self.shape_fp[s]
        self.used_seconds += self.shape_fp[s] / SCALE * (now - self.placed_at[u])
        self.node_of[u] = -1
        self.gen[u] += 1
        self.n_running -= 1

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

    def place(self, now: float) -> int:
        """One placement pass (see the module docstring); returns units placed."""
        if not self.dirty:
            return 0
        self.dirty = False
        if self.n_pending == 0 or not self.placeable.any():
            return 0
        order = sorted((self.pending_since[q[0]], s) for s, q in enumerate(self.queues) if q)
        placed = 0
        idx = np.flatnonzero(self.placeable)        # join order, the head first
        total = self.total[idx]
        used = self.used[idx]
        for _, s in order:
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
            before = np.cumsum(fits) - fits
            take = np.clip(want - before, 0, fits)
            for j in np.flatnonzero(take):
                k = int(take[j])
                slot = int(idx[j])
                used[j] += k * self.shape_fp[s]
                for _ in range(k):
                    u = q.popleft()
                    self.node_of[u] = slot
                    self.placed_at[u] = now
                    self.waits.append(now - self.pending_since[u])
                    self.running[slot].add(u)
                    heapq.heappush(self._events, (now + float(self.duration[u]), self._seq, u,
                                                  int(self.gen[u])))
                    self._seq += 1
            placed += int(take.sum())
            if placed == self.n_pending:
                break
        self.used[idx] = used
        self.n_pending -= placed
        self.n_running += placed
        return placed

    def pending_runs(self) -> list[tuple[int, int]]:
        """(shape, count) of pending demand, shapes in order of their oldest pending unit."""
        order = sorted((self.pending_since[q[0]], s) for s, q in enumerate(self.queues) if q)
        return [(s, len(self.queues[s])) for _, s in order]

    def finish(self, now: float) -> None:
        """Account the resource-seconds of units still running at the end."""
        for slot, units in enumerate(self.running):
            for u in units:
                s = int(self.unit_shape[u])
                self.used_seconds += self.shape_fp[s] / SCALE * (now - self.placed_at[u])
