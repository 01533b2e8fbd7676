"""A short digest of everything a plan decides, for comparing plans across changes
(tests/engine/efficient/test_place_speed_equivalence.py records them)."""
from __future__ import annotations

import hashlib

import numpy as np

from tests.kits.engine_cases import PLAN_ARRAYS


def digest(plan) -> str:
    """A short hash of every decision a plan holds (arrays with their dtypes,
    the gangs' placements and the launch order)."""
    h = hashlib.sha256()
    by_name = np.argsort(np.asarray(plan.resources, dtype=object), kind="stable")
    for name in PLAN_ARRAYS + ("gang_infeasible",):
        a = getattr(plan, name)
        if name == "cluster_resources":      # its columns in name order: the digest
            a = a[by_name]                   # does not depend on the column numbering
        a = np.ascontiguousarray(a)
        h.update(name.encode())
        h.update(str(a.dtype).encode())
        h.update(a.tobytes())
    h.update(np.ascontiguousarray(plan.stats.get("gang_place", np.zeros(0))).tobytes())
    h.update(repr(plan.launch_order).encode())
    return h.hexdigest()[:16]
