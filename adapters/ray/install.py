"""Put ``EngineScheduler`` into a real Ray autoscaler v2 (how to use it: docs/RAY.md).

Ray 2.60 has no setting that chooses the autoscaler's scheduler: ``Autoscaler.__init__``
(``ray/autoscaler/v2/autoscaler.py``) builds ``ResourceDemandScheduler(event_logger)`` by
name (RAY_V2_SEMANTICS.md §11). :func:`install` rebinds that name, in the autoscaler
(monitor) process and before the ``Autoscaler`` is built, to :class:`AutoscalerScheduler`,
a subclass of ``EngineScheduler`` that also never raises, counts every tick, writes a small
stats file and can run in shadow mode. Everything else in the autoscaler is stock Ray.

The ways in, each of which ends in :func:`install` inside the autoscaler process:

* ``vecsched-monitor ARGS`` (``adapters/ray/monitor.py``): Ray's
  ``ray/autoscaler/v2/monitor.py`` with the same arguments, run after the swap.
  ``vecsched-monitor kuberay-autoscaler --cluster-name N --cluster-namespace NS`` does the
  same for ``ray kuberay-autoscaler`` (the KubeRay side-car).
* ``RAY_START_HOOK=adapters.ray.install.ray_start_hook ray start --head ...``:
  :func:`ray_start_hook` runs inside ``ray start`` before anything is started and makes
  Ray launch ``adapters/ray/monitor.py`` instead of its own ``monitor.py``, with the same
  command-line arguments, so Ray still starts, owns and stops the monitor process
  (``ray stop`` finds it: its command line still contains ``monitor.py``).

Environment (read in the autoscaler process; ``ray start`` passes its own environment on):

* ``VECSCHED_MODE``: ``engine`` (default: the engine makes every decision), ``shadow``
  (Ray's scheduler decides, the engine runs on the same input every tick and any
  difference is logged and counted), ``ray`` (nothing is installed: stock Ray).
* ``VECSCHED_STATS_FILE``: where the stats JSON goes; default
  ``<logs-dir>/vecsched_stats.json`` under the monitor's ``--logs-dir``.
* ``VECSCHED_UNTESTED_RAY``: what to do on a Ray version other than
  :data:`TESTED_RAY_VERSIONS`: ``refuse`` (default; nothing is installed and the command
  fails with a message saying why) or ``ray`` (start with Ray's own scheduler, and say so
  at ERROR level).
"""
from __future__ import annotations

import copy
import json
import logging
import os
import sys
import tempfile
import time
from collections import Counter
from typing import Optional

import ray
from ray.autoscaler.v2.scheduler import (ResourceDemandScheduler, SchedulingReply,
                                         SchedulingRequest)
from ray.core.generated.instance_manager_pb2 import TerminationRequest

from .compare import ray_quirk, reply_diff
from .scheduler import EngineScheduler

logger = logging.getLogger(__name__)

TESTED_RAY_VERSIONS = ("2.60.0",)
MODES = ("engine", "shadow", "ray")
ENV_MODE = "VECSCHED_MODE"
ENV_STATS_FILE = "VECSCHED_STATS_FILE"
ENV_UNTESTED_RAY = "VECSCHED_UNTESTED_RAY"
STATS_FILE_NAME = "vecsched_stats.json"
HOOK = "adapters.ray.install.ray_start_hook"
MONITOR_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "monitor.py")
_SUMMARY_EVERY = 100          # ticks between INFO summaries in the monitor log


class InstallError(RuntimeError):
    """The engine cannot be installed here; nothing was changed."""


# --------------------------------------------------------------------------- checks


def resolve_mode(mode: Optional[str] = None) -> str:
    mode = (mode if mode is not None else os.environ.get(ENV_MODE, "engine")).strip().lower()
    if mode not in MODES:
        raise InstallError(f"{ENV_MODE}={mode!r} is not one of {', '.join(MODES)}; "
                           "nothing was installed")
    return mode


def ray_version_supported(version: Optional[str] = None) -> bool:
    return (version or ray.__version__) in TESTED_RAY_VERSIONS


def check_ray_version(version: Optional[str] = None) -> bool:
    """True if this Ray is a tested one. Otherwise raise :class:`InstallError`, or, with
    ``VECSCHED_UNTESTED_RAY=ray``, log at ERROR level and return False (run stock Ray)."""
    version = version or ray.__version__
    if version in TESTED_RAY_VERSIONS:
        return True
    policy = os.environ.get(ENV_UNTESTED_RAY, "refuse").strip().lower()
    what = (f"vecsched's EngineScheduler is tested with Ray {', '.join(TESTED_RAY_VERSIONS)} "
            f"only, and this is Ray {version} ({ray.__file__})")
    if policy == "ray":
        logger.error("%s: NOT installed; the autoscaler runs Ray's own "
                     "ResourceDemandScheduler (%s=ray).", what, ENV_UNTESTED_RAY)
        return False
    if policy != "refuse":
        what += f"; also, {ENV_UNTESTED_RAY}={policy!r} is neither 'refuse' nor 'ray'"
    raise InstallError(
        f"{what}. Refusing to install it; nothing was changed. Either install "
        f"ray=={TESTED_RAY_VERSIONS[-1]}, or run Ray's own autoscaler (drop RAY_START_HOOK / "
        f"use Ray's monitor command), or set {ENV_UNTESTED_RAY}=ray to start with Ray's "
        "scheduler and an error in the log.")


# --------------------------------------------------------------------------- scheduler


def _write_json(path: str, data: dict) -> None:
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".vecsched_stats.", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


class AutoscalerScheduler(EngineScheduler):
    """``EngineScheduler`` as installed in a live autoscaler.

    * ``mode = "engine"``: the engine decides; if it ever raises (it should not), the
      error is logged with its traceback, counted (``engine_errors``) and Ray's own
      ``ResourceDemandScheduler.schedule`` decides that tick, so a tick is never lost.
    * ``mode = "shadow"``: Ray's scheduler decides (and emits the events); the engine
      runs on a copy of the same request, and any difference in the decisions is logged
      at WARNING with the tick number and counted (``shadow_diff_ticks``).

    Every ``schedule()`` call is counted in :attr:`counters` and, when ``stats_path`` is
    set, the counters go to that JSON file after every tick (atomically replaced).
    ``install()`` makes a subclass with ``mode`` and ``stats_path`` filled in.
    """

    mode = "engine"
    stats_path: Optional[str] = None
    built = 0                      # instances built in this process (the Autoscaler builds one)

    def __init__(self, event_logger=None, **kwargs):
        super().__init__(event_logger, **kwargs)
        type(self).built += 1
        self.counters: Counter = Counter()
        self.launched: Counter = Counter()
        self.terminated: Counter = Counter()
        self.times = {"engine_s_total": 0.0, "engine_s_max": 0.0,
                      "ray_s_total": 0.0, "ray_s_max": 0.0}
        self.last_diff: list = []
        self._started = time.time()
        self._shadow = EngineScheduler(None) if self.mode == "shadow" else None
        try:
            from engine import warmup
            self.warmup_s = warmup()       # numba kernels loaded/compiled before the first tick
        except Exception:                  # a tick would then compile; never fail the build
            logger.exception("vecsched: engine warm-up failed")
            self.warmup_s = None
        logger.info("vecsched: the autoscaler schedules with %s (mode %s, Ray %s, pid %d, "
                    "engine warm-up %s s, stats %s)", type(self).__name__, self.mode,
                    ray.__version__, os.getpid(),
                    "?" if self.warmup_s is None else f"{self.warmup_s:.2f}",
                    self.stats_path or "off")
        self._write_stats()

    # -- the tick

    def schedule(self, request: SchedulingRequest) -> SchedulingReply:
        self.counters["ticks"] += 1
        tick = self.counters["ticks"]
        if self.mode == "shadow":
            reply, diff = self._schedule_shadow(request, tick)
            decided_by = "ray"
        else:
            reply, decided_by = self._schedule_engine(request, tick)
            diff = None
        self._account(reply)
        self._log_tick(tick, reply, decided_by, diff)
        self._write_stats()
        return reply

    def _timed(self, which: str, fn, request):
        t0 = time.perf_counter()
        try:
            return fn(request)
        finally:
            dt = time.perf_counter() - t0
            self.times[f"{which}_s_total"] += dt
            self.times[f"{which}_s_max"] = max(self.times[f"{which}_s_max"], dt)
            self.times[f"{which}_s_last"] = dt

    def _schedule_engine(self, request, tick):
        try:
            reply = self._timed("engine", super().schedule, request)
            self.counters["engine_ticks"] += 1
            return reply, "engine"
        except Exception:
            self.counters["engine_errors"] += 1
            logger.exception("vecsched: EngineScheduler failed on tick %d; Ray's "
                             "ResourceDemandScheduler decides this tick instead", tick)
        reply = self._timed("ray", lambda r: ResourceDemandScheduler.schedule(self, r),
                            request)
        self.counters["ray_ticks"] += 1
        return reply, "ray (engine failed)"

    def _schedule_shadow(self, request, tick):
        try:
            shadow_request = copy.deepcopy(request)   # Ray's pass must not change its input
        except Exception:
            shadow_request = None
            logger.exception("vecsched shadow: could not copy the request on tick %d", tick)
        reply = self._timed("ray", lambda r: ResourceDemandScheduler.schedule(self, r),
                            request)
        self.counters["ray_ticks"] += 1
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
            **{k: c[k] for k in ("ticks", "engine_ticks", "engine_errors", "ray_ticks",
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
            _write_json(self.stats_path, self.stats_snapshot())
        except Exception:
            if not self.counters["stats_write_errors"]:
                logger.exception("vecsched: cannot write %s", self.stats_path)
            self.counters["stats_write_errors"] += 1


def read_stats(path: str) -> Optional[dict]:
    """The stats a monitor wrote to ``path`` (None if not written yet)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# --------------------------------------------------------------------------- install


def _autoscaler_module():
    import ray.autoscaler.v2.autoscaler as autoscaler_module
    return autoscaler_module


def installed() -> Optional[type]:
    """The scheduler class the autoscaler will build in this process, if it is ours."""
    cls = getattr(_autoscaler_module(), "ResourceDemandScheduler", None)
    return cls if isinstance(cls, type) and issubclass(cls, AutoscalerScheduler) else None


def install(mode: Optional[str] = None, stats_path: Optional[str] = None) -> Optional[type]:
    """Make every ``Autoscaler`` built from now on in this process schedule with the engine.

    Returns the installed class, or None when nothing was installed (``mode="ray"``, or an
    untested Ray with ``VECSCHED_UNTESTED_RAY=ray``). Raises :class:`InstallError`, having
    changed nothing, on a bad mode, an untested Ray (by default) or an ``autoscaler`` module
    that no longer builds ``ResourceDemandScheduler`` by name. Idempotent: a second call
    replaces the first one's settings.
    """
    mode = resolve_mode(mode)
    if mode == "ray":
        logger.info("vecsched: %s=ray, nothing installed; Ray's own scheduler decides",
                    ENV_MODE)
        return None
    if not check_ray_version():
        return None
    mod = _autoscaler_module()
    current = getattr(mod, "ResourceDemandScheduler", None)
    if current is not ResourceDemandScheduler and not (
            isinstance(current, type) and issubclass(current, AutoscalerScheduler)):
        raise InstallError(
            "ray.autoscaler.v2.autoscaler.ResourceDemandScheduler is "
            f"{current!r}, not Ray's ResourceDemandScheduler: something else replaced it "
            "(or this Ray builds its scheduler differently); refusing to install")
    if "ResourceDemandScheduler(" not in _autoscaler_source(mod):
        raise InstallError("ray.autoscaler.v2.autoscaler no longer builds "
                           "ResourceDemandScheduler(...) by name; refusing to install")
    cls = type("EngineScheduler", (AutoscalerScheduler,),
               {"mode": mode, "stats_path": stats_path, "built": 0,
                "__module__": __name__,
                "__doc__": f"AutoscalerScheduler installed with mode={mode!r}."})
    cls.__qualname__ = f"AutoscalerScheduler[{mode}]"
    mod.ResourceDemandScheduler = cls
    return cls


def _autoscaler_source(mod) -> str:
    try:
        import inspect
        return inspect.getsource(mod.Autoscaler.__init__)
    except Exception:            # no sources shipped: trust the version check
        return "ResourceDemandScheduler("


def uninstall() -> None:
    """Give the autoscaler module Ray's own scheduler back (in this process)."""
    _autoscaler_module().ResourceDemandScheduler = ResourceDemandScheduler


# --------------------------------------------------------------------------- ray start


def _v2_enabled_in_env() -> bool:
    v = os.environ.get("RAY_enable_autoscaler_v2", "").strip().lower()
    if v in ("1", "true"):
        return True
    # `ray start` itself turns v2 on later for KubeRay pods with these set (scripts.py).
    return v == "" and all(k in os.environ for k in (
        "RAY_USAGE_STATS_KUBERAY_IN_USE", "RAY_CLOUD_INSTANCE_ID", "RAY_NODE_TYPE_NAME"))


def ray_start_hook(ray_params, head: bool) -> None:
    """``RAY_START_HOOK`` target: ``ray start --head`` launches vecsched's monitor.

    Runs inside ``ray start`` after its arguments are parsed and before any process is
    started. On a worker node (``head=False``) it does nothing. On the head it checks the
    mode, the Ray version and that autoscaler v2 is on (raising :class:`InstallError`,
    so ``ray start`` fails with nothing started, otherwise), then makes Ray start the
    monitor as ``python -u adapters/ray/monitor.py <Ray's own monitor arguments>``.
    """
    if not head:
        return
    mode = resolve_mode()
    if mode == "ray":
        _say(f"vecsched: {ENV_MODE}=ray: the autoscaler runs Ray's own scheduler")
        return
    if not check_ray_version():
        _say(f"vecsched: untested Ray {ray.__version__}: the autoscaler runs Ray's own "
             f"scheduler ({ENV_UNTESTED_RAY}=ray)")
        return
    if getattr(ray_params, "no_monitor", False):
        _say("vecsched: --no-monitor: no autoscaler on this head; start one with "
             "`vecsched-monitor`")
        return
    if not _v2_enabled_in_env():
        raise InstallError(
            "vecsched plugs into Ray's autoscaler v2 only, and it is off: run "
            "`RAY_enable_autoscaler_v2=1 ray start --head ...` (nothing was started)")
    _patch_monitor_launch()
    _say(f"vecsched: the autoscaler will schedule with EngineScheduler (mode {mode}); "
         f"monitor: {MONITOR_SCRIPT}")


def _say(msg: str) -> None:
    try:
        from ray.autoscaler._private.cli_logger import cli_logger
        cli_logger.print(msg)
    except Exception:
        print(msg, file=sys.stderr)


def _patch_monitor_launch() -> None:
    """Make ``services.start_monitor`` run our monitor script with Ray's arguments.

    ``start_monitor`` builds ``[python, -u, <ray>/autoscaler/v2/monitor.py, --flags...]``
    and hands it to ``start_ray_process`` (looked up in ``services``' globals); only that
    one path is rewritten, everything else about the process (logs, fate sharing, how
    Ray tracks and stops it) stays Ray's.
    """
    from ray._private import ray_constants, services

    original = services.start_ray_process
    if getattr(original, "_vecsched_original", None) is not None:
        return
    ray_entry = os.path.realpath(os.path.join(services.RAY_PATH, services.AUTOSCALER_V2_DIR,
                                              "monitor.py"))

    def start_ray_process(command, process_type, *args, **kwargs):
        if process_type == ray_constants.PROCESS_TYPE_MONITOR:
            if (len(command) > 2 and command[1] == "-u"
                    and os.path.realpath(command[2]) == ray_entry):
                command = [command[0], command[1], MONITOR_SCRIPT, *command[3:]]
            else:
                _say(f"vecsched: WARNING: Ray is starting a monitor that is not autoscaler "
                     f"v2's ({command[:3]}); EngineScheduler is NOT installed in it")
        return original(command, process_type, *args, **kwargs)

    start_ray_process._vecsched_original = original
    services.start_ray_process = start_ray_process
