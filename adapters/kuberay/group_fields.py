"""Every field of a RayCluster group that Ray 2.60's KubeRay config reader parses,
checked one group at a time, so one bad value is named and only its group is left out.

Ray's reader (``ray/autoscaler/_private/kuberay/autoscaling_config.py``, which the v2
autoscaler's ``KubeRayConfigReader`` calls every tick) turns each group into a node type
and raises on the first value it cannot parse; one bad group therefore makes every tick
fail and no group scales. Per group it reads:

* ``rayStartParams`` (an object): ``num-cpus``, ``num-gpus``, ``memory`` as integers
  (``int(...)``), ``resources`` as a quoted JSON object of integer counts;
* ``resources`` (an object of Kubernetes quantities: ``CPU``, ``GPU``, ``TPU``,
  ``memory`` and custom ones), which takes precedence over the above;
* ``template.spec.containers[0]`` (so a template, a spec and at least one container):
  its ``resources.limits`` / ``resources.requests`` quantities ``cpu``, ``memory``,
  ``*gpu`` and ``google.com/tpu``; ``template.spec.nodeSelector`` for TPU groups;
* a CPU count from one of those sources (no source is an error);
* ``idleTimeoutSeconds`` (``float(...)``), ``priority`` (``int(...)``), ``labels``
  (Kubernetes label syntax);
* then Ray's config validation: every resource count an integer >= 0.

:func:`field_problem` checks them in that order and names the first bad one; its last
check runs Ray's own reader on the group alone (with a neutral head), so whatever Ray
rejects and the named checks missed is still caught, with Ray's message.
:func:`options_problems` checks ``spec.autoscalerOptions`` (``idleTimeoutSeconds``).
Quantities, label syntax and the last check use Ray's own functions; without Ray
installed (never the case in the side-car) only the other checks run.
"""
from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import List, Optional, Tuple

Problem = Tuple[str, object, str]          # (field below the group, value, reason)

# A head the reader can always read: stands in for a malformed head group in Ray's view
# (Ray never launches the head; the head node's resources come from the running node).
NEUTRAL_HEAD = {"rayStartParams": {"num-cpus": "0"},
                "template": {"spec": {"containers": [{"name": "ray-head"}]}}}
_INT_PARAMS = ("num-cpus", "num-gpus", "memory")


def _reader():
    """Ray's KubeRay config reader module, or None without Ray."""
    try:
        from ray.autoscaler._private.kuberay import autoscaling_config
    except ImportError:
        return None
    return autoscaling_config


def _quantity(v) -> Optional[str]:
    """Why ``v`` is not a Kubernetes quantity Ray can round up to a count >= 0."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        return f"a Kubernetes quantity is required, got {type(v).__name__}"
    reader = _reader()
    if reader is None:
        return None
    try:
        n = reader._round_up_k8s_quantity(v)
    except Exception as e:                     # ValueError, InvalidOperation, Overflow
        return f"not a Kubernetes quantity ({type(e).__name__}: {e})"
    return None if n >= 0 else "must be >= 0"


def _object(group: dict, field: str) -> Optional[Problem]:
    v = group.get(field)
    if field in group and not isinstance(v, dict):
        return field, v, f"an object is required, got {type(v).__name__}"
    return None


def _start_params(params: dict) -> Optional[Problem]:
    for key in _INT_PARAMS:
        if key in params:
            v = params[key]
            try:
                n = int(v)
            except (TypeError, ValueError, OverflowError):     # OverflowError: inf
                return f"rayStartParams.{key}", v, "an integer is required (Ray reads it " \
                                                   "with int())"
            if n < 0:
                return f"rayStartParams.{key}", v, "must be >= 0"
    if "resources" in params:
        return _custom_resources(params["resources"])
    return None


def _custom_resources(raw) -> Optional[Problem]:
    """``rayStartParams.resources``: a quoted JSON object of integer counts, as
    ``'"{\\"pair\\": 1}"'`` (Ray drops the outer quotes and the backslashes)."""
    field = "rayStartParams.resources"
    if not isinstance(raw, str):
        return field, raw, "a quoted JSON object string is required"
    try:
        parsed = json.loads(raw[1:-1].replace("\\", ""))
    except ValueError as e:
        return field, raw, f"not a quoted JSON object ({e})"
    if not isinstance(parsed, dict):
        return field, raw, "a quoted JSON object is required"
    for k, n in parsed.items():
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            return field, raw, f"the count of {k!r} must be an integer >= 0, got {n!r}"
    return None


def _group_resources(res: dict) -> Optional[Problem]:
    for k, v in res.items():
        why = _quantity(v)
        if why:
            return f"resources.{k}", v, why
    return None


def _container(group: dict) -> Tuple[Optional[dict], Optional[Problem]]:
    """The Ray container (the first one) and its ``resources``, or the problem."""
    tpl = group.get("template")
    if not isinstance(tpl, dict):
        return None, ("template", tpl, "a pod template object is required")
    spec = tpl.get("spec")
    if not isinstance(spec, dict):
        return None, ("template.spec", spec, "a pod spec object is required")
    cs = spec.get("containers")
    if not isinstance(cs, list) or not cs:
        return None, ("template.spec.containers", cs,
                      "a non-empty list is required (the first container runs Ray)")
    if not isinstance(cs[0], dict):
        return None, ("template.spec.containers[0]", cs[0], "an object is required")
    sel = spec.get("nodeSelector")
    if "nodeSelector" in spec and not isinstance(sel, dict):
        return None, ("template.spec.nodeSelector", sel, "an object is required")
    res = cs[0].get("resources", {})
    if not isinstance(res, dict):
        return None, ("template.spec.containers[0].resources", res, "an object is required")
    return res, None


def _container_resources(res: dict) -> Optional[Problem]:
    for part in ("limits", "requests"):
        block = res.get(part, {})
        where = f"template.spec.containers[0].resources.{part}"
        if not isinstance(block, dict):
            return where, block, "an object is required"
        for k, v in block.items():
            if k in ("cpu", "memory", "google.com/tpu") or k.endswith("gpu"):
                why = _quantity(v)
                if why:
                    return f"{where}.{k}", v, why
    return None


def _has_cpu(group: dict, res: dict) -> bool:
    return ("CPU" in group.get("resources", {}) or "num-cpus" in group.get(
        "rayStartParams", {}) or "cpu" in res.get("limits", {})
        or "cpu" in res.get("requests", {}))


def _scalars(group: dict) -> Optional[Problem]:
    if "idleTimeoutSeconds" in group and group["idleTimeoutSeconds"] is not None:
        v = group["idleTimeoutSeconds"]
        try:
            s = float(v)
        except (TypeError, ValueError):
            return "idleTimeoutSeconds", v, "a number of seconds is required"
        if math.isnan(s) or s < 0:
            return "idleTimeoutSeconds", v, "must be a number >= 0"
    if "priority" in group and group["priority"] is not None:
        try:
            int(group["priority"])
        except (TypeError, ValueError):
            return "priority", group["priority"], "an integer is required"
    labels = group.get("labels")
    if isinstance(labels, dict) and _reader() is not None:
        try:
            _reader().validate_node_label_syntax(labels)
        except Exception as e:
            return "labels", labels, f"not valid Kubernetes labels ({e})"
    return None


def field_problem(group: dict, is_head: bool = False) -> Optional[Problem]:
    """The first field of ``group`` Ray's config reader cannot parse, as ``(field below
    the group, value, reason)``, or None. The counts (``groupName``, ``replicas``, ...)
    are ``groups.group_problem``'s."""
    for field in ("rayStartParams", "resources"):
        p = _object(group, field)
        if p:
            return p
    p = _start_params(group.get("rayStartParams", {})) or \
        _group_resources(group.get("resources", {}))
    if p:
        return p
    res, p = _container(group)
    if p:
        return p
    p = _container_resources(res)
    if p:
        return p
    if not _has_cpu(group, res):
        return "rayStartParams.num-cpus", None, (
            "no CPU count: set rayStartParams num-cpus, resources.CPU or the Ray "
            "container's cpu limit")
    return _scalars(group) or _ray_reads(json.dumps(group, sort_keys=True), is_head)


@lru_cache(maxsize=512)
def _ray_reads(group_json: str, is_head: bool) -> Optional[Problem]:
    """Ray's own reader (and config validation) on this one group: the catch-all."""
    reader = _reader()
    if reader is None:
        return None
    group = json.loads(group_json)
    spec = {"headGroupSpec": group, "workerGroupSpecs": []} if is_head else \
        {"headGroupSpec": NEUTRAL_HEAD, "workerGroupSpecs": [group]}
    try:
        reader._derive_autoscaling_config_from_ray_cr(
            {"metadata": {"name": "check", "namespace": "check"}, "spec": spec})
    except Exception as e:
        return "", None, f"Ray's config reader refuses it: {type(e).__name__}: {e}"
    return None


def options_problems(options) -> List[Problem]:
    """What in ``spec.autoscalerOptions`` Ray's reader cannot use (field below
    ``spec``): not an object, or an ``idleTimeoutSeconds`` that is not a number >= 0."""
    if not isinstance(options, dict):
        return [("autoscalerOptions", options, "an object is required")]
    v = options.get("idleTimeoutSeconds")
    if "idleTimeoutSeconds" in options and not (
            isinstance(v, (int, float)) and not isinstance(v, bool)
            and math.isfinite(v) and v >= 0):
        return [("autoscalerOptions.idleTimeoutSeconds", v,
                 "a number of seconds >= 0 is required")]
    return []
