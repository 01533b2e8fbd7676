"""asv: the workload suite's quality figures (``bench/suite.py``), tracked over commits.

``Suite.setup_cache`` replays every workload of the suite (the openb default and its
three variants, plain and with the gang overlay, and the synthetic services workload)
with the suite's schedulers, seed 0, once; the ``track_*`` methods read the cells:

- ``track_cost_over_ray``, ``track_gpu_hours_over_ray``: cost and GPU-hours as ratios
  to the engine's (Ray's choice) on the same cell;
- ``track_p50_over_ray``, ``track_p95_over_ray``: pending time p50 / p95, likewise;
- ``track_cancelled_share``: instances cancelled before they joined, per launch.

Windows are the suite's own workloads cut to the last ``PODS`` pods (services: its first
``PODS``), so ``asv run --quick`` stays within minutes; ``bench/suite.py`` is the full
measurement, and nothing here asserts a figure.
"""
from __future__ import annotations

import dataclasses

import vecsched.engine as engine
from bench import suite as _S      # needs the repository root importable (bench/README.md)

PODS = 400


def _short(w):
    if w.window.start == 0:
        return dataclasses.replace(w, window=dataclasses.replace(w.window, pods=PODS))
    return dataclasses.replace(w, window=dataclasses.replace(w.window, pods=PODS, start=None))


CELLS = [f"{w.name}:{g:g}" for w in _S.WORKLOADS for g in w.gangs]
EFFICIENT = [n for n in _S.SCHEDULERS if n not in ("engine", "baseline")]


class Suite:
    params = (CELLS, EFFICIENT)
    param_names = ["workload", "scheduler"]
    timeout = 1800

    def setup_cache(self):
        engine.warmup()
        cells = _S.run_cells([_short(w) for w in _S.WORKLOADS], [0], list(_S.SCHEDULERS))
        return {(c["workload"], c["gangs"], c["scheduler"]): c for c in cells}

    setup_cache.timeout = 1800

    def _pair(self, cache, workload, scheduler):
        name, gangs = workload.rsplit(":", 1)
        return cache[(name, float(gangs), scheduler)], cache[(name, float(gangs), "engine")]

    def _over_ray(self, cache, workload, scheduler, key):
        c, ray = self._pair(cache, workload, scheduler)
        return c[key] / ray[key] if c[key] is not None and ray[key] else float("nan")

    def track_cost_over_ray(self, cache, workload, scheduler):
        return self._over_ray(cache, workload, scheduler, "cost")

    def track_gpu_hours_over_ray(self, cache, workload, scheduler):
        return self._over_ray(cache, workload, scheduler, "gpu_hours")

    def track_p50_over_ray(self, cache, workload, scheduler):
        return self._over_ray(cache, workload, scheduler, "pending_p50_s")

    def track_p95_over_ray(self, cache, workload, scheduler):
        return self._over_ray(cache, workload, scheduler, "pending_p95_s")

    def track_cancelled_share(self, cache, workload, scheduler):
        c, _ = self._pair(cache, workload, scheduler)
        return c["cancelled_before_join"] / max(c["launches"], 1)

    for _f in (track_cost_over_ray, track_gpu_hours_over_ray, track_p50_over_ray,
               track_p95_over_ray, track_cancelled_share):
        _f.unit = "ratio"
    del _f
