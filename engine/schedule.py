"""One tick: Problem in, Plan out, through the policy registry and the seam every
policy shares (``vecsched.engine.tick``)."""
from __future__ import annotations

import gc

from vecsched.engine.model.plan import Plan
from vecsched.engine.model.problem import Problem
from vecsched.engine.tick import POLICIES, Limits, TickInputs, run

MODES = tuple(POLICIES)


def schedule(problem: Problem, *, mode: str = "ray-compat",
             pending_since: dict | None = None, now_s: float = 0.0, options=None,
             limits: Limits | None = None, unavailable=frozenset(),
             probing=frozenset(), room=None) -> Plan:
    """Decide launches, terminations and infeasible demand for one tick.

    ``mode`` "ray-compat" reproduces Ray 2.60's ResourceDemandScheduler decision
    for decision (with the crash-class quirks fixed, see docs/ray-compat.md).
    ``pending_since`` / ``now_s``: the per-type timestamps of unneeded pending
    nodes from the previous tick and the current monotonic time (§5.1); the new
    timestamps come back in ``plan.pending_since``. The input is not modified.

    ``mode`` "efficient" (``vecsched.engine.efficient``, opt-in, not Ray-exact) chooses for
    cost; ``options`` is its ``EfficientOptions``. ``mode`` "baseline" is the
    first-fit-decreasing yardstick (``vecsched.engine.baseline``).

    ``limits`` (``vecsched.engine.tick.Limits``): caps on resource totals and cost
    per hour, for every mode; ``unavailable``: worker groups the availability
    memory holds out (``vecsched.engine.tick.AvailabilityMemory``), read by the
    efficient mode and the baseline (ray-compat reads Ray's availability scores,
    which are part of the Problem); ``probing``: groups that may launch one node
    (their hold ended, nothing of theirs landed since); ``room``: group -> the
    launches it may make (below the cap the memory learned). With none of these, the
    policy runs on the Problem as given. See docs/capacity.md.
    """
    inputs = TickInputs(options=options, pending_since=pending_since, now_s=now_s,
                        limits=limits, unavailable=frozenset(unavailable or ()),
                        probing=frozenset(probing or ()), room=dict(room or {}))
    # The cyclic garbage collector is paused for the tick: a tick makes many small
    # containers that die with it (the efficient mode's passes some 75,000 at 50k
    # nodes), and the collections they trigger scan them for cycles the tick does
    # not make (56 ms of a 0.92 s tick). Anything cyclic is collected after it.
    paused = gc.isenabled()
    gc.disable()
    try:
        return run(problem, mode, inputs)
    finally:
        if paused:
            gc.enable()
