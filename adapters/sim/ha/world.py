"""The outside world of an HA run: a simulated cloud and Ray cluster, shared by every
autoscaler replica, keeping its own record of what it was asked and what exists.

`World` is the cloud provider (launch / terminate), the GCS (cluster view, node drain)
and the workload (a trace window replayed on the cluster stand-in of the replay) on a
simulated clock. It runs in its own process behind `WorldServer`, so what the replicas
did is counted here, not taken from their own claims:

- **launch(token, instance_id, request_id, type)** creates one cloud instance per
  idempotency key (instance id, launch request id) - a repeated call returns the same
  instance and is recorded as a replay (as a cloud API's client token does);
- **terminate / drain** act on a cloud instance; repeats are no-ops;
- every mutating call carries the caller's fencing token (epoch and holder id); a
  call whose epoch is older than the newest the world has seen, or equal to it but
  from another holder (an epoch granted twice, by a lease store that lost its data),
  is refused and recorded (a cloud API with a precondition, e.g. a KubeRay patch
  with a resourceVersion, does the same);
- **claim(token)** raises the fence to the caller's epoch (a new leader's first call:
  from then on, calls of older epochs are refused, so the instance list it reads
  next holds everything an older leader will ever have done); **fence()** reads it
  (a replica's floor for its next lease acquisition);
- **advance(token, tick)** ends the leader's tick: simulated time moves one tick only
  when the leader says its tick is done (the world waits for the autoscaler), so a
  failover costs real seconds but no simulated time, and an HA run can be compared
  exactly with a failure-free run of the same replay.

Cloud latencies are drawn per instance from the seed and the idempotency key, so they
do not depend on which replica made a call or in which order.
"""
from __future__ import annotations

import heapq
import math
import time
import zlib
from dataclasses import asdict, dataclass

import numpy as np

from .replay_link import HEAD_TYPE, Cluster, Window, load

NS = 1_000_000_000
# Cloud instance states, in order; an event moves an instance only from the state
# it was scheduled from.
STATES = ("requested", "allocated", "running", "stopping", "stopped", "terminating",
          "terminated")


@dataclass(frozen=True)
class SimConfig:
    """The replay, the simulated cloud, and the autoscaler settings every replica
    reads from the world (its cluster config)."""
    trace: str = "openb"
    groups: str | None = None
    pods: int = 300                      # the last `pods` rows of the trace
    compress: float = 4.0                # inter-arrivals and durations / compress
    arrival_scale: float = 50.0          # inter-arrivals / arrival_scale more
    ticks: int = 80                      # simulated ticks in the run
    tick_s: float = 5.0
    idle_timeout_s: float = 60.0
    max_num_nodes: int | None = None
    seed: int = 0
    alloc_latency_s: float = 30.0
    install_latency_s: float = 60.0
    latency_jitter: float = 0.2
    drain_latency_s: float = 10.0
    termination_latency_s: float = 10.0
    max_concurrent_launches: int = 10
    upscaling_speed: float = 1000.0

    def __post_init__(self):
        if not isinstance(self.ticks, int) or self.ticks < 1:
            raise ValueError(f"ticks must be an integer >= 1, got {self.ticks!r}")
        for name in ("tick_s", "alloc_latency_s", "install_latency_s", "drain_latency_s",
                     "termination_latency_s", "idle_timeout_s"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0 \
                    or (name == "tick_s" and v == 0):
                raise ValueError(f"{name} must be a finite number >= 0, got {v!r}")
        if not 0 <= self.latency_jitter < 1:
            raise ValueError(f"latency_jitter must be within [0, 1), got {self.latency_jitter!r}")


class WorldError(Exception):
    """A call the world cannot serve (unknown op, unknown instance or type)."""


class World:
    """The simulated cloud + cluster + clock; see the module docstring."""

    def __init__(self, cfg: SimConfig):
        self.cfg = cfg
        self.trace = load(cfg.trace, cfg.groups, Window(start=None, pods=cfg.pods,
                                                        compress=cfg.compress,
                                                        arrival_scale=cfg.arrival_scale))
        self.types = list(self.trace.types)
        self.resources = {t.name: dict(t.resources) for t in self.types}
        tr = self.trace
        self.cluster = Cluster(tr.columns, tr.shapes, tr.arrival_s, tr.duration_s,
                               tr.unit_shape)
        self.cluster.add_node("head", HEAD_TYPE, self.resources[HEAD_TYPE], 0.0)
        self.tick = 0
        self.fence = 0                   # the newest epoch seen on a mutating call
        self.fence_holder = ""           # and who called with it
        self.instances: dict[str, dict] = {}       # cloud id -> instance
        self.by_key: dict[tuple[str, str], str] = {}
        self.calls: list[dict] = []      # every mutating call, in arrival order
        self.reads: dict[str, int] = {}  # view calls per replica
        self._events: list[tuple] = []   # (due ns, instance id, state to, cloud id, from)
        self.cluster.play_until(0.0)
        self.cluster.place(0.0)

    # ---- time --------------------------------------------------------------------------
    @property
    def now_ns(self) -> int:
        return int(round(self.tick * self.cfg.tick_s * NS))

    def _latency_ns(self, key: tuple[str, str], nominal_s: float, salt: int) -> int:
        seed = zlib.crc32(f"{key[0]}|{key[1]}|{salt}".encode())
        u = np.random.default_rng([self.cfg.seed, seed]).random()
        j = self.cfg.latency_jitter
        return int(round(nominal_s * (1.0 + j * (2.0 * u - 1.0)) * NS))

    def _push(self, due_ns: int, inst: dict, to: str, frm: str) -> None:
        # Ordered by time, then instance id: independent of the order calls came in.
        heapq.heappush(self._events, (int(due_ns), inst["instance_id"], STATES.index(to),
                                      inst["cloud_id"], frm))

    def _set(self, inst: dict, state: str, at_ns: int) -> None:
        inst["state"] = state
        inst["times"][state] = int(at_ns)

    def _fire_until(self, now_ns: int) -> None:
        c = self.cluster
        while self._events and self._events[0][0] <= now_ns:
            due, _, to_i, cloud_id, frm = heapq.heappop(self._events)
            inst = self.instances[cloud_id]
            if inst["state"] != frm:
                continue                 # moved on meanwhile (e.g. terminated)
            to = STATES[to_i]
            self._set(inst, to, due)
            if to == "allocated":
                lat = self._latency_ns(inst["key"], self.cfg.install_latency_s, 2)
                self._push(due + lat, inst, "running", "allocated")
            elif to == "running":
                c.add_node(inst["instance_id"], inst["type"], self.resources[inst["type"]],
                           due / NS)
            elif to in ("stopped", "terminated"):
                slot = c.slot_of.get(inst["instance_id"])
                if slot is not None:
                    c.remove_node(slot, due / NS)

    # ---- reads -------------------------------------------------------------------------
    def hello(self) -> dict:
        return {"types": self.types, "config": asdict(self.cfg), "head_type": HEAD_TYPE}

    def view(self, replica: str) -> dict:
        """What one autoscaler tick reads: the GCS cluster view and the cloud's list."""
        self.reads[replica] = self.reads.get(replica, 0) + 1
        c, now_s = self.cluster, self.tick * self.cfg.tick_s
        nodes = {iid: c.view(slot, now_s) for iid, slot in c.slot_of.items()}
        pending = [(dict(self.trace.shapes[s]), n) for s, n in c.pending_runs()]
        cloud = [{k: inst[k] for k in ("cloud_id", "instance_id", "request_id", "type",
                                       "state")} | {"times": dict(inst["times"])}
                 for inst in self.instances.values()]
        return {"tick": self.tick, "now_ns": self.now_ns, "end": self.cfg.ticks,
                "fence": self.fence, "nodes": nodes, "pending": pending, "cloud": cloud}

    # ---- fenced mutations --------------------------------------------------------------
    def _admit(self, op: str, epoch: int, replica: str, **args) -> dict | None:
        """Record the call; None if admitted, else the refusal."""
        entry = {"op": op, "epoch": int(epoch), "replica": replica, "tick": self.tick,
                 "t": time.monotonic(), **args}
        self.calls.append(entry)
        if epoch < self.fence or (epoch == self.fence and replica != self.fence_holder):
            entry["result"] = "stale"
            return {"ok": False, "why": "stale", "fence": self.fence}
        self.fence, self.fence_holder = int(epoch), replica
        return None

    def launch(self, epoch: int, replica: str, instance_id: str, request_id: str,
               instance_type: str) -> dict:
        if instance_type not in self.resources or instance_type == HEAD_TYPE:
            raise WorldError(f"launch: unknown instance type {instance_type!r}")
        if not instance_id or not request_id:
            raise WorldError("launch: instance_id and request_id are the idempotency key")
        refused = self._admit("launch", epoch, replica, instance_id=instance_id,
                              request_id=request_id, type=instance_type)
        if refused:
            return refused
        key = (instance_id, request_id)
        entry = self.calls[-1]
        if key in self.by_key:
            entry["result"] = "replayed"
            return {"ok": True, "cloud_id": self.by_key[key], "replayed": True}
        cloud_id = f"cloud-{instance_id}-{request_id}"
        inst = {"cloud_id": cloud_id, "instance_id": instance_id, "request_id": request_id,
                "type": instance_type, "key": key, "state": "requested", "times": {},
                "epoch": int(epoch), "replica": replica, "created_tick": self.tick}
        self._set(inst, "requested", self.now_ns)
        self.instances[cloud_id] = inst
        self.by_key[key] = cloud_id
        self._push(self.now_ns + self._latency_ns(key, self.cfg.alloc_latency_s, 1), inst,
                   "allocated", "requested")
        entry["result"] = "created"
        return {"ok": True, "cloud_id": cloud_id, "replayed": False}

    def _instance(self, cloud_id: str) -> dict:
        inst = self.instances.get(cloud_id)
        if inst is None:
            raise WorldError(f"no cloud instance {cloud_id!r}")
        return inst

    def terminate(self, epoch: int, replica: str, cloud_id: str) -> dict:
        inst = self._instance(cloud_id)
        refused = self._admit("terminate", epoch, replica, cloud_id=cloud_id)
        if refused:
            return refused
        if inst["state"] in ("terminating", "terminated") or inst["state"] == "requested":
            self.calls[-1]["result"] = "noop"
            return {"ok": True, "noop": True}
        self._set(inst, "terminating", self.now_ns)
        lat = int(round(self.cfg.termination_latency_s * NS))
        self._push(self.now_ns + lat, inst, "terminated", "terminating")
        slot = self.cluster.slot_of.get(inst["instance_id"])
        if slot is not None:
            self.cluster.set_placeable(slot, False)
        self.calls[-1]["result"] = "done"
        return {"ok": True, "noop": False}

    def drain(self, epoch: int, replica: str, cloud_id: str) -> dict:
        inst = self._instance(cloud_id)
        refused = self._admit("drain", epoch, replica, cloud_id=cloud_id)
        if refused:
            return refused
        if inst["state"] != "running":
            self.calls[-1]["result"] = "noop"
            return {"ok": True, "noop": True}
        self._set(inst, "stopping", self.now_ns)
        self.cluster.set_placeable(self.cluster.slot_of[inst["instance_id"]], False)
        lat = int(round(self.cfg.drain_latency_s * NS))
        self._push(self.now_ns + lat, inst, "stopped", "stopping")
        self.calls[-1]["result"] = "done"
        return {"ok": True, "noop": False}

    def claim(self, epoch: int, replica: str) -> dict:
        """A new leader's first call: the fence moves up to `epoch` (refused if older)."""
        refused = self._admit("claim", epoch, replica)
        if refused:
            return refused
        self.calls[-1]["result"] = "done"
        return {"ok": True, "fence": self.fence}

    def fence_now(self) -> int:
        """The newest epoch seen on a mutating call (not recorded as a read)."""
        return self.fence

    def advance(self, epoch: int, replica: str, tick: int) -> dict:
        """End tick `tick`: the world moves to tick + 1 (only from `tick`)."""
        refused = self._admit("advance", epoch, replica, at=int(tick))
        if refused:
            return refused
        if tick != self.tick or self.tick >= self.cfg.ticks:
            self.calls[-1]["result"] = "mismatch"
            return {"ok": False, "why": "mismatch", "tick": self.tick}
        self.tick += 1
        now_s = self.tick * self.cfg.tick_s
        self.cluster.play_until(now_s)
        self._fire_until(self.now_ns)
        self.cluster.place(now_s)
        self.calls[-1]["result"] = "done"
        return {"ok": True, "tick": self.tick}

    # ---- the record --------------------------------------------------------------------
    def record(self) -> dict:
        """The world's own record: calls, instances, and where every demand unit is."""
        c = self.cluster
        placed = [None if math.isnan(x) else float(x) for x in c.placed_at]
        return {"tick": self.tick, "fence": self.fence, "calls": self.calls,
                "reads": dict(self.reads),
                "instances": [{k: v for k, v in inst.items() if k != "key"}
                              for inst in self.instances.values()],
                "units": {"arrived": self.cluster.arrived, "pending": c.n_pending,
                          "running": c.n_running, "done": c.n_done, "requeued": c.requeued,
                          "placed_at": placed,
                          "oversized": int(self.trace.oversized)}}

    def call(self, op: str, *args):
        """Dispatch by name (the server's entry point; also used in process)."""
        if op not in _OPS:
            raise WorldError(f"unknown world op {op!r}")
        return getattr(self, op)(*args)


_OPS = frozenset({"hello", "view", "launch", "terminate", "drain", "claim", "fence_now",
                  "advance", "record"})
