"""Transactions over the context's rows (a gang or a constraint is all or
nothing): rows are saved before they first change, one slot at a time (touch)
or in bulk before a packing kernel runs (save_packing), and a rollback puts
the oldest saved copy of each row back. ``Transactions`` is a part of
vecsched.engine.raycompat.context.Context."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vecsched.engine.kernels.records import Source

_PREFIX = ("", "c")
# What a packing commit of each source changes: its rows and the labels.
NARROW = tuple(tuple(pre + k for k in Source._fields) + ("label",) for pre in _PREFIX)


@dataclass
class _Transaction:
    """What a rollback puts back (a gang or a constraint is all or nothing)."""
    M: int                      # slots in use when it began (later slots are dropped)
    nodes: np.ndarray           # the node list then
    saved: dict = field(default_factory=dict)   # slot -> {row name: row}, one by one
    bulk: list = field(default_factory=list)    # [(slots, {row name: rows})], in order
    held: list = field(default_factory=lambda: [None, None])  # per source: (M,) b1 slots
                                                # whose packing rows a bulk save holds


class Transactions:
    """begin / touch / save_packing / rollback / commit over a Context's rows
    (``mutable()`` names the rows packing may change)."""

    __slots__ = ()

    def begin(self) -> None:
        """Start recording: rows are saved the first time a slot is touched."""
        self._tx = _Transaction(self.M, self.nodes.copy())

    def touch(self, m: int, source: int = -1) -> None:
        """Call before changing slot m's rows inside a transaction. ``source``:
        only that source's availability and placement rows and the labels will
        change (a packing commit), so only those are saved; -1: any row may."""
        tx = self._tx
        if tx is not None and m < tx.M:
            saved = tx.saved.get(m)
            if saved is None:
                saved = tx.saved[m] = {}
            # A packing commit of one source changes only that source's rows and
            # the labels; anything else may change any mutable row.
            names = self.mutable() if source < 0 else NARROW[source]
            for s, held in enumerate(tx.held):
                if held is not None and held[m]:      # a bulk save holds these, earlier
                    names = [k for k in names if k not in NARROW[s]]
            for k in names:
                if k not in saved:      # rows not saved yet are still as they began
                    saved[k] = getattr(self, k)[m].copy()
        self.rcls[m] = self.crcls[m] = -1        # changed: no longer anyone's twin
        self.lcls[m] = self.clcls[m] = -2        # its cache key must be looked up again
        self.ghash[m] = np.nan

    def save_packing(self, slots: np.ndarray, source: int) -> None:
        """Inside a transaction, before a packing kernel of ``source`` may change
        these slots: save the rows it can change, in one copy per array (the
        kernel marks what it changes itself, see touch)."""
        tx = self._tx
        if tx is None:
            return
        slots = slots[slots < tx.M]
        held = tx.held[source]
        if held is None:
            held = tx.held[source] = np.zeros(tx.M, bool)
        slots = slots[~held[slots]]
        if not slots.size:
            return
        # A row saved one by one before this one is older: it stays (rollback
        # applies the bulk saves first, then the one-by-one saves).
        tx.bulk.append((slots, {k: getattr(self, k)[slots] for k in NARROW[source]}))
        held[slots] = True

    def rollback(self) -> None:
        tx = self._tx
        for slots, rows in tx.bulk:           # (a slot is in one bulk save per source)
            for k, v in rows.items():
                getattr(self, k)[slots] = v
        for m, rows in tx.saved.items():
            for k, v in rows.items():
                getattr(self, k)[m] = v
        self.M, self.nodes, self._tx = tx.M, tx.nodes, None

    def commit(self) -> None:
        self._tx = None

    def written(self) -> np.ndarray:
        """Inside a transaction, the slots whose rows it may have changed: the ones
        saved, one by one or in bulk, and the ones made since it began."""
        tx = self._tx
        parts = [np.fromiter(tx.saved, np.int64, len(tx.saved)),
                 np.arange(tx.M, self.M, dtype=np.int64)]
        parts += [np.asarray(slots, np.int64) for slots, _ in tx.bulk]
        return np.unique(np.concatenate(parts))

