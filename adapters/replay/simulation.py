"""Trace replay: a discrete-event simulation of an autoscaled Ray cluster on a simulated
clock, with a pluggable scheduler (``engine`` through ``EngineScheduler``, ``baseline``,
Ray 2.60's own; ``schedulers.py``).

One replay, in simulated time:

- **Demand.** Each trace row of the window is one unit (``trace.py``): it arrives,
  waits as pending demand, is placed by the cluster-side stand-in for Ray's raylets and
  placement group scheduler (``cluster.Cluster``), holds its resources for its duration
  and leaves. Units may be members of placement groups (``gangs.py``: the trace's own and
  the seeded ``--gangs`` overlay), which arrive together, are placed atomically and
  leave together.
- **The autoscaler** ticks every ``tick_s`` (5 s, Ray's ``AUTOSCALER_UPDATE_INTERVAL_S``).
  At a tick at time T, in this order: every arrival and completion up to T is played
  (placement runs after each batch of simultaneous events); the simulated cloud reports
  what happened by T (``SimProvider.step``); nodes that joined or left are synced into
  the cluster (units on a lost node go back to pending) and placement runs; then the
  instance store reconciles (``InstanceStore.reconcile``: timeouts; the scheduler is
  called on the current state and its launches and terminations applied, §10.1;
  stopped/failed instances to TERMINATING; QUEUED -> REQUESTED under
  ``max_concurrent_launches`` and ``upscaling_speed``, §10.2).
- **The scheduler's view** (``schedulers.TickState``, sent to the engine and Ray as the
  protobuf ``SchedulingRequest`` Ray's reconciler builds): every instance whose status
  can still reach RAY_RUNNING, in store order; RAY_RUNNING ones with the cluster's total,
  available and idle time (and the placement group resources and ``_PG_`` labels of the
  bundles they host); pending independent demand grouped into shapes with counts, shapes
  in order of their oldest pending unit; pending placement groups in the GCS's encoding
  (``<pg>:<strategy>:PENDING``, bundles with their affinity / anti-affinity), oldest
  first. A head node of type ``head`` runs from t=0, and with a warm start the work
  alive at the window's start runs from t=0 on nodes the scheduler chose for it
  (``warm_start.py``).
- **The end** is the first tick at or after the last arrival plus ``tail_s``. Nothing
  happens after that tick, so the final accounting holds exactly: units in = placed +
  still pending + infeasible (the last tick's infeasible units), asserted every replay.

Instance ids (``i-000000``...), launch request ids and every random draw (the cloud's
latencies and failures, the gang overlay) derive from the seed, so a replay is
deterministic. The schedulers read time from the simulated clock.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from vecsched.engine.model.build.builder import NodeSpec, RequestSpec
from vecsched.engine.model.dtypes import Kind, Status
from vecsched.engine.model.requests import GangSpec

from vecsched.adapters.sim.lifecycle import (IllegalTransition, InstanceStore, InvalidMove, Move, ReconcileConfig,
                         SimClock, SimNodeType, sequential_ids)
from .cluster import Cluster
from .draining import Drains, DrainingProvider, drain_deadline_s
from .placement_groups import GangOverlay
from .metrics import Metrics, summarize
from .registry import make
from .schedulers import Decision, TickState
from .trace import HEAD_TYPE, LoadedTrace, Window, load
from .warm_start import warm_start

NS = 1_000_000_000
_RAY_ALIVE = (Status.RAY_RUNNING, Status.RAY_STOP_REQUESTED, Status.RAY_STOPPING)
# The records a tick's request holds: those that can still reach RAY_RUNNING, and
# the draining ones (RAY_STOPPING), which Ray's reconciler sends too (every record);
# schedulers leave the latter out of their nodes (the engine names them in
# ``Problem.skipped``, where consolidation's disruption budget counts them).
_IN_REQUEST = tuple(Status.SCHEDULABLE) + (Status.RAY_STOPPING,)


# The default replay (`vecsched replay`): the last 2,000 pods of openb (its busiest
# weeks), durations as recorded, arrivals 200x denser. The openb pod list is a sample
# of a 1,523-node cluster: replayed literally it needs a handful of nodes; x200 keeps
# tens to ~250 instances live, about 40 simulated minutes (~600 ticks).
DEFAULT_WINDOW = Window(start=None, pods=2000, compress=1.0, arrival_scale=200.0)


class _LostTick(Exception):
    """The scheduler raised during a tick."""


@dataclass(frozen=True)
class ReplayConfig:
    """Everything but the trace and the scheduler. Times in simulated seconds."""
    tick_s: float = 5.0
    idle_timeout_s: float = 60.0
    tail_s: float = 600.0                # simulated time after the last arrival
    max_num_nodes: Optional[int] = None
    seed: int = 0
    # launch rate limits (§10.2): Ray's default max_concurrent_launches, and KubeRay's
    # upscalingMode Default (1000); Ray's own v2 default speed is 0 (one launch per type)
    max_concurrent_launches: int = 10
    upscaling_speed: float = 1000.0
    # the simulated cloud, the same for every type
    alloc_latency_s: float = 30.0
    install_latency_s: float = 60.0
    latency_jitter: float = 0.2
    launch_failure_rate: float = 0.0
    preemption_rate_per_h: float = 0.0
    # Ray's pending-node idle tracking (RAY_AUTOSCALER_PENDING_NODE_IDLE_TIMEOUT_S); None:
    # off, Ray's default
    pending_idle_timeout_s: Optional[float] = None
    # the raylets keep CPU-only work off GPU nodes while others have room
    # (RAY_scheduler_avoid_gpu_nodes, on by default in Ray; cluster.py)
    avoid_gpu_nodes: bool = True

    def __post_init__(self):
        for name in ("tick_s", "tail_s", "idle_timeout_s", "alloc_latency_s",
                     "install_latency_s", "latency_jitter", "launch_failure_rate",
                     "preemption_rate_per_h", "upscaling_speed"):
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v) \
                    or v < 0 or (name == "tick_s" and v == 0):
                raise ValueError(f"{name} must be a finite number >= 0"
                                 f"{' and > 0' if name == 'tick_s' else ''}, got {v!r}")
        for name in ("latency_jitter", "launch_failure_rate"):
            if getattr(self, name) > 1:
                raise ValueError(f"{name} must be within [0, 1], got {getattr(self, name)}")
        if not isinstance(self.max_concurrent_launches, int) or self.max_concurrent_launches < 1:
            raise ValueError(f"max_concurrent_launches must be an integer >= 1, "
                             f"got {self.max_concurrent_launches!r}")
        if self.max_num_nodes is not None and (not isinstance(self.max_num_nodes, int)
                                               or self.max_num_nodes < 0):
            raise ValueError(f"max_num_nodes must be an integer >= 0, got {self.max_num_nodes!r}")
        t = self.pending_idle_timeout_s
        if t is not None and (not isinstance(t, (int, float)) or isinstance(t, bool)
                              or not math.isfinite(t) or t < 0):
            raise ValueError(f"pending_idle_timeout_s must be None or a finite number >= 0, "
                             f"got {t!r}")


@dataclass
class ReplayResult:
    scheduler: str
    trace: str
    scaling: str
    metrics: dict                    # see metrics.summarize
    series: dict                     # per tick: t_s, pending, running / allocated (ticks, T),
                                     # queued, requested, tick_s (metrics.Metrics.series)
    type_names: list
    warnings: list
    decisions: list = field(default_factory=list)   # Decision.key() per tick, if recorded
    check: Optional[dict] = None     # --check-ray summary


class Replay:
    """One replay of one trace window with one scheduler (call ``run``)."""

    def __init__(self, trace: LoadedTrace, scheduler, config: ReplayConfig = ReplayConfig(),
                 *, record_decisions: bool = False):
        self.trace = trace
        self.sched = scheduler
        self.cfg = config
        self.record = record_decisions
        self.types = trace.types
        self.type_of = {t.name: t for t in self.types}
        self.clock = SimClock()
        rc = ReconcileConfig(max_concurrent_launches=config.max_concurrent_launches,
                             upscaling_speed=float(config.upscaling_speed))
        self.store = InstanceStore(self.clock, sequential_ids("i-"), rc,
                                   request_id_factory=sequential_ids("lr-"))
        sim = SimNodeType(alloc_latency_s=config.alloc_latency_s,
                          install_latency_s=config.install_latency_s,
                          latency_jitter=config.latency_jitter,
                          launch_failure_rate=config.launch_failure_rate,
                          preemption_rate_per_h=config.preemption_rate_per_h)
        self.provider = DrainingProvider(self.store, {}, seed=config.seed, default=sim,
                                         deadline_s=drain_deadline_s(scheduler))
        self.cluster = Cluster(trace.columns, trace.shapes, trace.arrival_s, trace.duration_s,
                               trace.unit_shape, trace.gangs,
                               avoid_gpu_nodes=config.avoid_gpu_nodes)
        self.drains = Drains(self.provider, self.cluster)     # consolidation drains
        self._gang_specs: dict[int, GangSpec] = {}
        self.metrics = Metrics([t.name for t in self.types])
        self._synced_version = -1
        self.last: Optional[Decision] = None
        self.decisions: list = []
        self.warm_ids: list = []             # nodes up at t = 0 for the warm start
        self.warm_info: dict = {}
        if hasattr(self.sched, "use_trace"):     # e.g. the worker groups' prices
            self.sched.use_trace(trace)
        self.sched.start(self.clock)

    # ---- the head ----------------------------------------------------------------------
    def _start_head(self) -> None:
        head = self.type_of[HEAD_TYPE]
        self.store.apply([Move("head", Status.ALLOCATED, instance_type=HEAD_TYPE,
                               cloud_instance_id="cloud-head", node_kind=Kind.HEAD,
                               create=True)])
        self.store.apply([Move("head", Status.RAY_RUNNING, node_id="node-head")])
        self.cluster.add_node("head", HEAD_TYPE, dict(head.resources), 0.0)

    # ---- cluster <-> instance store ----------------------------------------------------
    def _sync(self, now: float) -> None:
        """Nodes whose ray came up join the cluster; nodes that lost ray leave it."""
        if self.store.version == self._synced_version:
            return
        c = self.cluster
        alive: set[str] = set()
        for rec in self.store:
            if rec.status not in _RAY_ALIVE:
                continue
            alive.add(rec.instance_id)
            slot = c.slot_of.get(rec.instance_id)
            if slot is None:
                joined = rec.entered_ns(Status.RAY_RUNNING)
                joined = now if joined is None else joined / NS
                slot = c.add_node(rec.instance_id, rec.instance_type,
                                  dict(self.type_of[rec.instance_type].resources), joined)
            c.set_placeable(slot, rec.status == Status.RAY_RUNNING)
        for iid, slot in list(c.slot_of.items()):
            if iid not in alive:
                c.remove_node(slot, now)
        self._synced_version = self.store.version

    def state(self, now: float) -> TickState:
        nodes, ids = [], []
        c = self.cluster
        for rec in self.store:
            if rec.status not in _IN_REQUEST:
                continue
            ns = NodeSpec(rec.instance_type, status=rec.status, kind=rec.node_kind)
            slot = c.slot_of.get(rec.instance_id)
            if rec.status == Status.RAY_RUNNING and slot is not None:
                ns.total, ns.available, ns.idle_ms = c.view(slot, now)
                ns.labels = c.labels(slot) or None
                ns.ray_node_id = rec.node_id
            nodes.append(ns)
            ids.append(rec.instance_id)
        requests = [RequestSpec(dict(self.trace.shapes[s]), n) for s, n in c.pending_runs()]
        gangs = [self._gang_spec(g) for g in c.pending_gangs()]
        return TickState(self.types, nodes, ids, requests, self.cfg.idle_timeout_s,
                         self.cfg.max_num_nodes, gangs, self.cfg.pending_idle_timeout_s)

    def _gang_spec(self, g: int) -> GangSpec:
        """A pending placement group as the GCS reports it: ``<pg>:<strategy>:PENDING``,
        each bundle with STRICT_PACK's affinity or STRICT_SPREAD's anti-affinity on the
        label ``_PG_<pg>`` (value "")."""
        spec = self._gang_specs.get(g)
        if spec is None:
            pg, strategy = self.trace.gangs.pg_id[g], self.trace.gangs.strategy[g]
            label = (f"_PG_{pg}", "")
            aff = label if strategy == "STRICT_PACK" else None
            anti = label if strategy == "STRICT_SPREAD" else None
            spec = self._gang_specs[g] = GangSpec(
                [RequestSpec(dict(self.trace.shapes[int(self.trace.unit_shape[u])]), 1,
                             affinity=aff, anti_affinity=anti)
                 for u in self.trace.gangs.members(g)],
                name=f"{pg}:{strategy}:PENDING")
        return spec

    # ---- one tick ----------------------------------------------------------------------
    def tick(self, k: int) -> None:
        now = k * self.cfg.tick_s
        self.drains.play_until(now)             # Cluster.play_until, ending drains on the way
        self.clock.ns = int(round(now * NS))
        self.provider.step(self.clock.ns)
        self._sync(now)
        self.cluster.place(now)
        timing = {}

        def schedule(store):
            self._sync(now)                     # a timeout may have moved a node
            self.cluster.place(now)
            state = self.state(now)
            self.last = None
            try:
                decision = self.sched.decide(state)
            except Exception as e:      # Ray's autoscaler logs it and loses the tick
                raise _LostTick(f"scheduler error {type(e).__name__}: {e}") from e
            finally:
                timing["s"] = self.sched.seconds
                timing["pending"] = (sum(r.count for r in state.requests)
                                     + sum(len(g.requests) for g in state.gangs))
            if self.sched.check is not None:
                self.sched.check.now_s = now
            self.sched.after(state, decision)
            self.last = decision
            return decision.launches, decision.terminations

        try:
            moves = self.store.reconcile(schedule)
        except (IllegalTransition, InvalidMove, _LostTick) as e:
            # The instance manager rejected the batch (e.g. Ray's quirk Q13), or the
            # scheduler raised: as in Ray, the rest of the tick is lost; the replay goes on.
            self.metrics.rejected(now, str(e))
        else:
            self.metrics.applied(moves.plan)
            self.metrics.disruption.applied(now, moves.plan, self.store)
            self.metrics.launch_step(moves.launch_step)
        self._sync(now)
        if self.record:
            self.decisions.append(self.last.key() if self.last is not None else None)
        self.metrics.tick(now, timing.get("pending", 0), timing.get("s", 0.0), self.store)

    def run(self, progress: Optional[Callable[[int, int], None]] = None) -> ReplayResult:
        t_wall = time.perf_counter()
        cfg = self.cfg
        last = float(self.trace.arrival_s[-1]) if self.trace.n_units else 0.0
        n_ticks = int(math.ceil((last + cfg.tail_s) / cfg.tick_s)) + 1
        self._start_head()
        self.warm_info = warm_start(self)
        for k in range(n_ticks):
            self.tick(k)
            if progress is not None:
                progress(k + 1, n_ticks)
        end = (n_ticks - 1) * cfg.tick_s
        self.cluster.finish(end)
        metrics = summarize(self, end, time.perf_counter() - t_wall)
        check = self.sched.check.summary() if self.sched.check is not None else None
        return ReplayResult(self.sched.name, self.trace.name, self.trace.scaling, metrics,
                            self.metrics.series(), [t.name for t in self.types],
                            list(self.trace.warnings), self.decisions, check)


def replay(trace=None, scheduler: str = "engine", *, groups=None,
           window: Window = DEFAULT_WINDOW, gangs: GangOverlay = GangOverlay(),
           config: ReplayConfig = ReplayConfig(), check_ray: bool = False,
           record_decisions: bool = False, progress=None,
           loaded: Optional[LoadedTrace] = None) -> ReplayResult:
    """Replay ``trace`` (a bundled name, a Parquet path or a Table; default: the bundled
    default trace) with one scheduler by name; see the module docstring."""
    loaded = loaded if loaded is not None else load(trace, groups, window, gangs)
    sched = make(scheduler, check_ray=check_ray)
    return Replay(loaded, sched, config, record_decisions=record_decisions).run(progress)


__all__ = ["DEFAULT_WINDOW", "GangOverlay", "Replay", "ReplayConfig", "ReplayResult", "Window",
           "load", "replay"]
