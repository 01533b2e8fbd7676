"""Where vecsched's metrics servers listen and how they take a crowd (adapters/metrics.py
``serve``/``http_server``, the one helper behind ``metrics_lease.serve_lease_metrics``,
``ray.metrics.serve_standalone`` and, once attached, Ray's own autoscaler metrics
server): 127.0.0.1 unless a host is given, a listen backlog that takes 200 scrapes at
once, a taken port named."""
from __future__ import annotations

import logging
import select
import socket
import threading
import time
import urllib.request

import pytest

prometheus_client = pytest.importorskip("prometheus_client")

from vecsched.adapters import metrics as m  # noqa: E402
from vecsched.adapters.metrics_lease import serve_lease_metrics  # noqa: E402

N = 200


class _Lease:
    """What LeaseCollector reads of a lease (a real one: tests/adapters/test_metrics_collectors.py)."""
    holder, max_epoch_seen = "A-0", 0

    def snapshot(self):
        from vecsched.adapters.leader.lease import LeaseStats
        return LeaseStats().as_dict(False, 0)

    def waiting(self):
        return 0


def _stop(server):
    server.shutdown()
    server.server_close()


@pytest.fixture
def taken():
    """A port some other process listens on."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    yield s.getsockname()[1]
    s.close()


def test_servers_listen_on_loopback_unless_a_host_is_given(monkeypatch):
    from vecsched.adapters.ray import metrics as rm
    monkeypatch.delenv(m.ENV_HOST, raising=False)
    server, _ = m.serve(m.registry(), 0)
    assert server.server_address[0] == "127.0.0.1"
    _stop(server)
    reg, port = serve_lease_metrics(_Lease(), 0)
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as r:
        assert "vecsched_lease_is_leader" in r.read().decode()
    try:
        rm.serve_standalone(0)
        assert rm._served["server"].server_address[0] == "127.0.0.1"
    finally:
        rm.detach()
    monkeypatch.setenv(m.ENV_HOST, "0.0.0.0")               # given: all interfaces
    server, _ = m.serve(m.registry(), 0)
    assert server.server_address[0] == "0.0.0.0"
    _stop(server)
    server, _ = m.serve(m.registry(), 0, "127.0.0.1")       # the caller's word first
    assert server.server_address[0] == "127.0.0.1"
    _stop(server)


def _connect_burst(port: int, n: int, wait_s: float) -> int:
    """Open ``n`` connections at once to a server that is not accepting yet; how many
    the kernel completed (they sit in the listen backlog) within ``wait_s``."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            socks.append(s)
        done, pending, deadline = 0, set(socks), time.monotonic() + wait_s
        while pending and time.monotonic() < deadline:
            _, ready, _ = select.select([], list(pending), [], 0.05)
            for s in ready:
                done += s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
                pending.discard(s)
        return done
    finally:
        for s in socks:
            s.close()


def test_the_listen_backlog_holds_a_burst_of_200_connections():
    """200 connections at once while the server has not accepted one: all wait in the
    backlog. A server with the standard library's backlog (5, what prometheus_client's
    ``start_http_server`` builds) holds 6; the rest wait for TCP retransmits (1 s, 3 s,
    7 s, ...)."""
    from prometheus_client.exposition import ThreadingWSGIServer
    from wsgiref.simple_server import make_server

    ours = m.http_server(m.registry(), 0)
    stock = make_server("127.0.0.1", 0, prometheus_client.make_wsgi_app(m.registry()),
                        ThreadingWSGIServer)
    try:
        assert _connect_burst(ours.server_address[1], N, 5.0) == N
        assert _connect_burst(stock.server_address[1], N, 0.5) < N
    finally:
        ours.server_close()
        stock.server_close()


def test_200_simultaneous_scrapes_all_finish():
    server, port = m.serve(m.registry(), 0)
    go, results = threading.Event(), []

    def scrape():
        go.wait()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
                results.append(r.status)
        except Exception as e:           # counted as a failure below
            results.append(repr(e))
    threads = [threading.Thread(target=scrape) for _ in range(N)]
    for t in threads:
        t.start()
    t0 = time.monotonic()
    go.set()
    for t in threads:
        t.join(120)
    _stop(server)
    assert results.count(200) == N, (time.monotonic() - t0, [r for r in results if r != 200])


def test_a_taken_port_is_an_error_that_names_it(taken):
    with pytest.raises(m.MetricsPortTaken, match=f"127.0.0.1:{taken} is already in use"):
        m.serve(m.registry(), taken)
    with pytest.raises(m.MetricsPortTaken, match=f"127.0.0.1:{taken}"):
        serve_lease_metrics(_Lease(), taken)


def test_a_taken_standalone_port_is_a_warning_that_names_it(taken, caplog):
    pytest.importorskip("ray")
    from vecsched.adapters.ray import metrics as rm
    try:
        with caplog.at_level(logging.WARNING, logger=rm.__name__):
            assert rm.attach(taken)
        (rec,) = [r for r in caplog.records if m.ENV_PORT in r.getMessage()]
        assert f"127.0.0.1:{taken} is already in use" in rec.getMessage()
        assert "port" not in rm._served
    finally:
        rm.detach()


def test_rays_own_metrics_server_gets_the_backlog_and_names_a_taken_port(taken, caplog):
    """Once attached, the server Ray's monitor starts for AUTOSCALER_METRIC_PORT (by
    calling ``prometheus_client.start_http_server``, as Ray 2.60's v2 monitor does) is
    ours: the address Ray asks for, our backlog, a taken port named in a warning (and
    the OSError Ray logs and goes on after)."""
    pytest.importorskip("ray")
    from vecsched.adapters.ray import metrics as rm
    original = prometheus_client.start_http_server
    try:
        rm.attach()
        reg = m.registry()
        server, thread = prometheus_client.start_http_server(0, addr="127.0.0.1",
                                                             registry=reg)
        assert server.request_queue_size == m.BACKLOG and thread.is_alive()
        assert _connect_burst(server.server_address[1], N, 5.0) == N
        _stop(server)
        with caplog.at_level(logging.WARNING, logger=rm.__name__):
            with pytest.raises(OSError):
                prometheus_client.start_http_server(port=taken, addr="127.0.0.1",
                                                    registry=reg)
        (rec,) = [r for r in caplog.records if "AUTOSCALER_METRIC_PORT" in r.getMessage()]
        assert f"127.0.0.1:{taken} is already in use" in rec.getMessage()
    finally:
        rm.detach()
    assert prometheus_client.start_http_server is original
