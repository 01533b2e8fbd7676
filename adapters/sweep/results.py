"""A sweep's results on disk: one Parquet table, one row a cell (``cell.row``), keyed by
the cell's ``key``; and the Pareto front of cost (or GPU-hours) against pending p95.

The table is rewritten whole after every finished cell: the rows already on disk are
read back and merged with the new ones by ``key`` (a key is written once), written to a
temporary file of a unique name in the same directory, flushed to disk and renamed over
the old table, so a reader sees the old table or the new one, never a part of one, and
a sweep stopped at any point leaves a readable table of the cells done (the next run
skips them). One sweep at a time writes a directory (``lock.py``). Rows are written in
a stable order (the current grid's order, then rows of earlier grids by key).
"""
from __future__ import annotations

import contextlib
import fcntl
import math
import os
import tempfile
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
        # One open file: the table a rename may replace meanwhile is read whole from the
        # file opened (pyarrow given a path looks up its size and opens it apart).
        with open(path, "rb") as f:
            table = pq.read_table(f)
    except (pa.ArrowInvalid, OSError) as e:
        raise ValueError(f"{path}: not a readable results table ({e}); move it away to "
                         f"start over") from None
    if "key" not in table.column_names:
        raise ValueError(f"{path}: has no 'key' column, so it is not a sweep's results")
    return table.to_pylist()


def merge(old: list[dict], new: list[dict]) -> list[dict]:
    """``old`` and ``new`` rows, one per key (a key in both: the ``new`` row)."""
    by_key = {r["key"]: r for r in old}
    by_key.update((r["key"], r) for r in new)
    return list(by_key.values())


def _replace_atomically(path: Path, write) -> None:
    """``write(tmp)`` to a uniquely named temporary file beside ``path``, flushed, then
    renamed over ``path`` (the temporary file is removed if anything fails)."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem}-", suffix=".tmp")
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@contextlib.contextmanager
def _dir_locked(directory: Path):
    """An exclusive flock on the directory itself while its table is read, merged and
    replaced, so that writers outside a sweep's lock (two processes calling
    ``write_rows``) queue rather than drop each other's rows."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def write_rows(out_dir, rows: list[dict], order: dict) -> Path:
    """Merge ``rows`` into ``out_dir/results.parquet`` (``merge``) and write it
    atomically (``order``: key -> grid index); returns the path."""
    path = Path(out_dir) / RESULTS
    path.parent.mkdir(parents=True, exist_ok=True)
    with _dir_locked(path.parent):
        return _merge_and_write(path, rows, order)


def _merge_and_write(path: Path, rows: list[dict], order: dict) -> Path:
    rows = merge(read_rows(path.parent), rows)
    rows = sorted(rows, key=lambda r: (order.get(r["key"], math.inf), r["key"]))
    names: dict[str, None] = {}
    for r in rows:
        names.update(dict.fromkeys(r))
    table = pa.Table.from_pylist([{n: r.get(n) for n in names} for r in rows])
    _replace_atomically(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))
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


def price_lists(rows: list[dict], x: str) -> dict:
    """The rows by price list when ``x`` is cost: costs from different price lists
    (catalogues) are not comparable, so each list has its own front and its own panel
    ({"": rows} when there is one list, or when ``x`` is GPU-hours, which no price
    changes). A cell without a catalogue is priced by its workload's own groups."""
    if x != "cost":
        return {"": rows}
    out: dict[str, list] = {}
    for r in rows:
        out.setdefault(r.get("catalogue") or "(own groups)", []).append(r)
    return out if len(out) > 1 else {"": rows}


def plot(rows: list[dict], x: str, out_dir, label) -> Path:
    """The cells as points and the front as a line, one panel per price list
    (``price_lists``); ``label(row)`` names a point of a front."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    panels = price_lists([r for r in rows if r.get(x) is not None], x)
    fig, axes = plt.subplots(1, len(panels), figsize=(8 * len(panels) ** 0.5 + 1, 5.5),
                             squeeze=False, sharey=True)
    schedulers = sorted({r["scheduler"] for r in rows})
    colour = {s: f"C{i % 10}" for i, s in enumerate(schedulers)}
    for ax, (name, pts) in zip(axes[0], sorted(panels.items())):
        best = front(pts, x)
        for sched in schedulers:
            rs = [r for r in pts if r["scheduler"] == sched]
            if rs:
                ax.scatter([r[x] for r in rs], [r[Y] for r in rs], label=sched, alpha=0.8,
                           color=colour[sched])
        if best:
            ax.plot([r[x] for r in best], [r[Y] for r in best], "k--", lw=1,
                    label="non-dominated")
            for r in best:
                ax.annotate(label(r), (r[x], r[Y]), fontsize=7, xytext=(4, 4),
                            textcoords="offset points")
        unit = f"cost at {name} prices" if name else "cost"
        ax.set_xlabel(f"{unit} (price x node-hours)" if x == "cost" else "GPU-hours")
        ax.set_title(f"{name + ': ' if name else ''}{len(pts)} cells, {len(best)} non-dominated",
                     fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("pending time p95 (s)")
    path = Path(out_dir) / PARETO_PNG
    fig.tight_layout()
    _replace_atomically(path, lambda tmp: fig.savefig(tmp, format="png", dpi=110,
                                                      metadata={"Software": None}))
    plt.close(fig)
    return path
