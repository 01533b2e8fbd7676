"""Pods as real Ray 2.60 worker nodes: the stand-in kubelet's container runtime.

A pod's "Ray container" is ``ray start --address=<GCS> --block`` with the group's
``rayStartParams`` as flags (as KubeRay builds the container command), in its own
process group and temp dir, with the two variables KubeRay sets on every Ray pod that
tie the Ray node to its pod: ``RAY_CLOUD_INSTANCE_ID=<pod name>`` and
``RAY_NODE_TYPE_NAME=<group name>``. Autoscaler v2 matches Ray nodes to cloud instances
by exactly that id, so the reconciler sees each pod's node come up, go idle and stop.
Group ``labels`` (KubeRay v1.5's top-level field) become ``--labels``.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from typing import Dict, Optional

from .operator import PodRunner

_GRACE_S = 15.0           # SIGTERM -> SIGKILL, like terminationGracePeriodSeconds
_SKIP = {"block", "address", "head", "temp-dir", "labels"}


def start_flags(group: dict) -> list:
    """``ray start`` flags from a group's rayStartParams (and top-level labels)."""
    flags = []
    for key, val in (group.get("rayStartParams") or {}).items():
        if key in _SKIP:
            continue
        val = str(val)
        if key == "resources":            # KubeRay's quoted form: '"{\"Custom\": 1}"'
            val = val.strip()
            if val[:1] in "'\"" and val[-1:] == val[:1]:
                val = val[1:-1]
            val = val.replace("\\", "")
            json.loads(val)                # a malformed value fails here, not in Ray
        flags.append(f"--{key}={val}")
    labels = group.get("labels") or {}
    if labels:
        flags.append("--labels=" + ",".join(f"{k}={v}" for k, v in labels.items()))
    return flags


class RayPodRunner(PodRunner):
    def __init__(self, gcs_address: str, root_dir: str, *, env: Optional[dict] = None,
                 ray_bin: Optional[str] = None):
        super().__init__()
        self.gcs_address = gcs_address
        self.root = root_dir
        self.env = env or {}
        self.ray_bin = ray_bin or os.path.join(os.path.dirname(sys.executable), "ray")
        self.procs: Dict[str, subprocess.Popen] = {}
        self.stop_at: Dict[str, float] = {}
        self.started_at: Dict[str, float] = {}

    def start(self, pod: dict, group: dict) -> None:
        name = pod["metadata"]["name"]
        short = name.rsplit("-", 1)[-1]
        tmp = os.path.join(self.root, "p" + short)
        os.makedirs(tmp, exist_ok=True)
        cmd = [self.ray_bin, "start", f"--address={self.gcs_address}", "--block",
               f"--temp-dir={tmp}", "--disable-usage-stats", *start_flags(group)]
        env = {k: v for k, v in os.environ.items()
               if k not in ("RAY_ADDRESS", "RAY_START_HOOK", "RAY_NODE_TYPE_NAME",
                            "RAY_CLOUD_INSTANCE_ID", "RAY_OVERRIDE_NODE_ID_FOR_TESTING")}
        env.update(self.env)
        env.update({"RAY_CLOUD_INSTANCE_ID": name,
                    "RAY_NODE_TYPE_NAME": pod["metadata"]["labels"]["ray.io/group"],
                    "RAY_USAGE_STATS_KUBERAY_IN_USE": "1",
                    "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "disabled"})
        log = open(os.path.join(self.root, f"{name}.log"), "wb")
        try:
            self.procs[name] = subprocess.Popen(cmd, env=env, stdout=log,
                                                stderr=subprocess.STDOUT,
                                                start_new_session=True)
        finally:
            log.close()
        self.started_at[name] = time.monotonic()

    def state(self, name: str):
        p = self.procs.get(name)
        if p is None:
            return None
        rc = p.poll()
        return "running" if rc is None else ("terminated", rc)

    def stop(self, name: str) -> None:
        p = self.procs.get(name)
        if p is None or name in self.stop_at:
            return
        self.stop_at[name] = time.monotonic()
        if p.poll() is None:
            _signal_group(p.pid, signal.SIGTERM)

    def stopped(self, name: str) -> bool:
        p = self.procs.get(name)
        if p is None:
            return True
        if p.poll() is None:
            if time.monotonic() - self.stop_at.get(name, time.monotonic()) > _GRACE_S:
                _signal_group(p.pid, signal.SIGKILL)
            return False
        _signal_group(p.pid, signal.SIGKILL)      # anything of the pod left behind
        del self.procs[name]
        self.stop_at.pop(name, None)
        return True

    def close(self) -> None:
        for name in list(self.procs):
            self.stop(name)
        deadline = time.monotonic() + _GRACE_S
        while self.procs and time.monotonic() < deadline:
            for name in list(self.procs):
                self.stopped(name)
            time.sleep(0.2)
        for name, p in list(self.procs.items()):
            _signal_group(p.pid, signal.SIGKILL)
            try:
                p.wait(5)
            except subprocess.TimeoutExpired:
                pass
            del self.procs[name]


def _signal_group(pid: int, sig) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
