"""Patches that cannot land on the wrong worker group.

Ray 2.60's KubeRay provider reads the RayCluster, decides, and patches
``/spec/workerGroupSpecs/<i>/replicas`` and ``.../scaleStrategy`` by list position;
nothing checks that group ``i`` is still the group it read. If a GitOps writer reorders
or inserts groups between the read and the patch, the patch scales another group.

Here every JSON patch of the RayCluster is rewritten before it is sent:

* each op that addresses a group is named by the group it meant (the name at that
  index in the object Ray was given, :func:`name_ops`);
* the body sent (:func:`address`) starts with ``test`` ops on
  ``/metadata/resourceVersion`` (the version the decision was based on) and on
  ``/spec/workerGroupSpecs/<j>/groupName`` for each group at its index ``j`` in that
  version, so the API server applies all of it or nothing (a failed test is 422; a
  changed version is 409 where the version is a precondition).

A group is more than its name: two groups can swap names, or a second group with the
same name can be inserted in front of it. So the body also tests the group's
**identity** at its index: its ``rayStartParams``, ``resources``, ``labels`` and pod
``template`` as they were in the version decided on (:data:`IDENTITY`, the fields that
make Ray's node type and the pods), and a name that is not unique in the object is
never addressed at all (:func:`address` refuses it).

When a guard fails, :func:`verdict` compares the groups the patch touches in the
version decided on with a fresh read: if only their positions (or unrelated parts of
the object, such as the operator's status) changed, the same ops are sent again,
addressed to the groups' current indices and guarded by the new version; if a touched
group's own counts changed (a person wrote ``replicas``), its identity changed (its
name now on another template), its name is no longer unique, or it is gone, nothing is
retried: the change is reported and the next autoscaler tick decides again from what
is there now. A patch is therefore never applied to a group other than the one Ray
named, and never overwrites a write it did not see.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import requests

from .groups import group_names

_GROUP_PATH = re.compile(r"^/spec/workerGroupSpecs/(\d+)(/.*)?$")
# what a decision about a group read: a change of any of these voids the decision
DECIDED_ON = ("replicas", "minReplicas", "maxReplicas", "numOfHosts", "scaleStrategy")
# what makes a group the group it was (its node type, its pods), beside its name
IDENTITY = ("rayStartParams", "resources", "labels", "template")


class GuardRefused(requests.HTTPError):
    """The patch was not sent (again): a group it addresses is gone, changed under it,
    or the guard kept failing. An ``HTTPError`` carrying the API server's last answer
    (when there was one), so Ray's own handling of a 422 / 409 applies; Ray's provider
    turns it into a launch / terminate error and the next tick decides again."""


@dataclass(frozen=True)
class NamedOp:
    """One JSON-patch op, with the group it addresses by name (None: not a group op)."""
    op: dict
    group: Optional[str]
    rest: str            # the path below the group ('/replicas', '/scaleStrategy', '')


def _rv(cr: dict) -> Optional[str]:
    rv = ((cr or {}).get("metadata") or {}).get("resourceVersion")
    return None if rv is None else str(rv)


def name_ops(payload: List[dict], view: dict) -> List[NamedOp]:
    """Name the group of every op, by its index in ``view`` (the object Ray read)."""
    names = group_names(view)
    out = []
    for op in payload:
        m = _GROUP_PATH.match(op.get("path", "")) if isinstance(op, dict) else None
        if m is None:
            out.append(NamedOp(op, None, ""))
            continue
        i = int(m.group(1))
        if i >= len(names) or names[i] is None:
            raise GuardRefused(f"patch op {op!r} addresses worker group index {i}, which "
                               f"the RayCluster read has no (named) group at")
        out.append(NamedOp(op, names[i], m.group(2) or ""))
    return out


def index_of(cr: dict) -> Dict[str, int]:
    """Group name -> its index in ``cr`` (the first, if a name repeats)."""
    out: Dict[str, int] = {}
    for i, n in enumerate(group_names(cr)):
        if n is not None:
            out.setdefault(n, i)
    return out


def repeated(cr: dict) -> Dict[str, List[int]]:
    """Names more than one group of ``cr`` has -> their indices."""
    where: Dict[str, List[int]] = {}
    for i, n in enumerate(group_names(cr)):
        if n is not None:
            where.setdefault(n, []).append(i)
    return {n: ix for n, ix in where.items() if len(ix) > 1}


def identity(group: dict) -> Dict[str, object]:
    """The identity fields ``group`` has (:data:`IDENTITY`)."""
    return {f: group[f] for f in IDENTITY if f in (group or {})}


def touched(named: List[NamedOp]) -> List[str]:
    """The groups a patch addresses, in first-use order."""
    seen: List[str] = []
    for n in named:
        if n.group is not None and n.group not in seen:
            seen.append(n.group)
    return seen


def address(named: List[NamedOp], cr: dict,
            basis: Optional[dict] = None) -> Tuple[List[dict], Dict[int, str]]:
    """The guarded body for ``cr`` and the group meant at each index it addresses:
    ``test`` ops on the version, and on each touched group's name and identity
    (as in ``basis``, the version decided on; ``cr`` itself if not given)."""
    where, twice = index_of(cr), repeated(cr)
    basis = cr if basis is None else basis
    body: List[dict] = []
    rv = _rv(cr)
    if rv is not None:
        body.append({"op": "test", "path": "/metadata/resourceVersion", "value": rv})
    intended: Dict[int, str] = {}
    for g in touched(named):
        if g not in where:
            raise GuardRefused(f"worker group {g!r} is not in the RayCluster any more")
        if g in twice:
            raise GuardRefused(f"worker group name {g!r} is used by the groups at indices "
                               f"{twice[g]}: a patch cannot tell them apart")
        intended[where[g]] = g
        at = f"/spec/workerGroupSpecs/{where[g]}"
        body.append({"op": "test", "path": f"{at}/groupName", "value": g})
        for f, v in identity(_group(basis, g) or {}).items():
            body.append({"op": "test", "path": f"{at}/{f}", "value": v})
    for n in named:
        body.append(n.op if n.group is None else
                    dict(n.op, path=f"/spec/workerGroupSpecs/{where[n.group]}{n.rest}"))
    return body, intended


def _group(cr: dict, name: str) -> Optional[dict]:
    i = index_of(cr).get(name)
    return None if i is None else cr["spec"]["workerGroupSpecs"][i]


_MISSING = object()


def pointer(doc, path: str):
    """The value at a JSON pointer (RFC 6901) in ``doc``, or a marker if absent."""
    cur = doc
    for part in path.split("/")[1:] if path else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, dict) and part in cur:
            cur = cur[part]
        elif isinstance(cur, list) and part.isdigit() and int(part) < len(cur):
            cur = cur[int(part)]
        else:
            return _MISSING
    return cur


def _other_changes(named: List[NamedOp], basis: dict, fresh: dict) -> List[tuple]:
    """For the ops outside the groups (Ray's finalizer patch): a ``test`` of Ray's own
    that the fresh object fails, or a target (for an append, its list) that changed."""
    out = []
    for n in named:
        if n.group is not None:
            continue
        path = n.op.get("path", "")
        if n.op.get("op") == "test":
            if pointer(fresh, path) != n.op.get("value"):
                out.append(("", path, n.op.get("value"), _absent(pointer(fresh, path))))
            continue
        target = path[:-2] if path.endswith("/-") else path
        a, b = pointer(basis, target), pointer(fresh, target)
        if a != b:
            out.append(("", target, _absent(a), _absent(b)))
    return out


def _absent(v):
    return None if v is _MISSING else v


@dataclass
class Verdict:
    """What a failed guard found: ``retry`` (only positions or unrelated parts moved),
    or not, with what changed."""
    retry: bool
    moved: Dict[str, Tuple[int, int]]              # group -> (index decided on, index now)
    changed: List[Tuple[str, str, object, object]]  # (group, field, decided on, now)
    gone: List[str]
    other: List[tuple] = field(default_factory=list)   # ('', path, decided on, now)
    # (group, field, why): its name on another group's template, or not unique
    identity: List[Tuple[str, str, str]] = field(default_factory=list)


def verdict(named: List[NamedOp], basis: dict, fresh: dict) -> Verdict:
    """Compare what a patch touches in the version decided on and a fresh read."""
    was, now, twice = index_of(basis), index_of(fresh), repeated(fresh)
    moved, changed, gone, ident = {}, [], [], []
    for g in touched(named):
        if g not in now:
            gone.append(g)
            continue
        if g in twice:
            ident.append((g, "groupName", f"now the name of the groups at indices "
                                          f"{twice[g]}"))
            continue
        if was.get(g) != now[g]:
            moved[g] = (was.get(g), now[g])
        a, b = _group(basis, g) or {}, _group(fresh, g)
        for field in DECIDED_ON:
            if a.get(field) != b.get(field):
                changed.append((g, field, a.get(field), b.get(field)))
        for field in IDENTITY:
            if a.get(field) != b.get(field):
                ident.append((g, field, "changed since the read (another group's, or "
                                        "edited)"))
    other = _other_changes(named, basis, fresh)
    return Verdict(not changed and not gone and not other and not ident, moved, changed,
                   gone, other, ident)


def merge_leaves(patch, prefix: str = "") -> List[str]:
    """The JSON pointers a merge patch (RFC 7386) writes (its leaves)."""
    if not isinstance(patch, dict) or not patch:
        return [prefix]
    out = []
    for k, v in patch.items():
        out += merge_leaves(v, f"{prefix}/{k.replace('~', '~0').replace('/', '~1')}")
    return out


def merge_verdict(payload: dict, basis: dict, fresh: dict) -> Verdict:
    """For a merge patch refused on its resourceVersion: retry unless a field it
    writes changed since the version decided on."""
    other = [("", p, _absent(pointer(basis, p)), _absent(pointer(fresh, p)))
             for p in merge_leaves(payload) if not p.startswith("/metadata/resourceVersion")
             and pointer(basis, p) != pointer(fresh, p)]
    return Verdict(not other, {}, [], [], other)


def wrong_groups(intended: Dict[int, str], response: dict) -> List[Tuple[int, str, str]]:
    """``(index, meant, hit)`` for each index a landed patch wrote whose group in the
    result is not the one meant (groups are never reordered by these patches, so the
    result's order is the order the patch was applied to)."""
    names = group_names(response)
    return [(i, g, names[i] if i < len(names) else None)
            for i, g in sorted(intended.items())
            if (names[i] if i < len(names) else None) != g]
