"""Consolidation's stability window (``EfficientOptions.consolidate_after_s``): a node
is a consolidation candidate only once its use has stayed at or below the
consolidation threshold for that long, so a node that just joined, or just lost
most of its work, is never drained at once.

The efficient mode plans one request at a time and a request holds no history, so
the window is kept by whoever calls it across ticks (``EngineScheduler``):
:class:`StabilityWindow` remembers, per node key (the instance id), since when the
node has been low, and each tick gives the options for that tick, with the nodes
still inside their window held back (``consolidate_hold``: indices of this tick's
nodes). A node that is not running, not low, or absent from a tick starts over.
It also applies the daily windows (``consolidate_windows``): outside them every node
is held back. Time is the caller's clocks, injected: monotonic seconds for the
window, wall-clock ns (UTC) for the daily windows.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from vecsched.engine.model.dtypes import IMPLICIT_PREFIX, PRIVATE_PREFIX, Status

from .options import EfficientOptions, in_windows


def low_use(p, opts: EfficientOptions) -> np.ndarray:
    """(N,) bool: running nodes whose use is at or below the consolidation threshold
    (GPU nodes: ``consolidate``; nodes without GPUs: ``consolidate_cpu``)."""
    from .consolidate import _low_use
    real = np.asarray([not (r.startswith(IMPLICIT_PREFIX) or r.startswith(PRIVATE_PREFIX))
                       for r in p.resources], bool)
    used = np.where(real[None, :], np.clip(p.node_total - p.node_free, 0.0, None), 0.0)
    _, low = _low_use(p, used, opts)
    return low & (p.node_status == Status.RAY_RUNNING) & p.node_has_ray


class StabilityWindow:
    """Per node key, since when its use has been low (see the module docstring)."""

    def __init__(self):
        self.low_since: dict[str, float] = {}

    def options_for(self, p, keys, opts: EfficientOptions, now_s: float,
                    wall_ns: Optional[int] = None) -> EfficientOptions:
        """``opts`` for this tick: the nodes (``keys()``: one key per node of ``p``,
        asked for only when the window is on) still inside their window held back. Off (``consolidate_after_s`` 0, or no
        consolidation): ``opts`` as they are, and nothing is remembered."""
        opts = _outside_windows(p, opts, wall_ns)
        window = opts.consolidate_after_s
        if window <= 0 or (opts.consolidate <= 0 and opts.consolidate_cpu <= 0):
            self.low_since.clear()
            return opts
        keys = list(keys())
        if len(keys) != p.N:
            raise ValueError(f"keys: one per node ({p.N}), got {len(keys)}")
        low = low_use(p, opts)
        since = {}
        hold = []
        for n, key in enumerate(keys):
            if not low[n]:
                continue
            t = self.low_since.get(key, float(now_s))
            since[key] = t
            if now_s - t < window:
                hold.append(n)
        self.low_since = since
        return dataclasses.replace(opts, consolidate_hold=opts.consolidate_hold | frozenset(hold))


def _outside_windows(p, opts: EfficientOptions, wall_ns: Optional[int]) -> EfficientOptions:
    """Outside every daily window (``consolidate_windows``, read at ``wall_ns``, UTC),
    every node is held back; the stability window still counts meanwhile."""
    if not opts.consolidate_windows or wall_ns is None:
        return opts
    minute = int(wall_ns // 60_000_000_000) % (24 * 60)
    if in_windows(opts.consolidate_windows, minute):
        return opts
    return dataclasses.replace(opts, consolidate_hold=frozenset(range(p.N)))
