"""Who wrote a worker group's ``replicas``: the autoscaler, or someone else.

``replicas`` belongs to the autoscaler (people own ``minReplicas``/``maxReplicas``).
:class:`Ownership` remembers, per group, the value the side-car expects to read next:
the value its own patch wrote, else the value it last read. A read that shows another
value was written by someone else (a person's ``kubectl edit``, a GitOps sync): that is
an ownership conflict, reported once per change, whether or not the autoscaler ever
wrote that group. (Ray 2.60 restores a decrease to the pods it observes at its next
scale request; the report is what makes that restore not silent.)

Only a landed patch's own ``replicas`` ops move the expectation: a patch that landed
after an unrelated write (the guard re-sends it) returns an object with that write
in it, which the next read must still report. The first read after a start sets the
expectation without reporting: there is nothing to compare with.

Who wrote: :func:`owner` (the last manager of ``spec.workerGroupSpecs`` in
``managedFields``) and :func:`writer_of` (the last manager of one field).
"""
from __future__ import annotations

from typing import Dict, Iterator, Optional, Tuple

from .groups import split_groups

Change = Tuple[int, str, int, int, Optional[int]]  # index, group, expected, found, wrote


class Ownership:
    """The side-car's memory of each group's ``replicas`` (see the module docstring)."""

    def __init__(self):
        self.ours: Dict[str, int] = {}       # group -> replicas the autoscaler last wrote
        self.expected: Dict[str, int] = {}   # group -> what the next read should show

    def wrote(self, group: str, value) -> None:
        """A patch of the autoscaler's set ``group``'s replicas to ``value``."""
        self.ours[group] = value
        self.expected[group] = value

    def seen_under_patch(self, group: str, value) -> None:
        """A write seen (and reported) by the patch guard: not reported again."""
        self.ours[group] = value
        self.expected[group] = value

    def read(self, cr: dict) -> Iterator[Change]:
        """The groups of a fresh read whose ``replicas`` someone else changed, as
        ``(index, group, expected, found, autoscaler_wrote or None)``; each is then
        expected at its new value. Malformed groups are skipped (reported as such)."""
        _, problems = split_groups(cr)
        bad = {p["index"] for p in problems if p["index"] is not None}
        for i, g in enumerate((cr.get("spec") or {}).get("workerGroupSpecs") or []):
            if i in bad:
                continue
            group, rep = g["groupName"], g.get("replicas", 1)
            was = self.expected.get(group)
            self.expected[group] = rep
            if was is not None and rep != was:
                yield i, group, was, rep, self.ours.get(group)


def conflict_entry(t: float, cluster: Optional[str], change: Change, writer: str,
                   rv) -> dict:
    """The ledger's ``ownership`` conflict for a change seen on a read."""
    i, group, was, rep, wrote = change
    return {"t": t, "kind": "ownership", "cluster": cluster,
            "field": f"spec.workerGroupSpecs[{i}].replicas", "group": group,
            "autoscaler_wrote": wrote, "expected": was, "found": rep, "writer": writer, "resource_version": rv}


def conflict_message(c: dict) -> str:
    """The log line of an ownership conflict seen on a read."""
    if c["autoscaler_wrote"] is not None:
        before = f"but the autoscaler set it to {c['autoscaler_wrote']}"
    else:
        before = (f"it was {c['expected']} when the autoscaler last read it (the "
                  f"autoscaler has not written it)")
    return (f"vecsched kuberay: ownership conflict on RayCluster {c['cluster']}: "
            f"{c['field']} (group {c['group']}) is {c['found']}, {before}; last written "
            f"by {c['writer']!r}. replicas belongs to the autoscaler (Ray 2.60 restores a "
            f"decrease to the pods it observes at its next scale request); people own "
            f"minReplicas/maxReplicas. Exclude {c['field']} from GitOps sync (e.g. Argo CD "
            f"ignoreDifferences with RespectIgnoreDifferences=true).")


def owner(cr: dict, exclude: Optional[str]) -> Optional[str]:
    """The manager that last wrote ``spec.workerGroupSpecs`` (other than ``exclude``)."""
    best = None
    for e in (cr.get("metadata") or {}).get("managedFields") or []:
        f = (e.get("fieldsV1") or {}).get("f:spec") or {}
        if "f:workerGroupSpecs" in f and e.get("manager") != exclude:
            if best is None or (e.get("time") or "") >= (best.get("time") or ""):
                best = e
    return best.get("manager") if best else None


def writer_of(cr: dict, path: str, exclude: Optional[str]) -> Optional[str]:
    """The manager that last wrote the field at JSON pointer ``path`` (lists are owned
    whole), other than ``exclude``."""
    keys = []
    for part in path.strip("/").split("/"):
        if part.isdigit() or part == "-":
            break
        keys.append("f:" + part.replace("~1", "/").replace("~0", "~"))
    best = None
    for e in (cr.get("metadata") or {}).get("managedFields") or []:
        node = e.get("fieldsV1") or {}
        for k in keys:
            node = node.get(k) if isinstance(node, dict) else None
            if node is None:
                break
        if node is not None and e.get("manager") != exclude:
            if best is None or (e.get("time") or "") >= (best.get("time") or ""):
                best = e
    return best.get("manager") if best else None
