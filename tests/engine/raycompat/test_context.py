"""engine/raycompat/context.py: declared fields, and transactions that mix one-by-one
saves (touch) with the packing kernels' bulk saves (save_packing)."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
from vecsched.engine.raycompat.context import CONSTRAINT, DEMAND, ROWS, Context
from vecsched.engine.model.requests import RequestSpec


def _ctx() -> Context:
    types = [NodeTypeSpec("w", {"CPU": 4.0, "memory": 8.0}, max_workers=10)]
    nodes = [NodeSpec("w", total={"CPU": 4.0, "memory": 8.0}, ray_node_id=f"n{i}",
                      available={"CPU": 4.0 - i, "memory": 8.0}, idle_ms=0) for i in range(4)]
    return Context(build_problem(types, nodes, [RequestSpec({"CPU": 1.0}, 2)],
                                 idle_timeout_s=60.0))


def _rows(ctx: Context) -> dict:
    return {k: getattr(ctx, k)[: ctx.M].copy() for k in ROWS}


def test_fields_are_declared():
    ctx = _ctx()
    with pytest.raises(AttributeError):
        ctx.not_a_field = 1                       # __slots__: no ad-hoc attributes
    for k in ROWS:                                # every per-slot array has a row per slot
        assert getattr(ctx, k).shape[0] >= ctx.M


@pytest.mark.parametrize("order", ["touch-bulk-touch", "bulk-touch", "bulk-bulk"])
def test_rollback_restores_the_oldest_save(order):
    """Whatever the order of one-by-one and bulk saves of the same rows, a
    rollback puts back the rows as they were when the transaction began."""
    ctx = _ctx()
    before = _rows(ctx)
    nodes = ctx.nodes.copy()
    ctx.begin()
    slots = np.arange(3)

    def change(m):
        ctx.free[m, 0] += 1.5
        ctx.label[m] = 7
        ctx.placed_any[m] = True
        ctx.ippr_desired[m, 0] += 2.0            # a row only a full touch saves

    for step in order.split("-"):
        if step == "touch":
            for m in slots.tolist():
                ctx.touch(m)
                change(m)
        else:
            ctx.save_packing(slots, DEMAND)
            for m in slots.tolist():
                ctx.free[m, 0] -= 0.25             # what a kernel commit would do
                ctx.label[m] = 3
    ctx.save_packing(slots, CONSTRAINT)           # the other source's rows too
    ctx.cfree[slots] = -1.0
    ctx.new_slots(0, 2)                           # slots added inside are dropped
    ctx.rollback()
    after = _rows(ctx)
    assert ctx.M == len(before["type"])
    assert np.array_equal(ctx.nodes, nodes)
    for k in ROWS:
        if k in ("rcls", "crcls", "lcls", "clcls", "ghash"):
            continue                              # caches: marked stale, not restored
        assert np.array_equal(after[k], before[k], equal_nan=after[k].dtype.kind == "f"), k
