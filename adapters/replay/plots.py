"""PNG plots of replays (matplotlib, Agg backend; no display needed).

``write_plots(results, out_dir)`` writes, for a list of ``replay.ReplayResult``:

- ``pending.png``        pending demand units over simulated time, one line per scheduler
- ``nodes_by_type.png``  running instances (ray node up) by worker group over time, one
                         panel per scheduler (the largest groups by node-hours, the rest
                         as "other"), with lines for the allocated (billed) instances and
                         for those plus the requested and queued ones
- ``tick_time.png``      the scheduler's wall time per tick over simulated time, one panel
                         per scheduler on a shared log scale, with a running median
- ``pending_time.png``   the headline metric: each scheduler's pending time p50 / p95 /
                         p99, and the waiting it adds up to over time (the area under the
                         pending curve, in unit-hours)

Counts (pending units, instances) are drawn on whole-number axes.

Colours keep their meaning across plots and runs (palette.py: a fixed colour per
scheduler, a colour by name per worker group); legends sit outside the axes.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .palette import OTHER, group_colors, scheduler_color, scheduler_marker
from .trace import HEAD_TYPE

TOP_TYPES = 8
MEDIAN_WINDOW = 15           # ticks in the tick-time plot's running median


def _figure(w: float, h: float):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(w, h), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _whole_numbers(ax) -> None:
    """A count's y axis: ticks at whole numbers only (no 0.5 of a unit)."""
    from matplotlib.ticker import MaxNLocator
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _minutes(r) -> np.ndarray:
    return np.asarray(r.series["t_s"], dtype=float) / 60.0


def figure_pending(results):
    """Pending demand over time, one line per scheduler in its own colour; a result
    identical to an earlier one is drawn dashed and says so."""
    fig = _figure(10, 4.5)
    ax = fig.add_subplot()
    for i, r in enumerate(results):
        same = next((q.scheduler for q in results[:i]
                     if np.array_equal(q.series["pending"], r.series["pending"])), None)
        label = r.scheduler + (f" (identical to {same})" if same else "")
        ax.plot(_minutes(r), r.series["pending"], color=scheduler_color(r.scheduler),
                ls="--" if same else "-", lw=1.8 if same else 1.3, label=label)
    ax.set_xlabel("simulated time (min)")
    ax.set_ylabel("pending demand (units)")
    _whole_numbers(ax)
    ax.set_title("Pending demand over time")
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    return fig


def _top_types(results) -> list:
    hours: dict[str, float] = {}
    for r in results:
        for k, v in r.metrics["node_hours_by_type"].items():
            if k != HEAD_TYPE:                   # always one: drawn with "other"
                hours[k] = hours.get(k, 0.0) + v
    return [k for k, _ in sorted(hours.items(), key=lambda kv: (-kv[1], kv[0]))][:TOP_TYPES]


def figure_nodes(results):
    """Running instances (ray node up) stacked by worker group; a line for the allocated
    (billed) instances and a dotted one adding those requested and queued."""
    top = _top_types(results)
    n = len(results)
    fig = _figure(11, 2.8 * n + 0.8)
    axes = [fig.add_subplot(n, 1, i + 1) for i in range(n)]

    def wanted(r):
        return (np.asarray(r.series["allocated"]).sum(axis=1) + r.series["requested"]
                + r.series["queued"])
    ymax = max([int(wanted(r).max()) if len(r.series["t_s"]) else 0 for r in results] + [1])
    palette = group_colors(top)
    for ax, r in zip(axes, results):
        names = list(r.type_names)
        running = np.asarray(r.series["running"])
        idx = [names.index(t) for t in top if t in names]
        other = np.ones(len(names), dtype=bool)
        other[idx] = False
        stacks = [running[:, j] for j in idx] + [running[:, other].sum(axis=1)]
        labels = [names[j] for j in idx] + ["other (incl. head)"]
        colors = [palette[names[j]] for j in idx] + [OTHER]
        t = _minutes(r)
        ax.stackplot(t, *stacks, labels=labels, colors=colors, lw=0)
        ax.plot(t, np.asarray(r.series["allocated"]).sum(axis=1), color="black", lw=0.9,
                label="allocated (billed)")
        ax.plot(t, wanted(r), color="black", lw=0.8, ls=":",
                label="+ requested + queued")
        ax.set_ylim(0, ymax * 1.05)
        ax.set_ylabel("instances")
        _whole_numbers(ax)
        ax.set_title(f"{r.scheduler}: running instances by worker group", fontsize=10)
        ax.grid(alpha=0.3)
    axes[-1].set_xlabel("simulated time (min)")
    fig.legend(*_legend_entries(top, palette), loc="outside right upper", fontsize=7,
               title="worker group", title_fontsize=8)
    return fig


def _legend_entries(top: list, palette: dict) -> tuple:
    """One legend for every panel: each drawn group, "other", and the two lines."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    handles = [Patch(color=palette[t]) for t in top] + [Patch(color=OTHER)]
    handles += [Line2D([], [], color="black", lw=0.9), Line2D([], [], color="black", lw=0.8,
                                                              ls=":")]
    labels = list(top) + ["other (incl. head)", "allocated (billed)",
                          "+ requested + queued"]
    return handles, labels


def _running_median(x: np.ndarray, window: int) -> np.ndarray:
    """The median of each tick's trailing ``window`` ticks (fewer at the start)."""
    if len(x) == 0:
        return x
    from numpy.lib.stride_tricks import sliding_window_view
    padded = np.concatenate([np.full(window - 1, np.nan), x])
    return np.nanmedian(sliding_window_view(padded, window), axis=1)


def figure_tick_time(results):
    """Each scheduler's wall time per tick in its own panel (shared log scale, so the
    panels compare by height): the ticks as dots, their running median as a line, and
    p50 / p95 / max in the panel's title."""
    n = len(results)
    fig = _figure(10, 1.9 * n + 0.9)
    axes = fig.subplots(n, 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, r in zip(axes, results):
        ms = np.maximum(np.asarray(r.series["tick_s"], dtype=float) * 1e3, 1e-3)
        t = _minutes(r)
        color = scheduler_color(r.scheduler)
        ax.scatter(t, ms, s=6, color=color, marker=scheduler_marker(r.scheduler),
                   alpha=0.55, lw=0)
        ax.plot(t, _running_median(ms, MEDIAN_WINDOW), color=color, lw=1.4)
        stats = (f"p50 {np.median(ms):.1f} ms, p95 {np.percentile(ms, 95):.1f} ms, "
                 f"max {ms.max():.1f} ms" if len(ms) else "no ticks")
        ax.set_title(f"{r.scheduler}: {stats}", fontsize=9, loc="left")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
        ax.set_ylabel("ms")
    axes[-1].set_xlabel("simulated time (min)")
    fig.suptitle(f"Scheduler wall time per tick (dots; line: running median of "
                 f"{MEDIAN_WINDOW} ticks)", fontsize=10)
    return fig


PERCENTILES = (50, 95, 99)


def figure_pending_time(results):
    """Pending time, the headline metric: left, each scheduler's p50 / p95 / p99 (units
    still pending at the end count their wait so far, as in the summary); right, the
    waiting accrued over simulated time (the area under each pending curve: every
    pending unit adds its tick's length), so where and when the waits build up shows."""
    fig = _figure(11, 4.2)
    left, right = fig.subplots(1, 2, width_ratios=(1, 1.6))
    width = 0.8 / max(len(results), 1)
    for i, r in enumerate(results):
        vals = [float(r.metrics.get(f"pending_p{p}_s") or 0.0) for p in PERCENTILES]
        x = np.arange(len(PERCENTILES)) + (i - (len(results) - 1) / 2) * width
        bars = left.bar(x, vals, width, color=scheduler_color(r.scheduler), label=r.scheduler)
        left.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
        t = np.asarray(r.series["t_s"], dtype=float)
        pending = np.asarray(r.series["pending"], dtype=float)
        step = np.diff(t, append=t[-1] + (t[-1] - t[-2] if t.size > 1 else 0.0)) if t.size \
            else t
        same = any(np.array_equal(q.series["pending"], r.series["pending"])
                   for q in results[:i])
        right.plot(t / 60.0, np.cumsum(pending * step) / 3600.0, lw=1.8 if same else 1.4,
                   ls="--" if same else "-", color=scheduler_color(r.scheduler),
                   label=r.scheduler)
    left.set_xticks(np.arange(len(PERCENTILES)), [f"p{p}" for p in PERCENTILES])
    left.set_ylabel("pending time (s)")
    left.set_title("Pending time per unit", fontsize=10)
    left.grid(alpha=0.3, axis="y")
    right.set_xlabel("simulated time (min)")
    right.set_ylabel("waiting so far (unit-hours)")
    right.set_title("Waiting accrued (area under the pending curve)", fontsize=10)
    right.grid(alpha=0.3)
    fig.legend(*left.get_legend_handles_labels(), loc="outside right upper", fontsize=8)
    return fig


def _save(fig, path) -> Path:
    fig.savefig(path)
    return Path(path)


def plot_pending(results, path) -> Path:
    return _save(figure_pending(results), path)


def plot_nodes(results, path) -> Path:
    return _save(figure_nodes(results), path)


def plot_tick_time(results, path) -> Path:
    return _save(figure_tick_time(results), path)


def plot_pending_time(results, path) -> Path:
    return _save(figure_pending_time(results), path)


def write_plots(results, out_dir) -> list:
    """Write the four PNGs into out_dir (created if needed); returns their paths."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return [plot_pending(results, out / "pending.png"),
            plot_nodes(results, out / "nodes_by_type.png"),
            plot_tick_time(results, out / "tick_time.png"),
            plot_pending_time(results, out / "pending_time.png")]
