"""A sweep's results on disk: one Parquet table, one row a cell (``cell.row``), keyed by
the cell's ``key``; and the Pareto front of cost (or GPU-hours) against pending p95.

The table is rewritten whole after every finished cell (to a temporary file, then
renamed over the old one), so a sweep stopped at any point leaves a readable table of
the cells done, and the next run skips them. Rows are written in a stable order (the
current grid's order, then rows of earlier grids by key).
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Optional

import pyarrow as pa
import pyarrow.parquet as pq

RESULTS = "results.parquet"
PARETO_PNG = "pareto.png"
Y = "pending_p95_s"


def read_rows(out_dir) -> list[dict]:
    """The rows already in ``out_dir/results.parquet`` ([] when there is none)."""
    path = Path(out_dir) / RESULTS
    if not path.is_file():
        return []
    try:
        table = pq.read_table(str(path))
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{path}: not a readable results table ({e}); move it away to "
                         f"start over") from None
    if "key" not in table.column_names:
        raise ValueError(f"{path}: has no 'key' column, so it is not a sweep's results")
    return table.to_pylist()


def write_rows(out_dir, rows: list[dict], order: dict) -> Path:
    """Write ``rows`` (``order``: key -> grid index) atomically; returns the path."""
    path = Path(out_dir) / RESULTS
    path.parent.mkdir(parents=True, exist_ok=True)
    rows = sorted(rows, key=lambda r: (order.get(r["key"], math.inf), r["key"]))
    names: dict[str, None] = {}
    for r in rows:
        names.update(dict.fromkeys(r))
    table = pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows])
    tmp = path.with_name(path.name + ".tmp")
    pq.write_table(table, str(tmp), compression="zstd")
    os.replace(tmp, path)
    return path


def pareto_x(rows: list[dict], asked: Optional[str]) -> str:
    """The front's x axis: as asked, else cost when every row has one, else GPU-hours."""
    if asked:
        return asked
    return "cost" if rows and all(r.get("cost") is not None for r in rows) else "gpu_hours"


def front(rows: list[dict], x: str) -> list[dict]:
    """The non-dominated rows (lower ``x`` and lower pending p95 are better), by ``x``.
    Rows without an ``x`` value are left out."""
    pts = [r for r in rows if r.get(x) is not None and r.get(Y) is not None]
    keep = []
    for r in pts:
        dominated = any(o[x] <= r[x] and o[Y] <= r[Y] and (o[x] < r[x] or o[Y] < r[Y])
                        for o in pts)
        if not dominated:
            keep.append(r)
    return sorted(keep, key=lambda r: (r[x], r[Y], r["key"]))


def plot(rows: list[dict], best: list[dict], x: str, out_dir, label) -> Path:
    """The cells as points, the front as a line; ``label(row)`` names a point."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 5.5))
    pts = [r for r in rows if r.get(x) is not None]
    by_sched: dict[str, list] = {}
    for r in pts:
        by_sched.setdefault(r["scheduler"], []).append(r)
    for name, rs in sorted(by_sched.items()):
        ax.scatter([r[x] for r in rs], [r[Y] for r in rs], label=name, alpha=0.8)
    if best:
        ax.plot([r[x] for r in best], [r[Y] for r in best], "k--", lw=1,
                label="non-dominated")
        for r in best:
            ax.annotate(label(r), (r[x], r[Y]), fontsize=7, xytext=(4, 4),
                        textcoords="offset points")
    ax.set_xlabel("cost (price x node-hours)" if x == "cost" else "GPU-hours")
    ax.set_ylabel("pending time p95 (s)")
    ax.set_title(f"sweep: {len(pts)} cells, {len(best)} non-dominated")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    path = Path(out_dir) / PARETO_PNG
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})
    plt.close(fig)
    return path
