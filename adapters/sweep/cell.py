"""One cell of a sweep: its parameters (``grid.Cell.params``) to one replay and one
row of results.

Everything a cell needs is in its parameters, so a cell runs the same anywhere (a Ray
worker on another machine reads the same bundled data; a trace given by path must be
readable there too) and gives the same row, but for the wall-clock columns. The row
holds the grid's keys (``key``, ``workload``, ``scheduler``, ``catalogue``, ``seed``,
the knobs) and every scalar metric of the replay (``metrics.summarize``: pending
percentiles, node-, GPU- and CPU-hours, cost, lost work, instances...), flattened.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from vecsched.adapters.replay.placement_groups import GangOverlay
from vecsched.adapters.replay.registry import make
from vecsched.adapters.replay.simulation import Replay, ReplayConfig
from vecsched.adapters.replay.trace import load
from vecsched.adapters.replay.window import Window
from vecsched.adapters.traces import (TRACES, bundled, bundled_trace, read_demand,
                                      read_worker_groups, validate_worker_groups)

from .grid import AXES, CLOUD_KEYS, KNOBS, cell_key

KEY_COLUMNS = ("key",) + AXES
_INSTANCE_FIELDS = ("decided", "requested", "allocated", "failed", "running", "never_launched")


def _path(ref: dict, demand: bool) -> Path:
    if "bundled" in ref:
        name = ref["bundled"]
        return bundled_trace(name)[0] if demand and name in TRACES else bundled(name)
    return Path(ref["path"])


def catalogue_table(spec: dict) -> pa.Table:
    """A catalogue's worker-group table: its groups, filtered and re-priced."""
    table = read_worker_groups(_path(spec["groups"], False))
    rows = table.to_pylist()
    names = [r["type"] for r in rows]
    for key in ("only", "prices", "max_workers") + CLOUD_KEYS:
        unknown = sorted(set(spec.get(key) or ()) - set(names))
        if unknown:
            raise ValueError(f"catalogue {key}: no worker group named {', '.join(unknown)}")
    if spec.get("only"):
        rows = [r for r in rows if r["type"] in spec["only"]]
    for r in rows:
        if r["price"] is not None:
            r["price"] *= spec["price_factor"]
            if r["gpu"] > 0:
                r["price"] *= spec["gpu_price_factor"]
        if r["type"] in spec["prices"]:
            r["price"] = float(spec["prices"][r["type"]])
        if r["type"] in spec["max_workers"]:
            r["max_workers"] = int(spec["max_workers"][r["type"]])
            r["min_workers"] = min(r["min_workers"], r["max_workers"])
        for k in CLOUD_KEYS:                      # the cloud's side of the group
            if k == "spot" and r["type"] in spec.get("spot", ()):
                r["spot"] = True
            elif k != "spot" and r["type"] in spec.get(k, {}):
                r[k] = spec[k][r["type"]]
    out = pa.Table.from_pylist(rows, schema=table.schema)
    return validate_worker_groups(out.replace_schema_metadata(table.schema.metadata))


def window(spec: dict) -> Window:
    """A workload's window (see ``grid.py``)."""
    t_from, t_to, span = spec.get("from"), spec.get("to"), spec.get("duration")
    if span is not None:
        if t_to is not None and t_from is None:
            t_from = max(0.0, t_to - span)
        elif t_to is None:
            t_from = t_from or 0.0
            t_to = t_from + span
    common = dict(compress=spec["compress"], arrival_scale=spec["arrival_scale"],
                  warm_start=spec.get("warm_start"))
    if t_from is not None or t_to is not None:
        return Window(start=0, t_from=t_from, t_to=t_to, **common)
    start = spec.get("start", None if "pods" in spec else 0)
    return Window(start=start, pods=spec.get("pods"), **common)


def run_cell(params: dict) -> dict:
    """Replay one cell and return its row (see the module docstring)."""
    w = params["workload_spec"]
    demand = read_demand(_path(w["trace"], True))
    if params.get("catalogue_spec"):
        groups = catalogue_table(params["catalogue_spec"])
    elif "groups" in w:
        groups = _path(w["groups"], False)
    elif w["trace"].get("bundled") in TRACES:
        groups = bundled_trace(w["trace"]["bundled"])[1]
    else:
        groups = None                             # the replay's default: openb_nodes
    trace = load(demand, groups, window(w), GangOverlay(float(params["gangs"]),
                                                         seed=int(params["seed"])))
    knobs = {k: params[k] for k in KNOBS}
    config = ReplayConfig(seed=int(params["seed"]), **params["config"], **knobs)
    result = Replay(trace, make(params["scheduler"]), config).run()
    return row(params, result.metrics)


def row(params: dict, metrics: dict) -> dict[str, Any]:
    """The grid's keys and the replay's scalar metrics, one flat dict."""
    out: dict[str, Any] = {"key": cell_key(params)}
    for k in AXES:
        out[k] = params[k]
    for k, v in metrics.items():
        if isinstance(v, bool):
            out[k] = int(v)
        elif isinstance(v, (int, float)) or v is None:
            out[k] = v
    for k in _INSTANCE_FIELDS:
        out[f"instances_{k}"] = metrics["instances"][k]
    for r, v in sorted((metrics.get("peak_asked") or {}).items()):   # docs/capacity.md
        out[f"peak_asked_{r}"] = float(v)
    warm = metrics.get("warm_start") or {}
    out["warm_start_units"] = int(warm.get("units", 0))
    out["warm_start_nodes"] = int(warm.get("nodes", 0))
    return out
