"""EngineScheduler: a drop-in for Ray 2.60's ResourceDemandScheduler."""
from __future__ import annotations

import copy
import gc
import logging
import time
import uuid
from collections import Counter
from typing import Callable, Optional

import ray.autoscaler.v2.scheduler as _rds
from ray.autoscaler.v2.scheduler import (ResourceDemandScheduler, SchedulingReply,
                                         SchedulingRequest)

from vecsched.engine import schedule
from vecsched.engine.schedule import MODES
from vecsched.engine.tick import AvailabilityMemory, AvailabilityOptions, Limits, get, live_counts

from . import wire
from .availability import CloudAnswers, apply
from .codec import SpecCache, decode, encode

logger = logging.getLogger(__name__)


class EngineScheduler(ResourceDemandScheduler):
    """Schedules with the vecsched engine; same constructor and reply as Ray's.

    ``new_id``, ``now_ns`` and ``monotonic`` make replies reproducible when
    injected. Bad input raises ``vecsched.engine.ProblemError`` naming the field; the
    scheduler's own state (pending-idle timestamps) is then left as it was.

    ``warm=False``: do not compile (or load) the codec's scan in the constructor
    (whoever passes it warms up on its own, adapters/ray/warming.py).

    ``mode``: ``"ray-compat"`` (the default: Ray 2.60's decisions) or
    ``"efficient"`` (``vecsched.engine.efficient``: chosen for cost, not Ray-exact; it
    cancels unneeded pending nodes itself, so Ray's pending-idle tracking is not
    run), with ``options`` its ``EfficientOptions`` (e.g. the worker groups'
    prices); it is ``engine_mode``. ``"baseline"``: the first-fit-decreasing
    yardstick. The last tick's plan is ``last_plan``.

    ``limits`` (``vecsched.engine.tick.Limits``, any mode): caps on resource totals
    and cost per hour (docs/capacity.md); with none, ray-compat is Ray's exactly.
    ``availability``: the efficient mode and the baseline keep an availability
    memory (``vecsched.engine.tick.AvailabilityMemory``) of the groups the cloud
    refused, read from the request's instance records (``availability.CloudAnswers``)
    and held out of launches for a while; pass ``AvailabilityOptions`` to tune it,
    ``False`` to turn it off. Ray-compat reads Ray's own availability scores.
    """

    def __init__(self, event_logger=None, *, new_id: Optional[Callable[[], str]] = None,
                 now_ns: Optional[Callable[[], int]] = None,
                 monotonic: Optional[Callable[[], float]] = None, warm: bool = True,
                 mode: str = "ray-compat", options=None, limits: Optional[Limits] = None,
                 availability=None):
        if mode not in MODES:
            raise ValueError(f"mode: unknown scheduling mode {mode!r}; available: {MODES}")
        if options is not None and mode != "efficient":
            raise ValueError("options: only mode='efficient' takes options")
        _check_arguments(mode, options, limits, availability,
                         dict(new_id=new_id, now_ns=now_ns, monotonic=monotonic))
        super().__init__(event_logger)
        self.engine_mode = mode     # ``mode`` is the installed subclass's engine / shadow
        self._options = options
        self.limits = limits
        self.memory = None
        if availability is not False and get(mode).reads_memory:
            self.memory = AvailabilityMemory(availability if isinstance(
                availability, AvailabilityOptions) else None)
        self._answers = CloudAnswers(
            pending_stockout_s=self.memory.options.pending_stockout_s if self.memory else None)
        self._stability = _stability_window() if mode == "efficient" else None
        self._drains = _drain_memory() if mode == "efficient" else None
        self._quiet = _quiet_window() if mode == "efficient" else None
        self.last_plan = None
        self._new_id = new_id or (lambda: str(uuid.uuid4()))
        # Ray's scheduler calls time.time_ns / time.monotonic through its module's
        # ``time`` at tick time; so do these defaults (a patched clock applies).
        self._now_ns = now_ns or (lambda: _rds.time.time_ns())
        self._monotonic = monotonic or (lambda: _rds.time.monotonic())
        # Per type, since when 1, 2, ... pending nodes have been unneeded (§5.1);
        # replaced only after a tick succeeds, so a failed tick leaves it intact.
        self._pending_since: dict = {}
        self._specs = SpecCache()      # bundles and groups decoded last tick
        self.stats: Counter = Counter()
        self.last_timing: dict = {}
        # The last tick's array widths: its columns are only what it names, so
        # these follow the cluster, not its history (placement groups churn).
        self.last_shape: dict = {}
        if warm:
            wire.warmup()              # the codec's numba scan, compiled or loaded once

    def schedule(self, request: SchedulingRequest) -> SchedulingReply:
        # The cyclic garbage collector is paused for the tick: decoding allocates
        # many small objects, and a full collection of the autoscaler's heap in the
        # middle of it would double the tick for nothing (no cycles are made here).
        paused = gc.isenabled()
        gc.disable()
        try:
            return self._schedule(request)
        finally:
            if paused:
                gc.enable()

    def _schedule(self, request: SchedulingRequest) -> SchedulingReply:
        t0 = time.perf_counter()
        decoded = decode(request, self._specs)
        t1 = time.perf_counter()
        memory, events = self._read_answers(request)
        now_s = self._now_ns() / 1e9
        room = {}
        if memory is not None:
            memory.observe(live_counts(decoded.problem), now_s)
            room = memory.room(now_s)
        unavailable = memory.unavailable(now_s) if memory is not None else ()
        probing = memory.probing(now_s) if memory is not None else ()
        opts = None
        if self.engine_mode == "ray-compat":
            tracking = request.pending_idle_timeout_s is not None
            plan = schedule(decoded.problem, pending_since=self._pending_since,
                            now_s=self._monotonic() if tracking else 0.0, limits=self.limits)
        else:
            tracking = False
            opts = self._efficient_options(decoded) if self.engine_mode == "efficient" else None
            opts = _spot_priced(opts, memory, decoded.problem, self._now_ns() / 1e9)
            plan = schedule(decoded.problem, mode=self.engine_mode, options=opts,
                            limits=self.limits, unavailable=unavailable, probing=probing,
                            room=room)
        t2 = time.perf_counter()
        reply = encode(decoded, plan, new_id=self._new_id, now_ns=self._now_ns)
        t3 = time.perf_counter()
        self.last_timing = {"decode_s": t1 - t0, "engine_s": t2 - t1, "encode_s": t3 - t2}
        p = decoded.problem
        self.last_shape = {"nodes": p.N, "resources": p.R, "labels": len(p.label_keys)}
        self._specs = decoded.cache
        self.last_plan = plan
        self.stats["engine_ticks"] += 1
        if memory is not None:
            self.memory = memory
            self._answers.commit(events, (ai.im_instance.instance_id for ai in
                                          request.current_instances if ai.im_instance))
        if tracking:
            self._pending_since = plan.pending_since
        if self._drains is not None:
            self._drains.remember(p, plan, lambda i: _instance_key(decoded, i), opts)
        if decoded.problem.clamped:
            self.stats["clamped_available"] += decoded.problem.clamped
            logger.warning("vecsched: %d available > total entries (utilisation clamped at 0; "
                           "Ray would assert if it scored them)",
                           decoded.problem.clamped)
        if self._event_logger is not None:
            try:
                self._event_logger.log_cluster_scheduling_update(
                    launch_requests=reply.to_launch,
                    terminate_requests=reply.to_terminate,
                    infeasible_requests=reply.infeasible_resource_requests,
                    infeasible_gang_requests=reply.infeasible_gang_resource_requests,
                    infeasible_cluster_resource_constraints=(
                        reply.infeasible_cluster_resource_constraints),
                    cluster_resources=reply.cluster_resources,
                )
            except Exception:
                logger.exception("Failed to emit event logs.")
        return reply

    def _read_answers(self, request):
        """(the memory after this tick's answers, the answers): a copy, kept only once
        the tick succeeds (a failed tick leaves the scheduler's state as it was)."""
        if self.memory is None:
            return None, []
        events = self._answers.scan(request.current_instances, self._now_ns() / 1e9)
        # a copy whenever the memory holds anything (``observe`` changes it every tick)
        memory = copy.deepcopy(self.memory) if events or self.memory.counts["stockouts"] \
            else self.memory
        apply(memory, events)
        return memory, events

    def _efficient_options(self, decoded):
        """This tick's efficient options: the caller's, with what the memory across
        ticks adds (the stability window's held nodes, the nodes being disrupted)."""
        if self._options is None:
            return None
        p = decoded.problem
        keys = _Once(lambda: _node_keys(decoded))
        now = self._monotonic()
        opts = self._stability.options_for(p, keys, self._options, now, self._now_ns())
        opts = self._drains.options_for(p, lambda i: _instance_key(decoded, i), opts)
        return self._quiet.options_for(p, keys, opts, now, restarted=self._drains.ended > 0)


def _check_arguments(mode, options, limits, availability, clocks: dict) -> None:
    """ValueError naming the argument of the constructor that is of the wrong kind (a
    dict where options are expected would otherwise be ignored, or fail deep in a tick)."""
    if limits is not None and not isinstance(limits, Limits):
        raise ValueError(f"limits: expected vecsched.engine.tick.Limits, got {limits!r}")
    if availability is not None and not isinstance(availability, (bool, AvailabilityOptions)):
        raise ValueError(f"availability: expected vecsched.engine.tick.AvailabilityOptions, "
                         f"True or False, got {availability!r}")
    if options is not None:
        from vecsched.engine.efficient import EfficientOptions
        if not isinstance(options, EfficientOptions):
            raise ValueError(f"options: expected vecsched.engine.efficient.EfficientOptions, "
                             f"got {options!r}")
    for name, fn in clocks.items():
        if fn is not None and not callable(fn):
            raise ValueError(f"{name}: expected a callable, got {fn!r}")


def _spot_priced(opts, memory, p, now_s: float):
    """The efficient options with each group's recent interruptions priced in (the
    availability memory's ``interruption_prices``); unchanged without prices."""
    if opts is None or not opts.prices or memory is None:
        return opts
    import dataclasses

    from vecsched.engine.model.dtypes import Status
    running = {}
    for t in p.node_type[p.node_status == Status.RAY_RUNNING].tolist():
        running[p.type_names[t]] = running.get(p.type_names[t], 0) + 1
    prices = memory.interruption_prices(dict(opts.prices), running, now_s)
    return opts if prices == opts.prices else dataclasses.replace(opts, prices=prices)


class _Once:
    """A function's result, computed on the first call only."""

    def __init__(self, fn):
        self.fn, self.value = fn, None

    def __call__(self):
        if self.value is None:
            self.value = self.fn()
        return self.value


def _instance_key(decoded, i: int) -> str:
    """The instance id of the request's instance ``i`` (the consolidation memory's key)."""
    im = decoded.instances[int(i)].im_instance
    return im.instance_id if im is not None else f"#{i}"


def _node_keys(decoded) -> list:
    """The instance id of each node of the decoded problem (the stability window's key)."""
    return [_instance_key(decoded, i) for i in decoded.problem.node_source.tolist()]


def _stability_window():
    """Consolidation's stability window, kept across ticks (efficient mode only; the
    efficient package is not loaded on the ray-compat path)."""
    from vecsched.engine.efficient.stability import StabilityWindow
    return StabilityWindow()


def _drain_memory():
    """The causes of the engine's own terminations, kept across ticks for the disruption
    budgets (efficient mode only)."""
    from vecsched.engine.efficient.drain_memory import DrainMemory
    return DrainMemory()



def _quiet_window():
    """Consolidation's cluster-wide quiet window, kept across ticks (efficient mode only)."""
    from vecsched.engine.efficient.quiet import QuietWindow
    return QuietWindow()
