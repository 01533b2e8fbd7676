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


def _named(suite, name):
    return next(w for w in suite.WORKLOADS if w.name == name)


@pytest.fixture(scope="module")
def suite():
    from bench import suite
    return suite


@pytest.fixture(scope="module")
def cells(suite):
    w = [dataclasses.replace(_named(suite, "services"), window=TINY),            # services
         dataclasses.replace(_named(suite, "openb"), window=Window(start=None, pods=80,
                                                               arrival_scale=200.0))]
    return suite.run_cells(w, [0], ["engine", "baseline", "efficient"])


def test_cells_have_exactly_the_documented_keys(suite, cells):
    assert suite.CELL_KEYS[:14] == (
        "workload", "gangs", "seed", "scheduler", "gpu_hours", "node_hours", "cost",
        "pending_p50_s", "pending_p95_s", "launches", "cancelled_before_join", "restarts",
        "tick_p50_ms", "tick_max_ms")
    assert {"never_placed", "stockouts", "limit_blocked_ticks", "cost_lower_bound",
            "gpu_hours_lower_bound", "cancelled_after_request", "cancelled_queued",
            "split"} <= set(suite.CELL_KEYS)
    # services plain; openb plain and with gangs: 3 windows x 3 schedulers
    assert [(c["workload"], c["gangs"]) for c in cells[::3]] == [
        ("services", 0.0), ("openb", 0.0), ("openb", 0.2)]
    for c in cells:
        assert tuple(c) == suite.CELL_KEYS
        assert c["launches"] > 0 and c["cost"] > 0 and c["cancelled_before_join"] >= 0
        assert c["cancelled_queued"] + c["cancelled_after_request"] == \
            c["cancelled_before_join"]
        # the bound: below every cost, one per window (the least of its runs' bounds)
        assert 0 < c["cost_lower_bound"] <= c["cost"]
        assert 0 < c["gpu_hours_lower_bound"] <= c["gpu_hours"]
        split = c["split"]["cost"]
        assert split["booting"] >= 0 and split["up while arriving"] + split["up in the tail"] > 0
        assert 0 <= split["bound share while arriving"] <= 1
    for group in (cells[0:3], cells[3:6], cells[6:9]):
        assert len({c["cost_lower_bound"] for c in group}) == 1
        assert len({c["gpu_hours_lower_bound"] for c in group}) == 1
    assert suite.bound_violations(cells) == []
    json.dumps({"cells": cells})                  # plain JSON values


def test_cells_are_deterministic(suite, cells):
    again = suite.run_cells([dataclasses.replace(_named(suite, "services"), window=TINY)], [0],
                            ["engine", "baseline", "efficient"])
    strip = lambda c: {k: v for k, v in c.items() if not k.startswith("tick")}  # noqa: E731
    assert [strip(c) for c in again] == [strip(c) for c in cells[:3]]


def test_targets_as_docs_suite_states_them(suite):
    ray = {"cost": 10.0, "gpu_hours": 10.0, "node_hours": 5.0, "pending_p50_s": 10.0,
           "pending_p95_s": 20.0}
    ffd = dict(ray, cost=9.0, gpu_hours=11.0)
    ffd["cost_lower_bound"] = 5.0                   # FFD's excess: 9 / 5 - 1 = 0.8
    ok = dict(ray, workload="services", cost=8.0, gpu_hours=10.0, node_hours=5.0,
              pending_p50_s=11.0, pending_p95_s=21.0, launches=50, cancelled_before_join=2,
              cancelled_after_request=1, cost_lower_bound=5.0)   # excess 0.6 = 0.75 x 0.8
    assert all(suite.check(ok, ray, ffd).values())
    bad = dict(ok, cost=9.5, gpu_hours=10.5, node_hours=5.1, pending_p50_s=11.1,
               pending_p95_s=21.1, cancelled_before_join=3, cancelled_after_request=2)
    assert not any(suite.check(bad, ray, ffd).values())
    # the services targets are the services family's only
    other = suite.check(dict(bad, workload="openb"), ray, ffd)
    assert other["services: GPU-h <= Ray"] is None
    assert other["services: cost <= 0.97 x min(Ray, FFD)"] is None


def test_table_and_averages(suite, cells):
    lines = suite.table(cells).splitlines()
    assert len(lines) == 2 + len(cells)
    assert all(line.count("|") == lines[0].count("|") for line in lines)
    eff = [line for line in lines if "| efficient |" in line]
    assert len(eff) == 3 and all(not line.rstrip().endswith("|  |") for line in eff)
    avg = suite.averages(cells)
    assert avg["cells"] == 3 and avg["mean_cost_over_best"] > 0
    assert avg["excess_over_ffd_excess_max"] > 0
    bound = suite.bound_table(cells).splitlines()
    assert len(bound) == 2 + 3 and all(line.count("|") == bound[0].count("|") for line in bound)


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


def test_runs_merge_into_one_suite(suite, cells, tmp_path):
    """--cells: Ray and FFD from one run, the efficient mode from another, one table."""
    pytest.importorskip("matplotlib")
    services = cells[:3]
    for name, part in (("a", services[:2]), ("b", services[2:])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "suite.json").write_text(json.dumps(
            {"cells": [dict(c) for c in part], "meta": {"seeds": [0], "wall_s": 1.0}}))
    out = tmp_path / "merged"
    assert suite.main(["--cells", f"{tmp_path / 'a' / 'suite.json'},"
                       f"{tmp_path / 'b' / 'suite.json'}", "--out", str(out)]) == 0
    doc = json.loads((out / "suite.json").read_text())
    assert [c["scheduler"] for c in doc["cells"]] == ["engine", "baseline", "efficient"]
    assert len({c["cost_lower_bound"] for c in doc["cells"]}) == 1
    assert doc["meta"]["averages"]["efficient"]["cells"] == 1
    assert (out / "suite.md").read_text().count("| services |") >= 3
