"""The stats file of an installed autoscaler scheduler (docs/RAY.md, "The stats
file"): written atomically after every tick, read by tools and tests."""
from __future__ import annotations

import json
import os
import tempfile
from typing import Optional

ENV_STATS_FILE = "VECSCHED_STATS_FILE"
STATS_FILE_NAME = "vecsched_stats.json"


def write_json(path: str, data: dict) -> None:
    d = os.path.dirname(path) or "."
    os.makedirs(d, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".vecsched_stats.", dir=d)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_stats(path: str) -> Optional[dict]:
    """The stats a monitor wrote to ``path`` (None if not written yet)."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
