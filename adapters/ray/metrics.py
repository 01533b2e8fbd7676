"""The installed scheduler's Prometheus metrics, served on Ray's autoscaler metrics port.

:class:`SchedulerCollector` reads an :class:`AutoscalerScheduler`'s own figures
(``metrics_view()``) when scraped: tick seconds per scheduler pass, decisions by kind
and cause, the ticks Ray decided and why, the warm-up, shadow-mode differences
(the list, with meanings: docs/metrics.md).

Where it is served (:func:`attach`, called by ``install()`` in the autoscaler process):

* **inside Ray's monitor**: Ray 2.60's ``ray/autoscaler/v2/monitor.py`` (and the KubeRay
  side-car, which runs the same monitor) builds ``AutoscalerPrometheusMetrics`` and
  serves its ``registry`` on ``AUTOSCALER_METRIC_PORT`` (default 44217) when it has a
  ``--monitor-ip`` and ``prometheus_client`` is importable. :func:`attach` rebinds that
  name in ``ray.autoscaler._private.prom_metrics`` (before the monitor module is run, so
  it imports ours) to a subclass that registers our collectors in every registry Ray
  builds: vecsched's metrics come out of Ray's port, beside Ray's ``autoscaler_*`` ones.
  While attached, ``prometheus_client.start_http_server`` (what Ray's monitor calls for
  that port) is our ``metrics.http_server``: the address and port Ray asks for, a listen
  backlog of ``metrics.BACKLOG`` instead of 5, and a taken port logged as a warning
  naming it before Ray logs its own error and goes on without metrics (Ray's rule).
* **stand-alone**: with ``VECSCHED_METRICS_PORT`` set, a registry of ours with the same
  collectors is also served on that port (``0``: any free port, logged), on 127.0.0.1
  unless ``VECSCHED_METRICS_HOST`` says otherwise; a taken port is a warning naming it.

Without ``prometheus_client`` nothing is registered or served (as Ray does), and the
scheduler keeps counting for its stats file.
"""
from __future__ import annotations

import logging
from typing import Callable, Optional

from vecsched.adapters import metrics as m

logger = logging.getLogger(__name__)

_extra: list = []            # collectors to put in every registry Ray builds from now on
_served: dict = {}           # what serve_standalone() started: "server", "port", "registry"


class SchedulerCollector:
    """Prometheus collector over the live scheduler ``source()`` returns (or None)."""

    def __init__(self, source: Callable[[], Optional[object]]):
        self._source = source

    def describe(self):
        return self._families(None)

    def collect(self):
        sched = self._source()
        return self._families(sched.metrics_view() if sched is not None else None)

    def _families(self, v: Optional[dict]) -> list:
        return [self._info(v), self._ticks(v), self._tick_seconds(v), *self._decisions(v),
                *self._warmup(v), *self._shadow(v), *self._capacity(v)]

    @staticmethod
    def _info(v):
        f = m.gauge("scheduler_info", "1 while vecsched's scheduler is installed in this "
                    "autoscaler; its mode (engine or shadow) and Ray version as labels.",
                    ["mode", "ray_version"])
        if v is not None:
            import ray
            f.add_metric([v["mode"], ray.__version__], 1)
        return f

    @staticmethod
    def _ticks(v):
        f = m.counter("ticks", "schedule() calls (autoscaler ticks), by who decided "
                      "them: engine, or ray (see vecsched_ray_decided_ticks_total).",
                      ["decided_by"])
        if v is not None:
            f.add_metric(["engine"], v["engine_ticks"])
            f.add_metric(["ray"], sum(v["ray_decided"].values()))
        return f

    @staticmethod
    def _tick_seconds(v):
        f = m.histogram("tick_seconds", "Seconds of one scheduler pass per schedule() call: "
                        "scheduler=engine (vecsched's engine: decode, plan, encode) or "
                        "ray (Ray's ResourceDemandScheduler).", ["scheduler"])
        if v is not None:
            for name, h in sorted(v["tick_seconds"].items()):
                f.add_metric([name], m.histogram_buckets(h.bounds, h.counts), h.total_s)
        return f

    @staticmethod
    def _decisions(v):
        dec = m.counter("decisions", "Decisions in the replies sent to Ray: kind=launch "
                        "(nodes), terminate (nodes) or infeasible (requests, gangs, "
                        "constraints, counted every tick they stay unplaced), by cause and "
                        "node type.", ["kind", "cause", "node_type"])
        why = m.counter("ray_decided_ticks", "Ticks Ray's own scheduler decided instead of "
                        "the engine, by reason: warmup (kernels not loaded yet), "
                        "engine_error (the engine raised), shadow (shadow mode).", ["reason"])
        now = m.gauge("infeasible_requests", "Requests the last tick left infeasible, by "
                      "cause (UNKNOWN when Ray's scheduler decided it).", ["cause"])
        if v is not None:
            for (kind, cause, node_type), n in sorted(v["decisions"].items()):
                dec.add_metric([kind, cause, node_type], n)
            for reason in ("warmup", "engine_error", "shadow"):
                why.add_metric([reason], v["ray_decided"].get(reason, 0))
            for cause, n in sorted(v["infeasible_now"].items()):
                now.add_metric([cause], n)
        return [dec, why, now]

    @staticmethod
    def _warmup(v):
        ready = m.gauge("engine_ready", "1 once the engine's kernels are loaded and it "
                        "decides; 0 while they warm up (Ray decides); -1 if the warm-up "
                        "failed (Ray decides for good).")
        secs = m.gauge("warmup_seconds", "Seconds the engine's warm-up took (absent until "
                       "it is done).")
        errors = m.counter("engine_errors", "Ticks on which the engine raised (Ray's "
                           "scheduler decided them).")
        if v is not None:
            ready.add_metric([], -1 if v["warmup_failed"] else int(v["warmup_ready"]))
            if v["warmup_s"] is not None:
                secs.add_metric([], v["warmup_s"])
            errors.add_metric([], v["engine_errors"])
        return [ready, secs, errors]

    @staticmethod
    def _shadow(v):
        f = m.counter("shadow_diff_ticks", "Shadow mode: ticks on which the engine's "
                      "decisions differed from Ray's; documented=yes for the documented "
                      "divergences (docs/ray-compat.md).", ["documented"])
        errs = m.counter("shadow_errors", "Shadow mode: ticks on which the engine's "
                         "shadow pass failed.")
        if v is not None and v["mode"] == "shadow":
            known = v["shadow_known_divergence_ticks"]
            f.add_metric(["yes"], known)
            f.add_metric(["no"], v["shadow_diff_ticks"] - known)
            errs.add_metric([], v["shadow_errors"])
        return [f, errs]


    @staticmethod
    def _capacity(v):
        head = m.gauge("limit_headroom", "Per limit (VECSCHED_LIMITS, docs/capacity.md): "
                       "the limit minus what the last engine tick asked for (nodes from "
                       "QUEUED to running plus its launches); 0 or below: demand is held "
                       "back. limit=<resource> cluster-wide or <group>/<resource>.",
                       ["limit"])
        value = m.gauge("limit", "Per limit: its value.", ["limit"])
        held = m.gauge("held_out_groups", "Worker groups the availability memory held out "
                       "of the last engine tick's launches after the cloud refused them "
                       "(efficient mode), 1 per group.", ["node_type"])
        if v is not None:
            for name, row in sorted(v.get("limits_now", {}).items()):
                head.add_metric([name], row["headroom"])
                value.add_metric([name], row["limit"])
            for name in v.get("held_out_now", []):
                held.add_metric([name], 1)
        return [head, value, held]


# ---------------------------------------------------------------- where it is served

def attach(port: Optional[int] = None) -> bool:
    """Export the live installed scheduler (``AutoscalerScheduler.latest()``) from every
    registry Ray's monitor builds in this process from now on, and serve it on ``port``
    too when given (``VECSCHED_METRICS_PORT``). False (and a log line) when
    ``prometheus_client`` is missing. Idempotent."""
    if not m.available():
        logger.warning("vecsched: prometheus_client not found, so vecsched's metrics will "
                       "not be exported (as Ray does for its own)")
        return False
    _extra[:] = [c for c in _extra if not isinstance(c, SchedulerCollector)]
    from .autoscaler_scheduler import AutoscalerScheduler

    _extra.append(SchedulerCollector(AutoscalerScheduler.latest))
    _hook_ray_registry()
    _hook_ray_server()
    if port is not None:
        try:
            serve_standalone(port)
        except (m.MetricsError, OSError) as e:   # as Ray does for its own: say, go on
            logger.warning("vecsched: %s=%s: %s; this autoscaler serves vecsched's metrics "
                           "only on Ray's autoscaler metrics port", m.ENV_PORT, port, e)
    return True


def add_collector(collector) -> None:
    """Export ``collector`` too (e.g. the KubeRay side-car's), in Ray's registry and on
    the stand-alone port; registers it at once where a registry already exists."""
    if not m.available():
        return
    _extra.append(collector)
    _hook_ray_registry()
    reg = _served.get("registry")
    if reg is not None:
        m.register(reg, collector)
    for reg in list(_RayRegistries.live):
        m.register(reg, collector)


def serve_standalone(port: int, addr: Optional[str] = None) -> int:
    """Serve a registry of ours with the collectors attached so far (and any added
    later) on ``addr:port`` (``addr`` None: ``VECSCHED_METRICS_HOST``, else 127.0.0.1);
    returns the port. Once per process. A taken port raises ``MetricsPortTaken``."""
    if "port" in _served:
        return _served["port"]
    reg = m.registry()
    for c in _extra:
        m.register(reg, c)
    _served["registry"] = reg
    _served["server"], _served["port"] = m.serve(reg, port, addr)
    logger.info("vecsched: metrics served on %s:%d (%s)", m.metrics_host(addr),
                _served["port"], m.ENV_PORT)
    return _served["port"]


def _hook_ray_server() -> None:
    """Make ``prometheus_client.start_http_server`` (Ray's monitor's call for
    ``AUTOSCALER_METRIC_PORT``) build its server with ``metrics.http_server``."""
    pc = m.prometheus_client
    if getattr(pc.start_http_server, "_vecsched", False):
        return
    original = pc.start_http_server

    def start_http_server(port, addr="0.0.0.0", registry=pc.REGISTRY, *args, **kwargs):
        if args or any(v is not None for k, v in kwargs.items()
                       if k in ("certfile", "keyfile")):
            return original(port, addr, registry, *args, **kwargs)   # TLS: Ray's as it is
        try:
            server = m.http_server(registry, port, addr or "0.0.0.0")
        except m.MetricsError as e:
            logger.warning("vecsched: Ray's autoscaler metrics server (port %s, "
                           "AUTOSCALER_METRIC_PORT) cannot start: %s. Neither Ray's nor "
                           "vecsched's autoscaler metrics are served there; free the "
                           "port, or set %s to serve vecsched's elsewhere", port, e,
                           m.ENV_PORT)
            raise OSError(str(e)) from e           # Ray logs it and goes on, as before
        return server, m.start(server)

    start_http_server._vecsched = True
    start_http_server._original = original
    pc.start_http_server = start_http_server


class _RayRegistries:
    live: list = []                  # the registries Ray built in this process


def _hook_ray_registry() -> None:
    from ray.autoscaler._private import prom_metrics

    base = prom_metrics.AutoscalerPrometheusMetrics
    if getattr(base, "_vecsched", False):
        return

    class AutoscalerPrometheusMetrics(base):
        """Ray's autoscaler metrics, plus vecsched's collectors in the same registry."""
        _vecsched = True

        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            _RayRegistries.live.append(self.registry)
            for c in _extra:
                try:
                    m.register(self.registry, c)
                except Exception:
                    logger.exception("vecsched: cannot register %r in Ray's autoscaler "
                                     "metrics registry", c)

    AutoscalerPrometheusMetrics.__qualname__ = base.__qualname__
    AutoscalerPrometheusMetrics.__module__ = base.__module__
    prom_metrics.AutoscalerPrometheusMetrics = AutoscalerPrometheusMetrics


def detach() -> None:
    """Give Ray its own metrics class back, forget our collectors and stop the
    stand-alone server (``uninstall()``)."""
    from ray.autoscaler._private import prom_metrics

    cls = prom_metrics.AutoscalerPrometheusMetrics
    if getattr(cls, "_vecsched", False):
        prom_metrics.AutoscalerPrometheusMetrics = cls.__mro__[1]
    _extra.clear()
    _RayRegistries.live.clear()
    if m.available() and getattr(m.prometheus_client.start_http_server, "_vecsched", False):
        m.prometheus_client.start_http_server = \
            m.prometheus_client.start_http_server._original
    server = _served.pop("server", None)
    _served.clear()
    if server is not None:
        server.shutdown()
        server.server_close()
