"""Placement groups in the efficient mode: each all or nothing, best of k passes.

A *pass* places the groups, all or nothing each, existing nodes (and nodes the
pass already launched) first, then new nodes (``vecsched.engine.efficient.place``):

- *myopic*: group by group, the cheapest of three packings of the group (bundles
  largest first with the mode's ``fill_credit``; largest first with new nodes
  judged by what the group alone fills; the group's own order, likewise);
- *joint*: every group's bundles packed as one batch, largest first, so that
  new nodes are shared between groups; a group left incomplete is dropped and
  the rest packed again.

Passes: myopic and joint, each with existing nodes taken first-fit or tightest
fit (best fit), and myopic with groups in input order. Otherwise groups with
STRICT_* constraints go first (fewest ways to fit), then the largest (normalised
size), then input order. The pass placing the most bundles, then launching the
cheapest nodes, wins. Each pass costs the tick's units in work units (the items'
counts of ``gang_batch``: a bundle, or a merged STRICT_PACK group as one); myopic
and joint always run, the others (in ``PASS_PRIORITY`` order) only while the total
stays within ``gang_pass_work``. With the default every pass runs up to 2,400
units; a ``cluster_v2`` tick of 1,000 groups (about 3,900-4,100 units, 4,800-5,100
bundles) runs three or two.

Then, when the tick has at most ``gang_cpsat_bundles`` bundles in groups (OR-Tools
is then required: ``options``) and the winning pass does not already meet the lower
bound of ``gang_bound.py`` (then no packing is strictly better: the steps below are
skipped, ``stats["gang_bound_met"]``), CP-SAT (``vecsched.engine.solver``) solves all groups
at once over the nodes as they are and new nodes within the launch room, hinted with
the winning pass, within ``cpsat_dtime`` deterministic seconds (less under a tick
budget: ``budget.Allowance``; one worker, seed 0: reproducible); its packing replaces the
pass's when it is strictly better.
Then a neighbourhood search (``lns.py``, ``lns_dtime``) re-packs a few nodes'
gangs at a time while that makes the launches cheaper.

A forming group is never stranded: its bundles are packed onto the most
advanced nodes first, so a group whose nodes are booting is planned onto them
again, and ``tick.cancel_pending`` keeps any pending node a group of the tick
could use.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.fits import gang_items, strict_gangs
from vecsched.engine.solver.instance import EXISTING, build_slot_instance
from .cost import Costs
from .options import EfficientOptions
from .budget import CPSAT_STEP_SHARE, Allowance, model_cells
from .gang_bound import bound_met
from .gang_kernel import KernelPrep, joint_pass, myopic_pass, selectors_free
from .improve import Base, improve
from .lns import commit_keys, hint_of, improve_lns
from .place import place_batch, prime_type_ok
from .state import State


def gang_batch(p, g: int):
    """Gang g's items as a batch: (request rows, bundles, units, per item the
    bundle positions of each unit); equal unmerged bundles are one item with a
    count, a merged STRICT_PACK item is one unit standing for all its bundles.
    (The same items, in the same order, as ``vecsched.engine.solver``'s instance.)"""
    rows, qty, want, members = [], [], [], []
    seen: dict = {}
    for q_vec, q, mem in gang_items(p, g):
        key = (int(p.req.ident[q]), q_vec.tobytes()) if len(mem) == 1 else ("merged", mem[0])
        j = seen.get(key)
        if j is None:
            seen[key] = len(rows)
            rows.append(q)
            qty.append(q_vec)
            want.append(1)
            members.append([list(mem)])
        else:
            want[j] += 1
            members[j].append(list(mem))
    R = p.R
    return (np.asarray(rows, np.int64), np.asarray(qty, float).reshape(len(rows), R),
            np.asarray(want, np.int64), members)


def gang_batches(p) -> list:
    """``gang_batch`` of every gang: the groups of n equal unmerged bundles (the
    usual group; one item of n units) read from whole-table arrays at once, the
    others item by item."""
    G, t = p.G, p.req
    ptr = p.gang_ptr.astype(np.int64)
    n = np.diff(ptr)
    rows = p.gang_req.astype(np.int64)[:ptr[-1] if G else 0]
    if not rows.size:
        return [gang_batch(p, g) for g in range(G)]
    gid = np.repeat(np.arange(G), n)
    q0 = rows[np.minimum(ptr[:-1], rows.size - 1)]         # each group's first row
    bits = np.ascontiguousarray(t.qty, np.float64).view(np.uint64)
    first = q0[gid]
    differs = (t.ident[rows] != t.ident[first]) | (bits[rows] != bits[first]).any(axis=1)
    equal = (n > 1) & (np.bincount(gid[differs], minlength=G) == 0) & (t.aff[q0, 0] < 0)
    qty0 = t.qty[q0].astype(float)
    return [(np.array([q], np.int64), qty0[g:g + 1].copy(), np.array([k], np.int64),
             [[[i] for i in range(k)]]) if same else gang_batch(p, g)
            for g, (same, q, k) in enumerate(zip(equal.tolist(), q0.tolist(), n.tolist()))]


def gang_order(p, costs: Costs, largest_first: bool = True) -> list[int]:
    if not largest_first:
        return list(range(p.G))
    strict = strict_gangs(p)
    return np.lexsort((np.arange(p.G), -gang_sizes(p, costs), ~strict)).tolist()


def gang_sizes(p, costs: Costs) -> np.ndarray:
    """(G,) each gang's normalised size: ``costs.size`` of its bundles, summed.
    A matrix product's last bit depends on the matrix's shape (BLAS blocks its
    rows), so the gangs of n bundles are one stack of (n, R) matrices, each
    multiplied as if alone, and each gang's sizes summed as its own row."""
    n = np.diff(p.gang_ptr.astype(np.int64))
    size = np.zeros(p.G)
    for k in np.unique(n[n > 0]).tolist():
        gangs = np.flatnonzero(n == k)
        rows = p.gang_req[p.gang_ptr[gangs][:, None] + np.arange(k)]
        size[gangs] = (p.req.qty[rows] @ costs.inv_ref).sum(axis=1)
    return size


PASSES = (("myopic", True, False), ("myopic", True, True), ("myopic", False, False),
          ("joint", True, False), ("joint", True, True))
# The order the passes run in when ``gang_pass_work`` cannot pay for all of them
# (docs/efficient.md, "Pass work": on seeded ticks of 200-1,000 groups, myopic and
# joint are the pair most often as good as all five, and myopic in input order
# then myopic tight add the most to them). The first ALWAYS always run; the winner
# is still chosen by (unplaced, price, index in PASSES).
PASS_PRIORITY = (0, 3, 2, 1, 4)
ALWAYS = 2


def place_gangs(st: State, costs: Costs, opts: EfficientOptions, stats: dict, guard=None):
    """Place every gang; returns ((G,) bool infeasible, processing order, (B, 3)
    rows (gang, bundle position, slot))."""
    p = st.p
    if not p.G:
        return np.zeros(0, bool), [], np.zeros((0, 3), np.int64)
    batches = gang_batches(p)
    prime_type_ok(st, np.concatenate([b[0] for b in batches]),
                  np.concatenate([b[1] for b in batches]))
    nb = int(sum(b[2].sum() for b in batches))
    best = None
    seen = set()
    work, ran = 0, 0
    orders: dict = {}
    base = None
    prep = _prepare(batches, costs, opts)
    kprep = KernelPrep(st, costs, opts, batches, prep, _variants(opts)) \
        if selectors_free(p, batches) else None
    for v in PASS_PRIORITY:
        how, largest, tight = PASSES[v]
        if largest not in orders:
            orders[largest] = gang_order(p, costs, largest)
        order = orders[largest]
        if (how, tuple(order), tight) in seen:
            continue            # runs as an earlier pass did: would tie and lose on v
        if ran >= ALWAYS and work + nb > opts.gang_pass_work:
            stats["gang_passes_skipped"] = stats.get("gang_passes_skipped", 0) + 1
            continue
        seen.add((how, tuple(order), tight))
        work, ran = work + nb, ran + 1
        snap = st.snapshot()
        bad, place = _pass(st, costs, opts, batches, order, how, tight, prep, kprep)
        st.restore(snap)
        unplaced = _unplaced(p, bad)
        if best is not None and unplaced > best[0][0]:
            continue            # improve keeps what is unplaced: this pass cannot win
        if base is None:
            base = Base(st, batches)       # the State as every pass leaves it
        place = improve(st, costs, batches, place, base)
        key = (unplaced, _placed_price(costs, place), v)
        if best is None or key < best[0]:
            best = (key, v, order, bad, place)
    _, v, order, bad, place = best
    how, largest, tight = PASSES[v]
    stats["gang_pass"] = how + ("" if largest else "-input-order") + ("-tight" if tight else "")
    cpsat = opts.gang_cpsat_bundles > 0 and nb <= opts.gang_cpsat_bundles  # options: OR-Tools
    if cpsat and bound_met(st, costs, batches, *best[0][:2]):
        stats["gang_bound_met"] = 1         # CP-SAT could not be strictly better
    elif cpsat and not (guard is not None and guard.spent()):
        allow = Allowance(opts.tick_budget_s, int(st.alive[:st.M].sum()), work)
        better = _cpsat(st, costs, opts, batches, place, best[0], guard, allow, stats)
        if better is not None:
            stats["gang_cpsat_better"] = 1
            bad, place = better
        if opts.lns_dtime > 0 and nb > 0:
            before = _placed_price(costs, place)
            place = improve_lns(st, costs, batches, place, budget=opts.lns_dtime, guard=guard,
                                allowance=allow)
            if _placed_price(costs, place) < before:
                stats["gang_lns_better"] = 1
    return bad, order, _rows(_commit(st, batches, place), batches)


def _commit(st: State, batches, place: list) -> list:
    """Apply placements whose new nodes are ``("new", j)`` keys: launch each once
    (in order of first use) and place the units; returns them with real slots."""
    slot_of = commit_keys(st, batches, place)
    return [(g, i, slot_of[slot] if isinstance(slot, tuple) else slot, n, t)
            for g, i, slot, n, t in place]


def _unplaced(p, bad) -> int:
    return int(sum(int(p.gang_ptr[g + 1] - p.gang_ptr[g]) for g in np.flatnonzero(bad)))


def _placed_price(costs: Costs, place: list) -> float:
    """The price of the new nodes (``("new", j)`` slots) a packing launches."""
    new = {slot: t for _, _, slot, _, t in place if isinstance(slot, tuple)}
    return float(sum(costs.price[t] for t in new.values()))


def _price(st: State, costs: Costs, snap) -> float:
    return float(sum(costs.price[t] for t in st.new_types[len(snap[5]):]))


def _rows(place: list, batches) -> np.ndarray:
    """(gang, item, slot, units, type) placements as (gang, bundle position, slot) rows."""
    used: dict = {}                 # (gang, item) -> its units placed so far
    gang, pos, at = [], [], []
    for g, i, slot, n, _ in place:
        k = used.get((g, i), 0)
        used[(g, i)] = k + n
        for mem in batches[g][3][i][k:k + n]:     # the item's next n units' bundles
            gang += [g] * len(mem)
            pos += mem
            at += [slot] * len(mem)
    out = np.array([gang, pos, at], np.int64).reshape(3, -1)
    return np.ascontiguousarray(out[:, np.lexsort(out[::-1])].T)


def _variants(opts: EfficientOptions) -> tuple:
    """The packing variants of a gang in the myopic passes: (items largest first,
    fill credit)."""
    return ((True, opts.fill_credit), (True, 0.0), (False, 0.0))


def _prepare(batches, costs: Costs, opts: EfficientOptions) -> list:
    """Per gang, what every myopic pass needs and no pass changes: its items
    largest first (stable) and the variants that run differently (``_distinct``)."""
    variants = _variants(opts)
    out = []
    one = None          # a batch of one item: the same order and variants whatever its size
    for rows, qty, _, _ in batches:
        if len(qty) == 1:
            if one is None:
                one = _distinct(variants, qty, np.zeros(1, np.intp))
            out.append((np.zeros(1, np.intp), list(one)))
            continue
        order = np.argsort(-costs.size(qty), kind="stable")
        out.append((order, _distinct(variants, qty, order)))
    return out


def _pass(st, costs, opts, batches, order, how: str, tight: bool, prep: list | None = None,
          kprep: KernelPrep | None = None):
    """One pass over the gangs: in one kernel call when ``kprep`` is given
    (``gang_kernel``), else ``_pass_py``."""
    if kprep is not None:
        return (myopic_pass if how == "myopic" else joint_pass)(st, kprep, order, tight)
    return _pass_py(st, costs, opts, batches, order, how, tight, prep)


def _pass_py(st, costs, opts, batches, order, how: str, tight: bool, prep: list | None = None):
    """One pass over the gangs (module docstring); returns ((G,) bool infeasible,
    placements (gang, item, slot, units, slot type)). Per gang the packing variants
    are tried and the cheapest kept (launch price, then launches, then variant);
    a variant that would run exactly as an earlier one (same item order, same
    credit) is not run, and none is tried after one that launches nothing (no later
    one can beat it). A trial is undone by restoring a State snapshot (a position in
    its journal of changed rows, not a copy of the arrays). The readable twin of
    the passes' kernels (``gang_kernel``)."""
    p = st.p
    if how == "joint":
        return _joint(st, costs, opts, batches, order, tight)
    bad = np.zeros(p.G, bool)
    place: list = []
    keep = opts.keep_gpu_for_gpu
    variants = _variants(opts)
    prep = prep if prep is not None else _prepare(batches, costs, opts)
    for g in order:
        rows, qty, want, _ = batches[g]
        largest, todo = prep[g]
        best, kept = None, None
        for j, v in enumerate(todo):
            sort, credit = variants[v]
            snap = st.snapshot()
            got = _one(st, costs, rows, qty, want, sort, credit, keep, tight, [], largest)
            if got is not None:
                key = (_price(st, costs, snap), len(st.new_types) - len(snap[5]), v)
                if best is None or key < best[0]:
                    best = (key, v)
                    if j == len(todo) - 1 or key[:2] == (0.0, 0):
                        kept = got
                        break
            st.restore(snap)
        if best is None:
            bad[g] = True
            continue
        if kept is None:
            sort, credit = variants[best[1]]
            kept = _one(st, costs, rows, qty, want, sort, credit, keep, tight, [], largest)
        for slot, i, n in kept:
            place.append((g, i, slot, n, int(st.type[slot])))
    return bad, place


def _distinct(variants, qty, largest: np.ndarray) -> list[int]:
    """The variants that run differently: (item order, credit) not seen before.
    ``largest``: the items largest first."""
    sorted_order = tuple(largest.tolist())
    seen, out = set(), []
    for v, (sort, credit) in enumerate(variants):
        sig = (sorted_order if sort else tuple(range(len(qty))), credit)
        if sig not in seen:
            seen.add(sig)
            out.append(v)
    return out


def _joint(st, costs, opts, batches, order, tight: bool):
    """Every gang's bundles packed as one batch (largest first, existing nodes
    first, new nodes shared between gangs); a gang left incomplete is dropped
    and the rest packed again, until every packed gang is whole."""
    p = st.p
    bad = np.zeros(p.G, bool)
    snap = st.snapshot()
    while True:
        gangs = [g for g in order if not bad[g]]
        if not gangs:
            return bad, []
        rows = np.concatenate([batches[g][0] for g in gangs])
        qty = np.concatenate([batches[g][1] for g in gangs])
        want = np.concatenate([batches[g][2] for g in gangs])
        gang_of = np.concatenate([[g] * len(batches[g][0]) for g in gangs]).astype(np.int64)
        local = np.concatenate([np.arange(len(batches[g][0])) for g in gangs]).astype(np.int64)
        out: list = []
        left = place_batch(st, costs, rows, qty, want, 0, opts.keep_gpu_for_gpu, 0.0, out,
                           tight=tight)
        short = np.unique(gang_of[left > 0])
        if not short.size:
            return bad, [(int(gang_of[i]), int(local[i]), slot, n, int(st.type[slot]))
                         for slot, i, n in out]
        bad[short] = True
        st.restore(snap)
        snap = st.snapshot()


def _one(st, costs, rows, qty, want, sort: bool, credit: float, keep_gpu: bool, tight: bool,
         out: list, largest: np.ndarray):
    """One packing of a gang; its placements (slot, item, units), or None. ``out``
    receives place_batch's own rows (slot, position in the packing order, units),
    placed or not. ``largest``: the items largest first (used when ``sort``)."""
    order = largest if sort else np.arange(len(rows))
    r, q, w = rows[order], qty[order], want[order]
    left = place_batch(st, costs, r, q, w, 0, keep_gpu, credit, out, tight=tight)
    if left.any():
        return None
    return [(slot, int(order[i]), n) for slot, i, n in out]


# ---- CP-SAT over every gang of the tick ---------------------------------------------------

def _cpsat(st: State, costs: Costs, opts: EfficientOptions, batches, place, best_key,
           guard=None, allow: Allowance | None = None, stats: dict | None = None):
    """The CP-SAT packing of all gangs when strictly better than the pass's
    (best_key = (unplaced bundles, price)): (bad, placements with ``("new", j)``
    keys for its launches), or None. ``st`` is untouched. Its deterministic limit is
    ``cpsat_dtime``, within the tick budget's share for it (``budget.Allowance``:
    not solved, ``stats["gang_cpsat_skipped"]``, when the model alone would spend
    it); ``stats["gang_cpsat"]`` when it solved."""
    from vecsched.engine.solver.cpsat import solve
    p = st.p
    M = st.M
    alive = np.flatnonzero(st.alive[:M])
    inst = build_slot_instance(p, np.arange(p.G),
                               (st.free[:M], st.labels_of(M), st.type[:M], alive),
                               st.type_room, st.global_room, costs.price)
    offset = np.zeros(p.G + 1, np.int64)
    offset[1:] = np.cumsum([len(b[0]) for b in batches])
    if offset[-1] != inst.I:
        return None
    allow = allow if allow is not None else Allowance(None)
    stats = stats if stats is not None else {}
    cells = model_cells(inst)
    limit = allow.limit(cells, opts.cpsat_dtime, CPSAT_STEP_SHARE)
    if limit <= 0:
        allow.refuse()
        stats["gang_cpsat_skipped"] = 1
        return None
    stats["gang_cpsat"] = 1
    hint = hint_of(inst, place, offset)
    res = solve(inst, hint=hint, deterministic_limit=limit,
                time_limit_s=guard.remaining() if guard is not None else None)
    allow.charge(cells, res.deterministic_s)
    if guard is not None:
        guard.cut(res.status)
    if not res.feasible:
        return None
    unplaced = int(sum(int(inst.gang_bundles[g]) for g in np.flatnonzero(~res.placed_gangs)))
    price = float(sum(costs.price[t] * n for t, n in enumerate(res.launches.tolist())))
    if (unplaced, price) >= tuple(best_key[:2]):
        return None
    gang_of = np.searchsorted(offset, np.arange(inst.I), side="right") - 1
    key_of: dict = {}
    out = []
    for i, k, j, n in res.assignment.tolist():
        g = int(gang_of[i])
        if inst.kind[k] == EXISTING:
            slot = int(inst.nodes[k][j])
            t = int(st.type[slot])
        else:
            slot = key_of.setdefault((k, j), ("new", len(key_of)))
            t = int(inst.ctype[k])
        out.append((g, i - int(offset[g]), slot, n, t))
    return ~res.placed_gangs, out
