"""bench/suite.py on tiny windows: the cells carry exactly the keys docs/suite.md
names, the targets are checked as docs/suite.md states them, the table has a row per cell, and
the cells are deterministic (the suite's own runs are long; these are not)."""
from __future__ import annotations

import dataclasses
import json

import pytest

from vecsched.adapters.replay import Window

pytest.importorskip("ray.autoscaler.v2.scheduler", reason="the engine runs through Ray's protobuf")

TINY = Window(start=0, pods=60, arrival_scale=4.0)


@pytest.fixture(scope="module")
def suite():
    from bench import suite
    return suite


@pytest.fixture(scope="module")
def cells(suite):
    w = [dataclasses.replace(suite.WORKLOADS[-1], window=TINY),            # services
         dataclasses.replace(suite.WORKLOADS[0], window=Window(start=None, pods=80,
                                                               arrival_scale=200.0))]
    return suite.run_cells(w, [0], ["engine", "baseline", "efficient"])


def test_cells_have_exactly_the_documented_keys(suite, cells):
    assert suite.CELL_KEYS[:14] == (
        "workload", "gangs", "seed", "scheduler", "gpu_hours", "node_hours", "cost",
        "pending_p50_s", "pending_p95_s", "launches", "cancelled_before_join", "restarts",
        "tick_p50_ms", "tick_max_ms")
    assert {"never_placed", "stockouts", "limit_blocked_ticks"} <= set(suite.CELL_KEYS)
    # services plain; openb plain and with gangs: 3 windows x 3 schedulers
    assert [(c["workload"], c["gangs"]) for c in cells[::3]] == [
        ("services", 0.0), ("openb", 0.0), ("openb", 0.2)]
    for c in cells:
        assert tuple(c) == suite.CELL_KEYS
        assert c["launches"] > 0 and c["cost"] > 0 and c["cancelled_before_join"] >= 0
    json.dumps({"cells": cells})                  # plain JSON values


def test_cells_are_deterministic(suite, cells):
    again = suite.run_cells([dataclasses.replace(suite.WORKLOADS[-1], window=TINY)], [0],
                            ["engine", "baseline", "efficient"])
    strip = lambda c: {k: v for k, v in c.items() if not k.startswith("tick")}  # noqa: E731
    assert [strip(c) for c in again] == [strip(c) for c in cells[:3]]


def test_targets_as_docs_suite_states_them(suite):
    ray = {"cost": 10.0, "gpu_hours": 10.0, "node_hours": 5.0, "pending_p50_s": 10.0,
           "pending_p95_s": 20.0}
    ffd = dict(ray, cost=9.0, gpu_hours=11.0)
    ok = dict(ray, cost=9.0, gpu_hours=10.0, node_hours=5.0, pending_p50_s=11.0,
              pending_p95_s=21.0, launches=20, cancelled_before_join=1)
    assert all(suite.check(ok, ray, ffd).values())
    bad = dict(ok, cost=9.5, gpu_hours=10.5, node_hours=5.1, pending_p50_s=11.1,
               pending_p95_s=21.1, cancelled_before_join=2)
    assert not any(suite.check(bad, ray, ffd).values())


def test_table_and_averages(suite, cells):
    lines = suite.table(cells).splitlines()
    assert len(lines) == 2 + len(cells)
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    eff = [line for line in lines if "| efficient |" in line]
    assert len(eff) == 3 and all(not line.rstrip().endswith("|  |") for line in eff)
    avg = suite.averages(cells)
    assert avg["cells"] == 3 and avg["mean_cost_over_best"] > 0


def test_unknown_names_are_refused(suite, tmp_path):
    with pytest.raises(SystemExit, match="--workloads: unknown nope"):
        suite.main(["--workloads", "nope", "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--seeds"):
        suite.main(["--seeds", "a", "--out", str(tmp_path)])


def test_cloud_workloads_on_a_tiny_window(suite):
    """A stock-out and a GPU-limit workload on 120 pods: the cells carry the cloud keys,
    the capped groups stock out under Ray's decisions, and the limited cells keep the
    limit (docs/capacity.md's targets are checked by ``cloud_targets``)."""
    by = {w.name: w for w in suite.CLOUD_WORKLOADS}
    small = Window(start=None, pods=120, arrival_scale=200.0)
    ws = [dataclasses.replace(by["stockout-openb"], window=small,
                              cloud=(("capacity", (("g3-128c-768g-8gpu", 1),
                                                   ("g2-96c-384g-8gpu", 1))),)),
          dataclasses.replace(by["limit70-openb"], window=small)]
    cells = suite.run_cells(ws, [0], ["engine", "baseline", "efficient"])
    assert [c["workload"] for c in cells] == ["stockout-openb"] * 3 + ["limit70-openb"] * 3
    for c in cells:
        assert tuple(c) == suite.CELL_KEYS
    rows = suite.cloud_targets(cells)
    limited = [r for r in rows if r[3] == "peak GPU <= limit"]
    assert len(limited) == 3 and all(ok for *_, ok, _ in limited), limited
    assert cells[0]["stockouts"] > 0                # Ray's decisions ask for the capped type
