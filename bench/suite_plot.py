"""The suite's plot (``bench/suite.py`` writes it as ``suite.png``): per workload and gang
share, each scheduler's cost, GPU-hours and pending p50 / p95 as ratios to Ray's, means
over the seeds, with the trace's lower bounds on cost and GPU-hours marked."""
from __future__ import annotations


def plot(cells, path: str, group, ratio, schedulers) -> None:
    """Per workload (and gang share), each scheduler's cost, GPU-hours and pending p50 /
    p95 as ratios to Ray's, means over the seeds: bars, a line at 1, and the trace's
    lower bounds on cost and GPU-hours as black ticks."""
    import numpy as np
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    groups = group(cells)
    keys = sorted({(w, g) for w, g, _ in groups}, key=lambda k: (k[0], k[1]))
    names = [n for n in schedulers if any(n in r for r in groups.values())]
    figures = (("cost", "cost"), ("gpu_hours", "GPU-hours"), ("pending_p50_s", "pending p50"),
               ("pending_p95_s", "pending p95"))
    fig = Figure(figsize=(11, 8), dpi=100)
    FigureCanvasAgg(fig)
    x = np.arange(len(keys))
    width = 0.8 / max(len(names), 1)
    for i, (key, label) in enumerate(figures):
        ax = fig.add_subplot(2, 2, i + 1)
        for j, name in enumerate(names):
            vals = []
            for w, g in keys:
                rs = [ratio(r[name][key], r["engine"][key]) for (w2, g2, _), r in groups.items()
                      if (w2, g2) == (w, g) and name in r and "engine" in r]
                rs = [v for v in rs if v is not None]
                vals.append(sum(rs) / len(rs) if rs else np.nan)
            ax.bar(x + (j - (len(names) - 1) / 2) * width, vals, width, label=name)
        bound = {"cost": "cost_lower_bound", "gpu_hours": "gpu_hours_lower_bound"}.get(key)
        if bound:                      # the trace's lower bound, as a share of Ray's
            lows = []
            for w, g in keys:
                rs = [ratio(r["engine"][bound], r["engine"][key])
                      for (w2, g2, _), r in groups.items() if (w2, g2) == (w, g) and "engine" in r]
                rs = [v for v in rs if v is not None]
                lows.append(sum(rs) / len(rs) if rs else np.nan)
            ax.plot(x, lows, "k_", markersize=18, mew=2, label="lower bound")
        ax.axhline(1.0, color="black", lw=0.8)
        ax.set_xticks(x, [f"{w}{' g' + format(g, 'g') if g else ''}" for w, g in keys],
                      rotation=30, ha="right", fontsize=8)
        ax.set_title(f"{label} / Ray's (mean over seeds)", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
        if i == 0:
            handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=len(labels), fontsize=8)
    fig.tight_layout(rect=(0, 0, 1, 0.96))
    fig.savefig(path)
