"""What-if sweeps: a grid of replays (workloads x schedulers x catalogues x seeds x
knobs) run as Ray tasks, resumable, with one results table and its Pareto front.

| module | what it owns |
|---|---|
| ``grid.py`` | the grid file (TOML): workloads, catalogues, axes; cells and their keys |
| ``cell.py`` | one cell: its parameters to one replay and one row |
| ``runner.py`` | the cells as Ray tasks; skipping the cells already done; progress |
| ``results.py`` | results.parquet, the Pareto front and its plot |

``vecsched sweep GRID.toml --out DIR [--address ADDR]`` (``adapters/cli/sweep.py``)
runs it; ``docs/sweep.md`` documents the grid file.
"""
from .cell import catalogue_table, run_cell
from .grid import Cell, Grid, GridError, cell_key, parse, read
from .results import front, pareto_x, read_rows
from .runner import SweepOutcome, run_sweep

__all__ = ["Cell", "Grid", "GridError", "SweepOutcome", "catalogue_table", "cell_key", "front",
           "pareto_x", "parse", "read", "read_rows", "run_cell", "run_sweep"]
