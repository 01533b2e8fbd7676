"""vecsched sweep: the grid file, the cells' keys, catalogues, the Pareto front, and a
small grid run on a local Ray, then resumed without recomputing a cell."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from vecsched.adapters.sweep import (GridError, catalogue_table, front, parse, read,
                                         read_rows, run_cell, run_sweep)
from vecsched.adapters.traces import write_demand

from tests.kits.paths import REPO

GIB = float(2 ** 30)
SMALL = REPO / "data" / "examples" / "sweep-small.toml"


def _doc(**grid):
    return {"sweep": {"tail_s": 120},
            "workloads": {"tail": {"trace": "openb", "pods": 120, "arrival_scale": 200}},
            "catalogues": {"gpu-x2": {"groups": "openb_nodes", "gpu_price_factor": 2.0}},
            "grid": grid or {"scheduler": ["baseline"], "seed": [0, 1]}}


def test_the_shipped_small_grid_is_2x2x2():
    g = read(SMALL)
    assert len(g.cells) == 8 and len({c.key for c in g.cells}) == 8
    assert {c.params["scheduler"] for c in g.cells} == {"engine", "efficient"}
    assert {c.params["idle_timeout_s"] for c in g.cells} == {60, 600}
    assert {c.params["catalogue"] for c in g.cells} == {"list-prices", "gpu-x2"}


@pytest.mark.parametrize("edit, where", [
    (lambda d: d["grid"].update(colour=["red"]), "grid.colour"),
    (lambda d: d["grid"].update(scheduler=["greedy"]), "unknown scheduler 'greedy'"),
    (lambda d: d["grid"].update(workload=["nope"]), "unknown workload 'nope'"),
    (lambda d: d["grid"].update(catalogue=["nope"]), "unknown catalogue 'nope'"),
    (lambda d: d["grid"].update(idle_timeout_s=[-1]), "idle_timeout_s"),
    (lambda d: d["grid"].update(seed=[0, 0]), "lists a value twice"),
    (lambda d: d["grid"].update(seed=[]), "non-empty list"),
    (lambda d: d["workloads"]["tail"].update({"from": "1d"}), "not both"),
    (lambda d: d["workloads"]["tail"].update(duration="soon"), "duration"),
    (lambda d: d["workloads"]["tail"].update(trace="missing.parquet"), "workloads.tail.trace"),
    (lambda d: d["catalogues"]["gpu-x2"].update(prices=[1]), "catalogues.gpu-x2.prices"),
    (lambda d: d["sweep"].update(seed=3), "sweep.seed"),
    (lambda d: d["sweep"].update(tick_s=0), "tick_s"),
    (lambda d: d.update(extra={}), "[extra]"),
])
def test_grid_errors_name_the_key(edit, where):
    doc = _doc()
    edit(doc)
    with pytest.raises(GridError) as e:
        parse(doc, "g.toml")
    assert where in str(e.value)


def test_cell_keys_are_stable_and_follow_the_inputs_not_their_paths(tmp_path):
    rows = [{"arrival_s": 10 * i, "duration_s": 50.0, "cpu": 1.0, "memory": GIB, "gpu": 0.0,
             "name": f"p{i}"} for i in range(5)]
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    write_demand(rows, a / "d.parquet")
    shutil.copy(a / "d.parquet", b / "d.parquet")
    doc = {"workloads": {"w": {"trace": "d.parquet"}}, "grid": {"seed": [0, 1]}}
    ka = [c.key for c in parse(doc, "g", a).cells]
    assert ka == [c.key for c in parse(doc, "g", a).cells]             # stable
    assert ka == [c.key for c in parse(doc, "g", b).cells]             # same bytes elsewhere
    assert ka[0] != ka[1]                                              # the seed counts
    rows[0]["cpu"] = 2.0
    write_demand(rows, b / "d.parquet")
    assert [c.key for c in parse(doc, "g", b).cells] != ka            # new data, new cells


def test_catalogue_reprices_and_filters_the_groups():
    spec = parse(_doc(), "g").cells[0].params["workload_spec"]
    assert spec["trace"]["bundled"] == "openb"
    cat = {"groups": {"bundled": "openb_nodes"}, "price_factor": 1.5, "gpu_price_factor": 2.0,
           "prices": {"cpu-32c-256g": 0.5}, "max_workers": {"g2-96c-384g-8gpu": 3},
           "only": ["cpu-32c-256g", "g2-96c-384g-8gpu", "t4-104c-512g-2gpu"]}
    from vecsched.adapters.traces import bundled, read_worker_groups
    base = {r["type"]: r for r in read_worker_groups(bundled("openb_nodes")).to_pylist()}
    got = {r["type"]: r for r in catalogue_table(cat).to_pylist()}
    assert sorted(got) == cat["only"]
    assert got["cpu-32c-256g"]["price"] == 0.5
    assert got["g2-96c-384g-8gpu"]["price"] == pytest.approx(
        base["g2-96c-384g-8gpu"]["price"] * 3.0)
    assert got["g2-96c-384g-8gpu"]["max_workers"] == 3
    with pytest.raises(ValueError, match="no worker group named nope"):
        catalogue_table({**cat, "only": ["nope"]})


def test_front_keeps_the_non_dominated_cells():
    rows = [{"key": k, "cost": c, "pending_p95_s": p}
            for k, c, p in (("a", 10, 50), ("b", 20, 40), ("c", 20, 60), ("d", 5, 90),
                            ("e", 10, 50), ("f", None, 1))]
    assert [r["key"] for r in front(rows, "cost")] == ["d", "a", "e", "b"]


def test_a_cell_runs_the_same_twice():
    cell = parse(_doc(), "g").cells[0]
    one, two = run_cell(cell.params), run_cell(cell.params)
    clock = ("wall_s", "scheduler_s", "check_ray_s", "tick_p50_ms", "tick_p99_ms", "tick_max_ms")
    assert {k: v for k, v in one.items() if k not in clock} == \
        {k: v for k, v in two.items() if k not in clock}
    assert one["units_in"] == 120 and one["key"] == cell.key
    assert {"lost_cpu_hours", "lost_gpu_hours", "pending_p95_s", "cost", "gpu_hours"} <= set(one)


@pytest.mark.cluster
def test_a_small_grid_on_a_local_ray_then_resumed_recomputes_nothing(tmp_path):
    """Four cells (baseline and engine x two seeds, 120 pods each) as Ray tasks; a second
    run finds them all in results.parquet and runs none; a wider grid runs only the
    new cells."""
    pytest.importorskip("ray")
    doc = _doc(scheduler=["baseline", "engine"], seed=[0, 1])
    grid = parse(doc, "g")
    lines: list[str] = []
    first = run_sweep(grid, tmp_path, num_cpus=2, echo=lines.append)
    assert (first.run, first.skipped, first.failed) == (4, 0, [])
    assert sum(line.startswith("[") for line in lines) == 4          # one line per cell
    rows = read_rows(tmp_path)
    assert [r["key"] for r in rows] == [c.key for c in grid.cells]   # grid order
    assert {r["scheduler"] for r in rows} == {"baseline", "engine"}
    direct = run_cell(grid.cells[0].params)
    assert rows[0]["pending_p95_s"] == direct["pending_p95_s"]
    assert rows[0]["node_hours"] == direct["node_hours"]
    before = (tmp_path / "results.parquet").read_bytes()
    again = run_sweep(grid, tmp_path, num_cpus=2, echo=lines.append)
    assert (again.run, again.skipped) == (0, 4)
    assert (tmp_path / "results.parquet").read_bytes() == before
    wider = parse(_doc(scheduler=["baseline", "engine"], seed=[0, 1, 2]), "g")
    more = run_sweep(wider, tmp_path, num_cpus=2, echo=lines.append)
    assert (more.run, more.skipped) == (2, 4)
    assert pq.read_table(str(tmp_path / "results.parquet")).num_rows == 6
    # the command, resumed: nothing to run, so no Ray; its last line says so
    grid_file = tmp_path / "g.toml"
    grid_file.write_text(
        '[sweep]\ntail_s = 120\n[workloads.tail]\ntrace = "openb"\npods = 120\n'
        'arrival_scale = 200\n[catalogues.gpu-x2]\ngroups = "openb_nodes"\n'
        'gpu_price_factor = 2.0\n[grid]\nscheduler = ["baseline", "engine"]\nseed = [0, 1]\n')
    out = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "sweep",
                          str(grid_file), "--out", str(tmp_path)], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "cells run 0, skipped 4"
    assert "non-dominated cells" in out.stdout and (tmp_path / "pareto.png").is_file()


def test_cli_bad_grid_is_one_error_line(tmp_path):
    g = tmp_path / "g.toml"
    g.write_text('[workloads.w]\ntrace = "openb"\n[grid]\nscheduler = ["greedy"]\n')
    out = subprocess.run([sys.executable, "-m", "vecsched.adapters.cli.main", "sweep", str(g),
                          "--out", str(tmp_path / "o")], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: g.toml grid.scheduler: unknown")


@pytest.mark.cluster
def test_the_cells_run_on_an_existing_cluster_by_its_address(tmp_path):
    """--address: a running two-node Ray cluster (a head with no CPU), joined rather than
    started; both cells run on its worker nodes and match the cells run here."""
    ray = pytest.importorskip("ray")
    from ray.cluster_utils import Cluster as RayCluster
    grid = parse(_doc(scheduler=["baseline"], seed=[0, 1]), "g")
    cluster = RayCluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        cluster.add_node(num_cpus=1)
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        lines: list[str] = []
        address = cluster.address
        out = run_sweep(grid, tmp_path, address=address, echo=lines.append)
    finally:
        ray.shutdown()
        cluster.shutdown()
    assert (out.run, out.skipped, out.failed) == (2, 0, [])
    assert any(f"running on Ray ({address}, 2 CPUs)" in line for line in lines), lines
    rows = read_rows(tmp_path)
    for cell, got in zip(grid.cells, rows):
        want = run_cell(cell.params)
        assert got["key"] == cell.key
        assert (got["pending_p95_s"], got["node_hours"], got["placed"]) == \
            (want["pending_p95_s"], want["node_hours"], want["placed"])


# The efficient mode's workload suite (tests/adapters/replay/test_replay_quality.py's
# WINDOWS) as a grid: docs/sweep.md shows the same file.
SUITE = """
[workloads.openb-300-openb]
trace = "openb"
groups = "openb_nodes"
pods = 300
arrival_scale = 200
[workloads.openb-300-pai2020]
trace = "openb"
groups = "pai2020_nodes"
pods = 300
arrival_scale = 200
[workloads.openb-300-spot2026]
trace = "openb"
groups = "spot2026_nodes"
pods = 300
arrival_scale = 200
[workloads."openb-3000+500"]
trace = "openb"
start = 3000
pods = 500
arrival_scale = 200
[workloads."openb-1000+500-x100"]
trace = "openb"
start = 1000
pods = 500
arrival_scale = 100
[workloads.gpuspec33-500]
trace = "openb_gpuspec33"
pods = 500
arrival_scale = 200
[workloads.openb-500-gangs]
trace = "openb"
pods = 500
arrival_scale = 200
gangs = 0.2
[grid]
scheduler = ["engine", "baseline", "efficient"]
"""


def test_the_efficient_workload_suite_is_a_grid(tmp_path):
    import tomllib
    from vecsched.adapters.replay import GangOverlay, Window, replay
    grid = parse(tomllib.loads(SUITE), "suite.toml")
    assert len(grid.cells) == 21
    gangs = {c.params["workload"]: c.params["gangs"] for c in grid.cells}
    assert gangs["openb-500-gangs"] == 0.2 and gangs["openb-300-openb"] == 0.0
    cell = next(c for c in grid.cells if c.params["workload"] == "openb-300-pai2020"
                and c.params["scheduler"] == "baseline")
    got = run_cell(cell.params)
    want = replay("openb", "baseline", groups="pai2020_nodes",
                  window=Window(start=None, pods=300, arrival_scale=200.0),
                  gangs=GangOverlay(0.0, seed=0)).metrics
    for k in ("placed", "pending_p95_s", "node_hours", "gpu_hours", "cost"):
        assert got[k] == want[k], k
    with pytest.raises(GridError, match="per workload or as an axis"):
        parse(tomllib.loads(SUITE.replace('scheduler = ["engine"', 'gangs = [0.0]\n'
                                          'scheduler = ["engine"')), "suite.toml")
