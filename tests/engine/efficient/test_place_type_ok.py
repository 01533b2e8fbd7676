"""engine/efficient/place.prime_type_ok (which types may take each gang item, for all
items of a tick at once) gives exactly what ``_type_ok`` computes one pair at a time,
on states with label selectors, anti-affinity, unconfigured types and merged
STRICT_PACK items."""
from __future__ import annotations

import numpy as np

from vecsched.engine.efficient.gang_place import gang_batch
from vecsched.engine.efficient.place import _type_ok, prime_type_ok
from vecsched.engine.efficient.state import State

from tests.kits.ganggen import gang_tick


def _problems():
    from vecsched.adapters.ray.codec import decode
    from tests.kits.raygen import make_request
    for seed in range(120):
        p = decode(make_request(seed)).problem
        if p.G:
            yield p
    for seed in range(4):
        yield gang_tick(seed, bundles=60)


def test_primed_masks_equal_the_one_at_a_time_ones():
    pairs = with_sel = with_anti = 0
    for p in _problems():
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
    assert pairs > 400 and with_sel > 50 and with_anti > 50    # the cases cover each part
