"""Compare two SchedulingReplies by their decisions (ids and timestamps dropped,
docs/ray-semantics.md §8): used by shadow mode and by the differential tests."""
from __future__ import annotations

import math
from collections import Counter
from typing import Optional

from ray.autoscaler.v2.scheduler import SchedulingReply
from ray.core.generated.instance_manager_pb2 import TerminationRequest

def decisions(reply: SchedulingReply) -> dict:
    """A reply's decisions with ids and timestamps dropped (docs/ray-semantics.md §8)."""
    return {
        "launch": dict(sorted(Counter({lr.instance_type: lr.count
                                       for lr in reply.to_launch}).items())),
        "terminate": sorted((t.instance_id, TerminationRequest.Cause.Name(t.cause),
                             int(t.instance_status)) for t in reply.to_terminate),
        "infeasible": sorted(r.SerializeToString(deterministic=True).hex()
                             for r in reply.infeasible_resource_requests),
        "infeasible_gang": sorted(g.SerializeToString(deterministic=True).hex()
                                  for g in reply.infeasible_gang_resource_requests),
        "infeasible_constraints": len(reply.infeasible_cluster_resource_constraints),
        "ippr": sorted((s.cloud_instance_id, float(s.desired_cpu), float(s.desired_memory),
                        s.k8s_resize_status, s.raylet_id) for s in reply.to_ippr),
    }


def reply_diff(ray_reply: SchedulingReply, engine_reply: SchedulingReply) -> list:
    """Human-readable differences between two replies' decisions (empty: same)."""
    a, b = decisions(ray_reply), decisions(engine_reply)
    out = [f"{k}: ray={a[k]} engine={b[k]}" for k in a if a[k] != b[k]]
    ka, kb = set(ray_reply.cluster_resources), set(engine_reply.cluster_resources)
    if ka != kb:
        out.append(f"cluster_resources keys: ray={sorted(ka)} engine={sorted(kb)}")
    else:
        for k in sorted(ka):
            x, y = ray_reply.cluster_resources[k], engine_reply.cluster_resources[k]
            if not math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9):
                out.append(f"cluster_resources[{k}]: ray={x} engine={y}")
    return out


def ray_quirk(ray_reply: SchedulingReply) -> Optional[str]:
    """The documented crash-class quirk Ray's reply shows, where the engine differs on
    purpose (docs/ray-compat.md, "Divergences"), or None."""
    from ray.core.generated.instance_manager_pb2 import Instance

    for t in ray_reply.to_terminate:
        if t.instance_id == "":
            return "Q4 (Ray terminates never-launched min-worker nodes)"
        if t.instance_status in (Instance.REQUESTED, Instance.RAY_STOP_REQUESTED):
            return "Q13 (Ray names an instance the instance manager cannot terminate now)"
    return None
