"""``vecsched-monitor``: Ray's autoscaler v2 monitor, scheduling with ``EngineScheduler``.

    vecsched-monitor --gcs-address=HOST:PORT --logs-dir=DIR [--autoscaling-config=FILE] ...
        the same arguments as ``python ray/autoscaler/v2/monitor.py`` (``--help`` shows
        Ray's own help); installs the engine, then runs Ray's monitor unchanged.
    vecsched-monitor kuberay-autoscaler --cluster-name N --cluster-namespace NS [--gcs-address A]
        the same as ``ray kuberay-autoscaler`` (KubeRay's autoscaler side-car), after the swap,
        with Ray's KubeRay client watched (``adapters/kuberay/sidecar.py``: patches recorded,
        replicas ownership conflicts, stale reads; ``VECSCHED_RAY_CHECK=1``).
``VECSCHED_DUMP_DIR``: every tick's request is dumped there (``adapters/ray/dump.py``).

``ray start --head`` with ``RAY_START_HOOK=vecsched.adapters.ray.install.ray_start_hook`` runs this
file by path (``python -u .../adapters/ray/monitor.py <Ray's monitor arguments>``), and the
``vecsched-monitor`` console script re-executes itself the same way (same pid), so that
``ray stop`` and Ray's process checks (which look for ``monitor.py`` in command lines) see it.
Environment: see ``adapters/ray/install.py`` (``VECSCHED_MODE``, ``VECSCHED_STATS_FILE``,
``VECSCHED_UNTESTED_RAY``). Exit status 2, with the reason on stderr, when the engine
cannot be installed.
"""
import os
import sys

if __name__ == "__main__":
    # Run by path: Python put this directory first on sys.path, where our `ray/` package
    # would shadow the real `ray`. vecsched itself is installed, so nothing is added.
    _here = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0] or os.curdir) == _here:
        del sys.path[0]

import argparse
import runpy
from typing import List, Optional


def _logs_dir(argv: List[str]) -> Optional[str]:
    """``--logs-dir`` from Ray's monitor arguments, without consuming anything."""
    return _arg(argv, "--logs-dir")


def _arg(argv: List[str], flag: str) -> Optional[str]:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument(flag, dest="value")
    known, _ = p.parse_known_args(argv)
    return known.value


def _install(stats_path: Optional[str]):
    from vecsched.adapters.ray.install import ENV_STATS_FILE, InstallError, install

    try:
        return install(stats_path=os.environ.get(ENV_STATS_FILE) or stats_path)
    except InstallError as e:
        print(f"vecsched-monitor: {e}", file=sys.stderr, flush=True)
        raise SystemExit(2)


def run_monitor(argv: List[str]) -> None:
    """Install, then run ``ray/autoscaler/v2/monitor.py`` as ``__main__`` with ``argv``."""
    from vecsched.adapters.ray.install import STATS_FILE_NAME

    if not any(a in ("-h", "--help") for a in argv):
        logs_dir = _logs_dir(argv)
        _install(os.path.join(logs_dir, STATS_FILE_NAME) if logs_dir else None)
        from vecsched.adapters.ray.dump import install_dumps, monitor_context

        config = _arg(argv, "--autoscaling-config")
        install_dumps(lambda: monitor_context(config))     # VECSCHED_DUMP_DIR, if set
    sys.argv = ["ray/autoscaler/v2/monitor.py", *argv]
    runpy.run_module("ray.autoscaler.v2.monitor", run_name="__main__", alter_sys=True)


def run_kuberay(argv: List[str]) -> None:
    """Install, then run ``ray kuberay-autoscaler`` (``run_kuberay_autoscaler``)."""
    p = argparse.ArgumentParser(
        prog="vecsched-monitor kuberay-autoscaler",
        description="`ray kuberay-autoscaler` with vecsched's EngineScheduler.")
    p.add_argument("--cluster-name", required=True,
                   help="metadata.name of the RayCluster CR")
    p.add_argument("--cluster-namespace", required=True,
                   help="metadata.namespace of the RayCluster CR")
    p.add_argument("--gcs-address", default=None,
                   help="host:port of the GCS (default <node ip>:6379)")
    args = p.parse_args(argv)
    _install(None)           # the log dir is only known inside; use VECSCHED_STATS_FILE
    # Ray's KubeRay client, watched: patches as sent, replicas ownership conflicts,
    # stale reads; VECSCHED_RAY_CHECK=1 also runs Ray's scheduler (adapters/kuberay).
    from vecsched.adapters.kuberay.sidecar import dump_context, prepare
    from vecsched.adapters.ray.dump import install_dumps
    from vecsched.adapters.ray.install import ENV_STATS_FILE

    ledger = prepare(os.environ.get(ENV_STATS_FILE))
    install_dumps(lambda: dump_context(ledger))         # VECSCHED_DUMP_DIR, if set
    from ray.autoscaler._private.kuberay.run_autoscaler import run_kuberay_autoscaler

    run_kuberay_autoscaler(args.cluster_name, args.cluster_namespace, args.gcs_address)


def main(argv: Optional[List[str]] = None) -> None:
    if argv is None and os.path.basename(sys.argv[0]) != "monitor.py":
        # Started as the `vecsched-monitor` console script: become
        # `python -u .../adapters/ray/monitor.py ARGS` (same pid), like Ray's own monitor,
        # so that `ray stop` and Ray's process checks, which look for "monitor.py" in
        # command lines, see this process, and its output is unbuffered.
        script = os.path.abspath(__file__)
        os.execv(sys.executable, [sys.executable, "-u", script, *sys.argv[1:]])
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "kuberay-autoscaler":
        run_kuberay(argv[1:])
    else:
        run_monitor(argv)


if __name__ == "__main__":
    main()
