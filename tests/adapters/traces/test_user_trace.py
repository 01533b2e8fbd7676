"""A user's own production trace through ``trace import`` and ``replay``, as a new user
would bring it: text fields as expressions, "-1 means no cap" as a null, an app whose
per-node cap changes over time, a CSV not in arrival order, custom resources the
bundled worker groups lack (the import's hint and the replay's refusal name them)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vecsched.adapters import traces as T
from vecsched.adapters.cli.main import main
from vecsched.adapters.replay import Window, replay
from vecsched.adapters.replay.cluster import Cluster
from vecsched.adapters.traces.csv_import import CsvImportError, import_csv
from vecsched.adapters.traces.map_file import MappingError

# A services trace: one row per replica; cap -1 means "no cap"; rows not in arrival
# order (as a dump sorted by app would be); ssd: a local-SSD share some replicas need.
CSV = """app_name,role,start,end,cpu,mem_gb,cap,ssd
web,front,300,900,4,8,-1,1
web,front,5,700,4,8,2,1
api,back,10,500,8,16,4,
api,back,20,800,8,16,2,
"""
MAP = """
[units]
memory = "GiB"
[demand]
arrival = "start"
departure = "end"
cpu = "cpu"
memory = "mem_gb"
app = 'app_name + "." + role'
qos = '"pinned" if cap > 0 else null'
max_per_node = "null if cap < 0 else cap"
[demand.resources]
local_ssd = "ssd"
"""
NODES = "type,cpus,mem_gb,ssd,count\nssd-16c,16,64,2,10\n"
NODES_MAP = """
[units]
memory = "GiB"
[groups]
type = "type"
cpu = "cpus"
memory = "mem_gb"
max_workers = "count"
[groups.resources]
local_ssd = "ssd"
"""


def _write(tmp: Path, csv: str = CSV, mapping: str = MAP) -> tuple[Path, Path]:
    c, m = tmp / "services.csv", tmp / "services.map.toml"
    c.write_text(csv)
    m.write_text(mapping)
    return c, m


def test_text_fields_are_expressions_and_null_is_a_literal(tmp_path):
    t = import_csv(*_write(tmp_path), tmp_path / "out").table
    rows = t.to_pylist()                                   # arrival order
    assert [r["app"] for r in rows] == ["web.front", "api.back", "api.back", "web.front"]
    assert [r["qos"] for r in rows] == ["pinned", "pinned", "pinned", None]
    assert [r["max_per_node"] for r in rows] == [2, 4, 2, None]   # -1: no cap
    assert [r["resources"] for r in rows] == [[("local_ssd", 1.0)], None, None,
                                              [("local_ssd", 1.0)]]
    assert rows[0]["memory"] == 8 * 2.0 ** 30


def test_a_number_where_text_goes_names_the_key(tmp_path):
    with pytest.raises(MappingError, match=r"services.map.toml demand.app: the constant 7 "
                                           r"is not text"):
        import_csv(*_write(tmp_path, mapping=MAP.replace("'app_name + \".\" + role'",
                                                         "'app_name + 7'")), tmp_path / "o")
    with pytest.raises(MappingError, match=r"demand.app: .*does not give text"):
        import_csv(*_write(tmp_path, mapping=MAP.replace("'app_name + \".\" + role'",
                                                         "'app_name * 2'")), tmp_path / "o")


def test_rows_are_written_in_arrival_order_and_errors_name_the_csv_row(tmp_path):
    r = import_csv(*_write(tmp_path), tmp_path / "out")
    assert r.table.column("arrival_s").to_pylist() == [5, 10, 20, 300]
    assert r.table.column("name").to_pylist() == ["row-1", "row-2", "row-3", "row-0"]
    assert any("rows sorted by arrival" in n for n in r.notes)
    bad = CSV.replace("web,front,300,900,4,8", "web,front,300,900,4,-8")   # CSV row 0
    with pytest.raises(CsvImportError) as e:
        import_csv(*_write(tmp_path, bad), tmp_path / "o2")
    assert (e.value.column, e.value.row) == ("mem_gb", 0)


def test_an_apps_cap_may_change_over_time(tmp_path):
    t = import_csv(*_write(tmp_path), tmp_path / "out").table
    caps = {(r["app"], r["max_per_node"]) for r in t.to_pylist()}
    assert {("api.back", 4), ("api.back", 2)} <= caps
    slot = T.cap_slot("api.back")
    assert [T.demand_shape(r).get(slot) for r in t.to_pylist()] == [None, 0.25, 0.5, None]


def test_mixed_caps_share_the_apps_one_slot_on_a_node():
    """One replica capped at 2 (half the slot) and replicas capped at 4 (a quarter
    each): a node holds the old one and two new ones, not a third (Ray Serve's rule for
    a deployment redeployed with a new max_replicas_per_node)."""
    slot = T.cap_slot("a")
    shapes = [{"CPU": 1.0, slot: 0.5}, {"CPU": 1.0, slot: 0.25}]
    c = Cluster(["CPU", slot], shapes, np.zeros(4), np.full(4, 100.0),
                np.array([0, 1, 1, 1], dtype=np.int32))
    c.add_node("n0", "t", {"CPU": 64.0}, 0.0)
    for u in range(4):
        c.arrive(u)
    assert c.place(0.0) == 3 and c.n_pending == 1


def _varying_caps_demand() -> "T.pa.Table":
    rows = []
    for i in range(40):                  # a redeploy at row 20 moves the cap from 2 to 4
        rows.append({"arrival_s": 10 * i, "duration_s": 600.0, "cpu": 2.0, "memory": 0.0,
                     "gpu": 0.0, "name": f"r{i}", "app": "svc",
                     "max_per_node": 2 if i < 20 else 4})
    return T.validate_demand(T.coerce(rows, T.DEMAND_SCHEMA, "demand"))


def _cpu_groups():
    return T.validate_worker_groups(T.coerce(
        [{"type": "cpu-16c", "cpu": 16.0, "memory": 64 * 2.0 ** 30, "gpu": 0.0,
          "min_workers": 0, "max_workers": 40, "price": 1.0}],
        T.WORKER_GROUP_SCHEMA, "worker_groups"))


@pytest.mark.slow
def test_engine_equals_ray_on_every_tick_with_a_cap_that_changes():
    pytest.importorskip("ray.autoscaler.v2.scheduler", reason="ray is not installed")
    r = replay(_varying_caps_demand(), "engine", groups=_cpu_groups(), window=Window(),
               check_ray=True)
    assert r.metrics["placed"] == 40 and r.check["differing"] == 0, r.check["examples"]


def test_the_hint_never_replays_on_groups_that_lack_a_resource(tmp_path, capsys):
    c, m = _write(tmp_path)
    out = tmp_path / "svc"
    assert main(["trace", "import", str(c), "--map", str(m), "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "the bundled openb worker groups cannot hold 2 of the 4 rows: 2 ask for " \
           "local_ssd, which no worker group has" in said
    assert f"--kind groups --out {out}), then vecsched replay {out / 'demand.parquet'} " \
           f"--groups {out / 'groups.parquet'}" in said
    assert "replay it: vecsched replay" not in said
    (tmp_path / "nodes.csv").write_text(NODES)
    (tmp_path / "nodes.map.toml").write_text(NODES_MAP)
    assert main(["trace", "import", str(tmp_path / "nodes.csv"), "--map",
                 str(tmp_path / "nodes.map.toml"), "--kind", "groups", "--out", str(out)]) == 0
    assert main(["trace", "import", str(c), "--map", str(m), "--out", str(out), "--force"]) == 0
    said = capsys.readouterr().out
    assert f"replay it: vecsched replay {out / 'demand.parquet'} --groups " \
           f"{out / 'groups.parquet'} --from 5 --duration 1h" in said


def test_a_replay_no_group_can_hold_is_an_error_naming_the_resource(tmp_path, capsys):
    c, m = _write(tmp_path, CSV.replace(",\n", ",1\n"))       # every replica needs an SSD
    assert main(["trace", "import", str(c), "--map", str(m), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    code = main(["replay", str(tmp_path / "demand.parquet"), "--from", "0", "--duration", "1h",
                 "--scheduler", "baseline", "--out", str(tmp_path / "replay")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert err[0].startswith("error: the bundled openb worker groups (a trace file's default) "
                             "cannot hold any of the 4 units to replay: 4 ask for local_ssd, "
                             "which no worker group has"), err[0]


def test_units_do_not_scale_custom_resources(tmp_path):
    """[units] convert cpu, memory, gpu and times; a custom resource is taken as its
    expression gives it (docs/traces.md says so): write the conversion into it."""
    mapping = MAP.replace('local_ssd = "ssd"', 'local_ssd = "ssd"\nssd_bytes = "ssd * 2**30"')
    t = import_csv(*_write(tmp_path, mapping=mapping), tmp_path / "o").table
    assert dict(t.column("resources").to_pylist()[0]) == {"local_ssd": 1.0,
                                                          "ssd_bytes": 2.0 ** 30}
