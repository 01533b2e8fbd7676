"""Prometheus metrics, the way Ray's autoscaler exports its own (docs/metrics.md).

Ray 2.60's monitor builds ``AutoscalerPrometheusMetrics`` (a ``CollectorRegistry`` of
its own) and serves it with ``prometheus_client.start_http_server`` on
``AUTOSCALER_METRIC_PORT``; when ``prometheus_client`` cannot be imported it logs a
warning and exports nothing. This module is the same contract for vecsched:
``prometheus_client`` is optional (``available()``), nothing here imports Ray, and the
figures are exported by *collectors*: objects with ``collect()`` and ``describe()`` that
read a component's own counters when scraped, so the component needs no registry and
keeps no second copy of its counts.

What is here: the optional import, the metric families the collectors build (with a
plain fallback so a collector can be unit-tested without a registry), a ``registry()``
of ours, ``register()`` (idempotent) and ``serve()`` for a process that is not Ray's
monitor (an HA replica, a stand-alone scheduler).

Where a server of ours listens (``serve()``, the one helper every server of vecsched
goes through): on **127.0.0.1** unless a host is given (the caller's ``addr``, else
``VECSCHED_METRICS_HOST``, e.g. ``0.0.0.0`` or the pod IP for a Prometheus outside the
pod); with a listen backlog of :data:`BACKLOG` (the standard library's default is 5: a
burst of scrapes beyond that waits for TCP retransmits, seconds); a port already taken
is :class:`MetricsPortTaken`, naming the address. The collectors themselves:
``adapters/ray/metrics.py`` (the installed scheduler, and the hook into Ray's registry),
``adapters/metrics_lease.py`` (a leader lease), ``adapters/metrics_kuberay.py`` (the
KubeRay side-car's ledger).
"""
from __future__ import annotations

import errno
import logging
import math
import os
import socket
import threading
from socketserver import ThreadingMixIn
from typing import Iterable, Optional, Sequence
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

logger = logging.getLogger(__name__)

try:                                   # like ray/autoscaler/_private/prom_metrics.py
    import prometheus_client
    from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                        HistogramMetricFamily)
except ImportError:                    # pragma: no cover - depends on the install
    prometheus_client = None

PREFIX = "vecsched_"
ENV_PORT = "VECSCHED_METRICS_PORT"     # serve a registry of ours on this port
ENV_HOST = "VECSCHED_METRICS_HOST"     # ... on this address (default 127.0.0.1)
DEFAULT_HOST = "127.0.0.1"
BACKLOG = 1024                         # listen backlog (the kernel caps it at somaxconn)


class MetricsError(ValueError):
    """A bad metrics setting (the message names it)."""


class MetricsPortTaken(MetricsError):
    """The address a metrics server was to listen on is in use (the message names it)."""


def available() -> bool:
    """Whether ``prometheus_client`` is importable (Ray skips its metrics when not)."""
    return prometheus_client is not None


def _need() -> None:
    if prometheus_client is None:
        raise MetricsError("prometheus_client is not installed (pip install "
                           "prometheus_client, or ray[default]); metrics cannot be exported")


def counter(name: str, doc: str, labels: Sequence[str] = ()):
    """A counter family ``vecsched_<name>`` (exposed as ``..._total``)."""
    _need()
    return CounterMetricFamily(PREFIX + name, doc, labels=list(labels))


def gauge(name: str, doc: str, labels: Sequence[str] = ()):
    _need()
    return GaugeMetricFamily(PREFIX + name, doc, labels=list(labels))


def histogram(name: str, doc: str, labels: Sequence[str] = ()):
    _need()
    return HistogramMetricFamily(PREFIX + name, doc, labels=list(labels), unit="")


def histogram_buckets(bounds: Sequence[float], counts: Sequence[int]) -> list:
    """Prometheus buckets (cumulative, ending in +Inf) from per-bucket counts.

    ``counts`` has one entry per bound plus one for the overflow above the last bound.
    """
    if len(counts) != len(bounds) + 1:
        raise MetricsError(f"counts: {len(bounds) + 1} entries expected, got {len(counts)}")
    out, total = [], 0
    for le, c in zip([*map(_le, bounds), "+Inf"], counts):
        total += int(c)
        out.append((le, total))
    return out


def _le(bound: float) -> str:
    return "+Inf" if math.isinf(bound) else repr(float(bound))


def registry():
    """A fresh ``CollectorRegistry`` (as Ray's, ``auto_describe=True``)."""
    _need()
    return prometheus_client.CollectorRegistry(auto_describe=True)


def register(reg, collector) -> bool:
    """Register ``collector`` in ``reg`` once; False if it already was there."""
    _need()
    if collector in getattr(reg, "_collector_to_names", {}):
        return False
    reg.register(collector)
    return True


def metrics_host(addr: Optional[str] = None) -> str:
    """The address a metrics server of ours listens on: ``addr`` if given, else
    ``VECSCHED_METRICS_HOST``, else 127.0.0.1 (this host only)."""
    if addr:
        return addr
    return (os.environ.get(ENV_HOST) or "").strip() or DEFAULT_HOST


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):          # no line per scrape
        pass


class _MetricsServer(ThreadingMixIn, WSGIServer):
    """A thread per scrape (as prometheus_client's), with a real listen backlog."""
    daemon_threads = True
    request_queue_size = BACKLOG


def http_server(reg, port: int, addr: Optional[str] = None):
    """A WSGI server of ``reg``'s text exposition bound to ``metrics_host(addr):port``
    and listening, not yet serving (``start``). A taken address is
    :class:`MetricsPortTaken`; another bind failure a :class:`MetricsError`, both
    naming the address."""
    _need()
    port = parse_port(port, "port")
    host = metrics_host(addr)
    try:
        family, _, _, _, sockaddr = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as e:
        raise MetricsError(f"metrics: cannot resolve the host {host!r} ({e})") from None
    cls = type("MetricsServer", (_MetricsServer,), {"address_family": family})
    try:
        return make_server(sockaddr[0], port, prometheus_client.make_wsgi_app(reg), cls,
                           handler_class=_Quiet)
    except OSError as e:
        if e.errno == errno.EADDRINUSE:
            raise MetricsPortTaken(f"metrics: {host}:{port} is already in use (another "
                                   f"process or server listens there); no metrics are "
                                   f"served on it") from e
        raise MetricsError(f"metrics: cannot listen on {host}:{port}: {e}") from e


def start(server) -> threading.Thread:
    """Serve ``server`` (``http_server``) from a daemon thread (returned)."""
    t = threading.Thread(target=server.serve_forever, name="vecsched-metrics", daemon=True)
    t.start()
    return t


def serve(reg, port: int, addr: Optional[str] = None):
    """Serve ``reg`` over HTTP on ``metrics_host(addr):port`` in a daemon thread, as
    Ray's monitor does; ``port=0`` picks a free port. Returns ``(server, port)``;
    raises :class:`MetricsPortTaken` if the port is taken."""
    server = http_server(reg, port, addr)
    start(server)
    return server, server.server_address[1]


def parse_port(value, field: str = ENV_PORT) -> int:
    """A TCP port from ``value`` (an int or a string), else MetricsError naming ``field``."""
    try:
        port = int(str(value).strip())
    except ValueError:
        raise MetricsError(f"{field}: a port number is required, got {value!r}") from None
    if not 0 <= port <= 65535:
        raise MetricsError(f"{field}: a port number in [0, 65535] is required, got {port}")
    return port


def scrape(reg) -> str:
    """The text exposition of ``reg`` (what a Prometheus scrape of it returns)."""
    _need()
    return prometheus_client.generate_latest(reg).decode()


def sample_value(families: Iterable, name: str, labels: Optional[dict] = None):
    """The value of the sample ``name`` with (at least) ``labels`` among ``families``
    (a collector's ``collect()``), or None. For tests and tools."""
    want = labels or {}
    for fam in families:
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in want.items()):
                return s.value
    return None
