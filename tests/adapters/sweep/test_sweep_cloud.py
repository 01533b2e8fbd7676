"""A sweep catalogue's cloud columns (capacity, its schedule, failure and interruption
rates, spot groups): checked by the grid, written into the catalogue's table."""
from __future__ import annotations

import pytest

from vecsched.adapters.sweep.cell import catalogue_table
from vecsched.adapters.sweep.grid import GridError, parse


def _doc(**cloud):
    cat = {"groups": "openb_nodes"}
    cat.update(cloud)
    return {"workloads": {"w": {"trace": "openb", "pods": 50}}, "catalogues": {"c": cat},
            "grid": {"catalogue": ["c"]}}


def test_catalogue_cloud_columns_reach_the_table():
    cloud = dict(capacity={"g2-96c-384g-8gpu": 10}, capacity_schedule={
        "g3-128c-768g-8gpu": "0:4,600:none"}, launch_failure_rate={"g2-96c-384g-8gpu": 0.3},
        spot=["t4-96c-384g-4gpu"], interruption_rate_per_h={"t4-96c-384g-4gpu": 0.2})
    spec = parse(_doc(**cloud), "g").cells[0].params["catalogue_spec"]
    got = {r["type"]: r for r in catalogue_table(spec).to_pylist()}
    assert got["g2-96c-384g-8gpu"]["capacity"] == 10
    assert got["g2-96c-384g-8gpu"]["launch_failure_rate"] == 0.3
    assert got["g3-128c-768g-8gpu"]["capacity_schedule"] == "0:4,600:none"
    assert got["t4-96c-384g-4gpu"]["spot"] is True
    assert got["t4-96c-384g-4gpu"]["interruption_rate_per_h"] == 0.2
    assert got["cpu-32c-256g"]["capacity"] is None and got["cpu-32c-256g"]["spot"] is None


@pytest.mark.parametrize("bad, where", [
    (dict(capacity={"g": -1}), "catalogues.c.capacity.g"),
    (dict(capacity={"g": 2.5}), "catalogues.c.capacity.g"),
    (dict(launch_failure_rate={"g": 1.5}), "catalogues.c.launch_failure_rate.g"),
    (dict(capacity_schedule={"g": "600:1,0:2"}), "catalogues.c.capacity_schedule.g"),
    (dict(spot="g"), "catalogues.c.spot"),
])
def test_catalogue_cloud_columns_are_checked(bad, where):
    with pytest.raises(GridError, match=where):
        parse(_doc(**bad), "g")


def test_an_unknown_group_in_a_cloud_column_is_named():
    spec = parse(_doc(capacity={"nope": 3}), "g").cells[0].params["catalogue_spec"]
    with pytest.raises(ValueError, match="capacity: no worker group named nope"):
        catalogue_table(spec)


def test_sweep_wide_limits_and_capacity_are_replay_options():
    doc = _doc()
    doc["sweep"] = {"limits": {"GPU": 40, "g2-96c-384g-8gpu/GPU": 16},
                    "capacity": {"g3-128c-768g-8gpu": 2}}
    cell = parse(doc, "g").cells[0]
    assert cell.params["config"]["limits"] == {"GPU": 40, "g2-96c-384g-8gpu/GPU": 16}
    doc["sweep"] = {"limits": {"GPU": -4}}
    with pytest.raises(GridError, match="--limit 'GPU=-4'"):
        parse(doc, "g")
    doc["sweep"] = {"capacity": {"g3-128c-768g-8gpu": "600:1,0:2"}}
    with pytest.raises(GridError, match="times must ascend"):
        parse(doc, "g")
    for key, value in (("limits", 128), ("limits", ["GPU=4"]), ("capacity", 3)):
        doc["sweep"] = {key: value}                  # was an AttributeError
        with pytest.raises(GridError, match=rf"\[sweep\].*{key} must be a table"):
            parse(doc, "g")


@pytest.mark.slow
def test_a_sweep_cell_under_a_gpu_limit_keeps_it():
    from vecsched.adapters.sweep.cell import run_cell
    # unlimited, this cell asks for 8 GPUs at its peak (a limit of 24 never bound: the
    # test could not fail); 4 holds demand back on most ticks
    doc = _doc(capacity={"g3-128c-768g-8gpu": 1})
    doc["sweep"] = {"limits": {"GPU": 4}}
    doc["grid"]["scheduler"] = ["efficient"]
    row = run_cell(parse(doc, "g").cells[0].params)
    assert row["limit_blocked_ticks"] > 0 and row["never_placed"] == 0
    assert 0 < row["peak_asked_GPU"] <= 4
