"""ray-compat plans of the bench's placement-group clusters (``cluster_v2``,
saturated, seed 0) pinned by digest: every Plan array, the gang order and the
reasons, recorded before the gang kernel's list order, its classes and the
narrow label columns (engine/kernels/listorder.py, pendclass.py, runclass.py,
engine/raycompat/labelcols.py) and unchanged by them. The same digests held at
30k / 300k / 3,000, 50k / 100k / 1,000, 50k / 1M / 0 and 50k / 1M / 5,000 (too large
for a test; ``print`` mode below recomputes any row)."""
from __future__ import annotations

import hashlib

import numpy as np
import pytest

from vecsched.engine import schedule

from bench.benchmarks import common
from tests.kits.plan_digest import digest as _digest

DIGESTS = {
    (1000, 1000, 50): "e8c934a04dfe73e9",
    (3000, 10000, 200): "ed3c4120ea06c00b",
    (10000, 100000, 1000): "f7408138bf1880d4",
    # 30000/300000/3000: 9ee8d018cd227ade, 50000/100000/1000: 43ac96a63aff4a19,
    # 50000/1000000/0: cd3e8b316ff7b9b5, 50000/1000000/5000: bb765e5cff25bb2c
}


def digest(plan) -> str:
    h = hashlib.sha256(_digest(plan).encode())
    for name in ("gang_order", "gang_why", "new_template", "idle_kept"):
        a = np.ascontiguousarray(getattr(plan, name))
        h.update(name.encode())
        h.update(str(a.dtype).encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def _plan(row):
    n, u, g = row
    return schedule(common.engine_problem(common.cluster_v2(nodes=n, units=u, gangs=g)))


@pytest.mark.parametrize("row", [r for r in DIGESTS if r[0] < 10000])
def test_plans_are_pinned(row):
    assert digest(_plan(row)) == DIGESTS[row]


@pytest.mark.slow
def test_plan_at_10k_is_pinned():
    row = (10000, 100000, 1000)
    assert digest(_plan(row)) == DIGESTS[row]


if __name__ == "__main__":            # python -m tests.engine.raycompat.test_plan_digests N/U/G ...
    import sys
    for arg in sys.argv[1:]:
        row = tuple(int(x) for x in arg.split("/"))
        print(arg, digest(_plan(row)))
