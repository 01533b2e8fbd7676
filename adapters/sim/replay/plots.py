"""PNG plots of replays (matplotlib, Agg backend; no display needed).

``write_plots(results, out_dir)`` writes, for a list of ``replay.ReplayResult``:

- ``pending.png``        pending demand units over simulated time, one line per scheduler
- ``nodes_by_type.png``  running instances (ray node up) by worker group over time, one
                         panel per scheduler (the largest groups by node-hours, the rest
                         as "other"), with lines for the allocated (billed) instances and
                         for those plus the requested and queued ones
- ``tick_time.png``      the scheduler's wall time per tick over simulated time (log scale)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .trace import HEAD_TYPE

COLORS = ("tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown",
          "tab:pink", "tab:olive", "tab:cyan")
TOP_TYPES = 8


def _figure(w: float, h: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(w, h), dpi=110)
    FigureCanvasAgg(fig)
    return fig


def _minutes(r) -> np.ndarray:
    return np.asarray(r.series["t_s"], dtype=float) / 60.0


def plot_pending(results, path) -> Path:
    fig = _figure(9, 4.5)
    ax = fig.add_subplot()
    styles = ("-", "--", ":", "-.")
    for i, r in enumerate(results):
        same = next((q.scheduler for q in results[:i]
                     if np.array_equal(q.series["pending"], r.series["pending"])), None)
        label = r.scheduler + (f" (identical to {same})" if same else "")
        ax.plot(_minutes(r), r.series["pending"], color=COLORS[i % len(COLORS)],
                ls=styles[i % len(styles)], lw=1.6 if same else 1.2, label=label)
    ax.set_xlabel("simulated time (min)")
    ax.set_ylabel("pending demand (units)")
    ax.set_title("Pending demand over time")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    return Path(path)


def _top_types(results) -> list:
    hours: dict[str, float] = {}
    for r in results:
        for k, v in r.metrics["node_hours_by_type"].items():
            if k != HEAD_TYPE:                   # always one: drawn with "other"
                hours[k] = hours.get(k, 0.0) + v
    return [k for k, _ in sorted(hours.items(), key=lambda kv: (-kv[1], kv[0]))][:TOP_TYPES]


def plot_nodes(results, path) -> Path:
    """Running instances (ray node up) stacked by worker group; a line for the allocated
    (billed) instances and a dotted one adding those requested and queued."""
    top = _top_types(results)
    n = len(results)
    fig = _figure(9, 2.8 * n + 0.8)
    axes = [fig.add_subplot(n, 1, i + 1) for i in range(n)]

    def wanted(r):
        return (np.asarray(r.series["allocated"]).sum(axis=1) + r.series["requested"]
                + r.series["queued"])
    ymax = max([int(wanted(r).max()) if len(r.series["t_s"]) else 0 for r in results] + [1])
    for ax, r in zip(axes, results):
        names = list(r.type_names)
        running = np.asarray(r.series["running"])
        idx = [names.index(t) for t in top if t in names]
        other = np.ones(len(names), dtype=bool)
        other[idx] = False
        stacks = [running[:, j] for j in idx] + [running[:, other].sum(axis=1)]
        labels = [names[j] for j in idx] + ["other (incl. head)"]
        colors = [COLORS[k % len(COLORS)] for k in range(len(idx))] + ["lightgrey"]
        t = _minutes(r)
        ax.stackplot(t, *stacks, labels=labels, colors=colors, lw=0)
        ax.plot(t, np.asarray(r.series["allocated"]).sum(axis=1), color="black", lw=0.9,
                label="allocated (billed)")
        ax.plot(t, wanted(r), color="black", lw=0.8, ls=":",
                label="+ requested + queued")
        ax.set_ylim(0, ymax * 1.05)
        ax.set_ylabel("instances")
        ax.set_title(f"{r.scheduler}: running instances by worker group", fontsize=10)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("simulated time (min)")
    axes[0].legend(loc="upper left", fontsize=7, ncol=3, framealpha=0.85)
    fig.tight_layout()
    fig.savefig(path)
    return Path(path)


def plot_tick_time(results, path) -> Path:
    fig = _figure(9, 4.5)
    ax = fig.add_subplot()
    for i, r in enumerate(results):
        ms = np.maximum(np.asarray(r.series["tick_s"], dtype=float) * 1e3, 1e-3)
        ax.plot(_minutes(r), ms, color=COLORS[i % len(COLORS)], lw=0.8, alpha=0.85,
                label=f"{r.scheduler} (p50 {np.median(ms):.1f} ms)")
    ax.set_yscale("log")
    ax.set_xlabel("simulated time (min)")
    ax.set_ylabel("scheduler wall time per tick (ms)")
    ax.set_title("Scheduler time per tick")
    ax.grid(alpha=0.3, which="both")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    return Path(path)


def write_plots(results, out_dir) -> list:
    """Write the three PNGs into out_dir (created if needed); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [plot_pending(results, out / "pending.png"),
            plot_nodes(results, out / "nodes_by_type.png"),
            plot_tick_time(results, out / "tick_time.png")]
