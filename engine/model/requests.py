"""The request table: every resource request of a tick as arrays.

Rows are plain request runs first (``resource_requests``, in input order), then
the requests of the ``request_resources()`` constraint, then every gang bundle.
Besides the bundle each row carries its placement constraint (affinity or
anti-affinity on one label) and its label selectors (any of them must hold; a
selector holds when all its constraints do), stored as CSR arrays.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from itertools import chain
from operator import methodcaller
from typing import Mapping, Optional, Sequence

import numpy as np

from .dtypes import IDX, QTY
from .errors import ProblemError
from .vocab import Vocab

IN, NOT_IN = 1, 2                 # Ray's LabelSelectorOperator values
_OPS = {"in": IN, "not_in": NOT_IN, IN: IN, NOT_IN: NOT_IN}


@dataclass
class RequestSpec:
    """One request shape and how many identical units of it are pending.

    ``label_selectors``: a list of selectors, each a list of ``(key, op, values)``
    with op "in"/"not_in" (or Ray's 1/2). ``affinity`` / ``anti_affinity``:
    ``(label_name, label_value)``; at most one of them.
    """
    resources: Mapping[str, float]
    count: int = 1
    label_selectors: Sequence[Sequence[tuple]] = ()
    affinity: Optional[tuple[str, str]] = None
    anti_affinity: Optional[tuple[str, str]] = None
    sum: Optional[float] = None     # Ray's sort-key sum, when the caller knows the map order


@dataclass
class GangSpec:
    """A placement group: bundles placed all together or not at all.

    ``sort_key`` is Ray's gang order key (placement constraints summed over the
    gang's legacy request list, that list's length); by default computed from
    ``requests``.
    """
    requests: Sequence[RequestSpec]
    sort_key: Optional[tuple[int, int]] = None
    name: str = ""


@dataclass(frozen=True, eq=False)
class RequestTable:
    qty: np.ndarray            # (Q, R) f8
    present: np.ndarray        # (Q, R) bool: key in the bundle (zero entries too)
    sum: np.ndarray            # (Q,) f8 bundle sum in the bundle's own order
    n_pc: np.ndarray           # (Q,) i4 placement constraints (0 or 1)
    aff: np.ndarray            # (Q, 2) i4 (label key, value id) of an affinity, -1 none
    anti: np.ndarray           # (Q, 2) i4 (label key, value id) of an anti-affinity, -1 none
    sel_ptr: np.ndarray        # (Q+1,) i4 row -> its selectors
    sel_con_ptr: np.ndarray    # (nsel+1,) i4 selector -> its constraints
    con_key: np.ndarray        # (ncon,) i4 label key column
    con_op: np.ndarray         # (ncon,) i1 IN / NOT_IN
    con_val_ptr: np.ndarray    # (ncon+1,) i4 constraint -> its value ids
    con_vals: np.ndarray       # (nv,) i4 value ids
    sel_key: tuple             # (Q,) hashable canonical selectors (Ray's grouping key)
    ident: np.ndarray          # (Q,) i4 equal ids <=> identical requests
    names: tuple = field(default=())

    @property
    def Q(self) -> int:
        return int(self.sum.shape[0])

    def n_selectors(self, q: int) -> int:
        return int(self.sel_ptr[q + 1] - self.sel_ptr[q])

    def n_first_selector(self, q: int) -> int:
        if self.n_selectors(q) == 0:
            return 0
        s = self.sel_ptr[q]
        return int(self.sel_con_ptr[s + 1] - self.sel_con_ptr[s])


def collect_names(specs: Sequence[RequestSpec], vocab: Vocab, lvocab: Vocab) -> None:
    unique = list({id(rs): rs for rs in specs}.values())   # a shared spec once
    try:            # the resource names at once; a bad one: the loop below names the first
        for k in dict.fromkeys(chain.from_iterable(rs.resources for rs in unique)):
            vocab.add(k)
        plain = True
    except (TypeError, ValueError):
        plain = False
    for rs in unique:
        for k in () if plain else rs.resources:
            vocab.add(k)
        for sel in rs.label_selectors:
            for con in sel:
                lvocab.add(con[0])
        for pc in (rs.affinity, rs.anti_affinity):
            if pc is not None:
                lvocab.add(pc[0])


def encode(specs: Sequence[RequestSpec], wheres: Sequence[str], vocab: Vocab, lvocab: Vocab,
           values: Vocab, qty_check, sums: Optional[Sequence[float]] = None) -> RequestTable:
    """Encode request specs; ``wheres[q]`` names row q in errors."""
    Q, R = len(specs), len(vocab)
    qty = np.zeros((Q, R), QTY)
    present = np.zeros((Q, R), bool)
    total = np.zeros(Q, QTY)
    n_pc = np.zeros(Q, IDX)
    aff = np.full((Q, 2), -1, IDX)
    anti = np.full((Q, 2), -1, IDX)
    sel_ptr, sel_con_ptr, con_key, con_op, con_val_ptr, con_vals = [0], [0], [], [], [0], []
    sel_keys, idents, ident_of = [], [], {}
    pc_rows = ([], [])      # (row, label key, value) of affinities, anti-affinities
    done: dict = {}     # id(spec) -> its row's parts: a spec shared by many rows is read once
    for q, rs in enumerate(specs):
        parts = done.get(id(rs))
        if parts is None:
            parts = done[id(rs)] = _row_parts(rs, q, wheres, lvocab, values)
        (pa, pb), sels, ident = parts
        if pa is not None:
            pc_rows[0].append((q, pa[0], pa[1]))
        if pb is not None:
            pc_rows[1].append((q, pb[0], pb[1]))
        for cons in sels:
            for key, op, vals in cons:
                con_key.append(key)
                con_op.append(op)
                con_vals.extend(vals)
                con_val_ptr.append(len(con_vals))
            sel_con_ptr.append(len(con_key))
        sel_ptr.append(len(sel_con_ptr) - 1)
        sel_keys.append(ident[3])
        idents.append(ident_of.setdefault(ident, len(ident_of)))
    # The bundles' entries, row by row in each bundle's own order, at once.
    bundles = [rs.resources for rs in specs]
    lens = np.fromiter(map(len, bundles), np.int64, Q)
    qk = list(chain.from_iterable(bundles))
    qv = list(chain.from_iterable(map(_VALUES, bundles)))
    qc = np.fromiter(map(vocab.ids.__getitem__, qk), np.int64, len(qk))
    qr = np.repeat(np.arange(Q), lens)
    from vecsched.engine.model.build.check import checked
    vals = checked(qv, lambda j: f"{wheres[int(qr[j])]}.resources_bundle[{qk[j]!r}]", qty_check)
    qty[qr, qc] = vals
    present[qr, qc] = True
    for arr, rows in zip((aff, anti), pc_rows):
        if rows:
            a = np.asarray(rows, np.int64)
            arr[a[:, 0]] = a[:, 1:]
            n_pc[a[:, 0]] = 1
    # Each bundle's sum in its own key order, by this interpreter's sum() (Ray's
    # sort key; compensated from CPython 3.12, engine/kernels/pysum.py), unless given.
    given = [None] * Q if sums is None else list(sums)
    todo = [q for q in range(Q) if given[q] is None]
    if todo:
        starts = np.cumsum(lens) - lens
        for q in todo:
            given[q] = sum(vals[starts[q]: starts[q] + lens[q]].tolist())
    total[:] = np.asarray(given, QTY).reshape(Q)
    return RequestTable(
        qty=qty, present=present, sum=total, n_pc=n_pc, aff=aff, anti=anti,
        sel_ptr=np.asarray(sel_ptr, IDX), sel_con_ptr=np.asarray(sel_con_ptr, IDX),
        con_key=np.asarray(con_key, IDX), con_op=np.asarray(con_op, np.int8),
        con_val_ptr=np.asarray(con_val_ptr, IDX), con_vals=np.asarray(con_vals, IDX),
        sel_key=tuple(sel_keys), ident=np.asarray(idents, IDX))


_VALUES = methodcaller("values")


def _row_parts(rs: RequestSpec, q: int, wheres, lvocab: Vocab, values: Vocab):
    """One spec's placement constraint ids, encoded selectors and identity
    (checked here, so a bad spec is named by its first row q)."""
    res = rs.resources
    if rs.affinity is not None and rs.anti_affinity is not None:
        raise ProblemError(f"{wheres[q]}.placement_constraints", "has both an affinity "
                           "and an anti-affinity; at most one is supported")
    aff, anti = rs.affinity, rs.anti_affinity
    pcs = (None if aff is None else (lvocab[aff[0]], values.add(str(aff[1]))),
           None if anti is None else (lvocab[anti[0]], values.add(str(anti[1]))))
    sels, canon = [], []
    for i, sel in enumerate(rs.label_selectors):
        enc, cons = [], []
        for j, con in enumerate(sel):
            key, op, vals = con
            if op not in _OPS:
                raise ProblemError(
                    f"{wheres[q]}.label_selectors[{i}].label_constraints[{j}].operator",
                    f"must be IN or NOT_IN, got {op!r}")
            vals = [str(v) for v in vals]
            enc.append((lvocab[key], _OPS[op], [values.add(v) for v in vals]))
            cons.append((key, _OPS[op], tuple(sorted(vals))))
        sels.append(enc)
        canon.append(tuple(cons))
    ident = (tuple(sorted(res.items())), rs.affinity, rs.anti_affinity, tuple(canon))
    return pcs, sels, ident
