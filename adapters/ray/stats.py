"""The stats file of an installed autoscaler scheduler (docs/RAY.md, "The stats
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
