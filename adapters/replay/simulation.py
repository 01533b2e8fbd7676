"""Trace replay: a discrete-event simulation of an autoscaled Ray cluster on a simulated
clock, with a pluggable scheduler (``engine`` through ``EngineScheduler``, ``baseline``,
Ray 2.60's own; ``schedulers.py``).

One replay, in simulated time:

- **Demand.** Each trace row of the window is one unit (``trace.py``): it arrives,
  waits as pending demand, is placed by the cluster-side stand-in for Ray's raylets and
  placement group scheduler (``cluster.Cluster``), holds its resources for its duration
  and leaves. Units may be members of placement groups (``placement_groups.py``: the
  trace's own and the seeded ``--gangs`` overlay), which arrive together, are placed
  atomically and leave together.
- **The autoscaler** ticks every ``tick_s`` (5 s, Ray's ``AUTOSCALER_UPDATE_INTERVAL_S``).
  A tick at time T (``Replay.tick``), in this order:

  1. every arrival and completion up to T is played, placement running after each
     batch of simultaneous events (``Drains.play_until``: ``Cluster.play_until``, and
     the consolidation drains whose deadline falls in the tick);
  2. the simulated cloud reports what happened by T (``SimProvider.step``: launches
     allocated or failed, rays up, nodes stopped or preempted);
  3. (a) ``World.settle``: nodes that joined or left are synced into the cluster (units
     on a lost node go back to pending) and placement runs: the raylets do not wait
     for the autoscaler, so work lands on a node the moment it is up;
  4. the instance store reconciles (``InstanceStore.reconcile``, §10.1): timeouts;
     then (b) ``settle`` again, as a timeout may have moved a node the cluster holds
     (a drain stuck in RAY_STOP_REQUESTED goes back to RAY_RUNNING and takes work
     again); then the tick's one view (``view.TickView``: the ``TickState``) goes to the
     scheduler, and its launches and terminations are applied; stopped or failed
     instances go to TERMINATING; QUEUED -> REQUESTED under ``max_concurrent_launches``
     and ``upscaling_speed`` (§10.2);
  5. (c) ``World.sync``: the nodes the decision stops (RAY_STOP_REQUESTED) take no more
     work from the next tick's events; nothing else can have changed, so no placement
     follows.

  None of (a), (b), (c) is redundant: (b) sees what only the timeouts changed and (c)
  what only the decision changed. ``World.sync`` returns at once when the store's
  version has not moved since the last sync, and ``Cluster.place`` when nothing it
  reads changed, so a run with nothing to do costs nothing. Folding (a) into (b) would
  place the tick's work after the timeouts instead of before, which changes where work
  lands when a timeout revives a node.
- **The scheduler's view** (``view.py``): built once per tick, right before the
  decision, and handed to ``decide`` and ``after``; the engine and Ray are sent it as
  the protobuf ``SchedulingRequest`` Ray's reconciler builds. A head node of type
  ``head`` runs from t=0, and with a warm start the work alive at the window's start
  runs from t=0 on nodes the scheduler chose for it (``warm_start.py``).
- **The end** is the first tick at or after the last arrival plus ``tail_s``. Nothing
  happens after that tick, so the final accounting holds exactly: units in = placed +
  still pending + infeasible (the last tick's infeasible units), asserted every replay.

Instance ids (``i-000000``...), launch request ids and every random draw (the cloud's
latencies and failures, the gang overlay) derive from the seed, so a replay is
deterministic. The schedulers read time from the simulated clock, which ``start`` gives
them.

The driver (``Replay``) owns no simulation state of its own: the world (``world.py``:
clock, cloud, instance store, cluster), the view (``view.py``), the scheduler
(``interface.ReplayScheduler``) and the metrics (``metrics.py``) are separate parts, and
the helpers (``warm_start``, ``pending_demand``, ``metrics.summarize``) take them
explicitly.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

from vecsched.adapters.sim.lifecycle import IllegalTransition, InvalidMove
from .config import DEFAULT_WINDOW, ReplayConfig
from .cloud_answers import CloudSide
from .interface import Decision, ReplayScheduler, TickState
from .metrics import Metrics, summarize
from .placement_groups import GangOverlay
from .registry import make
from .trace import LoadedTrace, Window, load
from .view import TickView
from .warm_start import WarmStart, warm_start
from .world import NS, World


class _LostTick(Exception):
    """The scheduler raised during a tick."""


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
    """One replay of one trace window with one scheduler (call ``run``, or ``begin``
    then ``tick(k)`` for k = 0, 1, ...). The parts are public: ``world`` (clock, cloud,
    store, cluster; ``store``, ``cluster``, ``provider`` and ``clock`` are its), ``view``,
    ``scheduler``, ``metrics``; ``last`` is the last tick's decision (None when its
    scheduler call failed), ``warm`` what the warm start did."""

    def __init__(self, trace: LoadedTrace, scheduler: ReplayScheduler,
                 config: ReplayConfig = ReplayConfig(), *, record_decisions: bool = False):
        if not isinstance(scheduler, ReplayScheduler):
            raise TypeError(f"scheduler: a ReplayScheduler (adapters/replay/interface.py), "
                            f"got {type(scheduler).__name__}")
        self.trace = trace
        self.scheduler = scheduler
        self.cfg = config
        self.record = record_decisions
        scheduler.use_trace(trace)
        self.world = World.build(trace, config, scheduler.drain_deadline_s)
        self.cloud = CloudSide(trace, config, self.world)     # stock-outs, spot, limits
        scheduler.use_limits(self.cloud.limits)
        self.view = TickView(trace, self.world.store, self.world.cluster, config)
        self.metrics = Metrics([t.name for t in trace.types])
        self.last: Optional[Decision] = None
        self.decisions: list = []
        self.warm = WarmStart()
        scheduler.start(self.world.clock)

    @property
    def store(self):
        return self.world.store

    @property
    def cluster(self):
        return self.world.cluster

    @property
    def provider(self):
        return self.world.provider

    @property
    def clock(self):
        return self.world.clock

    def n_ticks(self) -> int:
        """Ticks up to the first at or after the last arrival plus ``tail_s``."""
        last = float(self.trace.arrival_s[-1]) if self.trace.n_units else 0.0
        return int(math.ceil((last + self.cfg.tail_s) / self.cfg.tick_s)) + 1

    def begin(self) -> None:
        """Before the first tick: the head, and the warm start (``warm_start.py``)."""
        self.world.start_head()
        self.warm = warm_start(self.trace, self.world, self.view, self.scheduler)

    # ---- one tick ----------------------------------------------------------------------
    def tick(self, k: int) -> None:
        """Tick ``k`` at ``k * tick_s`` (see the module docstring for its steps)."""
        now = k * self.cfg.tick_s
        w = self.world
        w.drains.play_until(now)                # arrivals, completions, drains ending
        w.clock.ns = int(round(now * NS))
        self.cloud.before(now)                  # the capacity schedules
        w.provider.step(w.clock.ns)             # what the cloud did by now
        w.settle(now)                           # (a) the raylets act on it
        seen = _Seen()
        try:
            moves = w.store.reconcile(lambda store: self._decide(now, seen))
        except (IllegalTransition, InvalidMove, _LostTick) as e:
            # The instance manager rejected the batch (e.g. Ray's quirk Q13), or the
            # scheduler raised: as in Ray, the rest of the tick is lost; the replay goes on.
            self.metrics.rejected(now, str(e))
        else:
            self.metrics.applied(moves.plan)
            self.metrics.disruption.applied(now, moves.plan, w.store)
            self.metrics.launch_step(moves.launch_step)
        w.sync(now)                             # (c) the decision's stops take no work
        self.cloud.after(self.scheduler.last_plan if self.last is not None else None,
                         decided=self.last is not None)
        if self.record:
            self.decisions.append(self.last.key() if self.last is not None else None)
        self.metrics.tick(now, seen.pending, seen.seconds, w.store)

    def _decide(self, now: float, seen: "_Seen") -> tuple:
        """The reconciler's scheduling step, after its timeouts: the tick's one view,
        the scheduler's decision on it; returns (launches, terminations)."""
        self.world.settle(now)                  # (b) a timeout may have moved a node
        state = self.cloud.dress(self.view.state(now), now)   # + the cloud's answers
        self.last = None
        try:
            decision = self.scheduler.decide(state)
        except Exception as e:      # Ray's autoscaler logs it and loses the tick
            raise _LostTick(f"scheduler error {type(e).__name__}: {e}") from e
        finally:
            seen.seconds = self.scheduler.seconds
            seen.pending = state.pending_units
        self.scheduler.after(state, decision)
        self.last = decision
        return decision.launches, decision.terminations

    def run(self, progress: Optional[Callable[[int, int], None]] = None) -> ReplayResult:
        t_wall = time.perf_counter()
        n_ticks = self.n_ticks()
        self.begin()
        for k in range(n_ticks):
            self.tick(k)
            if progress is not None:
                progress(k + 1, n_ticks)
        end = (n_ticks - 1) * self.cfg.tick_s
        self.cluster.finish(end)
        check = self.scheduler.check
        metrics = summarize(self.trace, self.cfg, self.world, self.metrics, check=check,
                            warm=self.warm, last=self.last, gang_name=self.view.gang_name,
                            end_s=end, wall_s=time.perf_counter() - t_wall)
        metrics.update(self.cloud.summary())
        return ReplayResult(self.scheduler.name, self.trace.name, self.trace.scaling, metrics,
                            self.metrics.series(), [t.name for t in self.trace.types],
                            list(self.trace.warnings), self.decisions,
                            check.summary() if check is not None else None)


@dataclass
class _Seen:
    """What the metrics keep of a tick's scheduling step."""
    pending: int = 0                 # units pending in the tick's view
    seconds: float = 0.0             # the scheduler's call proper


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


__all__ = ["DEFAULT_WINDOW", "GangOverlay", "Replay", "ReplayConfig", "ReplayResult", "TickState",
           "Window", "load", "replay"]
