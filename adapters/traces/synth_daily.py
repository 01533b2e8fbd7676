"""The daily process of ``services_daily`` (``synth_services.DAILY``): apps that scale
their replica count with the time of day, over ``Spec.horizon_s`` (two days).

Every choice, drawn from the spec's generator in a fixed order after the apps:

- each app has a daytime peak of ``peak`` replicas (1 + a gamma draw of mean
  ``PEAK_MEAN``) and a peak hour (``PEAK_HOUR`` plus a normal spread of
  ``PEAK_SPREAD_H`` hours); its target replica count at time t is
  ``peak x (1 + NIGHT) / 2 + peak x (1 - NIGHT) / 2 x cos(2 pi (t - peak hour) / day)``
  times a lognormal noise (sigma ``NOISE``) drawn at every step, rounded, at least 1:
  at night the target is ``NIGHT`` (half) of the day's;
- the app starts at a uniform offset within the first ``START_S`` seconds with its
  target's replicas, then re-reads its target every ``STEP_S`` (30 minutes, as an
  autoscaler with a long look-back would); a rise starts that many replicas, 3 s
  apart; a fall stops that many of its running replicas, chosen at random (a
  replica's duration ends then), so a node's replicas do not leave together and the
  nights leave nodes part-used: what consolidation could reclaim;
- replicas still running at the horizon outlive it by ``LONG_LIFE_S``, as the bursts'
  long replicas do (they run to the replay's end).

The suite replays it compressed in time (``bench/suite.py``: 12x, two days in four
hours; the boots and the idle timeout are not compressed).
"""
from __future__ import annotations

import math

import numpy as np

DAY_S = 86400.0
PEAK_MEAN = 6.0
PEAK_HOUR = 14.0
PEAK_SPREAD_H = 1.5
NIGHT = 0.5
NOISE = 0.08
START_S = 900.0
STEP_S = 1800.0
LONG_LIFE_S = 4 * 3600.0


def _target(peak: float, peak_s: float, t: float, noise: float) -> int:
    cycle = (1 + NIGHT) / 2 + (1 - NIGHT) / 2 * math.cos(2 * math.pi * (t - peak_s) / DAY_S)
    return max(1, int(round(peak * cycle * noise)))


def daily_rows(rng: np.random.Generator, apps: list, spec, replica) -> list:
    """(sort key, row) of every replica (module docstring); ``replica(app, arrival,
    duration_s, name)`` makes one demand row (``synth_services.replica``)."""
    horizon = float(spec.horizon_s)
    rows = []
    for a, app in enumerate(apps):
        peak = 1.0 + float(rng.gamma(2.0, (PEAK_MEAN - 1.0) / 2.0))
        peak_s = (PEAK_HOUR + float(rng.normal(0.0, PEAK_SPREAD_H))) * 3600.0
        t = float(rng.uniform(0.0, START_S))
        running: list[tuple[int, int]] = []          # (arrival, serial) of live replicas
        serial = 0
        while t < horizon:
            want = _target(peak, peak_s, t, float(rng.lognormal(0.0, NOISE)))
            if want > len(running):
                for r in range(want - len(running)):
                    running.append((int(t + 3 * r), serial))
                    serial += 1
            elif want < len(running):
                stop = sorted(rng.choice(len(running), len(running) - want, replace=False),
                              reverse=True)
                for i in stop:
                    arrival, k = running.pop(int(i))
                    rows.append(((arrival, a, k), replica(app, arrival, t - arrival,
                                                         f"{app['app']}-{k}")))
            t += STEP_S
        for arrival, k in running:
            rows.append(((arrival, a, k), replica(app, arrival, horizon - arrival + LONG_LIFE_S,
                                                 f"{app['app']}-{k}")))
    return rows
