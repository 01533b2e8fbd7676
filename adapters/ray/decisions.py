"""One tick's decisions counted by kind and cause, for the scheduler's metrics.

A reply from either scheduler (the engine's or Ray's) says what was decided; only the
engine's plan says *why* demand was left unplaced. So:

* ``launch``: nodes to launch per node type. Ray's ``LaunchRequest`` carries no cause;
  the cause label is ``none``.
* ``terminate``: one per ``TerminationRequest``, with its cause (``IDLE``, ``OUTDATED``,
  ``MAX_NUM_NODES``, ``MAX_NUM_NODE_PER_TYPE``, and the efficient mode's
  ``CONSOLIDATE``, which travels to Ray as OUTDATED and is read back from its details)
  and the node type.
* ``infeasible``: one per unplaced resource request (count-expanded, as Ray's reply
  lists them), per infeasible gang (placement group) and per unmet
  ``request_resources()`` constraint. The cause is the engine plan's reason
  (``NO_NODE_TYPE_FITS``, ``MAX_WORKERS``, ``MAX_NUM_NODES``, ``NO_LABEL_MATCH``;
  ``CLUSTER_RESOURCE_CONSTRAINT`` for the constraint) when the engine decided the tick,
  and ``UNKNOWN`` when Ray's scheduler did (its reply gives no reason).
"""
from __future__ import annotations

from collections import Counter

from ray.core.generated.instance_manager_pb2 import TerminationRequest

from vecsched.engine.model.dtypes import Cause, Why

from .codec import engine_cause

NO_CAUSE = "none"
UNKNOWN = "UNKNOWN"
CONSTRAINT = "CLUSTER_RESOURCE_CONSTRAINT"
# The plan's reasons by their code names (Why.NAMES are sentences, for people).
WHY_CODES = {v: k for k, v in vars(Why).items()
             if k.isupper() and isinstance(v, int) and v != Why.NONE}


def _term_cause(tr) -> str:
    c = engine_cause(tr)
    return Cause.NAMES.get(c) or TerminationRequest.Cause.Name(int(tr.cause))


def count_decisions(reply, plan=None) -> Counter:
    """``(kind, cause, node_type) -> n`` for one tick's ``reply``; ``plan`` is the
    engine's plan when the engine made this reply (for the infeasible causes)."""
    out: Counter = Counter()
    for lr in reply.to_launch:
        out[("launch", NO_CAUSE, lr.instance_type)] += int(lr.count)
    for tr in reply.to_terminate:
        out[("terminate", _term_cause(tr), tr.instance_type)] += 1
    for cause, n in infeasible_by_cause(reply, plan).items():
        out[("infeasible", cause, "")] += n
    return out


def infeasible_by_cause(reply, plan=None) -> Counter:
    """``cause -> n`` of the infeasible requests in ``reply`` (see the module doc)."""
    out: Counter = Counter()
    n_req = len(reply.infeasible_resource_requests)
    n_gang = len(reply.infeasible_gang_resource_requests)
    n_con = len(reply.infeasible_cluster_resource_constraints)
    if plan is None:
        total = n_req + n_gang + n_con
        if total:
            out[UNKNOWN] = total
        return out
    for s in plan.infeasible.nonzero()[0]:
        out[_why(plan.infeasible_why[s])] += int(plan.infeasible[s])
    for g in plan.gang_infeasible.nonzero()[0]:
        out[_why(plan.gang_why[g] if len(plan.gang_why) > g else 0)] += 1
    if n_con:
        out[CONSTRAINT] += n_con
    # The plan and the reply must agree; if they ever do not, count the reply.
    placed = sum(out.values()) - out[CONSTRAINT]
    if placed != n_req + n_gang:
        out = Counter({UNKNOWN: n_req + n_gang + n_con})
    return out


def _why(code) -> str:
    return WHY_CODES.get(int(code), UNKNOWN)
