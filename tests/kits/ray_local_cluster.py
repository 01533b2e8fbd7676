"""A real local Ray 2.60 cluster for end-to-end tests (tests/adapters/ray/
test_ray_cluster.py, test_metrics_cluster.py): `ray start --head --block` on a GCS port
of its own, Ray's fake multi-node provider (provider `type: external`), worker types
``cpu2 {CPU: 2}`` and ``gpu1 {CPU: 1, GPU: 1}`` (logical GPUs); it stops only the
processes it started (never `ray stop`, which would stop every Ray cluster on the
machine). ``cluster_factory`` is the pytest fixture that makes them and stops them
after the test (import it into the test module); ``VECSCHED_CLUSTER_REPORT=1`` prints
each phase's time and the peak memory."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Optional

import pytest
import ray
import psutil  # noqa: E402,I001  (Ray vendors psutil and puts it on sys.path on import)
import yaml  # noqa: E402  (a Ray dependency)

from vecsched.adapters.ray.install import HOOK, STATS_FILE_NAME, read_stats

PY = sys.executable
BIN = Path(PY).parent
HEAD_TYPE = "ray.head.default"
FAKE_HEAD_NODE_ID = "f" * 51 + "00000"     # what the fake provider calls the head
PROVIDER = "ray.autoscaler._private.fake_multi_node.node_provider.FakeMultiNodeProvider"
IDLE_TIMEOUT_MIN = 0.2                      # 12 s
TICK_S = 1                                  # AUTOSCALER_UPDATE_INTERVAL_S
WORKER_TYPES = {
    "cpu2": {"resources": {"CPU": 2}, "max_workers": 2},
    "gpu1": {"resources": {"CPU": 1, "GPU": 1}, "max_workers": 1},
}
REPORT = os.environ.get("VECSCHED_CLUSTER_REPORT") == "1"


def free_ports(n: int) -> list:
    socks, ports = [], []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("", 0))
            socks.append(s)
            ports.append(s.getsockname()[1])
    finally:
        for s in socks:
            s.close()
    return ports


def _node_ip() -> str:
    return ray._private.services.get_node_ip_address()


class LocalCluster:
    """A fake multi-node Ray cluster owned by one test: start, observe, tear down."""

    def __init__(self, name: str, *, via: str, mode: str = "engine",
                 extra_env: Optional[dict] = None):
        assert via in ("hook", "monitor")
        self.name, self.via, self.mode = name, via, mode
        self.extra_env = dict(extra_env or {})
        self.dir = Path(tempfile.mkdtemp(prefix=f"vs{name}_", dir="/tmp"))   # short: sockets
        self.temp_dir = self.dir / "ray"
        self.gcs_port, self.dash_port, self.agent_port = free_ports(3)
        self.gcs_address = f"{_node_ip()}:{self.gcs_port}"
        self.config_path = self.dir / "autoscaling.yaml"
        self.head = self.monitor = None
        self.head_log = self.dir / "ray_start.log"
        self.monitor_out = self.dir / "vecsched_monitor.out"
        self.logs_dir = None
        self.procs: dict = {}                 # pid -> psutil.Process, everything we started
        self.phases: list = []                # (name, seconds)
        self.mem_peak = 0
        self.mem_peak_procs = 0
        self.phase_peak: dict = {}
        self._phase = "start"
        self._stop = threading.Event()
        self._sampler = None
        self._write_config()

    # ---- setup

    def _write_config(self):
        types = {HEAD_TYPE: {"resources": {"CPU": 0}, "node_config": {}, "max_workers": 0}}
        for t, spec in WORKER_TYPES.items():
            types[t] = {"resources": dict(spec["resources"]), "node_config": {},
                        "min_workers": 0, "max_workers": spec["max_workers"]}
        config = {
            "cluster_name": f"vecsched-{self.name}",
            "max_workers": sum(s["max_workers"] for s in WORKER_TYPES.values()),
            "idle_timeout_minutes": IDLE_TIMEOUT_MIN,
            "upscaling_speed": 1.0,
            "provider": {"type": "external", "module": PROVIDER,
                         "gcs_address": self.gcs_address,
                         "head_node_id": FAKE_HEAD_NODE_ID, "launch_multiple": True},
            "head_node_type": HEAD_TYPE,
            "available_node_types": types,
            "auth": {"ssh_user": "ray"}, "docker": {},
            # the keys prepare_config() expects but `type: external` gets no defaults for
            "file_mounts": {}, "cluster_synced_files": [],
            "file_mounts_sync_continuously": False, "rsync_exclude": [], "rsync_filter": [],
            "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
            "worker_setup_commands": [], "head_start_ray_commands": [],
            "worker_start_ray_commands": [],
        }
        self.config_path.write_text(yaml.safe_dump(config))

    def _env(self) -> dict:
        env = dict(os.environ)
        for k in ("RAY_ADDRESS", "RAY_START_HOOK", "VECSCHED_MODE", "VECSCHED_STATS_FILE",
                  "VECSCHED_UNTESTED_RAY", "VECSCHED_EFFICIENT_OPTIONS"):
            env.pop(k, None)
        env.update({
            "RAY_enable_autoscaler_v2": "1",
            "RAY_FAKE_CLUSTER": "1",
            "RAY_CLOUD_INSTANCE_ID": FAKE_HEAD_NODE_ID,
            "RAY_OVERRIDE_NODE_ID_FOR_TESTING": FAKE_HEAD_NODE_ID,
            "AUTOSCALER_UPDATE_INTERVAL_S": str(TICK_S),
            "RAY_USAGE_STATS_ENABLED": "0",
            "VECSCHED_MODE": self.mode,
        })
        env.update(self.extra_env)
        if self.via == "hook":
            env["RAY_START_HOOK"] = HOOK
        return env

    def phase(self, name: str):
        cluster = self

        class _Phase:
            def __enter__(self):
                cluster._phase = name
                self.t0 = time.monotonic()
                return self

            def __exit__(self, *exc):
                cluster.phases.append((name, time.monotonic() - self.t0))
                return False
        return _Phase()

    def _head_env(self) -> dict:
        env = self._env()
        # The head says its node type itself (the autoscaler reports it as
        # "node_<id>" otherwise). Not in a separate autoscaler's environment: the fake
        # provider builds worker nodes in that process and they would inherit it (with
        # the hook, `ray start` passes its environment to the monitor, so they do: their
        # ray.io/node-group label reads ray.head.default; nodes are typed by resources).
        env["RAY_NODE_TYPE_NAME"] = HEAD_TYPE
        return env

    def start(self):
        cmd = [str(BIN / "ray"), "start", "--head", "--block",
               f"--port={self.gcs_port}", "--num-cpus=0", "--num-gpus=0",
               f"--temp-dir={self.temp_dir}", "--include-dashboard=false",
               f"--dashboard-port={self.dash_port}",
               f"--dashboard-agent-listen-port={self.agent_port}",
               "--disable-usage-stats"]
        if self.via == "hook":
            cmd.append(f"--autoscaling-config={self.config_path}")
        else:
            cmd.append("--no-monitor")
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        with open(self.head_log, "wb") as log:
            self.head = subprocess.Popen(cmd, env=self._head_env(), stdout=log,
                                         stderr=subprocess.STDOUT, start_new_session=True)
        self._track(self.head.pid)
        self._wait(lambda: b"Ray runtime started" in self.head_log.read_bytes(), 90,
                   "the head to start", proc=self.head)
        self.logs_dir = Path(os.path.realpath(self.temp_dir / "session_latest")) / "logs"
        if self.via == "monitor":
            cmd = [str(BIN / "vecsched-monitor"), f"--gcs-address={self.gcs_address}",
                   f"--logs-dir={self.logs_dir}", f"--autoscaling-config={self.config_path}"]
            with open(self.monitor_out, "wb") as out:
                self.monitor = subprocess.Popen(cmd, env=self._env(), stdout=out,
                                                stderr=subprocess.STDOUT,
                                                start_new_session=True)
            self._track(self.monitor.pid)
        self._wait(lambda: (self.stats() or {}).get("ticks", 0) > 0, 90,
                   "the autoscaler's first tick", proc=self.monitor or self.head)

    # ---- observation

    @property
    def stats_path(self) -> Path:
        return self.logs_dir / STATS_FILE_NAME

    def stats(self):
        return read_stats(str(self.stats_path)) if self.logs_dir else None

    def status(self):
        from ray.autoscaler.v2.sdk import get_cluster_status
        return get_cluster_status(self.gcs_address)

    def workers(self, st=None) -> list:
        st = st or self.status()
        return [n for n in (st.active_nodes + st.idle_nodes) if n.node_id != FAKE_HEAD_NODE_ID]

    def monitor_pid(self):
        for p in list(self.procs.values()):
            try:
                if any(a.endswith("monitor.py") or a.endswith("vecsched-monitor")
                       for a in p.cmdline()[:3]):
                    return p.pid
            except psutil.Error:
                pass
        return None

    def monitor_log_tail(self, n=80) -> str:
        out = []
        files = [self.head_log, self.monitor_out]
        if self.logs_dir and self.logs_dir.exists():
            files += sorted(self.logs_dir.glob("monitor*"))
        for f in files:
            try:
                lines = f.read_text(errors="replace").splitlines()
            except OSError:
                continue
            out.append(f"----- {f} (last {min(n, len(lines))} of {len(lines)} lines)")
            out += lines[-n:]
        return "\n".join(out)

    def _wait(self, cond, timeout, what, proc=None, poll=0.5):
        deadline = time.monotonic() + timeout
        last_exc = None
        while time.monotonic() < deadline:
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"waiting for {what}: {proc.args[0]} exited with "
                                     f"{proc.returncode}")
            try:
                if cond():
                    return
            except Exception as e:          # e.g. GCS not answering yet
                last_exc = e
            time.sleep(poll)
        raise AssertionError(f"timed out after {timeout} s waiting for {what}"
                             + (f" (last error: {last_exc!r})" if last_exc else ""))

    def wait(self, cond, timeout, what):
        self._wait(cond, timeout, what, proc=self.monitor or self.head)

    # ---- our processes and their memory

    def _track(self, pid):
        try:
            p = psutil.Process(pid)
            self.procs.setdefault(p.pid, p)
        except psutil.Error:
            pass

    def _ours(self) -> list:
        roots = [p for p in (self.head, self.monitor) if p is not None]
        for r in roots:
            try:
                for c in psutil.Process(r.pid).children(recursive=True):
                    self.procs.setdefault(c.pid, c)
            except psutil.Error:
                pass
        mark = str(self.dir)
        for p in psutil.process_iter(["cmdline"]):      # anything that left the tree
            try:
                if p.pid not in self.procs and mark in " ".join(p.info["cmdline"] or ()):
                    self.procs[p.pid] = p
            except psutil.Error:
                pass
        return [p for p in self.procs.values() if _alive(p)]

    def _sample(self):
        while not self._stop.is_set():
            total = n = 0
            for p in self._ours():
                try:
                    total += p.memory_info().rss
                    n += 1
                except psutil.Error:
                    pass
            if total > self.mem_peak:
                self.mem_peak, self.mem_peak_procs = total, n
            self.phase_peak[self._phase] = max(self.phase_peak.get(self._phase, 0), total)
            self._stop.wait(0.5)

    # ---- teardown: only what we started

    def stop(self):
        t0 = time.monotonic()
        try:
            ours = self._ours()
        except Exception:
            ours = [p for p in self.procs.values() if _alive(p)]
        self._stop.set()
        for proc, grace in ((self.monitor, 15), (self.head, 30)):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGTERM)        # `ray start --block` stops its own
                try:
                    proc.wait(grace)
                except subprocess.TimeoutExpired:
                    pass
        left = [p for p in ours if _alive(p)]
        for p in left:
            try:
                p.terminate()
            except psutil.Error:
                pass
        _, left = psutil.wait_procs(left, timeout=5)
        for p in left:
            try:
                p.kill()
            except psutil.Error:
                pass
        psutil.wait_procs(left, timeout=5)
        for proc in (self.monitor, self.head):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(5)
        self.phases.append(("teardown", time.monotonic() - t0))
        shutil.rmtree(self.dir, ignore_errors=True)

    def report(self) -> str:
        lines = [f"[{self.name}] phases: " + ", ".join(f"{n} {s:.1f} s" for n, s in self.phases),
                 f"[{self.name}] peak RSS of the cluster's processes: "
                 f"{self.mem_peak / 2**30:.2f} GiB over {self.mem_peak_procs} processes; "
                 f"by phase: " + ", ".join(f"{k} {v / 2**30:.2f}"
                                           for k, v in self.phase_peak.items()),
                 f"[{self.name}] pytest process RSS: "
                 f"{psutil.Process().memory_info().rss / 2**30:.2f} GiB"]
        return "\n".join(lines)


def _alive(p) -> bool:
    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


@pytest.fixture
def cluster_factory(request):
    made = []
    failed_before = request.session.testsfailed

    def make(name, **kw):
        c = LocalCluster(name, **kw)
        made.append(c)
        return c

    yield make
    failed = request.session.testsfailed > failed_before     # the call phase failed
    for c in made:
        if ray.is_initialized():
            ray.shutdown()
        if failed:
            print(f"\n=== monitor log tail ({c.name}) ===\n{c.monitor_log_tail()}"
                  f"\n=== vecsched stats ({c.name}) ===\n{c.stats()}", file=sys.stderr)
        try:
            c.stop()
        finally:
            if REPORT or failed:
                print("\n" + c.report(), file=sys.stderr)


@ray.remote(num_cpus=2)
def on_node(i):
    time.sleep(0.5)
    return i, ray.get_runtime_context().get_node_id()


@ray.remote(num_cpus=1, num_gpus=1)
def gpu_task():
    return ray.get_runtime_context().get_node_id(), ray.get_gpu_ids()


class NodeBook:
    """Every worker node the GCS has shown, typed by its resources while it was alive
    (a dead node's entry has none; and the fake provider's workers inherit the
    autoscaler's RAY_NODE_TYPE_NAME, so their ray.io/node-group label is not theirs)."""

    def __init__(self):
        self.types, self.alive = {}, {}

    def update(self) -> "NodeBook":
        for n in ray.nodes():
            nid, r = n["NodeID"], n.get("Resources") or {}
            if nid == FAKE_HEAD_NODE_ID:
                continue
            if r:
                self.types[nid] = ("gpu1" if r.get("GPU") == 1 and r.get("CPU") == 1 else
                                   "cpu2" if r.get("CPU") == 2 and not r.get("GPU") else
                                   f"unknown {r}")
            self.types.setdefault(nid, "never seen alive")
            self.alive[nid] = bool(n["Alive"])
        return self

    def launched(self) -> list:
        return sorted(self.types.values())
