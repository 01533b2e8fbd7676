"""The nodes of a tick as arrays (the hot part of building a Problem).

A pending node is modelled from its type config (docs/ray-semantics.md §2.1 item
4); an outdated one is an empty, already-terminated node; a running node is
read from its GCS maps in bulk: values are gathered into flat lists and
validated with one vector check, and only when something is wrong is the
offending entry located and named.
"""
from __future__ import annotations

from itertools import repeat
from dataclasses import dataclass

import numpy as np

from . import check
from .node_types import TypeArrays
from .columns import TickColumns
from vecsched.engine.model.dtypes import CNT, IDX, PRIVATE_PREFIX, QTY, Status
from vecsched.engine.model.node_columns import NodeColumns, pick
from .screen import Screen
from vecsched.engine.model.problem import ProblemError, order_mask


@dataclass
class Running:
    """The running nodes whose maps are read (outdated ones are not)."""
    rows: np.ndarray        # their Problem rows, ascending
    map_rows: np.ndarray    # their rows in the columns' maps
    maps: tuple             # their (total, available, labels) FlatMaps; the first two
                            # share one name list

    @classmethod
    def of(cls, cols: NodeColumns, scr: Screen) -> "Running":
        rows = np.flatnonzero((scr.status == Status.RAY_RUNNING) & ~scr.outdated)
        map_rows = scr.map_row[rows]        # every one has maps (node_screen)
        return cls(rows, map_rows, (cols.total.take(map_rows, shared=True),
                                    cols.available.take(map_rows, shared=True),
                                    cols.labels.take(map_rows)))


@dataclass
class NodeArrays:
    total: np.ndarray       # (N, R)
    order: np.ndarray       # (N, R) total-resource columns in dict order, -1 padded
    free: np.ndarray        # (N, R) available (1.0: an absent implicit column)
    present: np.ndarray     # (N, R) bool: in the available map
    label: np.ndarray       # (N, Ln) the first Ln label keys (TickColumns.node_keys)
    idle: np.ndarray        # (N,) ms
    has_ray: np.ndarray     # (N,) bool
    launch_hash: list       # (N,)
    private: list           # (N,) ((name, total), ...) held in the pseudo columns
    clamped: int = 0        # available > total entries (quirk Q12)


def node_arrays(cols: NodeColumns, scr: Screen, run: Running, types: TypeArrays,
                c: TickColumns) -> NodeArrays:
    N, R, L = scr.kept.size, len(c.vocab), c.node_keys
    a = NodeArrays(
        total=np.zeros((N, R), dtype=QTY), order=np.full((N, R), -1, dtype=IDX),
        free=np.zeros((N, R), dtype=QTY), present=np.zeros((N, R), dtype=bool),
        label=np.full((N, L), -1, dtype=IDX), idle=np.zeros(N, dtype=CNT),
        has_ray=np.zeros(N, dtype=bool), launch_hash=[""] * N, private=[()] * N)
    pend = np.flatnonzero((scr.status != Status.RAY_RUNNING) & ~scr.outdated)
    if pend.size:                       # modelled from the type config
        t = scr.type[pend]
        a.total[pend] = types.cap[t]
        a.order[pend] = types.order[t]
        a.free[pend] = types.cap[t]
        a.present[pend] = order_mask(types.order[t], R)
        a.label[pend] = types.label[t, :L]
    a.clamped = encode_running(cols, run, scr.kept[run.rows], c, a)
    implicit = c.implicit
    a.free[:, implicit] = np.where(a.present[:, implicit], a.free[:, implicit], 1.0)
    return a


def _spread(rows: np.ndarray, lens: np.ndarray):
    """Each entry's Problem row and its position within its map."""
    rr = np.repeat(rows, lens)
    pos = np.arange(rr.size) - np.repeat(np.cumsum(lens) - lens, lens)
    return rr, pos


def encode_running(cols: NodeColumns, run: Running, inst: np.ndarray, c: TickColumns,
                   out: NodeArrays) -> int:
    """Fill ``out``'s rows of the running nodes ``run`` (instance ``inst``);
    ``c.total_cols`` / ``c.avail_cols``: the columns of their map entries, -1
    for a private one. A node's k-th private resource (first in its totals, then
    in its availability) takes the pseudo column ``PRIVATE_PREFIX + k``.
    Returns how many available > total entries there are (Q12)."""
    rows, map_rows = run.rows, run.map_rows
    lvocab, values = c.lvocab, c.values
    ids = c.vocab.ids
    pseudo = []
    while f"{PRIVATE_PREFIX}{len(pseudo)}" in ids:
        pseudo.append(ids[f"{PRIVATE_PREFIX}{len(pseudo)}"])
    pseudo = np.asarray(pseudo, np.int64)
    tot, avm, lab = run.maps
    (tr, tp), (ar, _) = _spread(rows, tot.lens), _spread(rows, avm.lens)
    tc, ac = c.total_cols, c.avail_cols

    def where(n) -> int:            # the instance of Problem row n (error messages only)
        return int(inst[np.searchsorted(rows, n)])

    tvals = check.checked(tot.vals, lambda j: f"instances[{where(tr[j])}]"
                          f".total_resources[{tot.key_at(j)[0]!r}]")
    avals = check.checked(avm.vals, lambda j: f"instances[{where(ar[j])}]"
                          f".available_resources[{avm.key_at(j)[0]!r}]")
    out.private = _private_columns(tr, ar, tc, ac, tot, avm, tvals, pseudo,
                                   len(out.private))
    if lab.lens.any():                # only the keys a type or request names have columns
        lc = np.fromiter(map(lvocab.ids.get, lab.names, repeat(-1)), np.int64,
                         len(lab.names))[lab.kid]
        keep = np.flatnonzero(lc >= 0)
        if keep.size:
            lv = values.add_many(list(map(str, pick(lab.vals, keep))))
            out.label[np.repeat(rows, lab.lens)[keep], lc[keep]] = lv
    R = out.total.shape[1]              # flat indexes: faster than (row, column) pairs
    at_t, at_a = tr * R + tc, ar * R + ac
    out.total.reshape(-1)[at_t] = tvals
    out.order.reshape(-1)[tr * R + tp] = tc
    out.free.reshape(-1)[at_a] = avals
    out.present.reshape(-1)[at_a] = True
    listed = np.zeros(out.total.size, bool)
    listed[at_t] = True
    tot_at = out.total.reshape(-1)[at_a]
    clamped = int((listed[at_a] & (tot_at > 0) & (avals > tot_at)).sum())
    idle = _idle(cols.idle_ms, map_rows)
    if isinstance(idle, np.ndarray):              # int64 from a bulk reader: checked at once
        plain = not ((idle < 0) | (idle > 1 << 62)).any()
        idle = idle if plain else idle.tolist()   # the loop below names the first bad one
    else:
        plain = set(map(type, idle)) <= {int} and (not idle or 0 <= min(idle)
                                                   and max(idle) <= 1 << 62)
    for n, v in ([] if plain else zip(rows.tolist(), idle)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 or v > 1 << 62:
            raise ProblemError(f"instances[{where(n)}].idle_duration_ms",
                               f"must be a non-negative integer, got {v!r}")
    out.idle[rows] = idle
    node_ids = pick(cols.ray_node_id, map_rows)
    out.has_ray[rows] = True if all(node_ids) else np.fromiter(map(bool, node_ids), bool,
                                                               rows.size)
    hashes = pick(cols.launch_hash, map_rows)
    if not all(hashes) and set(map(type, hashes)) != {str}:   # None (or another empty
        hashes = [h or "" for h in hashes]                      # value) is ""
    out.launch_hash = _scatter(len(out.launch_hash), "", rows, hashes)
    return clamped


def _idle(idle_ms, map_rows: np.ndarray):
    """The idle times of the rows: an int64 array when the columns hold one."""
    if isinstance(idle_ms, np.ndarray) and idle_ms.dtype == np.int64 and idle_ms.ndim == 1:
        return idle_ms[map_rows]
    return pick(idle_ms, map_rows)


def _private_columns(tr, ar, tc, ac, tot, avm, tvals, pseudo, n: int) -> list:
    """Give the private entries (column -1 in ``tc``/``ac``) their pseudo
    columns, in place, and return each of the n nodes' private (name, total)
    pairs. ``tr``/``ar``: the Problem row of each total/available entry."""
    # Private resources: the k-th of a node in its totals takes pseudo column k.
    t_priv = np.flatnonzero(tc < 0)
    names, rank = [], np.zeros(0, np.int64)
    node_private = [()] * n
    if t_priv.size:
        rows_p = tr[t_priv]
        grp_start = np.r_[0, np.flatnonzero(np.diff(rows_p)) + 1]
        start_of = np.repeat(grp_start, np.diff(np.r_[grp_start, t_priv.size]))
        rank = np.arange(t_priv.size) - start_of
        tc[t_priv] = pseudo[rank]
        names = tot.key_at(t_priv)
        pv = tvals[t_priv].tolist()
        pairs = list(zip(zip(names, pv)))                     # ((name, total),) each
        node_private = _scatter(n, (), rows_p, pairs)   # a node with several: one of them
        for j in np.flatnonzero(rank > 0).tolist():   # mostly only the head (its marker):
            first, r = int(start_of[j]), int(rows_p[j])   # all of them, in order
            so_far = pairs[first] if j == first + 1 else node_private[r]
            node_private[r] = so_far + pairs[j]
    a_priv = np.flatnonzero(ac < 0)
    if a_priv.size:                                   # private in the availability map
        if a_priv.size == t_priv.size and np.array_equal(ar[a_priv], tr[t_priv]) \
                and _same_keys(tot, t_priv, avm, a_priv):
            ac[a_priv] = tc[t_priv]       # the same names on the same nodes, in the same order
        else:
            a_names = avm.key_at(a_priv)
            rl = tr[t_priv].tolist()
            pcol = dict(zip(zip(rl, names), tc[t_priv].tolist()))   # (row, name) -> column
            n_mine = dict(zip(rl, (rank + 1).tolist()))  # row -> its private ones so far
            keys = list(zip(ar[a_priv].tolist(), a_names))
            got = list(map(pcol.get, keys))
            for i, (key, col) in enumerate(zip(keys, got)) if None in got else ():
                if col is None:                       # named only in the availability map
                    k = n_mine.get(key[0], 0)
                    col = pcol[key] = int(pseudo[k])
                    n_mine[key[0]] = k + 1
                    got[i] = col
            ac[a_priv] = got
    return node_private


def _same_keys(a, at: np.ndarray, b, bt: np.ndarray) -> bool:
    """Whether entries ``at`` of FlatMaps ``a`` have the keys of entries ``bt`` of
    ``b`` (by key index when the two share their list of distinct names)."""
    if a.names is b.names:
        return bool(np.array_equal(a.kid[at], b.kid[bt]))
    return a.key_at(at) == b.key_at(bt)


def _scatter(n: int, fill, at: np.ndarray, values: list) -> list:
    """A list of n ``fill`` but ``values[j]`` at ``at[j]`` (at a repeated index, one
    of its values: the caller mends those), made through an object array: faster
    than setting item by item."""
    out = np.empty(n, object)
    out.fill(fill)
    out[at] = np.fromiter(values, object, len(values))
    return out.tolist()
