"""Instance records rebuilt from the cloud provider's own instance list, for a leader
that finds the records gone (a Redis that restarted empty, or came back from an old
snapshot).

Ray's reconciler can do the same: every cloud instance it launched carries its
instance id, launch request id and node type as tags, and the provider lists them
with their state. Each cloud instance becomes one record whose history follows the
times the cloud reports for each of its states:

    requested   -> QUEUED, REQUESTED           (the launch call)
    allocated   -> ALLOCATED                   (the cloud instance exists)
    running     -> RAY_RUNNING                 (the ray node joined)
    stopping    -> RAY_STOP_REQUESTED, RAY_STOPPING   (the drain call, accepted)
    stopped     -> RAY_STOPPED
    terminating -> TERMINATING                 (the terminate call)
    terminated  -> TERMINATED

The head (never launched by the autoscaler) is recorded as the first tick records
it. What the cloud never saw is not recovered: records still QUEUED (no launch call
made yet) and the timestamps of decisions made before their cloud calls; the
scheduler decides those again from the pending demand on the next tick. Id counters
continue above the highest id the cloud lists, so no id is reused for a new launch.
"""
from __future__ import annotations

from vecsched.engine.model.dtypes import Kind, Status

from vecsched.adapters.sim.lifecycle import InstanceStore, Move

S = Status

# cloud state -> the record statuses it implies, in order.
_STEPS = (("requested", (S.QUEUED, S.REQUESTED)), ("allocated", (S.ALLOCATED,)),
          ("running", (S.RAY_RUNNING,)), ("stopping", (S.RAY_STOP_REQUESTED, S.RAY_STOPPING)),
          ("stopped", (S.RAY_STOPPED,)), ("terminating", (S.TERMINATING,)),
          ("terminated", (S.TERMINATED,)))


def _number(ident: str, prefix: str) -> int:
    """The counter of an id like `i-000012` (-1 if it is not one)."""
    tail = ident[len(prefix):] if ident.startswith(prefix) else ""
    return int(tail) if tail.isdigit() else -1


def record_head(store: InstanceStore, head_type: str) -> list[str]:
    """The head as the first recorded tick has it: running from t=0."""
    store.apply([Move("head", S.ALLOCATED, instance_type=head_type,
                      cloud_instance_id="cloud-head", node_kind=Kind.HEAD, create=True)],
                at_ns=0)
    store.apply([Move("head", S.RAY_RUNNING, node_id="node-head")], at_ns=0)
    return ["head"]


def _record_instance(store: InstanceStore, c: dict) -> None:
    iid, times = c["instance_id"], c["times"]
    first = True
    for state, statuses in _STEPS:
        if state not in times:
            continue
        for status in statuses:
            fields = {}
            if first:
                fields = {"instance_type": c["type"], "create": True}
                first = False
            elif status == S.REQUESTED:
                fields = {"launch_request_id": c["request_id"]}
            elif status == S.ALLOCATED:
                fields = {"cloud_instance_id": c["cloud_id"], "node_kind": Kind.WORKER}
            elif status == S.RAY_RUNNING:
                fields = {"node_id": f"node-{c['cloud_id']}"}
            store.apply([Move(iid, status, **fields)], at_ns=int(times[state]))


def rebuild_from_cloud(cloud: list[dict], store: InstanceStore, head_type: str,
                       ids, requests) -> list[str]:
    """Fill the empty `store` with the head and one record per cloud instance (in id
    order); move the `ids` / `requests` counters (`instance_table.Counter`) above
    every id listed. Returns the instance ids created."""
    if len(store):
        raise ValueError("rebuild_from_cloud needs an empty store")
    created = record_head(store, head_type)
    for c in sorted(cloud, key=lambda c: (_number(c["instance_id"], "i-"), c["instance_id"])):
        _record_instance(store, c)
        created.append(c["instance_id"])
    ids.next_n = max([ids.next_n] + [_number(c["instance_id"], "i-") + 1 for c in cloud])
    requests.next_n = max([requests.next_n]
                          + [_number(c["request_id"], "lr-") + 1 for c in cloud])
    return created
