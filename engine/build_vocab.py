"""The resource and label columns of one tick.

Every name a configured type or a request uses gets a column. A name of the
running nodes' maps gets one too when more than one node names it (or it is an
implicit resource); a name only one node has (a raylet's ``node:<ip>``) is that
node's private resource: it decides nothing a request could see, so each node's
k-th private resource shares the pseudo column ``PRIVATE_PREFIX + k`` instead of
widening every row (engine/build_nodes.py fills them).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .dtypes import IMPLICIT_PREFIX, PRIVATE_PREFIX
from .node_columns import FlatMaps
from .requests import collect_names
from .vocab import Vocab


@dataclass
class TickColumns:
    vocab: Vocab           # resource name -> column
    lvocab: Vocab          # label key -> label column
    values: Vocab          # label value -> id ("" is a value: placement-group markers)
    total_cols: np.ndarray     # column of each entry of the running nodes' total maps
    avail_cols: np.ndarray     # ... of their available maps (-1: a private resource)


def tick_columns(types, maps: tuple, specs: list, any_ippr: bool, vocab=None,
                 label_vocab=None) -> TickColumns:
    """Columns for the configured ``types``, the running nodes' ``maps`` (total,
    available, labels FlatMaps sharing one name list between the first two) and
    the request ``specs``; ``vocab`` / ``label_vocab``: columns to start from."""
    vocab = Vocab(vocab.names) if vocab is not None else Vocab()
    lvocab = Vocab(label_vocab.names) if label_vocab is not None else Vocab()
    values = Vocab(allow_empty=True)
    for ts in types:
        for k in ts.resources:
            vocab.add(k)
        for k in ts.labels:
            lvocab.add(k)
    lvocab.add_many(maps[2].names)
    collect_names(specs, vocab, lvocab)
    tc, ac = maps[0].columns(vocab.ids), maps[1].columns(vocab.ids)
    known = len(vocab)
    named, n_private = new_names(maps[0], maps[1], tc, ac, IMPLICIT_PREFIX)
    for k in named:
        vocab.add(k)
    for j in range(n_private):
        vocab.add(f"{PRIVATE_PREFIX}{j}")
    if any_ippr:                        # in-place resizes name CPU and memory
        vocab.add("CPU")
        vocab.add("memory")
    if len(vocab) > known:              # names that got a column since
        tc, ac = maps[0].columns(vocab.ids), maps[1].columns(vocab.ids)
    return TickColumns(vocab, lvocab, values, tc, ac)


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
