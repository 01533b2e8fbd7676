"""Ray's core packing routine `_try_schedule` (docs/ray-semantics.md §4) over the
context: existing nodes first, then in-place resizes, then new nodes.

Each packing loop keeps a ``Picker``: per candidate, the cached trial walk and
score, recomputed only when a pick made them stale (kernels/pick.py).
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model import ippr
from .context import Context
from vecsched.engine.model.dtypes import CNT, IDX, Status
from vecsched.engine.model.problem import order_mask
from vecsched.engine.kernels.fit import _fits_any, _minimal_rows
from vecsched.engine.kernels.labels import _labels_held
from vecsched.engine.kernels.loop import _run_loop
from vecsched.engine.kernels.pick import _pick_scratch
from vecsched.engine.kernels.records import Classes, LoopMode, cands as new_cands
from vecsched.engine.kernels.rows import row_ids
from vecsched.engine.kernels.steps import commit_once, invalidate_once, pick_once
from .requests_view import Requests


def classes(ctx: Context, cands: np.ndarray, source: int) -> tuple[np.ndarray, int, int]:
    """Equivalence classes of candidates: each class is tried once per pick, by
    its first member in list order.

    Non-running nodes follow Ray's NodeStateCache exactly: equal (type, kind,
    totals, availability for this source, labels), placed requests ignored.
    Running nodes, which Ray tries one by one, are grouped only when nothing
    that decides a walk or a score differs - type, kind, labels, totals in dict
    order, availability, placed-request marks - apart from private columns
    (a raylet's ``node:<ip>`` resource: on that node only, requested by nobody,
    fully free, so its utilisation term is an exact 0). Their first member then
    wins exactly when Ray's would, so the decision is unchanged.
    """
    sa = ctx.src(source)
    cls = np.full(ctx.M, -1, IDX)
    running = ctx.status[cands] == Status.RAY_RUNNING
    pend, run = cands[~running], cands[running]
    if pend.size:
        lc = ctx.loose_classes(source, pend, lambda slots: _loose_keys(ctx, slots, sa))
        cls[pend] = lc[pend]
    n = len(ctx.loose_ids[source])
    strict = n
    if run.size > 1:
        rc = ctx.strict_classes(source, run, lambda slots: _running_classes(ctx, slots, sa, 0))
        ids = rc[run]
        cls[run] = np.where(ids >= 0, n + ids, -1)
        n += ctx.n_strict[source]
    return cls, n, strict


def _loose_keys(ctx: Context, pend: np.ndarray, sa) -> list:
    """Ray's NodeStateCache key (type, kind, totals, availability, labels) of each
    slot, as bytes: the fixed columns, then the (column, value) pairs of the labels
    it has (one label column per placement group, nearly all absent)."""
    tp = _listed(ctx, pend)
    fp = sa.present[pend]
    fixed = np.hstack([
        ctx.type[pend, None].astype(float), ctx.kind[pend, None].astype(float),
        np.where(tp, ctx.total[pend], 0.0), tp, np.where(fp, sa.free[pend], 0.0), fp]) + 0.0
    at, pairs = _labels_held(ctx.label, pend.astype(np.int64))
    at = (at * pairs.itemsize * 2).tolist()          # byte offsets of each slot's pairs
    fb, pb = np.ascontiguousarray(fixed).tobytes(), pairs.tobytes()
    w = fixed.shape[1] * fixed.itemsize                # bytes of one slot's fixed row
    return [fb[i * w: i * w + w] + pb[at[i]: at[i + 1]] for i in range(len(at) - 1)]


def _placements(won: np.ndarray, ev_ptr: np.ndarray, ev_tau: np.ndarray) -> tuple:
    """(slot, run, units) of every winner of a kernel loop: each winner of pick e
    takes ev_tau[e]'s nonzero entries, runs in order."""
    pe, pk = np.nonzero(ev_tau)                  # pairs of each pick, runs ascending
    nnz = np.bincount(pe, minlength=ev_tau.shape[0])
    start = np.cumsum(nnz) - nnz
    ev_of = np.repeat(np.arange(ev_tau.shape[0]), np.diff(ev_ptr))
    cnt = nnz[ev_of]                             # pairs per winner
    w = np.repeat(np.arange(won.shape[0]), cnt)
    within = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
    pair = start[ev_of][w] + within
    return won[w].astype(np.int64), pk[pair].astype(np.int64), ev_tau[pe[pair], pk[pair]]


def _varying(a: np.ndarray) -> np.ndarray:
    """The columns of ``a`` that are not the same in every row (a constant column
    tells no rows apart; labels have one column per placement group)."""
    return a[:, (a != a[:1]).any(axis=0)] if a.shape[0] > 1 else a[:, :0]


def _listed(ctx: Context, slots: np.ndarray) -> np.ndarray:
    return order_mask(ctx.order[slots], ctx.p.R)


def _running_classes(ctx: Context, run: np.ndarray, sa, base: int) -> np.ndarray:
    priv = ctx.private
    tp = _listed(ctx, run)
    fp = sa.present[run]
    # A private column must be a plain "1 of 1 free" entry, else the node stays alone.
    pv_tot = np.where(tp[:, priv], ctx.total[run][:, priv], 0.0)
    pv_free = np.where(fp[:, priv], sa.free[run][:, priv], 0.0)
    odd = ((pv_tot != pv_free) | (tp[:, priv] != fp[:, priv])).any(axis=1)
    order = _compact(ctx.order[run], priv)
    pub = ~priv
    key = np.hstack([
        ctx.type[run, None].astype(float), ctx.kind[run, None].astype(float),
        order.astype(float), np.where(tp[:, pub], ctx.total[run][:, pub], 0.0), tp[:, pub],
        np.where(fp[:, pub], sa.free[run][:, pub], 0.0), fp[:, pub], sa.placed_res[run],
        sa.placed_gpu[run, None], sa.hist[run].astype(float), sa.nhist[run, None],
        _varying(ctx.label[run]).astype(float), tp[:, priv].sum(axis=1, keepdims=True),
        np.where(odd, np.arange(run.size), -1)[:, None].astype(float)])
    ids, _ = row_ids(key)
    return base + ids


def _compact(order: np.ndarray, priv: np.ndarray) -> np.ndarray:
    """Order rows without the private columns, remaining entries kept in order."""
    out = np.full_like(order, -1)
    keep = (order >= 0) & ~priv[np.maximum(order, 0)]
    pos = np.cumsum(keep, axis=1) - 1           # each kept entry's place in its row
    rows = np.broadcast_to(np.arange(order.shape[0])[:, None], order.shape)
    out[rows[keep], pos[keep]] = order[keep]
    return out


class Picker:
    """The candidates of one packing loop, in list order, with cached walks
    (kernels/records.py ``Cands``; the first n entries are in use)."""

    def __init__(self, packer: "Packer", cands: np.ndarray, cls: np.ndarray, ncls: int, K: int,
                 strict_from: int = -1):
        self.pk = packer
        self.cls, self.ncls, self.K = cls, ncls, K
        # Class ids >= strict_from group nodes equal in everything a walk or score
        # reads (running twins); lower ids are Ray's looser NodeStateCache classes.
        self.strict_from = ncls if strict_from < 0 else strict_from
        self.n = 0
        self.cs = new_cands(max(len(cands), 8), K)
        self.n = len(cands)
        self.cs.slot[: self.n] = cands
        self.cs.alive[: self.n] = True
        self._scr = None

    def _alloc(self, cap: int) -> None:
        old, self.cs = self.cs, new_cands(cap, self.K)
        for a, b in zip(old, self.cs):
            b[: self.n] = a[: self.n]

    def classes(self) -> Classes:
        c = self.pk.ctx
        if self.cls.shape[0] < c.M:
            self.cls = np.concatenate([self.cls, np.full(c.M - self.cls.shape[0], -1, IDX)])
        return Classes(self.cls, int(self.ncls), int(self.strict_from))

    def scratch(self):
        if self._scr is None:
            c = self.pk.ctx
            self._scr = _pick_scratch(int(self.ncls), c.p.R, self.K, c.hist.shape[1])
        return self._scr

    def add(self, m: int) -> None:
        if self.n == self.cs.slot.shape[0]:
            self._alloc(2 * self.n)
        cs = self.cs
        cs.slot[self.n] = m
        cs.alive[self.n] = True
        cs.fresh[self.n] = False
        self.n += 1

    def pick(self, runs: np.ndarray, left: np.ndarray) -> int:
        ps = self.pk.ctx.pack_state(self.pk.source, self.pk.rq)
        return pick_once(self.cs, self.n, self.classes(), ps, runs, left, self.scratch())

    def take(self, i: int, old_left: np.ndarray, new_left: np.ndarray) -> None:
        """Candidate i won: drop it and mark stale what its pick changed."""
        self.cs.alive[i] = False
        changed = np.flatnonzero(old_left != new_left)
        invalidate_once(self.cs, self.n, changed, len(changed), old_left, new_left)

    def remaining(self) -> np.ndarray:
        return self.cs.slot[: self.n][self.cs.alive[: self.n]]

    def twins(self, i: int) -> list:
        """Positions after i of candidates strictly equal to candidate i."""
        cs, n = self.cs, self.n
        c = self.cls[cs.slot[i]]
        if c < 0 or c < self.strict_from:
            return []
        same = cs.alive[:n] & (self.cls[cs.slot[:n]] == c)
        same[: i + 1] = False
        return np.flatnonzero(same).tolist()

    def take_twins(self, positions: list, m: int) -> list:
        """The twins at ``positions`` win too: they get slot m's committed rows."""
        ctx = self.pk.ctx
        sa = ctx.src(self.pk.source)
        slots = self.cs.slot[positions]
        for s in slots.tolist():
            ctx.touch(s, self.pk.source)
        for a in (*sa, ctx.label):
            a[slots] = a[m]
        self.cs.alive[positions] = False
        return slots.tolist()

    def all_below(self, i: int, mask: np.ndarray) -> bool:
        """Whether every candidate in ``mask`` has a key strictly below i's."""
        if not mask.any():
            return True
        c, cs = self.pk.ctx, self.cs
        n = self.n
        mi, mo = cs.slot[i], cs.slot[:n][mask]
        keys = ((cs.label_score, None), (cs.gpu_ok, None), (cs.match, None),
                (cs.util_min, None), (cs.util_mean, None), (None, c.rec), (None, c.prio),
                (None, c.avail))
        tied = np.ones(int(mask.sum()), bool)
        for own, slot in keys:
            o = own[:n][mask] if own is not None else slot[mo]
            w = own[i] if own is not None else slot[mi]
            if (tied & (o > w)).any():
                return False
            tied &= o == w
        return not tied.any()


class Packer:
    """One `_try_schedule` call of Ray over the context, for one request source."""

    batching = True      # take runs of identical picks at once (tests switch it off)
    kernel = True        # loops in kernels/loop.py (tests switch it off to compare)

    def __init__(self, ctx: Context, rq: Requests, source: int):
        self.ctx, self.rq, self.source = ctx, rq, source
        self.placements: list[tuple[int, int, int]] = []   # (slot, run index, units)
        self._chunks: list = []      # placements as (slots, runs, units) arrays, in order

    def _loop(self, picker: Picker, runs, left, *, avail=None, room=None,
              on_win=None) -> tuple[list, np.ndarray]:
        """Pick, commit, repeat while demand and candidates remain.

        ``avail`` (template loop): per-type launches left; a winner's type gets a
        fresh template while room remains. ``room``: most winners allowed (the
        global max_num_nodes). Runs of identical picks are taken at once (see
        ``_batch``): the same decisions, one trial walk for the lot.
        """
        c = self.ctx
        # A config whose name is another configured key (name != key) brings back
        # another type's template after a pick: the Python loop handles that case.
        if self.kernel and not c.p.relabels:
            # Inside a transaction the kernel's changes are saved up front, in bulk;
            # a win's callback only touches rows no pick reads, so it runs after.
            c.save_packing(picker.cs.slot[: picker.n], self.source)
            winners, left = self._loop_kernel(picker, runs, left, avail, room)
            if on_win is not None:
                for s in winners:
                    on_win(s)
            return winners, left
        winners = []
        while left.any() and picker.cs.alive[: picker.n].any():
            if room is not None and len(winners) >= room:
                break
            i = picker.pick(runs, left)
            if i < 0:
                break
            m = int(picker.cs.slot[i])
            tau = picker.cs.taken[i].copy()
            if avail is not None:
                t = int(c.type[m])
                limit = int(avail[t]) if room is None else min(int(avail[t]), room - len(winners))
                if c.pristine.get(t) != m:        # another type's template comes back (name != key)
                    limit = min(limit, 1)
                twins = []
            else:
                twins = picker.twins(i)
                limit = 1 + len(twins)
            r = self._batch(picker, i, tau, left, limit) if limit > 1 and self.batching else 1
            if avail is not None:
                m = self._clone(m, 1)[0]           # the pristine template stays pristine
            c.touch(m, self.source)
            commit_once(m, c.pack_state(self.source, self.rq), runs, left,
                        np.zeros(len(runs), np.int64))
            slots = [m]
            if r > 1:
                slots += (self._clone(m, r - 1) if avail is not None
                          else picker.take_twins(twins[: r - 1], m))
            new_left = left - r * tau
            picker.take(i, left, new_left)
            left = new_left
            for s in slots:
                for k in np.flatnonzero(tau):
                    self.placements.append((s, int(k), int(tau[k])))
                winners.append(s)
                if on_win is not None:
                    on_win(s)
            if avail is not None:
                avail[t] -= r
                if avail[t] > 0:
                    picker.add(self._template(t))
        return winners, left

    def _loop_kernel(self, picker: Picker, runs, left, avail, room) -> tuple[list, np.ndarray]:
        """``_loop`` in one kernel call (kernels/loop.py), same decisions."""
        c, p = self.ctx, self.ctx.p
        templates = avail is not None
        n = picker.n
        if templates:
            bound = min(int(left.sum()), int(np.maximum(avail, 0).sum()))
            bound = bound if room is None else min(bound, room)
            if picker.cs.slot.shape[0] < n + p.T + 1:
                picker._alloc(n + p.T + 1)       # re-added templates fit, after compaction
            c._grow(c.M + bound)
        else:
            bound = n
        won = np.empty(max(bound, 1), np.int64)
        mode = LoopMode(templates, avail if templates else np.zeros(0, CNT),
                        -1 if room is None else int(room), bool(self.batching))
        nw, left, M1, picker.n, ev_ptr, ev_tau, tmpl = _run_loop(
            picker.cs, n, picker.classes(), c.pack_state(self.source, self.rq), runs,
            np.asarray(left, CNT), mode, c.M, won, picker.scratch())
        if templates:
            c.finish_clones(M1, tmpl, self.source)
        self._add_chunk(*_placements(won[:nw], ev_ptr, ev_tau))
        return won[:nw].tolist(), left

    def _add_chunk(self, slots, runs, units) -> None:
        if self.placements:
            self._chunks.append(tuple(np.asarray(x, np.int64).reshape(-1)
                                      for x in zip(*self.placements)))
            self.placements = []
        self._chunks.append((slots, runs, units))

    def placement_arrays(self) -> tuple:
        """Every placement of this packer, in order: (slots, runs, units) arrays."""
        self._add_chunk(*(np.zeros(0, np.int64),) * 3)
        return tuple(np.concatenate([c[i] for c in self._chunks]) for i in range(3))

    def _batch(self, picker: Picker, i: int, tau, left, limit: int) -> int:
        """How many times in a row the winner's pick repeats exactly: its twin (the
        next class member, or a fresh template) walks the same while every run it
        takes from keeps at least ``tau`` and it never took all that remained; every
        other candidate's cached walk stays valid for the picks in between (it took
        less than remained and still fits under what remains) and its key stays
        strictly below the winner's (a tie would go to the earlier candidate)."""
        k = tau > 0
        L, tk = left[k], tau[k]
        if not k.any() or (tk == L).any():
            return 1
        r = min(limit, int((L // tk).min()))
        if r <= 1:
            return 1
        n = picker.n
        cs = picker.cs
        others = cs.alive[:n] & cs.fresh[:n]
        others[i] = False
        if others.any():
            T = cs.taken[:n][others][:, k]
            ro = ((L - T) // tk).min(axis=1)
            ro[(T == L).any(axis=1)] = 0
            r = min(r, int(ro.min()) + 1)
            if r <= 1:
                return 1
            if not picker.all_below(i, others & cs.placed[:n]):
                return 1
        return r

    def _clone(self, m: int, k: int) -> list:
        """k more launches identical to the committed template m."""
        c = self.ctx
        return c.copy_slot(m, k).tolist()

    def run(self, run_req: np.ndarray, run_cnt: np.ndarray) -> np.ndarray:
        """Pack runs (request rows in Ray order, with counts). Returns the units
        left per run; the context's node list is rewritten as Ray's is."""
        c, p, rq = self.ctx, self.ctx.p, self.rq
        runs = np.asarray(run_req, IDX)
        left = np.asarray(run_cnt, CNT).copy()
        K = len(runs)
        # §4.4: a resize in flight counts at its desired size.
        for m in c.nodes[c.ippr_attached[c.nodes]].tolist():
            if ippr.in_progress(c, m):
                ippr.update_totals(c, m, *c.ippr_desired[m])
        sa = c.src(self.source)
        # §4.2 pre-filter: running nodes that cannot fit any shape wait at the end.
        nodes = c.nodes
        live_q = np.unique(runs[left > 0])
        fits_any = _fits_any(sa.free, nodes, _minimal_rows(rq.table.qty, live_q.astype(IDX)),
                             rq.kernel)
        exhausted = (c.status[nodes] == Status.RAY_RUNNING) & ~fits_any & (len(live_q) > 0)
        cands = nodes[~exhausted]
        # §4.3 existing nodes first.
        cls, ncls, strict = classes(c, cands, self.source)
        picker = Picker(self, cands, cls, ncls, K, strict)
        if len(live_q):
            # A pending node that holds no unit of any shape places nothing: its walk
            # is known without walking (it stays in the list where it is).
            none = ~fits_any[~exhausted]
            picker.cs.fresh[: picker.n][none] = True
        target, left = self._loop(picker, runs, left)
        nodes_after = np.concatenate([np.asarray(target, IDX), picker.remaining(),
                                      nodes[exhausted]])
        if c.ippr_attached[nodes_after].any():   # reorders the list even with no demand left
            nodes_after, left = self._ippr_pass(runs, left, nodes_after)
        # §4.5 new nodes, one template per type with room, in config order.
        avail = c.type_available()
        launched = []
        if left.any():
            tmpl = [self._template(t) for t in range(p.T) if avail[t] > 0]
            picker = Picker(self, np.asarray(tmpl, IDX), np.full(c.M, -1, IDX), 0, K)
            cap = p.max_num_nodes

            room = None if cap < 0 else max(0, cap - len(nodes_after))
            launched, left = self._loop(picker, runs, left, avail=avail, room=room)
        c.nodes = np.concatenate([nodes_after, np.asarray(launched, IDX)]).astype(IDX)
        self.types_left, self.n_nodes = avail, len(c.nodes)
        return left

    def _template(self, t: int) -> int:
        """The pristine TO_LAUNCH node of type t (never changed: a winning template
        is cloned into a new slot before its commit)."""
        return self.ctx.pristine[t]

    def _ippr_pass(self, runs, left, nodes_after):
        """§4.4: nodes that may still grow in place, at their max size, before any
        new node; winners get a resize queued, the others stay as they were."""
        c = self.ctx
        up = np.array([ippr.can_resize_up(c, m) for m in nodes_after.tolist()], bool)
        rest, cands = nodes_after[~up], nodes_after[up]
        if not len(cands):
            return nodes_after, left
        saved = c.save_rows(cands)
        for m in cands.tolist():
            ippr.update_totals(c, m, *c.ippr_max[m])
        cls, ncls, strict = classes(c, cands, self.source)
        picker = Picker(self, cands, cls, ncls, len(runs), strict)
        winners, left = self._loop(picker, runs, left, on_win=lambda m: ippr.queue_resize(c, m))
        others = picker.remaining()
        c.load_rows(saved, others)          # not chosen: back to their size before the raise
        return np.concatenate([rest, np.asarray(winners, IDX), others]), left
