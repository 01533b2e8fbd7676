"""Recorded traces as Arrow tables: the schema and its validation (``schema``), zstd
Parquet I/O and the bundled traces shipped as package data (``parquet``), and the
mapping of rows to engine inputs (``mapping``); a CSV of your own to those tables with a
TOML mapping file (``csv_import``, ``map_file``, ``expressions``; ``vecsched trace
import``, docs/traces.md). ``data/README.md`` documents the
tables column by column, how each bundled file was derived, and their licences.

    from vecsched.adapters import traces as T
    demand = T.read_demand(T.bundled("openb"))          # validated pyarrow.Table

Trace I/O lives here, in the adapters: the engine does no I/O.
"""
from .mapping import (cap_slot, demand_selector, demand_shape, gpu_spec_options,
                      or_list_count, worker_group_specs)
from .parquet import (BUNDLED, DATA_DIR, DEFAULT_TRACE, TRACES, WORKER_GROUP_SETS, bundled,
                      bundled_trace, read_demand, read_worker_groups, write_demand,
                      write_worker_groups)
from .schema import (ACCELERATOR_DEMAND, ACCELERATOR_LABEL, ACCELERATOR_PREFIX, ARRIVAL_TYPES,
                     DEMAND_SCHEMA, LABELS_TYPE, MAX_PER_NODE, OR_LIST_POLICIES,
                     RESOURCES_TYPE, SCHEMA_VERSION, V2_COLUMNS, WORKER_GROUP_SCHEMA,
                     TraceError, coerce, validate_demand, validate_worker_groups)

__all__ = [
    "ACCELERATOR_DEMAND", "ACCELERATOR_LABEL", "ACCELERATOR_PREFIX", "ARRIVAL_TYPES", "BUNDLED",
    "DATA_DIR", "DEFAULT_TRACE", "DEMAND_SCHEMA", "LABELS_TYPE", "MAX_PER_NODE",
    "OR_LIST_POLICIES", "RESOURCES_TYPE", "SCHEMA_VERSION", "TRACES", "V2_COLUMNS",
    "WORKER_GROUP_SCHEMA", "WORKER_GROUP_SETS", "TraceError", "bundled", "bundled_trace",
    "cap_slot", "coerce", "demand_selector", "demand_shape", "gpu_spec_options",
    "or_list_count", "read_demand", "read_worker_groups", "validate_demand",
    "validate_worker_groups", "worker_group_specs", "write_demand", "write_worker_groups",
]
