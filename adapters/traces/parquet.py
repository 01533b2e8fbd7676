"""Trace tables on disk: zstd Parquet reading and writing, and the bundled traces.

The bundled tables live in the repository's ``data/`` (the ``vecsched.data`` package) and
ship inside the wheel as package data (``data/README.md``: provenance, mapping and licence of each file).
Writers coerce and validate (``schema.coerce`` / ``validate_*``) before writing;
readers validate what they read. Output is deterministic: sorted metadata keys, one
compression setting, so re-writing a table gives the same bytes.
"""
from __future__ import annotations

from pathlib import Path
from typing import Mapping, Optional

import pyarrow as pa
import pyarrow.parquet as pq

import vecsched.data as _data

from .schema import (DEMAND_SCHEMA, SCHEMA_VERSION, V2_COLUMNS, WORKER_GROUP_SCHEMA, TableLike,
                     coerce, validate_demand, validate_worker_groups)

V1 = "1"

# ---- bundled data (package data: data/) -----------------------------
DATA_DIR = Path(_data.__file__).resolve().parent
BUNDLED = {
    "openb": "openb_pods.parquet",
    "openb_gpuspec33": "openb_gpuspec33_pods.parquet",
    "openb_cpu250": "openb_cpu250_pods.parquet",
    "openb_gpushare100": "openb_gpushare100_pods.parquet",
    "services": "services_pods.parquet",
    "services_nodes": "services_nodes.parquet",
    "services_mixgpu": "services_mixgpu_pods.parquet",
    "services_mixgpu_nodes": "services_mixgpu_nodes.parquet",
    "services_daily": "services_daily_pods.parquet",
    "openb_nodes": "openb_nodes.parquet",
    "pai2020_nodes": "pai2020_nodes.parquet",
    "spot2026_nodes": "spot2026_nodes.parquet",
}
TRACES = {                                      # trace name -> (demand, worker groups)
    "openb": ("openb", "openb_nodes"),
    "openb_gpuspec33": ("openb_gpuspec33", "openb_nodes"),
    "openb_cpu250": ("openb_cpu250", "openb_nodes"),
    "openb_gpushare100": ("openb_gpushare100", "openb_nodes"),
    "services": ("services", "services_nodes"),   # synthetic (synth_services.py)
    "services_mixgpu": ("services_mixgpu", "services_mixgpu_nodes"),     # the same
    "services_daily": ("services_daily", "services_nodes"),              # the same
}
DEFAULT_TRACE = "openb"
WORKER_GROUP_SETS = ("openb_nodes", "pai2020_nodes", "spot2026_nodes")


def _write(table: pa.Table, path, kind: str, schema: pa.Schema,
           metadata: Optional[Mapping[str, str]]) -> None:
    # The smallest version that holds the data: version-2 columns that are all null are
    # left out, and a table without any is written as version 1 (as before version 2).
    empty = [n for n in V2_COLUMNS[kind] if table.column(n).null_count == table.num_rows]
    table = table.drop_columns(empty)
    version = SCHEMA_VERSION if len(empty) < len(V2_COLUMNS[kind]) else V1
    fields = [pa.field(f.name, table.schema.field(f.name).type, nullable=f.nullable)
              for f in schema if f.name not in empty]
    meta = {"vecsched.table": kind, "vecsched.schema_version": version}
    meta.update({str(k): str(v) for k, v in (metadata or {}).items()})
    meta = {k: meta[k] for k in sorted(meta)}      # sorted: byte-identical re-writes
    table = table.cast(pa.schema(fields, metadata=meta))
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, str(path), compression="zstd", compression_level=19,
                   use_dictionary=True, write_statistics=True)


def write_demand(data: TableLike, path, *, metadata: Optional[Mapping[str, str]] = None
                 ) -> pa.Table:
    """Coerce ``data`` (Table, dict of columns, or row dicts), validate, write zstd Parquet."""
    table = validate_demand(coerce(data, DEMAND_SCHEMA, "demand"))
    _write(table, path, "demand", DEMAND_SCHEMA, metadata)
    return table


def write_worker_groups(data: TableLike, path, *,
                        metadata: Optional[Mapping[str, str]] = None) -> pa.Table:
    """Coerce ``data`` (Table, dict of columns, or row dicts), validate, write zstd Parquet."""
    table = validate_worker_groups(coerce(data, WORKER_GROUP_SCHEMA, "worker_groups"))
    _write(table, path, "worker_groups", WORKER_GROUP_SCHEMA, metadata)
    return table


def read_demand(path) -> pa.Table:
    return validate_demand(pq.read_table(str(path)))


def read_worker_groups(path) -> pa.Table:
    return validate_worker_groups(pq.read_table(str(path)))


def bundled(name: str, data_dir=None) -> Path:
    """Path of a bundled Parquet file by dataset name (a key of BUNDLED or its file stem)."""
    by_stem = {Path(f).stem: f for f in BUNDLED.values()}
    if name in BUNDLED:
        fname = BUNDLED[name]
    elif name in by_stem:
        fname = by_stem[name]
    else:
        raise KeyError(f"unknown bundled dataset {name!r}; known: {', '.join(BUNDLED)}")
    path = Path(data_dir) if data_dir is not None else DATA_DIR
    path = path / fname
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `python -m vecsched.adapters.traces.build`")
    return path


def bundled_trace(name: str = DEFAULT_TRACE, data_dir=None) -> tuple[Path, Path]:
    """(demand path, worker-group path) of a bundled trace (a key of TRACES)."""
    if name not in TRACES:
        raise KeyError(f"unknown bundled trace {name!r}; known: {', '.join(TRACES)}")
    demand, groups = TRACES[name]
    return bundled(demand, data_dir), bundled(groups, data_dir)
