"""The gang passes' kernels (engine/efficient/gang_kernel.py, kernels/effp_pass.py)
against their readable twin ``gang_place._pass_py``: on seeded ticks, every pass
of ``PASSES`` (myopic and joint, first or tightest fit, largest groups first or in
input order) gives the same infeasible groups and the same placements in the same
order, with the options that change a pass (GPU nodes kept for GPU work or not,
fill credit) and with launch room running out (types' max workers, a cluster-wide
node limit); and the kernel leaves the State as it found it."""
from __future__ import annotations

import numpy as np
import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient.cost import Costs
from vecsched.engine.efficient.gang_kernel import (KernelPrep, joint_pass, myopic_pass,
                                                   selectors_free)
from vecsched.engine.efficient.gang_place import (PASSES, _pass_py, _prepare, _variants,
                                                  gang_batch, gang_order)
from vecsched.engine.efficient.place import prime_type_ok
from vecsched.engine.efficient.state import State

from bench.benchmarks import common
from tests.kits.ganggen import gang_tick
from tests.kits.state_view import assert_same, state_view

OPTIONS = {"default": EfficientOptions(), "no-gpu-keep": EfficientOptions(keep_gpu_for_gpu=False),
           "credit-0.3": EfficientOptions(fill_credit=0.3)}


def _ticks():
    """Seeded ticks without label selectors on group rows (the kernels' condition):
    cluster_v2 (both scenarios) and ganggen's ticks whose seeds drew no selector."""
    out = []
    for n, k, g, seed in ((300, 2000, 40, 0), (300, 3000, 60, 1), (1000, 6000, 150, 2)):
        for scen in ("saturated", "fragmented"):
            out.append((f"v2/{scen}/{n}/{g}/s{seed}", common.engine_problem(
                common.cluster_v2(nodes=n, units=k, gangs=g, scenario=scen, seed=seed))))
    found = 0
    for seed in range(60):
        p = gang_tick(seed, bundles=30 + 7 * (seed % 9), nodes=4 + seed % 12)
        if selectors_free(p, [gang_batch(p, g) for g in range(p.G)]):
            out.append((f"ganggen/s{seed}", p))
            found += 1
    assert found >= 5, found          # enough of ganggen's ticks are eligible
    return out


TICKS = _ticks()


def _setup(p, opts, global_room=None):
    st = State(p)
    if global_room is not None:
        st.global_room = global_room
    costs = Costs(p, opts)
    batches = [gang_batch(p, g) for g in range(p.G)]
    prime_type_ok(st, np.concatenate([b[0] for b in batches]),
                  np.concatenate([b[1] for b in batches]))
    prep = _prepare(batches, costs, opts)
    return st, costs, batches, prep, KernelPrep(st, costs, opts, batches, prep, _variants(opts))


@pytest.mark.parametrize("opt", sorted(OPTIONS))
def test_kernel_passes_equal_the_twin(opt):
    opts = OPTIONS[opt]
    seen = {"placed": 0, "infeasible": 0, "launched": 0, "limited": 0}
    for name, p in TICKS:
        for room in (None, 3):
            st, costs, batches, prep, kp = _setup(p, opts, room)
            for how, largest, tight in PASSES:
                order = gang_order(p, costs, largest)
                before = state_view(st)
                kernel = myopic_pass if how == "myopic" else joint_pass
                kbad, kplace = kernel(st, kp, order, tight)
                assert_same(state_view(st), before, (name, opt, room, how, tight, "kernel"))
                snap = st.snapshot()
                pbad, pplace = _pass_py(st, costs, opts, batches, order, how, tight, prep)
                st.restore(snap)
                where = (name, opt, room, how, largest, tight)
                assert np.array_equal(kbad, pbad), where
                assert kplace == [tuple(int(v) for v in x) for x in pplace], where
                seen["placed"] += len(kplace)
                seen["infeasible"] += int(kbad.sum())
                seen["launched"] += sum(1 for x in kplace if x[2] >= st.M)
                seen["limited"] += int(room is not None and kbad.any())
    # the comparison saw every kind of outcome
    assert all(v > 0 for v in seen.values()), seen


def test_the_kernels_run_exactly_when_no_group_row_has_selectors(monkeypatch):
    from vecsched.engine.efficient import gang_place
    calls = []

    def counted(fn):
        def run(*a, **k):
            calls.append(fn.__name__)
            return fn(*a, **k)
        return run
    monkeypatch.setattr(gang_place, "myopic_pass", counted(myopic_pass))
    monkeypatch.setattr(gang_place, "joint_pass", counted(joint_pass))
    opts = EfficientOptions(gang_cpsat_bundles=0, lns_dtime=0.0)
    ticks = [gang_tick(s, bundles=30 + 7 * (s % 9), nodes=4 + s % 12) for s in range(30)]
    free = [selectors_free(p, [gang_batch(p, g) for g in range(p.G)]) for p in ticks]
    assert any(free) and not all(free)
    for p, eligible in zip(ticks, free):
        calls.clear()
        plan = schedule(p, mode="efficient", options=opts)
        assert plan.stats["gang_pass"]
        assert ("myopic_pass" in calls and "joint_pass" in calls) == eligible, calls
        assert bool(calls) == eligible, calls
