"""KubeRay in-place resize (IPPR) arrays of a tick: the per-node states and each
type's group maximum, checked (docs/ray-semantics.md §4.4, engine/model/ippr.py)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from . import check
from vecsched.engine.model import ippr
from vecsched.engine.model.node_columns import NodeColumns
from .screen import Screen


@dataclass
class IpprArrays:
    nodes: dict             # vecsched.engine.model.ippr.FIELDS -> (N,) / (N, 2) arrays
    type_max: np.ndarray    # (T, 2) group max (CPU, memory), NaN: no group
    values: np.ndarray      # (k, R) every IPPR quantity in its column (exactness check)


def node_states(cols: NodeColumns, scr: Screen) -> list:
    """The IPPR state of each node (None: none attached)."""
    kept = scr.kept.tolist()
    return [cols.ippr[i] for i in kept] if cols.ippr is not None else [None] * len(kept)


def any_ippr(types: Sequence, states: list) -> bool:
    return any(ts.ippr_max is not None for ts in types) or states.count(None) != len(states)


def ippr_arrays(types: Sequence, T: int, states: list, kept: np.ndarray, vocab,
                used: bool) -> IpprArrays:
    """``used``: some type or node has IPPR (then ``vocab`` has CPU and memory)."""
    nodes = ippr.encode(states)
    type_max = np.full((T, 2), np.nan)
    for t, ts in enumerate(types):
        if ts.ippr_max is not None:
            type_max[t] = [check.qty(x, f"ippr_specs.groups[{ts.name!r}].max")
                           for x in ts.ippr_max]
    for key in ("cur", "desired", "max"):
        for n in np.flatnonzero(nodes["attached"]):
            for j, what in enumerate(("cpu", "memory")):
                check.qty(nodes[key][n, j], f"instances[{int(kept[n])}].ippr.{key}_{what}")
    values = np.zeros((0, len(vocab)))
    if used:
        vals = np.concatenate([nodes[k].reshape(-1, 2) for k in ("cur", "desired", "max")]
                              + [np.nan_to_num(type_max)])
        values = np.zeros((vals.shape[0], len(vocab)))
        values[:, vocab["CPU"]] = vals[:, 0]
        values[:, vocab["memory"]] = vals[:, 1]
    return IpprArrays(nodes, type_max, values)
