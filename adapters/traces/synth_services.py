"""A seeded synthetic **services** workload: what an inference-serving cluster asks of
an autoscaler, as demand and worker-group tables (schema version 2).

It stands in for the public inference-services trace the efficient mode's suite was
first measured on (not
redistributable here): long-running replicas of a few dozen apps, CPU-heavy replicas
on CPU nodes and 1-GPU replicas, per-node caps per app (``max_per_node``, Ray Serve's
``max_replicas_per_node``), custom resources, and three worker groups. Nothing in it
comes from a real trace; every number below is a choice, and the same seed gives the
same tables (``numpy.random.default_rng(seed)``, drawn in a fixed order).

The model:

- ``APPS`` apps; each is a CPU app (share ``CPU_APP_SHARE``) or a GPU app. A CPU app's
  replica asks 4-24 CPUs and 4 GiB per CPU; a GPU app's asks 1 GPU, 2-8 CPUs and
  16-48 GiB, and a third of GPU apps name the model they need (``gpu_spec`` T4 or A10).
  A fifth of the apps need one ``local_ssd`` (a custom resource only some groups
  offer). Most apps cap their replicas per node at 1, 2 or 4.
- Replicas arrive in scale-up bursts: each app scales up ``BURSTS`` times on average
  over ``HORIZON_S`` (Poisson), 1-6 replicas a burst, a few seconds apart.
- Replicas are long-lived: lognormal durations with median ``MEDIAN_LIFE_S``; a
  quarter outlive the horizon (they run to the replay's end).
- Worker groups: ``svc-cpu-64c-256g`` (CPU nodes with 4 ``local_ssd``), ``svc-t4-32c-
  128g-4gpu`` (4 T4s, 2 ``local_ssd``) and ``svc-a10-16c-64g-1gpu`` (1 A10, none),
  priced by the illustrative model of ``group_prices.py``.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from . import group_prices as prices
from . import schema

GIB = 2 ** 30
SEED = 0
APPS = 48
CPU_APP_SHARE = 0.55
BURSTS = 4.0
HORIZON_S = 3600.0
MEDIAN_LIFE_S = 2400.0
LONG_SHARE = 0.25
LONG_LIFE_S = 4 * 3600.0

GROUPS = (  # type, cpu, memory GiB, gpus, model, local_ssd, max_workers
    ("svc-cpu-64c-256g", 64.0, 256, 0.0, None, 4.0, 300),
    ("svc-t4-32c-128g-4gpu", 32.0, 128, 4.0, "T4", 2.0, 150),
    ("svc-a10-16c-64g-1gpu", 16.0, 64, 1.0, "A10", 0.0, 300),
)


def worker_groups() -> pa.Table:
    """The three worker groups (see the module docstring), illustratively priced."""
    rows = []
    for name, cpu, mem_gib, gpu, model, ssd, cap in GROUPS:
        rows.append({
            "type": name, "cpu": cpu, "memory": float(mem_gib * GIB), "gpu": gpu,
            "gpu_model": model,
            "labels": {schema.ACCELERATOR_LABEL: model} if model else {},
            "min_workers": 0, "max_workers": cap,
            "price": prices.illustrative_price(cpu, float(mem_gib * GIB), gpu, model),
            "resources": {"local_ssd": ssd} if ssd else None,
        })
    return pa.Table.from_pylist(rows, schema=schema.WORKER_GROUP_SCHEMA)


def _apps(rng: np.random.Generator) -> list[dict]:
    """Each app's replica shape and per-node cap, drawn in a fixed order."""
    apps = []
    for a in range(APPS):
        is_cpu = rng.random() < CPU_APP_SHARE
        if is_cpu:
            cpu = float(rng.choice([4, 8, 12, 16, 24]))
            app = {"cpu": cpu, "memory": cpu * 4 * GIB, "gpu": 0.0, "gpu_spec": None}
        else:
            spec = rng.choice(["", "", "T4", "A10"])
            app = {"cpu": float(rng.choice([2, 4, 6, 8])),
                   "memory": float(rng.choice([16, 32, 48])) * GIB, "gpu": 1.0,
                   "gpu_spec": str(spec) or None}
        ssd = rng.random() < 0.2 and app["gpu_spec"] != "A10"   # A10 nodes have no SSD
        app["resources"] = {"local_ssd": 1.0} if ssd else None
        cap = int(rng.choice([0, 1, 2, 2, 4]))
        app["max_per_node"] = cap or None
        app["app"] = f"svc-{a:02d}"
        apps.append(app)
    return apps


def demand(seed: int = SEED) -> pa.Table:
    """The replicas of every app, sorted by arrival (ties by app, then burst order)."""
    rng = np.random.default_rng(seed)
    apps = _apps(rng)
    rows = []
    for a, app in enumerate(apps):
        n_bursts = max(1, int(rng.poisson(BURSTS)))
        starts = np.sort(rng.uniform(0.0, HORIZON_S, n_bursts))
        for b, t0 in enumerate(starts.tolist()):
            k = int(rng.integers(1, 7))
            for r in range(k):
                arrival = int(t0 + 3 * r)
                long = rng.random() < LONG_SHARE
                life = LONG_LIFE_S if long else float(rng.lognormal(np.log(MEDIAN_LIFE_S), 0.6))
                rows.append(((arrival, a, b, r), {
                    "arrival_s": arrival, "duration_s": round(max(life, 60.0), 1),
                    "cpu": app["cpu"], "memory": app["memory"], "gpu": app["gpu"],
                    "gpu_spec": app["gpu_spec"], "group_id": None, "qos": "LS",
                    "name": f"{app['app']}-b{b}-r{r}", "resources": app["resources"],
                    "app": app["app"], "max_per_node": app["max_per_node"]}))
    rows.sort(key=lambda kr: kr[0])
    return pa.Table.from_pylist([r for _, r in rows], schema=schema.DEMAND_SCHEMA)
