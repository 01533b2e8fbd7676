"""Equivalence harness for the efficient mode's placement: the plans
of ``schedule(p, mode="efficient")`` on seeded problems must stay what they were
before the placement loops became numba kernels.

Plain demand (cluster_v2 without groups, 200-10k nodes, three seeds, both
scenarios, plus the tests' ``plain_tick`` and the baseline's ``random_case``): a
digest of every plan array (``cluster_resources`` in resource-name order, so the
digest does not depend on the column numbering), recorded with the numpy placement's
plans (``DIGESTS``: recorded on main at 02ea1e2, whose plans the raw-array digests
recorded at 2431509 had matched), so with ``reserve=False``: the digests predate the
reserve, which became the default later (its placements go through the same loops and
are compared with the readable placement below). Ticks with placement groups also go through
``improve.py`` / ``lns.py``, which change on their own, so there the plans are
compared with the same tick run on the readable placement
(``tests/kits/twins_place.py: ReadablePlace``) instead of a recording.

    python -m tests.engine.efficient.test_place_speed_equivalence   # print digests
"""
from __future__ import annotations

import pytest

from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions, place

from bench.benchmarks import common
from tests.kits.engine_cases import random_case
from tests.kits.ganggen import gang_tick, plain_tick
from tests.kits.plan_digest import digest
from tests.kits.twins_place import ReadablePlace

DIGESTS = {
    "v2/saturated/200/2000/0/s0": "25cf33a794c3fe8c",
    "v2/fragmented/200/2000/0/s0": "80215818acc8c1a0",
    "v2/saturated/200/2000/0/s1": "9e0331dc87348530",
    "v2/fragmented/200/2000/0/s1": "cfe55e6680f85416",
    "v2/saturated/200/2000/0/s2": "345f58c220adbf14",
    "v2/fragmented/200/2000/0/s2": "9ef6720ca7ab1b5d",
    "v2/saturated/1000/30000/0/s0": "916999a9fcc385b3",
    "v2/fragmented/1000/30000/0/s0": "c919a48e41e40417",
    "v2/saturated/1000/30000/0/s1": "6c4ef5922b6b345d",
    "v2/fragmented/1000/30000/0/s1": "7b96329af16315d8",
    "v2/saturated/1000/30000/0/s2": "248f21d82c4f8200",
    "v2/fragmented/1000/30000/0/s2": "3739c03927a152ed",
    "v2/saturated/3000/10000/0/s0": "fc542fb6d257a9d5",
    "v2/fragmented/3000/10000/0/s0": "62f308392afffdb1",
    "v2/saturated/3000/10000/0/s1": "a4def247581b3d66",
    "v2/fragmented/3000/10000/0/s1": "4ab266ffcc1c20c2",
    "v2/saturated/3000/10000/0/s2": "1231a573148cf118",
    "v2/fragmented/3000/10000/0/s2": "1d11ac6b2b9225c0",
    "v2/saturated/10000/100000/0/s0": "4e0c0f810b03ec99",
    "v2/fragmented/10000/100000/0/s0": "3f0b09dd1bc73767",
    "v2/saturated/10000/100000/0/s1": "55fe5acc2e759219",
    "v2/fragmented/10000/100000/0/s1": "d555ac91c1c2f1e4",
    "v2/saturated/10000/100000/0/s2": "0d7eb3a2f4892107",
    "v2/fragmented/10000/100000/0/s2": "d301812a5b5ba558",
    "plain_tick/0": "7a90bbe6278fdaea",
    "random_case/0": "c4c821087f33ec78",
    "plain_tick/1": "14daa2a913341d63",
    "random_case/1": "b4a151d23e101bd8",
    "plain_tick/2": "71f9d0dfaed624eb",
    "random_case/2": "e07b79942a7a35e2",
    "plain_tick/3": "3ae936c81940d97d",
    "random_case/3": "526970f4c19b2802",
    "plain_tick/4": "a5d8d4500e1893de",
    "random_case/4": "8143f179ed23e6ef",
    "plain_tick/5": "315f1e54d93873a1",
    "random_case/5": "17bfe241318e049c",
    "plain_tick/6": "7bbd97d49c75a4f4",
    "random_case/6": "3c267ffacfec280a",
    "plain_tick/7": "2bf4813e57f7809a",
    "random_case/7": "32ce29b715ee5c7c",
    "plain_tick/8": "11d2ae6a8da01470",
    "random_case/8": "49d925c77e7b6abe",
    "plain_tick/9": "9cebc05131d3f79b",
    "random_case/9": "78ab9dc21d59420d",
    "plain_tick/10": "2aaf4469aa13625e",
    "random_case/10": "62c96fa2e1e065b4",
    "plain_tick/11": "2f5a6d020aaf6388",
    "random_case/11": "495ebbdf8b5c6a7b",
}


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


# reserve off: the digests were recorded before the reserve existed (module docstring)
NO_RESERVE = EfficientOptions(reserve=False)


@pytest.mark.parametrize("name", list(DIGESTS))
def test_plain_demand_plans_unchanged(name):
    assert digest(schedule(problem(name), mode="efficient", options=NO_RESERVE)) \
        == DIGESTS[name], name


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
        print(key, digest(schedule(problem(key), mode="efficient", options=NO_RESERVE)))
