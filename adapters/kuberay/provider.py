"""Ray 2.60's ``KubeRayProvider`` with one change: terminations of pods that belong to a
malformed worker group (``groups.py``) are answered with an error instead of being
built into the patch.

Why: the side-car hands Ray the RayCluster without its malformed groups, so Ray's
config has no node type for them; Ray still lists their pods (by label) and asks to
terminate them as outdated every tick. Its provider cannot address a group it was not
given (``_worker_group_index`` raises) and fails the whole ``terminate`` call, which
Ray batches across node types: an idle node of a healthy group decided in the same
tick would not be terminated either. Here those pods are split off first; Ray gets a
``TerminateNodeError`` for each of them (its instance manager retries later, when the
group may be fixed) and the rest of the call goes ahead unchanged.
"""
from __future__ import annotations

import logging

logger = logging.getLogger(__name__)

DETAILS = ("its worker group is malformed (see the side-car's findings): the group is "
           "left out of the autoscaler's view until it is fixed; its pods are kept")


def skipping_provider(base: type, ledger) -> type:
    """A subclass of Ray's provider class ``base`` reporting skipped pods to ``ledger``."""

    class KubeRayProvider(base):
        def terminate(self, ids, request_id):
            if request_id in self._requests:
                return super().terminate(ids, request_id)
            keep, skip = split_terminations(self, ids)
            if skip:
                ledger.on_skipped_termination(self._cluster_name, skip)
                self._add_terminate_errors(skip, request_id, details=DETAILS)
            if keep:
                super().terminate(keep, request_id)

    KubeRayProvider.__qualname__ = base.__qualname__
    return KubeRayProvider


def split_terminations(provider, ids):
    """``(keep, skip)``: the ids of pods in groups Ray was given, and the others
    (workers of a node type the last RayCluster read does not have)."""
    from ray.autoscaler.v2.instance_manager.node_provider import NodeKind

    cr = getattr(provider, "_ray_cluster", None) or {}
    known = {g.get("groupName") for g in (cr.get("spec") or {}).get("workerGroupSpecs") or []}
    cached = getattr(provider, "_cached_instances", None) or {}
    keep, skip = [], []
    for i in ids:
        inst = cached.get(i)
        if inst is not None and inst.node_kind == NodeKind.WORKER and \
                inst.node_type not in known:
            skip.append(i)
        else:
            keep.append(i)
    return keep, skip
