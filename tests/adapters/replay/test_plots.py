"""The replay's plots: a colour keeps its meaning across runs (by scheduler and by worker
group name, whatever the order of the results), no legend covers the data, counts are
drawn on whole-number axes, and the pending-time figure shows the headline metric."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from vecsched.adapters.replay import palette  # noqa: E402
from vecsched.adapters.replay.plots import (figure_nodes, figure_pending,  # noqa: E402
                                                figure_pending_time, figure_tick_time)
from vecsched.adapters.replay.plots import write_plots  # noqa: E402
from vecsched.adapters.replay.simulation import Replay, Window, load  # noqa: E402
from vecsched.adapters.replay.registry import make  # noqa: E402

WINDOW = Window(start=None, pods=120, arrival_scale=200.0)


@pytest.fixture(scope="module")
def results():
    trace = load(None, None, WINDOW)
    return [Replay(trace, make(name)).run() for name in ("baseline", "efficient")]


def test_known_schedulers_have_fixed_distinct_colours():
    colours = [palette.scheduler_color(n) for n in palette.SCHEDULERS]
    assert len(set(colours)) == len(colours)
    assert palette.scheduler_color("engine") == "tab:blue"
    assert palette.scheduler_color("ray") == "tab:red"
    assert palette.scheduler_color("baseline (FFD)") == palette.scheduler_color("baseline")
    # an unknown scheduler gets a spare colour chosen by its name alone: none of the known
    # ones, the same whatever was coloured before or in another run (a CRC-32 of the name;
    # "my-policy" lands on cyan, "another" on orange), its suffix in brackets ignored
    mine = palette.scheduler_color("my-policy")
    assert mine not in palette.SCHEDULERS.values()
    assert (mine, palette.scheduler_color("another")) == ("tab:cyan", "tab:orange")
    assert palette.scheduler_color("my-policy (tuned)") == mine


def test_group_colours_depend_on_names_only():
    names = ["g2-96c-384g-8gpu", "v100m16-8c-32g-1gpu", "t4-96c-384g-4gpu", "p100-8c-60g-2gpu",
             "cpu-small", "cpu-large", "a10-32c-128g-1gpu", "h800-208c-1800g-8gpu"]
    a = palette.group_colors(names)
    assert a == palette.group_colors(list(reversed(names)))
    assert len(set(a.values())) == len(names)              # distinct within a figure
    # a group keeps its colour when it is drawn without collisions in another run
    alone = palette.group_colors(["cpu-small"])["cpu-small"]
    assert alone == palette.GROUPS[palette._slot("cpu-small", len(palette.GROUPS))]


def _overlaps(fig) -> list:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [(i, j) for i, leg in enumerate(legends) for j, ax in enumerate(fig.axes)
            if leg.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))]


@pytest.mark.parametrize("figure", [figure_pending, figure_nodes, figure_tick_time,
                                    figure_pending_time])
def test_no_legend_covers_an_axes(results, figure):
    fig = figure(results)
    assert _overlaps(fig) == []


def test_the_overlap_check_sees_a_legend_inside(results):
    fig = figure_pending(results)
    fig.axes[0].legend(loc="upper left")
    assert _overlaps(fig) != []


def test_scheduler_colour_is_the_same_whatever_the_order(results):
    def colours(rs):
        fig = figure_pending(rs)
        return {line.get_label(): line.get_color() for line in fig.axes[0].get_lines()}
    assert colours(results) == colours(list(reversed(results)))


def test_tick_time_has_one_panel_per_scheduler(results):
    fig = figure_tick_time(results)
    assert [ax.get_title(loc="left").split(":")[0] for ax in fig.axes] == ["baseline",
                                                                           "efficient"]
    assert all(ax.get_yscale() == "log" for ax in fig.axes)


# ---- counts on whole numbers; the pending-time figure (stand-in results) ----------------
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
    fig = figure_pending(results)
    fig.canvas.draw()
    assert _whole(fig.axes[0]), fig.axes[0].get_yticks()
    fig = figure_nodes(results)
    fig.canvas.draw()
    assert all(_whole(ax) for ax in fig.axes), [ax.get_yticks() for ax in fig.axes]


def test_the_pending_time_figure_shows_percentiles_and_the_waiting_accrued(tmp_path):
    results = [_result("engine", [0, 2, 2, 1, 0], (0.0, 40.0, 90.0)),
               _result("baseline", [0, 4, 4, 2, 0], (5.0, 80.0, 150.0))]
    fig = figure_pending_time(results)
    bars, accrued = fig.axes[0], fig.axes[1]
    heights = sorted(round(b.get_height()) for b in bars.patches)
    assert heights == [0, 5, 40, 80, 90, 150]
    ends = [line.get_ydata()[-1] for line in accrued.get_lines()]
    assert ends == pytest.approx([5 * 5 / 3600, 10 * 5 / 3600])    # unit-seconds / 3600
    paths = write_plots(results, tmp_path)
    assert paths[-1].name == "pending_time.png" and paths[-1].stat().st_size > 1000
