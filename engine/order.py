"""Every sort key of the algorithm, each with the reason it is what it is."""
from __future__ import annotations

import numpy as np

from .context import Context
from .problem import Problem


def request_key(p: Problem, s: int) -> tuple:
    """Ray's request sort key (§4.1), used descending.

    Most placement constraints first, then most label constraints in the first
    selector, then most bundle entries (zero-valued ones count), then the
    largest bundle sum (summed in the bundle's own order, as Ray does), then the
    (name, value) pairs sorted by name - Ray's legacy bin-packing order, kept
    because ties decide which node a request lands on.
    """
    present = np.flatnonzero(p.shape_present[s])
    items = sorted((p.resources[r], float(p.shape_qty[s, r])) for r in present)
    return (0, 0, len(present), float(p.shape_sum[s]), items)


def request_order(p: Problem, runs) -> list[int]:
    """Runs in Ray's packing order: stable descending sort, so equal keys keep
    input order (Ray sorts the count-expanded list; a run stays contiguous)."""
    keys = {s: request_key(p, s) for s in runs}
    return sorted(runs, key=keys.__getitem__, reverse=True)


def victim_order(ctx: Context, slots: np.ndarray, util: np.ndarray) -> np.ndarray:
    """Slots in Ray's termination-preference order (§3.5), stable ascending by
    (has a ray node id, -idle ms, mean utilisation): nodes not running ray go
    first (cheapest to drop), then the longest idle, then the least used."""
    keys = (util[slots], -ctx.idle[slots], ctx.has_ray[slots].astype(np.int8))
    return slots[np.lexsort(keys)]
