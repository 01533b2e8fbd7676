"""`vecsched sweep GRID.toml --out DIR [--address ADDR]`: a grid of replays run as Ray
tasks (``vecsched.adapters.sweep``; the grid file: docs/sweep.md).

Prints a progress line as each cell finishes, then the non-dominated cells (cost or
GPU-hours against pending p95; one front per price list, as costs from different
catalogues do not compare) and writes ``DIR/results.parquet`` and ``DIR/pareto.png``;
the last line is ``cells run N, skipped M``. A grid file it cannot run, an ``--out``
that is not a writable directory, or an ``--out`` another sweep is writing
(``DIR/.sweep.lock``) is one ``error:`` line, exit 2, before Ray starts; exit 1 when
a cell failed.
"""
from __future__ import annotations

import sys
from pathlib import Path


def register(sub) -> None:
    """Add ``sweep`` to the ``vecsched`` subcommands."""
    s = sub.add_parser("sweep", help="a grid of replays run as Ray tasks, resumable",
                       description="Run every cell of a grid file (workloads x schedulers x "
                                   "catalogues x seeds x knobs) as a Ray task; cells already "
                                   "in DIR/results.parquet are skipped (docs/sweep.md).")
    s.add_argument("grid", help="the grid file (TOML), e.g. data/examples/sweep-small.toml")
    s.add_argument("--out", required=True,
                   help="output directory (results.parquet, pareto.png); one sweep at a time "
                        "(a second one on the same --out refuses)")
    s.add_argument("--address", default=None,
                   help="a running Ray cluster's address (default: start Ray locally)")
    s.add_argument("--num-cpus", type=int, default=None,
                   help="CPUs of the local Ray (default: all); ignored with --address")
    s.set_defaults(fn=run)


def _label(row: dict) -> str:
    cat = f" {row['catalogue']}" if row.get("catalogue") else ""
    return f"{row['scheduler']}{cat} idle {row['idle_timeout_s']:g}s seed {row['seed']}"


def report(outcome, grid, out_dir, echo=print) -> None:
    """The non-dominated cells (per price list), and the plot when matplotlib is there."""
    from vecsched.adapters.sweep.results import Y, front, pareto_x, plot, price_lists
    rows = outcome.rows
    if not rows:
        return
    x = pareto_x(rows, grid.pareto_x)
    for name, pts in sorted(price_lists(rows, x).items()):
        best = front(pts, x)
        per = f" at {name} prices" if name else ""
        echo(f"non-dominated cells{per} ({x} against pending p95), {len(best)} of {len(pts)}:")
        for r in best:
            echo(f"  {r['workload']} {_label(r)}: {x} {r[x]:,.1f}, pending p95 {r[Y]:.0f} s "
                 f"(key {r['key']})")
    try:
        path = plot(rows, x, out_dir, _label)
    except ImportError:
        echo("(no pareto.png: matplotlib is not installed; pip install 'vecsched[cli]')")
    else:
        echo(f"results: {Path(out_dir) / 'results.parquet'}; plot: {path}")


def run(args) -> int:
    from vecsched.adapters.sweep import GridError, SweepLock, read, run_sweep
    from .errors import check_output_dir
    try:
        grid = read(args.grid)
    except GridError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.num_cpus is not None and args.num_cpus < 1:
        print(f"error: --num-cpus must be >= 1, got {args.num_cpus}", file=sys.stderr)
        return 2
    check_output_dir(args.out, "--out")             # a file, or not writable: before Ray
    try:
        with SweepLock(args.out):
            outcome = run_sweep(grid, args.out, address=args.address, num_cpus=args.num_cpus,
                                echo=lambda line: print(line, flush=True), lock=False)
            report(outcome, grid, args.out)
    except ValueError as e:                         # SweepLocked, an unreadable table
        print(f"error: {e}", file=sys.stderr)
        return 2
    for label, msg in outcome.failed:
        print(f"failed: {label}: {msg}")
    print(f"sweep wall time: {outcome.wall_s:.1f} s")
    print(f"cells run {outcome.run}, skipped {outcome.skipped}", flush=True)
    return 1 if outcome.failed else 0
