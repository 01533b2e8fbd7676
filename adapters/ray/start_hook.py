"""``RAY_START_HOOK=vecsched.adapters.ray.install.ray_start_hook ray start --head``: make
``ray start`` launch vecsched's monitor (adapters/monitor.py) instead of
Ray's own, with the same arguments (docs/ray.md, way 1)."""
from __future__ import annotations

import os
import sys

import ray

from .checks import ENV_MODE, ENV_UNTESTED_RAY, InstallError, check_ray_version, resolve_mode

HOOK = "vecsched.adapters.ray.install.ray_start_hook"
# adapters/monitor.py, beside this package (it composes the Ray and KubeRay adapters)
MONITOR_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                              "monitor.py")


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
    monitor as ``python -u adapters/monitor.py <Ray's own monitor arguments>``.
    """
    if not head:
        return
    mode = resolve_mode()
    if mode != "ray":
        from .efficient_settings import efficient_options
        from .capacity_settings import availability_from_env, limits_from_env
        opts = efficient_options(mode)   # a bad VECSCHED_EFFICIENT_OPTIONS fails `ray start`
        limits_from_env(getattr(opts, "prices", None))      # so does a bad VECSCHED_LIMITS
        availability_from_env()
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
