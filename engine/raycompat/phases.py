"""The ordered phases of one tick (docs/ray-semantics.md §3), each a small function
over the Context. Section numbers refer to that document."""
from __future__ import annotations


import numpy as np

from .context import CONSTRAINT, DEMAND, Context
from vecsched.engine.model.dtypes import CNT, IDX, Cause, Kind, Sched, Status, Why
from vecsched.engine.kernels.gangs import _pack_gangs
from vecsched.engine.kernels.labels import _first_selector
from vecsched.engine.kernels.records import GangRuns, Launch
from vecsched.engine.kernels.score import _victim_util
from vecsched.engine.model.termination import type_idle_timeouts
from vecsched.engine.tick.fixed import hash_outdated
from vecsched.engine.tick.reasons import classify
from .order import gang_order, request_order, victim_order
from .packer import Packer
from .requests_view import Requests


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
        node_hash = p.node_launch_hash[m] if m < p.N else ""
        if hash_outdated(p, int(ctx.type[m]), node_hash):     # the rule every policy shares
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
    util[group] = _victim_util(ctx.total, ctx.order, ctx.free, ctx.present,
                               np.asarray(group, np.int64))
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


# ---- §4 the core packing routine: engine/raycompat/packer.py -----------------------------------


def _sorted_runs(rq: Requests, p, runs: list) -> tuple[np.ndarray, np.ndarray, list]:
    """Ray's order for (row, count) runs; returns rows, counts and the permutation."""
    perm = request_order(rq, p.resources, [(q, n, i) for i, (q, n) in enumerate(runs)])
    return (np.asarray([r[0] for r in perm], IDX), np.asarray([r[1] for r in perm], CNT),
            [r[2] for r in perm])


def _merged_runs(rq: Requests, p, rows: list) -> tuple[np.ndarray, np.ndarray]:
    """Ray's order for count-1 requests, identical neighbours merged into one run."""
    q_sorted, _, _ = _sorted_runs(rq, p, [(q, 1) for q in rows])
    out_q, out_n = [], []
    Q0, ident = p.req.Q, p.req.ident
    for q in q_sorted.tolist():
        prev = out_q[-1] if out_q else -1
        same = prev == q or (prev >= 0 and q < Q0 and prev < Q0 and ident[q] == ident[prev])
        if same:
            out_n[-1] += 1
        else:
            out_q.append(q)
            out_n.append(1)
    return np.asarray(out_q, IDX), np.asarray(out_n, CNT)


def _run_positions(rq: Requests, p, rows: list) -> list:
    """``_merged_runs`` as (position in ``rows`` of each run's request, count)."""
    if len({rq.row_key(q) for q in rows}) == 1:
        return [(0, len(rows))]            # all equal: one run, whatever the order
    q_runs, n_runs = _merged_runs(rq, p, rows)
    first = {}
    for i, q in enumerate(rows):
        first.setdefault(q, i)
    return [(first[q], n) for q, n in zip(q_runs.tolist(), n_runs.tolist())]


def _why(ctx: Context, rq: Requests, qs: np.ndarray, n_nodes: int) -> np.ndarray:
    """Why each request row in ``qs`` kept units unplaced: the reasons every policy
    gives (``vecsched.engine.tick.reasons.classify``), over the tick's request view
    (which holds merged STRICT_PACK rows: their selectors are tested with the
    packing kernel's own test), the global cap counted on Ray's list."""
    p = ctx.p
    qs = np.asarray(qs, np.int64)
    need = rq.table.qty[qs][:, None, :]                        # (n, 1, R)
    fits = p.type_configured[None, :] & np.all((need <= 0) | (p.type_free[None] >= need), axis=2)
    labelled = fits.copy()
    for i in np.flatnonzero(rq.has_sel[qs] & fits.any(axis=1)).tolist():
        for t in np.flatnonzero(fits[i]).tolist():        # the kernel's own test, in Python
            labelled[i, t] = _first_selector.py_func(p.type_label[t], int(qs[i]), rq.kernel) >= 0
    return classify(fits, labelled, p.max_num_nodes >= 0 and n_nodes >= p.max_num_nodes)


def gang_reasons(ctx: Context, rq: Requests, bad: np.ndarray) -> np.ndarray:
    """(G,) Why of each infeasible gang: the first reason among its (merged) bundle
    rows in the order no-fit, no-label-match, max_num_nodes, max_worker_nodes."""
    why = np.zeros(ctx.p.G, np.int8)
    gs = np.flatnonzero(bad)
    rows = [rq.gang_requests(g) for g in gs.tolist()]
    sizes = np.asarray([len(r) for r in rows], np.int64)
    if not sizes.sum():
        return why
    n_nodes = int((ctx.sched[ctx.nodes] != Sched.TO_TERMINATE).sum())
    uniq, inv = np.unique(np.concatenate([np.asarray(r, np.int64) for r in rows]),
                          return_inverse=True)           # one _why call for every bundle
    rank = np.zeros(5, np.int64)                         # lower rank wins
    rank[[Why.NO_NODE_TYPE_FITS, Why.NO_LABEL_MATCH, Why.MAX_NUM_NODES, Why.MAX_WORKERS]] = (
        0, 1, 2, 3)
    codes = _why(ctx, rq, uniq, n_nodes)[inv.reshape(-1)]
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    has = sizes > 0
    best = np.minimum.reduceat(rank[codes], starts[has])
    why[gs[has]] = np.asarray([Why.NO_NODE_TYPE_FITS, Why.NO_LABEL_MATCH, Why.MAX_NUM_NODES,
                               Why.MAX_WORKERS], np.int8)[best]
    return why


# ---- §3.6 the request_resources() constraint ------------------------------------------
def enforce_constraint(ctx: Context, rq: Requests) -> bool:
    """All or nothing against the constraint availability; True if infeasible."""
    p = ctx.p
    if not p.has_constraint:
        return False
    runs, cnts, _ = _sorted_runs(rq, p, list(zip(p.con_req.tolist(), p.con_count.tolist())))
    ctx.begin()
    left = Packer(ctx, rq, CONSTRAINT).run(runs, cnts)
    if left.sum() > 0:
        ctx.rollback()
        return True
    ctx.commit()
    return False


# ---- §3.7 gangs (placement groups) -----------------------------------------------------
GANG_KERNEL = True      # tests switch it off to compare with the Python packer


def sched_gangs(ctx: Context, rq: Requests) -> np.ndarray:
    """Each gang all or nothing, in Ray's order; returns (G,) bool infeasible and
    the processing order. One kernel call for all of them (kernels/gangs.py)
    unless a node has IPPR attached (then each gang is a Packer.run)."""
    p = ctx.p
    order = gang_order(p.gang_key)
    if not p.G:
        return np.zeros(0, bool), order
    ptr, g_run, g_cnt = _gang_runs(rq, p, order)
    if GANG_KERNEL and not ctx.ippr_attached[ctx.nodes].any() and not p.relabels:
        return _gangs_in_kernel(ctx, rq, ptr, g_run, g_cnt, order), order
    bad = np.zeros(p.G, bool)
    for k, g in enumerate(order):
        ctx.begin()
        left = Packer(ctx, rq, DEMAND).run(g_run[ptr[k]: ptr[k + 1]], g_cnt[ptr[k]: ptr[k + 1]])
        if left.sum() > 0:
            ctx.rollback()
            bad[g] = True
        else:
            if ctx.shared_label >= 0:       # its own anti-affinity key (labelcols.py)
                ctx.label[ctx.written(), ctx.shared_label] = -1
            ctx.commit()
    return bad, order


def _gang_runs(rq: Requests, p, order: list):
    """Each gang's runs in ``order``, as Ray packs them: (ptr, request rows,
    counts), gang k's runs at ptr[k]:ptr[k + 1]."""
    shared: dict = {}     # equal request lists sort the same: positions of their runs
    ptr, rows_out, cnts_out = [0], [], []
    for g in order:
        rows = rq.gang_requests(g)
        if rows and rows.count(rows[0]) == len(rows):     # one request, n bundles: one run
            rows_out.append(rows[0])
            cnts_out.append(len(rows))
            ptr.append(len(rows_out))
            continue
        sig = tuple([rq.row_key(q) for q in rows])
        how = shared.get(sig)
        if how is None:
            how = shared[sig] = _run_positions(rq, p, rows)
        for i, n in how:
            rows_out.append(rows[i])
            cnts_out.append(n)
        ptr.append(len(rows_out))
    return (np.asarray(ptr, np.int64), np.asarray(rows_out, IDX), np.asarray(cnts_out, CNT))


def _gangs_in_kernel(ctx: Context, rq: Requests, ptr, g_run, g_cnt, order: list) -> np.ndarray:
    p = ctx.p
    ctx._grow(ctx.M + int(g_cnt.sum()))      # room for a clone per unit
    pristine = np.full(p.T, -1, IDX)
    for t, m in ctx.pristine.items():
        pristine[t] = m
    # Runs of equal bundles share a resource shape (the kernel's fit index).
    # (distinct request rows first: gangs share rows; then their distinct bundles)
    rows, of_row = np.unique(g_run, return_inverse=True)
    _, first, shape = np.unique(rq.table.qty[rows], axis=0, return_index=True,
                                return_inverse=True)
    g_shape = shape.reshape(-1)[of_row.reshape(-1)]
    gangs = GangRuns(ptr, g_run, g_cnt, g_shape.astype(IDX), rows[first].astype(IDX))
    launch = Launch(pristine, p.type_max, p.type_configured, int(p.max_num_nodes))
    bad_sorted, nodes, M1, tmpl = _pack_gangs(ctx.nodes, ctx.M, gangs, launch,
                                              ctx.pack_state(DEMAND, rq), ctx.shared_label)
    ctx.finish_clones(M1, tmpl, DEMAND)
    ctx.nodes = nodes.astype(IDX)
    bad = np.zeros(p.G, bool)
    bad[np.asarray(order, np.int64)] = bad_sorted
    return bad


# ---- §3.8 plain resource requests -----------------------------------------------------
def sched_requests(ctx: Context, rq: Requests):
    """Pack every request run; returns (run order, units left per run, reasons, placements)."""
    p = ctx.p
    runs, cnts, perm = _sorted_runs(rq, p, [(s, int(p.shape_count[s])) for s in range(p.S)])
    packer = Packer(ctx, rq, DEMAND)
    left_sorted = packer.run(runs, cnts)
    infeasible = np.zeros(p.S, CNT)
    why = np.zeros(p.S, np.int8)
    perm_a = np.asarray(perm, np.int64)
    left_sorted = np.asarray(left_sorted)
    short = left_sorted > 0
    infeasible[perm_a[short]] = left_sorted[short]
    why[perm_a[short]] = _why(ctx, rq, perm_a[short], packer.n_nodes)
    slots, runs_k, units = packer.placement_arrays()
    runs_s = perm_a[runs_k] if len(perm) else runs_k
    return np.asarray(perm, IDX), infeasible, why, (slots, runs_s, units)


# ---- §5.1 pending-node idle tracking -----------------------------------------------------
def pending_idle(ctx: Context, since: dict, now_s: float) -> dict:
    """Give unneeded pending nodes idle durations from per-type timestamps;
    returns the new timestamps (Ray keeps them on the scheduler object)."""
    p = ctx.p
    by_type: dict[int, list[int]] = {}
    for m in ctx.nodes.tolist():
        if (ctx.sched[m] != Sched.SCHEDULABLE or ctx.kind[m] == Kind.HEAD
                or int(ctx.status[m]) not in p.pending_terminable
                or ctx.placed_any[m] or ctx.cplaced_any[m]):
            continue
        by_type.setdefault(int(ctx.type[m]), []).append(m)
    out = {}
    for t, ms in by_type.items():
        name = p.type_names[t]
        stamps = list(since.get(name, []))[: len(ms)]
        stamps += [now_s] * (len(ms) - len(stamps))
        out[name] = stamps
        # The longest durations go to the least advanced nodes (cheapest to drop).
        ms = sorted(ms, key=lambda m: p.pending_terminable.index(int(ctx.status[m])))
        for m, ts in zip(ms, stamps):
            ctx.idle[m] = int((now_s - ts) * 1000)
    return out


def release_pending_idle(ctx: Context, since: dict) -> None:
    """Idle-terminated pending nodes give back the oldest timestamp of their type."""
    p = ctx.p
    for m in ctx.nodes.tolist():
        if (ctx.sched[m] == Sched.TO_TERMINATE and ctx.cause[m] == Cause.IDLE
                and int(ctx.status[m]) in p.pending_terminable):
            stamps = since.get(p.type_names[int(ctx.type[m])])
            if stamps:
                stamps.pop(0)


# ---- §5.2 idle termination --------------------------------------------------------------
def idle_termination(ctx: Context) -> np.ndarray:
    """Nodes idle past their timeout, needed by nothing, are terminated, visiting
    nodes in victim order; a type keeps min_worker_nodes. Vectorised: within a
    type, the eligible nodes taken are the first (count - min) in that order.
    Returns the eligible nodes min_worker_nodes kept."""
    p = ctx.p
    nodes = ctx.nodes
    if not len(nodes):
        return np.zeros(0, IDX)
    util = np.zeros(ctx.M)
    util[nodes] = _victim_util(ctx.total, ctx.order, ctx.free, ctx.present,
                               nodes.astype(np.int64))
    order = victim_order(ctx, nodes, util)
    t = ctx.type[order]
    pending = np.isin(ctx.status[order], p.pending_terminable)
    timeout = np.where(pending, p.pending_idle_timeout_s, type_idle_timeouts(p)[t])
    with np.errstate(invalid="ignore"):
        eligible = ((ctx.sched[order] == Sched.SCHEDULABLE) & (ctx.kind[order] != Kind.HEAD)
                    & ~np.isnan(timeout) & (ctx.idle[order] > timeout * 1000)
                    & ~ctx.placed_any[order] & ~ctx.cplaced_any[order])
    floor = np.where(p.type_configured, p.type_min, 0)
    room = ctx.type_counts() - floor            # how many of each type may go
    cand = order[eligible]
    ct = t[eligible]
    rank = np.zeros(len(cand), np.int64)        # position among eligible nodes of its type
    for ty in np.unique(ct):
        sel = np.flatnonzero(ct == ty)
        rank[sel] = np.arange(sel.size)
    for m in cand[rank < room[ct]].tolist():
        ctx.terminate(m, Cause.IDLE, int(ctx.idle[m]))
    return cand[rank >= room[ct]]               # idle past the timeout, kept by min workers
