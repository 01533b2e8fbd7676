"""Trace rows as what the engine and Ray take: worker groups as ``NodeTypeSpec``s,
demand rows as Ray resource bundles (``data/README.md``, "Mapping to the engine").

Version 2's columns map to what Ray offers:

- ``resources`` (custom resources) are added to the bundle and to the node type's
  resources as they are (Ray custom resources: a request fits a node that has them).
- ``max_per_node`` = c on an app's independent requests becomes Ray Serve's mechanism
  for ``max_replicas_per_node``: each request also asks ``1 / c`` of the app's implicit
  per-node slot ``node:__internal_implicit_resource_<app>`` (``cap_slot``). Every Ray
  node has 1 of each implicit resource without declaring it (Ray's scheduler and
  autoscaler count a missing one as 1.0), so at most c of the app's requests share a
  node; worker groups declare nothing. The raylet holds 1/c as a truncated 1e-4 fixed
  point, which keeps exactly c per node for every c up to 100 (Serve's bound).
- ``max_per_node`` = 1 on the members of a placement group (``group_id``) makes the
  group STRICT_SPREAD: its bundles on distinct nodes (a cap above 1 inside a placement
  group has no Ray equivalent and is refused by the schema).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Optional

import pyarrow as pa

from vecsched.engine.model.build.builder import NodeTypeSpec
from vecsched.engine.model.dtypes import IMPLICIT_PREFIX

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
        resources.update(_custom(row.get("resources")))
        specs.append(NodeTypeSpec(
            name=row["type"], resources=resources, labels=labels, priority=0,
            min_workers=int(row["min_workers"]), max_workers=int(row["max_workers"])))
    return specs


def cap_slot(app: str) -> str:
    """The implicit per-node resource an app's ``max_per_node`` is counted in (Ray
    Serve names it ``<prefix><app>:<deployment>``; here the trace's app is the unit)."""
    return IMPLICIT_PREFIX + str(app)


def _custom(entries) -> dict[str, float]:
    """A ``resources`` map (list of pairs or dict) as a name-sorted dict, zeros dropped."""
    items = entries.items() if isinstance(entries, Mapping) else (entries or ())
    return {str(k): float(v) for k, v in sorted(items) if v}


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

    Version 2: the row's custom ``resources`` follow, sorted by name; an independent
    row (no ``group_id``) with ``max_per_node`` c asks ``1 / c`` of ``cap_slot(app)``
    last (see the module docstring; a capped group is STRICT_SPREAD instead).
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
    shape.update(_custom(row.get("resources")))
    cap = row.get("max_per_node")
    if cap is not None and row.get("group_id") is None:
        shape[cap_slot(row["app"])] = 1.0 / int(cap)
    return shape


def demand_selector(row: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    """The row's GPU-model constraint as a label selector: {"accelerator": (models...)}
    meaning "label value in models" ({} when unconstrained)."""
    options = gpu_spec_options(row.get("gpu_spec"))
    return {ACCELERATOR_LABEL: options} if options else {}


def or_list_count(table: pa.Table) -> int:
    """Rows whose gpu_spec lists more than one distinct model (simplified by demand_shape)."""
    return sum(len(gpu_spec_options(s)) > 1 for s in table.column("gpu_spec").to_pylist())
