"""The resource and label columns of one tick: only what the tick names.

Every name a configured type or a request uses gets a column (a request fits
only where the column holds enough, docs/ray-semantics.md §4.7). A name only the
running nodes' maps use gets one when it decides more than its own node's
score: ``GPU`` (Ray's GPU avoidance looks for it), an implicit resource, or a
name more than one node has - unless it is a placement-group bundle resource
(``CPU_group_<pg>``, ``CPU_group_<i>_<pg>``, ``bundle_group_...``), which the GCS
adds per placed bundle and which churns with every group. Every other name is
its node's private resource: no request names it, so it only enters that node's
utilisation score, victim order and cluster total, and each node's k-th private
resource shares the pseudo column ``PRIVATE_PREFIX + k`` (build_nodes.py fills
them, in the node's own dict order) instead of widening every row. The columns
are made afresh each tick, so a name no type, request or node uses any more
has no column: the width follows the tick, not the history of the cluster.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vecsched.engine.model.dtypes import GPU, IMPLICIT_PREFIX, PRIVATE_PREFIX
from vecsched.engine.model.node_columns import FlatMaps, columns, pick
from vecsched.engine.model.requests import collect_names
from vecsched.engine.model.vocab import Vocab


# The node label that opts a node out of consolidation (``engine/efficient/
# disruption.py``): kept as a label column when a node carries it, though no request
# reads it.
DO_NOT_DISRUPT = "vecsched.io/do-not-disrupt"


@dataclass
class TickColumns:
    vocab: Vocab           # resource name -> column
    lvocab: Vocab          # label key -> label column: only the keys types and requests
                           # name (selectors, placement constraints); a node label no
                           # request reads decides nothing (placement groups add one each)
    node_keys: int         # the first node_keys label keys are the ones a node can carry
                           # at the start of the tick (node_label's width); the others
                           # are named only by placement constraints and carried by no
                           # node, type or selector (a pending placement group's own
                           # ``_PG_<hex>``, one per group with a STRICT strategy)
    values: Vocab          # label value -> id ("" is a value: placement-group markers)
    total_cols: np.ndarray     # column of each entry of the running nodes' total maps
    avail_cols: np.ndarray     # ... of their available maps (-1: a private resource)
    implicit: np.ndarray       # (R,) bool: implicit resources (missing means 1.0)


def tick_columns(types, maps: tuple, specs: list, any_ippr: bool,
                 implicit_prefix: str = IMPLICIT_PREFIX) -> TickColumns:
    """Columns for the configured ``types``, the running nodes' ``maps`` (total,
    available, labels FlatMaps sharing one name list between the first two) and
    the request ``specs``; names starting with ``implicit_prefix`` are Ray's
    implicit resources."""
    # The resource columns end in name order, whatever order the input's maps list their
    # names in (a protobuf map iterates in an order that can change from one process to
    # the next): the efficient mode sums across columns (sizes, dot products), and a
    # different order could round differently and tip a tie (same input, same plan).
    vocab, lvocab, values = Vocab(), Vocab(), Vocab(allow_empty=True)
    for ts in types:
        for k in ts.resources:
            vocab.add(k)
        for k in ts.labels:
            lvocab.add(k)
    collect_names(specs, vocab, lvocab)
    if len(maps) > 2 and DO_NOT_DISRUPT in maps[2].names:
        lvocab.add(DO_NOT_DISRUPT)      # read by the efficient mode's consolidation
    lvocab, node_keys = _node_keys_first(lvocab, types, maps, specs)
    # Names in several nodes' totals that are not bundle resources get a column
    # (object_store_memory, accelerator markers): one count finds them, so only
    # the rare rest goes through new_names entry by entry.
    names = maps[0].names
    for k in np.flatnonzero(np.bincount(maps[0].kid, minlength=len(names)) > 1).tolist():
        if "_group_" not in names[k]:
            vocab.add(names[k])
    first = (dict(vocab.ids), columns(maps[0].names, vocab.ids))
    tc, ac = _pair_columns(maps[0], maps[1], first[1])
    known = len(vocab)
    named, n_private = new_names(maps[0], maps[1], tc, ac, implicit_prefix)
    for k in named:
        vocab.add(k)
    for j in range(n_private):
        vocab.add(f"{PRIVATE_PREFIX}{j}")
    if any_ippr:                        # in-place resizes name CPU and memory
        vocab.add("CPU")
        vocab.add("memory")
    names = vocab.names
    if list(names) != sorted(names):    # canonical order (below)
        vocab = Vocab(sorted(names))
        known = -1
    if len(vocab) > known:              # names that got a column since (or a new order)
        tc, ac = _pair_columns(maps[0], maps[1], _columns_since(maps[0].names, vocab.ids,
                                                                *first))
    return TickColumns(vocab, lvocab, node_keys, values, tc, ac,
                       vocab.implicit_mask(implicit_prefix))


def _pair_columns(tot: FlatMaps, av: FlatMaps, per_name: np.ndarray) -> tuple:
    """The columns of the totals' and the availabilities' entries, from the
    column of each of their (shared) names."""
    if tot.names is not av.names:
        raise ValueError("total and available maps must share their names (FlatMaps.of_pair)")
    return tuple(per_name[f.kid] if f.kid.size else np.zeros(0, np.int64) for f in (tot, av))


def _columns_since(names: list, ids: dict, old_ids: dict, old: np.ndarray) -> np.ndarray:
    """``columns(names, ids)`` from ``old`` = ``columns(names, old_ids)``: the
    old columns renumbered, and only the names ``ids`` added looked up (a
    tick's node names are ten thousands, the names added a few)."""
    remap = np.full(len(old_ids) + 1, -1, np.int64)          # [-1] stays -1
    for name, col in old_ids.items():
        remap[col] = ids.get(name, -1)
    out = remap[old]
    for name in ids.keys() - old_ids.keys():
        try:
            out[names.index(name)] = ids[name]      # names are distinct (FlatMaps)
        except ValueError:
            pass
    return out


def _node_keys_first(lvocab: Vocab, types, maps: tuple, specs: list) -> tuple:
    """The label keys with the ones a node can carry first (a type's, a running
    node's, a selector's: their order kept), then the ones only placement
    constraints name (their order kept); and how many of the first kind. A
    placement group pending with a STRICT strategy names its own key, which no
    node carries yet: kept out of the node rows, a tick of G such groups does
    not hold an (N, G) label matrix."""
    held = {k for ts in types for k in ts.labels}
    if len(maps) > 2 and maps[2].kid.size:
        names = maps[2].names
        used = np.flatnonzero(np.bincount(maps[2].kid, minlength=len(names)))
        held.update(pick(names, used))
    for rs in [rs for rs in specs if rs.label_selectors]:     # a spec twice: same keys
        for sel in rs.label_selectors:
            held.update(con[0] for con in sel)
    names = lvocab.names
    first = [k for k in names if k in held]
    if len(first) == len(names):
        return lvocab, len(names)
    return lvocab.reordered(first + [k for k in names if k not in held]), len(first)


def _prefixed(names: list, prefix: str) -> set:
    """The indexes of the names that start with ``prefix``, found in one pass over
    the names joined by NUL (one by one when a name holds a NUL)."""
    joined = "\x00" + "\x00".join(names)
    if joined.count("\x00") != len(names):
        return {k for k, name in enumerate(names) if name.startswith(prefix)}
    at, pat = [], "\x00" + prefix
    i = joined.find(pat)
    while i >= 0:
        at.append(i)
        i = joined.find(pat, i + 1)
    if not at:                              # the usual tick: no implicit resource
        return set()
    starts = np.cumsum([0] + [len(name) + 1 for name in names[:-1]])
    return set(np.searchsorted(starts, np.asarray(at, np.int64)).tolist())


def new_names(tot: FlatMaps, av: FlatMaps, tc: np.ndarray, ac: np.ndarray,
              implicit_prefix: str = IMPLICIT_PREFIX):
    """The resource names of the running nodes' maps without a column (``tc``,
    ``ac``: their columns, -1 for none; ``tot`` and ``av`` share one name list).
    Returns (the names that get a column - GPU, implicit resources, and names
    more than one node has that are not placement-group bundle resources (their
    names hold ``_group_``, the test Ray's own autoscaler uses) - in first-seen order
    node by node, each node's totals first, then the names only its
    availability has; the most private names one node has: the others share
    pseudo columns)."""
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
    # GPU, implicit resources, and names of several nodes that are not bundle
    # resources (the usual distinct name is a node's own: one set look-up each)
    many = {k for k in np.flatnonzero(per_name > 1).tolist() if "_group_" not in names[k]}
    many |= _prefixed(names, implicit_prefix)
    if GPU in names:
        many.add(names.index(GPU))
    shared = (distinct[np.isin(distinct, np.fromiter(many, np.int64, len(many)))].tolist()
              if many else [])
    mine = ~np.isin(ids, shared) if shared else np.ones(ids.size, bool)
    most = int(np.bincount(rows[mine]).max()) if mine.any() else 0
    return [names[k] for k in shared], most

