"""The mapping file of ``vecsched trace import``: which CSV columns make which fields of
the project's demand or worker-group schema (``schema.py``), and in which units.

A TOML file (read with the standard library's ``tomllib``) with up to three tables::

    [units]                       # optional; the defaults are shown
    time = "s"                    # s, ms, us, ns, min, h, d, or "iso8601" (timestamps)
    memory = "B"                  # B, KB, MB, GB, TB, KiB, MiB, GiB, TiB
    cpu = "cores"                 # cores or millicores
    gpu = "gpus"                  # gpus or milligpus

    [demand]                      # one output row per CSV row
    arrival = "submit_time"       # required
    departure = "end_time"        # or: duration = "runtime" (exactly one of the two)
    started = "start_time"        # optional: the run starts here (empty cells: at arrival)
    min_duration_s = 1            # optional: shorter runs are raised to this (default: error)
    cpu = "cpu_milli"             # expressions (``expressions.py``); unmapped: 0
    memory = "mem_mib"
    gpu = "gpu_milli / 1000 if num_gpu == 1 else num_gpu"
    gpu_spec = "gpu_type"         # text fields: a column or a text expression
    qos = "qos"
    name = "pod"                  # unmapped: row-<n>
    group_id = "job"              # gang id (placement group); app / max_per_node: caps
    app = 'service + "." + role'  # text expressions join with +
    max_per_node = "null if max_inst < 0 else max_inst"   # null: no cap
    [demand.resources]            # custom resources: name = expression
    rdma = "rdma_share"

    [groups]                      # worker groups (``--kind groups``)
    type = "node_type"            # or aggregate = true: one group per distinct shape
    aggregate = false             # true: max_workers = rows of that shape (a node list)
    cpu = "cpu"; memory = "mem"; gpu = "gpus"; gpu_model = "model"
    min_workers = "0"; max_workers = "max_nodes"; price = "usd_per_hour"
    capacity = "quota"            # optional, what a replay's simulated cloud does for the
    capacity_schedule = "quota_by_time"    # group: capacity (null: unlimited) or a
    launch_failure_rate = "0.05"  # schedule "TIME:N,...", launch failure rate, spot
    spot = "is_spot"              # (nonzero: true) and its interruptions per hour
    interruption_rate_per_h = "0.1"
    [groups.resources]
    [groups.labels]               # label name = column

``[units]`` convert cpu, memory, gpu and the times (of both tables); custom resources
are taken as their expressions give them. Every key is checked: an unknown key, a
wrong type, an unknown unit or a constant that is not finite is a ``MappingError``
naming the key. Expressions are parsed when the CSV's header is known
(``csv_import``), so a column the CSV lacks is named there.
"""
from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "min": 60.0, "h": 3600.0,
              "d": 86400.0}
ISO = "iso8601"
MEMORY_UNITS = {"B": 1.0, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12, "KiB": 2.0 ** 10,
                "MiB": 2.0 ** 20, "GiB": 2.0 ** 30, "TiB": 2.0 ** 40}
CPU_UNITS = {"cores": 1.0, "millicores": 1e-3}
GPU_UNITS = {"gpus": 1.0, "milligpus": 1e-3}
KINDS = ("demand", "groups")

DEMAND_NUMBERS = ("cpu", "memory", "gpu")
DEMAND_TEXT = ("gpu_spec", "qos", "name", "group_id", "app")
DEMAND_TIMES = ("arrival", "departure", "duration", "started")
DEMAND_KEYS = DEMAND_TIMES + DEMAND_NUMBERS + DEMAND_TEXT + (
    "max_per_node", "min_duration_s", "resources")
GROUP_NUMBERS = ("cpu", "memory", "gpu", "min_workers", "max_workers", "price")
GROUP_CLOUD = ("capacity", "capacity_schedule", "launch_failure_rate", "spot",
               "interruption_rate_per_h")      # optional, not with aggregate = true
GROUP_KEYS = GROUP_NUMBERS + ("type", "gpu_model", "aggregate", "resources", "labels") \
    + GROUP_CLOUD


class MappingError(ValueError):
    """A mapping file that cannot be used, naming the file and the key."""

    def __init__(self, where: str, message: str):
        self.where = where
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Units:
    time: str = "s"
    memory: str = "B"
    cpu: str = "cores"
    gpu: str = "gpus"

    @property
    def seconds(self) -> float:
        """Seconds per time unit (1 for ISO timestamps, which are read as seconds)."""
        return 1.0 if self.time == ISO else TIME_UNITS[self.time]


@dataclass(frozen=True)
class Mapping:
    """One section of a mapping file: ``fields`` maps an output field to its expression
    (or column name), ``resources`` / ``labels`` a name to an expression / column."""
    kind: str
    fields: dict
    units: Units
    resources: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    min_duration_s: Optional[float] = None
    aggregate: bool = False
    source: str = "mapping"


def _strings(where: str, table) -> dict:
    if not isinstance(table, dict):
        raise MappingError(where, f"must be a table of name = \"expression\", got {table!r}")
    for k, v in table.items():
        if not isinstance(v, str) or not v.strip():
            raise MappingError(f"{where}.{k}", f"must be a non-empty string, got {v!r}")
    return dict(table)


def _units(src: str, raw) -> Units:
    raw = raw or {}
    if not isinstance(raw, dict):
        raise MappingError(f"{src} [units]", "must be a table")
    allowed = {"time": list(TIME_UNITS) + [ISO], "memory": list(MEMORY_UNITS),
               "cpu": list(CPU_UNITS), "gpu": list(GPU_UNITS)}
    for k, v in raw.items():
        if k not in allowed:
            raise MappingError(f"{src} units.{k}", f"unknown key (known: {', '.join(allowed)})")
        if v not in allowed[k]:
            raise MappingError(f"{src} units.{k}", f"unknown unit {v!r} (known: "
                               f"{', '.join(allowed[k])})")
    return Units(**raw)


def parse(doc: dict, kind: str, source: str = "mapping") -> Mapping:
    """The ``kind`` section of a parsed mapping document."""
    if kind not in KINDS:
        raise MappingError(source, f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    for k in doc:
        if k not in ("units",) + KINDS:
            raise MappingError(f"{source} [{k}]", "unknown table (known: units, demand, groups)")
    if kind not in doc:
        raise MappingError(source, f"has no [{kind}] table")
    sec = doc[kind]
    if not isinstance(sec, dict):
        raise MappingError(f"{source} [{kind}]", "must be a table")
    keys = DEMAND_KEYS if kind == "demand" else GROUP_KEYS
    fields: dict = {}
    for k, v in sec.items():
        where = f"{source} {kind}.{k}"
        if k not in keys:
            raise MappingError(where, f"unknown key (known: {', '.join(keys)})")
        if k in ("resources", "labels", "min_duration_s", "aggregate"):
            continue
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if not math.isfinite(v):
                raise MappingError(where, f"must be a finite number, got {v!r}")
            v = repr(v)                       # a constant, e.g. min_workers = 0
        if not isinstance(v, str) or not v.strip():
            raise MappingError(where, f"must be a column name or an expression, got {v!r}")
        fields[k] = v
    units = _units(source, doc.get("units"))
    min_dur = sec.get("min_duration_s")
    if min_dur is not None and (isinstance(min_dur, bool) or not isinstance(min_dur, (int, float))
                                or not 0 < min_dur < math.inf):
        raise MappingError(f"{source} {kind}.min_duration_s", f"must be a finite number > 0 "
                           f"(seconds), got {min_dur!r}")
    aggregate = sec.get("aggregate", False)
    if not isinstance(aggregate, bool):
        raise MappingError(f"{source} {kind}.aggregate", f"must be true or false, got {aggregate!r}")
    _check_required(source, kind, fields, aggregate, units)
    return Mapping(kind, fields, units,
                   resources=_strings(f"{source} {kind}.resources", sec.get("resources", {})),
                   labels=_strings(f"{source} {kind}.labels", sec.get("labels", {})),
                   min_duration_s=None if min_dur is None else float(min_dur),
                   aggregate=aggregate, source=source)


def _check_required(source: str, kind: str, fields: dict, aggregate: bool, units: Units):
    if kind == "demand":
        if "arrival" not in fields:
            raise MappingError(f"{source} demand.arrival", "is required")
        if ("departure" in fields) == ("duration" in fields):
            raise MappingError(f"{source} demand.departure",
                               "give exactly one of departure and duration")
        if "started" in fields and "departure" not in fields:
            raise MappingError(f"{source} demand.started", "needs departure (a run from "
                               "started to departure)")
        if units.time == ISO and "duration" in fields:
            raise MappingError(f"{source} demand.duration", "with ISO timestamps give "
                               "departure, not a duration")
        return
    if aggregate and ("type" in fields or "max_workers" in fields):
        raise MappingError(f"{source} groups.aggregate", "aggregate = true names the types "
                           "and counts the rows itself: leave out type and max_workers")
    if not aggregate:
        for k in ("type", "max_workers"):
            if k not in fields:
                raise MappingError(f"{source} groups.{k}", "is required (or aggregate = true "
                                   "for a node list)")
    for k in ("cpu", "memory"):
        if k not in fields:
            raise MappingError(f"{source} groups.{k}", "is required")


def read(path, kind: str) -> Mapping:
    """The ``kind`` section of the TOML mapping file at ``path``."""
    p = Path(path)
    if not p.is_file():
        raise MappingError(str(path), "no such file")
    try:
        doc = tomllib.loads(p.read_text(encoding="utf-8-sig"))   # a BOM is dropped
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise MappingError(str(path), f"is not valid TOML: {e}") from None
    return parse(doc, kind, p.name)
