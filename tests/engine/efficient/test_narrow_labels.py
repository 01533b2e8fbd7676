"""``State.narrow_labels`` (engine/efficient/state.py): once the placement groups are
placed, the label columns only they read (each group's own anti-affinity key) leave
the State, and the demand's anti-affinity keys are renumbered. The plans are the
ones of a State that keeps every column, on ticks where demand rows carry
anti-affinity keys of their own next to the groups'; a row whose key left cannot
be placed silently."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.state import State
from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
from vecsched.engine.model.dtypes import Status
from vecsched.engine.model.requests import GangSpec, RequestSpec

from bench.benchmarks import common
from tests.kits.plan_digest import digest


def _mixed(seed: int):
    """Groups with their own anti-affinity keys and demand with anti-affinity keys
    of its own (spread replicas of two apps), on a few worker types."""
    rng = np.random.default_rng(seed)
    types = [NodeTypeSpec("cpu", {"CPU": 8.0, "memory": 32.0}, max_workers=40,
                          labels={"zone": "a"}),
             NodeTypeSpec("big", {"CPU": 32.0, "memory": 128.0}, max_workers=10),
             NodeTypeSpec("gpu", {"CPU": 16.0, "GPU": 2.0, "memory": 64.0}, max_workers=6)]
    nodes = [NodeSpec("cpu", Status.RAY_RUNNING, total={"CPU": 8.0, "memory": 32.0},
                      available={"CPU": float(rng.integers(0, 9)), "memory": 32.0},
                      ray_node_id=f"n{i}", idle_ms=0) for i in range(int(rng.integers(2, 8)))]
    reqs = [RequestSpec({"CPU": float(rng.integers(1, 4))}, int(rng.integers(2, 9)),
                        anti_affinity=(f"app{a}", "x")) for a in range(2)]
    reqs += [RequestSpec({"CPU": 1.0, "GPU": 0.5}, int(rng.integers(1, 5)))]
    gangs = [GangSpec([RequestSpec({"CPU": float(rng.integers(1, 5))},
                                   anti_affinity=(f"_PG_{g:04x}", ""))] * int(rng.integers(2, 5)),
                      name=f"{g:04x}:STRICT_SPREAD:PENDING") for g in range(int(rng.integers(3, 9)))]
    return build_problem(types, nodes, reqs, gangs=gangs, idle_timeout_s=60.0)


def _packed_then_spread(seed: int):
    """STRICT_PACK groups first (their own affinity keys come first among the
    Problem's columns, and the State keeps none), then STRICT_SPREAD groups of two
    bundle sizes (two items sharing one anti-affinity key: a node holding one
    must refuse the other), on running nodes with room."""
    rng = np.random.default_rng(seed)
    types = [NodeTypeSpec("cpu", {"CPU": 8.0, "memory": 32.0}, max_workers=30),
             NodeTypeSpec("big", {"CPU": 32.0, "memory": 128.0}, max_workers=8)]
    nodes = [NodeSpec("cpu", Status.RAY_RUNNING, total={"CPU": 8.0, "memory": 32.0},
                      available={"CPU": float(rng.integers(4, 9)), "memory": 32.0},
                      ray_node_id=f"n{i}", idle_ms=0) for i in range(int(rng.integers(3, 7)))]
    packs = [GangSpec([RequestSpec({"CPU": 1.0}, affinity=(f"_PG_a{g:03x}", ""))] * 2,
                      name=f"a{g:03x}:STRICT_PACK:PENDING") for g in range(int(rng.integers(3, 7)))]
    spreads = [GangSpec([RequestSpec({"CPU": 1.0}, anti_affinity=(f"_PG_b{g:03x}", "")),
                         RequestSpec({"CPU": 2.0}, anti_affinity=(f"_PG_b{g:03x}", ""))]
                        * int(rng.integers(1, 3)), name=f"b{g:03x}:STRICT_SPREAD:PENDING")
               for g in range(int(rng.integers(3, 7)))]
    reqs = [RequestSpec({"CPU": 1.0}, int(rng.integers(1, 6)))]
    return build_problem(types, nodes, reqs, gangs=packs + spreads, idle_timeout_s=60.0)


CASES = [(f"mixed/s{s}", _mixed(s)) for s in range(8)] + [
    (f"packed-spread/s{s}", _packed_then_spread(s)) for s in range(6)] + [
    (f"v2/{n}/{g}/s{s}", common.engine_problem(common.cluster_v2(nodes=n, units=k, gangs=g,
                                                                 seed=s)))
    for n, k, g, s in ((300, 2000, 40, 0), (1000, 8000, 200, 1))]


@pytest.mark.parametrize("opts", [EfficientOptions(), EfficientOptions(gang_cpsat_bundles=0)],
                         ids=["default", "heuristic"])
def test_plans_equal_a_state_that_keeps_every_column(opts, monkeypatch):
    narrowed = kept = 0
    real = State.narrow_labels
    for name, p in CASES:
        seen = {}

        def watch(st, rows, seen=seen):
            width = st.label.shape[1]
            real(st, rows)
            seen["narrowed"] = st.label.shape[1] < width
            seen["kept"] = any(k >= p.node_label.shape[1] and st.anti[r][0] < st.label.shape[1]
                               for r, (k, _) in enumerate(p.req.anti.tolist()[:p.S]))
        monkeypatch.setattr(State, "narrow_labels", watch)
        narrow = digest(schedule(p, mode="efficient", options=opts))
        monkeypatch.setattr(State, "narrow_labels", lambda st, rows: None)
        wide = digest(schedule(p, mode="efficient", options=opts))
        assert narrow == wide, name
        narrowed += seen["narrowed"]
        kept += seen["kept"]
    # every tick dropped columns; the demand's own anti-affinity columns were kept
    assert narrowed == len(CASES) and kept >= 8, (narrowed, kept)


def test_kept_columns_are_renumbered_with_their_values():
    p = _mixed(1)
    st = State(p)
    W = p.node_label.shape[1]
    last = int(p.gang_req[-1])                 # the last group's row: its key is the last
    key = int(p.req.anti[last, 0])
    assert key == st.label.shape[1] - 1 and key > W + 2
    st.label[3, key] = 7
    st.label[3, W] = 5                         # the first demand key's column
    st.narrow_labels(np.concatenate([np.arange(p.S), [last]]))
    assert st.label.shape[1] == W + 3          # zone, then app0, app1 and the last group's key
    assert st.anti[last][0] == W + 2 and st.label[3, W + 2] == 7 and st.label[3, W] == 5
    assert st.type_label.shape == (p.T, W + 3)


def test_a_row_whose_key_left_fails_loudly():
    p = _mixed(0)
    st = State(p)
    gang_row = int(p.gang_req[0])
    key = int(p.req.anti[gang_row, 0])
    assert key >= p.node_label.shape[1]
    st.narrow_labels(np.arange(p.S))
    assert st.anti[gang_row][0] >= st.label.shape[1]          # one past the matrix
    with pytest.raises(IndexError):
        st.label[np.asarray([0]), st.anti[gang_row][0]] = 0


def _widen(st: State) -> None:
    """The State as it was before it dropped columns: one per label key of the
    Problem, in the Problem's order."""
    p = st.p
    W, L = p.node_label.shape[1], len(p.label_keys)
    label = np.zeros((st.label.shape[0], L), np.int32)
    label[:st.N, :W] = p.node_label
    label[:st.N, W:] = -1
    st.label, st.label_cols = label, np.arange(L, dtype=np.int64)
    st.type_label = np.ascontiguousarray(p.type_label)
    st.anti_arr = np.asarray(p.req.anti, np.int64).reshape(-1, 2)
    st.anti = st.anti_arr.tolist()


@pytest.mark.parametrize("opts", [EfficientOptions(), EfficientOptions(gang_cpsat_bundles=0)],
                         ids=["default", "heuristic"])
def test_plans_equal_a_state_with_every_key_from_the_start(opts, monkeypatch):
    """The State keeps no column for a key no row's anti-affinity sets (a STRICT_PACK
    group's own affinity key: its bundles are one item); the plans are those of a
    State with a column per key of the Problem."""
    real = State.__init__
    dropped = 0
    for name, p in CASES:
        st = State(p)
        W = p.node_label.shape[1]
        anti = {int(k) for k in p.req.anti[:, 0] if k >= W}
        assert set(st.label_cols[W:].tolist()) == anti, name
        for r, (k, v) in enumerate(p.req.anti.tolist()):
            assert st.anti[r] == ([int(np.flatnonzero(st.label_cols == k)[0]), v] if k >= 0
                                  else [k, v]), (name, r)
        assert (st.labels_of(st.N) == np.where(np.arange(len(p.label_keys)) < W,
                                                np.pad(p.node_label, ((0, 0), (0, len(p.label_keys) - W))),
                                                -1)).all(), name
        dropped += len(p.label_keys) - st.label.shape[1]
        monkeypatch.setattr(State, "__init__", real)
        narrow = digest(schedule(p, mode="efficient", options=opts))

        def wide_init(st, p, real=real):
            real(st, p)
            _widen(st)
        monkeypatch.setattr(State, "__init__", wide_init)
        wide = digest(schedule(p, mode="efficient", options=opts))
        monkeypatch.setattr(State, "__init__", real)
        assert narrow == wide, name
    assert dropped > 50, dropped            # the cluster_v2 ticks' STRICT_PACK keys
