"""A simulated cloud and Ray cluster behind Ray's own autoscaler-v2 interfaces.

This is what lets Ray's real reconcile loop (`Reconciler.reconcile`, the
`InstanceManager` on `InMemoryStorage`, the `CloudInstanceUpdater` / `RayStopper` /
`CloudResourceMonitor` subscribers) run on a laptop, deterministically, with any
`IResourceScheduler` plugged in (docs/ray-semantics.md §10–§11). One concept per file:

* `provider.SimCloudProvider` — Ray's `ICloudInstanceProvider` over the project's one
  simulated cloud, `vecsched.adapters.sim.lifecycle.SimCloud` (the trace replay's cloud too): per-type
  `SimNodeType` latencies, launch failures and stock-outs (`LaunchNodeError`), lost
  requests, termination latency and failures (`TerminateNodeError`), preemptions.
* `gcs.SimGcs` — the GCS and the raylets: ray nodes join allocated instances after the
  install latency, tasks are queued, placed first-fit and finish;
  `get_cluster_resource_state()` is the serialised reply Ray's sdk parses; `drain_node`
  / `drain_nodes` answer Ray's `RayStopper`.
* `config.autoscaling_config(...)` — a real `AutoscalingConfig` (through Ray's own
  `prepare_config` / `validate_config`) for an "external" provider.
* `autoscaler.SimAutoscaler` — wires these exactly as
  `ray.autoscaler.v2.autoscaler.Autoscaler` does, with the scheduler as an argument;
  `update_autoscaling_state()` follows Ray's method step for step.
* `clock.ray_clock(clock)` / `clock.scheduler_clock(clock)` — Ray's instance manager /
  Ray's scheduler read time from the simulated clock.

All randomness comes from seeded numpy Generators drawn in call order (the cloud's;
the GCS has its own for drain rejections, which RayStopper asks for on its worker
thread), so a run with the same seeds and the same scheduler decisions repeats exactly
(`SimAutoscaler.settle()` waits for RayStopper after each tick). Ray itself still draws
uuid4 instance and launch-request ids; compare runs by mapping instance ids in creation
order.
"""
from vecsched.adapters.sim.lifecycle.cloud import SimClock, SimCloud, SimNodeType

from .reconcile_loop import SimAutoscaler
from .clock import ray_clock, scheduler_clock
from .config import autoscaling_config
from .gcs import HEAD_MARKER, SimGcs, SimRayNode, SimTask, node_id_for
from .node_provider import SimCloudInstance, SimCloudProvider

__all__ = ["HEAD_MARKER", "SimAutoscaler", "SimClock", "SimCloud", "SimCloudInstance",
           "SimCloudProvider", "SimGcs", "SimNodeType", "SimRayNode", "SimTask",
           "autoscaling_config", "node_id_for", "ray_clock", "scheduler_clock"]
