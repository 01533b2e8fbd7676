"""The codec's cache of placement groups and bundles decoded in earlier ticks:
a warm decode gives the same Problem as a cold one, whatever the previous tick
held, and the cache keeps only what the last tick used."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("ray")

from vecsched.adapters.ray import EngineScheduler  # noqa: E402
from vecsched.adapters.ray import codec  # noqa: E402
from vecsched.adapters.ray.codec import SpecCache, _gang_spec, decode  # noqa: E402
from vecsched.engine import ProblemError  # noqa: E402

from tests.kits.compare import decisions  # noqa: E402
from tests.kits.raygen import make_request  # noqa: E402


def _same_problem(a, b) -> list:
    bad = []
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            same = x.shape == y.shape and np.array_equal(x, y, equal_nan=x.dtype.kind == "f")
        elif isinstance(x, dict):
            same = x.keys() == y.keys() and all(np.array_equal(x[k], y[k]) for k in x)
        elif dataclasses.is_dataclass(x):
            same = not _same_problem(x, y)
        else:
            same = x == y or (x != x and y != y)          # NaN timeouts
        if not same:
            bad.append(f.name)
    return bad


def _mixed(seed: int):
    """Two requests sharing some placement groups: the second drops some of the
    first's groups, adds another request's, and a renamed copy of one of the
    first's (other bytes, the same bundles)."""
    a = make_request(seed)
    b = make_request(seed)
    other = make_request(seed + 5000)
    keep = [g for j, g in enumerate(b.gang_resource_requests) if j % 2 == 0]
    twins = []
    for g in keep[:1]:
        twin = type(g)()
        twin.CopyFrom(g)
        twin.details = g.details + "-twin"
        twins.append(twin)
    b.gang_resource_requests[:] = keep + list(other.gang_resource_requests) + twins
    return a, b


@pytest.mark.parametrize("seed", range(60))
def test_warm_decode_equals_cold(seed, monkeypatch):
    a, b = _mixed(seed)
    # (the same message objects throughout: a copy may iterate its maps in
    # another order, and Ray's float sums follow that order)
    cold = decode(b).problem
    first = decode(a)
    first = decode(a, first.cache)                 # every group a hit
    warm = decode(b, first.cache)
    assert not _same_problem(cold, warm.problem), seed
    made = []
    monkeypatch.setattr(codec, "_gang_spec", lambda *a, **k: made.append(1) or _gang_spec(*a, **k))
    again = decode(b, warm.cache)
    assert not _same_problem(cold, again.problem), seed
    assert not made                    # every group came from the cache
    # the cache holds exactly the groups of the tick that made it
    keys = {g.SerializeToString() for g in b.gang_resource_requests}
    assert set(again.cache.gangs) == keys
    # equal bundles are one object (one request row), hits and misses alike
    by_bytes = {}
    for spec, bkeys, of_key in again.cache.gangs.values():
        for k, rs in zip(bkeys, spec.requests):
            assert by_bytes.setdefault(k, rs) is rs
            assert of_key[k] is rs and again.cache.bundles[k] is rs


@pytest.mark.slow
def test_scheduler_keeps_the_cache_only_after_a_tick_succeeds():
    eng = EngineScheduler(new_id=lambda: "id", now_ns=lambda: 0)
    seeds = [s for s in range(40) if make_request(s).gang_resource_requests][:6]
    for s in seeds + seeds[::-1]:
        want = decisions(EngineScheduler(new_id=lambda: "id", now_ns=lambda: 0)
                         .schedule(make_request(s)))
        assert decisions(eng.schedule(make_request(s))) == want, s
    before = eng._specs
    assert isinstance(before, SpecCache) and before.gangs
    bad = make_request(seeds[0])
    g = bad.gang_resource_requests[0]
    used = g.bundle_selectors[0].resource_requests if g.bundle_selectors else g.requests
    used[0].resources_bundle["CPU"] = float("nan")
    with pytest.raises(ProblemError, match="gang_resource_requests"):
        eng.schedule(bad)
    assert eng._specs is before
