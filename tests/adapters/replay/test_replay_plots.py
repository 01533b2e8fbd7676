"""The replay's plots: counts on whole-number axes, and the pending-time figure (the
headline metric) from each result's percentiles and pending series."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from vecsched.adapters.replay import plots  # noqa: E402


def _result(name: str, pending, p=(0.0, 40.0, 90.0)):
    t = np.arange(len(pending)) * 5.0
    running = np.ones((len(pending), 2))
    return SimpleNamespace(
        scheduler=name, type_names=["head", "cpu"],
        series={"t_s": t, "pending": np.asarray(pending), "running": running,
                "allocated": running, "requested": np.zeros(len(pending)),
                "queued": np.zeros(len(pending)), "tick_s": np.full(len(pending), 1e-3)},
        metrics={"pending_p50_s": p[0], "pending_p95_s": p[1], "pending_p99_s": p[2],
                 "node_hours_by_type": {"cpu": 1.0}})


def _whole(ax) -> bool:
    return all(float(v).is_integer() for v in ax.get_yticks())


def test_counts_are_drawn_on_whole_number_axes():
    results = [_result("engine", [0, 1, 2, 1, 0, 0]), _result("baseline", [0, 1, 1, 1, 0, 0])]
    fig = plots.figure_pending(results)
    fig.canvas.draw()
    assert _whole(fig.axes[0]), fig.axes[0].get_yticks()
    fig = plots.figure_nodes(results)
    fig.canvas.draw()
    assert all(_whole(ax) for ax in fig.axes), [ax.get_yticks() for ax in fig.axes]


def test_the_pending_time_figure_shows_percentiles_and_the_waiting_accrued(tmp_path):
    results = [_result("engine", [0, 2, 2, 1, 0], (0.0, 40.0, 90.0)),
               _result("baseline", [0, 4, 4, 2, 0], (5.0, 80.0, 150.0))]
    fig = plots.figure_pending_time(results)
    bars, accrued = fig.axes[0], fig.axes[1]
    heights = sorted(round(b.get_height()) for b in bars.patches)
    assert heights == [0, 5, 40, 80, 90, 150]
    ends = [line.get_ydata()[-1] for line in accrued.get_lines()]
    assert ends == pytest.approx([5 * 5 / 3600, 10 * 5 / 3600])    # unit-seconds / 3600
    paths = plots.write_plots(results, tmp_path)
    assert paths[-1].name == "pending_time.png" and paths[-1].stat().st_size > 1000
