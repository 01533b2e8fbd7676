"""Consolidation's cluster-wide quiet window (``EfficientOptions.consolidate_quiet_s``):
nothing is consolidated until the cluster has been quiet that long - nothing pending
and no node's use risen - so a move is not made while demand is still arriving, only
to see the freed node's type launched again when the next work comes.

The stability window (``stability.py``) asks a *node* to stay low for a while; it does
not see that work is still landing on the other nodes. Across ticks the caller
(``EngineScheduler``) sees both signals of arriving demand that Ray's request carries:
pending demand (shapes, placement groups, a ``request_resources()`` constraint), and
work the raylets placed without the autoscaler (a node's used resources rising, or a
node appearing with work on it). :class:`QuietWindow` remembers each node's use per
resource name (keyed by instance id) and since when neither signal was seen; while
that is shorter than the window, every node is held back (``consolidate_hold``). On a
tick where one of the engine's own drains ended (``drain_memory.py``), a rise is taken
for its work restarting and does not end the quiet. What it cannot see: a pod that
ends and another as large that starts on the same node between two ticks leave the
node's use unchanged. Time is the caller's monotonic clock, injected.
"""
from __future__ import annotations

import dataclasses
from typing import Optional

import numpy as np

from vecsched.engine.model.dtypes import IMPLICIT_PREFIX, PRIVATE_PREFIX, Status

from .options import EfficientOptions

_EPS = 1e-9


class QuietWindow:
    """Since when the cluster has been quiet (module docstring)."""

    def __init__(self):
        self.used: dict[str, dict] = {}
        self.quiet_since: Optional[float] = None

    def options_for(self, p, keys, opts: EfficientOptions, now_s: float,
                    restarted: bool = False) -> EfficientOptions:
        """``opts`` for this tick, every node held back while the cluster has not been
        quiet for ``consolidate_quiet_s`` (``keys()``: one key per node of ``p``, asked
        for only when the window is on). ``restarted``: a drain of the engine's ended
        since the last tick, so a rise in use may be its work restarting, not new demand
        (it does not end the quiet). Off: ``opts`` as they are, nothing remembered."""
        window = opts.consolidate_quiet_s
        if window <= 0 or (opts.consolidate <= 0 and opts.consolidate_cpu <= 0):
            self.used, self.quiet_since = {}, None
            return opts
        keys = list(keys())
        if len(keys) != p.N:
            raise ValueError(f"keys: one per node ({p.N}), got {len(keys)}")
        used = _used_by_name(p, keys)
        rose = not restarted and any(_rose(self.used.get(k, {}), u) for k, u in used.items())
        self.used = used
        if rose or _pending(p) or self.quiet_since is None:
            self.quiet_since = float(now_s)
        if now_s - self.quiet_since >= window:
            return opts
        return dataclasses.replace(opts, consolidate_hold=frozenset(range(p.N)))


def _pending(p) -> bool:
    """The request holds demand: shapes, placement groups or a constraint."""
    return int(p.shape_count.sum()) > 0 or p.G > 0 or bool(p.has_constraint)


def _used_by_name(p, keys) -> dict:
    """Per running node key, its used resources by name (the real columns)."""
    real = [r for r, name in enumerate(p.resources)
            if not (name.startswith(IMPLICIT_PREFIX) or name.startswith(PRIVATE_PREFIX))]
    used = np.clip(p.node_total[:, real] - p.node_free[:, real], 0.0, None)
    names = [p.resources[r] for r in real]
    running = p.node_status == Status.RAY_RUNNING
    return {k: {names[j]: float(v) for j, v in enumerate(used[n]) if v > _EPS}
            for n, k in enumerate(keys) if running[n]}


def _rose(before: dict, now: dict) -> bool:
    """Some resource's use went up (a new node with work counts from nothing)."""
    return any(v > before.get(name, 0.0) + _EPS for name, v in now.items())
