"""The trace tables' schema and validation (the file boundary of a replay).

Two tables (``data/README.md`` documents them column by column):

- **demand**: one row per request (a pod, a task, a gang member), with arrival,
  duration and resources. ``arrival_s`` is int64 or float64 seconds from trace start.
- **worker groups**: one row per node type, with capacity, ``gpu_model``,
  ``labels`` (an Arrow ``map<string, string>``, not JSON) and min/max workers.

**Version 2** adds optional columns (``V2_COLUMNS``): custom resources on both tables
(``resources``, an Arrow ``map<string, double>``) and, on demand, a per-node cap per
group of requests (``app``, ``max_per_node``). A table without them is a version-1 table
and reads as before (the readers add them as nulls); the writers leave them out when
they are all null, so a version-1 table is written as version 1, byte for byte.

Validation is strict and happens once, at the file boundary: a ``TraceError`` names the
table, the column and (when there is one) the first offending row. Writers
(``parquet.py``) coerce convenient inputs (a Table, a dict of columns, or a list of row
dicts) to the schema with ``coerce`` and validate before writing; readers validate what
they read.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional, Sequence, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

# ---- schema ----------------------------------------------------------------------------
LABELS_TYPE = pa.map_(pa.string(), pa.string())
RESOURCES_TYPE = pa.map_(pa.string(), pa.float64())

DEMAND_SCHEMA = pa.schema([
    pa.field("arrival_s", pa.int64(), nullable=False),     # or float64 (ARRIVAL_TYPES)
    pa.field("duration_s", pa.float64(), nullable=False),  # > 0
    pa.field("cpu", pa.float64(), nullable=False),         # cores
    pa.field("memory", pa.float64(), nullable=False),      # bytes
    pa.field("gpu", pa.float64(), nullable=False),         # a fraction only when <= 1
    pa.field("gpu_spec", pa.string()),                     # accepted models, 'A|B' = A or B
    pa.field("group_id", pa.string()),                     # gang id; null = independent
    pa.field("qos", pa.string()),
    pa.field("name", pa.string(), nullable=False),
    # version 2 (optional columns)
    pa.field("resources", RESOURCES_TYPE),                 # custom resources; null = none
    pa.field("app", pa.string()),                          # the group a per-node cap is of
    pa.field("max_per_node", pa.int64()),                  # at most this many of the app's
                                                           # requests per node; null = no cap
])
ARRIVAL_TYPES = (pa.int64(), pa.float64())

WORKER_GROUP_SCHEMA = pa.schema([
    pa.field("type", pa.string(), nullable=False),         # unique
    pa.field("cpu", pa.float64(), nullable=False),
    pa.field("memory", pa.float64(), nullable=False),      # bytes
    pa.field("gpu", pa.float64(), nullable=False),
    pa.field("gpu_model", pa.string()),                    # null for CPU-only types
    pa.field("labels", LABELS_TYPE),
    pa.field("min_workers", pa.int64(), nullable=False),
    pa.field("max_workers", pa.int64(), nullable=False),
    pa.field("price", pa.float64()),                       # per node-hour; null = unknown
    # version 2 (optional column)
    pa.field("resources", RESOURCES_TYPE),                 # custom resources; null = none
    # version 2, the cloud's side (optional columns; what a replay's simulated cloud does
    # for the group, docs/capacity.md)
    pa.field("capacity", pa.int64()),                      # live instances the cloud gives;
                                                           # null = unlimited
    pa.field("capacity_schedule", pa.string()),            # "TIME:N,TIME:N" (seconds, N or
                                                           # none) over the replay's time
    pa.field("launch_failure_rate", pa.float64()),         # P(a launch call errors)
    pa.field("spot", pa.bool_()),                          # a spot group (interrupted)
    pa.field("interruption_rate_per_h", pa.float64()),     # per running instance-hour
])

SCHEMA_VERSION = "2"
CLOUD_COLUMNS = ("capacity", "capacity_schedule", "launch_failure_rate", "spot",
                 "interruption_rate_per_h")
V2_COLUMNS = {"demand": ("resources", "app", "max_per_node"),
              "worker_groups": ("resources",) + CLOUD_COLUMNS}
# Custom resource names a table may not use: the columns and gpu_spec / gpu_model make
# these, and Ray reserves "node:" (node ids, and the implicit per-node slots that
# max_per_node becomes, ``mapping.cap_slot``).
RESERVED_RESOURCES = ("CPU", "GPU", "memory")
RESERVED_PREFIXES = ("node:", "accelerator_type:")
MIN_QUANTITY = 1e-4                # Ray refuses a nonzero quantity below 0.0001
MAX_PER_NODE = 100                 # Ray Serve's bound on max_replicas_per_node
ACCELERATOR_LABEL = "accelerator"              # node label holding the GPU model
ACCELERATOR_PREFIX = "accelerator_type:"       # Ray's accelerator marker resource
ACCELERATOR_DEMAND = 0.001                     # what Ray asks of the marker per request
OR_LIST_POLICIES = ("unconstrained", "first")


TableLike = Union[pa.Table, Mapping[str, Any], Sequence[Mapping[str, Any]]]


class TraceError(ValueError):
    """A trace table that breaks the schema, named by table, column and row."""

    def __init__(self, table: str, column: str, message: str, row: Optional[int] = None):
        self.table, self.column, self.row = table, column, row
        where = f"{table}.{column}" + (f" row {row}" if row is not None else "")
        super().__init__(f"{where}: {message}")


# ---- coercion (writers only) -----------------------------------------------------------
def _cast(col, field: pa.Field, kind: str):
    """Coerce one column to its schema type; numeric <-> numeric and string-like only."""
    t, want = col.type, field.type
    if field.name == "arrival_s" and t in ARRIVAL_TYPES:
        return col
    if t == want:
        return col
    if pa.types.is_null(t):
        return pa.nulls(len(col), want)      # all null: validation judges nullability
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t)
    ok = ((numeric and (pa.types.is_integer(want) or pa.types.is_floating(want)))
          or (pa.types.is_string(want) and (pa.types.is_large_string(t)
                                            or pa.types.is_dictionary(t)))
          or (pa.types.is_map(want) and pa.types.is_map(t)))
    if field.name == "arrival_s" and numeric:
        want = pa.int64() if pa.types.is_integer(t) else pa.float64()
    if ok:
        try:
            return col.cast(want, safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise TraceError(kind, field.name, f"cannot convert {t} to {want}: {e}") from None
    raise TraceError(kind, field.name, f"has type {t}, expected {want}")


def coerce(data: TableLike, schema: pa.Schema, kind: str) -> pa.Table:
    if isinstance(data, pa.Table):
        cols = {n: data.column(n) for n in data.column_names}
    elif isinstance(data, Mapping):
        cols = dict(data)
    else:
        rows = list(data)
        for i, r in enumerate(rows):
            for k in r:
                if k not in schema.names:
                    raise TraceError(kind, str(k), "unknown column", i)
            for f in schema:
                if not f.nullable and f.name not in r:
                    raise TraceError(kind, f.name, "missing value", i)
        cols = {f.name: [r.get(f.name) for r in rows] for f in schema}
    for k in cols:
        if k not in schema.names:
            raise TraceError(kind, str(k), "unknown column")
    n = len(next(iter(cols.values()))) if cols else 0
    arrays, fields = [], []
    for f in schema:
        if f.name in cols:
            col = cols[f.name]
        elif f.nullable:
            col = pa.nulls(n, f.type)
        else:
            raise TraceError(kind, f.name, "missing column")
        if not isinstance(col, (pa.Array, pa.ChunkedArray)):
            try:
                col = pa.array(col, type=f.type if pa.types.is_map(f.type) else None,
                               from_pandas=False)
            except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError) as e:
                raise TraceError(kind, f.name, f"cannot convert values: {e}") from None
        col = _cast(col, f, kind)
        arrays.append(col)
        fields.append(pa.field(f.name, col.type, nullable=f.nullable))
    try:
        return pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    except (pa.ArrowInvalid, ValueError) as e:
        raise TraceError(kind, "*", f"columns do not line up: {e}") from None


# ---- validation ------------------------------------------------------------------------
def _first(mask) -> Optional[int]:
    """Index of the first True of a boolean array (nulls count as False), else None."""
    m = np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)
    hit = np.flatnonzero(m)
    return int(hit[0]) if hit.size else None


def _check_layout(table: pa.Table, schema: pa.Schema, kind: str) -> pa.Table:
    """Check names, types and nullability; return the table with any missing version-2
    column added as nulls."""
    if not isinstance(table, pa.Table):
        raise TraceError(kind, "*", f"expected a pyarrow.Table, got {type(table).__name__}")
    names = table.column_names
    for n in names:
        if names.count(n) > 1:
            raise TraceError(kind, n, "column appears more than once")
        if n not in schema.names:
            raise TraceError(kind, n, "unknown column")
    for f in schema:
        if f.name not in names:
            if f.name in V2_COLUMNS[kind]:
                table = table.append_column(f, pa.nulls(table.num_rows, f.type))
                continue
            raise TraceError(kind, f.name, "missing column")
        t = table.schema.field(f.name).type
        if f.name == "arrival_s":
            good = t in ARRIVAL_TYPES
        elif pa.types.is_map(f.type):
            good = (pa.types.is_map(t) and t.key_type == f.type.key_type
                    and t.item_type == f.type.item_type)
        else:
            good = t == f.type
        if not good:
            raise TraceError(kind, f.name, f"has type {t}, expected {f.type}")
        col = table.column(f.name)
        if not f.nullable and col.null_count:
            raise TraceError(kind, f.name, "is null", _first(pc.is_null(col)))
        if pa.types.is_string(f.type):
            row = _first(pc.equal(pc.utf8_length(col), 0))
            if row is not None:
                raise TraceError(kind, f.name, "is an empty string (use null for none)", row)
    return table


def _check_resources(table: pa.Table, kind: str) -> None:
    """The ``resources`` maps: names not reserved, quantities Ray accepts."""
    col = table.column("resources")
    if col.null_count == len(col):
        return
    for i, entries in enumerate(col.to_pylist()):
        for k, v in entries or ():
            if not k or k in RESERVED_RESOURCES or k.startswith(RESERVED_PREFIXES):
                raise TraceError(kind, "resources", f"resource name {k!r} is reserved "
                                 f"({', '.join(RESERVED_RESOURCES)} and the prefixes "
                                 f"{', '.join(RESERVED_PREFIXES)} are made by the mapping)", i)
            if v is None or not math.isfinite(v) or v < 0 or 0 < v < MIN_QUANTITY:
                raise TraceError(kind, "resources", f"{k}={v!r}: a quantity is a finite "
                                 f"number, 0 or >= {MIN_QUANTITY:g}", i)


def _check_caps(table: pa.Table) -> None:
    """``max_per_node``: an integer in [1, MAX_PER_NODE], with an ``app``; a placement
    group (``group_id``) is capped only at 1 and all in one app. An app's cap may vary
    from row to row (a redeploy with a new cap): each request asks ``1 / its cap`` of
    the app's one per-node slot (``mapping.cap_slot``), as Ray Serve's replicas of a
    redeployed deployment do, so a node holds a mix whose shares sum to at most 1."""
    kind = "demand"
    caps = table.column("max_per_node").to_pylist()
    if all(c is None for c in caps):
        return
    apps = table.column("app").to_pylist()
    groups = table.column("group_id").to_pylist()
    group_of: dict[str, tuple[Optional[str], Optional[int], int]] = {}
    for i, (cap, app, gid) in enumerate(zip(caps, apps, groups)):
        if cap is not None:
            if not 1 <= cap <= MAX_PER_NODE:
                raise TraceError(kind, "max_per_node", f"must be within [1, {MAX_PER_NODE}] "
                                 f"(Ray Serve's max_replicas_per_node bound), got {cap}", i)
            if app is None:
                raise TraceError(kind, "app", "is null but max_per_node is set: a cap is "
                                 "per app", i)
        if gid is not None:
            seen_g = group_of.setdefault(gid, (app, cap, i))
            if (app, cap) != seen_g[:2] and (cap is not None or seen_g[1] is not None):
                raise TraceError(kind, "max_per_node", f"group_id {gid!r} mixes apps or "
                                 f"caps (row {seen_g[2]}): a capped placement group is one "
                                 f"app", i)
            if cap is not None and cap != 1:
                raise TraceError(kind, "max_per_node", f"is {cap} on a member of placement "
                                 f"group {gid!r}: inside a placement group Ray can only cap "
                                 f"at 1 per node (STRICT_SPREAD); Ray Serve refuses "
                                 f"max_replicas_per_node with placement_group_bundles", i)


def _numbers(table: pa.Table, name: str, kind: str, positive: bool = False) -> np.ndarray:
    """float64 values of a numeric column (nulls as NaN, already vetted), range-checked."""
    col = table.column(name)
    nulls = np.asarray(pc.is_null(col).to_numpy(zero_copy_only=False), dtype=bool)
    x = np.array(pc.fill_null(col.cast(pa.float64()), 0.0).to_numpy(zero_copy_only=False),
                   dtype=np.float64)
    bad = ~np.isfinite(x)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise TraceError(kind, name, f"is {x[i]} (NaN and infinities are not quantities)", i)
    low = (x <= 0) if positive else (x < 0)
    if low.any():
        i = int(np.flatnonzero(low)[0])
        raise TraceError(kind, name, f"must be {'>' if positive else '>='} 0, got {x[i]}", i)
    x[nulls] = np.nan
    return x


def validate_demand(table: pa.Table) -> pa.Table:
    """Check a demand table against DEMAND_SCHEMA; return it in schema column order."""
    kind = "demand"
    table = _check_layout(table, DEMAND_SCHEMA, kind)
    _numbers(table, "arrival_s", kind)
    _numbers(table, "duration_s", kind, positive=True)
    _numbers(table, "cpu", kind)
    _numbers(table, "memory", kind)
    gpu = _numbers(table, "gpu", kind)
    frac = np.flatnonzero((gpu > 1) & (gpu != np.floor(gpu)))
    if frac.size:
        i = int(frac[0])
        raise TraceError(kind, "gpu", f"a fraction of a GPU must be <= 1, got {gpu[i]}", i)
    for i, spec in enumerate(table.column("gpu_spec").to_pylist()):
        if spec is not None and not all(s.strip() == s and s for s in spec.split("|")):
            raise TraceError(kind, "gpu_spec", f"malformed OR-list {spec!r}", i)
    _check_resources(table, kind)
    _check_caps(table)
    return table.select(DEMAND_SCHEMA.names)


def validate_worker_groups(table: pa.Table) -> pa.Table:
    """Check a worker-group table against WORKER_GROUP_SCHEMA; return it in schema order."""
    kind = "worker_groups"
    table = _check_layout(table, WORKER_GROUP_SCHEMA, kind)
    seen: dict[str, int] = {}
    for i, name in enumerate(table.column("type").to_pylist()):
        if name in seen:
            raise TraceError(kind, "type", f"{name!r} is given twice (first at row {seen[name]})", i)
        seen[name] = i
    _numbers(table, "cpu", kind)
    _numbers(table, "memory", kind)
    gpu = _numbers(table, "gpu", kind)
    lo = _numbers(table, "min_workers", kind)
    hi = _numbers(table, "max_workers", kind)
    _numbers(table, "price", kind)
    over = np.flatnonzero(lo > hi)
    if over.size:
        i = int(over[0])
        raise TraceError(kind, "min_workers", f"{int(lo[i])} exceeds max_workers {int(hi[i])}", i)
    models = table.column("gpu_model").to_pylist()
    for i, (model, labels) in enumerate(zip(models, table.column("labels").to_pylist())):
        if model is not None and gpu[i] == 0:
            raise TraceError(kind, "gpu_model", f"is {model!r} but the type has no GPU", i)
        for k, v in labels or ():
            if not k or v is None:
                raise TraceError(kind, "labels", f"bad label {k!r}={v!r}", i)
            if k == ACCELERATOR_LABEL and model is not None and v != model:
                raise TraceError(kind, "labels", f"{k}={v!r} disagrees with gpu_model {model!r}", i)
    _check_resources(table, kind)
    _check_cloud(table, kind)
    return table.select(WORKER_GROUP_SCHEMA.names)


def capacity_schedule(text: str) -> tuple:
    """A ``capacity_schedule`` value, ``"0:10,600:2,1800:none"``, as ((0.0, 10), (600.0,
    2), (1800.0, None)): from each time on (seconds), that many live instances (none:
    unlimited). ValueError naming the bad part."""
    out = []
    for part in str(text).split(","):
        t, sep, c = part.strip().partition(":")
        try:
            at = float(t)
            cap = None if c.strip().lower() in ("", "none", "null") else int(c)
        except ValueError:
            at, cap = float("nan"), None
        if not sep or not math.isfinite(at) or at < 0 or (cap is not None and cap < 0):
            raise ValueError(f"{part.strip()!r} is not TIME:N (TIME >= 0 seconds, N >= 0 or "
                             f"none), e.g. 600:2")
        out.append((at, cap))
    times = [t for t, _ in out]
    if times != sorted(times):
        raise ValueError(f"times must ascend, got {times}")
    return tuple(out)


def _check_cloud(table: pa.Table, kind: str) -> None:
    """The cloud columns: capacity >= 0, rates in range, schedules that parse."""
    _numbers(table, "capacity", kind)
    rate = _numbers(table, "launch_failure_rate", kind)
    high = np.flatnonzero(rate > 1)
    if high.size:
        i = int(high[0])
        raise TraceError(kind, "launch_failure_rate", f"must be within [0, 1], got {rate[i]}", i)
    _numbers(table, "interruption_rate_per_h", kind)
    for i, text in enumerate(table.column("capacity_schedule").to_pylist()):
        if text is not None:
            try:
                capacity_schedule(text)
            except ValueError as e:
                raise TraceError(kind, "capacity_schedule", str(e), i) from None
