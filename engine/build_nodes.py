"""Encode the running nodes of a tick in bulk (the hot part of building a Problem).

Values are gathered into flat lists and validated with one vector check; only
when something is wrong is the offending entry located and named.
"""
from __future__ import annotations

from itertools import chain, repeat
from operator import itemgetter, methodcaller

import numpy as np

from .problem import ProblemError


def checked(values: list, where, check) -> np.ndarray:
    """``values`` as float64, every one passing ``check(value, field)`` (which
    raises ProblemError); ``where(j)`` names entry j."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        arr = None
    if arr is not None and arr.ndim == 1:
        bad = ~np.isfinite(arr) | (arr < 0) | (arr > 1e18)
        if not bad.any():
            return arr
        j = int(np.argmax(bad))
        check(values[j], where(j))
    for j, v in enumerate(values):          # a non-number somewhere: find and name it
        check(v, where(j))
    raise AssertionError("unreachable: a bad value passed the check")


def _flat(dicts: list, rows: np.ndarray, ids: dict):
    """Keys, values, Problem rows, positions within their dict, and columns (-1 for
    a name not in the vocabulary) of a list of dicts, gathered at C speed."""
    lens = np.fromiter(map(len, dicts), np.int64, len(dicts))
    keys = list(chain.from_iterable(dicts))
    vals = list(chain.from_iterable(map(methodcaller("values"), dicts)))
    cols = np.fromiter(map(ids.get, keys, repeat(-1)), np.int64, len(keys))
    rr = np.repeat(rows, lens)
    starts = np.cumsum(lens) - lens
    pos = np.arange(len(keys)) - np.repeat(starts, lens)
    return keys, vals, rr, pos, cols


def _pick(items: list, idx: np.ndarray) -> list:
    """``[items[j] for j in idx]`` at C speed."""
    if idx.size == 0:
        return []
    got = itemgetter(*idx.tolist())(items)
    return [got] if idx.size == 1 else list(got)


def encode_running(nodes, kept, rows, vocab, lvocab, values, private, prefix, out, check) -> int:
    """Fill ``out`` arrays (node_total, node_order, node_free, node_present,
    node_label, node_idle, node_has_ray; lists node_hash, node_private) for the
    running nodes at Problem rows ``rows``. A resource not in ``vocab`` is one of
    the node's private ones: its k-th (first in its totals, then in its
    availability) takes the pseudo column ``prefix + k``.
    Returns how many available > total entries there are (quirk Q12)."""
    ids = vocab.ids
    pseudo = []
    while f"{prefix}{len(pseudo)}" in ids:
        pseudo.append(ids[f"{prefix}{len(pseudo)}"])
    pseudo = np.asarray(pseudo, np.int64)
    specs = [nodes[kept[n]] for n in rows]
    rows = np.asarray(rows, np.int64)
    tk, tv, tr, tp, tc = _flat([ns.total for ns in specs], rows, ids)
    ak, av, ar, _, ac = _flat([ns.available or {} for ns in specs], rows, ids)
    tvals = checked(tv, lambda j: f"instances[{kept[tr[j]]}].total_resources[{tk[j]!r}]", check)
    avals = checked(av, lambda j: f"instances[{kept[ar[j]]}].available_resources[{ak[j]!r}]",
                    check)
    # Private resources: the k-th of a node in its totals takes pseudo column k.
    t_priv = np.flatnonzero(tc < 0)
    rl, names, rank = [], [], np.zeros(0, np.int64)
    if t_priv.size:
        rows_p = tr[t_priv]
        grp_start = np.r_[0, np.flatnonzero(np.diff(rows_p)) + 1]
        start_of = np.repeat(grp_start, np.diff(np.r_[grp_start, t_priv.size]))
        rank = np.arange(t_priv.size) - start_of
        tc[t_priv] = pseudo[rank]
        names = _pick(tk, t_priv)
        rl = rows_p.tolist()
        node_private = out["node_private"]
        pv = tvals[t_priv].tolist()
        for n, k, v, r in zip(rl, names, pv, rank.tolist()):   # mostly one each (node:<ip>)
            if r == 0:
                node_private[n] = ((k, v),)
        for j in np.flatnonzero(rank > 0).tolist():   # a second or later one, in order
            node_private[rl[j]] += ((names[j], pv[j]),)
    a_priv = np.flatnonzero(ac < 0)
    if a_priv.size:                                   # private in the availability map
        a_names = _pick(ak, a_priv)
        if a_priv.size == t_priv.size and np.array_equal(ar[a_priv], tr[t_priv]) \
                and a_names == names:
            ac[a_priv] = tc[t_priv]       # the same names on the same nodes, in the same order
        else:
            pcol = dict(zip(zip(rl, names), tc[t_priv].tolist()))   # (row, name) -> column
            n_mine = dict(zip(rl, (rank + 1).tolist()))  # row -> its private ones so far
            keys = list(zip(ar[a_priv].tolist(), a_names))
            got = list(map(pcol.get, keys))
            for i, (key, c) in enumerate(zip(keys, got)) if None in got else ():
                if c is None:                         # named only in the availability map
                    k = n_mine.get(key[0], 0)
                    c = pcol[key] = int(pseudo[k])
                    n_mine[key[0]] = k + 1
                    got[i] = c
            ac[a_priv] = got
    labels = [ns.labels or {} for ns in specs]
    lens = np.fromiter(map(len, labels), np.int64, len(labels))
    if lens.any():
        lc = list(map(lvocab.ids.__getitem__, chain.from_iterable(labels)))
        lv = values.add_many(list(map(str, chain.from_iterable(map(methodcaller("values"), labels)))))
        out["node_label"][np.repeat(rows, lens), lc] = lv
    total, free, present = out["node_total"], out["node_free"], out["node_present"]
    total[tr, tc] = tvals
    out["node_order"][tr, tp] = tc
    free[ar, ac] = avals
    present[ar, ac] = True
    listed = np.zeros(total.shape, bool)
    listed[tr, tc] = True
    tot_at = total[ar, ac]
    clamped = int((listed[ar, ac] & (tot_at > 0) & (avals > tot_at)).sum())
    idle = [ns.idle_ms for ns in specs]
    plain = all(type(v) is int for v in idle) and (not idle or 0 <= min(idle) and max(idle) <= 1 << 62)
    for n, v in ([] if plain else zip(rows.tolist(), idle)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 or v > 1 << 62:
            raise ProblemError(f"instances[{kept[n]}].idle_duration_ms",
                               f"must be a non-negative integer, got {v!r}")
    out["node_idle"][rows] = idle
    out["node_has_ray"][rows] = [bool(ns.ray_node_id) for ns in specs]
    hash_list = out["node_hash"]
    for n, ns in zip(rows.tolist(), specs):
        hash_list[n] = ns.launch_hash or ""
    return clamped
