"""Loading a trace for replay: the window, the time scaling, and the checks that turn
bad input into a clear error or a clear count before the replay starts.

A replay takes a demand table and a worker-group table (``vecsched.adapters.traces`` schemas).
Every row of the demand window becomes one *unit* of demand with a simulated arrival
time, a simulated duration and a resource bundle (``vecsched.adapters.traces.demand_shape``).
Identical bundles share a *shape*; shapes are numbered in first-appearance order.

Placement groups (the trace's ``group_id`` and the seeded overlay of ``gangs.py``) are
attached here as ``LoadedTrace.gangs``; their members arrive and leave together.

Nothing here drops demand silently. Rows that no node type can ever hold, rows that
ask for a GPU model no worker group has and simplified GPU OR-lists are all counted and
named in ``warnings``; the unplaceable ones then show up as the scheduler's infeasible
count in the report.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

import numpy as np
import pyarrow as pa

from vecsched.engine.model.build.builder import NodeTypeSpec
from vecsched.engine.model.dtypes import IMPLICIT_PREFIX

from vecsched.adapters.traces import (ACCELERATOR_PREFIX, BUNDLED, DEFAULT_TRACE, TRACES, TraceError,
                      bundled, bundled_trace, demand_shape, gpu_spec_options, or_list_count,
                      read_demand, read_worker_groups, validate_demand,
                      validate_worker_groups, worker_group_specs)
from vecsched.adapters.traces.fit import gaps
from .capacity import group_clouds
from .placement_groups import GangOverlay, Gangs, build as build_gangs, permute, together
from .window import Window, describe, select

GIB = float(2 ** 30)
HEAD_TYPE = "head"
# The head node: one, always RAY_RUNNING, never launched or terminated (max_workers 1
# with its one node means "no room to launch another"). It has resources, so demand
# may run on it, as on a real Ray head without num-cpus=0.
HEAD = NodeTypeSpec(HEAD_TYPE, {"CPU": 8.0, "memory": 32 * GIB}, min_workers=0,
                    max_workers=1)

TableOrPath = Union[pa.Table, str, Path]


@dataclass
class LoadedTrace:
    """A trace window ready to replay: units in arrival order, shapes, node types."""
    name: str
    types: list                      # NodeTypeSpec, the head type first
    arrival_s: np.ndarray            # (U,) f8 simulated seconds from the window start
    duration_s: np.ndarray           # (U,) f8 simulated seconds, > 0
    unit_shape: np.ndarray           # (U,) i4 shape of each unit
    shapes: list                     # dict[str, float] bundle per shape, first-appearance order
    rows: np.ndarray                 # (U,) i8 demand-table row of each unit
    scaling: str                     # the window and scaling, in words (for the report)
    oversized: int = 0               # units no node type can hold (incl. the head)
    warnings: list = field(default_factory=list)
    gangs: Optional[Gangs] = None    # placement groups (None: none)
    prices: dict = field(default_factory=dict)   # worker group -> price per node-hour or None
    price_source: Optional[str] = None           # where the prices come from, if stated
    caps: str = ""                               # the per-node caps, in words ("": none)
    warm: Optional[np.ndarray] = None            # (U,) bool: alive at the window's start
    load_info: dict = field(default_factory=dict)  # the load replayed (summary.json)
    cloud: dict = field(default_factory=dict)    # worker group -> capacity.GroupCloud, from
                                                 # the worker table's cloud columns

    def __post_init__(self):
        if self.gangs is None:
            self.gangs = Gangs.none(self.n_units)
        if self.warm is None:
            self.warm = np.zeros(self.n_units, dtype=bool)

    @property
    def n_warm(self) -> int:
        """Units alive at the window's start (the warm start)."""
        return int(self.warm.sum())

    @property
    def n_units(self) -> int:
        return int(self.arrival_s.size)

    @property
    def columns(self) -> list:
        """Every resource name of the node types and the shapes, stable order."""
        cols: dict[str, None] = {}
        for t in self.types:
            cols.update(dict.fromkeys(t.resources))
        for s in self.shapes:
            cols.update(dict.fromkeys(s))
        return list(cols)


def _load_table(x: TableOrPath, kind: str) -> pa.Table:
    if isinstance(x, pa.Table):
        return validate_demand(x) if kind == "demand" else validate_worker_groups(x)
    path = Path(x)
    if not path.is_file():
        raise FileNotFoundError(f"{kind} trace {str(x)!r} is neither a bundled name nor a file")
    return read_demand(path) if kind == "demand" else read_worker_groups(path)


def resolve(trace: Union[str, Path, pa.Table, None],
            groups: Union[str, Path, pa.Table, None] = None) -> tuple[pa.Table, pa.Table, str]:
    """(demand table, worker-group table, display name). ``trace`` is a bundled trace
    name (``vecsched.adapters.traces.TRACES``), a bundled demand name, a Parquet path, or a Table;
    ``groups`` likewise (default: the bundled trace's worker groups, else openb_nodes)."""
    trace = DEFAULT_TRACE if trace is None else trace
    name = str(trace) if not isinstance(trace, pa.Table) else "table"
    default_groups = "openb_nodes"
    if isinstance(trace, str) and trace in TRACES:
        d_path, g_path = bundled_trace(trace)
        demand = read_demand(d_path)
        default_groups = g_path
    elif isinstance(trace, str) and trace in BUNDLED:
        demand = read_demand(bundled(trace))
    else:
        demand = _load_table(trace, "demand")
        name = Path(trace).name if not isinstance(trace, pa.Table) else name
    if groups is None:
        groups = default_groups
    if isinstance(groups, str) and groups in BUNDLED:
        groups = bundled(groups)
    wg = _load_table(groups, "worker_groups")
    return demand, wg, name


def _fits(shape: dict, resources: dict) -> bool:
    """Whether one unit of ``shape`` fits an empty node with ``resources`` (an implicit
    per-node slot, which no node declares, counts as 1.0, as in Ray)."""
    return all(q <= resources.get(k, 1.0 if k.startswith(IMPLICIT_PREFIX) else 0.0)
               * (1 + 1e-12) for k, q in shape.items() if q > 0)


def load(trace=None, groups=None, window: Window = Window(),
         gangs: GangOverlay = GangOverlay()) -> LoadedTrace:
    """Read, validate, window and scale a trace (see ``Window``) and attach its placement
    groups (the trace's own and the ``gangs`` overlay, see ``gangs.py``); raise
    ``TraceError`` or ``ValueError`` naming the field for input that cannot be replayed."""
    demand, wg, name = resolve(trace, groups)
    types = _worker_types(wg)
    sel, rows, warm, table, arr, dur = _window_units(demand, window)
    warnings: list[str] = []
    shapes, unit_shape = _unit_shapes(table, types, warnings)
    oversized = _oversize_warnings(table, types, shapes, unit_shape, warnings)
    group_ids = table.column("group_id").to_pylist()
    caps = table.column("max_per_node").to_pylist()
    capped = np.array([c is not None for c in caps], dtype=bool)
    spread = {g for g, c in zip(group_ids, caps) if g is not None and c == 1}
    pg = _placement_groups(types, shapes, unit_shape, group_ids, gangs, capped, warm, spread)
    cap_note = _caps_note(table, capped, len(spread))
    rows = np.asarray(rows, dtype=np.int64)
    if pg.G:
        arr, dur, order = together(pg, arr, dur)
        arr, dur, unit_shape, rows = arr[order], dur[order], unit_shape[order], rows[order]
        warm = warm[order]
        pg = permute(pg, order)
    scaling = describe(window, sel)
    if gangs.share > 0:
        scaling += f"; gang overlay {gangs.share:g} (seed {gangs.seed})"
    prices, price_source = _prices(wg)
    return LoadedTrace(
        name=name, types=[HEAD] + types, arrival_s=arr, duration_s=dur,
        unit_shape=unit_shape, shapes=shapes, rows=rows,
        scaling=scaling, oversized=oversized, warnings=warnings, gangs=pg,
        prices=prices, price_source=price_source, caps=cap_note, warm=warm,
        load_info=_load_info(window, sel), cloud=group_clouds(wg))


def _worker_types(wg: pa.Table) -> list:
    """The worker groups as node types; none at all, or one named like the head, is an
    error naming the ``type`` field."""
    types = worker_group_specs(wg)
    if not types:
        raise TraceError("worker_groups", "type", "is empty: at least one worker group is needed")
    for t in types:
        if t.name == HEAD_TYPE:
            raise TraceError("worker_groups", "type",
                             f"{HEAD_TYPE!r} is reserved for the replay's head node")
    return types


def _window_units(demand: pa.Table, window: Window):
    """The window's units: (selection, demand rows, warm mask, their table, scaled
    arrivals, scaled durations). Warm-start units come first, arriving at t = 0 for what
    is left of their run; the window's own units follow."""
    if demand.num_rows == 0:
        raise TraceError("demand", "*", "has no rows: nothing to replay")
    arrival = np.asarray(demand.column("arrival_s").to_numpy(), dtype=np.float64)
    duration = np.asarray(demand.column("duration_s").to_numpy(), dtype=np.float64)
    sel = select(arrival, duration, window)
    rows = np.concatenate([sel.warm, sel.rows])
    warm = np.arange(rows.size) < sel.warm.size
    table = demand.take(pa.array(rows))
    scale = window.compress * window.arrival_scale
    arr = np.where(warm, 0.0, (arrival[rows] - sel.origin) / scale)
    dur = np.where(warm, arrival[rows] + duration[rows] - sel.origin, duration[rows])
    return sel, rows, warm, table, arr, dur / window.compress


def _unit_shapes(table: pa.Table, types: list, warnings: list) -> tuple[list, np.ndarray]:
    """(shapes in first-appearance order, each unit's shape); a warning names the GPU
    models asked for that no worker group has."""
    shape_index: dict[tuple, int] = {}
    shapes: list[dict] = []
    unit_shape = np.zeros(table.num_rows, dtype=np.int32)
    models = {k[len(ACCELERATOR_PREFIX):] for t in types for k in t.resources
              if k.startswith(ACCELERATOR_PREFIX)}
    unknown_models: dict[str, int] = {}
    for u, row in enumerate(table.to_pylist()):
        for m in gpu_spec_options(row.get("gpu_spec")):
            if m not in models:
                unknown_models[m] = unknown_models.get(m, 0) + 1
        shape = demand_shape(row)
        key = tuple(shape.items())
        s = shape_index.get(key)
        if s is None:
            s = shape_index[key] = len(shapes)
            shapes.append(shape)
        unit_shape[u] = s
    if unknown_models:
        listed = ", ".join(f"{m} ({n} rows)" for m, n in sorted(unknown_models.items()))
        warnings.append(f"GPU models no worker group has: {listed}; those requests cannot "
                        f"be placed and are reported infeasible")
    return shapes, unit_shape


def _oversize_warnings(table: pa.Table, types: list, shapes: list, unit_shape: np.ndarray,
                       warnings: list) -> int:
    """Count the units no node type (the head included) can hold, and warn about them
    and about the GPU OR-lists replayed unconstrained; returns the oversized count."""
    oversized_shapes = [s for s, sh in enumerate(shapes)
                        if not any(_fits(sh, dict(t.resources)) for t in [HEAD] + types)]
    oversized = int(np.isin(unit_shape, oversized_shapes).sum())
    if oversized:
        why = gaps(shapes, np.bincount(unit_shape, minlength=len(shapes)),
                   [dict(t.resources) for t in [HEAD] + types]).describe()
        warnings.append(f"{oversized} units ({len(oversized_shapes)} shapes) fit no node type "
                        f"({why}); they stay pending and are reported infeasible")
    n_or = or_list_count(table)
    if n_or:
        warnings.append(f"{n_or} GPU OR-list constraints (A|B) are replayed unconstrained")
    return oversized


def _placement_groups(types: list, shapes: list, unit_shape: np.ndarray, group_ids: list,
                      gangs: GangOverlay, capped: np.ndarray, warm: np.ndarray,
                      spread: set) -> Gangs:
    """The trace's placement groups and the overlay's. Capped units never join the
    overlay's groups (Ray Serve refuses a per-node cap with placement group bundles); nor
    do warm-start units (already running: a group with a later unit would pull that
    unit's arrival to t = 0)."""
    fits_type = np.array([any(_fits(sh, dict(t.resources)) for t in types) for sh in shapes],
                         dtype=bool)

    def fits_merged(units) -> bool:
        merged: dict[str, float] = {}
        for u in units:
            for k, v in shapes[unit_shape[u]].items():
                merged[k] = merged.get(k, 0.0) + v
        return any(_fits(merged, dict(t.resources)) for t in types)
    return build_gangs(len(unit_shape), group_ids, gangs,
                       fits_type[unit_shape] & ~capped & ~warm, fits_merged,
                       spread_groups=spread)


def _prices(wg: pa.Table) -> tuple[dict, Optional[str]]:
    """(worker group -> price per node-hour or None, where the prices come from or None
    when no group has one)."""
    prices = dict(zip(wg.column("type").to_pylist(), wg.column("price").to_pylist()))
    source = (wg.schema.metadata or {}).get(b"vecsched.price_source")
    price_source = None
    if any(v is not None for v in prices.values()):
        price_source = source.decode() if source else "the worker groups' price column"
    return prices, price_source


def _load_info(window: Window, sel) -> dict:
    """The load replayed, as numbers (``summary.json``'s ``load``)."""
    return {"pods": int(sel.rows.size), "warm_start_pods": int(sel.warm.size),
            "from_s": sel.origin, "to_s": window.t_to, "span_s": sel.end - sel.origin,
            "arrival_scale": float(window.arrival_scale), "compress": float(window.compress),
            "by": "time" if window.by_time else "rows"}


def _caps_note(table: pa.Table, capped: np.ndarray, n_spread: int) -> str:
    """The window's per-node caps in words ("" when none)."""
    if not capped.any():
        return ""
    apps = table.column("app").to_pylist()
    caps = table.column("max_per_node").to_pylist()
    by_app: dict = {}
    for a, c, k in zip(apps, caps, capped):
        if k:
            by_app.setdefault(a, set()).add(c)
    hist: dict[int, int] = {}
    for cs in by_app.values():
        for c in cs:
            hist[c] = hist.get(c, 0) + 1
    where = ", ".join(f"{n} at {c}" for c, n in sorted(hist.items()))
    changing = sum(len(cs) > 1 for cs in by_app.values())
    if changing:
        where += f"; {changing} whose cap changes over time"
    return (f"per-node caps: {len(by_app)} apps ({where}), {int(capped.sum())} units; "
            f"independent requests ask 1/cap of the app's implicit per-node slot, "
            f"{n_spread} capped placement groups are STRICT_SPREAD")
