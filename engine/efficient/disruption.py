"""Who consolidation may disrupt, and how many at once: the opt-outs and the budget.

- **Opt-outs.** A node carrying the label ``vecsched.io/do-not-disrupt`` (any value;
  ``DO_NOT_DISRUPT``, which the model keeps as a label column whenever a node carries
  it) or of a worker type named in ``consolidate_opt_out_types`` is never a
  consolidation victim.
- **Budget.** At most ``consolidate_budget`` nodes disrupted at once, and with
  ``consolidate_budget_pct`` > 0 at most that share of the running ray nodes (rounded
  down, at least 1): the smaller wins. Nodes the tick sees as being drained
  (RAY_STOP_REQUESTED) count against it, whatever asked for the drain, as do the
  busy-or-not nodes this tick already terminates, other than for idleness, while ray
  runs on them (an outdated node is a disruption too).

- **Per reason.** The budget above is consolidation's. Outdated nodes (a running
  node whose launch config changed, or whose type is gone: Karpenter's drift) have
  their own, ``outdated_budget`` / ``outdated_budget_pct`` (0: no limit, every outdated
  node is replaced at once as Ray does). Either budget counts every node being
  disrupted, whatever the reason, so the two together never disrupt more than the
  larger of them at once; outdated nodes go first (their replacement is not optional),
  and consolidation gets what its own budget leaves after them. An outdated node over
  the budget waits for a later tick (longest idle first, then the lowest index); an
  outdated node that is not running yet (nothing runs there) is never held back.

A node whose drain Ray has accepted is RAY_STOPPING: Ray's scheduling request holds it
(every instance-manager record) but the model leaves it out of the nodes, naming it
in ``Problem.skipped``. The causes of drains are not in the request. Whoever keeps
memory across ticks (``EngineScheduler``, ``drain_memory.py``) knows the causes of the
terminations the engine sent and gives the count of nodes being disrupted - stopping
for any cause but idleness, unknown causes included - as
``consolidate_disrupting``: idle nodes being stopped then hold neither budget. Without
it (None) every draining or stopping node counts, idle ones included, which errs on
the safe side. Either way a node counts while it is RAY_STOP_REQUESTED *and* while it
is RAY_STOPPING (draining): a drain lasts until its work ends or its deadline, and a
count that left the RAY_STOPPING nodes out would start a new drain every tick.
"""
from __future__ import annotations

import math

import numpy as np

from vecsched.engine.model.dtypes import Cause, Status

from vecsched.engine.model.build.columns import DO_NOT_DISRUPT

from .options import EfficientOptions


def opted_out(p, opts: EfficientOptions) -> np.ndarray:
    """(N,) bool: nodes consolidation must leave alone (label or worker type)."""
    out = np.zeros(p.N, bool)
    key = DO_NOT_DISRUPT
    if key in p.label_keys:
        out |= p.node_label[:, p.label_keys.index(key)] >= 0
    if opts.consolidate_opt_out_types:
        names = set(opts.consolidate_opt_out_types)
        bad = np.asarray([n in names for n in p.type_names], bool)
        out |= bad[p.node_type]
    held = [n for n in opts.consolidate_hold if n < p.N]
    out[held] = True                     # inside their stability window (stability.py)
    return out


def budget(p, opts: EfficientOptions) -> int:
    """Nodes that may be disrupted at once: the count, capped by the share when set."""
    return _budget(p, opts.consolidate_budget, opts.consolidate_budget_pct)


def outdated_budget(p, opts: EfficientOptions) -> int | None:
    """Nodes that may be disrupted at once for being outdated, None: no limit."""
    if opts.outdated_budget <= 0 and opts.outdated_budget_pct <= 0:
        return None
    return _budget(p, opts.outdated_budget or p.N + 1, opts.outdated_budget_pct)


def _budget(p, count: int, pct: float) -> int:
    n = count
    if pct > 0:
        running = int((p.node_status == Status.RAY_RUNNING).sum())
        n = min(n, max(1, math.floor(pct * running)))
    return n


def limit_outdated(p, st, opts: EfficientOptions, cand: np.ndarray) -> np.ndarray:
    """The outdated nodes of ``cand`` (node indices) this tick may terminate under the
    outdated budget (module docstring): all that are not running, and of the running
    ones as many as the budget leaves, longest idle first, then the lowest index."""
    cand = np.asarray(cand, np.int64)
    cap = outdated_budget(p, opts)
    if cap is None or not cand.size:
        return cand
    running = p.node_status[cand] == Status.RAY_RUNNING
    room = max(0, cap - disrupted_now(p, st, opts))
    busy = cand[running]
    busy = busy[np.lexsort((busy, -p.node_idle_ms[busy]))][:room]
    return np.sort(np.concatenate([cand[~running], busy]))


# How the model's builder names an instance it left out because it is draining: a
# RAY_STOPPING instance is in Ray's scheduling request (every instance-manager record)
# but cannot become a scheduling node (``engine/model/build/screen.py``).
_STOPPING_SKIPPED = f"status {Status.NAMES[Status.RAY_STOPPING]} "


def stopping_instances(p) -> list:
    """The request's instance indices (``Problem.node_source`` numbering) being drained
    or stopped: the RAY_STOPPING ones the model skipped, then the RAY_STOP_REQUESTED
    nodes."""
    out = [int(i) for i, why in p.skipped if why.startswith(_STOPPING_SKIPPED)]
    requested = np.flatnonzero(p.node_status == Status.RAY_STOP_REQUESTED)
    out += [int(p.node_source[n]) for n in requested]
    return out


def draining(p, opts: EfficientOptions = None) -> int:
    """Nodes being disrupted before this tick: ``opts.consolidate_disrupting`` when the
    caller knows it, else every node being drained or stopped (RAY_STOP_REQUESTED
    nodes, and the RAY_STOPPING instances of the request, ``Problem.skipped``), whatever
    the cause."""
    if opts is not None and opts.consolidate_disrupting is not None:
        return opts.consolidate_disrupting
    return len(stopping_instances(p))


def disrupted_now(p, st, opts: EfficientOptions = None) -> int:
    """Nodes disrupted already: draining (``draining``) or terminated by this tick, for
    a cause other than idleness, while ray runs on them."""
    draining_ = draining(p, opts)
    mine = sum(1 for n, cause, _ in st.terms
               if n < p.N and cause != Cause.IDLE and p.node_status[n] == Status.RAY_RUNNING)
    return draining_ + mine


def budget_left(p, st, opts: EfficientOptions) -> int:
    """How many more nodes consolidation may disrupt this tick."""
    return max(0, budget(p, opts) - disrupted_now(p, st, opts))
