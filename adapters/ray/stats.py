"""The stats file of an installed autoscaler scheduler (docs/ray.md, "The stats
file"): written atomically after every tick, read by tools and tests."""
from __future__ import annotations

import json
from typing import Optional

from vecsched.adapters.files import write_json as _write_json

ENV_STATS_FILE = "VECSCHED_STATS_FILE"
STATS_FILE_NAME = "vecsched_stats.json"


def write_json(path: str, data: dict) -> None:
    _write_json(path, data, indent=1, sort_keys=True)


def read_stats(path: str) -> Optional[dict]:
    """The stats a monitor wrote to ``path`` (None if not written yet)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


# Engine ticks take milliseconds, Ray's own scheduler up to seconds on large clusters.
TICK_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                  10.0)


class TickHistogram:
    """Seconds per schedule() pass, counted into fixed buckets (Prometheus style).

    ``counts[i]`` is how many observations fell in ``(bounds[i-1], bounds[i]]``; the last
    entry counts those above the last bound. Plain Python, so the scheduler keeps it
    whether or not ``prometheus_client`` is installed; the metrics collector reads it.
    """

    def __init__(self, bounds=TICK_BUCKETS_S):
        bounds = tuple(float(b) for b in bounds)
        if not bounds or any(b >= c for b, c in zip(bounds, bounds[1:])) or bounds[0] <= 0:
            raise ValueError(f"bounds: positive and strictly increasing required, got {bounds}")
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.total_s = 0.0
        self.n = 0

    def observe(self, seconds: float) -> None:
        i = 0
        while i < len(self.bounds) and seconds > self.bounds[i]:
            i += 1
        self.counts[i] += 1
        self.total_s += seconds
        self.n += 1

    def copy(self) -> "TickHistogram":
        h = TickHistogram(self.bounds)
        h.counts, h.total_s, h.n = list(self.counts), self.total_s, self.n
        return h
