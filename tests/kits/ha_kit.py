"""Shared pieces of the HA tests: a private redis-server per test, and a TCP proxy on
loopback that really delays (or blackholes) what Redis answers."""
from __future__ import annotations

import queue
import socket
import threading
import time

import pytest

from vecsched.adapters.sim.redis_server import RedisServer, RedisUnavailable


@pytest.fixture
def redis_server(tmp_path):
    """A redis-server of this test's own (free port, its own directory). A missing
    redis-server fails the test with how to install it: these tests never skip."""
    try:
        server = RedisServer(tmp_path / "redis").start()
    except RedisUnavailable as e:
        pytest.fail(f"{e} (the HA tests need a real Redis: apt-get install -y redis-server)")
    yield server
    server.stop()


class DelayProxy:
    """Forwards 127.0.0.1:<port> to a Redis port; everything Redis sends back reaches
    the client `delay_s` later (settable at any time). Order is kept."""

    def __init__(self, target_port: int):
        self.target_port = target_port
        self.delay_s = 0.0
        self._lsock = socket.create_server(("127.0.0.1", 0))
        self.port = self._lsock.getsockname()[1]
        self._closed = False
        self._socks: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._lsock.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target_port))
            self._socks += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()
            q: queue.Queue = queue.Queue()
            threading.Thread(target=self._read, args=(upstream, q), daemon=True).start()
            threading.Thread(target=self._deliver, args=(q, client), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shut(dst)

    @staticmethod
    def _read(src: socket.socket, q: queue.Queue) -> None:
        try:
            while data := src.recv(65536):
                q.put((time.monotonic(), data))
        except OSError:
            pass
        q.put(None)

    def _deliver(self, q: queue.Queue, dst: socket.socket) -> None:
        try:
            while (item := q.get()) is not None:
                t, data = item
                wait = t + self.delay_s - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shut(dst)

    def close(self) -> None:
        self._closed = True
        self._lsock.close()
        for s in self._socks:
            _shut(s)
            s.close()


def _shut(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
