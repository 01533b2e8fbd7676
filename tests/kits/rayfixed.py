"""Ray 2.60's scheduler with the engine's documented crash-class fixes applied,
by wrapping (not copying) Ray's own phase functions, so every differential case
can be compared in full (docs/ray-compat.md, "Divergences").

- Q4: min-worker nodes are separate objects, so a global-cap cut names only the
  nodes it cuts; the engine then simply does not launch them, so Ray's
  empty-id terminations of never-launched nodes are dropped from the reply.
- Q13: a REQUESTED or RAY_STOP_REQUESTED instance is never named in a
  termination (the instance manager has no legal move for it and rejects the
  tick): never a victim (kept, listed after the other survivors in victim
  order), never terminated as outdated, and an already-terminated pending node
  of an unknown type in such a status is not reported.
- Q3/D1: a live node whose type is no key of ``node_type_configs`` (a running
  node of a type gone from the config, or a node made from a config whose name
  is not a key) has no per-type cap, instead of Ray's ``KeyError``.
"""
from __future__ import annotations

import contextlib
import copy

from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
from ray.autoscaler.v2.scheduler import ResourceDemandScheduler as RDS
from ray.core.generated.instance_manager_pb2 import Instance

from ray.autoscaler.v2.scheduler import SchedulingNodeStatus

PROTECTED = (Instance.REQUESTED, Instance.RAY_STOP_REQUESTED)


class _Uncapped(dict):
    """The type configs, with a type that is no key read as uncapped (D1)."""

    def __missing__(self, node_type):
        return NodeTypeConfig(name=node_type, min_worker_nodes=0, max_worker_nodes=1 << 62)


@contextlib.contextmanager
def _patched():
    orig_min = RDS.__dict__["_enforce_min_workers_per_type"]
    orig_sel = RDS.__dict__["_select_nodes_to_terminate"]
    orig_out = RDS.__dict__["_terminate_outdated_nodes"]
    orig_max = RDS.__dict__["_enforce_max_workers_per_type"]

    def outdated(ctx):
        keep = [i for i, n in enumerate(ctx._nodes)
                if n.status == SchedulingNodeStatus.SCHEDULABLE and n.im_instance_status in PROTECTED]
        orig_out.__func__(ctx)
        nodes = ctx.get_nodes()
        for i in keep:
            nodes[i].status = SchedulingNodeStatus.SCHEDULABLE
            nodes[i].termination_request = None
        ctx.update(nodes)

    def min_workers(ctx):
        orig_min.__func__(ctx)
        ctx.update([copy.deepcopy(n) for n in ctx._nodes])   # break the aliasing

    def select(nodes, num_to_terminate, cause, max_num_nodes=None, max_num_nodes_per_type=None):
        requested = [n for n in nodes if n.im_instance_status in PROTECTED]
        others = [n for n in nodes if n.im_instance_status not in PROTECTED]
        victims, survivors = orig_sel.__func__(others, num_to_terminate, cause,
                                               max_num_nodes, max_num_nodes_per_type)
        requested.sort(key=RDS._sort_nodes_for_termination)
        return victims, survivors + requested

    def max_per_type(ctx):
        configs = ctx._node_type_configs
        ctx._node_type_configs = _Uncapped(configs)
        try:
            orig_max.__func__(ctx)
        finally:
            ctx._node_type_configs = configs

    RDS._enforce_max_workers_per_type = staticmethod(max_per_type)
    RDS._enforce_min_workers_per_type = staticmethod(min_workers)
    RDS._select_nodes_to_terminate = staticmethod(select)
    RDS._terminate_outdated_nodes = staticmethod(outdated)
    try:
        yield
    finally:
        RDS._enforce_min_workers_per_type = orig_min
        RDS._select_nodes_to_terminate = orig_sel
        RDS._terminate_outdated_nodes = orig_out
        RDS._enforce_max_workers_per_type = orig_max


def schedule_fixed(request, scheduler=None):
    """Ray's reply with the Q4 and Q13 fixes; a global-max assertion that only the
    fix can trigger (too few pickable victims) is reported as AssertionError.
    Pass ``scheduler`` to keep Ray's pending-idle state across ticks."""
    with _patched():
        reply = (scheduler or RDS()).schedule(request)
    reply.to_terminate = [t for t in reply.to_terminate
                          if t.instance_id != "" and t.instance_status not in PROTECTED]
    return reply
