"""Where the raylets and the GCS's placement group scheduler put pending work: one
placement pass over a replay's ``cluster.Cluster`` (``place``), deliberately simple:

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

A pass runs only when something it reads changed since the last one (``Cluster.dirty``:
a node joined or became placeable, a unit arrived, finished or was requeued), so
calling it again with nothing new is free and places nothing.
"""
from __future__ import annotations

import numpy as np


def place(c, now: float) -> int:
    """One placement pass over the cluster ``c`` at ``now``; returns units placed."""
    if not c.dirty:
        return 0
    c.dirty = False
    if c.n_pending == 0 or not c.placeable.any():
        return 0
    placed = 0
    idx = np.flatnonzero(c.placeable)        # join order, the head first
    total = c.total[idx]
    used = c.used[idx]
    gpu_node = (total[:, c.gpu_col] > 0 if c.gpu_col is not None
                else np.zeros(idx.size, bool))
    avoid = c.avoid_gpu_nodes and gpu_node.any()
    for _, kind, s in _work_order(c):
        if kind == 1:
            placed += _place_gang(c, s, idx, total, used, now)
            continue
        placed += _place_shape(c, s, idx, total, used, gpu_node if avoid else None, now)
        if c.n_pending == 0:
            break
    c.used[idx] = used
    return placed


def _work_order(c) -> list[tuple]:
    """Pending work oldest first: (since, 0, shape) and (since, 1, group)."""
    work = [(c.pending_since[q[0]], 0, s) for s, q in enumerate(c.queues) if q]
    work += [(c.gang_since[g], 1, g) for g in c.gang_pending]
    return sorted(work)


def _place_shape(c, s: int, idx, total, used, gpu_node, now: float) -> int:
    """The pending units of shape ``s``, first-fit over the placeable nodes ``idx``
    (``total`` / ``used`` their rows, ``used`` updated); ``gpu_node``: which of them
    have GPUs when CPU-only work avoids them, else None."""
    q = c.queues[s]
    want = len(q)
    pos = c.shape_pos[s]
    if pos.size == 0:
        fits = np.full(idx.size, want, dtype=np.int64)
    else:
        free = total[:, pos] - used[:, pos]
        fits = (free // c.shape_fp[s, pos]).min(axis=1)
    if not fits.any():
        return 0
    if gpu_node is not None and c.shape_cpu_only[s]:
        # nodes without GPUs first (first-fit), then GPU nodes for the rest: unit by unit
        # (oldest first) this is the raylet's rule, as every node without GPUs that has
        # room is used before any fallback
        order = np.concatenate([np.flatnonzero(~gpu_node), np.flatnonzero(gpu_node)])
    else:
        order = np.arange(idx.size)
    take = np.zeros_like(fits)
    take[order] = _first_fit(fits[order], want)
    for j in order[take[order] > 0]:
        k = int(take[j])
        slot = int(idx[j])
        used[j] += k * c.shape_fp[s]
        for _ in range(k):
            c.start_unit(q.popleft(), slot, now)
            c.n_pending -= 1
            c.n_running += 1
    return int(take.sum())


def _place_gang(c, g: int, idx, total, used, now: float) -> int:
    """Place every bundle of group g or none (see the module docstring)."""
    rows = c.gang_fp[g]
    where = _gang_slots(c.gangs.strategy[g], rows, total - used)
    if where is None:
        return 0
    members = c.gangs.members(g)
    for j, u in zip(where, members):
        used[j] += c.shape_fp[int(c.unit_shape[u])]
        c.start_unit(int(u), int(idx[j]), now)
    c.gang_pending.remove(g)
    c.gang_since[g] = np.nan
    c.n_pending -= len(members)
    c.n_running += len(members)
    return len(members)


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
