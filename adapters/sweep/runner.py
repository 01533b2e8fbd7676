"""Running a sweep's cells as Ray tasks, resumably.

``run_sweep(grid, out_dir)`` locks ``out_dir`` (``lock.py``: a second sweep there
refuses with ``SweepLocked`` before starting Ray), skips the cells whose key is already
in ``out_dir/results.parquet``, submits the others as Ray tasks (one CPU each), and, as
each finishes, merges its row into the table (rewritten atomically) and reports a
progress line. Ray is started locally (``ray.init()``) unless ``address`` names a running
cluster; a Ray already initialised in this process is used as it is and left running.
On a cluster every node needs vecsched installed (and any trace file given by path at
the same path). A cell that raises is reported and left out of the table, so the next
run tries it again.

Cells are independent and deterministic (``cell.py``), so the order they finish in
does not change the table (its rows are sorted by grid order) nor any metric but the
wall-clock ones.
"""
from __future__ import annotations

import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable, Optional

from .grid import Grid
from .lock import SweepLock
from .results import RESULTS, read_rows, write_rows


@dataclass
class SweepOutcome:
    """What one ``run_sweep`` did: cells run (finished), skipped (already there),
    failed (with their errors), the rows of the grid's cells, and the wall time."""
    run: int = 0
    skipped: int = 0
    failed: list = field(default_factory=list)
    rows: list = field(default_factory=list)
    wall_s: float = 0.0


def _task(params: dict) -> dict:
    """The Ray task: one cell's row."""
    import logging
    logging.getLogger("ray.autoscaler").setLevel(logging.ERROR)
    from .cell import run_cell
    return run_cell(params)


def _progress_line(k: int, n: int, label: str, row: dict, seconds: float) -> str:
    cost = "-" if row.get("cost") is None else f"{row['cost']:,.1f}"
    return (f"[{k}/{n}] {label}: pending p95 {row['pending_p95_s']:.0f} s, cost {cost}, "
            f"GPU-h {row['gpu_hours']:.1f}, never placed {row['never_placed']} "
            f"(done {seconds:.1f} s after its submission)")


def _start_ray(address: Optional[str], num_cpus: Optional[int]):
    """(ray module, whether this call started it)."""
    import ray
    if ray.is_initialized():
        return ray, False
    kwargs = dict(include_dashboard=False, log_to_driver=False, logging_level="ERROR",
                  configure_logging=True)
    if address:
        ray.init(address=address, **kwargs)
    else:
        ray.init(num_cpus=num_cpus, **kwargs)
    return ray, True


def run_sweep(grid: Grid, out_dir, *, address: Optional[str] = None,
              num_cpus: Optional[int] = None, echo: Callable[[str], None] = print,
              clock: Callable[[], float] = time.perf_counter,
              lock: bool = True) -> SweepOutcome:
    """Run the grid's missing cells (see the module docstring). ``lock`` False: the
    caller holds ``out_dir``'s ``SweepLock``."""
    if lock:
        with SweepLock(out_dir):
            return run_sweep(grid, out_dir, address=address, num_cpus=num_cpus, echo=echo,
                             clock=clock, lock=False)
    t0 = clock()
    rows = read_rows(out_dir)
    done = {r["key"] for r in rows}
    order: dict[str, int] = {}
    todo = []
    for c in grid.cells:
        if c.key in order:
            continue
        order[c.key] = c.index
        if c.key not in done:
            todo.append(c)
    out = SweepOutcome(skipped=len(order) - len(todo))
    echo(f"{len(order)} cells; {out.skipped} already in {Path(out_dir) / RESULTS}, "
         f"{len(todo)} to run")
    if todo:
        ray, started = _start_ray(address, num_cpus)
        try:
            cpus = int(ray.cluster_resources().get("CPU", 0))
            echo(f"running on Ray ({address or 'local'}, {cpus} CPUs): one task per cell")
            task = ray.remote(num_cpus=1)(_task)
            pending = {task.remote(c.params): (c, clock()) for c in todo}
            k = 0
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1)
                cell, since = pending.pop(ready[0])
                k += 1
                try:
                    row = ray.get(ready[0])
                except Exception as e:        # a cell's error: report it, go on
                    msg = str(e).strip().splitlines()[-1] if str(e).strip() else repr(e)
                    out.failed.append((cell.label, msg))
                    echo(f"[{k}/{len(todo)}] {cell.label}: FAILED: {msg}")
                    continue
                rows.append(row)
                write_rows(out_dir, rows, order)
                out.run += 1
                echo(_progress_line(k, len(todo), cell.label, row, clock() - since))
        finally:
            if started:
                ray.shutdown()
    out.rows = sorted((r for r in rows if r["key"] in order), key=lambda r: order[r["key"]])
    out.wall_s = clock() - t0
    return out
