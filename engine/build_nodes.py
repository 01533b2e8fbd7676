"""Encode the running nodes of a tick in bulk (the hot part of building a Problem).

Values are gathered into flat lists and validated with one vector check; only
when something is wrong is the offending entry located and named.
"""
from __future__ import annotations

from collections import deque
from operator import itemgetter

import numpy as np

from .node_columns import FlatMaps, NodeColumns
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


def _pick(items: list, idx: np.ndarray) -> list:
    """``[items[j] for j in idx]`` at C speed."""
    if idx.size == 0:
        return []
    got = itemgetter(*idx.tolist())(items)
    return [got] if idx.size == 1 else list(got)


def new_names(tot: FlatMaps, av: FlatMaps, tc: np.ndarray, ac: np.ndarray, implicit_prefix: str):
    """The resource names of the running nodes' maps without a column (``tc``,
    ``ac``: their columns, -1 for none; ``tot`` and ``av`` share one name list).
    Returns (the names that get a column, in first-seen order node by node -
    each node's totals first, then the names only its availability has -; the
    most private names one node has: names one node alone has, not implicit,
    share pseudo columns)."""
    if tot.names is not av.names:
        raise ValueError("total and available maps must share their names (FlatMaps.of_pair)")
    tu, au = np.flatnonzero(tc < 0), np.flatnonzero(ac < 0)
    if tu.size == 0 and au.size == 0:
        return [], 0
    rows = np.repeat(np.arange(tot.lens.size), tot.lens)[tu]
    a_rows = np.repeat(np.arange(av.lens.size), av.lens)[au]
    ids, a_ids = tot.kid[tu], av.kid[au]
    if not (np.array_equal(rows, a_rows) and np.array_equal(ids, a_ids)):   # node:<ip> in both
        width = len(tot.names)
        only = ~np.isin(a_rows * width + a_ids, rows * width + ids)
        rows = np.concatenate([rows, a_rows[only]])
        ids = np.concatenate([ids, a_ids[only]])
        order = np.lexsort((np.arange(rows.size), rows))    # node by node, totals first
        rows, ids = rows[order], ids[order]
    # a node names a resource once (totals, or availability only): count nodes
    per_name = np.bincount(ids, minlength=len(tot.names))
    distinct, first = np.unique(ids, return_index=True)
    distinct = distinct[np.argsort(first, kind="stable")]         # first-seen order
    names = tot.names
    shared = [k for k in distinct.tolist()
              if per_name[k] > 1 or names[k].startswith(implicit_prefix)]
    mine = ~np.isin(ids, shared) if shared else np.ones(ids.size, bool)
    most = int(np.bincount(rows[mine]).max()) if mine.any() else 0
    return [names[k] for k in shared], most


def _spread(rows: np.ndarray, lens: np.ndarray):
    """Each entry's Problem row and its position within its map."""
    rr = np.repeat(rows, lens)
    pos = np.arange(rr.size) - np.repeat(np.cumsum(lens) - lens, lens)
    return rr, pos


def encode_running(cols: NodeColumns, map_rows: np.ndarray, rows: np.ndarray, inst: np.ndarray,
                   maps: tuple, cols_of: tuple, vocab, lvocab, values, prefix, out,
                   check) -> int:
    """Fill ``out`` arrays (node_total, node_order, node_free, node_present,
    node_label, node_idle, node_has_ray; lists node_hash, node_private) for the
    running nodes at Problem rows ``rows`` (instance ``inst``, row ``map_rows``
    of the columns' maps; ``maps`` their (total, available, labels) FlatMaps and
    ``cols_of`` the columns of the first two's entries in the final vocabulary,
    -1 for a private one).
    A resource not in ``vocab`` is one of the node's private ones: its k-th
    (first in its totals, then in its availability) takes the pseudo column
    ``prefix + k``. Returns how many available > total entries there are (Q12)."""
    ids = vocab.ids
    pseudo = []
    while f"{prefix}{len(pseudo)}" in ids:
        pseudo.append(ids[f"{prefix}{len(pseudo)}"])
    pseudo = np.asarray(pseudo, np.int64)
    tot, avm, lab = maps
    (tr, tp), (ar, _) = _spread(rows, tot.lens), _spread(rows, avm.lens)
    tc, ac = cols_of

    def where(n) -> int:            # the instance of Problem row n (error messages only)
        return int(inst[np.searchsorted(rows, n)])

    tvals = checked(tot.vals, lambda j: f"instances[{where(tr[j])}]"
                    f".total_resources[{tot.key_at(j)[0]!r}]", check)
    avals = checked(avm.vals, lambda j: f"instances[{where(ar[j])}]"
                    f".available_resources[{avm.key_at(j)[0]!r}]", check)
    # Private resources: the k-th of a node in its totals takes pseudo column k.
    t_priv = np.flatnonzero(tc < 0)
    rl, names, rank = [], [], np.zeros(0, np.int64)
    if t_priv.size:
        rows_p = tr[t_priv]
        grp_start = np.r_[0, np.flatnonzero(np.diff(rows_p)) + 1]
        start_of = np.repeat(grp_start, np.diff(np.r_[grp_start, t_priv.size]))
        rank = np.arange(t_priv.size) - start_of
        tc[t_priv] = pseudo[rank]
        names = tot.key_at(t_priv)
        rl = rows_p.tolist()
        node_private = out["node_private"]
        pv = tvals[t_priv].tolist()
        pairs = list(zip(zip(names, pv)))                     # ((name, total),) each
        later = np.flatnonzero(rank > 0).tolist()     # mostly none: one each (node:<ip>)
        first = np.flatnonzero(rank == 0).tolist() if later else range(len(rl))
        _set_all(node_private, [rl[j] for j in first], [pairs[j] for j in first])
        for j in later:                               # a second or later one, in order
            node_private[rl[j]] += pairs[j]
    a_priv = np.flatnonzero(ac < 0)
    if a_priv.size:                                   # private in the availability map
        a_names = avm.key_at(a_priv)
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
    if lab.lens.any():
        lc = np.asarray([lvocab.ids[k] for k in lab.names], np.int64)[lab.kid]
        lv = values.add_many(list(map(str, lab.vals)))
        out["node_label"][np.repeat(rows, lab.lens), lc] = lv
    total, free, present = out["node_total"], out["node_free"], out["node_present"]
    total[tr, tc] = tvals
    out["node_order"][tr, tp] = tc
    free[ar, ac] = avals
    present[ar, ac] = True
    listed = np.zeros(total.shape, bool)
    listed[tr, tc] = True
    tot_at = total[ar, ac]
    clamped = int((listed[ar, ac] & (tot_at > 0) & (avals > tot_at)).sum())
    idle = _pick(cols.idle_ms, map_rows)
    plain = set(map(type, idle)) <= {int} and (not idle or 0 <= min(idle) and max(idle) <= 1 << 62)
    for n, v in ([] if plain else zip(rows.tolist(), idle)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 or v > 1 << 62:
            raise ProblemError(f"instances[{where(n)}].idle_duration_ms",
                               f"must be a non-negative integer, got {v!r}")
    out["node_idle"][rows] = idle
    out["node_has_ray"][rows] = np.fromiter(map(bool, _pick(cols.ray_node_id, map_rows)), bool,
                                            rows.size)
    hashes = [h or "" for h in _pick(cols.launch_hash, map_rows)]
    hash_list = out["node_hash"]
    _set_all(hash_list, rows.tolist(), hashes)
    return clamped


def _set_all(items: list, at: list, values: list) -> None:
    """``items[at[j]] = values[j]`` for every j, at C speed."""
    deque(map(items.__setitem__, at, values), maxlen=0)
