"""Which worker groups of a RayCluster Ray 2.60's KubeRay code can read, and which not.

Ray's config reader and provider index ``spec.workerGroupSpecs[i]`` and do arithmetic
on its fields without checking their types: one group with ``replicas: null``,
``maxReplicas: "3"`` or no ``groupName`` makes every read of the whole RayCluster fail
(``TypeError``/``KeyError``), so no group scales. :func:`split_groups` sorts the groups
into the ones Ray can use and the malformed ones, each malformed one named by index,
group and field; the side-car hands Ray a view without the malformed groups (and
translates the indices of its patches back, ``guard.py``).

The CRD's own validation and defaulting would reject or fill most of these on a real
API server; the check is here because the side-car cannot rely on the CRD installed
being the one it expects, and because the stand-in has no CRD validation.
"""
from __future__ import annotations

import copy
from typing import List, Optional, Tuple

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
    return None


def split_groups(cr: dict) -> Tuple[dict, List[dict]]:
    """``(view, problems)``: the RayCluster with only the groups Ray can read (the
    object itself when all are fine), and one entry per malformed group (its index in
    the real object, its name if any, the field, the value and why). A second group
    with a name already used is malformed too: patches address groups by name."""
    spec = cr.get("spec") if isinstance(cr, dict) else None
    groups = spec.get("workerGroupSpecs") if isinstance(spec, dict) else None
    if not isinstance(groups, list):
        return cr, []
    keep, problems, seen = [], [], set()
    for i, g in enumerate(groups):
        p = group_problem(g)
        if p is None and g["groupName"] in seen:
            p = ("groupName", g["groupName"], "the name of an earlier group")
        if p is None:
            seen.add(g["groupName"])
            keep.append(g)
            continue
        field, value, reason = p
        name = g.get("groupName") if isinstance(g, dict) else None
        problems.append({"index": i, "group": name if isinstance(name, str) else None,
                         "field": f"spec.workerGroupSpecs[{i}]" + (f".{field}" if field
                                                                   else ""),
                         "value": value, "reason": reason})
    if not problems:
        return cr, []
    view = copy.copy(cr)
    view["spec"] = dict(spec, workerGroupSpecs=keep)
    return view, problems


def group_names(cr: dict) -> List[Optional[str]]:
    """The ``groupName`` at each index of the real object (None where there is none)."""
    groups = ((cr or {}).get("spec") or {}).get("workerGroupSpecs") or []
    return [g.get("groupName") if isinstance(g, dict) else None for g in groups]
