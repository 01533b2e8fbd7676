"""The request table as the kernels see it, plus the requests the tick derives
(STRICT_PACK bundles merged into one request, §3.7 item 3)."""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.dtypes import IDX
from vecsched.engine.kernels.records import Reqs
from vecsched.engine.model.problem import Problem
from .labelcols import label_columns, mapped_anti


class Requests:
    def __init__(self, p: Problem):
        t = p.req
        self.p = p
        self.table = _Rows(t)
        self.table.anti = mapped_anti(t.anti, label_columns(p)[0])   # context columns
        self._keys: dict = {}
        self._pcols: dict = {}          # row -> its present columns (merges read them)
        self._merged: dict = {}         # members' bundle numbers -> the merged row's parts
        # Every gang's request list, merged once up front (one rebuild for all).
        self._aff = self.table.aff.tolist()
        self._gang_req, self._gang_ptr = p.gang_req.tolist(), p.gang_ptr.tolist()
        self._gangs = [self._gang_rows(g) for g in range(p.G)]
        self.table.flush()
        self._rebuild()

    def _rebuild(self) -> None:
        t = self.table
        Q, R = t.qty.shape
        pos = t.qty > 0
        self.ncols = pos.sum(axis=1).astype(IDX)
        self.cols = np.full((Q, max(R, 1)), -1, IDX)
        at = np.cumsum(pos, axis=1) - 1                # each positive column's place in its row
        rows, cs = np.nonzero(pos)
        self.cols[rows, at[rows, cs]] = cs
        g = self.p.gpu_col
        self.gpu_key = t.present[:, g].copy() if g >= 0 else np.zeros(Q, bool)
        self.has_sel = t.sel_hi > t.sel_lo
        t0 = self.p.req
        self.kernel = Reqs(t.qty, self.cols, self.ncols, self.gpu_key, t.anti, t.sel_lo,
                           t.sel_hi, t0.sel_con_ptr, t0.con_key, t0.con_op, t0.con_val_ptr,
                           t0.con_vals, self.has_sel)

    def row_key(self, q: int):
        """What makes two rows the same request, to the sort and to packing: the
        request identity and its bundle sum; a merged row is only itself."""
        keys = self._row_keys
        if keys is None:
            Q0 = self.p.req.Q
            keys = self._row_keys = list(zip(self.p.req.ident.tolist(),
                                             self.table.sum[:Q0].tolist()))
        return keys[q] if q < len(keys) else -1 - q

    _row_keys = None

    def sort_key(self, q: int, make) -> tuple:
        """Ray's sort key of row q, computed once per distinct request (identical
        requests with the same bundle sum share it; merged rows are their own)."""
        # The bundle sum joins the identity: it follows each map's own key order.
        k = self.row_key(q)
        key = self._keys.get(k)
        if key is None:
            key = self._keys[k] = make()
        return key

    def gang_requests(self, g: int) -> list[int]:
        return self._gangs[g]

    def _gang_rows(self, g: int) -> list[int]:
        """Gang g's request rows after Ray's affinity merge: unconstrained and
        anti-affinity bundles first in order, then one merged request per
        (affinity label, value, selectors) group in first-seen order, whose bundle
        is the per-key sum and whose selectors are the first member's."""
        t = self.table
        rows = self._gang_req[self._gang_ptr[g]: self._gang_ptr[g + 1]]
        aff = self._aff
        if rows and rows.count(rows[0]) == len(rows):     # n equal bundles (the usual gang)
            return rows if aff[rows[0]][0] < 0 else [self._merge(rows)]
        out, groups = [], {}
        for q in rows:
            a = aff[q]
            if a[0] < 0:
                out.append(q)
            else:
                groups.setdefault((a[0], a[1], t.sel_key[q]), []).append(q)
        for members in groups.values():
            out.append(self._merge(members))
        return out

    def _present_cols(self, q: int) -> list:
        cols = self._pcols.get(q)
        if cols is None:
            cols = self._pcols[q] = [r for r, v in enumerate(self.table.present[q].tolist()) if v]
        return cols

    def _merge(self, members: list[int]) -> int:
        t = self.table
        if len(members) == 1:
            return members[0]
        # Members with the same bundles merge to the same bundle (most gangs are n
        # equal bundles, the same few shapes over many gangs): the merge is made
        # once, each gang still gets a row of its own.
        sig = self._bundle_sig()
        key = tuple([sig[q] for q in members])
        got = self._merged.get(key)
        if got is None:
            got = self._merged[key] = self._merged_row(members)
        qty, present, s = got
        first = members[0]
        return t.append(qty, present, s, t.aff[first], t.sel_lo[first], t.sel_hi[first],
                        t.sel_key[first])

    def _bundle_sig(self) -> list:
        """Each original row's bundle as a number, equal for rows whose quantities
        and present columns are equal bit for bit (a merge reads only those); rows
        without an affinity (never merged) are -1."""
        if self._sig is None:
            t = self.p.req
            aff = np.flatnonzero(t.aff[:, 0] >= 0)
            bits = np.ascontiguousarray(np.concatenate(
                [np.ascontiguousarray(t.qty[aff], np.float64).view(np.uint64),
                 t.present[aff].astype(np.uint64)], axis=1))
            sig = np.full(t.qty.shape[0], -1, np.int64)
            if aff.size and bits.shape[1]:
                rows = bits.view(np.dtype((np.void, bits.shape[1] * 8))).reshape(-1)
                sig[aff] = np.unique(rows, return_inverse=True)[1].reshape(-1)
            elif aff.size:
                sig[aff] = 0            # no resource columns: every bundle is empty
            self._sig = sig.tolist()
        return self._sig

    _sig = None

    def _merged_row(self, members: list[int]) -> tuple:
        """(bundle, present columns, Ray's sort-key sum) of the members merged."""
        t = self.table
        acc: dict = {}            # column -> running sum, in the merged bundle's key order
        row_of = {q: t.qty[q].tolist() for q in dict.fromkeys(members)}   # equal bundles share
        for q in members:
            row = row_of[q]
            for r in self._present_cols(q):
                acc[r] = acc.get(r, 0.0) + row[r]
        qty = np.zeros(t.qty.shape[1])
        present = np.zeros(t.qty.shape[1], bool)
        cols = list(acc)
        qty[cols] = list(acc.values())
        present[cols] = True
        s = sum(acc.values())         # Ray's sort key: Python's sum() of the merged bundle
        return qty, present, s


class _Rows:
    """Growable copies of the request-table arrays the merge can extend."""

    def __init__(self, t):
        self.qty = t.qty.copy()
        self.present = t.present.copy()
        self.sum = t.sum.copy()
        self.n_pc = t.n_pc.copy()
        self.aff = t.aff.copy()
        self.anti = t.anti.copy()
        self.sel_lo = t.sel_ptr[:-1].copy()
        self.sel_hi = t.sel_ptr[1:].copy()
        self.sel_key = list(t.sel_key)
        self.sel_con_ptr = t.sel_con_ptr
        self._new: list = []       # appended rows not yet in the arrays

    def n_first_selector(self, q: int) -> int:
        if self.sel_hi[q] <= self.sel_lo[q]:
            return 0
        s = self.sel_lo[q]
        return int(self.sel_con_ptr[s + 1] - self.sel_con_ptr[s])

    def append(self, qty, present, s, aff, sel_lo, sel_hi, sel_key) -> int:
        """Add a row; its id is final at once, its arrays join at ``flush``."""
        self._new.append((qty, present, s, aff, sel_lo, sel_hi, sel_key))
        return self.qty.shape[0] + len(self._new) - 1

    def flush(self) -> None:
        new, self._new = self._new, []
        if not new:
            return
        qty, present, s, aff, lo, hi, keys = zip(*new)
        self.qty = np.vstack([self.qty, np.asarray(qty, self.qty.dtype)])
        self.present = np.vstack([self.present, np.asarray(present, bool)])
        self.sum = np.append(self.sum, s)
        self.n_pc = np.append(self.n_pc, np.ones(len(new))).astype(IDX)
        self.aff = np.vstack([self.aff, np.asarray(aff, IDX)])
        self.anti = np.vstack([self.anti, np.full((len(new), 2), -1, IDX)])
        self.sel_lo = np.append(self.sel_lo, lo).astype(IDX)
        self.sel_hi = np.append(self.sel_hi, hi).astype(IDX)
        self.sel_key.extend(keys)
