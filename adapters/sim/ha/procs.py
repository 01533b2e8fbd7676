"""Child processes of an HA run: the world server and the autoscaler replicas, each
with its stdout read as JSON-line events on a thread; starting a replica, finding the
world's address, waiting for the first leader."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from .world_server import AUTHKEY_ENV


class DemoError(RuntimeError):
    """The run did not go as orchestrated (a child died or did not answer in time)."""


def _env(authkey: bytes) -> dict:
    """The parent's environment and the world's authkey. Children import `vecsched`
    as installed (no source folder is put on PYTHONPATH: the repository's
    `adapters/` holds a `ray/` folder that would hide the real `ray`)."""
    env = dict(os.environ)
    env[AUTHKEY_ENV] = authkey.hex()
    return env


class Child:
    """A child process whose stdout lines are JSON events."""

    def __init__(self, name: str, module: str, arg: str, authkey: bytes, log_dir: Path):
        self.name = name
        self.err_path = log_dir / f"{name}.stderr.log"
        self._err = open(self.err_path, "wb")
        self.proc = subprocess.Popen([sys.executable, "-m", module, arg], env=_env(authkey),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True, bufsize=1)
        self.pid = self.proc.pid
        self.events: list[dict] = []
        self._q: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        with open(self.err_path.with_name(f"{self.name}.events.jsonl"), "w") as log:
            for line in self.proc.stdout:
                log.write(line)
                log.flush()
                try:
                    ev = json.loads(line)
                except ValueError:
                    continue                # not an event (a library printing)
                self.events.append(ev)
                self._q.put(ev)
        self._q.put(None)

    def wait_for(self, ev: str, timeout_s: float, **match) -> dict:
        """The next event named `ev` (matching `match`) not consumed yet."""
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                self.dump_stacks()
                raise DemoError(f"{self.name}: no '{ev}' event within {timeout_s} s"
                                f"{self.stderr_tail()}")
            try:
                e = self._q.get(timeout=left)
            except queue.Empty:
                continue
            if e is None:
                self._q.put(None)
                raise DemoError(f"{self.name} exited (code {self.proc.poll()}) before "
                                f"'{ev}'{self.stderr_tail()}")
            if e.get("ev") == ev and all(e.get(k) == v for k, v in match.items()):
                return e

    def seen(self, ev: str) -> list[dict]:
        return [e for e in list(self.events) if e.get("ev") == ev]

    def send(self, line: str) -> None:
        try:
            self.proc.stdin.write(line + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass                            # it is gone; the next wait says so

    def signal(self, sig: int) -> float:
        os.kill(self.pid, sig)
        return time.monotonic()

    def state(self) -> str:
        """The kernel's process state letter (R, S, T = stopped, Z, ...)."""
        try:
            stat = Path(f"/proc/{self.pid}/stat").read_text()
        except OSError:
            return "?"
        return stat.rsplit(")", 1)[1].split()[0]

    def wait_stopped(self, timeout_s: float = 5.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.state() not in ("T", "t"):
            if time.monotonic() > deadline:
                raise DemoError(f"{self.name} did not stop (state {self.state()})")
            time.sleep(0.002)

    def dump_stacks(self) -> None:
        """Ask a stuck child for its threads' stacks (on its stderr; faulthandler)."""
        if self.proc.poll() is None and self.state() not in ("T", "t"):
            try:
                os.kill(self.pid, signal.SIGUSR1)
                time.sleep(0.3)
            except ProcessLookupError:
                pass

    def stderr_tail(self) -> str:
        try:
            self._err.flush()
            tail = self.err_path.read_text(errors="replace")[-1500:]
        except OSError:
            return ""
        return f"\n--- {self.name} stderr ---\n{tail}" if tail.strip() else ""

    def finish(self, timeout_s: float = 10.0) -> int | None:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            return self.proc.wait()

    def kill(self) -> None:
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGCONT)
                os.kill(self.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()

    def close(self) -> None:
        self.kill()
        self._err.close()


def start_replica(name: str, dc, server, world_addr, authkey: bytes, logs: Path,
                  children: list, kube: dict | None = None) -> Child:
    """A replica process (`replica.py`) with the demo config `dc`'s settings; `kube`:
    the API server's URL and TLS file paths when `dc.backend` is kube."""
    cfg = {"name": name, "redis": [server.host, server.port], "world": list(world_addr),
           "cluster": "ha-demo", "ttl_s": dc.ttl_s, "tick_real_s": dc.tick_real_s,
           "poll_s": dc.poll_s, "scheduler": dc.scheduler,
           "allow_volatile_redis": dc.allow_volatile_redis, "backend": dc.backend,
           "kube": kube}
    child = Child(name, "vecsched.adapters.sim.ha.replica", json.dumps(cfg), authkey, logs)
    children.append(child)
    return child


def world_address(world: Child, timeout_s: float):
    """The world process prints its address first: a line with "address", no "ev"."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for line in list(world.events):
            if "address" in line:
                return tuple(line["address"])
        if world.proc.poll() is not None:
            raise DemoError(f"world exited{world.stderr_tail()}")
        time.sleep(0.01)
    raise DemoError(f"world: no address within {timeout_s} s{world.stderr_tail()}")


def first_leader(replicas: list[Child], timeout_s: float) -> Child:
    """The first of `replicas` to report a `leader` event."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for c in replicas:
            if c.seen("leader"):
                return c
        time.sleep(0.005)
    raise DemoError(f"no replica took the lease within {timeout_s} s")
