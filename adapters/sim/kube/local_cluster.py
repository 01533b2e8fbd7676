"""A local "KubeRay cluster": the API stand-in, the operator stand-in, a real Ray 2.60
head, the real side-car (``vecsched-monitor kuberay-autoscaler``) and real Ray worker
nodes for the pods. Used by ``vecsched kuberay-demo`` and the end-to-end test.

What is real: Ray 2.60 (GCS, raylets, autoscaler v2, its KubeRay config reader and
cloud provider, its HTTP client and TLS), the engine, the side-car process. What is a
stand-in: the Kubernetes API server (``apiserver.py``/``store.py``) and the KubeRay
operator and kubelet (``operator.py``, ``raypods.py``), all on 127.0.0.1.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

from .apiserver import KubeApiStandIn
from .operator import Operator
from .raypods import RayPodRunner, _signal_group
from .tls import Certs

NS = "default"
HEAD_GROUP = "headgroup"


def free_ports(n: int) -> list:
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def head_pod(cluster: str, name: str) -> dict:
    return {"metadata": {"name": name, "labels": {
                "ray.io/cluster": cluster, "ray.io/node-type": "head",
                "ray.io/group": HEAD_GROUP, "ray.io/is-ray-node": "yes"}},
            "spec": {"containers": [{"name": "ray-head"}], "restartPolicy": "Always"},
            "status": {"phase": "Running", "podIP": "127.0.0.1", "containerStatuses": [
                {"name": "ray-head", "ready": True, "restartCount": 0,
                 "state": {"running": {"startedAt": "1970-01-01T00:00:00Z"}}}]}}


class LocalKubeRay:
    def __init__(self, cr: dict, *, mode: str = "engine", ray_check: bool = True,
                 tick_s: int = 1, dump_dir: Optional[str] = None,
                 workdir: Optional[str] = None, guard: bool = True):
        self.cr = copy.deepcopy(cr)
        self.name = cr["metadata"]["name"]
        self.mode, self.ray_check, self.tick_s, self.dump_dir = mode, ray_check, tick_s, dump_dir
        self.guard = guard          # False: the side-car sends Ray's patches unguarded
        # short: Unix socket paths live under it
        self.dir = workdir or tempfile.mkdtemp(prefix="vk", dir="/tmp")
        self.head_pod = f"{self.name}-head-00000"
        self.gcs_port, self.dash_port, self.agent_port = free_ports(3)
        self.gcs_address = f"127.0.0.1:{self.gcs_port}"
        self.head = self.sidecar = None
        self.api = self.operator = self.runner = None
        self.logs_dir: Optional[str] = None
        self.stats_path = os.path.join(self.dir, "vecsched_stats.json")
        self.ledger_path = os.path.join(self.dir, "vecsched_kuberay.json")
        self.sidecar_out = os.path.join(self.dir, "sidecar.out")
        self.head_out = os.path.join(self.dir, "head.out")
        self.bin = os.path.dirname(sys.executable)

    # ------------------------------------------------------------------ lifecycle
    def start(self, timeout: float = 120.0) -> "LocalKubeRay":
        certs = Certs.make(os.path.join(self.dir, "tls"))
        self.api = KubeApiStandIn(certs).start()
        st = self.api.store
        st.create("rayclusters", NS, self.cr, "kubectl")
        st.create("pods", NS, head_pod(self.name, self.head_pod), "kuberay-operator")
        env = self._base_env()
        env.update({"RAY_CLOUD_INSTANCE_ID": self.head_pod, "RAY_NODE_TYPE_NAME": HEAD_GROUP,
                    "RAY_USAGE_STATS_KUBERAY_IN_USE": "1"})
        cmd = [os.path.join(self.bin, "ray"), "start", "--head", "--block", "--no-monitor",
               f"--port={self.gcs_port}", "--node-ip-address=127.0.0.1",
               f"--temp-dir={os.path.join(self.dir, 'h')}", "--include-dashboard=false",
               f"--dashboard-port={self.dash_port}",
               f"--dashboard-agent-listen-port={self.agent_port}", "--disable-usage-stats",
               *_head_flags(self.cr)]
        self.head = self._spawn(cmd, env, self.head_out)
        self._wait(lambda: b"Ray runtime started" in _read(self.head_out), timeout,
                   "the Ray head", self.head)
        self.logs_dir = os.path.join(os.path.realpath(
            os.path.join(self.dir, "h", "session_latest")), "logs")
        self.runner = RayPodRunner(self.gcs_address, os.path.join(self.dir, "pods"),
                                   env={"RAY_enable_autoscaler_v2": "1"})
        self.operator = Operator(st, NS, self.runner).start()
        env = self._base_env()
        env.update(self.api.certs.sidecar_env(self.api.port))
        env.update({"RAY_HEAD_POD_NAME": self.head_pod, "KUBERAY_CRD_VER": "v1",
                    "VECSCHED_MODE": self.mode, "VECSCHED_STATS_FILE": self.stats_path,
                    "VECSCHED_KUBERAY_FILE": self.ledger_path,
                    "VECSCHED_RAY_CHECK": "1" if self.ray_check else "0",
                    "VECSCHED_KUBERAY_GUARD": "1" if self.guard else "0"})
        if self.dump_dir:
            env["VECSCHED_DUMP_DIR"] = self.dump_dir
        cmd = [os.path.join(self.bin, "vecsched-monitor"), "kuberay-autoscaler",
               "--cluster-name", self.name, "--cluster-namespace", NS,
               "--gcs-address", self.gcs_address]
        self.sidecar = self._spawn(cmd, env, self.sidecar_out)
        self._wait(lambda: (self.stats() or {}).get("ticks", 0) > 0, timeout,
                   "the side-car's first autoscaler tick", self.sidecar)
        return self

    def stop(self) -> None:
        """Stop everything this cluster started (and only that). The head gets 5 s after
        SIGTERM (Ray's own drain would wait up to 30 s), then its process group is
        killed, and any process whose command line names this cluster's directory."""
        if self.operator is not None:
            self.operator.stop()
        if self.runner is not None:
            self.runner.close()
        for proc, grace in ((self.sidecar, 10), (self.head, 5)):
            if proc is not None and proc.poll() is None:
                _signal_group(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    pass
            if proc is not None:
                _signal_group(proc.pid, signal.SIGKILL)
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    pass
        self._kill_leftovers()
        if self.api is not None:
            self.api.stop()

    def _kill_leftovers(self) -> None:
        import ray  # noqa: F401  (puts Ray's vendored psutil on sys.path)
        import psutil

        mine = []
        for p in psutil.process_iter(["cmdline"]):
            try:
                if p.pid != os.getpid() and self.dir in " ".join(p.info["cmdline"] or ()):
                    mine.append(p)
            except psutil.Error:
                pass
        for p in mine:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(mine, timeout=5)

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------ observation
    def cluster(self) -> dict:
        return self.api.store.get("rayclusters", NS, self.name, rv=str(
            self.api.store.resource_version))

    def replicas(self) -> dict:
        return {g["groupName"]: g.get("replicas", 1)
                for g in self.cluster()["spec"]["workerGroupSpecs"]}

    def pods(self) -> dict:
        """Live (not deleting) worker pod names by group."""
        out = {g["groupName"]: [] for g in self.cr["spec"]["workerGroupSpecs"]}
        for p in self.api.store.list("pods", NS, "ray.io/node-type=worker")["items"]:
            if "deletionTimestamp" not in p["metadata"]:
                out.setdefault(p["metadata"]["labels"]["ray.io/group"], []).append(
                    p["metadata"]["name"])
        return out

    def status(self):
        from ray.autoscaler.v2.sdk import get_cluster_status
        return get_cluster_status(self.gcs_address)

    def stats(self) -> Optional[dict]:
        return _load(self.stats_path)

    def ledger(self) -> dict:
        return _load(self.ledger_path) or {}

    def log_tail(self, n: int = 60) -> str:
        out = []
        for f in (self.sidecar_out, self.head_out):
            lines = _read(f).decode(errors="replace").splitlines()
            out += [f"----- {f}"] + lines[-n:]
        return "\n".join(out)

    # ------------------------------------------------------------------ helpers
    def _base_env(self) -> dict:
        env = {k: v for k, v in os.environ.items() if not k.startswith(
            ("RAY_", "VECSCHED_", "KUBERNETES_", "AUTOSCALER_"))}
        env.update({"PATH": self.bin + os.pathsep + os.environ.get("PATH", ""),
                    "RAY_enable_autoscaler_v2": "1", "RAY_USAGE_STATS_ENABLED": "0",
                    # a token left in ~/.ray by another cluster would switch token auth on
                    # for some of these processes and not others
                    "RAY_AUTH_MODE": "disabled",
                    "AUTOSCALER_UPDATE_INTERVAL_S": str(int(self.tick_s))})
        return env

    def _spawn(self, cmd, env, out_path) -> subprocess.Popen:
        with open(out_path, "wb") as out:
            return subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                    start_new_session=True)

    def wait(self, cond, timeout: float, what: str, poll: float = 0.25) -> None:
        self._wait(cond, timeout, what, self.sidecar, poll)

    def _wait(self, cond, timeout, what, proc=None, poll: float = 0.25) -> None:
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise RuntimeError(f"waiting for {what}: {proc.args[0]} exited with "
                                   f"{proc.returncode}\n{self.log_tail()}")
            try:
                if cond():
                    return
            except Exception as e:              # e.g. the GCS not answering yet
                last = e
            time.sleep(poll)
        raise TimeoutError(f"timed out after {timeout} s waiting for {what}"
                           + (f" (last error: {last!r})" if last else "")
                           + f"\n{self.log_tail()}")


def _head_flags(cr: dict) -> list:
    params = (cr["spec"].get("headGroupSpec") or {}).get("rayStartParams") or {}
    return [f"--{k}={v}" for k, v in params.items() if k not in ("block", "no-monitor")]


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _load(path: str) -> Optional[dict]:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


class Sampler:
    """Every ``period`` s: replicas and live pods per group, and pending demand."""

    def __init__(self, kr: LocalKubeRay, period: float = 0.5):
        self.kr, self.period = kr, period
        self.rows: list = []
        self._stop = threading.Event()
        self._t0 = time.monotonic()
        self.t0_wall = time.time()          # the wall-clock time of t = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> "Sampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)

    def now(self) -> float:
        return round(time.monotonic() - self._t0, 3)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                row = {"t": self.now(), "replicas": self.kr.replicas(),
                       "pods": {g: len(p) for g, p in self.kr.pods().items()}}
                row["pending_demand"] = _pending(self.kr.status())
                self.rows.append(row)
            except Exception:
                pass
            self._stop.wait(self.period)


def _pending(status) -> int:
    """Resource bundles waiting: task/actor demand plus placement-group bundles."""
    d = status.resource_demands
    n = sum(b.count for r in d.ray_task_actor_demand for b in r.bundles_by_count)
    n += sum(b.count for r in d.placement_group_demand for b in r.bundles_by_count)
    return int(n)
