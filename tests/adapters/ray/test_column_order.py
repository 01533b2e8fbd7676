"""Same request, same columns, same plan, in any process: a protobuf map (a request's
bundles, a node type's resources) iterates in an order that changes with the process's
string-hash seed, and the model's resource columns used to follow it. They are in
name order now (``engine/model/build/columns.py``), so the efficient mode, which sums
across columns, cannot round differently from one process to the next."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("ray")

from tests.kits.paths import REPO  # noqa: E402

_CHILD = r"""
import hashlib, json
import numpy as np
from tests.kits.raygen import make_request
from vecsched.adapters.ray.codec import SpecCache, decode
from vecsched.engine import schedule
from vecsched.engine.efficient import EfficientOptions
out = {}
for seed in (44, 48, 51):
    p = decode(make_request(seed, max_nodes=8), SpecCache()).problem
    plan = schedule(p, mode="efficient", options=EfficientOptions(gang_cpsat_bundles=0))
    h = hashlib.sha256()
    for a in (plan.launch, plan.term_node, plan.place_slot, plan.place_run, plan.place_count,
              plan.cluster_resources):
        h.update(np.ascontiguousarray(a).tobytes())
    out[seed] = [list(p.resources), h.hexdigest()]
print(json.dumps(out))
"""


def _run(hash_seed: str) -> dict:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    r = subprocess.run([sys.executable, "-c", _CHILD], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=600, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_columns_and_plans_do_not_depend_on_the_hash_seed():
    runs = [_run(s) for s in ("1", "2", "3")]
    assert runs[0] == runs[1] == runs[2]
    for resources, _ in runs[0].values():
        assert resources == sorted(resources)
