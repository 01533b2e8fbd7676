"""Which worker groups of a RayCluster Ray 2.60's KubeRay code can read, and which not.

Ray's config reader and provider index ``spec.workerGroupSpecs[i]`` and do arithmetic
on its fields without checking their types: one group with ``replicas: null``,
``maxReplicas: "3"`` or no ``groupName`` makes every read of the whole RayCluster fail
(``TypeError``/``KeyError``), so no group scales. :func:`split_groups` sorts the groups
into the ones Ray can use and the malformed ones, each malformed one named by index,
group and field; the side-car hands Ray a view without the malformed groups (and
translates the indices of its patches back, ``guard.py``).

Beyond the counts, every field Ray's config reader parses is checked per group
(``group_fields.py``: ``rayStartParams``, ``resources``, the pod template's Ray
container, ``idleTimeoutSeconds``, ...). A name used by more than one group makes all
of them malformed: a patch could not tell them apart. A malformed head group cannot be
left out: Ray's view gets a neutral head instead (Ray never launches the head), and a
bad ``autoscalerOptions.idleTimeoutSeconds`` is dropped from the view (Ray's default,
60 s); both are reported like a malformed group.

The CRD's own validation and defaulting would reject or fill most of these on a real
API server; the check is here because the side-car cannot rely on the CRD installed
being the one it expects, and because the stand-in has no CRD validation.
"""
from __future__ import annotations

import copy
from collections import Counter
from typing import List, Optional, Tuple

from .group_fields import NEUTRAL_HEAD, field_problem, options_problems

# field -> (required, smallest allowed value); all are integers
_COUNTS = {"replicas": (True, 0), "minReplicas": (True, 0), "maxReplicas": (True, 0),
           "numOfHosts": (False, 1)}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def group_problem(group) -> Optional[Tuple[str, object, str]]:
    """The first thing wrong with one ``workerGroupSpecs`` entry, as
    ``(field, value, reason)``, or None if Ray's code can read it."""
    if not isinstance(group, dict):
        return "", group, "a worker group must be an object"
    name = group.get("groupName")
    if not isinstance(name, str) or not name:
        return "groupName", name, "a non-empty string is required"
    for field, (required, low) in _COUNTS.items():
        if field not in group:
            if required:
                return field, None, "required (Ray reads it without a default)"
            continue
        v = group[field]
        if not _is_int(v):
            return field, v, f"an integer is required, got {type(v).__name__}"
        if v < low:
            return field, v, f"must be >= {low}"
    strategy = group.get("scaleStrategy")
    if strategy is not None:
        if not isinstance(strategy, dict):
            return "scaleStrategy", strategy, "an object is required"
        wtd = strategy.get("workersToDelete")
        if wtd is not None and not (isinstance(wtd, list)
                                    and all(isinstance(w, str) for w in wtd)):
            return "scaleStrategy.workersToDelete", wtd, "a list of pod names is required"
    return field_problem(group)


def split_groups(cr: dict) -> Tuple[dict, List[dict]]:
    """``(view, problems)``: the RayCluster as Ray can read it (the object itself when
    all is fine): without its malformed worker groups, with a neutral head for a
    malformed head group and without a bad ``autoscalerOptions`` value; and one entry
    per problem (its index in the real object, the group's name if any, the field, the
    value, why, and what was done: ``skipped``, ``head_replaced``, ``default``). Every
    group whose name another group also has is malformed: patches address groups by
    name."""
    spec = cr.get("spec") if isinstance(cr, dict) else None
    groups = spec.get("workerGroupSpecs") if isinstance(spec, dict) else None
    if not isinstance(groups, list):
        return cr, []
    found = [group_problem(g) for g in groups]
    names = Counter(g["groupName"] for g, p in zip(groups, found) if p is None)
    keep, problems = [], []
    for i, (g, p) in enumerate(zip(groups, found)):
        if p is None and names[g["groupName"]] > 1:
            where = [j for j, h in enumerate(groups) if isinstance(h, dict)
                     and h.get("groupName") == g["groupName"]]
            p = ("groupName", g["groupName"], f"the name of more than one group "
                                              f"(indices {where})")
        if p is None:
            keep.append(g)
            continue
        field, value, reason = p
        name = g.get("groupName") if isinstance(g, dict) else None
        problems.append({"index": i, "group": name if isinstance(name, str) else None,
                         "field": f"spec.workerGroupSpecs[{i}]" + (f".{field}" if field
                                                                   else ""),
                         "value": value, "reason": reason, "action": "skipped"})
    head, head_problems = _head(spec)
    options, option_problems = _options(spec)
    problems += head_problems + option_problems
    if not problems:
        return cr, []
    view = copy.copy(cr)
    view["spec"] = dict(spec, workerGroupSpecs=keep, headGroupSpec=head)
    if "autoscalerOptions" in spec:
        view["spec"]["autoscalerOptions"] = options
    return view, problems


def _head(spec: dict) -> Tuple[object, List[dict]]:
    """The head group for Ray's view, and its problem if it is malformed."""
    head = spec.get("headGroupSpec")
    p = ("", head, "an object is required") if not isinstance(head, dict) else \
        field_problem(head, is_head=True)
    if p is None:
        return head, []
    field, value, reason = p
    return copy.deepcopy(NEUTRAL_HEAD), [{"index": None, "group": "headgroup",
                           "field": "spec.headGroupSpec" + (f".{field}" if field else ""),
                           "value": value, "reason": reason, "action": "head_replaced"}]


def _options(spec: dict) -> Tuple[object, List[dict]]:
    """``autoscalerOptions`` for Ray's view (a bad value dropped: Ray's default)."""
    options = spec.get("autoscalerOptions", {})
    found = options_problems(options)
    if not found:
        return options, []
    fixed = {k: v for k, v in options.items() if k != "idleTimeoutSeconds"} \
        if isinstance(options, dict) else {}
    return fixed, [{"index": None, "group": None, "field": f"spec.{field}", "value": value,
                    "reason": reason, "action": "default"} for field, value, reason in found]


def group_names(cr: dict) -> List[Optional[str]]:
    """The ``groupName`` at each index of the real object (None where there is none)."""
    spec = cr.get("spec") if isinstance(cr, dict) else None
    groups = spec.get("workerGroupSpecs") if isinstance(spec, dict) else None
    if not isinstance(groups, list):          # a malformed object has no groups to name
        return []
    return [g.get("groupName") if isinstance(g, dict) else None for g in groups]
