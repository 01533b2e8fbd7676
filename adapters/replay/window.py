"""Which part of a trace a replay plays: the ``Window`` (by rows or by trace time), its
time scaling, the warm start, and the words the replay's header says about the load.

A window by **time** is ``[t_from, t_to)`` in trace seconds: the rows arriving in it,
with times taken from ``t_from`` (so a window that starts mid-trace starts at its own
t = 0). A window by **rows** is ``pods`` rows from row ``start`` in arrival order (the
bundled demo's window), with times taken from its first arrival.

The **warm start**: the rows that arrived before the window's start and were still
running at it are replayed too, as work present at t = 0 for what is left of their run
(``simulation.py`` places them on nodes the scheduler under test launches at t = 0, up
at once), so a mid-trace window shows the steady state rather than a ramp from an empty
cluster. It is on by default for a time window that starts after the trace's start,
and off by default for a row window (the bundled demo, as before).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Optional

import numpy as np

_UNITS = {"": 1.0, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}


def parse_seconds(text, what: str) -> float:
    """``3600``, ``90s``, ``30m``, ``2h``, ``1.5d``, ``2w`` as seconds (>= 0); a
    ``ValueError`` naming ``what`` otherwise."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
    else:
        m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)\s*([a-z]*)\s*", str(text), re.I)
        if not m or m.group(2).lower() not in _UNITS:
            raise ValueError(f"{what} must be seconds or a number with a unit "
                             f"(s, m, h, d, w; e.g. 2h, 30m, 7d), got {text!r}")
        value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{what} must be a finite time >= 0, got {text!r}")
    return value


def _positive_int(v) -> bool:
    return not isinstance(v, bool) and isinstance(v, (int, np.integer))


@dataclass(frozen=True)
class Window:
    """Which slice of the trace is replayed and how its clock is scaled.

    By rows: ``pods`` rows starting at row ``start`` of the demand table (rows in
    arrival order); ``start`` None means the last ``pods`` rows (all rows if ``pods`` is
    None too). By time: ``t_from`` / ``t_to`` in trace seconds (either may be None: the
    trace's start / end), or ``last_s``: the trace's last ``last_s`` seconds of arrivals
    (all of it when it is shorter); either excludes ``pods`` and a ``start`` other than 0.
    ``compress`` divides inter-arrival times *and* durations (the same load, played
    faster); ``arrival_scale`` divides inter-arrival times only (that many times the
    arrival rate at the same durations). ``warm_start`` None: on for a time window,
    off for a row window (see the module docstring). ``note`` is said after the
    arrival scale in the header (e.g. why it is not 1).
    """
    start: Optional[int] = 0
    pods: Optional[int] = None
    compress: float = 1.0
    arrival_scale: float = 1.0
    t_from: Optional[float] = None
    t_to: Optional[float] = None
    warm_start: Optional[bool] = None
    note: str = ""
    last_s: Optional[float] = None

    def __post_init__(self):
        if self.start is not None and (not _positive_int(self.start) or self.start < 0):
            raise ValueError(f"window.start must be an integer >= 0, got {self.start!r}")
        if self.pods is not None and (not _positive_int(self.pods) or self.pods <= 0):
            raise ValueError(f"window.pods must be a positive integer, got {self.pods!r}")
        for name in ("compress", "arrival_scale"):
            v = getattr(self, name)
            if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool) \
                    or not math.isfinite(v) or v <= 0:
                raise ValueError(f"window.{name} must be a finite number > 0, got {v!r}")
        for name in ("t_from", "t_to", "last_s"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float))
                                  or not math.isfinite(v) or v < 0):
                raise ValueError(f"window.{name} must be trace seconds >= 0, got {v!r}")
        if self.last_s is not None and (self.t_from is not None or self.t_to is not None
                                        or self.last_s <= 0):
            raise ValueError("window.last_s is a window of its own (> 0), without t_from / t_to")
        if self.by_time:
            if self.pods is not None or self.start not in (0, None):
                raise ValueError("window: give a time window (from / to) or a row window "
                                 "(start / pods), not both")
            if self.t_from is not None and self.t_to is not None and self.t_to <= self.t_from:
                raise ValueError(f"window.t_to ({self.t_to:g}) must be after window.t_from "
                                 f"({self.t_from:g})")
        if self.warm_start is not None and not isinstance(self.warm_start, bool):
            raise ValueError(f"window.warm_start must be True, False or None, "
                             f"got {self.warm_start!r}")

    @property
    def by_time(self) -> bool:
        return self.t_from is not None or self.t_to is not None or self.last_s is not None

    def bounds(self, n_rows: int) -> tuple[int, int]:
        """(first row, one past the last row) of a row window in a table of n_rows."""
        if self.start is None:
            start = 0 if self.pods is None else max(0, n_rows - self.pods)
        else:
            start = self.start
        if start >= n_rows:
            raise ValueError(f"window.start {start} is past the last demand row "
                             f"({n_rows} rows)")
        stop = n_rows if self.pods is None else min(n_rows, start + self.pods)
        return start, stop


@dataclass(frozen=True)
class Selection:
    """The rows a window replays: ``rows`` (arrival order) and ``warm`` (alive at its
    start), both as demand-table row numbers, and the window's start ``origin`` and end
    ``end`` in trace seconds."""
    rows: np.ndarray
    warm: np.ndarray
    origin: float
    end: float
    first_row: int = 0
    n_rows: int = 0
    trace_span: float = 0.0


def select(arrival: np.ndarray, duration: np.ndarray, window: Window) -> Selection:
    """The window's rows and its warm-start rows (see the module docstring)."""
    order = np.argsort(arrival, kind="stable")          # the trace order, if already sorted
    n = arrival.size
    if window.by_time:
        lo = float(arrival.min()) if window.t_from is None else window.t_from
        if window.last_s is not None:
            lo = max(lo, float(arrival.max()) - window.last_s)
        hi = math.inf if window.t_to is None else window.t_to
        sorted_arr = arrival[order]
        a, b = np.searchsorted(sorted_arr, lo, "left"), np.searchsorted(sorted_arr, hi, "left")
        if a == b:
            raise ValueError(f"the window [{lo:g}, {hi:g}) s holds no arrival (the trace's "
                             f"arrivals span {arrival.min():g} .. {arrival.max():g} s)")
        rows, origin, first = order[a:b], lo, int(a)
        end = min(hi, float(sorted_arr[b - 1]))
        warm_on = window.warm_start if window.warm_start is not None else True
    else:
        first, stop = window.bounds(n)
        rows = order[first:stop]
        origin, end = float(arrival[rows[0]]), float(arrival[rows[-1]])
        warm_on = bool(window.warm_start)
    warm = np.zeros(0, dtype=np.int64)
    if warm_on:
        before = order[:first]
        alive = arrival[before] + duration[before] > origin
        warm = before[alive & (arrival[before] < origin)]
    return Selection(rows, warm, origin, end, first, n,
                     float(arrival.max() - arrival.min()) if n else 0.0)


def describe(window: Window, sel: Selection) -> str:
    """The load replayed, in words: pods, span, scaling, warm start."""
    n = sel.rows.size
    if window.by_time:
        to = "the end" if window.t_to is None else f"{window.t_to:,.0f} s"
        where = f"arrivals in [{sel.origin:,.0f} s, {to}) of the trace"
        if window.last_s is not None:
            where += (f" (its last {_span(window.last_s)} of {_span(sel.trace_span)}: no "
                      f"window given; --from / --to / --duration choose one)")
    else:
        stop = sel.first_row + n
        last = " (the last ones)" if stop == sel.n_rows and sel.first_row > 0 else ""
        where = f"rows {sel.first_row}..{stop - 1} of {sel.n_rows}{last}"
    span = (sel.end - sel.origin)
    parts = [f"{n} pods, {where}, spanning {_span(span)} of trace time"]
    scale = window.compress * window.arrival_scale
    parts.append(f"arrival rate x{window.arrival_scale:g}"
                 + (" (as recorded)" if window.arrival_scale == 1 else "")
                 + (f" ({window.note})" if window.note else "")
                 + (f", replayed over {_span(span / scale)}" if scale != 1 else ""))
    if window.compress != 1:
        parts.append(f"time compressed {window.compress:g}x (inter-arrivals and durations "
                     f"/ {window.compress:g})")
    if window.arrival_scale != 1:
        parts.append(f"inter-arrivals / {window.arrival_scale:g}, durations kept")
    if sel.warm.size:
        parts.append(f"warm start: {sel.warm.size} pods alive at the window's start run "
                     f"from t = 0")
    elif window.by_time or window.warm_start:
        parts.append("warm start: no pod alive at the window's start")
    return "; ".join(parts)


def _span(seconds: float) -> str:
    for unit, size in (("d", 86400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"
