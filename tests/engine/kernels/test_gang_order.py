"""The gang kernel's list order (kernels/listorder.py) and its classes of
non-running nodes (kernels/pendclass.py) against their slow twins
(tests/kits/twins.py), on seeded random sequences of placed gangs."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from vecsched.engine.kernels.steps import (firsts_once, join_once, leave_once,
                                           list_order_once as _list_order,
                                           pend_classes_once as _pend_classes,
                                           pend_room_once as _pend_room, placed_once,
                                           run_classes_once, sort_once)

from vecsched.engine.kernels.runclass import RunClasses

from tests.kits.twins import ClassListsRef, gang_list_ref

RUNNING, PENDING = 5, 2


def _order(lo, lst):
    """The slots of lst sorted by their keys."""
    return sorted(lst, key=lambda m: int(lo.key[m]))


@pytest.mark.parametrize("seed", range(6))
def test_list_order_matches_the_list(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 40))
    Mcap = n + 400
    status = np.where(rng.random(Mcap) < 0.6, RUNNING, PENDING).astype(np.int8)
    nodes = rng.permutation(n).astype(np.int64)
    lo = _list_order(nodes, status, Mcap, Mcap)
    lst = nodes.tolist()
    assert _order(lo, lst) == lst
    mark = np.full(Mcap, -1, np.int64)
    won_in = np.full(Mcap, -1, np.int64)
    M = n
    status[n:] = PENDING                     # slots past the list: launches
    running = {m for m in range(n) if status[m] == RUNNING}
    none = RunClasses(np.full(Mcap, -1, np.int64), np.full(1, -1, np.int64),
                      np.full(Mcap, -1, np.int64))        # no classes
    for g in range(60):
        run_in = [m for m in lst if m in running]
        holders = [m for m in run_in if rng.random() < 0.3]
        cand = holders + [m for m in lst if m not in running]
        k = int(rng.integers(0, min(len(cand), 5) + 1))
        winners = [cand[i] for i in rng.permutation(len(cand))[:k]]
        nl = int(rng.integers(0, 4))
        launches = list(range(M, M + nl))
        status[M: M + nl] = PENDING
        M += nl
        hs = np.asarray(holders, np.int64)
        sort_once(hs, lo.key, np.empty(hs.size, np.int64))
        assert hs.tolist() == holders          # the kernel sorts them by key: list order
        mark[hs] = g
        won_in[np.asarray(winners, np.int64)] = g
        w = np.asarray(winners + [0], np.int64)
        new = np.asarray(launches + [0], np.int64)
        placed_once(lo, w, len(winners), hs, g, mark, won_in, status, new, nl, none,
                    np.zeros(1, np.int64), np.full(1, -1, np.int64))
        want = gang_list_ref(lst, running, set(holders), winners, launches)
        lst = lst + launches
        assert _order(lo, lst) == want, g
        lst = want


def _classes(rng, running_in_order, Mcap):
    """Random running classes of two or more members (kernels/runclass.py), each
    in list order: (RunClasses, members per class)."""
    of = np.full(Mcap, -1, np.int64)
    nxt = np.full(Mcap, -1, np.int64)
    members = {}
    for m in running_in_order:
        if rng.random() < 0.7:
            members.setdefault(int(rng.integers(4)), []).append(m)
    members = {c: ms for c, ms in members.items() if len(ms) >= 2}
    head = np.full(4, -1, np.int64)
    for c, ms in members.items():
        head[c] = ms[0]
        of[ms] = c
        for a, b in zip(ms, ms[1:]):
            nxt[a] = b
    return RunClasses(of, head, nxt), members


@pytest.mark.parametrize("seed", range(8))
def test_list_order_moves_classes_as_one(seed):
    """Running classes re-keyed as one (their zone key ``base``; only the first
    member's key kept) order the list as the twin does member by member: every
    member of a class is visited or none, its winners are its first members in
    order and leave it, and a member that left is a node on its own."""
    rng = np.random.default_rng(50 + seed)
    n = int(rng.integers(8, 60))
    Mcap = n + 400
    status = np.where(rng.random(Mcap) < 0.75, RUNNING, PENDING).astype(np.int8)
    nodes = rng.permutation(n).astype(np.int64)
    lo = _list_order(nodes, status, Mcap, Mcap)
    one = int(lo.ctr[6])
    lst = nodes.tolist()
    status[n:] = PENDING
    running = {m for m in range(n) if status[m] == RUNNING}
    rc, members = _classes(rng, [m for m in lst if m in running], Mcap)
    base = np.full(4, int(lo.key[nodes[0]]) - int(lo.key[nodes[0]]) % one, np.int64)
    mark = np.full(Mcap, -1, np.int64)
    markc = np.full(4, -1, np.int64)
    won_in = np.full(Mcap, -1, np.int64)
    M, moved = n, 0
    for g in range(80):
        alone = [m for m in lst if m in running and rc.of[m] < 0]
        live = [c for c in members if rc.head[c] >= 0]
        held = [m for m in alone if rng.random() < 0.4]
        cls = [c for c in live if rng.random() < 0.6]
        hs = np.asarray(held + [int(rc.head[c]) for c in cls], np.int64)
        sort_once(hs, lo.key, np.empty(hs.size, np.int64))
        mark[held] = g
        markc[cls] = g
        visited_run = set(held)
        for c in cls:
            m = int(rc.head[c])
            while m >= 0:
                visited_run.add(m)
                m = int(rc.nxt[m])
        # winners: nodes alone, non-running nodes and, per class, its first members
        pool = held + [m for m in lst if m not in running]
        winners = [pool[i] for i in rng.permutation(len(pool))[: int(rng.integers(0, 4))]]
        for c in cls:
            m, k = int(rc.head[c]), int(rng.integers(0, 3))
            while m >= 0 and k > 0:
                winners.insert(int(rng.integers(len(winners) + 1)), m)
                m, k = int(rc.nxt[m]), k - 1
        for c in cls:                       # pick order within a class: list order
            at = [i for i, m in enumerate(winners) if rc.of[m] == c]
            for i, m in zip(at, sorted((winners[i] for i in at),
                                       key=lambda m: members[c].index(m))):
                winners[i] = m
        nl = int(rng.integers(0, 3))
        launches = list(range(M, M + nl))
        M += nl
        won_in[np.asarray(winners, np.int64)] = g
        w = np.asarray(winners + [0], np.int64)
        new = np.asarray(launches + [0], np.int64)
        placed_once(lo, w, len(winners), hs, g, mark, won_in, status, new, nl, rc, base,
                    markc)
        for c in members:                   # _placed kept each first member's key
            h = int(rc.head[c])
            if h >= 0 and won_in[h] != g:
                assert lo.key[h] == base[c] + lo.key[h] % one, (g, c)
        for m in winners:                   # they leave their classes (runclass._left)
            c = int(rc.of[m])
            if c >= 0:
                moved += 1
                rc.head[c], rc.of[m] = rc.nxt[m], -1
        want = gang_list_ref(lst, running, visited_run, winners, launches)
        lst = lst + launches
        for c in members:                   # every member takes its class's key
            m = int(rc.head[c])
            while m >= 0 and rc.of[m] == c:
                lo.key[m] = base[c] + lo.key[m] % one
                m = int(rc.nxt[m])
        assert _order(lo, lst) == want, g
        lst = want
    assert members and moved > 0


class _Tab(NamedTuple):
    free: np.ndarray


class _Rq(NamedTuple):
    qty: np.ndarray
    cols: np.ndarray
    ncols: np.ndarray


@pytest.mark.parametrize("seed", range(6))
def test_class_lists_match_twin(seed):
    rng = np.random.default_rng(100 + seed)
    C, S, Mcap, R = 12, 4, 300, 3
    tab = _Tab(rng.integers(0, 4, (C, R)).astype(np.float64))
    qty = rng.integers(0, 3, (S, R)).astype(np.float64)
    cols = np.full((S, R), -1, np.int32)
    ncols = np.zeros(S, np.int32)
    for s in range(S):
        c = np.flatnonzero(qty[s] > 0)
        cols[s, : c.size], ncols[s] = c, c.size
    rq = _Rq(qty, cols, ncols)
    rep = np.arange(S, dtype=np.int32)

    def holds(c, s):
        return bool((tab.free[c] >= qty[s]).all())

    pc = _pend_room(_pend_classes(4, Mcap, S), C, 0)
    ref = ClassListsRef(holds)
    of = {}                      # slot -> class
    order = []                   # every member slot, in list order (its twin's view)
    nxt_slot = 0
    out = np.empty(Mcap, np.int64)
    for step in range(400):
        op = rng.random()
        if op < 0.45 and nxt_slot < Mcap:
            m, c = nxt_slot, int(rng.integers(C))
            nxt_slot += 1
            head = bool(rng.random() < 0.5)
            pc = _pend_room(pc, C, 1)
            join_once(pc, c, m, head, tab, rep, rq)
            ref.join(c, m, head)
            of[m] = c
        elif op < 0.75 and of:
            m = int(rng.choice(list(of)))
            leave_once(pc, of[m], m)
            ref.leave(of.pop(m), m)
        else:
            shapes = rng.permutation(S)[: int(rng.integers(1, S + 1))].astype(np.int32)
            k = firsts_once(pc, shapes, step, out)
            assert set(out[:k].tolist()) == ref.firsts(shapes.tolist()), step
            assert k == len(set(out[:k].tolist()))
        for m, c in of.items():
            assert pc.nxt[m] == ref.next_of(c, m)


def test_identical_running_nodes_equal_the_twin(monkeypatch):
    """Many running nodes alike in every row (kernels/runclass.py: only the first
    of each class is a candidate, the next takes its place when it wins), under
    gangs of every strategy, anti-affinity among them, and pending nodes: the gang
    kernel against its slow twin (a Packer.run per gang), and classes did form."""
    from vecsched.engine import schedule
    from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
    from vecsched.engine.model.requests import GangSpec, RequestSpec

    from tests.kits.packer_twin import plans_equal, twin_schedule

    rng = np.random.default_rng(7)
    types = [NodeTypeSpec("c", {"CPU": 8.0, "memory": 32.0}, max_workers=400),
             NodeTypeSpec("g", {"CPU": 8.0, "GPU": 1.0, "memory": 32.0}, max_workers=40)]
    nodes = []
    for i in range(160):
        t = "g" if i % 9 == 0 else "c"
        free = float(rng.choice([0.0, 1.0, 2.0, 4.0]))
        total = {"CPU": 8.0, "memory": 32.0, **({"GPU": 1.0} if t == "g" else {})}
        avail = {"CPU": free, "memory": 16.0, **({"GPU": 1.0} if t == "g" else {})}
        nodes.append(NodeSpec(t, total=total, available=avail, ray_node_id=f"n{i}", idle_ms=0))
    nodes += [NodeSpec("c", status=1) for _ in range(5)]          # pending
    gangs = []
    for g in range(70):
        k = int(rng.integers(1, 5))
        b = {"CPU": float(rng.choice([1.0, 2.0])), **({"GPU": 1.0} if g % 7 == 0 else {})}
        how = g % 3
        kw = ({"anti_affinity": (f"_PG_{g}", "")} if how == 1 else
              {"affinity": (f"_PG_{g}", "")} if how == 2 else {})
        gangs.append(GangSpec([RequestSpec(dict(b), 1, **kw) for _ in range(k)]))
    p = build_problem(types, nodes, [RequestSpec({"CPU": 1.0}, 50)], idle_timeout_s=60.0,
                      gangs=gangs)
    plan = schedule(p)
    plans_equal(plan, twin_schedule(p, monkeypatch), "identical running nodes")
    assert plan.gang_infeasible.sum() < p.G // 2 and plan.place_count.sum() == 50
    from vecsched.engine.raycompat.context import DEMAND, Context
    from vecsched.engine.raycompat.requests_view import Requests
    ctx = Context(p)
    run = ctx.nodes[ctx.status[ctx.nodes] == RUNNING].astype(np.int64)
    from vecsched.engine.kernels.steps import class_table_once
    rc = run_classes_once(run, ctx.pack_state(DEMAND, Requests(p)), ctx.M,
                          class_table_once(run.size + 1, p.R, ctx.label.shape[1]),
                          np.empty(p.R, bool), np.ones(p.R, bool))
    assert (rc.of[run] >= 0).sum() > 100 and len(set(rc.of[run].tolist())) < 20


@pytest.mark.parametrize("seed", range(4))
def test_dict_orders_split_classes_only_where_sums_can_differ(monkeypatch, seed):
    """Running nodes alike but for their totals' dict order (runclass._same_sums):
    three resources in use whose utilisation terms differ by 1e15 (their sum
    depends on the order: summed the other way these nodes score higher) and two
    never used nor asked for (their place in the order changes no sum). The gang
    kernel equals its slow twin, and the classes join the nodes whose orders
    differ only in the unused ones."""
    from vecsched.engine import schedule
    from vecsched.engine.kernels.steps import class_table_once
    from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, build_problem
    from vecsched.engine.model.requests import GangSpec, RequestSpec
    from vecsched.engine.raycompat.context import DEMAND, Context
    from vecsched.engine.raycompat.requests_view import Requests

    from tests.kits.packer_twin import plans_equal, twin_schedule

    rng = np.random.default_rng(300 + seed)
    big = float(2 ** 53)
    full = {"CPU": 8.0, "memory": big, "accel": 3.0, "disk": 100.0, "scratch": 7.0}
    types = [NodeTypeSpec("c", full, max_workers=300)]
    used = [k for k in full if k in ("CPU", "memory", "accel")]
    nodes = []
    for i in range(150):
        # the used ones in one of two orders (the first node: CPU first), the unused
        # ones anywhere
        keys = list(used) if i == 0 or rng.random() < 0.5 else used[::-1]
        for k in ("disk", "scratch"):
            keys.insert(int(rng.integers(len(keys) + 1)), k)
        total = {k: full[k] for k in keys}
        # a 2-CPU bundle on these scores higher summed accel first (by 0.25 in 2**50)
        avail = {"CPU": 4.0, "memory": big * 0.5 - 3.0, "accel": 1.7, "disk": 100.0,
                 "scratch": 7.0}
        nodes.append(NodeSpec("c", total=total, available={k: avail[k] for k in keys},
                              ray_node_id=f"n{i}", idle_ms=0))
    gangs = [GangSpec([RequestSpec({"CPU": 2.0, "accel": 0.1}, 1)
                       for _ in range(int(rng.integers(1, 4)))]) for _ in range(40)]
    # demand after the groups: it goes where the groups' winners now stand in the
    # list, so a group that won on another node shows in its placements
    p = build_problem(types, nodes, [RequestSpec({"CPU": 1.0}, 20)], idle_timeout_s=60.0,
                      gangs=gangs)
    plan = schedule(p)
    plans_equal(plan, twin_schedule(p, monkeypatch), "dict orders")
    ctx = Context(p)
    run = ctx.nodes[ctx.status[ctx.nodes] == RUNNING].astype(np.int64)
    need = np.zeros(p.R, bool)
    need[[p.resources.index(k) for k in ("CPU", "accel")]] = True
    rc = run_classes_once(run, ctx.pack_state(DEMAND, Requests(p)), ctx.M,
                          class_table_once(run.size + 1, p.R, ctx.label.shape[1]),
                          np.empty(p.R, bool), need)
    classes = {int(c) for c in rc.of[run] if c >= 0}
    # one per order of the used resources; the unused ones' places (12 ways per
    # order) split nothing
    assert len(classes) == 2 and (rc.of[run] >= 0).all()
