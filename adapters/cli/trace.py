"""`vecsched trace import`: a CSV trace and a mapping file to the project's demand (or
worker-group) Parquet table (``vecsched.adapters.traces.csv_import``).

Prints what it wrote and how to replay it; a CSV or mapping it cannot use is one line
``error: ...`` naming the column and row, exit status 2.
"""
from __future__ import annotations

import sys
import time


def register(sub) -> None:
    """Add ``trace import`` to the ``vecsched`` subcommands."""
    t = sub.add_parser("trace", help="bring your own trace: import a CSV to the demand schema",
                       description="Work with your own traces (docs/traces.md).")
    tsub = t.add_subparsers(dest="trace_cmd", required=True)
    i = tsub.add_parser("import", help="a CSV and a mapping file to DIR/demand.parquet "
                                       "(or DIR/groups.parquet with --kind groups)",
                        description="Convert a CSV trace with a TOML mapping file (see "
                                    "data/examples/openb.map.toml and docs/traces.md).")
    i.add_argument("csv", help="the CSV file (a header line, one row per request or node)")
    i.add_argument("--map", required=True, dest="map_path", help="the TOML mapping file")
    i.add_argument("--out", required=True, help="output directory")
    i.add_argument("--kind", choices=("demand", "groups"), default="demand",
                   help="demand rows (default) or worker groups")
    i.set_defaults(fn=run_import)


def _describe(result) -> list[str]:
    """Lines saying what was written."""
    import numpy as np
    t = result.table
    lines = [f"wrote {result.path} ({result.rows} rows)"]
    if result.kind == "demand":
        arr = t.column("arrival_s").to_numpy().astype(float)
        dur = t.column("duration_s").to_numpy()
        gpu = t.column("gpu").to_numpy()
        lines.append(f"arrivals {arr.min():g} .. {arr.max():g} s (span {(arr.max() - arr.min()) / 86400:.1f} "
                     f"days); run median {float(np.median(dur)):g} s; {int((gpu > 0).sum())} rows "
                     f"ask for GPUs")
        lines.append(f"replay it: vecsched replay {result.path} --from 0 --duration 1h "
                     f"(worker groups: the bundled openb ones, or --groups FILE)")
    else:
        lines.append("groups: " + ", ".join(
            f"{n} x{m}" for n, m in zip(t.column("type").to_pylist(),
                                        t.column("max_workers").to_pylist())))
    return lines


def run_import(args) -> int:
    from vecsched.adapters.traces.csv_import import CsvImportError, import_csv
    from vecsched.adapters.traces.map_file import MappingError
    t0 = time.perf_counter()
    try:
        result = import_csv(args.csv, args.map_path, args.out, kind=args.kind)
    except (CsvImportError, MappingError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"error: {e.filename or args.out}: {e.strerror or e}", file=sys.stderr)
        return 2
    for line in _describe(result) + result.notes:
        print(line)
    print(f"import time: {time.perf_counter() - t0:.2f} s")
    return 0
