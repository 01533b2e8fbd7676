"""Which nodes being stopped are disruptions: the memory the disruption budgets need.

Ray's scheduling request says which instances are being drained or stopped
(RAY_STOP_REQUESTED, RAY_STOPPING) but not why. Most of them, on a cluster whose demand
has stopped, are idle nodes reaching their idle timeout: counting those against the
consolidation budget (as a request alone must) holds the budget on most ticks where a
move could run. The engine itself sent those terminations, with their causes, so
whoever calls it across ticks can remember them: :class:`DrainMemory` keeps, per
instance key (the instance id), the cause of every termination the engine sent for a
node where ray ran, for as long as that instance is stopping, and gives each tick the
number of stopping instances that are disruptions - every one whose cause is not
idleness, **unknown causes included** (a drain someone else asked for, e.g. ``ray
drain-node``, or one sent before this memory began: a restarted autoscaler counts every
drain it did not see start, as the request alone would).

An instance is forgotten once it is no longer stopping (gone from the request, or back
to RAY_RUNNING after a rejected drain); ``ended`` counts the disruptions forgotten on
the last tick (what still ran on them restarts elsewhere: the quiet window,
``quiet.py``, does not take that for new demand). Deterministic: no clock is needed.
"""
from __future__ import annotations

import dataclasses

from vecsched.engine.model.dtypes import Cause, Status

from .disruption import stopping_instances
from .options import EfficientOptions


class DrainMemory:
    """Per instance key, the cause of the engine's termination (module docstring)."""

    def __init__(self):
        self.cause: dict[str, int] = {}
        self.ended = 0          # disruptions of the engine's that ended since the last tick

    def options_for(self, p, key_of, opts: EfficientOptions) -> EfficientOptions:
        """``opts`` with ``consolidate_disrupting`` set: the stopping instances of ``p``
        whose cause is not known to be idleness. ``key_of(i)``: the key of the
        request's instance ``i`` (``Problem.node_source`` numbering). Off (no budget
        in use: no consolidation and no outdated budget): ``opts`` as they are, and
        nothing is remembered."""
        if not _budgets_on(opts):
            self.cause.clear()
            self.ended = 0
            return opts
        keys = [key_of(i) for i in stopping_instances(p)]
        kept = {k: self.cause[k] for k in keys if k in self.cause}
        self.ended = sum(1 for k, c in self.cause.items() if k not in kept and c != Cause.IDLE)
        self.cause = kept
        n = sum(1 for k in keys if self.cause.get(k) != Cause.IDLE)
        return dataclasses.replace(opts, consolidate_disrupting=n)

    def remember(self, p, plan, key_of, opts) -> None:
        """Keep the causes of the plan's terminations of nodes where ray runs (the ones
        that become RAY_STOP_REQUESTED)."""
        if opts is None or not _budgets_on(opts):
            return
        for n, cause, status in zip(plan.term_node.tolist(), plan.term_cause.tolist(),
                                    plan.term_status.tolist()):
            if n < p.N and status == Status.RAY_RUNNING:
                self.cause[key_of(int(p.node_source[n]))] = int(cause)


def _budgets_on(opts: EfficientOptions) -> bool:
    """A disruption budget is in use: consolidation is on, or outdated nodes have one."""
    return (opts.consolidate > 0 or opts.consolidate_cpu > 0 or opts.outdated_budget > 0
            or opts.outdated_budget_pct > 0)
