"""Replay windows by time, the warm start (work alive at the window's start runs from
t = 0 on nodes the scheduler chose), the load stated in the header, the arrival scale's
default, and lost work in CPU-hours."""
from __future__ import annotations

import argparse
import subprocess
import sys

import numpy as np
import pytest

from vecsched.adapters.cli.replay import replay_window
from vecsched.adapters.replay import Replay, ReplayConfig, load, make
from vecsched.adapters.replay.simulation import DEFAULT_WINDOW
from vecsched.adapters.replay.window import Window, parse_seconds, select
from vecsched.adapters.traces import write_demand, write_worker_groups
from vecsched.engine.model.dtypes import Status as S

GIB = float(2 ** 30)


def _rows():
    """Pods every 100 s from t = 0 to 1900 s, each running 500 s (so five are alive at
    any time past the start), 4 CPUs; pod 3 runs 5000 s."""
    return [{"arrival_s": 100 * i, "duration_s": 5000.0 if i == 3 else 500.0, "cpu": 4.0,
             "memory": 4 * GIB, "gpu": 0.0, "name": f"p{i}"} for i in range(20)]


@pytest.fixture
def files(tmp_path):
    d, g = tmp_path / "d.parquet", tmp_path / "g.parquet"
    write_demand(_rows(), d)
    write_worker_groups([{"type": "cpu8", "cpu": 8.0, "memory": 32 * GIB, "gpu": 0.0,
                          "min_workers": 0, "max_workers": 20, "price": 1.0}], g)
    return d, g


@pytest.mark.parametrize("text, seconds", [("3600", 3600.0), ("90s", 90.0), ("30m", 1800.0),
                                           ("2h", 7200.0), ("1.5d", 129600.0), (12, 12.0)])
def test_parse_seconds(text, seconds):
    assert parse_seconds(text, "--from") == seconds


@pytest.mark.parametrize("text", ["2x", "-5", "h", "", "nan"])
def test_parse_seconds_names_the_option(text):
    with pytest.raises(ValueError, match="--duration"):
        parse_seconds(text, "--duration")


@pytest.mark.parametrize("kwargs, words", [
    ({"t_from": 10.0, "t_to": 5.0}, "window.t_to"),
    ({"t_from": 10.0, "pods": 5}, "not both"),
    ({"t_from": -1.0}, "window.t_from"),
    ({"warm_start": "yes"}, "window.warm_start"),
])
def test_bad_time_windows_name_the_field(kwargs, words):
    with pytest.raises(ValueError, match=words):
        Window(**kwargs)


def test_select_by_time_and_the_pods_alive_at_its_start():
    arrival = np.array([0, 100, 200, 300, 400, 500, 600], dtype=float)
    duration = np.array([50, 500, 120, 10, 1000, 5, 5], dtype=float)
    sel = select(arrival, duration, Window(t_from=350.0, t_to=600.0))
    assert list(sel.rows) == [4, 5]
    assert list(sel.warm) == [1]                 # 100 + 500 > 350; 200 + 120 and 300 + 10 not
    assert select(arrival, duration, Window(t_from=350.0, warm_start=False)).warm.size == 0
    with pytest.raises(ValueError, match="holds no arrival"):
        select(arrival, duration, Window(t_from=601.0))


def test_a_window_of_the_last_hours():
    arrival = np.array([0, 100, 200, 300, 400], dtype=float)
    duration = np.full(5, 150.0)
    sel = select(arrival, duration, Window(last_s=150.0))
    assert list(sel.rows) == [3, 4] and list(sel.warm) == [2] and sel.origin == 250.0
    assert list(select(arrival, duration, Window(last_s=1000.0)).rows) == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError, match="window.last_s"):
        Window(last_s=10.0, t_from=5.0)


def test_a_time_window_replays_from_its_own_start_with_the_warm_pods_at_zero(files):
    d, g = files
    t = load(d, g, Window(t_from=1000.0, t_to=1500.0))
    assert t.n_warm == 5                          # p3 (long) and p6..p9
    warm = t.warm
    assert sorted(t.rows[warm]) == [3, 6, 7, 8, 9]
    assert np.all(t.arrival_s[warm] == 0.0)
    # remaining runs: p3 300 + 5000 - 1000, p6 600 + 500 - 1000 ...
    rest = dict(zip(t.rows[warm], t.duration_s[warm]))
    assert rest[3] == 4300.0 and rest[6] == 100.0 and rest[9] == 400.0
    assert list(t.rows[~warm]) == [10, 11, 12, 13, 14]
    assert list(t.arrival_s[~warm]) == [0.0, 100.0, 200.0, 300.0, 400.0]
    assert "5 pods, arrivals in [1,000 s, 1,500 s)" in t.scaling
    assert "warm start: 5 pods alive" in t.scaling and "arrival rate x1 (as recorded)" in t.scaling
    assert t.load_info == {"pods": 5, "warm_start_pods": 5, "from_s": 1000.0, "to_s": 1500.0,
                           "span_s": 400.0, "arrival_scale": 1.0, "compress": 1.0, "by": "time"}


def _replay(d, g, window, scheduler="baseline"):
    rep = Replay(load(d, g, window), make(scheduler), ReplayConfig(tail_s=600.0))
    return rep, rep.run()


def test_warm_start_places_the_alive_pods_at_zero_on_nodes_up_at_once(files):
    d, g = files
    rep, r = _replay(d, g, Window(t_from=1000.0, t_to=1500.0))
    m, c = r.metrics, rep.cluster
    assert m["warm_start"]["units"] == 5 and m["warm_start"]["placed"] == 5
    warm_units = np.flatnonzero(rep.trace.warm)
    assert m["requeued"] == 0 and np.all(c.placed_at[warm_units] == 0.0)
    # 5 pods of 4 CPUs: two on the head (8 CPUs), three on two 8-CPU nodes up at t = 0
    assert m["warm_start"]["nodes"] == 2 == len(rep.warm.ids)
    for iid in rep.warm.ids:
        rec = rep.store[iid]
        assert rec.entered_ns(S.RAY_RUNNING) == 0 and not rec.times_ns(S.REQUESTED)
    assert r.series["running"][0].sum() == 1 + 2          # head + the warm nodes at tick 0
    # the warm nodes are not launches; their node-hours bill from t = 0
    assert m["instances"]["decided"] == rep.metrics.launches
    assert m["node_hours_by_type"]["cpu8"] >= 1000 / 3600    # p3 holds one past the end
    assert m["units_in"] == 10 and m["placed"] == 10
    # pending times are the window's pods only (5 placements, not 10)
    assert len(c.waits) == 5


def test_without_warm_start_the_window_starts_empty(files):
    d, g = files
    rep, r = _replay(d, g, Window(t_from=1000.0, t_to=1500.0, warm_start=False))
    assert rep.trace.n_warm == 0 and not rep.warm.ids
    assert r.series["running"][0].sum() == 1                # the head only
    assert r.metrics["units_in"] == 5 and r.metrics["warm_start"]["units"] == 0


def test_warm_start_through_the_engine(files):
    pytest.importorskip("ray.autoscaler.v2.scheduler", reason="the engine runs through ray")
    d, g = files
    rep, r = _replay(d, g, Window(t_from=1000.0, t_to=1500.0), "engine")
    w = r.metrics["warm_start"]
    assert w["placed"] == 5 and w["nodes"] == 2 and w["nodes_by_type"] == {"cpu8": 2}
    again = _replay(d, g, Window(t_from=1000.0, t_to=1500.0), "engine")[1]
    assert again.metrics["warm_start"] == w and again.metrics["placed"] == r.metrics["placed"]


def test_lost_work_is_counted_in_cpu_hours_too(tmp_path):
    """Every pod asks 2 CPUs and 1 GPU, so the work lost to preemptions is exactly
    twice as many CPU-hours as GPU-hours."""
    d, g = tmp_path / "d.parquet", tmp_path / "g.parquet"
    write_demand([{"arrival_s": 30 * i, "duration_s": 3000.0, "cpu": 2.0, "memory": GIB,
                   "gpu": 1.0, "name": f"p{i}"} for i in range(30)], d)
    write_worker_groups([{"type": "gpu4", "cpu": 16.0, "memory": 64 * GIB, "gpu": 4.0,
                          "min_workers": 0, "max_workers": 30}], g)
    m = Replay(load(d, g), make("baseline"),
               ReplayConfig(preemption_rate_per_h=3.0, seed=5)).run().metrics
    assert m["requeued"] > 0 and m["lost_gpu_hours"] > 0
    assert m["lost_cpu_hours"] == pytest.approx(2 * m["lost_gpu_hours"])


def _args(**kw):
    base = dict(trace=None, t_from=None, t_to=None, duration=None, pods=None, start=None,
                compress=1.0, arrival_scale=None, warm_start=None)
    base.update(kw)
    return argparse.Namespace(**base)


def test_the_arrival_scale_is_200_only_for_the_bundled_demo():
    demo = replay_window(_args(), DEFAULT_WINDOW)
    assert demo.arrival_scale == 200.0 and demo.pods == 2000 and "bundled demo" in demo.note
    assert replay_window(_args(trace="openb", arrival_scale=3.0), DEFAULT_WINDOW).note == ""
    own = replay_window(_args(trace="my.parquet"), DEFAULT_WINDOW)     # its last 6 hours
    assert own.arrival_scale == 1.0 and own.last_s == 6 * 3600 and own.by_time
    timed = replay_window(_args(t_from="2h", duration="30m"), DEFAULT_WINDOW)
    assert (timed.t_from, timed.t_to, timed.arrival_scale) == (7200.0, 9000.0, 1.0)
    back = replay_window(_args(t_to="1h", duration="20m"), DEFAULT_WINDOW)
    assert (back.t_from, back.t_to) == (2400.0, 3600.0)
    rows = replay_window(_args(trace="my.parquet", pods=50), DEFAULT_WINDOW)
    assert rows.arrival_scale == 1.0 and rows.pods == 50 and rows.start is None
    demo_rows = replay_window(_args(pods=50), DEFAULT_WINDOW)     # the demo, smaller
    assert demo_rows.arrival_scale == 200.0 and demo_rows.note and demo_rows.start is None
    demo_from = replay_window(_args(start=100), DEFAULT_WINDOW)
    assert (demo_from.start, demo_from.pods) == (100, 2000)
    assert replay_window(_args(t_from="12d"), DEFAULT_WINDOW).arrival_scale == 1.0
    with pytest.raises(ValueError, match="exclude each other"):
        replay_window(_args(t_from="1h", pods=5), DEFAULT_WINDOW)
    with pytest.raises(ValueError, match="two of --from, --to and --duration"):
        replay_window(_args(t_from="1h", t_to="2h", duration="5m"), DEFAULT_WINDOW)


@pytest.mark.slow
def test_the_command_states_the_load_it_replays(files, tmp_path):
    d, g = files
    out = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "replay", str(d),
                          "--groups", str(g), "--from", "1000", "--to", "25m",
                          "--scheduler", "baseline", "--tail", "60", "--out",
                          str(tmp_path / "o")], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr + out.stdout
    text = " ".join(out.stdout.split())
    assert ("load replayed: 5 pods, arrivals in [1,000 s, 1,500 s) of the trace, spanning "
            "6.7 min of trace time; arrival rate x1 (as recorded); warm start: 5 pods alive at "
            "the window's start run from t = 0") in text
    assert "warm start, baseline: 5 of 5 pods placed at t = 0 on 2 nodes" in text
    assert "lost CPU-h" in text
    whole = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "replay",
                            str(d), "--groups", str(g), "--scheduler", "baseline", "--tail",
                            "60", "--out", str(tmp_path / "w")], capture_output=True, text=True,
                           timeout=300)
    assert whole.returncode == 0, whole.stderr + whole.stdout
    text = " ".join(whole.stdout.split())
    assert ("load replayed: 20 pods, arrivals in [0 s, the end) of the trace (its last 6.0 h of "
            "31.7 min: no window given; --from / --to / --duration choose one)") in text
    bad = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "replay", str(d),
                          "--from", "1h", "--pods", "3", "--scheduler", "baseline"],
                         capture_output=True, text=True, timeout=300)
    assert bad.returncode == 2 and "exclude each other" in bad.stdout + bad.stderr


def test_the_gang_overlay_leaves_the_warm_start_alone(files):
    from vecsched.adapters.replay.placement_groups import GangOverlay
    d, g = files
    t = load(d, g, Window(t_from=1000.0, t_to=1500.0), GangOverlay(1.0, seed=0))
    assert t.gangs.G > 0
    grouped = t.gangs.unit_gang >= 0
    assert not (grouped & t.warm).any()
    assert np.all(t.arrival_s[t.warm] == 0.0) and t.n_warm == 5
