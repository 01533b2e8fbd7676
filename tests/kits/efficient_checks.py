"""Checks of the efficient mode that run on any set of problems: the engine's tests
run them on the engine's own generators (tests/kits/ganggen.py, engine_cases.py), the
adapter tests also on the differential generator's states decoded by the Ray codec
(tests/kits/raygen.py), which carry label selectors, anti-affinity and every gang
strategy."""
from __future__ import annotations

import numpy as np

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
from vecsched.engine.efficient import improve as improve_mod
from vecsched.engine.efficient.gang_place import gang_batch
from vecsched.engine.efficient.place import _type_ok, prime_type_ok
from vecsched.engine.efficient.state import State
from vecsched.engine.solver import assignment_of_plan, build_instance, check_assignment

from tests.kits.engine_cases import PLAN_ARRAYS

# The plan arrays the per-unit fallback is compared on.
FALLBACK_PLAN = ("launch", "new_type", "term_node", "place_slot", "place_run", "place_count",
                 "gang_infeasible")


def efficient(p, **kw):
    """The efficient mode's plan of `p`, with `kw` as its options."""
    return schedule(p, mode="efficient", options=EfficientOptions(**kw) if kw else None)


def same_plan(a, b, where):
    """Two plans equal in every array, the gangs' placements and which gangs failed."""
    for name in PLAN_ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and np.array_equal(x, y), (where, name)
    assert np.array_equal(a.stats["gang_place"], b.stats["gang_place"]), where
    assert np.array_equal(a.gang_infeasible, b.gang_infeasible), where


def gangs_valid(p, plan, where):
    """The plan's gang placements are an assignment the solver's model accepts, and
    exactly the gangs not marked infeasible are placed."""
    ex = np.zeros(p.N, bool)
    ex[plan.term_node] = True
    inst = build_instance(p, exclude=ex)
    A = assignment_of_plan(inst, plan, plan.stats["gang_place"])
    assert A is not None, where
    assert check_assignment(inst, A) == [], where
    placed = {int(g) for g in plan.stats["gang_place"][:, 0]}
    assert placed == set(np.flatnonzero(~plan.gang_infeasible).tolist()), where


def fallback_plans_like_batched(problems, monkeypatch) -> int:
    """engine/efficient/improve.py's per-unit fallback (forced on for every tick) plans
    as the batched path does; returns how often the fallback recomputed the masks."""
    opts = EfficientOptions(gang_cpsat_bundles=0)
    batched = [schedule(p, mode="efficient", options=opts) for p in problems]
    calls = {"stale": 0}
    real = improve_mod._empty_stale

    def counted(*a):
        calls["stale"] += 1
        return real(*a)
    monkeypatch.setattr(improve_mod, "_selectors_see_anti", lambda p: True)
    monkeypatch.setattr(improve_mod, "_empty_stale", counted)
    fallback = [schedule(p, mode="efficient", options=opts) for p in problems]
    for k, (a, b) in enumerate(zip(batched, fallback)):
        for name in FALLBACK_PLAN:
            assert np.array_equal(getattr(a, name), getattr(b, name)), (k, name)
        assert np.array_equal(a.stats["gang_place"], b.stats["gang_place"]), k
    return calls["stale"]


def primed_masks_equal_one_at_a_time(problems) -> tuple[int, int, int]:
    """engine/efficient/place.prime_type_ok (every gang item of a tick at once) gives
    exactly what ``_type_ok`` computes one pair at a time; returns the pairs compared,
    and how many of them had a label selector and an anti-affinity."""
    pairs = with_sel = with_anti = 0
    for p in problems:
        batches = [gang_batch(p, g) for g in range(p.G)]
        rows = np.concatenate([b[0] for b in batches])
        qty = np.concatenate([b[1] for b in batches])
        primed = State(p)
        prime_type_ok(primed, rows, qty)
        for r, q in zip(rows.tolist(), qty):
            want = _type_ok(State(p), r, q)
            got = primed.type_ok[(r, np.ascontiguousarray(q, np.float64).tobytes())]
            assert got.dtype == bool and got.tolist() == want.tolist(), (r, q)
            pairs += 1
            with_sel += int(p.req.sel_ptr[r + 1] > p.req.sel_ptr[r])
            with_anti += int(p.req.anti[r, 0] >= 0)
    return pairs, with_sel, with_anti
