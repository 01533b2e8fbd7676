"""Colours that mean the same thing in every plot of every run: a fixed colour per
known scheduler, and per worker group a colour chosen by its name (a CRC-32 of the
name into a fixed palette, so neither the order of the results nor the group's rank
in a run changes it). Two groups whose names land on the same colour in one figure:
the one later by name takes the next free colour."""
from __future__ import annotations

import zlib

SCHEDULERS = {                    # matplotlib's tab10, one meaning each
    "engine": "tab:blue",
    "ray": "tab:red",
    "baseline": "tab:gray",
    "efficient": "tab:green",
    "efficient-proxy": "tab:olive",
    "efficient-consolidate": "tab:purple",
}
_SCHEDULER_SPARE = ("tab:orange", "tab:brown", "tab:pink", "tab:cyan")
MARKERS = {"engine": "o", "ray": "s", "baseline": "^", "efficient": "D",
           "efficient-proxy": "v", "efficient-consolidate": "P"}
_MARKER_SPARE = ("X", "*", "h", "<")

GROUPS = (                        # tab20 without its greys (kept for "other")
    "#1f77b4", "#aec7e8", "#ff7f0e", "#ffbb78", "#2ca02c", "#98df8a", "#d62728",
    "#ff9896", "#9467bd", "#c5b0d5", "#8c564b", "#c49c94", "#e377c2", "#f7b6d2",
    "#bcbd22", "#dbdb8d", "#17becf", "#9edae5")
OTHER = "lightgrey"


def _slot(name: str, n: int) -> int:
    return zlib.crc32(name.encode()) % n


def _base(name: str) -> str:
    """The scheduler a result name stands for ("baseline (FFD)" -> "baseline")."""
    return name.split(" (")[0].strip()


def scheduler_color(name: str) -> str:
    """A scheduler's colour: fixed for the known ones, by name for the others."""
    base = _base(name)
    return SCHEDULERS.get(base) or _SCHEDULER_SPARE[_slot(base, len(_SCHEDULER_SPARE))]


def scheduler_marker(name: str) -> str:
    base = _base(name)
    return MARKERS.get(base) or _MARKER_SPARE[_slot(base, len(_MARKER_SPARE))]


def group_colors(names) -> dict:
    """Worker group name -> colour for the groups drawn in one figure."""
    taken: dict = {}
    out = {}
    for name in sorted(set(names)):
        k = _slot(name, len(GROUPS))
        for step in range(len(GROUPS)):
            c = GROUPS[(k + step) % len(GROUPS)]
            if c not in taken:
                break
        else:                          # more groups than colours: share
            c = GROUPS[k]
        taken[c] = name
        out[name] = c
    return out
