"""``EngineScheduler`` as installed in a live Ray autoscaler (adapters/ray/install.py):
it never raises, counts every tick, writes the stats file, can run in shadow
mode, and never makes the autoscaler wait for a compile - the engine's kernels
warm up in a background thread while Ray's own scheduler decides.
"""
from __future__ import annotations

import copy
import functools
import logging
import os
import threading
import time
import weakref
from collections import Counter
from typing import Optional

import ray
from ray.autoscaler.v2.scheduler import (ResourceDemandScheduler, SchedulingReply,
                                         SchedulingRequest)
from ray.core.generated.instance_manager_pb2 import TerminationRequest

from .compare import ray_quirk, reply_diff
from .decisions import count_decisions, infeasible_by_cause
from .scheduler import EngineScheduler
from .stats import TickHistogram, write_json
from .warming import Warmup, warm_all

logger = logging.getLogger(__name__)

_SUMMARY_EVERY = 100          # ticks between INFO summaries in the monitor log


class AutoscalerScheduler(EngineScheduler):
    """``EngineScheduler`` as installed in a live autoscaler.

    * ``mode = "engine"``: the engine decides; if it ever raises (it should not), the
      error is logged with its traceback, counted (``engine_errors``) and Ray's own
      ``ResourceDemandScheduler.schedule`` decides that tick, so a tick is never lost.
    * ``mode = "efficient"``: the same, with the engine in its efficient mode
      (``efficient_options``, from ``VECSCHED_EFFICIENT_OPTIONS``): it chooses for cost,
      so its decisions are not Ray's; on an engine error Ray's scheduler decides that tick.
    * ``mode = "shadow"``: Ray's scheduler decides (and emits the events); the engine
      runs on a copy of the same request, and any difference in the decisions is logged
      at WARNING with the tick number and counted (``shadow_diff_ticks``).
    * Until the engine's kernels are compiled (or loaded from numba's cache), which
      happens in a background thread started by the constructor (:attr:`warm_up`, the
      work; :attr:`warmup`, its :class:`~vecsched.adapters.ray.warming.Warmup`), Ray's
      scheduler decides every tick (``warmup_ticks``) - the same decisions, by
      construction - and the engine takes over from the first tick after it. The two
      keep one pending-node idle state (Ray's ``_pending_unneeded_since_s``), handed
      over whenever the decider changes. If the warm-up fails, Ray keeps deciding.

    Every ``schedule()`` call is counted in :attr:`counters` and, when ``stats_path`` is
    set, the counters go to that JSON file after every tick (atomically replaced).
    For the Prometheus metrics (``adapters/ray/metrics.py``) it also keeps, under
    :attr:`lock`, the seconds of every scheduler pass (:attr:`tick_seconds`, a histogram
    per scheduler), the decisions by kind and cause (:attr:`decisions`), the ticks Ray
    decided and why (:attr:`ray_decided`) and the last tick's infeasible requests by
    cause (:attr:`infeasible_now`); :meth:`metrics_view` copies them.
    ``install()`` makes a subclass with ``mode`` and ``stats_path`` filled in.
    """

    mode = "engine"
    efficient_options = None       # mode "efficient": its EfficientOptions (None: defaults)
    limits_setting = None          # VECSCHED_LIMITS (capacity_settings.py): Limits or None
    availability_setting = None    # VECSCHED_AVAILABILITY: AvailabilityOptions, False or None
    stats_path: Optional[str] = None
    built = 0                      # instances built in this process (the Autoscaler builds one)
    _latest = None                 # weak reference to the last one built (the collector's)

    # The warm-up's work, run in a background thread (tests put a slow one here).
    warm_up = staticmethod(warm_all)

    def __init__(self, event_logger=None, **kwargs):
        if self.mode == "efficient":
            kwargs.setdefault("mode", "efficient")
            kwargs.setdefault("options", self.efficient_options)
        if self.mode in ("engine", "efficient"):
            kwargs.setdefault("limits", self.limits_setting)
            kwargs.setdefault("availability", self.availability_setting)
        super().__init__(event_logger, warm=False, **kwargs)
        type(self).built += 1
        self.counters: Counter = Counter()
        self.launched: Counter = Counter()
        self.terminated: Counter = Counter()
        self.times = {"engine_s_total": 0.0, "engine_s_max": 0.0,
                      "ray_s_total": 0.0, "ray_s_max": 0.0}
        self.last_diff: list = []
        self.lock = threading.Lock()          # the metrics scrape reads from another thread
        self.tick_seconds = {"engine": TickHistogram(), "ray": TickHistogram()}
        self.decisions: Counter = Counter()   # (kind, cause, node_type) -> n
        self.ray_decided: Counter = Counter()  # reason -> ticks
        self.infeasible_now: Counter = Counter()
        self.limits_now: dict = {}            # the last engine tick's limits (docs/capacity.md)
        self.held_out_now: list = []          # groups the availability memory held out
        self._started = time.time()
        AutoscalerScheduler._latest = weakref.ref(self)   # one per monitor process
        self._shadow = EngineScheduler(None, warm=False) if self.mode == "shadow" else None
        self._engine_decided_last = False
        warm = type(self).warm_up
        if self.mode == "efficient" and warm is warm_all:
            warm = functools.partial(warm_all, efficient=True)   # its own kernels too
        self.warmup = Warmup(warm)
        logger.info("vecsched: the autoscaler schedules with %s (mode %s, Ray %s, pid %d, "
                    "stats %s); the engine takes over once its kernels are loaded (Ray's "
                    "scheduler decides until then)", type(self).__name__, self.mode,
                    ray.__version__, os.getpid(), self.stats_path or "off")
        self._write_stats()

    @staticmethod
    def latest() -> Optional["AutoscalerScheduler"]:
        """The last one built in this process (of any installed subclass), if alive."""
        ref = AutoscalerScheduler._latest
        return ref() if ref is not None else None

    @property
    def warmup_s(self) -> Optional[float]:
        """Seconds the warm-up took (None while it runs, or if it failed)."""
        return self.warmup.seconds if self.warmup.ready() else None

    # -- the tick

    def schedule(self, request: SchedulingRequest) -> SchedulingReply:
        self.counters["ticks"] += 1
        tick = self.counters["ticks"]
        plan_before = self.last_plan
        if not self.warmup.ready():
            reply, decided_by, diff = self._schedule_warming(request, tick), "ray (warm-up)", None
            reason = "warmup"
        elif self.mode == "shadow":
            reply, diff = self._schedule_shadow(request, tick)
            decided_by, reason = "ray", "shadow"
        else:
            reply, decided_by = self._schedule_engine(request, tick)
            diff = None
            reason = None if decided_by == "engine" else "engine_error"
        plan = self.last_plan if decided_by == "engine" and self.last_plan is not plan_before \
            else None
        self._account(reply)
        self._account_metrics(reply, plan, reason)
        self._log_tick(tick, reply, decided_by, diff)
        self._write_stats()
        return reply

    def _timed(self, which: str, fn, request):
        t0 = time.perf_counter()
        try:
            return fn(request)
        finally:
            dt = time.perf_counter() - t0
            with self.lock:
                self.tick_seconds[which].observe(dt)
            self.times[f"{which}_s_total"] += dt
            self.times[f"{which}_s_max"] = max(self.times[f"{which}_s_max"], dt)
            self.times[f"{which}_s_last"] = dt

    def _schedule_warming(self, request, tick):
        if not self.counters["warmup_ticks"]:
            logger.info("vecsched: tick %d: the engine's kernels are not loaded yet (being "
                        "compiled: a first start on this cache); Ray's scheduler decides "
                        "until they are", tick)
        self.counters["warmup_ticks"] += 1
        return self._schedule_ray(request)

    def _schedule_ray(self, request):
        """Ray's own scheduler decides, from the shared pending-node state."""
        if self._engine_decided_last:
            self._pending_unneeded_since_s = copy.deepcopy(self._pending_since)
            self._engine_decided_last = False
        reply = self._timed("ray", lambda r: ResourceDemandScheduler.schedule(self, r),
                            request)
        self.counters["ray_ticks"] += 1
        if self.limits is not None and not self.limits.empty and reply.to_launch:
            # Ray's scheduler knows no limits: on a tick it decides (the warm-up, an engine
            # error) nothing is launched, so a limit is never exceeded (docs/capacity.md).
            self.counters["limit_held_ray_launches"] += sum(lr.count for lr in reply.to_launch)
            reply.to_launch = []
        return reply

    def _schedule_engine(self, request, tick):
        if self.counters["warmup_ticks"] and not self.counters["engine_ticks"]:
            logger.info("vecsched: the engine's kernels are ready (%.1f s); the engine "
                        "decides from tick %d", self.warmup.seconds, tick)
        if not self._engine_decided_last:
            self._pending_since = copy.deepcopy(self._pending_unneeded_since_s)
        try:
            reply = self._timed("engine", super().schedule, request)
            self.counters["engine_ticks"] += 1
            self._engine_decided_last = True
            return reply, "engine"
        except Exception:
            self.counters["engine_errors"] += 1
            logger.exception("vecsched: EngineScheduler failed on tick %d; Ray's "
                             "ResourceDemandScheduler decides this tick instead", tick)
        return self._schedule_ray(request), "ray (engine failed)"

    def _schedule_shadow(self, request, tick):
        try:
            shadow_request = copy.deepcopy(request)   # Ray's pass must not change its input
        except Exception:
            shadow_request = None
            logger.exception("vecsched shadow: could not copy the request on tick %d", tick)
        # The shadow engine starts each tick from Ray's pending-node state, as Ray did.
        self._shadow._pending_since = copy.deepcopy(self._pending_unneeded_since_s)
        reply = self._schedule_ray(request)
        if shadow_request is None:
            self.counters["shadow_errors"] += 1
            return reply, None
        try:
            engine_reply = self._timed("engine", self._shadow.schedule, shadow_request)
        except Exception:
            self.counters["shadow_errors"] += 1
            logger.exception("vecsched shadow: EngineScheduler failed on tick %d", tick)
            return reply, None
        self.counters["shadow_ticks"] += 1
        diff = reply_diff(reply, engine_reply)
        if diff:
            self.counters["shadow_diff_ticks"] += 1
            quirk = ray_quirk(reply)
            if quirk:
                self.counters["shadow_known_divergence_ticks"] += 1
                diff = diff + [f"known divergence {quirk}"]
            self.last_diff = [f"tick {tick}"] + diff
        return reply, diff

    # -- accounting

    def _account(self, reply):
        for lr in reply.to_launch:
            self.launched[lr.instance_type] += lr.count
        for t in reply.to_terminate:
            self.terminated[TerminationRequest.Cause.Name(t.cause)] += 1
        if reply.infeasible_resource_requests or reply.infeasible_gang_resource_requests:
            self.counters["ticks_with_infeasible"] += 1

    def _account_metrics(self, reply, plan, reason):
        """The figures the metrics collector exports (``plan``: the engine's, when it
        made ``reply``; ``reason``: why Ray decided this tick, None if the engine did)."""
        try:
            decided = count_decisions(reply, plan)
            infeasible = infeasible_by_cause(reply, plan)
        except Exception:              # never lose a tick over its metrics
            self.counters["metrics_errors"] += 1
            logger.exception("vecsched: cannot count this tick's decisions for the metrics")
            return
        with self.lock:
            self.decisions.update(decided)
            self.infeasible_now = infeasible
            if plan is not None:
                self.limits_now = dict(plan.stats.get("limits", {}))
                self.held_out_now = list(plan.stats.get("held_out", []))
            if reason is not None:
                self.ray_decided[reason] += 1

    def metrics_view(self) -> dict:
        """A consistent copy of what the metrics collector exports."""
        with self.lock:
            return {
                "mode": self.mode,
                "ticks": self.counters["ticks"],
                "engine_ticks": self.counters["engine_ticks"],
                "engine_errors": self.counters["engine_errors"],
                "shadow_ticks": self.counters["shadow_ticks"],
                "shadow_diff_ticks": self.counters["shadow_diff_ticks"],
                "shadow_known_divergence_ticks":
                    self.counters["shadow_known_divergence_ticks"],
                "shadow_errors": self.counters["shadow_errors"],
                "tick_seconds": {k: h.copy() for k, h in self.tick_seconds.items()},
                "decisions": dict(self.decisions),
                "ray_decided": dict(self.ray_decided),
                "infeasible_now": dict(self.infeasible_now),
                "limits_now": {k: dict(v) for k, v in self.limits_now.items()},
                "held_out_now": list(self.held_out_now),
                "warmup_ready": self.warmup.ready(),
                "warmup_s": self.warmup_s,
                "warmup_failed": self.warmup.error is not None,
                "started_at": self._started,
            }

    def _log_tick(self, tick, reply, decided_by, diff):
        if diff:
            logger.warning("vecsched shadow: tick %d, the engine differs from Ray: %s",
                           tick, "; ".join(diff))
        if reply.to_launch or reply.to_terminate:
            launch = dict(Counter({lr.instance_type: lr.count for lr in reply.to_launch}))
            term = dict(Counter(TerminationRequest.Cause.Name(t.cause)
                                for t in reply.to_terminate))
            logger.info("vecsched tick %d decided by %s in %.1f ms: launch %s, terminate %s",
                        tick, decided_by, 1e3 * self.times.get(
                            "engine_s_last" if decided_by == "engine" else "ray_s_last", 0.0),
                        launch, term)
        else:
            logger.debug("vecsched tick %d decided by %s: nothing to do", tick, decided_by)
        if tick % _SUMMARY_EVERY == 0:
            logger.info("vecsched: %s", self._summary())

    def _summary(self) -> str:
        c = self.counters
        if self.mode == "shadow":
            return (f"{c['ticks']} ticks in shadow mode, {c['shadow_diff_ticks']} with a "
                    f"difference ({c['shadow_known_divergence_ticks']} of them documented "
                    f"divergences), {c['shadow_errors']} engine errors")
        return (f"{c['ticks']} ticks, {c['engine_ticks']} decided by the engine, "
                f"{c['engine_errors']} engine errors (Ray decided those)")

    def stats_snapshot(self) -> dict:
        c = self.counters
        return {
            "pid": os.getpid(),
            "ray_version": ray.__version__,
            "mode": self.mode,
            "scheduler_class": f"{type(self).__module__}.{type(self).__qualname__}",
            "scheduler_mro": [f"{k.__module__}.{k.__qualname__}" for k in type(self).__mro__],
            "schedulers_built": type(self).built,
            "started_at": self._started,
            "updated_at": time.time(),
            "warmup_s": self.warmup_s,
            "warmup_error": None if self.warmup.error is None else repr(self.warmup.error),
            **{k: c[k] for k in ("ticks", "engine_ticks", "engine_errors", "ray_ticks",
                                 "warmup_ticks",
                                 "shadow_ticks", "shadow_diff_ticks",
                                 "shadow_known_divergence_ticks", "shadow_errors",
                                 "ticks_with_infeasible")},
            "engine_counters": dict(self.stats),     # EngineScheduler's own (clamps, ...)
            "launched": dict(self.launched),
            "terminated": dict(self.terminated),
            **{k: round(v, 6) for k, v in self.times.items()},
            "last_diff": self.last_diff,
        }

    def _write_stats(self):
        if not self.stats_path:
            return
        try:
            write_json(self.stats_path, self.stats_snapshot())
        except Exception:
            if not self.counters["stats_write_errors"]:
                logger.exception("vecsched: cannot write %s", self.stats_path)
            self.counters["stats_write_errors"] += 1
