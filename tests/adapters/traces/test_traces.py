"""vecsched.adapters.traces: schema, validation, Parquet round trips, the bundled data, and the
mapping of trace rows to engine inputs."""
from __future__ import annotations

import math
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vecsched.adapters import traces as T
from vecsched.engine.model.build.builder import RequestSpec, build_problem

from tests.kits.paths import REPO
# The raw CSVs (not shipped): next to a checkout, or wherever VECSCHED_RAW_TRACES points.
RAW = Path(os.environ.get("VECSCHED_RAW_TRACES", REPO.parent / "shared" / "traces" / "raw"))


def demand_rows():
    return [
        {"arrival_s": 0, "duration_s": 10.0, "cpu": 1.5, "memory": 2.0 * 2**30, "gpu": 0.5,
         "gpu_spec": "T4", "qos": "LS", "name": "p0"},
        {"arrival_s": 5, "duration_s": 1.0, "cpu": 8, "memory": 0, "gpu": 8,
         "gpu_spec": "V100M16|V100M32|V100M32", "group_id": "g1", "name": "p1"},
        {"arrival_s": 7, "duration_s": 3.5, "cpu": 0.25, "memory": 1.0, "gpu": 0,
         "name": "p2"},
    ]


def group_rows():
    return [
        {"type": "t4-96c-384g-4gpu", "cpu": 96, "memory": 384 * 2**30, "gpu": 4,
         "gpu_model": "T4", "labels": {"accelerator": "T4", "zone": "a"},
         "min_workers": 1, "max_workers": 17, "price": 3.2},
        {"type": "cpu-32c-128g", "cpu": 32, "memory": 128 * 2**30, "gpu": 0,
         "min_workers": 0, "max_workers": 5},
    ]


# ---- round trips -----------------------------------------------------------------------
def test_demand_round_trip_from_rows(tmp_path):
    written = T.write_demand(demand_rows(), tmp_path / "d.parquet")
    back = T.read_demand(tmp_path / "d.parquet")
    assert back.equals(written)
    assert back.column_names == T.DEMAND_SCHEMA.names
    rows = back.to_pylist()
    assert rows[0]["gpu_spec"] == "T4" and rows[1]["group_id"] == "g1"
    assert rows[2]["gpu_spec"] is None and rows[2]["qos"] is None
    assert back.schema.field("arrival_s").type == pa.int64()
    assert back.schema.metadata[b"vecsched.table"] == b"demand"


def test_float_arrival_and_column_dict(tmp_path):
    cols = {k: [r.get(k) for r in demand_rows()] for k in T.DEMAND_SCHEMA.names}
    cols["arrival_s"] = [0.0, 0.5, 2.25]
    T.write_demand(cols, tmp_path / "d.parquet")
    back = T.read_demand(tmp_path / "d.parquet")
    assert back.schema.field("arrival_s").type == pa.float64()
    assert back.column("arrival_s").to_pylist() == [0.0, 0.5, 2.25]


def test_worker_groups_round_trip_and_determinism(tmp_path):
    table = T.write_worker_groups(group_rows(), tmp_path / "a.parquet")
    T.write_worker_groups(table, tmp_path / "b.parquet")
    assert (tmp_path / "a.parquet").read_bytes() == (tmp_path / "b.parquet").read_bytes()
    back = T.read_worker_groups(tmp_path / "a.parquet")
    assert back.equals(table)
    assert dict(back.column("labels")[0].as_py()) == {"accelerator": "T4", "zone": "a"}
    assert back.column("price").to_pylist() == [3.2, None]


# ---- validation ------------------------------------------------------------------------
def demand_table(**change):
    t = T.validate_demand(T.coerce(demand_rows(), T.DEMAND_SCHEMA, "demand"))
    for name, values in change.items():
        i = t.column_names.index(name)
        t = t.set_column(i, name, pa.array(values, t.schema.field(name).type))
    return t


def groups_table(**change):
    t = T.validate_worker_groups(T.coerce(group_rows(), T.WORKER_GROUP_SCHEMA, "worker_groups"))
    for name, values in change.items():
        i = t.column_names.index(name)
        t = t.set_column(i, name, pa.array(values, t.schema.field(name).type))
    return t


def raises(fn, table, column, row=None):
    with pytest.raises(T.TraceError) as e:
        fn(table)
    assert e.value.column == column and column in str(e.value)
    assert isinstance(e.value, ValueError)
    if row is not None:
        assert e.value.row == row and f"row {row}" in str(e.value)
    return e.value


def test_missing_column():
    raises(T.validate_demand, demand_table().drop_columns(["duration_s"]), "duration_s")
    raises(T.validate_worker_groups, groups_table().drop_columns(["max_workers"]), "max_workers")


def test_unknown_column_and_wrong_type():
    t = demand_table()
    raises(T.validate_demand, t.append_column("durration_s", pa.array([1.0] * 3)), "durration_s")
    t = t.set_column(2, "cpu", pa.array(["1", "2", "3"]))
    raises(T.validate_demand, t, "cpu")
    with pytest.raises(T.TraceError, match="cpu"):
        T.coerce([dict(demand_rows()[0], cpu="lots")], T.DEMAND_SCHEMA, "demand")


def test_nan_negative_and_null():
    raises(T.validate_demand, demand_table(cpu=[1.0, math.nan, 1.0]), "cpu", row=1)
    raises(T.validate_demand, demand_table(memory=[1.0, 1.0, -4.0]), "memory", row=2)
    raises(T.validate_demand, demand_table(name=["a", None, "c"]), "name", row=1)
    raises(T.validate_worker_groups, groups_table(price=[None, -1.0]), "price", row=1)


def test_bad_durations():
    raises(T.validate_demand, demand_table(duration_s=[1.0, -2.0, 1.0]), "duration_s", row=1)
    raises(T.validate_demand, demand_table(duration_s=[0.0, 1.0, 1.0]), "duration_s", row=0)


def test_fractional_gpu_above_one():
    raises(T.validate_demand, demand_table(gpu=[0.5, 1.5, 0.0]), "gpu", row=1)


def test_duplicate_type_and_min_over_max():
    e = raises(T.validate_worker_groups, groups_table(type=["x", "x"]), "type", row=1)
    assert "'x'" in str(e)
    raises(T.validate_worker_groups, groups_table(min_workers=[20, 0]), "min_workers", row=0)


def test_writer_refuses_bad_input(tmp_path):
    with pytest.raises(T.TraceError, match="min_workers"):
        T.write_worker_groups([dict(group_rows()[1], min_workers=9)], tmp_path / "x.parquet")
    assert not (tmp_path / "x.parquet").exists()
    with pytest.raises(T.TraceError, match="labels"):
        T.write_worker_groups([dict(group_rows()[0], labels={"accelerator": "A10"})],
                              tmp_path / "x.parquet")


# ---- mapping ---------------------------------------------------------------------------
def test_demand_shape():
    rows = demand_rows()
    assert T.demand_shape(rows[0]) == {"CPU": 1.5, "memory": 2.0 * 2**30, "GPU": 0.5,
                                       "accelerator_type:T4": 0.001}
    assert T.demand_shape(rows[1]) == {"CPU": 8.0, "GPU": 8.0}          # OR-list dropped
    assert T.demand_shape(rows[1], or_lists="first")["accelerator_type:V100M16"] == 0.001
    assert T.demand_shape(rows[2]) == {"CPU": 0.25, "memory": 1.0}
    assert T.gpu_spec_options(rows[1]["gpu_spec"]) == ("V100M16", "V100M32")
    assert T.demand_selector(rows[1]) == {"accelerator": ("V100M16", "V100M32")}
    assert T.demand_selector(rows[2]) == {}
    assert T.or_list_count(demand_table()) == 1


def test_worker_group_specs():
    a, b = T.worker_group_specs(groups_table())
    assert a.resources == {"CPU": 96.0, "memory": 384.0 * 2**30, "GPU": 4.0,
                           "accelerator_type:T4": 1.0}
    assert a.labels == {"accelerator": "T4", "zone": "a"}
    assert (a.min_workers, a.max_workers, a.priority) == (1, 17, 0)
    assert b.resources == {"CPU": 32.0, "memory": 128.0 * 2**30} and b.labels == {}


# ---- bundled data ----------------------------------------------------------------------
@pytest.mark.parametrize("name,types,nodes", [
    ("openb_nodes", 27, 1523), ("pai2020_nodes", 7, 1897), ("spot2026_nodes", 10, 4278)])
def test_bundled_worker_groups(name, types, nodes):
    t = T.read_worker_groups(T.bundled(name))
    if types is not None:
        assert t.num_rows == types
    assert sum(t.column("max_workers").to_pylist()) == nodes
    assert set(t.column("min_workers").to_pylist()) == {0}


@pytest.mark.parametrize("name", ["openb", "openb_gpuspec33"])
def test_bundled_demand(name):
    t = T.read_demand(T.bundled(name))
    assert t.num_rows == 8152
    assert t.column("group_id").null_count == 8152
    spec = t.column("gpu_spec")
    if name == "openb":
        assert spec.null_count == 8152 and T.or_list_count(t) == 0
    else:
        assert 8152 - spec.null_count == 2388 and T.or_list_count(t) == 378
    assert T.bundled_trace(name)[0] == T.bundled(name)


@pytest.mark.parametrize("groups", ["openb_nodes", "pai2020_nodes", "spot2026_nodes"])
def test_bundled_maps_to_engine(groups):
    specs = T.worker_group_specs(T.read_worker_groups(T.bundled(groups)))
    demand = T.read_demand(T.bundled("openb_gpuspec33")).to_pylist()
    shapes = {}
    for row in demand[:: 97] + [r for r in demand if r["gpu"] > 1][:5]:
        key = tuple(sorted(T.demand_shape(row).items()))
        shapes[key] = shapes.get(key, 0) + 1
    requests = [RequestSpec(resources=dict(k), count=c) for k, c in shapes.items()]
    problem = build_problem(specs, [], requests)
    assert len(problem.type_names) == len(specs)
    assert int(problem.type_max.sum()) == sum(s.max_workers for s in specs)


def test_bundled_names():
    assert T.DEFAULT_TRACE in T.TRACES
    assert T.bundled("openb_pods") == T.bundled("openb")
    with pytest.raises(KeyError):
        T.bundled("philly")


@pytest.mark.skipif(not RAW.is_dir(), reason="raw traces not available")
def test_build_script_reproduces_bundled(tmp_path):
    from vecsched.adapters.traces import build as mod
    assert mod.main(["--raw", str(RAW), "--out", str(tmp_path)]) == 0
    for fname in T.BUNDLED.values():
        fresh, shipped = pq.read_table(tmp_path / fname), pq.read_table(T.DATA_DIR / fname)
        assert fresh.equals(shipped, check_metadata=True), fname


# ---- schema version 2 ------------------------------------------------------------------
def v2_rows():
    rows = [dict(r) for r in demand_rows()]
    rows[0].update(app="chat", max_per_node=2, resources={"rdma": 0.5})
    rows[2].update(app="chat", max_per_node=2)
    rows[1].update(app="train", max_per_node=1)            # a capped placement group (g1)
    return rows


def v2_table(**change):
    t = T.validate_demand(T.coerce(v2_rows(), T.DEMAND_SCHEMA, "demand"))
    for name, values in change.items():
        i = t.column_names.index(name)
        t = t.set_column(i, name, pa.array(values, t.schema.field(name).type))
    return t


def test_v1_tables_read_as_v2_and_write_as_v1(tmp_path):
    v1 = demand_table().drop_columns(list(T.V2_COLUMNS["demand"]))
    back = T.validate_demand(v1)
    assert back.column_names == T.DEMAND_SCHEMA.names
    assert back.column("max_per_node").null_count == 3
    T.write_demand(v1, tmp_path / "v1.parquet")
    schema = pq.read_schema(tmp_path / "v1.parquet")
    assert schema.metadata[b"vecsched.schema_version"] == b"1"
    assert not set(T.V2_COLUMNS["demand"]) & set(schema.names)
    T.write_demand(v2_rows(), tmp_path / "v2.parquet")
    schema = pq.read_schema(tmp_path / "v2.parquet")
    assert schema.metadata[b"vecsched.schema_version"] == b"2"
    assert schema.field("resources").type == T.RESOURCES_TYPE
    rows = T.read_demand(tmp_path / "v2.parquet").to_pylist()
    assert rows[0]["resources"] == [("rdma", 0.5)] and rows[1]["max_per_node"] == 1
    g = groups_table().drop_columns(["resources"])
    T.write_worker_groups(g, tmp_path / "g.parquet")
    assert pq.read_schema(tmp_path / "g.parquet").metadata[b"vecsched.schema_version"] == b"1"


def test_v2_resources_are_checked():
    res = [[("rdma", 0.5)], None, [("CPU", 1.0)]]
    raises(T.validate_demand, v2_table(resources=res), "resources", row=2)
    raises(T.validate_demand, v2_table(resources=[None, [("node:x", 1.0)], None]),
           "resources", row=1)
    raises(T.validate_demand, v2_table(resources=[[("disk", -1.0)], None, None]),
           "resources", row=0)
    raises(T.validate_demand, v2_table(resources=[[("disk", 1e-5)], None, None]),
           "resources", row=0)
    raises(T.validate_demand, v2_table(resources=[[("disk", math.nan)], None, None]),
           "resources", row=0)
    g = groups_table(resources=[[("accelerator_type:T4", 1.0)], None])
    raises(T.validate_worker_groups, g, "resources", row=0)
    ok = groups_table(resources=[[("rdma", 4.0)], None])
    assert T.worker_group_specs(ok)[0].resources["rdma"] == 4.0


def test_v2_caps_are_checked():
    raises(T.validate_demand, v2_table(max_per_node=[0, 1, 2]), "max_per_node", row=0)
    raises(T.validate_demand, v2_table(max_per_node=[101, 1, 101]), "max_per_node", row=0)
    raises(T.validate_demand, v2_table(app=[None, "train", "chat"]), "app", row=0)
    # An app's cap may change over time (a redeploy): each request asks 1 / its own
    # cap of the app's one per-node slot, as Ray Serve's old and new replicas do.
    varying = v2_table(max_per_node=[2, 1, 4])
    assert T.validate_demand(varying).column("max_per_node").to_pylist() == [2, 1, 4]
    rows = varying.to_pylist()
    slot = T.cap_slot("chat")
    assert T.demand_shape(rows[0])[slot] == 0.5 and T.demand_shape(rows[2])[slot] == 0.25
    e = raises(T.validate_demand, v2_table(max_per_node=[2, 2, 2], app=["chat", "chat", "chat"]),
               "max_per_node", row=1)
    assert "STRICT_SPREAD" in str(e)                 # a cap above 1 inside a group
    rows = v2_rows() + [dict(demand_rows()[1], name="p3", app="other", max_per_node=1)]
    with pytest.raises(T.TraceError, match="mixes apps"):
        T.validate_demand(T.coerce(rows, T.DEMAND_SCHEMA, "demand"))
    assert T.validate_demand(v2_table()).num_rows == 3


# ---- the synthetic services family -------------------------------------------------------
def test_services_family_is_its_generator_seeded():
    """The bundled services files are exactly what ``synth_services`` generates (seed 0),
    each workload is what its spec says (groups, GPUs per replica, the daily cycle)."""
    import numpy as np
    from vecsched.adapters.traces import build, synth_services as S
    for spec, pods, nodes in build.SERVICES_FILES:
        assert S.demand(S.SEED, spec).equals(T.read_demand(T.DATA_DIR / pods)), pods
        if nodes:
            assert S.worker_groups(spec).equals(T.read_worker_groups(T.DATA_DIR / nodes)), nodes
        assert S.demand(1, spec).num_rows != S.demand(S.SEED, spec).num_rows or \
            not S.demand(1, spec).equals(S.demand(S.SEED, spec))
    mix = T.read_demand(T.bundled("services_mixgpu"))
    gpus = np.array(mix.column("gpu").to_pylist())
    assert set(gpus[gpus > 0]) == {1.0, 2.0}
    groups = T.read_worker_groups(T.bundled("services_mixgpu_nodes")).to_pylist()
    assert sorted(g["gpu"] for g in groups) == [0.0, 1.0, 8.0]
    assert len({g["gpu_model"] for g in groups if g["gpu"]}) == 1     # they compete
    daily = T.read_demand(T.bundled("services_daily"))
    arr = np.array(daily.column("arrival_s").to_pylist(), dtype=float)
    end = arr + np.array(daily.column("duration_s").to_pylist())

    def alive(h):
        return int(((arr <= h * 3600) & (end > h * 3600)).sum())
    for night, afternoon in ((3, 15), (27, 39)):      # 03:00 against 15:00, each day
        assert 0.4 <= alive(night) / alive(afternoon) <= 0.75, (night, afternoon)
    with pytest.raises(ValueError, match="process"):
        S.demand(0, S.Spec("services_x", process="weekly"))
