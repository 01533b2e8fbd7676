"""Trace rows as what the engine and Ray take: worker groups as ``NodeTypeSpec``s,
demand rows as Ray resource bundles (``bundled/README.md``, "Mapping to the engine")."""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import pyarrow as pa

from engine.build import NodeTypeSpec

from .schema import (ACCELERATOR_DEMAND, ACCELERATOR_LABEL, ACCELERATOR_PREFIX,
                     OR_LIST_POLICIES, validate_worker_groups)


def worker_group_specs(table: pa.Table) -> list[NodeTypeSpec]:
    """One NodeTypeSpec per row, in table order: resources CPU, memory, GPU (when > 0)
    and ``accelerator_type:<model>: 1`` (when a model is set); labels plus
    ``accelerator=<model>``; min/max workers from the table; priority 0."""
    table = validate_worker_groups(table)
    specs = []
    for row in table.to_pylist():
        resources = {"CPU": row["cpu"], "memory": row["memory"]}
        if row["gpu"] > 0:
            resources["GPU"] = row["gpu"]
        labels = dict(row["labels"] or ())
        model = row["gpu_model"]
        if model is not None:
            resources[ACCELERATOR_PREFIX + model] = 1.0
            labels[ACCELERATOR_LABEL] = model
        specs.append(NodeTypeSpec(
            name=row["type"], resources=resources, labels=labels, priority=0,
            min_workers=int(row["min_workers"]), max_workers=int(row["max_workers"])))
    return specs


def gpu_spec_options(spec: Optional[str]) -> tuple[str, ...]:
    """The distinct accepted GPU models of a ``gpu_spec`` in trace order ('' / None: none)."""
    if not spec:
        return ()
    return tuple(dict.fromkeys(s for s in spec.split("|") if s))


def demand_shape(row: Mapping[str, Any], *, or_lists: str = "unconstrained"
                 ) -> dict[str, float]:
    """One demand row as a Ray resource bundle.

    CPU, memory and GPU appear only when > 0 (Ray drops zero quantities). A single
    accepted model adds ``accelerator_type:<model>: 0.001``, as Ray's
    ``accelerator_type=`` option does. A resource dict cannot say "A or B", so an
    OR-list is simplified: ``"unconstrained"`` (default) drops the constraint, which
    never makes a placeable request unplaceable; ``"first"`` keeps the first option.
    ``or_list_count`` counts the rows this affects; ``demand_selector`` gives the exact
    "in" constraint for callers that support label selectors.
    """
    if or_lists not in OR_LIST_POLICIES:
        raise ValueError(f"or_lists must be one of {OR_LIST_POLICIES}, got {or_lists!r}")
    shape: dict[str, float] = {}
    for col, key in (("cpu", "CPU"), ("memory", "memory"), ("gpu", "GPU")):
        v = float(row.get(col) or 0.0)
        if math.isnan(v) or v < 0:
            raise ValueError(f"demand {col} must be a non-negative number, got {v}")
        if v > 0:
            shape[key] = v
    options = gpu_spec_options(row.get("gpu_spec"))
    if len(options) == 1 or (options and or_lists == "first"):
        shape[ACCELERATOR_PREFIX + options[0]] = ACCELERATOR_DEMAND
    return shape


def demand_selector(row: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The row's GPU-model constraint as a label selector: {"accelerator": (models...)}
    meaning "label value in models" ({} when unconstrained)."""
    options = gpu_spec_options(row.get("gpu_spec"))
    return {ACCELERATOR_LABEL: options} if options else {}


def or_list_count(table: pa.Table) -> int:
    """Rows whose gpu_spec lists more than one distinct model (simplified by demand_shape)."""
    return sum(len(gpu_spec_options(s)) > 1 for s in table.column("gpu_spec").to_pylist())
