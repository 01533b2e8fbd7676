"""Whether worker groups can hold a trace's requests at all, and if not, why.

A request fits a worker group when one empty node of the group has every resource the
request asks for, in the quantity asked (Ray's implicit per-node slots, which no group
declares, count as 1 on every node, as in Ray). A request no group can hold is either
**missing** a resource (it asks for a custom resource or GPU model that no group has at
all: the wrong worker groups) or **too large** (every resource exists somewhere, but no
one node has enough). The import's "replay it" hint and the replay's refusal of a trace
no group can hold use this, so the message names the missing resource rather than
blaming the requests' size.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from vecsched.engine.model.dtypes import IMPLICIT_PREFIX

from .mapping import demand_shape, worker_group_specs

_SLACK = 1 + 1e-12


def fits(shape: dict, resources: dict) -> bool:
    """Whether one unit of ``shape`` fits an empty node with ``resources``."""
    return all(q <= resources.get(k, 1.0 if k.startswith(IMPLICIT_PREFIX) else 0.0) * _SLACK
               for k, q in shape.items() if q > 0)


def missing(shape: dict, present: set) -> list[str]:
    """The resources ``shape`` asks for that no node type has (``present``: every
    resource name some type has a positive amount of)."""
    return sorted(k for k, q in shape.items()
                  if q > 0 and k not in present and not k.startswith(IMPLICIT_PREFIX))


@dataclass
class Gaps:
    """Units no type can hold: ``missing`` maps a resource no type has to the units
    that ask for it; ``too_large`` counts the others that fit no single node."""
    units: int = 0
    unplaceable: int = 0
    too_large: int = 0
    missing: dict = field(default_factory=dict)

    @property
    def all_unplaceable(self) -> bool:
        return self.units > 0 and self.unplaceable == self.units

    def describe(self) -> str:
        """The gaps in words ("" when every unit fits some type)."""
        parts = [f"{n} ask for {k}, which no worker group has" for k, n in
                 sorted(self.missing.items(), key=lambda kv: (-kv[1], kv[0]))]
        if self.too_large:
            parts.append(f"{self.too_large} are larger than every node type")
        return "; ".join(parts)


def gaps(shapes: list, counts, types: list) -> Gaps:
    """The gaps of ``counts[s]`` units of each ``shapes[s]`` on node types whose
    resource dicts are ``types``."""
    present = {k for t in types for k, q in t.items() if q > 0}
    out = Gaps()
    for shape, n in zip(shapes, counts):
        n = int(n)
        out.units += n
        if n == 0 or any(fits(shape, t) for t in types):
            continue
        out.unplaceable += n
        lack = missing(shape, present)
        for k in lack:
            out.missing[k] = out.missing.get(k, 0) + n
        if not lack:
            out.too_large += n
    return out


_SHAPE_COLUMNS = ("cpu", "memory", "gpu", "gpu_spec", "resources", "app", "max_per_node",
                  "group_id")


def demand_gaps(demand: pa.Table, groups: pa.Table) -> Gaps:
    """The gaps of a demand table's rows on a worker-group table (each distinct row
    shape is built once: 2.3 s for 200,000 rows here, with other work running)."""
    cols = [c for c in _SHAPE_COLUMNS if c in demand.column_names]
    values = []
    for c in cols:
        v = demand.column(c).to_pylist()
        if c == "resources":
            v = [None if x is None else tuple(x) for x in v]
        elif c == "group_id":
            v = [x is not None for x in v]          # only whether the row is in a gang
        values.append(v)
    rows = Counter(zip(*values))
    shapes: dict[tuple, int] = {}
    for key, n in rows.items():
        row = dict(zip(cols, key))
        row["group_id"] = "g" if row.get("group_id") else None
        shape = tuple(demand_shape(row).items())
        shapes[shape] = shapes.get(shape, 0) + n
    types = [dict(s.resources) for s in worker_group_specs(groups)]
    return gaps([dict(k) for k in shapes], list(shapes.values()), types)
