"""Seeded synthetic **services** workloads: what an inference-serving cluster asks of an
autoscaler, as demand and worker-group tables (schema version 2). A family of three,
each a ``Spec`` (``SPECS``); the names start with ``services``:

- ``services`` (``SERVICES``): one hour of scale-up bursts on three worker groups;
- ``services_mixgpu`` (``MIXGPU``): the same process on three groups where a small
  1-GPU group competes with an 8-GPU group of the same model and a CPU-only group, some
  replicas asking 2 GPUs, per-node caps on about half the replicas;
- ``services_daily`` (``DAILY``): two days of apps that scale with a daily cycle
  (``synth_daily.py``): demand falls by half at night, replicas stop as apps scale
  down, so scale-down and consolidation matter.

They stand in for the public inference-services traces the efficient mode's suite was
first measured on (not
redistributable here): long-running replicas of a few dozen apps, CPU-heavy replicas
on CPU nodes and GPU replicas, per-node caps per app (``max_per_node``, Ray Serve's
``max_replicas_per_node``), custom resources. Nothing in them comes from a real trace;
every number below is a choice, and the same seed gives the same tables
(``numpy.random.default_rng(seed)``, drawn in a fixed order).

The apps (``_apps``): each is a CPU app (share ``cpu_app_share``) or a GPU app. A CPU
app's replica asks 4-24 CPUs and 4 GiB per CPU; a GPU app's asks ``gpu_counts`` GPUs
(1 for ``services``), 2-8 CPUs and 16-48 GiB per GPU, and some GPU apps name the model
they need (``gpu_specs``). A fifth of the apps need one ``local_ssd`` (a custom
resource only some groups offer; never an app whose model no SSD group has). Apps cap
their replicas per node at one of ``cap_choices`` (0: no cap).

The bursts (``services``, ``services_mixgpu``): each app scales up ``bursts`` times on
average over ``horizon_s`` (Poisson), 1-6 replicas a burst, a few seconds apart;
replicas are long-lived: lognormal durations with median ``median_life_s``, and a share
``long_share`` outlive the horizon (they run to the replay's end).

Worker groups are priced by the illustrative model of ``group_prices.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from . import group_prices as prices
from . import schema
from .synth_daily import daily_rows

GIB = 2 ** 30
SEED = 0

# type, cpu, memory GiB, gpus, model, local_ssd, max_workers
GROUPS = (
    ("svc-cpu-64c-256g", 64.0, 256, 0.0, None, 4.0, 300),
    ("svc-t4-32c-128g-4gpu", 32.0, 128, 4.0, "T4", 2.0, 150),
    ("svc-a10-16c-64g-1gpu", 16.0, 64, 1.0, "A10", 0.0, 300),
)
MIXGPU_GROUPS = (
    ("svc-cpu-64c-256g", 64.0, 256, 0.0, None, 4.0, 300),
    ("svc-a10-96c-384g-8gpu", 96.0, 384, 8.0, "A10", 4.0, 60),
    ("svc-a10-16c-64g-1gpu", 16.0, 64, 1.0, "A10", 0.0, 300),
)


@dataclass(frozen=True)
class Spec:
    """One workload of the family (module docstring)."""
    name: str
    groups: tuple = GROUPS
    process: str = "bursts"                 # "bursts" or "daily" (synth_daily.py)
    apps: int = 48
    cpu_app_share: float = 0.55
    gpu_specs: tuple = ("", "", "T4", "A10")
    gpu_counts: tuple = (1,)
    cap_choices: tuple = (0, 1, 2, 2, 4)
    bursts: float = 4.0
    horizon_s: float = 3600.0
    median_life_s: float = 2400.0
    long_share: float = 0.25
    long_life_s: float = 4 * 3600.0
    daily: dict = field(default_factory=dict)   # synth_daily.py's knobs


SERVICES = Spec("services")
MIXGPU = Spec("services_mixgpu", groups=MIXGPU_GROUPS, gpu_specs=("", "", "A10"),
              gpu_counts=(1, 1, 1, 2), cap_choices=(0, 0, 0, 1, 2, 4))
DAILY = Spec("services_daily", process="daily", horizon_s=2 * 86400.0)
SPECS = {s.name: s for s in (SERVICES, MIXGPU, DAILY)}

# the module's first constants, kept for callers (the values of SERVICES)
APPS, CPU_APP_SHARE, BURSTS = SERVICES.apps, SERVICES.cpu_app_share, SERVICES.bursts
HORIZON_S, MEDIAN_LIFE_S = SERVICES.horizon_s, SERVICES.median_life_s
LONG_SHARE, LONG_LIFE_S = SERVICES.long_share, SERVICES.long_life_s


def worker_groups(spec: Spec = SERVICES) -> pa.Table:
    """The spec's worker groups (see the module docstring), illustratively priced."""
    rows = []
    for name, cpu, mem_gib, gpu, model, ssd, cap in spec.groups:
        rows.append({
            "type": name, "cpu": cpu, "memory": float(mem_gib * GIB), "gpu": gpu,
            "gpu_model": model,
            "labels": {schema.ACCELERATOR_LABEL: model} if model else {},
            "min_workers": 0, "max_workers": cap,
            "price": prices.illustrative_price(cpu, float(mem_gib * GIB), gpu, model),
            "resources": {"local_ssd": ssd} if ssd else None,
        })
    return pa.Table.from_pylist(rows, schema=schema.WORKER_GROUP_SCHEMA)


def _ssd_models(spec: Spec) -> set:
    """The GPU models (and "" for an unnamed one) some group with ``local_ssd`` has."""
    out = set()
    for _, _, _, gpu, model, ssd, _ in spec.groups:
        if ssd and gpu:
            out.update({model or "", ""})
    return out


def _apps(rng: np.random.Generator, spec: Spec = SERVICES) -> list[dict]:
    """Each app's replica shape and per-node cap, drawn in a fixed order."""
    apps = []
    ssd_models = _ssd_models(spec)
    for a in range(spec.apps):
        is_cpu = rng.random() < spec.cpu_app_share
        if is_cpu:
            cpu = float(rng.choice([4, 8, 12, 16, 24]))
            app = {"cpu": cpu, "memory": cpu * 4 * GIB, "gpu": 0.0, "gpu_spec": None}
        else:
            model = str(rng.choice(list(spec.gpu_specs)))
            app = {"cpu": float(rng.choice([2, 4, 6, 8])),
                   "memory": float(rng.choice([16, 32, 48])) * GIB, "gpu": 1.0,
                   "gpu_spec": model or None}
            if len(spec.gpu_counts) > 1:
                k = float(rng.choice(list(spec.gpu_counts)))
                app = dict(app, cpu=app["cpu"] * k, memory=app["memory"] * k, gpu=k)
        ssd = rng.random() < 0.2 and (is_cpu or (app["gpu_spec"] or "") in ssd_models)
        app["resources"] = {"local_ssd": 1.0} if ssd else None
        cap = int(rng.choice(list(spec.cap_choices)))
        app["max_per_node"] = cap or None
        app["app"] = f"svc-{a:02d}"
        apps.append(app)
    return apps


def replica(app: dict, arrival: int, duration_s: float, name: str) -> dict:
    """One demand row of ``app``."""
    return {"arrival_s": arrival, "duration_s": round(max(duration_s, 60.0), 1),
            "cpu": app["cpu"], "memory": app["memory"], "gpu": app["gpu"],
            "gpu_spec": app["gpu_spec"], "group_id": None, "qos": "LS", "name": name,
            "resources": app["resources"], "app": app["app"],
            "max_per_node": app["max_per_node"]}


def _bursts(rng: np.random.Generator, apps: list, spec: Spec) -> list:
    """(sort key, row) of every replica of the bursts process (module docstring)."""
    rows = []
    for a, app in enumerate(apps):
        n_bursts = max(1, int(rng.poisson(spec.bursts)))
        starts = np.sort(rng.uniform(0.0, spec.horizon_s, n_bursts))
        for b, t0 in enumerate(starts.tolist()):
            k = int(rng.integers(1, 7))
            for r in range(k):
                arrival = int(t0 + 3 * r)
                long = rng.random() < spec.long_share
                life = (spec.long_life_s if long
                        else float(rng.lognormal(np.log(spec.median_life_s), 0.6)))
                rows.append(((arrival, a, b, r),
                             replica(app, arrival, life, f"{app['app']}-b{b}-r{r}")))
    return rows


def demand(seed: int = SEED, spec: Spec = SERVICES) -> pa.Table:
    """The replicas of every app, sorted by arrival (ties by app, then burst order)."""
    rng = np.random.default_rng(seed)
    apps = _apps(rng, spec)
    if spec.process == "daily":
        rows = daily_rows(rng, apps, spec, replica)
    elif spec.process == "bursts":
        rows = _bursts(rng, apps, spec)
    else:
        raise ValueError(f"Spec.process must be 'bursts' or 'daily', got {spec.process!r}")
    rows.sort(key=lambda kr: kr[0])
    return pa.Table.from_pylist([r for _, r in rows], schema=schema.DEMAND_SCHEMA)
