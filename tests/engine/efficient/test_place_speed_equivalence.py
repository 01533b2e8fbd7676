"""Equivalence harness for the efficient mode's placement (issue 22): the plans
of ``schedule(p, mode="efficient")`` on seeded problems must stay what they were
before the placement loops became numba kernels.

Plain demand (cluster_v2 without groups, 200-10k nodes, three seeds, both
scenarios, plus the tests' ``plain_tick`` and the baseline's ``random_case``): a
digest of every plan array, recorded on main at 2431509 with the numpy
placement (``DIGESTS``). Ticks with placement groups also go through
``improve.py`` / ``lns.py``, which change on their own, so there the plans are
compared with the same tick run on the readable placement
(``test_eff_kernels_place.ReadablePlace``) instead of a recording.

    python -m tests.engine.efficient.test_place_speed_equivalence   # print digests
"""
from __future__ import annotations

import hashlib
import sys
from pathlib import Path

import numpy as np
import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import place

from tests.engine.baseline.test_baseline import PLAN_ARRAYS, random_case
from tests.engine.efficient.test_eff_kernels_place import ReadablePlace
from tests.kits.ganggen import gang_tick, plain_tick

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
from benchmarks import common  # noqa: E402

DIGESTS = {
    "v2/saturated/200/2000/0/s0": "0f225afe1e86a5f1",
    "v2/fragmented/200/2000/0/s0": "8f2c6d509d640b82",
    "v2/saturated/200/2000/0/s1": "401f4e77b63934c8",
    "v2/fragmented/200/2000/0/s1": "64e16d40e5b137d7",
    "v2/saturated/200/2000/0/s2": "6fef8eb076c4bea8",
    "v2/fragmented/200/2000/0/s2": "597c6f2addef239a",
    "v2/saturated/1000/30000/0/s0": "ec09f0063762e7eb",
    "v2/fragmented/1000/30000/0/s0": "4df5bff291601d29",
    "v2/saturated/1000/30000/0/s1": "df8ed5605204e053",
    "v2/fragmented/1000/30000/0/s1": "7fb055bb35aa425c",
    "v2/saturated/1000/30000/0/s2": "fc2054d89204d952",
    "v2/fragmented/1000/30000/0/s2": "ffce1888edba6a64",
    "v2/saturated/3000/10000/0/s0": "a3c7c1518759fe9f",
    "v2/fragmented/3000/10000/0/s0": "8477f48281051c7c",
    "v2/saturated/3000/10000/0/s1": "538acc3e24fb58a7",
    "v2/fragmented/3000/10000/0/s1": "45159e20fcc76060",
    "v2/saturated/3000/10000/0/s2": "734d5c428a6b9297",
    "v2/fragmented/3000/10000/0/s2": "60d2994d4753c1dd",
    "v2/saturated/10000/100000/0/s0": "156e8b9c40db0505",
    "v2/fragmented/10000/100000/0/s0": "b6377828f5548800",
    "v2/saturated/10000/100000/0/s1": "4448ff2678cd7736",
    "v2/fragmented/10000/100000/0/s1": "dd3d584cf197f98e",
    "v2/saturated/10000/100000/0/s2": "2eed53e09db64a05",
    "v2/fragmented/10000/100000/0/s2": "af0ab4a3b62769df",
    "plain_tick/0": "7d6518c5ab5dcb42",
    "random_case/0": "c4c821087f33ec78",
    "plain_tick/1": "4832c68eeb3c54db",
    "random_case/1": "65d5561009996a8f",
    "plain_tick/2": "a19449f94db7a3ab",
    "random_case/2": "e07b79942a7a35e2",
    "plain_tick/3": "0d04be00780506fd",
    "random_case/3": "2afde787933c09fb",
    "plain_tick/4": "aea678ff7d8b0011",
    "random_case/4": "8768308c9d256699",
    "plain_tick/5": "ea13bc2a33240c31",
    "random_case/5": "877c22d52d0c8a21",
    "plain_tick/6": "9e660449354c90c5",
    "random_case/6": "3a58227872cdc6d5",
    "plain_tick/7": "4c63bd510a065e02",
    "random_case/7": "254760c6a81d6d10",
    "plain_tick/8": "8c511a40a1f468ad",
    "random_case/8": "2ede309fe74909b9",
    "plain_tick/9": "4bf324d1ad72da8c",
    "random_case/9": "a3d9e6f935f3e76f",
    "plain_tick/10": "14770d6b0cbbebe3",
    "random_case/10": "7e3bf2108551ac0b",
    "plain_tick/11": "5e9d7ba371a7760c",
    "random_case/11": "cccdd8f160245c25",
}


def digest(plan) -> str:
    """A short hash of every decision a plan holds (arrays with their dtypes,
    the gangs' placements and the launch order)."""
    h = hashlib.sha256()
    for name in PLAN_ARRAYS + ("gang_infeasible",):
        a = np.ascontiguousarray(getattr(plan, name))
        h.update(name.encode())
        h.update(str(a.dtype).encode())
        h.update(a.tobytes())
    h.update(np.ascontiguousarray(plan.stats.get("gang_place", np.zeros(0))).tobytes())
    h.update(repr(plan.launch_order).encode())
    return h.hexdigest()[:16]


def problem(name: str):
    """The Problem a DIGESTS key names."""
    kind, *rest = name.split("/")
    if kind == "plain_tick":
        return plain_tick(int(rest[0]))
    if kind == "random_case":
        return random_case(int(rest[0]))
    scen, n, k, g, seed = rest
    return common.engine_problem(common.cluster_v2(nodes=int(n), units=int(k), scenario=scen,
                                                   seed=int(seed[1:]), gangs=int(g)))


@pytest.mark.parametrize("name", list(DIGESTS))
def test_plain_demand_plans_unchanged(name):
    assert digest(schedule(problem(name), mode="efficient")) == DIGESTS[name], name


GANG_CASES = ([f"v2/{scen}/{n}/{k}/{g}/s{seed}" for n, k, g in ((200, 1000, 10), (500, 2000, 20))
               for scen in ("saturated", "fragmented") for seed in (0, 1)]
              + [f"gang_tick/{seed}" for seed in range(4)])


@pytest.mark.parametrize("name", GANG_CASES)
def test_gang_ticks_same_as_readable_placement(name, monkeypatch):
    p = gang_tick(int(name.split("/")[1]), bundles=40, plain=True) if name.startswith("gang_tick") \
        else problem(name)
    fast = schedule(p, mode="efficient")
    readable = ReadablePlace()
    monkeypatch.setattr(place, "on_existing", readable.on_existing)
    monkeypatch.setattr(place, "on_new", readable.on_new)
    slow = schedule(p, mode="efficient")
    assert readable.calls > 0
    assert digest(fast) == digest(slow), name


if __name__ == "__main__":
    for key in DIGESTS:
        print(key, digest(schedule(problem(key), mode="efficient")))
