"""The worker-group table's optional cloud columns (capacity, its schedule, launch
failure rate, spot, interruption rate): schema, validation, the CSV import mapping."""
from __future__ import annotations

import pyarrow as pa
import pytest

from vecsched.adapters import traces as T
from vecsched.adapters.traces.csv_import import CsvImportError, import_csv
from vecsched.adapters.traces.schema import TraceError, capacity_schedule, validate_worker_groups

from tests.kits.group_tables import cloud_groups as _groups


def test_tables_without_cloud_columns_read_as_before():
    t = validate_worker_groups(_groups())
    assert t.column("capacity").null_count == 2 and t.column("spot").null_count == 2


def test_cloud_columns_round_trip_and_are_checked(tmp_path):
    t = _groups(capacity=pa.array([None, 3], pa.int64()),
                capacity_schedule=pa.array(["0:2,600:none", None]),
                launch_failure_rate=pa.array([0.3, None]), spot=pa.array([False, True]),
                interruption_rate_per_h=pa.array([None, 0.2]))
    path = tmp_path / "g.parquet"
    T.write_worker_groups(t, path)
    back = T.read_worker_groups(path)
    assert back.column("capacity").to_pylist() == [None, 3]
    assert back.column("spot").to_pylist() == [False, True]
    assert capacity_schedule(back.column("capacity_schedule")[0].as_py()) == \
        ((0.0, 2), (600.0, None))
    for bad, col in ((dict(capacity=pa.array([-1, 2], pa.int64())), "capacity"),
                     (dict(launch_failure_rate=pa.array([1.5, 0.0])), "launch_failure_rate"),
                     (dict(interruption_rate_per_h=pa.array([-0.1, 0.0])),
                      "interruption_rate_per_h"),
                     (dict(capacity_schedule=pa.array(["600:1,0:2", None])), "capacity_schedule"),
                     (dict(capacity_schedule=pa.array(["x", None])), "capacity_schedule")):
        with pytest.raises(TraceError, match=col):
            validate_worker_groups(_groups(**bad))


def test_the_import_mapping_reads_the_cloud_columns(tmp_path):
    c = tmp_path / "g.csv"
    c.write_text("t,cpu,mem,gpu,n,quota,spot,fail\na,8,32,0,4,,0,0.1\nb,8,32,1,4,2,1,\n")
    m = tmp_path / "g.toml"
    m.write_text('[units]\nmemory = "GiB"\n[groups]\ntype = "t"\ncpu = "cpu"\nmemory = "mem"\n'
                 'gpu = "gpu"\nmax_workers = "n"\ncapacity = "quota"\nspot = "spot"\n'
                 'launch_failure_rate = "fail"\ninterruption_rate_per_h = "0.25 if spot else 0"'
                 '\ncapacity_schedule = "\'0:1,300:none\'"\n')
    t = import_csv(c, m, tmp_path, kind="groups").table
    assert t.column("capacity").to_pylist() == [None, 2]
    assert t.column("spot").to_pylist() == [False, True]
    assert t.column("launch_failure_rate").to_pylist() == [0.1, None]
    assert t.column("interruption_rate_per_h").to_pylist() == [0.0, 0.25]
    assert t.column("capacity_schedule").to_pylist() == ["0:1,300:none"] * 2
    m.write_text('[groups]\naggregate = true\ncpu = "cpu"\nmemory = "mem"\ncapacity = "quota"\n')
    with pytest.raises(CsvImportError, match="groups.capacity: not with aggregate"):
        import_csv(c, m, tmp_path, kind="groups")
