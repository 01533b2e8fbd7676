"""Engine vs the installed ray==2.60.0 ResourceDemandScheduler on seeded random
cluster states: launches, terminations and infeasible requests must match.

Ray is run with the engine's documented crash-class fixes (Q4, Q13) applied by
wrapping its phase functions (tests/kits/rayfixed.py), so every case is compared in
full; how many cases the fixes touched is reported. Besides the dyadic default,
the generator's real-world modes (raylet fixed-point quantities, placement
groups placed on the nodes) are compared too (tests/kits/raygen.py)."""
from __future__ import annotations

import os
from collections import Counter

import pytest

ray = pytest.importorskip("ray")
from ray.autoscaler.v2.scheduler import ResourceDemandScheduler  # noqa: E402

from vecsched.adapters.ray import EngineScheduler  # noqa: E402

from tests.kits.compare import decisions, diff, ray_quirk  # noqa: E402
from tests.kits.rayfixed import schedule_fixed  # noqa: E402
from tests.kits.raygen import make_request  # noqa: E402

N_CASES = int(os.environ.get("VECSCHED_DIFF_CASES", "1200"))
# real-world quantities and placed placement groups (tests/kits/raygen.py modes)
N_REAL = int(os.environ.get("VECSCHED_REAL_CASES", "300"))
MODES = {"groups": dict(groups=True), "real": dict(real=True),
         "real+groups": dict(real=True, groups=True)}


def run_case(seed: int, max_nodes: int) -> str:
    req = make_request(seed, max_nodes=max_nodes)
    eng = EngineScheduler()
    eng_reply = eng.schedule(make_request(seed, max_nodes=max_nodes))
    assert eng.stats["engine_ticks"] == 1
    try:
        plain = ResourceDemandScheduler().schedule(make_request(seed, max_nodes=max_nodes))
    except KeyError:
        plain = None     # Q3: Ray crashes on a running node of an unconfigured type
    try:
        ray_reply = schedule_fixed(req)
    except AssertionError:
        return "ray-fixed-asserts"   # too few pickable victims for Ray's own assert
    problems = diff(ray_reply, eng_reply)
    assert not problems, f"seed {seed}: " + "; ".join(problems)
    if plain is None:
        return "match (Q3 crash in plain Ray)"
    if ray_quirk(plain) or decisions(plain) != decisions(ray_reply):
        return f"match (plain Ray differs: {ray_quirk(plain) or 'quirk'})"
    return "match"


@pytest.mark.parametrize("block", range(4))
@pytest.mark.slow
def test_differential_random_states(block):
    outcome = Counter()
    lo, hi = block * N_CASES // 4, (block + 1) * N_CASES // 4
    for seed in range(lo, hi):
        outcome[run_case(seed, max_nodes=30 if seed % 4 else 80)] += 1
    print(f"seeds {lo}..{hi - 1}:", dict(outcome))
    assert outcome["ray-fixed-asserts"] <= 0.05 * (hi - lo), outcome


def test_pending_idle_tracking_over_ticks(monkeypatch):
    """§5.1: pending nodes not needed by demand accumulate idle time across ticks
    (the scheduler keeps per-type timestamps) and are terminated past
    pending_idle_timeout_s. Both schedulers see the same frozen monotonic clock."""
    import time as _time

    clock = {"now": 1000.0}
    monkeypatch.setattr(_time, "monotonic", lambda: clock["now"])
    compared = terminated = 0
    for seed in range(60):
        ray_s = ResourceDemandScheduler()
        eng = EngineScheduler(monotonic=lambda: clock["now"])
        for tick in range(5):
            clock["now"] = 1000.0 + 6.0 * tick
            req = make_request(seed, max_nodes=24, full=seed % 2 == 0, pending_idle_timeout_s=10.0)
            try:
                want = schedule_fixed(req, ray_s)
            except AssertionError:
                break
            got = eng.schedule(make_request(seed, max_nodes=24, full=seed % 2 == 0,
                                            pending_idle_timeout_s=10.0))
            problems = diff(want, got)
            assert not problems, f"seed {seed} tick {tick}: " + "; ".join(problems)
            compared += 1
            terminated += sum(1 for t in want.to_terminate if t.cause == 1
                              and t.instance_status in (1, 3, 4))
    assert compared >= 250 and terminated > 0, (compared, terminated)


def run_same_object(seed: int, max_nodes: int, **mode) -> str:
    """Engine and Ray (with the Q4/Q13 fixes) on one request object: with
    non-dyadic quantities the float sums follow each map's iteration order, and a
    copy of a message may iterate in another (tests/kits/raygen.py)."""
    req = make_request(seed, max_nodes=max_nodes, **mode)
    eng_reply = EngineScheduler().schedule(req)
    try:
        ray_reply = schedule_fixed(req)
    except AssertionError:
        return "ray-fixed-asserts"
    problems = diff(ray_reply, eng_reply)
    assert not problems, f"seed {seed} {mode}: " + "; ".join(problems)
    return "match"


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.slow
def test_differential_real_world(mode):
    """Ray's real-world quantities (raylet fixed point: 0.1 / 0.3 CPU, 0.001
    accelerator markers, odd memory byte counts) and placement groups already
    placed on the nodes (the GCS's CPU_group_<pg>, bundle_group_<i>_<pg> entries,
    tasks waiting on them), against Ray decision for decision."""
    outcome = Counter()
    for seed in range(N_REAL):
        outcome[run_same_object(seed, 30 if seed % 4 else 80, **MODES[mode])] += 1
    print(mode, dict(outcome))
    assert outcome["match"] >= 0.95 * N_REAL, outcome
