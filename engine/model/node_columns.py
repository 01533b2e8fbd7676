"""A tick's instances as columns: the bulk form ``build_problem`` encodes.

An adapter that reads thousands of instances fills these lists in a few passes
(one attribute over every instance at a time) instead of making one object per
instance; ``NodeColumns.of`` turns a list of ``NodeSpec`` into the same form.
The three maps of a node with a Ray node (total, available, labels) are laid
end to end: their order inside each map is kept (Ray's float sums follow it).
"""
from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, repeat
from operator import getitem, itemgetter
from typing import Optional, Sequence

import numpy as np


def pick(items: Sequence, idx: np.ndarray) -> list:
    """``[items[j] for j in idx]`` at C speed (a slice when ``idx`` is a run of
    consecutive indexes, as every row of a tick often is)."""
    if idx.size == 0:
        return []
    lo = int(idx[0])
    if idx.size > 16 and lo >= 0 and type(items) in (list, tuple) and \
            int(idx[-1]) - lo == idx.size - 1 and lo + idx.size <= len(items) and \
            (np.diff(idx) == 1).all():
        got = items[lo: lo + idx.size]
        return got if type(got) is list else list(got)
    if idx.size > 64 and type(items) in (list, tuple) and 2 * idx.size >= len(items):
        return np.fromiter(items, object, len(items))[idx].tolist()    # most of them
    got = itemgetter(*idx.tolist())(items)
    return [got] if idx.size == 1 else list(got)


def columns(keys: list, ids: dict) -> np.ndarray:
    """The column of each name, -1 for a name ``ids`` lacks."""
    return np.fromiter(map(ids.get, keys, repeat(-1)), np.int64, len(keys))


@dataclass
class FlatMaps:
    """Maps laid end to end: each entry's key as an index into ``names`` (the
    distinct keys in first-seen order; it may hold more, shared with other
    maps), its value (a list, or a float64 array), and each map's length."""
    names: list
    kid: np.ndarray           # int64, one entry per map entry
    vals: Sequence
    lens: np.ndarray          # int64, one entry per map

    @classmethod
    def of(cls, maps: list) -> "FlatMaps":
        """From dicts or protobuf maps; each map's entries in its own iteration
        order, read once."""
        lens = list(map(len, maps))
        keys = list(chain.from_iterable(maps))
        vals = list(map(getitem, chain.from_iterable(map(repeat, maps, lens)), keys))
        pos: dict = {}
        kid = np.fromiter(map(pos.setdefault, keys, map(len, repeat(pos))), np.int64, len(keys))
        return cls(list(pos), kid, vals, np.asarray(lens, np.int64).reshape(len(lens)))

    @classmethod
    def of_pair(cls, first: list, second: list) -> tuple:
        """``of`` of two lists of maps (a node's totals and availabilities) with
        one name list between them."""
        a, b = cls.of(first), cls.of(second)
        pos = dict(zip(a.names, range(len(a.names))))
        remap = np.fromiter(map(pos.setdefault, b.names, map(len, repeat(pos))), np.int64,
                            len(b.names))
        names = list(pos)
        return (cls(names, a.kid, a.vals, a.lens),
                cls(names, remap[b.kid] if b.kid.size else b.kid, b.vals, b.lens))

    @property
    def keys(self) -> list:
        """Every entry's key (made on demand)."""
        return self.key_at(np.arange(self.kid.size))

    def key_at(self, idx: np.ndarray) -> list:
        """The keys of entries ``idx``."""
        return pick(self.names, np.atleast_1d(self.kid[idx]))

    def columns(self, ids: dict) -> np.ndarray:
        """Each entry's column in ``ids`` (-1 for a key it lacks), one look-up
        per distinct key."""
        per_name = columns(self.names, ids)
        return per_name[self.kid] if self.kid.size else np.zeros(0, np.int64)

    def take(self, rows: np.ndarray, shared: bool = False) -> "FlatMaps":
        """The maps at ``rows`` (ascending), in that order. ``names`` become
        only the keys they use, in first-seen order, unless ``shared`` (the
        list is kept, as another FlatMaps uses it too)."""
        if rows.size == self.lens.size:
            return self
        keep = np.zeros(self.lens.size, bool)
        keep[rows] = True
        entries = np.repeat(keep, self.lens)
        vals = (self.vals[entries] if isinstance(self.vals, np.ndarray)
                else [v for v, e in zip(self.vals, entries.tolist()) if e])
        kid = self.kid[entries]
        if shared:
            return FlatMaps(self.names, kid, vals, self.lens[rows])
        used, first, inv = np.unique(kid, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")
        rank = np.empty(order.size, np.int64)
        rank[order] = np.arange(order.size)
        return FlatMaps([self.names[k] for k in used[order].tolist()], rank[inv].reshape(-1),
                        vals, self.lens[rows])


@dataclass
class NodeColumns:
    """Per instance: ``type``, ``status`` (None: no instance-manager record) and
    ``kind``; ``ippr`` an IpprState or None per instance (None for the whole
    list when no instance has one). ``mapped`` lists, ascending, the instances
    whose Ray node is known (GCS totals); ``total``, ``available``, ``labels``,
    ``idle_ms``, ``ray_node_id`` and ``launch_hash`` have one entry per mapped
    instance (``idle_ms`` a list, or an int64 array from a bulk reader)."""
    type: list
    status: list
    kind: list
    mapped: np.ndarray
    total: FlatMaps
    available: FlatMaps
    labels: FlatMaps
    idle_ms: Sequence
    ray_node_id: list
    launch_hash: list
    ippr: Optional[list] = None

    def __len__(self) -> int:
        return len(self.status)

    @classmethod
    def of(cls, nodes) -> "NodeColumns":
        """From a sequence of ``NodeSpec`` (an instance is mapped when its
        ``total`` is given)."""
        if isinstance(nodes, NodeColumns):
            return nodes
        nodes = list(nodes)
        mapped = [i for i, ns in enumerate(nodes) if ns.total is not None]
        on = [nodes[i] for i in mapped]
        ippr = [ns.ippr for ns in nodes]
        total, available = FlatMaps.of_pair([ns.total for ns in on],
                                            [ns.available or {} for ns in on])
        return cls(
            type=[ns.type for ns in nodes], status=[ns.status for ns in nodes],
            kind=[ns.kind for ns in nodes], mapped=np.asarray(mapped, np.int64),
            total=total, available=available,
            labels=FlatMaps.of([ns.labels or {} for ns in on]),
            idle_ms=[ns.idle_ms for ns in on], ray_node_id=[ns.ray_node_id for ns in on],
            launch_hash=[ns.launch_hash for ns in on],
            ippr=ippr if any(s is not None for s in ippr) else None)
