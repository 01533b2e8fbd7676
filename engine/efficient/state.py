"""The mutable state of one efficient-mode tick: node slots as growing arrays.

Slots < N are the Problem's nodes; slot N + j is the j-th node the tick
launches. Two availabilities, as in Ray: ``free`` for pending demand (a node's
free resources) and ``cfree`` for the ``request_resources()`` constraint (its
totals). Nothing is ever placed on a dead slot (outdated or cut by a cap), unlike
Ray's quirk Q1.

Scratch packings (a gang pass tried and undone) use ``snapshot`` / ``restore``.
A snapshot is a position in a journal of the rows changed since, not a copy
of the arrays: every change of an existing slot's free room, labels or
received flag goes through ``keep_rows`` first, and ``restore`` writes the kept
rows back, newest first; slots launched after the snapshot are simply dropped.
Snapshots nest (a restore undoes everything after its snapshot, later
snapshots included).

An existing node's room only shrinks during a tick (units are taken, a
restore returns to an earlier room), so a node that cannot hold a bundle at
the start of the tick never can: ``walk`` lists, once per bundle, only the
nodes that could.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.dtypes import Status
from vecsched.engine.model.fits import FIT_SLACK
from vecsched.engine.model.problem import Problem, order_mask
from vecsched.engine.model.termination import terminable

# How far along a node is (higher: ready sooner). Demand goes to the most
# advanced nodes first, so the nodes left unneeded are the cheapest to drop.
_READY = {Status.RAY_RUNNING: 6, Status.RAY_INSTALLING: 5, Status.ALLOCATED: 4,
          Status.REQUESTED: 3, Status.QUEUED: 2, Status.RAY_STOP_REQUESTED: 0}
NEW_READY = 1


class State:
    def __init__(self, p: Problem):
        self.p = p
        N, R, L = p.N, p.R, len(p.label_keys)
        self.N = N
        # Room for as many launches as nodes: rows past M are written by
        # launch_many before anything reads them, and np.zeros maps its pages
        # lazily, so only the rows used cost anything. (N + 16 made a 10k-node
        # tick with placement groups grow every array once: a 40 MB label matrix
        # allocated and copied, 50-100 ms.)
        cap = 2 * N + 16
        self.free = np.zeros((cap, R))
        self.free[:N] = p.node_free
        tot_present = order_mask(p.node_order, R)
        self.cfree = np.zeros((cap, R))
        self.cfree[:N] = np.where(tot_present, p.node_total, 0.0)
        self.cfree[:N][:, p.implicit] = np.where(tot_present[:, p.implicit],
                                                 self.cfree[:N][:, p.implicit], 1.0)
        # Label columns: the Problem's first W (the keys a node, a type or a
        # selector carries), then only the keys some request row's anti-affinity
        # sets (a STRICT_PACK group's own key is never read here: its bundles are
        # one item). ``label_cols[j]``: the Problem's key of column j.
        W = p.node_label.shape[1]
        anti = np.asarray(p.req.anti, np.int64).reshape(-1, 2)
        self.label_cols = np.concatenate([np.arange(W, dtype=np.int64),
                                          np.unique(anti[anti[:, 0] >= W, 0])])
        col_of = np.full(L + 1, -1, np.int64)     # one spare: indexable with no keys
        col_of[self.label_cols] = np.arange(len(self.label_cols))
        self.label = np.zeros((cap, len(self.label_cols)), np.int32)
        self.label[:N, :W] = p.node_label
        self.label[:N, W:] = -1     # keys no node carries
        self.anti_arr = _in_columns(anti, col_of)  # per request row [label column, value id]
        self.anti = self.anti_arr.tolist()          # (-1: none), as lists for row lookups
        self.type = np.zeros(cap, np.int32)
        self.type[:N] = p.node_type
        g = p.gpu_col
        self.gpu = np.zeros(cap, bool)
        if g >= 0:
            self.gpu[:N] = p.node_total[:, g] > 0
        self.alive = np.zeros(cap, bool)
        self.alive[:N] = ~p.node_outdated
        self.ready = np.zeros(cap, np.int8)
        self.ready[:N] = [_READY.get(int(s), 0) for s in p.node_status.tolist()]
        self.received = np.zeros(cap, bool)     # got demand, a gang bundle or the constraint
        self.M = N
        self.start = (self.free[:N].copy(), self.cfree[:N].copy())    # the largest room ever
        self._log: list = []        # (slots, source, view rows, label rows, received rows)
        self._floor = 0             # slots below it are journaled: the largest M snapshotted
        self._walks: dict = {}
        self._scratch = None        # scratch(): _fill_row's buffers
        self.type_label = np.ascontiguousarray(np.asarray(p.type_label)[:, self.label_cols])
        self.type_ok: dict = {}     # (request row, bundle bytes) -> (T,) bool (place._type_ok)
        self.new_types: list[int] = []
        self.terms: list[tuple[int, int, int]] = []     # (node, cause, value), reply order
        self.terminable = terminable(p)     # never the head, nor REQUESTED / RAY_STOP_REQUESTED
        conf = p.type_configured
        have = np.bincount(p.node_type[self.alive[:N]], minlength=p.T)
        self.type_room = np.where(conf, np.maximum(p.type_max - have, 0), 0).astype(np.int64)
        self.global_room = -1 if p.max_num_nodes < 0 else \
            max(p.max_num_nodes - int(self.alive[:N].sum()), 0)

    # ---- slots -----------------------------------------------------------------------
    def _grow(self, need: int) -> None:
        cap = self.free.shape[0]
        if need <= cap:
            return
        new = max(need, 2 * cap)
        for name in ("free", "cfree", "label", "type", "gpu", "alive", "ready", "received"):
            a = getattr(self, name)
            b = np.zeros((new,) + a.shape[1:], a.dtype)
            b[: a.shape[0]] = a
            setattr(self, name, b)

    def can_launch(self, t: int) -> bool:
        return self.type_room[t] > 0 and self.global_room != 0

    def launch(self, t: int) -> int:
        """A new node of type t; returns its slot (N + j)."""
        return self.launch_many(t, 1)

    def launch_many(self, t: int, count: int) -> int:
        """``count`` new nodes of type t (within its launch room); returns the
        first one's slot, the others follow it."""
        p = self.p
        self._grow(self.M + count)
        m, end = self.M, self.M + count
        self.free[m:end] = p.type_free[t]
        self.cfree[m:end] = p.type_free[t]
        self.label[m:end] = self.type_label[t]
        self.type[m:end] = t
        self.gpu[m:end] = p.gpu_col >= 0 and p.type_cap[t, p.gpu_col] > 0
        self.alive[m:end] = True
        self.ready[m:end] = NEW_READY
        self.received[m:end] = False
        self.M = end
        self.new_types.extend([t] * count)
        self.type_room[t] -= count
        if self.global_room > 0:
            self.global_room = max(self.global_room - count, 0)
        return m

    def terminate(self, n: int, cause: int, value: int) -> None:
        self.alive[n] = False
        self.terms.append((int(n), int(cause), int(value)))
        t = int(self.type[n])
        if self.p.type_configured[t]:
            self.type_room[t] = max(int(self.p.type_max[t]) - self.type_count(t), 0)
        if self.global_room >= 0:
            self.global_room = max(self.p.max_num_nodes - int(self.alive[:self.M].sum()), 0)

    def keeps_min(self, n: int) -> bool:
        """Terminating node n would leave its configured type below min_worker_nodes."""
        t = int(self.type[n])
        return bool(self.p.type_configured[t]) and self.type_count(t) - 1 < self.p.type_min[t]

    def type_count(self, t: int) -> int:
        return int((self.alive[:self.M] & (self.type[:self.M] == t)).sum())

    def narrow_labels(self, rows: np.ndarray) -> None:
        """Keep only the label columns that placing request ``rows`` can read: the
        keys a node, a type or a selector carries (the Problem's first columns) and
        the anti-affinity keys of those rows; the other keys (each placement group's
        own, once the groups are placed) leave the matrix, and the rows' columns are
        renumbered in ``anti``. A row whose key left gets one past the matrix, so
        placing it again fails loudly. The journal is emptied (its rows have the old
        width): a snapshot taken before cannot be restored after."""
        W, L = self.p.node_label.shape[1], self.label.shape[1]
        keys = self.anti_arr[np.asarray(rows, np.int64), 0]
        keep = np.concatenate([np.arange(W, dtype=np.int64), np.unique(keys[keys >= W])])
        if len(keep) == L:
            return
        new_of = np.full(L, L + len(keep), np.int64)
        new_of[keep] = np.arange(len(keep))
        label = np.zeros((self.label.shape[0], len(keep)), self.label.dtype)
        label[:self.M] = self.label[:self.M][:, keep]
        self.label = label
        self.type_label = np.ascontiguousarray(self.type_label[:, keep])
        self.label_cols = self.label_cols[keep]
        self.anti_arr = _in_columns(self.anti_arr, new_of)
        self.anti = self.anti_arr.tolist()
        self._log, self._floor = [], 0

    def labels_of(self, M: int) -> np.ndarray:
        """(M, len(p.label_keys)) i4: the first M slots' labels in the Problem's
        columns (-1 where the State keeps no column: keys it never reads), as
        ``vecsched.engine.solver.instance`` takes them."""
        out = np.full((M, len(self.p.label_keys)), -1, np.int32)
        out[:, self.label_cols] = self.label[:M]
        return out

    # ---- scratch ---------------------------------------------------------------------
    def snapshot(self):
        """A point to return to with ``restore`` (index 4: the slot count, 5: the
        types launched so far, as a list)."""
        self._floor = max(self._floor, self.M)
        return (len(self._log), None, None, None, self.M, list(self.new_types),
                self.type_room.copy(), self.global_room)

    def restore(self, snap) -> None:
        pos, _, _, _, M, new_types, room, glob = snap
        if pos > len(self._log):
            raise ValueError("State.restore: the snapshot was undone already (restore an "
                             "older snapshot only after the newer ones)")
        for slots, source, rows, labels, received in reversed(self._log[pos:]):
            if rows is not None:
                self.view(source)[slots] = rows
            self.label[slots] = labels
            self.received[slots] = received
        del self._log[pos:]
        self.alive[M:self.M] = False
        self.M, self.new_types = M, list(new_types)
        self.type_room, self.global_room = room.copy(), glob

    def keep_rows(self, slots: np.ndarray, source: int | None, rows: np.ndarray | None = None) -> None:
        """Journal the rows of ``slots`` about to change (their labels and received
        flags, and the ``source`` view's rows: ``rows`` when the caller already
        changed them, else read here) so that a restore can put them back. Only
        slots a live snapshot knows are kept."""
        if not self._floor:
            return
        slots = np.array(slots, np.int64)         # a copy: callers reuse their buffers
        if not slots.size:
            return
        if slots.max() >= self._floor:
            keep = slots < self._floor
            if not keep.any():
                return
            slots = slots[keep]
            rows = None if rows is None else rows[keep]
        if source is not None:
            rows = (self.free if source == 0 else self.cfree)[slots] if rows is None \
                else np.array(rows)
        self._log.append((slots, source, rows, self.label[slots], self.received[slots]))

    def scratch(self, M: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Buffers for ``effp_existing._fill_row`` (slots, counts, rows before),
        at least M long, reused from call to call (their contents are the
        caller's until its next call)."""
        got = self._scratch
        if got is None or got[0].shape[0] < M:
            cap = max(M, 2 * got[0].shape[0]) if got is not None else M
            got = self._scratch = (np.empty(cap, np.int64), np.empty(cap, np.int64),
                                   np.empty((cap, self.free.shape[1])))
        return got

    def view(self, source: int) -> np.ndarray:
        """The availability of a source: 0 pending demand, 1 the constraint."""
        return self.free if source == 0 else self.cfree

    def walk(self, source: int, q: np.ndarray, spare_gpu: bool) -> np.ndarray:
        """The existing slots that could hold one unit of bundle q at the start of
        the tick, in the order existing nodes are offered demand: without GPUs
        first when ``spare_gpu``, then the most advanced, then the lowest slot
        (``walk_bucket``). Made once per (source, bundle, spare_gpu)."""
        key = (source, q.tobytes(), spare_gpu)
        got = self._walks.get(key)
        if got is None:
            N = self.N
            order = self._walks.get(("order", spare_gpu))
            if order is None:
                order = self._walks[("order", spare_gpu)] = np.argsort(
                    self.walk_bucket(np.arange(N), spare_gpu), kind="stable")
            start = self.start[source]
            pos = q > 0
            if pos.any():
                ratio = (start[:, pos] / q[pos]).min(axis=1)
                could = np.floor(ratio * (1.0 + FIT_SLACK)) >= 1
            else:
                could = np.ones(N, bool)
            got = self._walks[key] = order[could[order]].astype(np.int64)
        return got

    def walk_bucket(self, slots: np.ndarray, spare_gpu: bool) -> np.ndarray:
        """(len(slots),) i8 the walk's bucket of each slot: equal exactly where
        only the slot number orders two nodes (6 - readiness, plus 8 for a GPU
        node when GPU nodes are spared)."""
        b = 6 - self.ready[slots].astype(np.int64)
        return b + 8 * self.gpu[slots] if spare_gpu else b


def _in_columns(anti: np.ndarray, col_of: np.ndarray) -> np.ndarray:
    """(Q, 2) anti-affinities [key, value] with each key >= 0 replaced by
    ``col_of[key]``; -1 (none) stays."""
    key = anti[:, 0]
    return np.stack([np.where(key >= 0, col_of[np.maximum(key, 0)], key), anti[:, 1]], 1)
