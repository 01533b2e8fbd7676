"""Grid values a sweep cannot run are refused when the grid is read, each naming its key:
infinite numbers, booleans where a number goes, a CSV (or a worker-group table) where a
demand table goes."""
from __future__ import annotations

import pytest

from vecsched.adapters.sweep import GridError, parse, read
from vecsched.adapters.traces import bundled


def _doc(**workload):
    return {"workloads": {"w": {"trace": "openb", "pods": 50, **workload}},
            "grid": {"scheduler": ["baseline"]}}


@pytest.mark.parametrize("edit, where, words", [
    (lambda d: d["workloads"]["w"].update(arrival_scale=float("inf")),
     "workloads.w.arrival_scale", "finite"),
    (lambda d: d["workloads"]["w"].update(compress=float("nan")), "workloads.w.compress",
     "finite"),
    (lambda d: d["grid"].update(gangs=[True]), "grid.gangs", "must be a number, got True"),
    (lambda d: d["grid"].update(max_concurrent_launches=[True]), "grid.max_concurrent_launches",
     "must be a number"),
    (lambda d: d["grid"].update(idle_timeout_s=[False]), "grid.idle_timeout_s",
     "must be a number"),
    (lambda d: d.update(catalogues={"c": {"groups": "openb_nodes",
                                          "prices": {"cpu-32c-256g": float("inf")}}}),
     "catalogues.c.prices.cpu-32c-256g", "finite"),
])
def test_values_no_cell_can_run_are_refused_by_key(edit, where, words):
    doc = _doc()
    edit(doc)
    with pytest.raises(GridError) as e:
        parse(doc, "g.toml")
    assert f"g.toml {where}: " in str(e.value) and words in str(e.value), str(e.value)


def test_a_csv_as_the_trace_says_import_it_first(tmp_path):
    (tmp_path / "pods.csv").write_text("name,t0\na,0\n")
    with pytest.raises(GridError) as e:
        parse(_doc(trace="pods.csv"), "g.toml", tmp_path)
    assert str(e.value).startswith("g.toml workloads.w.trace: 'pods.csv' is not a Parquet file")
    assert "vecsched trace import pods.csv" in str(e.value)


def test_a_table_of_the_wrong_kind_is_named(tmp_path):
    with pytest.raises(GridError, match="workloads.w.trace: .* is not a demand table"):
        parse(_doc(trace=str(bundled("openb_nodes"))), "g.toml", tmp_path)
    with pytest.raises(GridError, match="workloads.w.groups: .* is not a worker-groups table"):
        parse(_doc(groups=str(bundled("openb"))), "g.toml", tmp_path)


def test_a_grid_file_with_a_byte_order_mark_reads(tmp_path):
    path = tmp_path / "g.toml"
    path.write_bytes(b"\xef\xbb\xbf[workloads.w]\ntrace = \"openb\"\npods = 50\n")
    assert len(read(path).cells) == 1
