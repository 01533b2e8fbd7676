"""Resource and label names <-> column ids, in a stable order."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from .dtypes import IMPLICIT_PREFIX


class Vocab:
    """An append-only name -> column mapping, made afresh for each tick.

    Columns are numbered in first-seen order, so encoding the same input twice
    gives the same columns (determinism); a tick's resource columns are then put in
    name order (``build/columns.py``), since a protobuf map's iteration order, and so
    "first seen", can change from one process to the next. No decision depends on the numbering:
    sums follow each map's own order (``node_order``), not the columns'.
    """

    __slots__ = ("_ids", "_names", "_allow_empty")

    def __init__(self, names: Iterable[str] = (), allow_empty: bool = False):
        self._ids: dict[str, int] = {}
        self._names: list[str] = []
        self._allow_empty = allow_empty
        for n in names:
            self.add(n)

    def add(self, name: str) -> int:
        i = self._ids.get(name)
        if i is None:
            if not isinstance(name, str) or not (name or self._allow_empty):
                raise ValueError(f"a resource or label name must be a non-empty string, got {name!r}")
            i = len(self._names)
            self._ids[name] = i
            self._names.append(name)
        return i

    def reordered(self, names: list) -> "Vocab":
        """These names, which are exactly this vocabulary's, numbered in the order
        ``names`` lists them (checked when they were added, so not again)."""
        ids = dict(zip(names, range(len(names))))
        if len(ids) != len(names) or ids.keys() != self._ids.keys():
            raise ValueError("reordered() takes exactly the vocabulary's names, each once")
        out = Vocab(allow_empty=self._allow_empty)
        out._ids, out._names = ids, list(names)
        return out

    def add_many(self, names: list) -> list:
        """``[self.add(n) for n in names]``, new names checked once each."""
        ids = self._ids
        for n in dict.fromkeys(names):           # first-seen order
            if n not in ids:
                self.add(n)
        return list(map(ids.__getitem__, names))

    def get(self, name: str, default: int = -1) -> int:
        return self._ids.get(name, default)

    def __getitem__(self, name: str) -> int:
        return self._ids[name]

    def __contains__(self, name: str) -> bool:
        return name in self._ids

    def __len__(self) -> int:
        return len(self._names)

    @property
    def ids(self) -> dict:
        """The name -> column dict itself (read-only use, for hot loops)."""
        return self._ids

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._names)

    def implicit_mask(self, prefix: str = IMPLICIT_PREFIX) -> np.ndarray:
        """(R,) bool: columns that are Ray implicit resources (missing means 1.0)."""
        return np.array([n.startswith(prefix) for n in self._names], dtype=bool)
