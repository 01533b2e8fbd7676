"""What the autoscaler's RayCluster writes did, judged from the API stand-in's own
record (its request log, ``KubeApiStandIn.audit``, and the store's write journal,
``Store.journal``), not from the side-car's account of itself.

**Wrong-group patches.** The autoscaler's JSON patches come in *chains*: a decision
read (a GET of the RayCluster), then a PATCH and, when its guard fails, a re-read
(``?resourceVersion=``) and the PATCH again. The group each op of a landed PATCH was
meant for is the group of the decision read the op names: by its ``groupName`` test
where the body has one (the side-car's guard), else by its index (Ray's own,
index-addressed patch). The op landed on the group at that index in the object the
PATCH was applied to (the journal's object before the write). The patch went to the
wrong group when that group is not the one meant: another name, the same name on
another template or start parameters (:data:`IDENTITY`), or a name more than one
group had (nobody can tell which one was meant).

**Overwritten writes.** A write of a group's ``replicas`` by anyone but the autoscaler
and the operator (a person, a GitOps tool) that the autoscaler's next write of that
field replaced. It was *reported* when the side-car's ledger has an ``ownership``
conflict for that group that found the person's value at a version not older than
their write.
"""
from __future__ import annotations

import re
from typing import Dict, Iterable, List, Optional

_GROUP_OP = re.compile(r"^/spec/workerGroupSpecs/(\d+)(/.*)?$")
AUTOSCALER = "python-requests"       # Ray's client: no fieldManager, requests' User-Agent
OPERATOR = "kuberay-operator"
# what makes a group the group it is besides its name: its node type and its pods (the
# audit's own definition, kept apart from the side-car's so it judges, not repeats, it)
IDENTITY = ("rayStartParams", "resources", "labels", "template")


def _groups(cr: Optional[dict]) -> list:
    return ((cr or {}).get("spec") or {}).get("workerGroupSpecs") or []


def _ident(g) -> tuple:
    if not isinstance(g, dict):
        return (None,)
    return (g.get("groupName"),) + tuple(repr(g.get(f)) for f in IDENTITY)


def _by_rv(journal: Iterable[dict], name: str) -> Dict[str, dict]:
    return {str(e["rv"]): e for e in journal if e["name"] == name}


def chains(audit: List[dict], name: str, manager: str = AUTOSCALER) -> List[dict]:
    """The autoscaler's JSON-patch chains on RayCluster ``name``: ``{"basis_rv",
    "attempts": [audit entries], "landed": entry or None}``."""
    out: List[dict] = []
    last_get, current = None, None
    for e in audit:
        if e["kind"] != "rayclusters" or e["name"] != name or e["manager"] != manager:
            continue
        if e["method"] == "GET":
            if current is not None and "resourceVersion=" in e["path"]:
                continue                     # the guard's re-read inside a chain
            current = None
            if e["status"] == 200:
                last_get = e["resource_version"]
        elif e["method"] == "PATCH" and "json-patch" in (e["content_type"] or ""):
            if current is None:
                current = {"basis_rv": last_get, "attempts": [], "landed": None}
                out.append(current)
            current["attempts"].append(e)
            if e["status"] == 200:
                current["landed"] = e
    return out


def _meant(body: list, j: int, basis: dict):
    """The identity of the group the op at index ``j`` was meant for, None if the name
    it tests is not exactly one group of the decision read."""
    groups = _groups(basis)
    for op in body:
        if op.get("op") == "test" and op.get("path") == f"/spec/workerGroupSpecs/{j}/groupName":
            named = [g for g in groups if isinstance(g, dict)
                     and g.get("groupName") == op.get("value")]
            return _ident(named[0]) if len(named) == 1 else None
    return _ident(groups[j]) if j < len(groups) else None


def wrong_group_patches(audit: List[dict], journal: List[dict], name: str,
                        manager: str = AUTOSCALER) -> List[dict]:
    """The landed autoscaler patches with an op on another group than meant (module
    docstring), each with its ops' ``(index, meant, hit)``."""
    versions = _by_rv(journal, name)
    out = []
    for ch in chains(audit, name, manager):
        landed = ch["landed"]
        if landed is None or not isinstance(landed["body"], list):
            continue
        basis = (versions.get(str(ch["basis_rv"])) or {}).get("new")
        applied = (versions.get(str(landed["resource_version"])) or {}).get("old")
        groups = _groups(applied)
        names = [g.get("groupName") if isinstance(g, dict) else None for g in groups]
        hits = []
        for op in landed["body"]:
            m = _GROUP_OP.match(op.get("path", "")) if op.get("op") != "test" else None
            if m is None:
                continue
            j = int(m.group(1))
            hit = _ident(groups[j]) if j < len(groups) else None
            meant = _meant(landed["body"], j, basis)
            if meant is None or hit != meant or names.count(hit[0]) > 1:
                hits.append({"index": j, "path": op["path"],
                             "meant": meant[0] if meant else None,
                             "hit": hit[0] if hit else None,
                             "same_name_other_group": bool(meant and hit
                                                           and meant[0] == hit[0])})
        if hits:
            out.append({"t": landed["t"], "basis_rv": ch["basis_rv"],
                        "resource_version": landed["resource_version"], "hits": hits})
    return out


def _replicas(cr: Optional[dict]) -> Dict[str, object]:
    out: Dict[str, object] = {}
    for g in _groups(cr):
        if isinstance(g, dict) and isinstance(g.get("groupName"), str):
            out.setdefault(g["groupName"], g.get("replicas"))
    return out


def overwrites(journal: List[dict], name: str, conflicts: List[dict],
               manager: str = AUTOSCALER, operator: str = OPERATOR) -> List[dict]:
    """Every write of a group's ``replicas`` by someone other than the autoscaler and
    the operator, with what became of it: ``overwritten`` (the autoscaler's next write
    of that field replaced it) and ``reported`` (an ``ownership`` conflict in the
    ledger found that value at a version not older than the write)."""
    entries = [e for e in journal if e["name"] == name and e["subresource"] is None]
    out = []
    for k, e in enumerate(entries):
        if e["manager"] in (manager, operator) or e["old"] is None:
            continue
        before, after = _replicas(e["old"]), _replicas(e["new"])
        for group, value in after.items():
            if group not in before or before[group] == value:
                continue
            w = {"t": e["t"], "writer": e["manager"], "group": group, "from": before[group],
                 "to": value, "resource_version": e["rv"], "overwritten": False,
                 "overwritten_at": None}
            for later in entries[k + 1:]:
                now = _replicas(later["new"]).get(group)
                if now != value:
                    w["overwritten"] = later["manager"] == manager
                    w["overwritten_at"] = later["rv"] if w["overwritten"] else None
                    w["autoscaler_value"] = now if w["overwritten"] else None
                    break
            w["reported"] = any(
                c.get("kind") == "ownership" and c.get("group") == group
                and c.get("found") == value
                and int(c.get("resource_version") or 0) >= e["rv"] for c in conflicts)
            out.append(w)
    return out


def counts(audit: List[dict], journal: List[dict], name: str, conflicts: List[dict]) -> dict:
    """``wrong_group_patches`` and ``overwrites_unreported`` of a run, with the lists."""
    wrong = wrong_group_patches(audit, journal, name)
    writes = overwrites(journal, name, conflicts)
    return {"wrong_group_patches": len(wrong),
            "overwrites": sum(1 for w in writes if w["overwritten"]),
            "overwrites_unreported": sum(1 for w in writes
                                         if w["overwritten"] and not w["reported"]),
            "detail": {"wrong_group_patches": wrong, "foreign_writes": writes}}
