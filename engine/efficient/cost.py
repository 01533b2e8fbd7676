"""Prices, sizes and the shape fit of node types: how the efficient mode
compares types.

- **Price** per node-hour (``vecsched.engine.solver.prices``): the worker groups'
  prices when all are known, else 1 + GPUs.
- **Size** of a resource vector: the sum over columns of amount / reference,
  the reference being the largest capacity of any configured type in that
  column, so CPU counts, memory bytes and GPUs weigh alike.
- **Shape fit** (multi-resource alignment) of type t for a demand mix D (what
  is pending and may go on t, plus what already runs on nodes of t's kind, GPU
  or not): the fluid scale alpha = min_r cap[t, r] / D[r] says how much of the
  mix one node holds before its first resource runs out; its capacity-equivalent
  is alpha * size(D). Per price, relative to the best type: ``fit`` in (0, 1].
  A type whose CPU-to-GPU ratio matches the mix strands little; one that runs
  out of CPU first (GPUs left idle) scores low. The implicit per-node slots of
  per-node caps are left out of the fit (``fit_ref``): a slot bounds how many units of
  one app a node holds, not its room for the mix, which other apps' units share; in
  the fit it made every type hold the same 1/n of a capped app's n pending replicas,
  so the cheapest node won whatever its shape (measured on the suite's
  ``services_mixgpu``: small 1-GPU nodes that CPU work then took, cost 1.004-1.015 x
  FFD's; without the slot in the fit 0.997-1.006 x). The packing still holds the caps.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.dtypes import Status
from vecsched.engine.model.problem import Problem
from vecsched.engine.solver.prices import price_vector
from .options import EfficientOptions


class Costs:
    def __init__(self, p: Problem, opts: EfficientOptions):
        self.p = p
        self.price = price_vector(p, opts.prices, opts.gpu_weight)
        conf = p.type_configured
        ref = p.type_free[conf].max(axis=0) if conf.any() else np.zeros(p.R)
        self.inv_ref = np.where(ref > 0, 1.0 / np.where(ref > 0, ref, 1.0), 0.0)
        # The shape fit leaves out the implicit per-node slots (per-node caps): a slot
        # limits one app's units on a node, not the node's room for the mix, which
        # other apps' units share (module docstring).
        self.fit_ref = np.where(np.asarray(p.implicit, bool), 0.0, self.inv_ref)
        g = p.gpu_col
        self.type_gpu = (p.type_cap[:, g] > 0) if g >= 0 else np.zeros(p.T, bool)
        # What already runs, by node kind (GPU or not): the stable part of the mix.
        run = (~p.node_outdated) & (p.node_status == Status.RAY_RUNNING)
        used = np.clip(p.node_total - p.node_free, 0.0, None)
        gpu_node = (p.node_total[:, g] > 0) if g >= 0 else np.zeros(p.N, bool)
        self.running = {True: used[run & gpu_node].sum(axis=0),
                        False: used[run & ~gpu_node].sum(axis=0)}
        self.running_by_kind = np.ascontiguousarray([self.running[False], self.running[True]],
                                                    np.float64)
        self.type_free = np.ascontiguousarray(p.type_free, np.float64)

    def size(self, qty: np.ndarray) -> np.ndarray:
        """(S,) normalised size of each row of ``qty`` (S, R)."""
        return np.atleast_2d(qty) @ self.inv_ref

    def fit(self, types: np.ndarray, demand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For the demand mixes ``demand`` (len(types), R) (pending work each type
        may take): (the capacity-equivalent of one node of each type, its shape
        fit per price relative to the best of them) (module docstring)."""
        p = self.p
        cap = p.type_free[types]
        ceq = np.zeros(len(types))
        for j, t in enumerate(types.tolist()):
            D = demand[j] + self.running[bool(self.type_gpu[t])]
            cols = (D > 0) & (cap[j] > 0) & (self.fit_ref > 0)
            if not cols.any():
                continue
            alpha = float((cap[j, cols] / D[cols]).min())
            ceq[j] = alpha * float(D[cols] @ self.fit_ref[cols])
        per_price = ceq / self.price[types] if len(types) else ceq
        top = per_price.max() if len(types) else 0.0
        return ceq, (per_price / top if top > 0 else per_price)
