"""Replay metrics that tell the truth: instances decided / requested / allocated / running
/ never launched, counted from the store and from the simulated cloud and checked
against each other; running instances per tick; cost; the launch-limit warning; progress
lines without a terminal."""
from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from vecsched.adapters.sim.lifecycle import SimNodeType
from vecsched.adapters.replay import Replay, ReplayConfig, Window, load, make, replay
from vecsched.adapters.replay.accounting import AccountingError, count_instances
from vecsched.adapters.replay.metrics import HELD_MIN_TICKS, HELD_SHARE, cost
from vecsched.adapters.traces import DEMAND_SCHEMA, bundled, coerce, read_worker_groups, validate_demand
from vecsched.engine.model.dtypes import Status as S

SMALL = Window(start=None, pods=150, arrival_scale=200.0)
from tests.kits.paths import REPO


def write_rows(rows) -> pa.Table:
    return validate_demand(coerce(rows, DEMAND_SCHEMA, "demand"))


def _identities(m: dict) -> None:
    """The report's identities, recomputed from the totals and per group."""
    for c in [m["instances"], *m["instances_by_type"].values()]:
        assert c["requested"] == (c["allocated"] + c["failed"] + c["lost"] + c["orphaned"]
                                  + c["in_flight"])
        assert c["decided"] == c["launched"] + c["never_launched"]
        assert c["never_launched"] == c["cancelled"] + c["still_queued"]
        assert c["running"] <= c["allocated"]
    for k, v in m["instances"].items():
        assert v == sum(c[k] for c in m["instances_by_type"].values()), k


def _recount(rep: Replay) -> dict:
    """The funnel recounted straight from the records and the cloud's instance list."""
    workers = [r for r in rep.store if r.instance_id != "head"]
    cloud = [c for c in rep.provider.cloud.instances.values()]
    return {"decided": len(workers),
            "requested_records": sum(1 for r in workers if r.times_ns(S.REQUESTED)),
            "allocated": len(cloud),
            "running": sum(1 for r in workers if r.times_ns(S.RAY_RUNNING)),
            "never_launched": sum(1 for r in workers if not r.times_ns(S.REQUESTED))}


# ---- the instance funnel ----------------------------------------------------------------
def test_funnel_adds_up_and_matches_the_records():
    rep = Replay(load(None, None, SMALL), make("engine"))
    m = rep.run().metrics
    _identities(m)
    inst, again = m["instances"], _recount(rep)
    assert inst["decided"] == again["decided"] == rep.metrics.launches > 0
    assert inst["allocated"] == again["allocated"] == inst["requested"]
    assert inst["running"] == again["running"] and inst["never_launched"] == 0
    assert inst["launched"] == again["requested_records"]


def test_queued_never_launched_is_counted_not_called_a_launch():
    """One launch at a time and no tail: the replay ends with decided instances that
    never reached the cloud; they are counted apart, and the cloud's count is lower."""
    cfg = ReplayConfig(max_concurrent_launches=1, tail_s=0.0)
    rep = Replay(load(None, None, SMALL), make("engine"), cfg)
    m = rep.run().metrics
    _identities(m)
    inst = m["instances"]
    assert inst["still_queued"] == rep.store.count(S.QUEUED) > 0
    assert inst["requested"] < inst["decided"] == rep.metrics.launches
    assert inst["never_launched"] == _recount(rep)["never_launched"] > 0
    # peak instances are running ones: never the queued records (the old definition)
    assert m["peak_running"] <= m["peak_allocated"] < inst["decided"]


def test_pending_nodes_cancelled_while_queued():
    """Ray's pending-node idle tracking cancels QUEUED instances nobody needs any more:
    counted as never launched (cancelled), not as launches."""
    cfg = ReplayConfig(max_concurrent_launches=1, pending_idle_timeout_s=0.0)
    m = replay(None, "engine", window=SMALL, config=cfg).metrics
    _identities(m)
    assert m["instances"]["cancelled"] > 0


def test_lost_orphaned_and_failed_launches_add_up():
    """A cloud that loses requests, runs out of stock and allocates after Ray's request
    timeout: retries, lost, orphaned, stocked-out and in-flight launches, every identity
    still holds. The baseline's availability memory never holds a group out here: it
    asks again as it did before it had one, so the cloud does stock out."""
    from vecsched.engine.tick import AvailabilityMemory, AvailabilityOptions
    rep = Replay(load(None, None, SMALL), make("baseline"),
                 ReplayConfig(launch_failure_rate=0.2, seed=2))
    rep.scheduler.memory = AvailabilityMemory(AvailabilityOptions(ttl_s=0, error_ttl_s=0))
    rep.provider.cloud.default = SimNodeType(alloc_latency_s=650.0, install_latency_s=60.0,
                                             launch_failure_rate=0.1, launch_lost_rate=0.3,
                                             capacity=6)
    m = rep.run().metrics
    _identities(m)
    inst, stats = m["instances"], rep.provider.cloud.stats
    assert inst["lost"] > 0 and inst["orphaned"] > 0 and inst["failed"] > 0
    assert stats["stockouts"] > 0 and inst["failed"] == stats["stockouts"] + stats["launch_failures"]
    assert inst["requested"] > inst["launched"]            # retries are requested again
    assert inst["requested"] == rep.provider.cloud.stats["launches"]


def test_unsent_requests_of_the_last_tick():
    """A launch decided at the last tick is REQUESTED but never reaches the cloud (the
    replay ends first): counted as unsent, and the store = cloud identity still holds."""
    demand = write_rows([{"arrival_s": t, "duration_s": 500.0, "cpu": 60.0, "memory": 2 ** 30,
                          "gpu": 0.0, "name": f"p{t}"} for t in (0, 100, 200)])
    m = replay(demand, "baseline", window=Window(), config=ReplayConfig(tail_s=0.0)).metrics
    _identities(m)
    inst = m["instances"]
    assert inst["unsent"] == 1 and inst["requested"] == inst["launched"] - 1 >= 1


def test_accounting_refuses_records_the_cloud_never_saw():
    rep = Replay(load(None, None, SMALL), make("baseline"))
    rep.run()
    cloud, store = rep.provider.cloud, rep.store
    end = int(rep.clock.ns)
    count_instances(store, cloud, rep.metrics.launches_by_type, end)     # consistent
    with pytest.raises(AccountingError, match="launches applied"):
        bad = dict(rep.metrics.launches_by_type)
        bad[next(iter(bad))] += 1
        count_instances(store, cloud, bad, end)
    rec = next(r for r in store if r.instance_id != "head")
    rec.status_history = [(s, t) for s, t in rec.status_history if s != S.ALLOCATED]
    with pytest.raises(AccountingError, match="entered ALLOCATED"):   # the cloud allocated
        count_instances(store, cloud, rep.metrics.launches_by_type, end)  # one it has no record of
    t = next(iter(cloud.by_type()))
    cloud._by_type[t]["stockout"] += 1                  # a launch call no record made
    with pytest.raises(AccountingError, match="requested"):
        count_instances(store, cloud, rep.metrics.launches_by_type, end)


# ---- running instances per tick ----------------------------------------------------------
def test_running_and_allocated_series():
    r = replay(None, "engine", window=SMALL, config=ReplayConfig(max_concurrent_launches=2))
    run, alloc = r.series["running"], r.series["allocated"]
    assert run.shape == alloc.shape == (r.metrics["ticks"], len(r.type_names))
    assert (run <= alloc).all() and run[0].sum() == alloc[0].sum() == 1     # the head
    booting = alloc.sum(axis=1) - run.sum(axis=1)      # allocated, ray not up yet
    assert booting.max() > 0
    assert r.series["queued"].max() > 0                 # queued records exist...
    assert r.metrics["peak_running"] == run.sum(axis=1).max()          # ...and do not count
    # node-hours are the allocated series integrated (sampled every tick)
    sampled = alloc.sum() * 5.0 / 3600
    assert abs(sampled - r.metrics["node_hours"]) < 0.05 * r.metrics["node_hours"]


# ---- cost ---------------------------------------------------------------------------------
def test_cost_from_prices_and_partial_prices():
    assert cost({"a": 2.0}, {"a": None}) == {"cost": None, "cost_by_type": {},
                                             "unpriced_node_hours": 0.0}
    c = cost({"a": 2.0, "b": 1.0, "head": 0.5}, {"a": 3.0, "b": None})
    assert c == {"cost": 6.0, "cost_by_type": {"a": 6.0}, "unpriced_node_hours": 1.0}


def test_replay_cost_per_scheduler_and_group(tmp_path):
    groups = read_worker_groups(bundled("openb_nodes"))
    m = replay(None, "engine", groups=groups, window=SMALL).metrics
    prices = dict(zip(groups.column("type").to_pylist(), groups.column("price").to_pylist()))
    assert m["cost"] == pytest.approx(sum(h * prices[k] for k, h in m["node_hours_by_type"].items()
                                          if k != "head"))
    assert set(m["cost_by_type"]) == set(m["node_hours_by_type"]) - {"head"}
    assert "illustrative" in m["price_source"]
    unpriced = groups.set_column(groups.column_names.index("price"), "price",
                                 pa.nulls(groups.num_rows, pa.float64()))
    m2 = replay(None, "engine", groups=unpriced, window=SMALL).metrics
    assert m2["cost"] is None and m2["price_source"] is None
    assert m2["node_hours"] == m["node_hours"]           # prices never change decisions


# ---- the launch-limit warning -----------------------------------------------------------
@pytest.mark.parametrize("cfg, scale, knob", [
    (ReplayConfig(max_concurrent_launches=1), 200.0, "max_concurrent_launches"),
    # Ray v2's own speed 0 (one launch per type and tick), against a burst of arrivals
    (ReplayConfig(upscaling_speed=0.0, max_concurrent_launches=1000), 1000.0, "upscaling_speed"),
])
def test_launch_limit_warning_names_the_knob(cfg, scale, knob):
    m = replay(None, "engine", window=Window(start=None, pods=150, arrival_scale=scale),
               config=cfg).metrics
    L = m["launch_limits"]
    assert L[f"held_ticks_{knob}"] >= max(HELD_MIN_TICKS, HELD_SHARE * L["launch_ticks"])
    assert len(L["warnings"]) == 1 and L["warnings"][0].startswith(knob)


def test_held_ticks_are_the_reconcilers_own_decisions():
    """Every tick, the records left QUEUED after the launch step are the ones LaunchStep
    says the limits held back; the summary counts exactly those ticks."""
    rep = Replay(load(None, None, SMALL), make("engine"), ReplayConfig(max_concurrent_launches=2))
    rep.begin()
    held_ticks = 0
    seen = []
    real = rep.store.reconcile

    def spy(schedule):
        tm = real(schedule)
        seen.append((tm.launch_step, rep.store.count(S.QUEUED)))
        return tm
    rep.store.reconcile = spy
    for k in range(120):
        rep.tick(k)
    for step, queued in seen:
        assert step.held == (queued if step.queued else 0)
        held_ticks += step.held_by_concurrency > 0
    assert held_ticks == rep.metrics.held_ticks["max_concurrent_launches"] > 0


def test_no_warning_when_launches_flow():
    m = replay(None, "baseline", window=SMALL).metrics
    assert m["launch_limits"]["warnings"] == []


# ---- the command: rows, legend, warnings, summary.json, progress -------------------------
def test_cli_rows_legend_and_summary(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    from vecsched.adapters.cli.main import main
    out = tmp_path / "o"
    assert main(["replay", "--pods", "150", "--scheduler", "baseline", "--max-launches", "1",
                 "--out", str(out)]) == 0
    text = capsys.readouterr().out
    for row in ("instances decided (queued)", "instances requested from the cloud",
                "instances allocated / launch failed", "instances running (ray node joined)",
                "instances queued, never launched", "cost (price x node-hours)",
                "cost / the trace's lower bound", "GPU-hours / the trace's lower bound",
                "checked, baseline: requested", "prices: illustrative"):
        assert row in text, row
    assert "warning: baseline: max_concurrent_launches (1, --max-launches)" in text
    doc = json.loads((out / "summary.json").read_text())
    m = doc["schedulers"]["baseline"]
    assert m["cost"] > 0 and m["instances"]["requested"] == m["instances"]["allocated"]
    assert doc["definitions"] and "illustrative" in doc["price_source"]
    # the trace's lower bounds and churn by stage (adapters/replay/bounds.py)
    assert 0 < m["cost_lower_bound"] <= m["cost"]
    assert 0 < m["gpu_hours_lower_bound"] <= m["gpu_hours"]
    assert m["cost_lower_bound"] <= m["lower_bound"]["cost_trace_lp"] * (1 + 1e-9)
    assert m["cancelled_after_request"] + m["cancelled_queued"] == m["cancelled_before_join"]


def test_progress_lines_flushed_without_a_terminal():
    from rich.console import Console

    from vecsched.adapters.replay.report import ProgressLines

    class Recorder(io.StringIO):
        flushed: list = []

        def flush(self):
            self.flushed.append(self.getvalue().count("\n"))
    buf = Recorder()
    console = Console(file=buf, width=120)
    assert not console.is_terminal
    now = [0.0]
    lines = ProgressLines(console, "engine", every_s=10.0, clock=lambda: now[0])
    for k in range(1, 101):
        now[0] += 0.05 if k != 37 else 12.0         # one slow tick: a line by time
        lines(k, 100)
    got = buf.getvalue().splitlines()
    ticks = [int(x.split()[2].split("/")[0]) for x in got]
    assert ticks == [1, 10, 20, 30, 37, 40, 50, 60, 70, 80, 90, 100]
    assert got[0].startswith("engine: tick 1/100 (1%)")
    # flushed right after each line (before the next one is written)
    assert sorted(set(buf.flushed)) == list(range(1, len(got) + 1))


@pytest.mark.slow
def test_replay_piped_to_a_file_shows_progress(tmp_path):
    out = tmp_path / "stdout.txt"
    with out.open("w") as f:
        code = subprocess.run(
            [sys.executable, "-m", "vecsched.adapters.cli.main", "replay", "--pods", "150", "--scheduler",
             "baseline", "--out", str(tmp_path / "o")],
            stdout=f, stderr=subprocess.PIPE, cwd=REPO, timeout=600).returncode
    text = out.read_text()
    assert code == 0, text
    progress = [x for x in text.splitlines() if x.startswith("baseline: tick ")]
    assert len(progress) >= 11 and progress[-1].endswith(" s") and "(100%)" in progress[-1]
    assert text.index(progress[0]) < text.index("Replay summary")
