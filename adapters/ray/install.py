"""Put ``EngineScheduler`` into a real Ray autoscaler v2 (how to use it: docs/ray.md).

Ray 2.60 has no setting that chooses the autoscaler's scheduler: ``Autoscaler.__init__``
(``ray/autoscaler/v2/autoscaler.py``) builds ``ResourceDemandScheduler(event_logger)`` by
name (docs/ray-semantics.md §11). :func:`install` rebinds that name, in the autoscaler
(monitor) process and before the ``Autoscaler`` is built, to :class:`AutoscalerScheduler`,
a subclass of ``EngineScheduler`` that also never raises, counts every tick, writes a small
stats file, can run in shadow mode, and lets Ray's scheduler decide while the engine's
kernels warm up in a background thread (the autoscaler never waits on a compile).
Everything else in the autoscaler is stock Ray.

One concept per module: ``checks.py`` (mode, Ray version), ``autoscaler_scheduler.py``
(the installed scheduler), ``warming.py`` (the background warm-up), ``stats.py`` (the
stats file), ``start_hook.py`` (``RAY_START_HOOK``), and this one: the swap itself, and
the names the ways in import from here.

The ways in, each of which ends in :func:`install` inside the autoscaler process:

* ``vecsched-monitor ARGS`` (``adapters/monitor.py``): Ray's
  ``ray/autoscaler/v2/monitor.py`` with the same arguments, run after the swap.
  ``vecsched-monitor kuberay-autoscaler --cluster-name N --cluster-namespace NS`` does the
  same for ``ray kuberay-autoscaler`` (the KubeRay side-car).
* ``RAY_START_HOOK=vecsched.adapters.ray.install.ray_start_hook ray start --head ...``:
  :func:`ray_start_hook` runs inside ``ray start`` before anything is started and makes
  Ray launch ``adapters/monitor.py`` instead of its own ``monitor.py``, with the same
  command-line arguments, so Ray still starts, owns and stops the monitor process
  (``ray stop`` finds it: its command line still contains ``monitor.py``).

Environment (read in the autoscaler process; ``ray start`` passes its own environment on):

* ``VECSCHED_MODE``: ``engine`` (default: the engine makes every decision, Ray's
  decisions exactly), ``efficient`` (the engine decides in its efficient mode, opt-in:
  chooses for cost, docs/efficient.md), ``shadow`` (Ray's scheduler decides, the engine
  runs on the same input every tick and any difference is logged and counted), ``ray``
  (nothing is installed: stock Ray).
* ``VECSCHED_EFFICIENT_OPTIONS``: the efficient mode's options, a JSON object inline or
  the path of a JSON file (``efficient_settings.py``); only with ``VECSCHED_MODE=efficient``.
* ``VECSCHED_LIMITS``: caps on resource totals and cost per hour, modes ``engine`` and
  ``efficient``; and ``VECSCHED_AVAILABILITY``: the availability memory's options (only
  with ``VECSCHED_MODE=efficient``; ``false`` is accepted in any mode), both JSON inline
  or in a file (``capacity_settings.py``, docs/capacity.md).
* ``VECSCHED_STATS_FILE``: where the stats JSON goes; default
  ``<logs-dir>/vecsched_stats.json`` under the monitor's ``--logs-dir``.
* ``VECSCHED_METRICS_PORT``: also serve vecsched's Prometheus metrics on this port (``0``:
  any free port), on 127.0.0.1 unless ``VECSCHED_METRICS_HOST`` names another address; a
  taken port is a warning naming it. Without it they are served only on Ray's own
  autoscaler metrics port (``AUTOSCALER_METRIC_PORT``), in Ray's registry
  (``adapters/ray/metrics.py``, docs/metrics.md); neither when ``prometheus_client`` is
  not installed.
* ``VECSCHED_UNTESTED_RAY``: what to do on a Ray version other than
  :data:`TESTED_RAY_VERSIONS`: ``refuse`` (default; nothing is installed and the command
  fails with a message saying why) or ``ray`` (start with Ray's own scheduler, and say so
  at ERROR level).
"""
from __future__ import annotations

import logging
import os
from typing import Optional

from ray.autoscaler.v2.scheduler import ResourceDemandScheduler

from vecsched.adapters.metrics import ENV_PORT as ENV_METRICS_PORT
from vecsched.adapters.metrics import MetricsError, parse_port

from . import metrics
from .autoscaler_scheduler import AutoscalerScheduler
from .checks import (ENV_MODE, ENV_UNTESTED_RAY, MODES, TESTED_RAY_VERSIONS, InstallError,
                     check_ray_version, ray_version_supported, resolve_mode)
from .drain import install_stopper, uninstall_stopper
from .capacity_settings import availability_from_env, limits_from_env
from .efficient_settings import ENV_OPTIONS, efficient_options
from .start_hook import HOOK, MONITOR_SCRIPT, ray_start_hook
from .stats import ENV_STATS_FILE, STATS_FILE_NAME, read_stats

logger = logging.getLogger(__name__)

__all__ = ["install", "uninstall", "installed", "InstallError", "AutoscalerScheduler",
           "ray_start_hook", "read_stats", "resolve_mode", "check_ray_version",
           "ray_version_supported", "HOOK", "MONITOR_SCRIPT", "STATS_FILE_NAME", "ENV_MODE",
           "ENV_STATS_FILE", "ENV_UNTESTED_RAY", "ENV_METRICS_PORT", "ENV_OPTIONS", "MODES",
           "TESTED_RAY_VERSIONS"]


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
    changed nothing, on a bad mode, an untested Ray (by default), a bad
    ``VECSCHED_METRICS_PORT`` or an ``autoscaler`` module that no longer builds
    ``ResourceDemandScheduler`` by name. Idempotent: a second call replaces the first
    one's settings. The scheduler's metrics go to Ray's autoscaler metrics registry (and
    ``VECSCHED_METRICS_PORT``), see ``adapters/ray/metrics.py``.
    """
    mode = resolve_mode(mode)
    options = efficient_options(mode) if mode != "ray" else None
    limits = limits_from_env(getattr(options, "prices", None), mode=mode) \
        if mode != "ray" else None
    availability = availability_from_env(mode=mode) if mode != "ray" else None
    metrics_port = _metrics_port()
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
                "efficient_options": options, "limits_setting": limits,
                "availability_setting": availability,
                "__module__": __name__,
                "__doc__": f"AutoscalerScheduler installed with mode={mode!r}."})
    cls.__qualname__ = f"AutoscalerScheduler[{mode}]"
    mod.ResourceDemandScheduler = cls
    install_stopper()          # consolidation drains with a deadline (adapters/ray/drain.py)
    metrics.attach(metrics_port)
    return cls


def _metrics_port() -> Optional[int]:
    raw = os.environ.get(ENV_METRICS_PORT)
    if raw is None or raw == "":
        return None
    try:
        return parse_port(raw, ENV_METRICS_PORT)
    except MetricsError as e:
        raise InstallError(str(e)) from None


def _autoscaler_source(mod) -> str:
    try:
        import inspect
        return inspect.getsource(mod.Autoscaler.__init__)
    except Exception:            # no sources shipped: trust the version check
        return "ResourceDemandScheduler("


def uninstall() -> None:
    """Give the autoscaler module Ray's own scheduler (and metrics class) back (in this
    process)."""
    _autoscaler_module().ResourceDemandScheduler = ResourceDemandScheduler
    uninstall_stopper()
    metrics.detach()
