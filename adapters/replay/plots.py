"""PNG plots of replays (matplotlib, Agg backend; no display needed).

``write_plots(results, out_dir)`` writes, for a list of ``replay.ReplayResult``:

- ``pending.png``        pending demand units over simulated time, one line per scheduler
- ``nodes_by_type.png``  live instances by worker group over time, one panel per
                         scheduler (the largest groups by node-hours, the rest as "other")
- ``tick_time.png``      the scheduler's wall time per tick over simulated time (log scale)
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

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
            hours[k] = hours.get(k, 0.0) + v
    return [k for k, _ in sorted(hours.items(), key=lambda kv: (-kv[1], kv[0]))][:TOP_TYPES]


def plot_nodes(results, path) -> Path:
    top = _top_types(results)
    n = len(results)
    fig = _figure(9, 2.8 * n + 0.8)
    axes = [fig.add_subplot(n, 1, i + 1) for i in range(n)]
    ymax = max([int(r.series["nodes"].sum(axis=1).max()) if len(r.series["nodes"]) else 0
                for r in results] + [1])
    for ax, r in zip(axes, results):
        names = list(r.type_names)
        nodes = np.asarray(r.series["nodes"])
        idx = [names.index(t) for t in top if t in names]
        other = np.ones(len(names), dtype=bool)
        other[idx] = False
        stacks = [nodes[:, j] for j in idx] + [nodes[:, other].sum(axis=1)]
        labels = [names[j] for j in idx] + ["other (incl. head)"]
        colors = [COLORS[k % len(COLORS)] for k in range(len(idx))] + ["lightgrey"]
        ax.stackplot(_minutes(r), *stacks, labels=labels, colors=colors, lw=0)
        ax.set_ylim(0, ymax * 1.05)
        ax.set_ylabel("instances")
        ax.set_title(f"{r.scheduler}: live instances by worker group", fontsize=10)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("simulated time (min)")
    axes[0].legend(loc="upper left", fontsize=7, ncol=3)
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
