"""Trace replay: conservation of demand, determinism, engine == Ray tick for tick,
bad input, the baseline, the plots and the `vecsched replay` command."""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vecsched.adapters.replay import DEFAULT_WINDOW, Replay, ReplayConfig, Window, load, make, replay
from vecsched.adapters.traces import TraceError, bundled, write_demand

# The last 150 openb pods, 200x arrivals: ~30 instances, ~170 ticks, well under a second.
SMALL = Window(start=None, pods=150, arrival_scale=200.0)
GIB = 2.0 ** 30


def _ray():
    pytest.importorskip("ray.autoscaler.v2.scheduler", reason="ray is not installed")


def _demand_rows(n=40, **over):
    rows = []
    for i in range(n):
        row = {"arrival_s": 10 * i, "duration_s": 120.0 + i, "cpu": 4.0, "memory": 8 * GIB,
               "gpu": 0.5 if i % 2 else 0.0, "gpu_spec": None, "group_id": None, "qos": "LS",
               "name": f"pod-{i}"}
        row.update({k: (v(i) if callable(v) else v) for k, v in over.items()})
        rows.append(row)
    return rows


def _strip(metrics: dict) -> dict:
    """Metrics without the wall-clock ones."""
    return {k: v for k, v in metrics.items()
            if k not in ("wall_s", "scheduler_s", "check_ray_s") and not k.startswith("tick_")}


def _conserved(m: dict) -> None:
    assert m["units_in"] == m["placed"] + m["still_pending"] + m["infeasible"]
    assert m["never_placed"] == m["still_pending"] + m["infeasible"]


# ---- conservation and determinism -------------------------------------------------------
def test_conservation_with_preemptions_and_failures():
    cfg = ReplayConfig(preemption_rate_per_h=6.0, launch_failure_rate=0.2, seed=3)
    r = replay(None, "engine", window=SMALL, config=cfg)
    m = r.metrics
    _conserved(m)
    assert m["units_in"] == 150
    assert m["requeued"] > 0                     # preempted nodes gave their units back
    assert m["provider"]["preemptions"] > 0 and m["provider"]["launch_failures"] > 0
    assert m["placed"] > 0 and m["instances"]["decided"] > 0
    inst = m["instances"]                        # the cloud failed some launch calls
    assert inst["failed"] == m["provider"]["launch_failures"] > 0
    assert inst["requested"] == inst["allocated"] + inst["failed"] + inst["in_flight"]
    series = r.series
    assert len(series["t_s"]) == m["ticks"] == len(series["pending"]) == len(series["running"])


@pytest.mark.slow
def test_same_seed_same_replay():
    cfg = ReplayConfig(latency_jitter=0.5, preemption_rate_per_h=2.0, seed=11)
    a = replay(None, "engine", window=SMALL, config=cfg, record_decisions=True)
    b = replay(None, "engine", window=SMALL, config=cfg, record_decisions=True)
    assert _strip(a.metrics) == _strip(b.metrics)
    assert a.decisions == b.decisions
    np.testing.assert_array_equal(a.series["running"], b.series["running"])
    np.testing.assert_array_equal(a.series["allocated"], b.series["allocated"])
    np.testing.assert_array_equal(a.series["pending"], b.series["pending"])
    c = replay(None, "engine", window=SMALL, config=ReplayConfig(latency_jitter=0.5,
                                                                 preemption_rate_per_h=2.0,
                                                                 seed=12))
    assert _strip(c.metrics) != _strip(a.metrics)  # the seed drives the simulated cloud


def test_instance_ids_are_deterministic():
    trace = load(None, None, SMALL)
    rep = Replay(trace, make("baseline"))
    rep.run()
    ids = [rec.instance_id for rec in rep.store]
    assert ids[0] == "head"
    assert ids[1:] == [f"i-{k:06d}" for k in range(len(ids) - 1)]


# ---- engine against Ray -----------------------------------------------------------------
def test_engine_and_ray_decide_identically_tick_for_tick():
    _ray()
    cfg = ReplayConfig(latency_jitter=0.3, preemption_rate_per_h=1.0, seed=5)
    eng = replay(None, "engine", window=SMALL, config=cfg, record_decisions=True)
    ray = replay(None, "ray", window=SMALL, config=cfg, record_decisions=True)
    assert len(eng.decisions) == len(ray.decisions) == eng.metrics["ticks"]
    for k, (a, b) in enumerate(zip(eng.decisions, ray.decisions)):
        assert a == b, f"tick {k}: engine {a} ray {b}"
    assert _strip(eng.metrics) == _strip(ray.metrics)
    assert any(d[0] for d in eng.decisions) and any(d[1] for d in eng.decisions)


@pytest.mark.slow
def test_check_ray_counts_no_differing_ticks():
    _ray()
    r = replay(None, "engine", window=SMALL, check_ray=True)
    assert r.check["ticks"] == r.metrics["ticks"]
    assert r.check["differing"] == 0, r.check["examples"]


@pytest.mark.slow
def test_check_ray_counts_a_differing_tick():
    _ray()
    trace = load(None, None, SMALL)
    sched = make("engine", check_ray=True)
    real = sched.decide

    def off_by_one(state):                       # a deliberately wrong engine
        d = real(state)
        if d.launches:
            d.launches = [(t, c + 1) for t, c in d.launches]
        return d
    sched.decide = off_by_one
    r = Replay(trace, sched).run()
    assert r.check["differing"] > 0 and r.check["examples"]


# ---- the baseline -----------------------------------------------------------------------
def test_baseline_runs():
    r = replay(None, "baseline", window=SMALL)
    _conserved(r.metrics)
    assert r.scheduler == "baseline" and r.metrics["instances"]["decided"] > 0
    assert r.metrics["never_placed"] == 0


# ---- bad input --------------------------------------------------------------------------
def test_missing_column_is_a_trace_error(tmp_path):
    table = pa.table({"arrival_s": pa.array([0, 1], pa.int64()),
                      "cpu": pa.array([1.0, 1.0])})
    pq.write_table(table, tmp_path / "bad.parquet")
    with pytest.raises(TraceError, match="missing column") as e:
        load(tmp_path / "bad.parquet")
    assert e.value.table == "demand"


def test_negative_duration_is_a_trace_error(tmp_path):
    good = write_demand(_demand_rows(5), tmp_path / "ok.parquet")
    dur = good.column("duration_s").to_pylist()
    dur[3] = -5.0
    bad = good.set_column(1, "duration_s", pa.array(dur))
    pq.write_table(bad, tmp_path / "neg.parquet")
    with pytest.raises(TraceError) as e:
        load(tmp_path / "neg.parquet")
    named = ("duration_s", 3)        # the column and row of the negative value
    assert (e.value.column, e.value.row) == named
    with pytest.raises(TraceError, match="duration_s"):
        load(bad)                                # a Table is validated the same way


def test_unknown_gpu_model_is_counted_infeasible(tmp_path):
    path = tmp_path / "h100.parquet"
    write_demand(_demand_rows(30, gpu=lambda i: 1.0 if i < 6 else 0.0,
                              gpu_spec=lambda i: "H100" if i < 6 else None), path)
    trace = load(path)
    assert any("H100 (6 rows)" in w for w in trace.warnings)
    r = replay(path, "engine", window=Window())
    m = r.metrics
    _conserved(m)
    assert m["infeasible"] == 6 and m["still_pending"] == 0 and m["placed"] == 24


@pytest.mark.parametrize("scheduler", ["engine", "baseline", "ray"])
def test_demand_larger_than_every_node_type(tmp_path, scheduler):
    if scheduler == "ray":
        _ray()
    path = tmp_path / "huge.parquet"
    write_demand(_demand_rows(20, cpu=lambda i: 4096.0 if i % 5 == 0 else 2.0), path)
    trace = load(path)
    assert trace.oversized == 4 and any("larger than every node type" in w
                                        for w in trace.warnings)
    m = replay(path, scheduler, window=Window()).metrics
    _conserved(m)
    assert m["infeasible"] == 4 and m["placed"] == 16 and m["oversized_units"] == 4


def test_reserved_head_type_and_bad_groups(tmp_path):
    groups = pq.read_table(bundled("openb_nodes"))
    names = groups.column("type").to_pylist()
    names[0] = "head"
    pq.write_table(groups.set_column(0, "type", pa.array(names)), tmp_path / "g.parquet")
    with pytest.raises(TraceError, match="reserved"):
        load(None, tmp_path / "g.parquet", SMALL)
    pq.write_table(groups.drop_columns(["max_workers"]), tmp_path / "g2.parquet")
    with pytest.raises(TraceError, match="max_workers"):
        load(None, tmp_path / "g2.parquet", SMALL)
    with pytest.raises(FileNotFoundError):
        load("no-such-trace.parquet")


@pytest.mark.parametrize("kwargs, field", [
    ({"pods": 0}, "window.pods"), ({"start": -1}, "window.start"),
    ({"compress": 0.0}, "window.compress"), ({"arrival_scale": math.nan}, "window.arrival_scale"),
])
def test_bad_window_names_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        Window(**kwargs)


def test_bad_config_and_scheduler_name_the_field():
    with pytest.raises(ValueError, match="tick_s"):
        ReplayConfig(tick_s=0)
    with pytest.raises(ValueError, match="launch_failure_rate"):
        ReplayConfig(launch_failure_rate=2.0)
    with pytest.raises(ValueError, match="scheduler"):
        make("greedy")
    with pytest.raises(ValueError, match="window.start"):
        load(None, None, Window(start=10 ** 6))


def test_trace_gangs_are_replayed_as_placement_groups(tmp_path):
    """Rows sharing a group_id form one PACK group: its members arrive with the first
    one and last as long as the longest, and the group is placed entire."""
    path = tmp_path / "gang.parquet"
    write_demand(_demand_rows(10, group_id=lambda i: "g1" if i in (1, 4, 6) else None), path)
    trace = load(path)
    g = trace.gangs
    assert trace.n_units == 10 and g.G == 1 and g.strategy == ("PACK",) and g.source == ("trace",)
    m = g.members(0)
    assert len(m) == 3
    assert set(trace.arrival_s[m]) == {10.0} and set(trace.duration_s[m]) == {126.0}
    assert np.all(np.diff(trace.arrival_s) >= 0)           # re-sorted by the new arrivals
    r = replay(path, "baseline", window=Window())
    _conserved(r.metrics)
    assert r.metrics["placement_groups"] == 1 and r.metrics["placed"] == 10


# ---- scaling ----------------------------------------------------------------------------
def test_window_and_scaling():
    base = load(None, None, Window(start=100, pods=50))
    fast = load(None, None, Window(start=100, pods=50, compress=4.0, arrival_scale=5.0))
    np.testing.assert_allclose(fast.arrival_s, base.arrival_s / 20.0)
    np.testing.assert_allclose(fast.duration_s, base.duration_s / 4.0)
    assert base.n_units == 50 and base.arrival_s[0] == 0.0
    assert "compressed 4x" in fast.scaling and "arrival rate x5" in fast.scaling
    last = load(None, None, Window(start=None, pods=30))
    assert last.rows[-1] == 8151 and last.n_units == 30
    assert DEFAULT_WINDOW.start is None and DEFAULT_WINDOW.pods == 2000


# ---- plots and the command --------------------------------------------------------------
@pytest.mark.slow
def test_plots_are_written(tmp_path):
    pytest.importorskip("matplotlib")
    from vecsched.adapters.replay.plots import write_plots
    results = [replay(None, s, window=SMALL) for s in ("engine", "baseline")]
    paths = write_plots(results, tmp_path / "plots")
    assert [p.name for p in paths] == ["pending.png", "nodes_by_type.png", "tick_time.png"]
    for p in paths:
        assert p.is_file() and p.stat().st_size > 1000
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.slow
def test_cli_replay(tmp_path, capsys):
    _ray()
    pytest.importorskip("matplotlib")
    from vecsched.adapters.cli.main import main
    out = tmp_path / "out"
    code = main(["replay", "--pods", "150", "--out", str(out), "--seed", "1"])
    text = capsys.readouterr().out
    assert code == 0
    assert "Replay summary" in text and "arrival rate x200" in text
    assert "identical on every tick" in text
    for name in ("pending.png", "nodes_by_type.png", "tick_time.png", "summary.json"):
        assert (out / name).stat().st_size > 0


def test_cli_replay_bad_trace(tmp_path, capsys):
    from vecsched.adapters.cli.main import main
    table = pa.table({"arrival_s": pa.array([0], pa.int64())})
    pq.write_table(table, tmp_path / "bad.parquet")
    code = main(["replay", str(tmp_path / "bad.parquet"), "--scheduler", "engine",
                 "--out", str(tmp_path / "o")])
    assert code == 2
    assert "missing column" in capsys.readouterr().err


# ---- the scheduler interface ------------------------------------------------------------
def _busy_state():
    """A mid-replay state with pending demand and running workers."""
    trace = load(None, None, SMALL)
    rep = Replay(trace, make("engine"))
    rep.begin()
    for k in range(200):
        rep.tick(k)
        state = rep.view.state(k * rep.cfg.tick_s)
        if state.requests and sum(n.total is not None for n in state.nodes) > 5:
            return state
    raise AssertionError("no busy tick")


def test_engine_and_ray_get_the_same_inputs():
    _ray()
    from vecsched.adapters.ray.codec import decode
    from vecsched.adapters.replay.schedulers import _problem, ray_request
    state = _busy_state()
    a, b = _problem(state), decode(ray_request(state)).problem
    cols = [b.resources.index(c) for c in a.resources]
    assert sorted(a.resources) == sorted(b.resources)
    assert a.type_names == b.type_names
    np.testing.assert_array_equal(a.type_cap, b.type_cap[:, cols])
    np.testing.assert_array_equal(a.node_source, b.node_source)
    np.testing.assert_array_equal(a.node_status, b.node_status)
    np.testing.assert_array_equal(a.node_total, b.node_total[:, cols])
    np.testing.assert_array_equal(a.node_free, b.node_free[:, cols])
    np.testing.assert_array_equal(a.node_idle_ms, b.node_idle_ms)
    np.testing.assert_array_equal(a.shape_qty, b.shape_qty[:, cols])
    np.testing.assert_array_equal(a.shape_count, b.shape_count)
    assert a.idle_timeout_s == b.idle_timeout_s == 60.0


def test_a_decision_the_instance_store_rejects_loses_the_tick():
    """A scheduler naming a REQUESTED instance (Ray's quirk Q13): the instance manager
    rejects the batch, the tick is lost and counted, and the replay goes on."""
    from vecsched.adapters.replay.schedulers import Decision, EngineSched
    from vecsched.engine.model.dtypes import Cause, Status

    class TerminatesRequested(EngineSched):
        name = "q13"

        def decide(self, state):
            d = super().decide(state)
            bad = [i for i, n in zip(state.ids, state.nodes) if n.status == Status.REQUESTED]
            if bad:
                d = Decision(d.launches, d.terminations + [(bad[0], Cause.MAX_NUM_NODES)],
                             d.infeasible)
            return d
    r = Replay(load(None, None, SMALL), TerminatesRequested()).run()
    m = r.metrics
    _conserved(m)
    assert m["rejected_ticks"] > 0 and "REQUESTED" in m["rejections"][0]


def test_a_scheduler_error_loses_the_tick_not_the_replay():
    from vecsched.adapters.replay.schedulers import BaselineSched

    class Flaky(BaselineSched):
        name = "flaky"
        calls = 0

        def decide(self, state):
            self.calls += 1
            if self.calls % 7 == 0:
                raise RuntimeError("boom")
            return super().decide(state)
    m = Replay(load(None, None, SMALL), Flaky()).run().metrics
    _conserved(m)
    assert m["rejected_ticks"] == m["ticks"] // 7 and "RuntimeError: boom" in m["rejections"][0]
