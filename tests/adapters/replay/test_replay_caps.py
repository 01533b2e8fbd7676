"""Demand schema version 2 in the replay: version-1 files replay as before; per-node caps
(Ray Serve's implicit per-node slot, STRICT_SPREAD at 1) and custom resources hold in the
cluster stand-in, reach the schedulers as Ray's GCS reports them, and the engine equals
Ray on every tick of a capped window (``capped_kit``: openb pods with apps, caps and an
RDMA share)."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from vecsched.adapters import traces as T
from vecsched.adapters.replay import Replay, Window, load, make, replay
from vecsched.adapters.replay.cluster import Cluster

from tests.kits.capped_kit import capped_demand, capped_groups

SMALL = Window(start=None, pods=150, arrival_scale=200.0)
X200 = Window(arrival_scale=200.0)


def _ray():
    pytest.importorskip("ray.autoscaler.v2.scheduler", reason="ray is not installed")


def _strip(m: dict) -> dict:
    return {k: v for k, v in m.items()
            if k not in ("wall_s", "scheduler_s", "check_ray_s") and not k.startswith("tick_")}


# ---- version 1 stays version 1 ----------------------------------------------------------
def test_v1_files_replay_identically(tmp_path):
    path = T.bundled("openb")
    assert pq.read_schema(path).metadata[b"vecsched.schema_version"] == b"1"
    assert "max_per_node" not in pq.read_schema(path).names
    v1 = T.read_demand(path)                          # read with the v2 columns, all null
    assert v1.column_names == T.DEMAND_SCHEMA.names
    assert all(v1.column(c).null_count == v1.num_rows for c in T.V2_COLUMNS["demand"])
    meta = {k.decode(): v.decode() for k, v in pq.read_schema(path).metadata.items()
            if k not in (b"vecsched.table", b"vecsched.schema_version")}
    T.write_demand(v1, tmp_path / "again.parquet", metadata=meta)   # version 1, same bytes
    assert (tmp_path / "again.parquet").read_bytes() == path.read_bytes()
    a = replay(None, "engine", window=SMALL, record_decisions=True)
    b = replay(v1, "engine", window=SMALL, record_decisions=True)
    assert a.decisions == b.decisions and _strip(a.metrics) == _strip(b.metrics)


def test_v2_round_trip(tmp_path):
    d = capped_demand()
    T.write_demand(d, tmp_path / "d.parquet")
    meta = pq.read_schema(tmp_path / "d.parquet").metadata
    assert meta[b"vecsched.schema_version"] == b"2"
    back = T.read_demand(tmp_path / "d.parquet")
    assert back.equals(d)
    g = capped_groups()
    T.write_worker_groups(g, tmp_path / "g.parquet")
    assert T.read_worker_groups(tmp_path / "g.parquet").equals(g)


# ---- the mapping -------------------------------------------------------------------------
def test_demand_shape_and_worker_groups_v2():
    row = {"cpu": 2.0, "memory": 0.0, "gpu": 1.0, "gpu_spec": None, "group_id": None,
           "resources": [("rdma", 0.5), ("disk", 100.0)], "app": "chat", "max_per_node": 4}
    assert T.demand_shape(row) == {"CPU": 2.0, "GPU": 1.0, "disk": 100.0, "rdma": 0.5,
                                   "node:__internal_implicit_resource_chat": 0.25}
    assert T.cap_slot("chat") == "node:__internal_implicit_resource_chat"
    member = dict(row, group_id="g", max_per_node=1)      # a capped group: STRICT_SPREAD
    assert T.demand_shape(member) == {"CPU": 2.0, "GPU": 1.0, "disk": 100.0, "rdma": 0.5}
    specs = {s.name: s for s in T.worker_group_specs(capped_groups())}
    assert specs["g2-96c-384g-8gpu"].resources["rdma"] == 8.0
    assert "rdma" not in specs["cpu-32c-64g"].resources


def test_capped_groups_are_strict_spread():
    t = load(capped_demand(), capped_groups(), X200)
    assert t.gangs.G > 0 and set(t.gangs.strategy) == {"STRICT_SPREAD"}
    assert "per-node caps: 35 apps" in t.caps and not t.warnings
    assert t.oversized == 0                   # the implicit slot fits every node (1.0)


# ---- the cluster stand-in -----------------------------------------------------------------
def test_slot_holds_exactly_the_cap_and_shows_as_the_gcs_does():
    """Six units of an app capped at 6 share a node, the seventh does not (1/6 truncated
    to 1666 units, as Ray's raylet does; rounded it would be five); the slot is absent
    from the node's maps while unused and shows 1 - held while held (a live Ray 2.60
    showed 0.0004 after six)."""
    slot = T.cap_slot("a")
    shape = {"CPU": 1.0, slot: 1 / 6}
    c = Cluster(["CPU", slot], [shape], np.zeros(7), np.full(7, 100.0), np.zeros(7, np.int32))
    n = c.add_node("n0", "t", {"CPU": 64.0}, 0.0)
    total, avail, _ = c.view(n, 0.0)
    assert slot not in total and slot not in avail
    for u in range(7):
        c.arrive(u)
    assert c.place(0.0) == 6 and c.n_pending == 1
    total, avail, _ = c.view(n, 0.0)
    assert slot not in total and avail[slot] == pytest.approx(0.0004)
    c.complete_until(100.0)
    assert slot not in c.view(n, 100.0)[1]


@pytest.mark.slow
def test_caps_hold_and_bind_in_the_replay():
    """At every tick no node runs more of an app's independent requests than its cap;
    caps bind (some node is full for its app); without the caps the same window packs
    more on one node. (Members of a capped placement group are spread among themselves
    only: Ray cannot keep them off nodes holding the app's other requests.)"""
    def most_per_node(table):
        t = load(table, capped_groups(), X200)
        rep = Replay(t, make("baseline"))
        rep.begin()
        app = np.asarray(table.column("app").to_pylist(), dtype=object)[t.rows]
        app[t.gangs.unit_gang >= 0] = None
        most: Counter = Counter()
        for k in range(int(np.ceil((t.arrival_s[-1] + 600) / 5)) + 1):
            rep.tick(k)
            for units in rep.cluster.running:
                for a, n in Counter(app[list(units)]).items():
                    most[a] = max(most[a], n)
        return most
    capped = capped_demand()
    cap = {a: c for a, c in zip(capped.column("app").to_pylist(),
                                capped.column("max_per_node").to_pylist()) if c is not None}
    most = most_per_node(capped)
    assert all(most[a] <= c for a, c in cap.items()), {a: (most[a], c) for a, c in cap.items()}
    assert sum(most[a] == c for a, c in cap.items() if c >= 2) >= 3
    free = capped.set_column(capped.column_names.index("max_per_node"), "max_per_node",
                             pa.nulls(capped.num_rows, pa.int64()))
    loose = most_per_node(free)
    assert sum(loose[a] > c for a, c in cap.items()) >= 3


def test_strict_spread_members_on_distinct_nodes():
    t = load(capped_demand(), capped_groups(), X200)
    rep = Replay(t, make("baseline"))
    rep.begin()
    placed = 0
    for k in range(int(np.ceil((t.arrival_s[-1] + 600) / 5)) + 1):
        rep.tick(k)
        for g in range(t.gangs.G):
            nodes = rep.cluster.node_of[t.gangs.members(g)]
            if (nodes >= 0).all():
                assert len(set(nodes.tolist())) == len(nodes)
                placed += 1
    assert placed > 0


# ---- the schedulers on a capped window ----------------------------------------------------
@pytest.mark.parametrize("scheduler", ["engine", "baseline", "ray"])
@pytest.mark.slow
def test_capped_window_conserves_and_adds_up(scheduler):
    if scheduler == "ray":
        _ray()
    m = replay(capped_demand(), scheduler, groups=capped_groups(), window=X200).metrics
    assert m["units_in"] == m["placed"] == 600 and m["infeasible"] == 0
    inst = m["instances"]
    assert inst["requested"] == inst["allocated"] + inst["failed"] + inst["in_flight"]
    assert inst["decided"] == inst["launched"] + inst["never_launched"]
    assert m["cost"] > 0


@pytest.mark.slow
def test_engine_equals_ray_on_every_tick_of_the_capped_window():
    _ray()
    r = replay(capped_demand(), "engine", groups=capped_groups(), window=X200, check_ray=True)
    assert r.check["ticks"] == r.metrics["ticks"] > 100
    assert r.check["differing"] == 0, r.check["examples"]
    assert r.check["ticks_with_placement_groups"] > 0


@pytest.mark.slow
def test_caps_cost_the_engine_nodes():
    """The engine (Ray's decisions) sees the caps: it launches more than without them."""
    _ray()
    capped = capped_demand()
    free = capped.set_column(capped.column_names.index("max_per_node"), "max_per_node",
                             pa.nulls(capped.num_rows, pa.int64()))
    a = replay(capped, "engine", groups=capped_groups(), window=X200).metrics
    b = replay(free, "engine", groups=capped_groups(), window=X200).metrics
    assert a["instances"]["decided"] > b["instances"]["decided"]
