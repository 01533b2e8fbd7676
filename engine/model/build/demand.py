"""The demand of a tick as arrays: plain request runs, the request_resources()
constraint's requests and every placement-group bundle, as rows of one request
table (engine/model/requests.py), with their counts and the gangs over them."""
from __future__ import annotations

from dataclasses import dataclass
from itertools import repeat
from typing import Optional, Sequence

import numpy as np

from . import check
from .columns import TickColumns
from vecsched.engine.model.dtypes import CNT, IDX
from vecsched.engine.model.errors import ProblemError
from vecsched.engine.model.node_columns import pick
from vecsched.engine.model.requests import GangSpec, RequestSpec, RequestTable, encode


@dataclass
class DemandRows:
    """The request specs of a tick in row order: plain runs (S), the
    constraint's requests (C), then one row per distinct gang bundle object (an
    adapter passes one object for equal bundles), each bundle pointing at its row."""
    requests: Sequence[RequestSpec]
    constraint: Optional[Sequence[RequestSpec]]
    gangs: Sequence[GangSpec]
    specs: list             # every row's spec
    first_bundle: list      # gang row -> the first bundle (over all gangs) that uses it
    bundle_row: list        # bundle -> its gang row

    @classmethod
    def of(cls, requests, constraint, gangs) -> "DemandRows":
        bundles = [b for g in gangs for b in g.requests]
        row_of: dict = {}           # id(bundle) -> its row, numbered in first-seen order
        bundle_row = list(map(row_of.setdefault, map(id, bundles), map(len, repeat(row_of))))
        first = np.unique(np.asarray(bundle_row, np.int64), return_index=True)[1]
        first_bundle = first.tolist()
        specs = list(requests) + list(constraint or ()) + pick(bundles, first)
        return cls(requests, constraint, gangs, specs, first_bundle, bundle_row)

    @property
    def S(self) -> int:
        return len(self.requests)

    @property
    def C(self) -> int:
        return len(self.constraint or ())


@dataclass
class DemandArrays:
    table: RequestTable
    shape_count: np.ndarray     # (S,) units of each plain run
    con_count: np.ndarray       # (C,) units of each constraint request
    gang_ptr: np.ndarray        # (G+1,) gang -> its bundles in gang_req
    gang_req: np.ndarray        # (B,) request row of each bundle
    gang_key: np.ndarray        # (G, 2) Ray's gang sort key


def demand_arrays(d: DemandRows, c: TickColumns) -> DemandArrays:
    S, C = d.S, d.C
    wheres = _Wheres(S, C, [len(gs.requests) for gs in d.gangs], d.first_bundle)
    table = encode(d.specs, wheres, c.vocab, c.lvocab, c.values, check.qty,
                   [rs.sum for rs in d.specs])
    shape_count = np.zeros(S, dtype=CNT)
    for q, rs in enumerate(d.requests):
        shape_count[q] = check.count(rs.count, f"{wheres[q]}.count")
    con_count = np.zeros(C, dtype=CNT)
    for q, rs in enumerate(d.constraint or ()):
        con_count[q] = check.count(rs.count, f"{wheres[S + q]}.count")
    for q, rs in enumerate(d.specs[S + C:]):
        if rs.count != 1:
            raise ProblemError(f"{wheres[S + C + q]}.count",
                               f"a gang bundle is one unit, got {rs.count}")
    gangs = d.gangs
    gang_ptr = np.zeros(len(gangs) + 1, dtype=IDX)
    gang_ptr[1:] = np.cumsum([len(gs.requests) for gs in gangs], dtype=np.int64)
    gang_req = (S + C + np.asarray(d.bundle_row, np.int64)).astype(IDX)
    keys = [gs.sort_key for gs in gangs]
    for g in [g for g, key in enumerate(keys) if key is None]:
        keys[g] = (int(table.n_pc[gang_req[gang_ptr[g]: gang_ptr[g + 1]]].sum()),
                   len(gangs[g].requests))
    gang_key = np.zeros((len(gangs), 2), dtype=CNT)
    if keys:
        gang_key[:] = keys
    return DemandArrays(table, shape_count, con_count, gang_ptr, gang_req, gang_key)


class _Wheres:
    """The field name of each request row, made only when an error needs one."""

    def __init__(self, S: int, C: int, gang_sizes: list, first_bundle: list):
        self.S, self.C = S, C
        self.ptr = np.concatenate([[0], np.cumsum(gang_sizes, dtype=np.int64)])
        self.first = first_bundle       # gang row -> the first bundle that uses it

    def __getitem__(self, q: int) -> str:
        q = int(q)
        if q < self.S:
            return f"resource_requests[{q}]"
        if q < self.S + self.C:
            return f"cluster_resource_constraints[0].resource_requests[{q - self.S}]"
        k = self.first[q - self.S - self.C]
        g = int(np.searchsorted(self.ptr, k, side="right")) - 1
        return f"gang_resource_requests[{g}].requests[{k - int(self.ptr[g])}]"
