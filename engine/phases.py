"""The ordered phases of one tick (RAY_V2_SEMANTICS.md §3), each a small function
over the Context. Section numbers refer to that document."""
from __future__ import annotations

import math

import numpy as np

from .context import Context
from .dtypes import CNT, IDX, Cause, Kind, Sched, Status, Why
from .kernels.pack import _best_node, _commit
from .kernels.score import _victim_util
from .order import request_order, victim_order


# ---- §3.1 outdated nodes ----------------------------------------------------------------
def terminate_outdated(ctx: Context) -> None:
    p = ctx.p
    if p.disable_launch_config_check:
        return
    for m in ctx.nodes:
        if ctx.sched[m] != Sched.SCHEDULABLE or ctx.kind[m] == Kind.HEAD:
            continue   # a head is only warned about, never terminated
        if ctx.status[m] in Status.UNTERMINABLE:
            continue   # quirk Q13 fix: it becomes outdated once it is ALLOCATED
        t = ctx.type[m]
        want = p.type_launch_hash[t]
        node_hash = p.node_launch_hash[m] if m < p.N else ""
        if not p.type_configured[t] or (want and want != node_hash):
            ctx.terminate(m, Cause.OUTDATED, 0)


# ---- §3.2 minimum workers ---------------------------------------------------------------
def enforce_min_workers(ctx: Context) -> None:
    p = ctx.p
    have = ctx.type_counts()
    new = []
    for t in range(p.T):
        if p.type_configured[t] and have[t] < p.type_min[t]:
            new.append(ctx.new_slots(t, int(p.type_min[t] - have[t])))
    if new:
        # New nodes go in front of the list. Ray aliases them (quirk Q4); here each
        # is its own slot, so a later cut removes exactly the nodes it names.
        ctx.nodes = np.concatenate(new + [ctx.nodes]).astype(IDX)


# ---- §3.3–§3.5 caps and victims ---------------------------------------------------------
def _victims(ctx: Context, group: np.ndarray, k: int):
    """(victims, survivors) of a group: Ray's victim order, head never chosen and
    moved last. REQUESTED and RAY_STOP_REQUESTED instances are never chosen either
    (quirk Q13 fixed: Ray would pick them and the instance manager then rejects
    the whole tick); they are kept and listed after the head, in victim order."""
    util = np.zeros(ctx.M)
    util[group] = _victim_util(ctx.total[group], ctx.order[group], ctx.free[group],
                               ctx.present[group])
    ordered = victim_order(ctx, group, util)
    keep = np.isin(ctx.status[ordered], Status.UNTERMINABLE)
    requested, others = ordered[keep], ordered[~keep]
    heads = np.flatnonzero(ctx.kind[others] == Kind.HEAD)
    head = others[heads[:1]]
    rest = np.delete(others, heads[:1])
    return rest[:k], np.concatenate([rest[k:], head, requested]).astype(IDX)


def enforce_max_per_type(ctx: Context) -> None:
    p = ctx.p
    nodes = ctx.nodes
    dying = nodes[ctx.sched[nodes] == Sched.TO_TERMINATE]
    live = nodes[ctx.sched[nodes] != Sched.TO_TERMINATE]
    # Groups in first-appearance order of their type.
    _, first = np.unique(ctx.type[live], return_index=True)
    groups, cut = [], [dying]
    for t in ctx.type[live][np.sort(first)]:
        g = live[ctx.type[live] == t]
        extra = len(g) - int(p.type_max[t]) if p.type_configured[t] else 0
        # A running node of a type gone from the config has no cap to enforce
        # (Ray raises KeyError here, quirk Q3; the node is kept and reported).
        if extra > 0:
            v, g = _victims(ctx, g, extra)
            for m in v:
                ctx.terminate(m, Cause.MAX_NUM_NODE_PER_TYPE, int(p.type_max[t]))
            cut.append(v)
        groups.append(g)
    ctx.nodes = np.concatenate(cut + groups).astype(IDX)


def enforce_max_global(ctx: Context) -> None:
    cap = ctx.p.max_num_nodes
    if cap <= 0:
        return   # None and 0 both mean "no cap" here (quirk Q6)
    nodes = ctx.nodes
    dying = nodes[ctx.sched[nodes] == Sched.TO_TERMINATE]
    live = nodes[ctx.sched[nodes] != Sched.TO_TERMINATE]
    extra = len(live) - cap
    if extra <= 0:
        return
    v, rest = _victims(ctx, live, extra)
    for m in v:
        ctx.terminate(m, Cause.MAX_NUM_NODES, cap)
    ctx.nodes = np.concatenate([dying, v, rest]).astype(IDX)


# ---- §4 the core packing routine ------------------------------------------------------
class Shapes:
    """Kernel-ready views of the request runs (one shape row per run)."""

    def __init__(self, p):
        S, R = p.shape_qty.shape
        pos = p.shape_qty > 0
        self.qty = p.shape_qty
        self.ncols = pos.sum(axis=1).astype(IDX)
        self.cols = np.full((S, max(R, 1)), -1, IDX)
        for s in range(S):
            c = np.flatnonzero(pos[s])
            self.cols[s, : c.size] = c
        g = p.gpu_col
        self.gpu_key = p.shape_present[:, g].copy() if g >= 0 else np.zeros(S, bool)


def _classes(ctx: Context, cands: np.ndarray) -> tuple[np.ndarray, int]:
    """Ray's NodeStateCache: non-running candidates with equal (type, kind, totals,
    availability, labels) are tried once per call; running nodes always apart."""
    cls = np.full(ctx.M, -1, IDX)
    pend = cands[ctx.status[cands] != Status.RAY_RUNNING]
    if pend.size == 0:
        return cls, 0
    tp = np.zeros_like(ctx.present[pend])
    rows = np.arange(pend.size)[:, None]
    o = ctx.order[pend]
    tp[np.broadcast_to(rows, o.shape)[o >= 0], o[o >= 0]] = True
    fp = ctx.present[pend]
    key = np.hstack([
        ctx.type[pend, None].astype(float), ctx.kind[pend, None].astype(float),
        np.where(tp, ctx.total[pend], 0.0), tp, np.where(fp, ctx.free[pend], 0.0), fp,
        ctx.label[pend].astype(float)])
    _, inv = np.unique(key, axis=0, return_inverse=True)
    cls[pend] = inv.reshape(-1)
    return cls, int(inv.max()) + 1


class Packer:
    """Runs one `_try_schedule` call of Ray over the context (demand source)."""

    def __init__(self, ctx: Context, shapes: Shapes):
        self.ctx, self.sh = ctx, shapes
        self.placements: list[tuple[int, int, int]] = []

    def _pick(self, cands, runs, left, cls, ncls):
        c, sh = self.ctx, self.sh
        taken = np.zeros(len(runs), np.int64)
        lscore = np.zeros(c.M, np.int64)
        best = _best_node(cands, cls, ncls, c.total, c.order, c.free, c.present,
                          c.placed_res, c.placed_gpu, lscore, c.rec, c.prio, c.avail,
                          c.p.implicit, c.p.exact, runs, left, sh.qty, sh.cols, sh.ncols,
                          sh.gpu_key, c.p.gpu_col, c.p.conserve_gpu, taken)
        if best < 0:
            return -1, taken
        m = int(cands[best])
        _commit(m, c.free, c.present, c.placed_res, c.placed_gpu, c.placed_any,
                c.p.implicit, c.p.exact, runs, taken, sh.qty, sh.cols, sh.ncols, sh.gpu_key)
        for k in np.flatnonzero(taken):
            self.placements.append((m, int(runs[k]), int(taken[k])))
        return best, taken

    def run(self, runs: np.ndarray, left: np.ndarray):
        """Pack runs (in Ray order) with counts left; returns the counts still left."""
        c, sh, p = self.ctx, self.sh, self.ctx.p
        live = left > 0
        runs, left = runs[live].astype(IDX), left[live].astype(CNT)
        out_left = dict(zip(runs.tolist(), left.tolist()))
        # §4.2 pre-filter: running nodes that cannot fit any shape wait at the end.
        nodes = c.nodes
        free_eff = c.free[nodes]
        fits_any = np.zeros(len(nodes), bool)
        for s in np.unique(runs):
            cols = sh.cols[s, : sh.ncols[s]]
            fits_any |= np.all(free_eff[:, cols] >= sh.qty[s, cols], axis=1)
        exhausted = (c.status[nodes] == Status.RAY_RUNNING) & ~fits_any
        if len(runs) == 0:
            exhausted[:] = False
        cands = nodes[~exhausted]
        target = []
        # §4.3 existing nodes first.
        cls, ncls = _classes(c, cands)
        while len(runs) and len(cands):
            best, taken = self._pick(cands, runs, left, cls, ncls)
            if best < 0:
                break
            target.append(int(cands[best]))
            cands = np.delete(cands, best)
            left = left - taken
            keep = left > 0
            runs, left = runs[keep], left[keep]
        nodes_after = np.concatenate([np.asarray(target, IDX), cands, nodes[exhausted]])
        # §4.5 new nodes, one template per type with room, in config order.
        avail = c.type_available()
        launched = []
        if len(runs):
            tmpl = [int(c.new_slots(t, 1)[0]) for t in range(p.T) if avail[t] > 0]
            cap = p.max_num_nodes
            cls_t = np.full(c.M, -1, IDX)
            while len(runs) and tmpl:
                if cap >= 0 and len(nodes_after) + len(launched) >= cap:
                    break
                if cls_t.shape[0] < c.M:
                    cls_t = np.full(c.M, -1, IDX)
                best, taken = self._pick(np.asarray(tmpl, IDX), runs, left, cls_t, 0)
                if best < 0:
                    break
                m = tmpl.pop(best)
                launched.append(m)
                t = int(c.type[m])
                avail[t] -= 1
                if avail[t] > 0:
                    tmpl.append(int(c.new_slots(t, 1)[0]))
                left = left - taken
                keep = left > 0
                runs, left = runs[keep], left[keep]
        c.nodes = np.concatenate([nodes_after, np.asarray(launched, IDX)]).astype(IDX)
        rest = dict(zip(runs.tolist(), left.tolist()))
        return {s: rest.get(s, 0) for s in out_left}, avail, len(c.nodes)


def _why(ctx: Context, s: int, avail: np.ndarray, n_nodes: int) -> int:
    p = ctx.p
    cols = np.flatnonzero(p.shape_qty[s] > 0)
    cap = np.where(p.implicit & (p.type_cap == 0), 1.0, p.type_cap)
    fits = p.type_configured & np.all(cap[:, cols] >= p.shape_qty[s, cols], axis=1)
    if not fits.any():
        return Why.NO_NODE_TYPE_FITS
    if p.max_num_nodes >= 0 and n_nodes >= p.max_num_nodes:
        return Why.MAX_NUM_NODES
    return Why.MAX_WORKERS


# ---- §3.8 plain resource requests -----------------------------------------------------
def sched_requests(ctx: Context, shapes: Shapes):
    """Pack every request run; returns (run order, units left per run, reasons, placements)."""
    p = ctx.p
    order = request_order(p, [s for s in range(p.S) if p.shape_count[s] > 0])
    packer = Packer(ctx, shapes)
    left, avail, n_nodes = packer.run(np.asarray(order, IDX), p.shape_count[order])
    infeasible = np.zeros(p.S, CNT)
    why = np.zeros(p.S, np.int8)
    for s, k in left.items():
        if k > 0:
            infeasible[s] = k
            why[s] = _why(ctx, s, avail, n_nodes)
    full_order = order + [s for s in range(p.S) if p.shape_count[s] <= 0]
    return np.asarray(full_order, IDX), infeasible, why, packer.placements


# ---- §5.2 idle termination --------------------------------------------------------------
def idle_termination(ctx: Context, pending_idle_timeout_s: float = math.nan) -> None:
    p = ctx.p
    count = ctx.type_counts()
    gone = np.zeros(p.T, CNT)
    nodes = ctx.nodes
    util = np.zeros(ctx.M)
    util[nodes] = _victim_util(ctx.total[nodes], ctx.order[nodes], ctx.free[nodes],
                               ctx.present[nodes])
    for m in victim_order(ctx, nodes, util):
        if ctx.sched[m] != Sched.SCHEDULABLE or ctx.kind[m] == Kind.HEAD:
            continue
        t = int(ctx.type[m])
        if int(ctx.status[m]) in Status.PENDING_TERMINABLE:
            timeout = pending_idle_timeout_s
        else:
            timeout = p.idle_timeout_s
            if p.type_configured[t] and not math.isnan(p.type_idle_timeout_s[t]):
                timeout = float(p.type_idle_timeout_s[t])
        if math.isnan(timeout):
            continue
        if ctx.idle[m] <= timeout * 1000:
            continue
        if ctx.placed_any[m] or ctx.cplaced_any[m]:
            continue   # needed by demand or by request_resources()
        floor = int(p.type_min[t]) if p.type_configured[t] else 0
        if count[t] - gone[t] <= floor:
            continue   # kept for min_worker_nodes
        gone[t] += 1
        ctx.terminate(m, Cause.IDLE, int(ctx.idle[m]))
