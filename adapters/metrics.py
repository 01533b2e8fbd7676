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
monitor (an HA replica, a stand-alone scheduler). The collectors themselves:
``adapters/ray/metrics.py`` (the installed scheduler, and the hook into Ray's registry),
``adapters/metrics_lease.py`` (a leader lease), ``adapters/metrics_kuberay.py`` (the
KubeRay side-car's ledger).
"""
from __future__ import annotations

import logging
import math
from typing import Iterable, Optional, Sequence

logger = logging.getLogger(__name__)

try:                                   # like ray/autoscaler/_private/prom_metrics.py
    import prometheus_client
    from prometheus_client.core import (CounterMetricFamily, GaugeMetricFamily,
                                        HistogramMetricFamily)
except ImportError:                    # pragma: no cover - depends on the install
    prometheus_client = None

PREFIX = "vecsched_"
ENV_PORT = "VECSCHED_METRICS_PORT"     # serve a registry of ours on this port


class MetricsError(ValueError):
    """A bad metrics setting (the message names it)."""


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


def serve(reg, port: int, addr: str = "127.0.0.1"):
    """Serve ``reg`` over HTTP on ``addr:port`` in a daemon thread, as Ray's monitor
    does; ``port=0`` picks a free port. Returns ``(server, port)``."""
    _need()
    port = parse_port(port, "port")
    server, _thread = prometheus_client.start_http_server(port, addr=addr, registry=reg)
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
