"""A demand window with per-node caps and custom resources (schema version 2), derived
from the bundled openb trace, for the replay's tests.

The openb pods carry no app and no cap. This derivation gives them the structure of the
trace a per-node cap bug was found on (an inference service whose apps have many identical
replicas, 45 % of them capped per node), deterministically:

- **app**: pods with the same (cpu, memory, gpu, gpu_spec) are one app, named
  ``app-<k>`` in order of first appearance (identical replicas of one service).
- **max_per_node**: apps in a seeded order (``numpy.random.default_rng(seed)``) are
  capped while the capped pods stay within ``share`` of the window, each cap uniform
  over ``CAPS`` (6 is there because 1/6 is where Ray's truncating fixed point and
  rounding part ways).
- **placement groups**: for apps capped at 1, every other pair of the app's pods (in
  arrival order) shares a ``group_id`` (replayed STRICT_SPREAD).
- **resources**: pods with a whole GPU ask ``{"rdma": 0.5}`` (half an RDMA NIC share);
  the worker groups (``capped_groups``) give every GPU type ``rdma`` = its GPUs.

``write_capped(tmp)`` writes both tables and returns their paths, for ``vecsched
replay DEMAND --groups GROUPS``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from vecsched.adapters import traces as T

CAPS = (1, 2, 3, 4, 6)


def capped_demand(pods: int = 600, share: float = 0.45, seed: int = 16) -> pa.Table:
    table = T.read_demand(T.bundled("openb"))
    table = table.slice(table.num_rows - pods, pods)
    rows = table.to_pylist()
    app_of: dict[tuple, str] = {}
    for r in rows:
        key = (r["cpu"], r["memory"], r["gpu"], r["gpu_spec"])
        r["app"] = app_of.setdefault(key, f"app-{len(app_of)}")
    rng = np.random.default_rng(seed)
    size: dict[str, int] = {}
    for r in rows:
        size[r["app"]] = size.get(r["app"], 0) + 1
    cap_of: dict[str, int] = {}
    capped = 0
    for a in rng.permutation(sorted(size)):        # apps in a seeded order, until share
        if capped + size[a] <= share * len(rows):
            cap_of[str(a)] = int(rng.choice(CAPS))
            capped += size[a]
    for r in rows:
        r["max_per_node"] = cap_of.get(r["app"])
        if r["gpu"] >= 1:
            r["resources"] = {"rdma": 0.5}
    for a in sorted(a for a, c in cap_of.items() if c == 1):
        idx = [i for i, r in enumerate(rows) if r["app"] == a]
        for k in range(0, len(idx) - 1, 4):        # every other pair of the app's pods
            rows[idx[k]]["group_id"] = rows[idx[k + 1]]["group_id"] = f"pg-{a}-{k}"
    return T.validate_demand(T.coerce(rows, T.DEMAND_SCHEMA, "demand"))


def capped_groups() -> pa.Table:
    table = T.read_worker_groups(T.bundled("openb_nodes"))
    rows = table.to_pylist()
    for r in rows:
        r["resources"] = {"rdma": r["gpu"]} if r["gpu"] > 0 else None
    return T.validate_worker_groups(T.coerce(rows, T.WORKER_GROUP_SCHEMA, "worker_groups"))


def write_capped(out: Path, **kw) -> tuple[Path, Path]:
    out = Path(out)
    d, g = out / "capped_demand.parquet", out / "capped_groups.parquet"
    T.write_demand(capped_demand(**kw), d)
    T.write_worker_groups(capped_groups(), g)
    return d, g
