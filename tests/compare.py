"""Normalise SchedulingReplies so two schedulers' decisions can be compared
(ids and timestamps dropped; RAY_V2_SEMANTICS.md §8)."""
from __future__ import annotations

import math
from collections import Counter

from ray.core.generated.instance_manager_pb2 import Instance


def decisions(reply) -> dict:
    return {
        "launch": Counter({lr.instance_type: lr.count for lr in reply.to_launch}),
        "terminate": sorted((t.instance_id, t.cause, t.instance_status) for t in reply.to_terminate),
        "infeasible": Counter(r.SerializeToString(deterministic=True)
                              for r in reply.infeasible_resource_requests),
        "infeasible_gang": Counter(g.SerializeToString(deterministic=True)
                                   for g in reply.infeasible_gang_resource_requests),
        "infeasible_constraints": len(reply.infeasible_cluster_resource_constraints),
        "ippr": sorted((s.cloud_instance_id, float(s.desired_cpu), float(s.desired_memory),
                        s.k8s_resize_status, s.raylet_id) for s in reply.to_ippr),
    }


def diff(a, b) -> list[str]:
    da, db = decisions(a), decisions(b)
    out = [f"{k}: ray={da[k]} engine={db[k]}" for k in da if da[k] != db[k]]
    ka, kb = set(a.cluster_resources), set(b.cluster_resources)
    if ka != kb:
        out.append(f"cluster_resources keys: ray={sorted(ka)} engine={sorted(kb)}")
    else:
        for k in ka:
            if not math.isclose(a.cluster_resources[k], b.cluster_resources[k], rel_tol=1e-9,
                                abs_tol=1e-9):
                out.append(f"cluster_resources[{k}]: ray={a.cluster_resources[k]} "
                           f"engine={b.cluster_resources[k]}")
    return out


def ray_quirk(reply) -> str | None:
    """Name the crash-class quirk Ray's reply shows, where the engine diverges on purpose."""
    for t in reply.to_terminate:
        if t.instance_id == "":
            return "Q4"      # aliased min-worker nodes cut by max_num_nodes
        if t.instance_status in (Instance.REQUESTED, Instance.RAY_STOP_REQUESTED):
            return "Q13"     # an instance the instance manager cannot terminate now
    return None
