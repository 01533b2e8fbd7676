"""The context's label columns (engine/raycompat/context.py): one per label key a
node carries or a selector names, one per key past those that anti-affinities of
more than one gang or of a plain or constraint request name, and one shared by
the keys only one gang's anti-affinities name.

A placement group with a STRICT_SPREAD strategy names its own key
(``_PG_<hex>``), which no node carries when the tick starts (the Problem keeps
no node column for it, ``Problem.node_label``). Its bundles write it on the
nodes they take and read it to go one per node; nothing else reads it. Such
keys share one column, which the gang packer clears on the nodes a placed gang
wrote it on (``label[m, shared] = -1`` for its winners and launches), so a
1,000-group tick holds one column for them, not 500.

What the next gangs and the plain demand see differs from Ray only in that
column: a node whose one difference from another is a label no later request
reads walks and scores as that node does, so it wins exactly where Ray's
would (Ray's NodeStateCache puts them in two classes, tried at their own
positions; here they share a class, tried by its first member, at its position,
and the next member takes its place when it wins).
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.problem import Problem


def label_columns(p: Problem) -> tuple[np.ndarray, int, int]:
    """(L,) the context column of each label key (-1: a key past the node
    columns that no anti-affinity names, e.g. a STRICT_PACK group's, which packing
    never reads), the context's label width, and the column the single-gang
    anti-affinity keys share (-1: none)."""
    L, w = len(p.label_keys), p.node_label.shape[1]
    cols = np.arange(L, dtype=np.int64)
    if w == L:
        return cols, L, -1
    key = p.req.anti[:, 0].astype(np.int64)
    gang_of = np.repeat(np.arange(p.G), np.diff(p.gang_ptr))
    gk = key[p.gang_req]
    pairs = np.unique(np.stack([gk, gang_of])[:, gk >= w], axis=1)   # (key, gang) once each
    keys, n_gangs = np.unique(pairs[0], return_counts=True)
    own = np.zeros(L, bool)
    own[:w] = True
    own[keys[n_gangs > 1]] = True
    others = np.concatenate([key[: p.S], key[p.con_req]])
    own[others[others >= 0]] = True                     # read by plain or constraint rows
    shared = np.zeros(L, bool)
    shared[keys[n_gangs == 1]] = True
    shared &= ~own
    n_own = int(own.sum())
    cols[:] = -1                                        # keys no anti-affinity names: none
    cols[own] = np.arange(n_own)
    cols[shared] = n_own
    return cols, n_own + int(shared.any()), (n_own if shared.any() else -1)


def mapped_anti(anti: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """The (Q, 2) anti-affinities with their label keys in context columns."""
    out = anti.copy()
    has = out[:, 0] >= 0
    out[has, 0] = cols[out[has, 0]]
    return out
