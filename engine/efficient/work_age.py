"""Consolidation's victim ranking by the age of a node's work
(``EfficientOptions.consolidate_rank``), kept across ticks like the stability window.

Ray's request gives a node's used resources in aggregate, never its tasks or when they
started. Across ticks, though, the caller (``EngineScheduler``) sees since when a node
has had work without a break (its *busy period*): no task on it is older than that.
:class:`WorkAge` remembers, per node key (the instance id), when its busy period began
(a node seen idle, absent or not running starts over), and ranks the victims:

- ``"youngest"``: the shortest busy period first. With heavy-tailed run times young
  work is the likeliest to end within the drain deadline, so a drain restarts less.
- ``"oldest"``: the longest first. Old work is the likeliest to run on for long, so a
  drain saves the most node time for what it restarts.
- ``"least-used"`` (the default): no memory; the engine's own order (least used first).

GPU nodes go before nodes without GPUs, then the age, then the share in use, then the
index. The ranking is handed to the engine as ``consolidate_order``; every other rule
is the engine's. Time is the caller's monotonic clock, injected.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from vecsched.engine.model.dtypes import IMPLICIT_PREFIX, PRIVATE_PREFIX, Status

from .options import EfficientOptions

_EPS = 1e-9
RANKS = ("least-used", "youngest", "oldest")


class WorkAge:
    """Per node key, since when it has had work without a break (module docstring)."""

    def __init__(self):
        self.busy_since: dict[str, float] = {}

    def options_for(self, p, keys, opts: EfficientOptions, now_s: float) -> EfficientOptions:
        """``opts`` with ``consolidate_order`` set by the rank (``keys()``: one key per
        node of ``p``, asked for only when a rank with memory is on)."""
        if opts.consolidate_rank == "least-used" or \
                (opts.consolidate <= 0 and opts.consolidate_cpu <= 0):
            self.busy_since.clear()
            return opts
        keys = list(keys())
        if len(keys) != p.N:
            raise ValueError(f"keys: one per node ({p.N}), got {len(keys)}")
        used, share, gpu_node = _use(p)
        busy = (used > _EPS).any(axis=1) & (p.node_status == Status.RAY_RUNNING)
        since = {k: self.busy_since.get(k, float(now_s)) for n, k in enumerate(keys) if busy[n]}
        self.busy_since = since
        age = np.asarray([now_s - since[k] if k in since else 0.0 for k in keys])
        sign = 1.0 if opts.consolidate_rank == "youngest" else -1.0
        idx = np.arange(p.N)
        order = np.lexsort((idx, share, sign * age, ~gpu_node))
        return dataclasses.replace(opts, consolidate_order=tuple(int(n) for n in order))


def _use(p):
    """(used (N, R) of the real columns, share in use, is a GPU node) per node."""
    real = np.asarray([not (r.startswith(IMPLICIT_PREFIX) or r.startswith(PRIVATE_PREFIX))
                       for r in p.resources], bool)
    used = np.where(real[None, :], np.clip(p.node_total - p.node_free, 0.0, None), 0.0)
    g, c = p.gpu_col, p.col("CPU")
    gpus = p.node_total[:, g] if g >= 0 else np.zeros(p.N)
    cpus = p.node_total[:, c] if c >= 0 else np.zeros(p.N)
    share = np.ones(p.N)
    np.divide(used[:, g], gpus, out=share, where=gpus > 0)
    if c >= 0:
        np.divide(used[:, c], cpus, out=share, where=(gpus <= 0) & (cpus > 0))
    return used, share, gpus > 0
