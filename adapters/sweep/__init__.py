"""What-if sweeps: a grid of replays (workloads x schedulers x catalogues x seeds x
knobs) run as Ray tasks, resumable, with one results table and its Pareto front.

| module | what it owns |
|---|---|
| ``grid.py`` | the grid file (TOML): workloads, catalogues, axes; cells and their keys |
| ``cell.py`` | one cell: its parameters to one replay and one row |
| ``runner.py`` | the cells as Ray tasks; skipping the cells already done; progress |
| ``results.py`` | results.parquet (merged, written atomically), the Pareto front and its plot |
| ``lock.py`` | one sweep at a time on an output directory (``DIR/.sweep.lock``) |

``vecsched sweep GRID.toml --out DIR [--address ADDR]`` (``adapters/cli/sweep.py``)
runs it; ``docs/sweep.md`` documents the grid file.
"""
from .cell import catalogue_table, run_cell
from .grid import Cell, Grid, GridError, cell_key, parse, read
from .lock import SweepLock, SweepLocked
from .results import front, pareto_x, price_lists, read_rows
from .runner import SweepOutcome, run_sweep

__all__ = ["Cell", "Grid", "GridError", "SweepLock", "SweepLocked", "SweepOutcome",
           "catalogue_table", "cell_key", "front", "pareto_x", "parse", "price_lists", "read",
           "read_rows", "run_cell", "run_sweep"]
