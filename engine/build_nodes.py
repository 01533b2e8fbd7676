"""Encode the running nodes of a tick in bulk (the hot part of building a Problem).

Values are gathered into flat lists and validated with one vector check; only
when something is wrong is the offending entry located and named.
"""
from __future__ import annotations

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


def encode_running(nodes, kept, rows, vocab, lvocab, values, private, prefix, out, check) -> int:
    """Fill ``out`` arrays (node_total, node_order, node_free, node_present,
    node_label, node_idle, node_has_ray; lists node_hash, node_private) for the
    running nodes at Problem rows ``rows``. Returns how many available > total
    entries there are (quirk Q12)."""
    tr, tc, tv, tk = [], [], [], []
    ar, ac, av, ak = [], [], [], []
    order = out["node_order"]
    for n in rows:
        ns = nodes[kept[n]]
        avail = ns.available or {}
        col, j = {}, 0
        for k in dict.fromkeys([*ns.total, *avail]):
            if k in private:
                col[k] = vocab[f"{prefix}{j}"]
                j += 1
            else:
                col[k] = vocab[k]
        ks = list(ns.total)
        cs = [col[k] for k in ks]
        order[n, : len(cs)] = cs
        tr += [n] * len(ks); tc += cs; tv += list(ns.total.values()); tk += ks
        aks = list(avail)
        ar += [n] * len(aks); ac += [col[k] for k in aks]; av += list(avail.values()); ak += aks
        if j:
            out["node_private"][n] = tuple((k, float(ns.total[k])) for k in ks if k in private)
        for k, v in (ns.labels or {}).items():
            out["node_label"][n, lvocab[k]] = values.add(str(v))
        out["node_hash"][n] = ns.launch_hash or ""
        out["node_has_ray"][n] = bool(ns.ray_node_id)
    tvals = checked(tv, lambda j: f"instances[{kept[tr[j]]}].total_resources[{tk[j]!r}]", check)
    avals = checked(av, lambda j: f"instances[{kept[ar[j]]}].available_resources[{ak[j]!r}]",
                    check)
    total, free, present = out["node_total"], out["node_free"], out["node_present"]
    total[tr, tc] = tvals
    free[ar, ac] = avals
    present[ar, ac] = True
    listed = np.zeros(total.shape, bool)
    listed[tr, tc] = True
    a_rows, a_cols = np.asarray(ar, np.int64), np.asarray(ac, np.int64)
    tot_at = total[a_rows, a_cols]
    clamped = int((listed[a_rows, a_cols] & (tot_at > 0) & (avals > tot_at)).sum())
    idle = [nodes[kept[n]].idle_ms for n in rows]
    for n, v in zip(rows, idle):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0 or v > 1 << 62:
            raise ProblemError(f"instances[{kept[n]}].idle_duration_ms",
                               f"must be a non-negative integer, got {v!r}")
    out["node_idle"][rows] = idle
    return clamped
