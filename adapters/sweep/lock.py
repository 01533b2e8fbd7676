"""One sweep at a time on an output directory: ``DIR/.sweep.lock``.

A sweep holds an exclusive ``fcntl.flock`` on the lock file for as long as it runs and
writes its pid, host and start time into it (for the message another sweep shows). The
kernel drops the lock when the holder exits, however it exits, so a lock file left by
a sweep that was killed (a dead pid) is stale by construction: the next sweep takes it
over. A sweep that finds the lock held refuses at once with ``SweepLocked``, naming
the holder: ``vecsched sweep`` prints it as its one ``error:`` line, exit 2, before
starting Ray.

The lock file is removed on release while still locked; a newcomer that locked a file
already unlinked (or replaced) under its path notices the changed inode and tries again,
so two newcomers never both believe they hold the lock. File descriptors are not
inherited by the processes a sweep starts (Python's default), so Ray's workers never
keep the lock alive after the sweep is gone.
"""
from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

LOCK = ".sweep.lock"


class SweepLocked(ValueError):
    """Another live sweep holds the output directory."""


def _holder(fd: int) -> str:
    """The holder's pid, host and start, as read from the lock file (best effort)."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096).decode() or "{}")
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(info["started"])))
        return f"pid {int(info['pid'])} on {info['host']}, since {since}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has not written its pid yet"


class SweepLock:
    """``with SweepLock(out_dir):`` holds ``out_dir/.sweep.lock`` (see the module
    docstring); ``SweepLocked`` when another sweep holds it."""

    def __init__(self, out_dir, clock=time.time):
        self.path = Path(out_dir) / LOCK
        self._clock = clock
        self._fd: int | None = None

    def acquire(self) -> "SweepLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                who = _holder(fd)
                os.close(fd)
                raise SweepLocked(f"--out {self.path.parent}: another sweep is writing there "
                                  f"({who}; lock file {self.path}): wait for it to finish, "
                                  f"or give another --out") from None
            try:
                same = os.stat(self.path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)                      # released and removed meanwhile: again
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": self._clock()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        os.close(self._fd)                    # closing drops the flock
        self._fd = None

    def __enter__(self) -> "SweepLock":
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()
