"""The input of ``vecsched explain``: a dump loaded and checked before the engine sees it.

``load_dump`` rebuilds whatever objects the file describes; this module checks that
they make a ``SchedulingRequest`` of the right shape (each field of the type Ray
hands the scheduler) and that the context's launch limits are numbers, so that a
wrong file is one ``DumpError`` naming the field rather than an error deep inside.
The values themselves (resource quantities, counts, timeouts) are checked where the
problem is built (``ProblemError``, named by field).
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from .dump import DumpError, load_dump

_NUMBER = (int, float)


def _seq(value, where: str, item_type: type) -> None:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise DumpError(f"{where}: expected a list, got {type(value).__name__}")
    for i, item in enumerate(value):
        if not isinstance(item, item_type):
            raise DumpError(f"{where}[{i}]: expected a {item_type.__name__}, got "
                            f"{type(item).__name__}")


def _optional_number(value, where: str, *, whole: bool = False) -> None:
    if value is None:
        return
    kinds = int if whole else _NUMBER
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise DumpError(f"{where}: expected a {'whole ' if whole else ''}number or null, got "
                        f"{type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise DumpError(f"{where}: must be a finite number >= 0, got {value!r}")


def _names(entries: Mapping, where: str, what: str) -> None:
    """A resource map's names are non-empty strings and its quantities numbers; a label
    map's names and values are strings."""
    for k, v in entries.items():
        if not isinstance(k, str) or not k:
            raise DumpError(f"{where}: {what} name {k!r} is a {type(k).__name__}, expected a "
                            f"non-empty string")
        if what == "label" and not isinstance(v, str):
            raise DumpError(f"{where}[{k!r}]: expected a string value, got {type(v).__name__}")
        if what == "resource" and (isinstance(v, bool) or not isinstance(v, _NUMBER)):
            raise DumpError(f"{where}[{k!r}]: expected a number, got {type(v).__name__}")


def check_request(req) -> None:
    """Raise ``DumpError`` unless ``req`` is a ``SchedulingRequest`` whose fields have
    the types Ray's autoscaler gives them."""
    from ray.autoscaler.v2.instance_manager.config import NodeTypeConfig
    from ray.autoscaler.v2.scheduler import SchedulingRequest
    from ray.autoscaler.v2.schema import AutoscalerInstance
    from ray.core.generated.autoscaler_pb2 import (ClusterResourceConstraint,
                                                   GangResourceRequest,
                                                   ResourceRequestByCount)

    if not isinstance(req, SchedulingRequest):
        raise DumpError(f"request: expected a SchedulingRequest, got {type(req).__name__}")
    if not isinstance(req.node_type_configs, Mapping):
        raise DumpError("request.node_type_configs: expected a map of worker groups, got "
                        f"{type(req.node_type_configs).__name__}")
    for name, cfg in req.node_type_configs.items():
        if not isinstance(cfg, NodeTypeConfig):
            raise DumpError(f"request.node_type_configs[{name!r}]: expected a NodeTypeConfig, "
                            f"got {type(cfg).__name__}")
        if not isinstance(cfg.resources, Mapping):
            raise DumpError(f"request.node_type_configs[{name!r}].resources: expected a map")
        _names(cfg.resources, f"request.node_type_configs[{name!r}].resources", "resource")
        if cfg.labels is not None:
            if not isinstance(cfg.labels, Mapping):
                raise DumpError(f"request.node_type_configs[{name!r}].labels: expected a map")
            _names(cfg.labels, f"request.node_type_configs[{name!r}].labels", "label")
        _optional_number(cfg.min_worker_nodes, f"request.node_type_configs[{name!r}]"
                                               f".min_worker_nodes", whole=True)
        _optional_number(cfg.max_worker_nodes, f"request.node_type_configs[{name!r}]"
                                               f".max_worker_nodes", whole=True)
    _seq(req.resource_requests, "request.resource_requests", ResourceRequestByCount)
    _seq(req.gang_resource_requests, "request.gang_resource_requests", GangResourceRequest)
    _seq(req.cluster_resource_constraints, "request.cluster_resource_constraints",
         ClusterResourceConstraint)
    _seq(req.current_instances, "request.current_instances", AutoscalerInstance)
    _optional_number(req.max_num_nodes, "request.max_num_nodes", whole=True)
    _optional_number(req.idle_timeout_s, "request.idle_timeout_s")
    _optional_number(req.pending_idle_timeout_s, "request.pending_idle_timeout_s")
    for field in ("cloud_resource_availabilities", "recoverable_resource_availabilities"):
        value = getattr(req, field)
        if value is not None and not isinstance(value, Mapping):
            raise DumpError(f"request.{field}: expected a map, got {type(value).__name__}")


def check_context(context: dict) -> None:
    """The context's launch limits, when present, are numbers >= 0."""
    for key in ("upscaling_speed", "max_concurrent_launches"):
        if context.get(key) is not None:
            _optional_number(context[key], f"context.{key}",
                             whole=key == "max_concurrent_launches")
    for key in ("source", "upscaling_mode"):
        if context.get(key) is not None and not isinstance(context[key], str):
            raise DumpError(f"context.{key}: expected a string, got "
                            f"{type(context[key]).__name__}")


def load_for_explain(path: str) -> tuple:
    """(request, context) of the dump at ``path``, checked."""
    doc = load_dump(path)
    try:
        check_request(doc["request"])
        check_context(doc["context"])
    except DumpError as e:
        raise DumpError(f"{path}: {e}") from None
    return doc["request"], doc["context"]
