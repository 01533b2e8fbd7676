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
from operator import getitem
from typing import Optional

import numpy as np


@dataclass
class FlatMaps:
    """Maps laid end to end: all keys, all values, and each map's length."""
    keys: list
    vals: list
    lens: np.ndarray          # int64, one entry per map

    @classmethod
    def of(cls, maps: list) -> "FlatMaps":
        """From dicts or protobuf maps; each map's entries in its own iteration
        order, read once."""
        lens = list(map(len, maps))
        keys = list(chain.from_iterable(maps))
        vals = list(map(getitem, chain.from_iterable(map(repeat, maps, lens)), keys))
        return cls(keys, vals, np.asarray(lens, np.int64).reshape(len(lens)))

    def take(self, rows: np.ndarray) -> "FlatMaps":
        """The maps at ``rows`` (ascending), in that order."""
        if rows.size == self.lens.size:
            return self
        keep = np.zeros(self.lens.size, bool)
        keep[rows] = True
        entries = np.repeat(keep, self.lens).tolist()
        return FlatMaps([k for k, e in zip(self.keys, entries) if e],
                        [v for v, e in zip(self.vals, entries) if e], self.lens[rows])


@dataclass
class NodeColumns:
    """Per instance: ``type``, ``status`` (None: no instance-manager record) and
    ``kind``; ``ippr`` an IpprState or None per instance (None for the whole
    list when no instance has one). ``mapped`` lists, ascending, the instances
    whose Ray node is known (GCS totals); ``total``, ``available``, ``labels``,
    ``idle_ms``, ``ray_node_id`` and ``launch_hash`` have one entry per mapped
    instance."""
    type: list
    status: list
    kind: list
    mapped: np.ndarray
    total: FlatMaps
    available: FlatMaps
    labels: FlatMaps
    idle_ms: list
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
        return cls(
            type=[ns.type for ns in nodes], status=[ns.status for ns in nodes],
            kind=[ns.kind for ns in nodes], mapped=np.asarray(mapped, np.int64),
            total=FlatMaps.of([ns.total for ns in on]),
            available=FlatMaps.of([ns.available or {} for ns in on]),
            labels=FlatMaps.of([ns.labels or {} for ns in on]),
            idle_ms=[ns.idle_ms for ns in on], ray_node_id=[ns.ray_node_id for ns in on],
            launch_hash=[ns.launch_hash for ns in on],
            ippr=ippr if any(s is not None for s in ippr) else None)
