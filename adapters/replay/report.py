"""The report of ``vecsched replay``: the summary table, the legend under it (what the
rows mean, the checked identities), the by-group table, and progress lines for output
without a terminal. Needs rich (the ``cli`` extra)."""
from __future__ import annotations

import time


class ProgressLines:
    """Progress without a terminal (stdout to a file or a pipe, where rich's bar prints
    nothing until it ends): a line at the first tick, at every tenth of the ticks, at
    least every ``every_s`` seconds of wall time, and at the last tick; each line is
    flushed at once. ``clock`` is injectable for tests."""

    def __init__(self, console, name: str, every_s: float = 10.0, clock=None):
        self.console, self.name, self.every_s = console, name, float(every_s)
        self.clock = clock or time.perf_counter
        self.t0 = self.last = None

    def __call__(self, k: int, n: int) -> None:
        now = self.clock()
        if self.t0 is None:
            self.t0 = self.last = now
        step = max(1, n // 10)
        if k == 1 or k == n or k % step == 0 or now - self.last >= self.every_s:
            self.last = now
            self.console.print(f"{self.name}: tick {k}/{n} ({k / n:.0%}), "
                               f"{now - self.t0:.1f} s", highlight=False)
            self.console.file.flush()


def _cost(m) -> str:
    if m["cost"] is None:
        return "-"
    more = (f" + {m['unpriced_node_hours']:.1f} unpriced node-h"
            if m["unpriced_node_hours"] else "")
    return f"{m['cost']:,.1f}{more}"


def _over(m, key: str) -> str:
    """The metric as a multiple of this run's lower bound (bounds.py), and the bound."""
    b = m.get(f"{key}_lower_bound")
    if m.get(key) is None or not b:
        return "-"
    return f"{m[key] / b:.3f} x {b:,.1f}"


def _held(m) -> str:
    L = m["launch_limits"]
    return (f"{L['held_ticks_max_concurrent_launches']} / {L['held_ticks_upscaling_speed']} "
            f"of {L['launch_ticks']}")


def _drains(m) -> str:
    return f"{m.get('drained', 0)} ({m.get('drain_deadline_hit', 0)})"


def summary_table(results):
    from rich.table import Table

    def inst(key):
        return lambda m: f"{m['instances'][key]}"
    rows = [
        ("units in", lambda m: f"{m['units_in']}"),
        ("placed", lambda m: f"{m['placed']}"),
        ("never placed: still pending", lambda m: f"{m['still_pending']}"),
        ("never placed: infeasible", lambda m: f"{m['infeasible']}"),
        ("requeued (node lost) / lost CPU-h / GPU-h",
         lambda m: f"{m['requeued']} / {m.get('lost_cpu_hours', 0.0):.1f} / "
                   f"{m.get('lost_gpu_hours', 0.0):.1f}"),
        ("consolidation drains ended (deadline hit)", _drains),
        ("disrupted max at once / relaunch after consolidation",
         lambda m: f"{m.get('disrupted_max_concurrent', 0)} / "
                   f"{m.get('relaunch_after_consolidation', 0)}"),
        ("pending time p50 / p95 / p99 (s)",
         lambda m: f"{m['pending_p50_s']:.0f} / {m['pending_p95_s']:.0f} / "
                   f"{m['pending_p99_s']:.0f}"),
        ("node-hours", lambda m: f"{m['node_hours']:.1f}"),
        ("GPU-hours", lambda m: f"{m['gpu_hours']:.1f}"),
        ("GPU-hours / the trace's lower bound", lambda m: _over(m, "gpu_hours")),
        ("utilisation CPU / GPU", lambda m: f"{m['util_cpu']:.1%} / {m['util_gpu']:.1%}"),
        ("instances decided (queued)", inst("decided")),
        ("instances requested from the cloud", inst("requested")),
        ("instances allocated / launch failed",
         lambda m: f"{m['instances']['allocated']} / {m['instances']['failed']}"),
        ("instances running (ray node joined)", inst("running")),
        ("instances queued, never launched", inst("never_launched")),
        ("running peak / mean (allocated)",
         lambda m: f"{m['peak_running']} / {m['mean_running']:.0f} "
                   f"({m['peak_allocated']} / {m['mean_allocated']:.0f})"),
        ("launches held: max-launches / speed (ticks)", _held),
        ("terminations", lambda m: f"{m['terminations']}"),
        ("cancelled before join: queued / booting",
         lambda m: f"{m['cancelled_before_join_by_stage']['queued']} / "
                   f"{m['cancelled_before_join_by_stage']['booting']}"),
        ("ticks (lost)", lambda m: f"{m['ticks']} ({m['rejected_ticks']})"),
        ("tick time p50 / p99 (ms)",
         lambda m: f"{m['tick_p50_ms']:.1f} / {m['tick_p99_ms']:.1f}"),
        ("scheduler time total (s)", lambda m: f"{m['scheduler_s']:.2f}"),
        ("replay wall time (s)", lambda m: f"{m['wall_s']:.1f}" + (
            f" (Ray check {m['check_ray_s']:.1f})" if m["check_ray_s"] else "")),
    ]
    if any(r.metrics["cost"] is not None for r in results):
        rows.insert(8, ("cost (price x node-hours)", _cost))
        rows.insert(9, ("cost / the trace's lower bound", lambda m: _over(m, "cost")))
    if any(r.metrics["placement_groups"] for r in results):
        rows.insert(4, ("placement groups (infeasible at the end)",
                        lambda m: f"{m['placement_groups']} ({m['infeasible_placement_groups']})"))
    table = Table(title=f"Replay summary ({results[0].metrics['sim_end_s'] / 60:.0f} simulated "
                        f"minutes)")
    table.add_column("metric")
    for r in results:
        table.add_column(r.scheduler, justify="right")
    for label, fmt in rows:
        table.add_row(label, *(fmt(r.metrics) for r in results))
    return table


def legend(results) -> list:
    """The lines under the summary table: what the rows mean, where the prices come
    from, and each scheduler's checked instance identities."""
    from .accounting import identity_line
    from .metrics import DEFINITIONS
    lines = list(DEFINITIONS)
    source = results[0].metrics.get("price_source")
    if source and any(r.metrics["cost"] is not None for r in results):
        lines.append(f"prices: {source}")
    for r in results:
        lines.append(f"checked, {r.scheduler}: {identity_line(r.metrics['instances'])}")
    return lines


def hours_table(results, top: int = 8):
    from rich.table import Table
    hours: dict = {}
    for r in results:
        for k, v in r.metrics["node_hours_by_type"].items():
            hours[k] = hours.get(k, 0.0) + v
        for k, c in r.metrics["instances_by_type"].items():
            hours.setdefault(k, 0.0)
    decided = {k: sum(r.metrics["instances_by_type"].get(k, {}).get("decided", 0)
                      for r in results) for k in hours}
    kinds = sorted(hours, key=lambda k: (-hours[k], -decided[k], k))
    priced = any(r.metrics["cost"] is not None for r in results)
    table = Table(title="By worker group: node-hours (GPU-hours)" + (" · cost" if priced else "")
                        + " · instances allocated / decided")
    table.add_column("worker group")
    for r in results:
        table.add_column(r.scheduler, justify="right")

    def cell(m, ks):
        n = sum(m["node_hours_by_type"].get(k, 0.0) for k in ks)
        g = sum(m["gpu_hours_by_type"].get(k, 0.0) for k in ks)
        parts = [f"{n:.1f}" + (f" ({g:.1f})" if g else "")]
        if priced:
            c = [m["cost_by_type"].get(k) for k in ks if k in m["cost_by_type"]]
            parts.append(f"{sum(c):,.1f}" if c else "-")
        by = m["instances_by_type"]
        parts.append(f"{sum(by.get(k, {}).get('allocated', 0) for k in ks)}"
                     f"/{sum(by.get(k, {}).get('decided', 0) for k in ks)}")
        return " · ".join(parts)
    for k in kinds[:top]:
        table.add_row(k, *(cell(r.metrics, [k]) for r in results))
    rest = kinds[top:]
    if rest:
        table.add_row(f"{len(rest)} others", *(cell(r.metrics, rest) for r in results))
    return table
