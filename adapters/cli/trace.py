"""`vecsched trace import`: a CSV trace and a mapping file to the project's demand (or
worker-group) Parquet table (``vecsched.adapters.traces.csv_import``).

Prints what it wrote and how to replay it; a CSV or mapping it cannot use is one line
``error: ...`` naming the column and row, exit status 2. ``--out`` is a directory (the
import writes ``demand.parquet`` or ``groups.parquet`` in it) or a ``.parquet`` file; an
existing output file is replaced only with ``--force``.

The "replay it" hint names worker groups that can hold every imported row: the
``groups.parquet`` beside the output when there is one, else the bundled openb groups;
when neither can (a custom resource or GPU model they lack), it says what is missing
and how to import worker groups instead of printing a replay that could place nothing.
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
    i.add_argument("--out", required=True,
                   help="output directory (DIR/demand.parquet or DIR/groups.parquet is "
                        "written), or the .parquet file to write")
    i.add_argument("--force", action="store_true",
                   help="replace an output file that exists (an earlier import)")
    i.add_argument("--kind", choices=("demand", "groups"), default="demand",
                   help="demand rows (default) or worker groups")
    i.set_defaults(fn=run_import)


def _hint(result) -> list[str]:
    """How to replay the imported demand, on worker groups that can hold it."""
    from pathlib import Path

    from vecsched.adapters.traces import bundled, read_worker_groups
    from vecsched.adapters.traces.fit import demand_gaps
    arr = result.table.column("arrival_s").to_numpy().astype(float)
    window = f"--from {arr.min():g} --duration 1h"
    beside = result.path.parent / "groups.parquet"
    if beside.is_file():
        groups, option, name = beside, f" --groups {beside}", str(beside)
    else:
        groups, option, name = bundled("openb_nodes"), "", "the bundled openb worker groups"
    try:
        g = demand_gaps(result.table, read_worker_groups(groups))
    except (ValueError, OSError) as e:         # an unreadable groups.parquet: say so
        return [f"replay it: vecsched replay {result.path} --groups FILE {window} ({groups} "
                f"could not be read to check it: {e})"]
    if not g.unplaceable:
        return [f"replay it: vecsched replay {result.path}{option} {window} (worker groups: "
                f"{name}; --groups FILE for others)"]
    lines = [f"{name} cannot hold {g.unplaceable} of the {g.units} rows: {g.describe()}"]
    folder = Path(result.path).parent
    lines.append(f"replay it on worker groups that can: import them (vecsched trace import "
                 f"NODES.csv --map MAP.toml --kind groups --out {folder}), then vecsched "
                 f"replay {result.path} --groups {folder / 'groups.parquet'} {window}")
    return lines


def _describe(result) -> list[str]:
    """Lines saying what was written."""
    import numpy as np
    t = result.table
    lines = [f"wrote {result.path} ({result.rows} rows)"]
    if result.kind == "demand":
        arr = t.column("arrival_s").to_numpy().astype(float)
        dur = t.column("duration_s").to_numpy()
        gpu = t.column("gpu").to_numpy()
        span = arr.max() - arr.min()
        span = f"{span / 86400:.1f} days" if span >= 2 * 86400 else f"{span / 3600:.1f} h"
        lines.append(f"arrivals {arr.min():g} .. {arr.max():g} s (span {span}); run median "
                     f"{float(np.median(dur)):g} s; {int((gpu > 0).sum())} rows ask for GPUs")
        lines += _hint(result)
    else:
        lines.append("groups: " + ", ".join(
            f"{n} x{m}" for n, m in zip(t.column("type").to_pylist(),
                                        t.column("max_workers").to_pylist())))
    return lines


def _check_out(args) -> None:
    """Refuse an ``--out`` the import cannot write, before reading anything."""
    from pathlib import Path

    from vecsched.adapters.traces.csv_import import output_path
    from .errors import UsageError
    out = Path(args.out)
    target = output_path(out, args.kind)
    if out.exists() and not out.is_dir() and target != out:
        raise UsageError(f"--out {args.out}: is a file; --out names the directory the import "
                         f"writes {target.name} into, or a .parquet file to write: give "
                         f"another path")
    if target.exists() and not args.force:
        raise UsageError(f"--out {args.out}: {target} exists (an earlier import?): --force "
                         f"replaces it, or give another --out")
    if target.is_dir():
        raise UsageError(f"--out {args.out}: {target} is a directory: give another --out")


def run_import(args) -> int:
    from vecsched.adapters.traces.csv_import import CsvImportError, import_csv
    from vecsched.adapters.traces.map_file import MappingError
    t0 = time.perf_counter()
    _check_out(args)
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
