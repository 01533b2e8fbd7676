"""Bring your own trace: a CSV and a mapping file (``map_file.py``) to the project's
demand or worker-group table (``schema.py``), written as zstd Parquet by ``parquet.py``.

    from vecsched.adapters.traces.csv_import import import_csv
    result = import_csv("pods.csv", "openb.map.toml", "out/")   # out/demand.parquet

Each CSV row becomes one demand row (or, for a node list with ``aggregate = true``, rows
of one shape become one worker group). The cells are read as text; the mapping's
expressions turn them into numbers in the schema's units (seconds, cores, bytes,
GPUs). Anything that cannot be used raises ``CsvImportError`` naming the CSV, the
column and the row (0-based data row, and the file line it is on), before anything is
written: a cell that is not a number, an empty cell a required field needs, a run that
ends before it starts, a value the schema refuses.

Times: numeric times are taken as seconds (times the ``[units] time`` factor) from the
trace's start, as the schema wants them; ISO 8601 timestamps are made relative to the
earliest arrival. A run lasts ``departure - started`` (``started`` empty: from the
arrival) or ``duration``.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa

from . import map_file
from .csv_cells import CsvImportError, read_cells
from .expressions import (ExpressionError, compile_expression, evaluate, evaluate_text,
                          plain_column)
from .map_file import ISO, MappingError
from .parquet import write_demand, write_worker_groups
from .schema import TraceError

OUTPUT = {"demand": "demand.parquet", "groups": "groups.parquet"}
# schema column -> mapping field, for errors the schema's validation raises
_FIELD_OF = {"arrival_s": "arrival", "duration_s": "duration", "type": "type"}


@dataclass
class ImportResult:
    """What an import wrote and what it had to adjust."""
    path: Path
    kind: str
    rows: int
    table: pa.Table
    notes: list = field(default_factory=list)


# ---- evaluating the mapping ----------------------------------------------------------
class _Rows:
    """The CSV's columns and the mapping, with errors that name the CSV."""

    def __init__(self, name: str, cols: dict, n: int, mapping):
        self.name, self.cols, self.n, self.m = name, cols, n, mapping

    def _fail(self, e: ExpressionError, key: str):
        if e.column is None and e.row is None:          # the expression itself: the mapping's
            raise MappingError(f"{self.m.source} {self.m.kind}.{key}", str(e)) from None
        col = e.column if e.column is not None else f"{self.m.kind}.{key} (mapping)"
        raise CsvImportError(self.name, str(e), col, e.row) from None

    def number(self, key: str, expr: str, required: bool, scale: float = 1.0) -> np.ndarray:
        """The expression over every row, times ``scale``; when ``required`` a null
        result names the first empty column it uses at that row."""
        try:
            tree = compile_expression(expr, list(self.cols))
            x = evaluate(tree, self.cols, self.n)
            # a sub-unit (milli, ms) divides: x / 1000 is exact where x * 0.001 is not
            x = x / round(1 / scale) if scale < 1 else x * scale
        except ExpressionError as e:
            self._fail(e, key)
        if required:
            hole = np.flatnonzero(np.isnan(x))
            if hole.size:
                self._null(key, expr, int(hole[0]))
        return x

    def _null(self, key: str, expr: str, row: int):
        import ast
        names = [n.id for n in ast.walk(ast.parse(expr.strip(), mode="eval"))
                 if isinstance(n, ast.Name) and n.id in self.cols]
        empty = next((c for c in names if self.cols[c].cells[row] is None), None)
        if empty is not None:
            raise CsvImportError(self.name, f"is empty, and {self.m.kind}.{key} = {expr!r} "
                                 f"needs a value", empty, row)
        raise CsvImportError(self.name, f"{self.m.kind}.{key} = {expr!r} gives no number",
                             None, row)

    def text(self, key: str, expr: str) -> list:
        """A text field: one column's cells, or a text expression (``evaluate_text``:
        columns, quoted strings, ``+``, ``A if COND else B``, ``coalesce``, ``null``)."""
        col = plain_column(expr)
        if col is not None and col in self.cols:
            return list(self.cols[col].cells)
        try:
            tree = compile_expression(expr, list(self.cols))
            return list(evaluate_text(tree, self.cols, self.n))
        except ExpressionError as e:
            self._fail(e, key)

    def times(self, key: str, expr: str, required: bool) -> np.ndarray:
        """A time field in seconds (ISO timestamps: seconds since the epoch)."""
        if self.m.units.time != ISO:
            return self.number(key, expr, required, self.m.units.seconds)
        col = plain_column(expr)
        if col is None or col not in self.cols:
            raise CsvImportError(self.name, f"{self.m.kind}.{key} = {expr!r}: with ISO "
                                 f"timestamps a time field is one column",
                                 f"{self.m.kind}.{key}")
        out = np.full(self.n, np.nan)
        for i, v in enumerate(self.cols[col].cells):
            if v is None:
                continue
            try:
                out[i] = np.datetime64(v.replace("Z", ""), "ms").astype(np.int64) / 1e3
            except ValueError:
                raise CsvImportError(self.name, f"{v!r} is not an ISO 8601 timestamp",
                                     col, i) from None
        if required and np.isnan(out).any():
            self._null(key, expr, int(np.flatnonzero(np.isnan(out))[0]))
        return out


def _resources(rows: _Rows, table: dict, scale: float = 1.0) -> Optional[list]:
    """The ``resources`` maps, one per row (None: none), from name = expression."""
    if not table:
        return None
    vals = {k: rows.number(f"resources.{k}", e, False) for k, e in sorted(table.items())}
    out = []
    for i in range(rows.n):
        entries = [(k, float(v[i])) for k, v in vals.items() if np.isfinite(v[i]) and v[i]]
        out.append(entries or None)
    return out


def _integers(rows: _Rows, key: str, x: np.ndarray) -> list:
    bad = np.flatnonzero(np.isfinite(x) & (x != np.floor(x)))
    if bad.size:
        i = int(bad[0])
        raise CsvImportError(rows.name, f"{rows.m.kind}.{key} must be a whole number, got "
                             f"{x[i]:g}", f"{rows.m.kind}.{key}", i)
    return [None if np.isnan(v) else int(v) for v in x]


# ---- demand --------------------------------------------------------------------------
def demand_columns(rows: _Rows) -> tuple[dict, list]:
    """The demand table's columns from the mapping (and notes on what was adjusted)."""
    m, f, notes = rows.m, rows.m.fields, []
    arrival = rows.times("arrival", f["arrival"], True)
    if "duration" in f:
        run, run_key = rows.times("duration", f["duration"], True), "duration"
    else:
        start = arrival
        if "started" in f:
            started = rows.times("started", f["started"], False)
            start = np.where(np.isnan(started), arrival, started)
        run, run_key = rows.times("departure", f["departure"], True) - start, "departure"
    if m.units.time == ISO:
        arrival = arrival - arrival.min()         # timestamps: from the first arrival
    short = np.flatnonzero(run < (m.min_duration_s or 0.0)) if m.min_duration_s else \
        np.flatnonzero(run <= 0)
    if short.size and m.min_duration_s is None:
        i = int(short[0])
        raise CsvImportError(rows.name, f"the run lasts {run[i]:g} s (it must be > 0; set "
                             f"demand.min_duration_s to raise short runs)", run_key, i)
    if short.size:
        run[short] = m.min_duration_s
        notes.append(f"{short.size} runs shorter than {m.min_duration_s:g} s were raised to it "
                     f"(demand.min_duration_s)")
    integral = bool(np.all(arrival == np.floor(arrival)))
    cols = {"arrival_s": pa.array(arrival.astype(np.int64) if integral else arrival),
            "duration_s": run}
    scale = {"cpu": map_file.CPU_UNITS[m.units.cpu],
             "memory": map_file.MEMORY_UNITS[m.units.memory],
             "gpu": map_file.GPU_UNITS[m.units.gpu]}
    for k in map_file.DEMAND_NUMBERS:
        cols[k] = (rows.number(k, f[k], True, scale[k]) if k in f else np.zeros(rows.n))
    for k in map_file.DEMAND_TEXT:
        if k in f:
            cols[k] = pa.array(rows.text(k, f[k]), pa.string())
    if "name" not in cols:
        cols["name"] = pa.array([f"row-{i}" for i in range(rows.n)], pa.string())
    if "max_per_node" in f:
        cols["max_per_node"] = pa.array(
            _integers(rows, "max_per_node", rows.number("max_per_node", f["max_per_node"],
                                                        False)), pa.int64())
    res = _resources(rows, m.resources)
    if res is not None:
        cols["resources"] = res
    return cols, notes


# ---- worker groups -------------------------------------------------------------------
def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "x"


def group_columns(rows: _Rows) -> tuple[dict, list]:
    """The worker-group table's columns from the mapping (aggregated when asked)."""
    m, f = rows.m, rows.m.fields
    u = m.units
    cols: dict = {
        "cpu": rows.number("cpu", f["cpu"], True, map_file.CPU_UNITS[u.cpu]),
        "memory": rows.number("memory", f["memory"], True, map_file.MEMORY_UNITS[u.memory]),
        "gpu": (rows.number("gpu", f["gpu"], True, map_file.GPU_UNITS[u.gpu]) if "gpu" in f
                else np.zeros(rows.n)),
    }
    cols["gpu_model"] = rows.text("gpu_model", f["gpu_model"]) if "gpu_model" in f \
        else [None] * rows.n
    cols["price"] = (rows.number("price", f["price"], False) if "price" in f
                     else np.full(rows.n, np.nan))
    labels = {k: rows.text(f"labels.{k}", e) for k, e in sorted(m.labels.items())}
    cols["labels"] = [[(k, v[i]) for k, v in labels.items() if v[i] is not None]
                      for i in range(rows.n)]
    cols["resources"] = _resources(rows, m.resources) or [None] * rows.n
    cols["min_workers"] = (_integers(rows, "min_workers", rows.number(
        "min_workers", f["min_workers"], True)) if "min_workers" in f else [0] * rows.n)
    if m.aggregate:
        cloud = [k for k in map_file.GROUP_CLOUD if k in f]
        if cloud:
            raise CsvImportError(rows.name, f"groups.{cloud[0]}: not with aggregate = true "
                                 f"(aggregated groups have no rows of their own)",
                                 f"groups.{cloud[0]}")
        return _aggregate(cols, rows.n), [f"{rows.n} rows aggregated by shape"]
    _cloud_columns(rows, cols)
    cols["type"] = rows.text("type", f["type"])
    cols["max_workers"] = _integers(rows, "max_workers",
                                    rows.number("max_workers", f["max_workers"], True))
    cols["price"] = [None if np.isnan(p) else float(p) for p in cols["price"]]
    return cols, []


def _cloud_columns(rows: _Rows, cols: dict) -> None:
    """The optional cloud columns (``map_file.GROUP_CLOUD``) the mapping names."""
    f = rows.m.fields
    if "capacity" in f:
        cols["capacity"] = pa.array(_integers(rows, "capacity", rows.number(
            "capacity", f["capacity"], False)), pa.int64())
    for k in ("launch_failure_rate", "interruption_rate_per_h"):
        if k in f:
            cols[k] = pa.array([None if np.isnan(v) else float(v)
                                for v in rows.number(k, f[k], False)], pa.float64())
    if "spot" in f:
        cols["spot"] = pa.array([None if np.isnan(v) else bool(v)
                                 for v in rows.number("spot", f["spot"], False)], pa.bool_())
    if "capacity_schedule" in f:
        cols["capacity_schedule"] = pa.array(rows.text("capacity_schedule",
                                                       f["capacity_schedule"]), pa.string())


def _aggregate(cols: dict, n: int) -> dict:
    """One group per distinct shape; max_workers = its rows; names from the shape."""
    count: dict[tuple, int] = {}
    first_min: dict[tuple, int] = {}
    for i in range(n):
        price = cols["price"][i]
        key = (cols["gpu_model"][i] or "", float(cols["cpu"][i]), float(cols["memory"][i]),
               float(cols["gpu"][i]), None if np.isnan(price) else float(price),
               tuple(sorted(cols["labels"][i])), tuple(sorted(cols["resources"][i] or ())))
        count[key] = count.get(key, 0) + 1
        first_min.setdefault(key, cols["min_workers"][i])
    out: dict = {k: [] for k in ("type", "cpu", "memory", "gpu", "gpu_model", "labels",
                                 "min_workers", "max_workers", "price", "resources")}
    seen: dict[str, int] = {}
    for key in sorted(count, key=lambda k: (k[0], k[1], k[2], k[3], repr(k[4:]))):
        model, cpu, mem, gpu, price, labels, res = key
        name = f"{_slug(model) if model else 'cpu'}-{cpu:g}c-{mem / 2 ** 30:g}g" + (
            f"-{gpu:g}gpu" if gpu else "")
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name += f"-{seen[name]}"
        for k, v in (("type", name), ("cpu", cpu), ("memory", mem), ("gpu", gpu),
                     ("gpu_model", model or None), ("labels", list(labels)),
                     ("min_workers", min(first_min[key], count[key])),
                     ("max_workers", count[key]), ("price", price),
                     ("resources", list(res) or None)):
            out[k].append(v)
    return out


# ---- the import ----------------------------------------------------------------------
def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _by_arrival(data: dict, notes: list, unnamed: bool) -> np.ndarray:
    """Sort the demand columns by arrival (stable: ties keep the CSV's order), so that
    the table's row numbers are arrival order, the order a replay's row window
    (``--start`` / ``--pods``) and its header count in. Returns the permutation
    (table row -> CSV row)."""
    arrival = np.asarray(data["arrival_s"].to_numpy(zero_copy_only=False), dtype=np.float64)
    order = np.argsort(arrival, kind="stable")
    moved = int((order != np.arange(order.size)).sum())
    if not moved:
        return order
    for k, v in data.items():
        if isinstance(v, (pa.Array, pa.ChunkedArray)):
            data[k] = v.take(pa.array(order))
        elif isinstance(v, np.ndarray):
            data[k] = v[order]
        else:
            data[k] = [v[i] for i in order]
    notes.append(f"rows sorted by arrival ({moved} of {order.size} moved; the CSV was not in "
                 f"arrival order): row numbers in the table and in a replay's --start / --pods "
                 f"are arrival order" + ("; unnamed rows keep their CSV row in row-<n>"
                                         if unnamed else ""))
    return order


def _schema_error(name: str, e: TraceError, fields: dict, kind: str, order=None
                  ) -> CsvImportError:
    if order is not None and e.row is not None:
        e.row = int(order[e.row])                  # back to the CSV's row
    key = _FIELD_OF.get(e.column, e.column)
    if kind == "demand" and key == "duration" and "departure" in fields:
        key = "departure"
    expr = fields.get(key)
    col = plain_column(expr) if expr else None
    message = str(e).split(": ", 1)[-1]
    if expr and not col:
        message = f"{kind}.{key} = {expr!r} gives a bad value: {message}"
    return CsvImportError(name, message, col or f"{kind}.{key}", e.row)


def output_path(out, kind: str) -> Path:
    """Where an import writes: ``out`` itself when it names a ``.parquet`` file (and is
    not a directory), else ``out/demand.parquet`` (or ``groups.parquet``)."""
    out = Path(out)
    return out if out.suffix == ".parquet" and not out.is_dir() else out / OUTPUT[kind]


def import_csv(csv_path, map_path, out_dir, kind: str = "demand") -> ImportResult:
    """Read ``csv_path`` with the ``kind`` section of the mapping file ``map_path`` and
    write ``out_dir/demand.parquet`` (or ``groups.parquet``; ``out_dir`` may instead
    name the ``.parquet`` file); see the module docstring. Demand rows are written in
    arrival order (``_by_arrival``)."""
    if kind not in OUTPUT:
        raise MappingError("--kind", f"must be one of {', '.join(OUTPUT)}, got {kind!r}")
    mapping = map_file.read(map_path, kind)
    path = Path(csv_path)
    cols, n = read_cells(path)
    if n == 0:
        raise CsvImportError(path.name, "has a header but no rows")
    rows = _Rows(path.name, cols, n, mapping)
    build = demand_columns if kind == "demand" else group_columns
    data, notes = build(rows)
    order = _by_arrival(data, notes, "name" not in mapping.fields) if kind == "demand" else None
    meta = {"vecsched.source": path.name, "vecsched.source_sha256": _digest(path),
            "vecsched.mapping": Path(map_path).name,
            "vecsched.mapping_sha256": _digest(Path(map_path))}
    out = output_path(out_dir, kind)
    write = write_demand if kind == "demand" else write_worker_groups
    try:
        table = write(data, out, metadata=meta)
    except TraceError as e:
        raise _schema_error(path.name, e, mapping.fields, kind, order) from None
    return ImportResult(out, kind, table.num_rows, table, notes)
