"""Every sort key of the algorithm, each with the reason it is what it is."""
from __future__ import annotations

import numpy as np

from .context import Context


def request_key(rq, resources, q: int) -> tuple:
    """Ray's request sort key (§4.1), used descending.

    Most placement constraints first, then most label constraints in the first
    selector, then most bundle entries (zero-valued ones count), then the
    largest bundle sum (summed in the bundle's own order, as Ray does), then the
    (name, value) pairs sorted by name - Ray's legacy bin-packing order, kept
    because ties decide which node a request lands on.
    """
    t = rq.table
    present = np.flatnonzero(t.present[q])
    items = sorted((resources[r], float(t.qty[q, r])) for r in present)
    return (int(t.n_pc[q]), t.n_first_selector(q), len(present), float(t.sum[q]), items)


def request_order(rq, resources, runs: list) -> list:
    """Runs (request row, count) in Ray's packing order: a stable descending
    sort, so equal keys keep input order (Ray sorts the count-expanded list, in
    which a run stays contiguous)."""
    keys = {}
    for run in runs:
        q = run[0]
        if q not in keys:
            keys[q] = rq.sort_key(q, lambda q=q: request_key(rq, resources, q))
    return sorted(runs, key=lambda run: keys[run[0]], reverse=True)


def gang_order(gang_key: np.ndarray) -> list[int]:
    """Gangs by (placement constraints over their legacy requests, number of
    those requests), descending and stable: STRICT_* groups and larger groups
    first, which is Ray's order (§3.7)."""
    k = np.asarray(gang_key, np.int64).reshape(-1, 2)
    # A stable ascending sort on the negated keys is the stable descending one.
    return np.lexsort((-k[:, 1], -k[:, 0])).tolist()


def victim_order(ctx: Context, slots: np.ndarray, util: np.ndarray) -> np.ndarray:
    """Slots in Ray's termination-preference order (§3.5), stable ascending by
    (has a ray node id, -idle ms, mean utilisation): nodes not running ray go
    first (cheapest to drop), then the longest idle, then the least used."""
    keys = (util[slots], -ctx.idle[slots], ctx.has_ray[slots].astype(np.int8))
    return slots[np.lexsort(keys)]
