"""The columns of a tick (engine/model/build/columns.py, engine/model/exact_columns.py): what
gets a resource or label column, and which columns are exact."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import PRIVATE_PREFIX
from vecsched.engine.model.exact_columns import exact_columns, exact_columns_loop


def _mats(rng, R: int) -> list:
    mats = []
    for _ in range(int(rng.integers(1, 4))):
        n = int(rng.integers(0, 5))
        kind = int(rng.integers(0, 8))
        if kind == 0:
            m = rng.integers(0, 100, (n, R)) / 4.0
        elif kind == 1:
            m = rng.random((n, R))
        elif kind == 2:
            m = rng.integers(0, 2 ** 20, (n, R)) * 2.0 ** -30
        elif kind == 3:
            m = rng.integers(0, 4, (n, R)) * 2.0 ** int(rng.integers(-33, 60))
        elif kind == 4:
            m = np.round(rng.random((n, R)) * 1000, 3)          # 0.001 steps
        elif kind == 5:
            m = rng.integers(0, 2 ** 53, (n, R)).astype(float) * 2.0 ** int(rng.integers(-40, 3))
        elif kind == 6:                                        # memory in bytes, odd
            m = (rng.integers(0, 2 ** 40, (n, R)) | 1).astype(float) * 2.0 ** int(rng.integers(-12, 3))
        else:
            m = np.zeros((n, R))
        mats.append(m.reshape(n, R))
    return mats


@pytest.mark.parametrize("seed", range(40))
def test_exact_columns_equal_their_twin(seed):
    rng = np.random.default_rng(seed)
    for _ in range(100):
        R = int(rng.integers(1, 6))
        mats = _mats(rng, R)
        assert exact_columns(R, *mats).tolist() == exact_columns_loop(R, *mats).tolist()


@pytest.mark.parametrize("seed", range(12))
def test_exact_columns_of_tall_matrices_equal_their_twin(seed):
    """Thousands of rows (exact_columns reduces them in blocks): one off-grid or
    large value anywhere, in the ragged last rows too, decides its column."""
    rng = np.random.default_rng(1000 + seed)
    for _ in range(6):
        R = int(rng.integers(1, 14))
        mats = []
        for _ in range(int(rng.integers(1, 4))):
            n = int(rng.choice([127, 128, 129, 4096 + 63, int(rng.integers(0, 20000))]))
            m = rng.integers(0, 64, (n, R)) / 4.0
            if rng.random() < 0.5:
                m[:, int(rng.integers(0, R))] *= 2.0 ** 40            # memory-like column
            for _ in range(int(rng.integers(0, 4)) if n else 0):
                m[int(rng.integers(0, n)), int(rng.integers(0, R))] = rng.choice(
                    [0.1, 2.0 ** -31, 2.0 ** 52 + 2, 3.0 * 2 ** 60, -0.0, -2.5])
            mats.append(m)
        assert exact_columns(R, *mats).tolist() == exact_columns_loop(R, *mats).tolist()


def _problem(nodes, requests=(), types=None):
    types = types or [NodeTypeSpec("w", {"CPU": 4.0}, max_workers=5, labels={"zone": "a"})]
    return build_problem(types, nodes, list(requests))


def _running(total: dict, labels=None, free=None) -> NodeSpec:
    return NodeSpec("w", total=total, available=free or dict(total), labels=labels or {},
                    ray_node_id="r")


def test_bundle_resources_of_many_nodes_share_pseudo_columns():
    """A group spread over three nodes: its wildcard names are on all three, yet
    take no column of their own; each node's bundle entries fill its pseudo
    columns, in its own dict order, with its own values."""
    pg = "ab12" * 9
    nodes = []
    for i in range(3):
        total = {"CPU": 4.0, f"CPU_group_{pg}": 1.0, f"CPU_group_{i}_{pg}": 1.0,
                 f"bundle_group_{pg}": 1000.0, f"bundle_group_{i}_{pg}": 1000.0,
                 f"node:10.0.0.{i}": 1.0, "object_store_memory": 7.0}
        free = {**total, f"CPU_group_{pg}": 0.5, f"bundle_group_{pg}": 999.999}
        nodes.append(_running(total, free=free))
    p = _problem(nodes)
    assert [r for r in p.resources if not r.startswith(PRIVATE_PREFIX)] == \
        ["CPU", "object_store_memory"]
    assert sum(r.startswith(PRIVATE_PREFIX) for r in p.resources) == 5
    for n, spec in enumerate(nodes):
        order = p.node_order[n][p.node_order[n] >= 0]
        assert len(order) == len(spec.total)              # every entry, in dict order
        for k, c in zip(spec.total, order.tolist()):
            assert p.resources[c] == k or p.resources[c].startswith(PRIVATE_PREFIX)
            assert (p.node_total[n, c], p.node_free[n, c]) == (spec.total[k], spec.available[k])
        assert [k for k, _ in p.node_private[n]] == [k for k in spec.total if "_group_" in k
                                                     or k.startswith("node:")]


def test_a_requested_bundle_resource_gets_its_column():
    pg = "cd34" * 9
    nodes = [_running({"CPU": 4.0, f"CPU_group_{pg}": 2.0}),
             _running({"CPU": 4.0, f"CPU_group_{pg}": 1.0})]
    p = _problem(nodes, [RequestSpec({f"CPU_group_{pg}": 1.5}, 2)])
    col = p.resources.index(f"CPU_group_{pg}")
    assert p.node_total[:, col].tolist() == [2.0, 1.0]
    assert p.shape_qty[0, col] == 1.5


def test_gpu_of_one_node_gets_a_column():
    """GPU decides Ray's GPU avoidance even when only one node has it and no type
    or request names it (it used to become that node's private resource)."""
    p = _problem([_running({"CPU": 4.0, "GPU": 1.0}), _running({"CPU": 4.0, "X": 1.0})])
    assert p.gpu_col >= 0 and p.node_total[:, p.gpu_col].tolist() == [1.0, 0.0]
    assert "X" not in p.resources


def test_only_label_keys_a_type_or_request_names_get_a_column():
    nodes = [_running({"CPU": 4.0}, labels={"zone": "b", "_PG_x": "", "rack": "r1"}),
             _running({"CPU": 4.0}, labels={"_PG_y": "", "rack": "r2"})]
    p = _problem(nodes)
    assert p.label_keys == ("zone",)
    assert p.node_label[:, 0].tolist() == [p.label_values.index("b"), -1]
    sel = RequestSpec({"CPU": 1.0}, 1, label_selectors=[[("rack", "in", ["r2"])]],
                      anti_affinity=("_PG_y", ""))
    p = _problem(nodes, [sel])
    assert set(p.label_keys) == {"zone", "rack", "_PG_y"}
    rack, pgy = p.label_keys.index("rack"), p.label_keys.index("_PG_y")
    assert [p.label_values[v] for v in p.node_label[:, rack]] == ["r1", "r2"]
    assert p.node_label[:, pgy].tolist() == [-1, p.label_values.index("")]
