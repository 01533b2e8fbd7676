"""The grid file of ``vecsched sweep`` (``docs/sweep.md``): workloads, worker-group
catalogues, and the lists whose product is the set of cells.

A TOML file (standard library ``tomllib``)::

    [sweep]                          # optional
    pareto_x = "cost"                # cost or gpu_hours (default: cost if every cell has one)
    tail_s = 300                     # any ReplayConfig field, the same for every cell

    [workloads.last-300]             # one table per workload
    trace = "openb"                  # a bundled trace, or a demand Parquet path
    groups = "openb_nodes"           # optional: the worker groups (default: the trace's)
    pods = 300                       # a window by rows (start, pods) ...
    arrival_scale = 200
    # from = "12d"; to = "13d"; duration = "6h"; warm_start = true; compress = 1
    # gangs = 0.2                    # this workload's --gangs overlay share (else the axis)

    [catalogues.double-gpu-price]    # optional: worker-group catalogues and prices
    groups = "openb_nodes"           # a bundled set or a Parquet path
    price_factor = 1.0               # every price times this
    gpu_price_factor = 2.0           # the prices of groups with GPUs times this (after it)
    prices = { "cpu-32c-256g" = 0.9 }   # per-group prices (after the factors)
    only = ["cpu-32c-256g", "g2-96c-384g-8gpu"]   # keep only these groups
    max_workers = { "g2-96c-384g-8gpu" = 50 }
    capacity = { "g2-96c-384g-8gpu" = 10 }           # the cloud's side (docs/capacity.md):
    capacity_schedule = { "g3-128c-768g-8gpu" = "0:4,600:none" }   # the worker-group
    launch_failure_rate = { "g2-96c-384g-8gpu" = 0.3 }             # table's columns,
    spot = ["t4-96c-384g-4gpu"]                                    # per group
    interruption_rate_per_h = { "t4-96c-384g-4gpu" = 0.2 }

    [grid]                           # lists; the cells are their product
    workload = ["last-300"]          # default: every workload
    scheduler = ["engine", "efficient"]
    seed = [0, 1]
    idle_timeout_s = [60, 600]
    catalogue = ["double-gpu-price"] # default: each workload's own groups
    max_concurrent_launches = [10]   # also: upscaling_speed, pending_idle_timeout_s,
                                     # preemption_rate_per_h, launch_failure_rate, gangs

Every key is checked (``GridError`` names it). Relative paths are taken from the grid
file's folder. A cell is one combination; its ``key`` is a stable hash of everything
that decides its result (the workload's and catalogue's definitions with the SHA-256
of the files they read, the scheduler, the seed, the knobs), so a resumed sweep knows
what it has already run, and a changed input file makes new cells.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from vecsched.adapters.replay.simulation import ReplayConfig
from vecsched.adapters.replay.window import parse_seconds
from vecsched.adapters.traces import BUNDLED, TRACES

KNOBS = ("idle_timeout_s", "max_concurrent_launches", "upscaling_speed",
         "pending_idle_timeout_s", "preemption_rate_per_h", "launch_failure_rate")
AXES = ("workload", "scheduler", "seed", "catalogue", "gangs") + KNOBS
WORKLOAD_KEYS = ("trace", "groups", "pods", "start", "from", "to", "duration", "warm_start",
                 "arrival_scale", "compress", "gangs")
CLOUD_KEYS = ("capacity", "capacity_schedule", "launch_failure_rate", "spot",
              "interruption_rate_per_h")
CATALOGUE_KEYS = ("groups", "price_factor", "gpu_price_factor", "prices", "only",
                  "max_workers") + CLOUD_KEYS
CONFIG_KEYS = tuple(f.name for f in fields(ReplayConfig))
PARETO_X = ("cost", "gpu_hours")


class GridError(ValueError):
    """A grid file that cannot be run, naming the file and the key."""

    def __init__(self, where: str, message: str):
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Cell:
    """One combination of the grid: ``params`` (JSON-able, what the cell runs) and
    ``key`` (a stable hash of ``params``)."""
    index: int
    params: dict

    @property
    def key(self) -> str:
        return cell_key(self.params)

    @property
    def label(self) -> str:
        p = self.params
        knobs = " ".join(f"{k}={p[k]}" for k in AXES[4:] if k in p["varied"])
        return f"{p['workload']} {p['scheduler']} {p['catalogue'] or '-'} seed={p['seed']}" + (
            f" {knobs}" if knobs else "")


@dataclass(frozen=True)
class Grid:
    cells: list
    pareto_x: str | None
    source: str


def cell_key(params: dict) -> str:
    """A stable hash of a cell's parameters (paths left out: the files' digests stand
    for them; the display-only ``varied`` list too)."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("path", "varied")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    text = json.dumps(strip(params), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _check_parquet(path: Path, value: str, where: str, kind: str) -> None:
    """``path`` is a Parquet table of ``kind`` (demand or worker_groups), by its schema."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    try:
        names = pq.read_schema(str(path)).names
    except (pa.ArrowInvalid, OSError):
        hint = (f"; import a CSV first: vecsched trace import {value} --map MAP.toml "
                f"--out DIR{' --kind groups' if kind == 'worker_groups' else ''}, then give "
                f"DIR/{'groups' if kind == 'worker_groups' else 'demand'}.parquet"
                if path.suffix.lower() in (".csv", ".tsv", ".txt") else "")
        raise GridError(where, f"{value!r} is not a Parquet file{hint}") from None
    need = "arrival_s" if kind == "demand" else "max_workers"
    if need not in names:
        raise GridError(where, f"{value!r} is not a {kind.replace('_', '-')} table (it has no "
                        f"{need!r} column; its columns: {', '.join(names[:12])})")


def _table_ref(value, where: str, base: Path, bundled_names, kind: str) -> dict:
    """A bundled name or a Parquet path of a ``kind`` table, with the file's digest."""
    if not isinstance(value, str) or not value:
        raise GridError(where, f"must be a bundled name or a Parquet path, got {value!r}")
    if value in bundled_names:
        from vecsched.adapters.traces import bundled, bundled_trace
        path = bundled_trace(value)[0] if value in TRACES else bundled(value)
        return {"bundled": value, "sha256": _digest(path)}
    path = Path(value)
    path = path if path.is_absolute() else base / path
    if not path.is_file():
        raise GridError(where, f"{value!r} is neither a bundled name ({', '.join(bundled_names)}) "
                        f"nor a file")
    _check_parquet(path, value, where, kind)
    return {"path": str(path.resolve()), "sha256": _digest(path)}


def _number(v, where: str, *, integer: bool = False, positive: bool = False):
    ok = isinstance(v, int) if integer else isinstance(v, (int, float))
    if isinstance(v, bool) or not ok or not 0 <= v < math.inf or (positive and v == 0):
        kind = "an integer" if integer else "a finite number"
        raise GridError(where, f"must be {kind} {'> 0' if positive else '>= 0'}, got {v!r}")
    return v


def _workload(name: str, spec, src: str, base: Path) -> dict:
    where = f"{src} workloads.{name}"
    if not isinstance(spec, dict):
        raise GridError(where, "must be a table")
    for k in spec:
        if k not in WORKLOAD_KEYS:
            raise GridError(f"{where}.{k}", f"unknown key (known: {', '.join(WORKLOAD_KEYS)})")
    if "trace" not in spec:
        raise GridError(f"{where}.trace", "is required")
    out: dict[str, Any] = {"trace": _table_ref(spec["trace"], f"{where}.trace", base,
                                               list(dict.fromkeys([*TRACES, *BUNDLED])), "demand")}
    if "groups" in spec:
        out["groups"] = _table_ref(spec["groups"], f"{where}.groups", base, list(BUNDLED),
                                   "worker_groups")
    for k in ("from", "to", "duration"):
        if k in spec:
            try:
                out[k] = parse_seconds(spec[k], f"{where}.{k}")
            except ValueError as e:
                raise GridError(where, str(e)) from None
    for k in ("pods", "start"):
        if k in spec:
            out[k] = _number(spec[k], f"{where}.{k}", integer=True, positive=k == "pods")
    for k in ("arrival_scale", "compress"):
        out[k] = float(_number(spec.get(k, 1.0), f"{where}.{k}", positive=True))
    if "warm_start" in spec:
        if not isinstance(spec["warm_start"], bool):
            raise GridError(f"{where}.warm_start", "must be true or false")
        out["warm_start"] = spec["warm_start"]
    if "gangs" in spec:
        g = spec["gangs"]
        if isinstance(g, bool) or not isinstance(g, (int, float)) or not 0 <= g <= 1:
            raise GridError(f"{where}.gangs", f"must be a share within [0, 1], got {g!r}")
        out["gangs"] = float(g)
    if {"from", "to", "duration"} & set(out) and {"pods", "start"} & set(out):
        raise GridError(where, "a window by time (from / to / duration) or by rows "
                        "(start / pods), not both")
    return out


def _catalogue(name: str, spec, src: str, base: Path) -> dict:
    where = f"{src} catalogues.{name}"
    if not isinstance(spec, dict):
        raise GridError(where, "must be a table")
    for k in spec:
        if k not in CATALOGUE_KEYS:
            raise GridError(f"{where}.{k}", f"unknown key (known: {', '.join(CATALOGUE_KEYS)})")
    if "groups" not in spec:
        raise GridError(f"{where}.groups", "is required")
    out: dict[str, Any] = {"groups": _table_ref(spec["groups"], f"{where}.groups", base,
                                                list(BUNDLED), "worker_groups")}
    for k in ("price_factor", "gpu_price_factor"):
        out[k] = float(_number(spec.get(k, 1.0), f"{where}.{k}"))
    for k, integer in (("prices", False), ("max_workers", True)):
        table = spec.get(k, {})
        if not isinstance(table, dict):
            raise GridError(f"{where}.{k}", "must be a table of group = value")
        out[k] = {str(g): _number(v, f"{where}.{k}.{g}", integer=integer)
                  for g, v in sorted(table.items())}
    _cloud(spec, out, where)
    only = spec.get("only")
    if only is not None:
        if not isinstance(only, list) or not only or not all(isinstance(x, str) for x in only):
            raise GridError(f"{where}.only", "must be a non-empty list of group names")
        out["only"] = sorted(only)
    return out


def _cloud(spec: dict, out: dict, where: str) -> None:
    """A catalogue's cloud columns (``CLOUD_KEYS``), checked as the table checks them."""
    from vecsched.adapters.traces.schema import capacity_schedule
    for k in ("capacity", "launch_failure_rate", "interruption_rate_per_h",
              "capacity_schedule"):
        table = spec.get(k)
        if table is None:
            continue
        if not isinstance(table, dict):
            raise GridError(f"{where}.{k}", "must be a table of group = value")
        vals = {}
        for g, v in sorted(table.items()):
            w = f"{where}.{k}.{g}"
            if k == "capacity_schedule":
                try:
                    capacity_schedule(v)
                except (ValueError, TypeError) as e:
                    raise GridError(w, str(e)) from None
                vals[str(g)] = str(v)
            else:
                vals[str(g)] = _number(v, w, integer=k == "capacity")
                if k == "launch_failure_rate" and v > 1:
                    raise GridError(w, f"must be within [0, 1], got {v!r}")
        out[k] = vals
    spot = spec.get("spot")
    if spot is not None:
        if not isinstance(spot, list) or not all(isinstance(x, str) for x in spot):
            raise GridError(f"{where}.spot", "must be a list of group names")
        out["spot"] = sorted(spot)


def _axis(grid: dict, name: str, default: list, where: str) -> list:
    values = grid.get(name, default)
    if not isinstance(values, list) or not values:
        raise GridError(f"{where}.{name}", f"must be a non-empty list, got {values!r}")
    if len(set(map(json.dumps, values))) != len(values):
        raise GridError(f"{where}.{name}", "lists a value twice")
    return values


def _check_axis_values(name: str, values: list, where: str, workloads, catalogues) -> None:
    from vecsched.adapters.replay.registry import SCHEDULERS
    for v in values:
        if name == "workload" and v not in workloads:
            raise GridError(where, f"unknown workload {v!r} (defined: {', '.join(workloads)})")
        if name == "catalogue" and v is not None and v not in catalogues:
            raise GridError(where, f"unknown catalogue {v!r} (defined: "
                            f"{', '.join(catalogues) or 'none'})")
        if name == "scheduler" and v not in SCHEDULERS:
            raise GridError(where, f"unknown scheduler {v!r} (known: {', '.join(SCHEDULERS)})")
        if name == "seed":
            _number(v, where, integer=True)
        if name in KNOBS + ("gangs",) and v is not None and (
                isinstance(v, bool) or not isinstance(v, (int, float))):
            raise GridError(where, f"must be a number, got {v!r}")
        if name == "gangs" and not 0 <= v <= 1:
            raise GridError(where, f"must be a share within [0, 1], got {v!r}")


def parse(doc: dict, source: str = "grid", base: Path = Path(".")) -> Grid:
    """The cells of a parsed grid document, in grid order."""
    for k in doc:
        if k not in ("sweep", "workloads", "catalogues", "grid"):
            raise GridError(f"{source} [{k}]", "unknown table (known: sweep, workloads, "
                            "catalogues, grid)")
    sweep = doc.get("sweep", {})
    pareto_x = sweep.get("pareto_x")
    if pareto_x is not None and pareto_x not in PARETO_X:
        raise GridError(f"{source} sweep.pareto_x", f"must be one of {', '.join(PARETO_X)}")
    config = {k: v for k, v in sweep.items() if k != "pareto_x"}
    for k in config:
        if k not in CONFIG_KEYS or k in KNOBS + ("seed",):
            raise GridError(f"{source} sweep.{k}", f"unknown key (known: pareto_x and the "
                            f"replay options {', '.join(c for c in CONFIG_KEYS if c not in KNOBS)}"
                            f"; knobs and seeds go in [grid])")
    try:
        ReplayConfig(**config)
    except (TypeError, ValueError) as e:
        raise GridError(f"{source} [sweep]", str(e)) from None
    workloads = {n: _workload(n, s, source, base) for n, s in doc.get("workloads", {}).items()}
    if not workloads:
        raise GridError(source, "defines no [workloads.NAME]")
    catalogues = {n: _catalogue(n, s, source, base) for n, s in doc.get("catalogues", {}).items()}
    grid = doc.get("grid", {})
    where = f"{source} grid"
    for k in grid:
        if k not in AXES:
            raise GridError(f"{where}.{k}", f"unknown axis (known: {', '.join(AXES)})")
    defaults = {"workload": list(workloads), "scheduler": ["engine"], "seed": [0],
                "catalogue": [None], "gangs": [0.0]}
    axes = {}
    for name in AXES:
        default = defaults[name] if name in defaults else [getattr(ReplayConfig(), name)]
        axes[name] = _axis(grid, name, default, where)
        _check_axis_values(name, axes[name], f"{where}.{name}", workloads, catalogues)
    try:
        for combo in itertools.product(*(axes[k] for k in KNOBS)):
            ReplayConfig(**config, **dict(zip(KNOBS, combo)))
    except (TypeError, ValueError) as e:
        raise GridError(where, str(e)) from None
    fixed = [n for n, w in workloads.items() if "gangs" in w]
    if fixed and "gangs" in grid:
        raise GridError(f"{where}.gangs", f"workloads {', '.join(fixed)} set their own gangs "
                        f"share: give it per workload or as an axis, not both")
    varied = [k for k in AXES if len(axes[k]) > 1]
    cells = []
    for i, combo in enumerate(itertools.product(*(axes[k] for k in AXES))):
        p = dict(zip(AXES, combo))
        p["workload_spec"] = workloads[p["workload"]]
        p["gangs"] = p["workload_spec"].get("gangs", p["gangs"])
        p["catalogue_spec"] = catalogues.get(p["catalogue"]) if p["catalogue"] else None
        p["config"] = config
        p["varied"] = varied
        cells.append(Cell(i, p))
    return Grid(cells, pareto_x, source)


def read(path) -> Grid:
    """The grid file at ``path``."""
    p = Path(path)
    if not p.is_file():
        raise GridError(str(path), "no such file")
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8-sig"))   # a BOM is dropped
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise GridError(str(path), f"is not valid TOML: {e}") from None
    return parse(doc, p.name, p.parent)
