"""Start a private `redis-server` on loopback, for the HA demo and the tests.

The server listens on 127.0.0.1 only, on a free port, keeps its files in its own
directory, and runs with the append-only file fsynced on every write
(`appendfsync always`): a write Redis acknowledged survives a crash of the server
(SIGKILL) and a restart on the same directory. `restart()` brings it back on the same
port and directory; `restart(empty=True)` first deletes its files, as a Redis whose
disk was lost (a pod without a persistent volume) comes back; `snapshot(dest)` copies
its files (a backup) and `restart(restore=dest)` comes back with them, as a Redis
restored from an old backup. `persistent=False`
starts a server that keeps nothing on disk (no append-only file, no snapshots), the
kind a replica refuses unless told otherwise. Debian / Ubuntu:
`apt-get install -y redis-server`.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import redis


class RedisUnavailable(RuntimeError):
    """redis-server is not installed or would not start."""


def redis_server_binary() -> str:
    path = os.environ.get("VECSCHED_REDIS_SERVER") or shutil.which("redis-server")
    if not path:
        raise RedisUnavailable("redis-server not found on PATH: install it "
                               "(apt-get install -y redis-server) or set "
                               "VECSCHED_REDIS_SERVER to its path")
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process (see the module docstring). Use as a context manager."""

    def __init__(self, directory: str | Path, port: int | None = None,
                 start_timeout_s: float = 10.0, persistent: bool = True):
        self.persistent = bool(persistent)
        self.dir = Path(directory)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None
        self.binary = redis_server_binary()

    @property
    def host(self) -> str:
        return "127.0.0.1"

    def _spawn(self, port: int) -> subprocess.Popen:
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if self.persistent \
            else ["--appendonly", "no"]
        args = [self.binary, "--port", str(port), "--bind", "127.0.0.1",
                "--dir", str(self.dir), *aof,
                "--save", "", "--daemonize", "no", "--protected-mode", "yes",
                "--logfile", str(self.dir / "redis.log")]
        return subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True)

    def start(self) -> RedisServer:
        for _ in range(5):                  # a free port can be taken before we bind it
            port = self.port or free_port()
            self.proc = self._spawn(port)
            if self._wait_ready(port):
                self.port = port
                return self
            self._reap()
            if self.port:                   # a fixed port (restart): do not wander
                break
        log = (self.dir / "redis.log")
        tail = log.read_text()[-2000:] if log.exists() else ""
        raise RedisUnavailable(f"redis-server did not start on 127.0.0.1:{port}; log:\n{tail}")

    def _wait_ready(self, port: int) -> bool:
        client = redis.Redis(host="127.0.0.1", port=port, socket_timeout=0.5,
                             socket_connect_timeout=0.5)
        deadline = time.monotonic() + self.start_timeout_s
        try:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    return False
                try:
                    if client.ping():
                        return True
                except (redis.ConnectionError, redis.TimeoutError, OSError):
                    time.sleep(0.02)
                except redis.BusyLoadingError:
                    time.sleep(0.02)
            return False
        finally:
            client.close()

    def _reap(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
        if self.proc is not None:
            self.proc.wait()

    def kill(self) -> None:
        """SIGKILL: a crash, no shutdown save."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()

    def restart(self, empty: bool = False, restore: str | Path | None = None) -> RedisServer:
        """Start again on the same port and directory (after kill() or stop()); with
        `empty`, kill it first if running and delete its data files, so it comes
        back with nothing; with `restore` (a directory `snapshot()` wrote), kill it
        and come back with the data files of then (a Redis restored from a backup)."""
        if empty or restore is not None:
            self.kill()
        self._reap()
        if empty or restore is not None:
            self._clear()
        if restore is not None:
            shutil.copytree(restore, self.dir, dirs_exist_ok=True)
        return self.start()

    def _clear(self) -> None:
        for path in self.dir.iterdir():
            if path.name == "redis.log":
                continue
            shutil.rmtree(path) if path.is_dir() else path.unlink()

    def snapshot(self, dest: str | Path) -> Path:
        """Copy the data files as they are now to `dest` (a backup; the append-only file
        is fsynced on every write, so the copy holds every acknowledged write)."""
        dest = Path(dest)
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(self.dir, dest, ignore=shutil.ignore_patterns("redis.log"))
        return dest

    def client(self, **kwargs) -> redis.Redis:
        return redis.Redis(host=self.host, port=self.port, **kwargs)

    def __enter__(self) -> RedisServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
