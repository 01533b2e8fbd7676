"""Small seeded placement problems with their optimum found by exhaustive
enumeration, for the CP-SAT model's tests (vecsched.engine.solver).

The enumeration works on the specs (plain dicts), not on the model's
``Instance``, so it checks the instance building too: every unit of every gang
bundle (STRICT_PACK bundles merged) and plain run goes to an existing node, to a
new node of a configured type, or nowhere; gangs all or nothing; capacities,
label selectors and anti-affinity as docs/ray-semantics.md §4.7 / §4.9 say.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.build.builder import NodeSpec, NodeTypeSpec, RequestSpec, build_problem
from vecsched.engine.model.dtypes import Status
from vecsched.engine.model.requests import GangSpec

GIB = float(2 ** 30)
_TOL = 1e-9


def _pg(strategy: str, g: int) -> dict:
    label = f"_PG_{g:04x}"
    if strategy == "STRICT_PACK":
        return {"affinity": (label, "")}
    if strategy == "STRICT_SPREAD":
        return {"anti_affinity": (label, "")}
    return {}


def small_case(seed: int, *, max_units: int = 6, max_types: int = 3):
    """(types, nodes, requests, gangs, max_num_nodes) of a small random tick."""
    rng = np.random.default_rng(seed)
    zones = ["a", "b"]
    types = []
    for t in range(int(rng.integers(1, max_types + 1))):
        res = {"CPU": float(rng.choice([2, 4, 8])), "memory": GIB * float(rng.choice([4, 8]))}
        if rng.random() < 0.4:
            res["GPU"] = float(rng.choice([1, 2]))
        labels = {"zone": str(rng.choice(zones))} if rng.random() < 0.5 else {}
        types.append(NodeTypeSpec(f"t{t}", res, min_workers=int(rng.random() < 0.15),
                                  max_workers=int(rng.integers(1, 4)), labels=labels))
    nodes = []
    for i in range(int(rng.integers(0, 3))):
        t = types[int(rng.integers(len(types)))]
        total = dict(t.resources)
        avail = {k: v * float(rng.choice([0.0, 0.25, 0.5, 1.0])) for k, v in total.items()}
        labels = {"zone": str(rng.choice(zones))} if rng.random() < 0.5 else {}
        nodes.append(NodeSpec(t.name, Status.RAY_RUNNING, total=total, available=avail,
                              labels=labels, ray_node_id=f"n{i}"))

    def bundle():
        b = {"CPU": float(rng.choice([0.5, 1, 2, 3]))}
        if rng.random() < 0.3:
            b["GPU"] = float(rng.choice([0.5, 1]))
        if rng.random() < 0.3:
            b["memory"] = GIB * float(rng.choice([1, 2, 4]))
        return b

    def selectors():
        if rng.random() < 0.25:
            op = "in" if rng.random() < 0.7 else "not_in"
            return [[("zone", op, [str(rng.choice(zones))])]]
        return []

    units = 0
    gangs = []
    for g in range(int(rng.integers(0, 3))):
        strategy = str(rng.choice(["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"]))
        nb = int(rng.integers(1, 4))
        if units + nb > max_units:
            break
        units += nb
        b, sel = bundle(), selectors()
        same = rng.random() < 0.6
        reqs = [RequestSpec(b if same else bundle(), label_selectors=sel, **_pg(strategy, g))
                for _ in range(nb)]
        gangs.append(GangSpec(reqs, name=f"{g:04x}:{strategy}:PENDING"))
    requests = []
    for _ in range(int(rng.integers(0, 3))):
        n = int(rng.integers(1, 3))
        if units + n > max_units:
            break
        units += n
        requests.append(RequestSpec(bundle(), count=n, label_selectors=selectors()))
    mnn = None if rng.random() < 0.7 else int(rng.integers(len(nodes), len(nodes) + 3))
    return types, nodes, requests, gangs, mnn


def problem_of(case):
    types, nodes, requests, gangs, mnn = case
    return build_problem(types, nodes, requests, gangs=gangs, max_num_nodes=mnn,
                         idle_timeout_s=60.0)


def _sel_ok(selectors, labels: dict) -> bool:
    if not selectors:
        return True
    for sel in selectors:
        ok = True
        for key, op, vals in sel:
            listed = key in labels and labels[key] in vals
            ok &= listed if op == "in" else not listed
        if ok:
            return True
    return False


def _fits(free: dict, b: dict) -> bool:
    return all(v <= free.get(k, 0.0) * (1 + _TOL) + _TOL for k, v in b.items() if v > 0)


def brute_force(case, price) -> tuple[int, float]:
    """(unplaced bundles + units, cost) of the best packing, lexicographically."""
    types, nodes, requests, gangs, mnn = case
    # items: (bundle, selectors, anti label or None, gang or -1)
    items = []
    for g, gs in enumerate(gangs):
        merged = {}
        for rs in gs.requests:
            if rs.affinity is not None:
                m = merged.setdefault(rs.affinity, [{}, rs.label_selectors, 0])
                for k, v in rs.resources.items():
                    m[0][k] = m[0].get(k, 0.0) + v
                m[2] += 1
            else:
                items.append((dict(rs.resources), rs.label_selectors, rs.anti_affinity, g, 1))
        for b, sel, n in merged.values():
            items.append((b, sel, None, g, n))
    for rs in requests:
        for _ in range(rs.count):
            items.append((dict(rs.resources), rs.label_selectors, rs.anti_affinity, -1, 1))
    have = {t.name: 0 for t in types}
    for n in nodes:
        have[n.type] += 1
    forced = {t.name: max(t.min_workers - have[t.name], 0) for t in types}
    bins = [[dict(n.available), dict(n.labels or {}), None] for n in nodes]
    for t in types:
        for _ in range(forced[t.name]):
            bins.append([dict(t.resources), dict(t.labels), None])
    budget = {t.name: max(t.max_workers - have[t.name] - forced[t.name], 0) for t in types}
    glob = None if mnn is None else max(mnn - len(nodes) - sum(forced.values()), 0)
    gang_units = {}
    for it in items:
        if it[3] >= 0:
            gang_units[it[3]] = gang_units.get(it[3], 0) + it[4]
    best = [None]
    opened = {t.name: 0 for t in types}

    def score(unplaced_by_gang, plain_unplaced, cost):
        un = plain_unplaced + sum(gang_units[g] for g in unplaced_by_gang)
        return (un, round(cost, 9))

    def rec(k, placed_gangs, failed_gangs, plain_unplaced, cost, launched):
        if k == len(items):
            s = score(failed_gangs, plain_unplaced, cost)
            if best[0] is None or s < best[0]:
                best[0] = s
            return
        b, sel, anti, g, _ = items[k]
        if g >= 0 and g in failed_gangs:
            rec(k + 1, placed_gangs, failed_gangs, plain_unplaced, cost, launched)
            return
        for bin_ in bins:
            free, labels, _ = bin_
            if not _sel_ok(sel, labels) or not _fits(free, b):
                continue
            if anti is not None and labels.get(anti[0]) == anti[1]:
                continue
            old = dict(free)
            for kk, v in b.items():
                free[kk] = free.get(kk, 0.0) - v
            if anti is not None:
                labels[anti[0]] = anti[1]
            rec(k + 1, placed_gangs, failed_gangs, plain_unplaced, cost, launched)
            free.clear()
            free.update(old)
            if anti is not None:
                del labels[anti[0]]
        # a new node of each type (new nodes are interchangeable: open at most one more)
        for ti, t in enumerate(types):
            if opened[t.name] >= budget[t.name] or (glob is not None and launched >= glob):
                continue
            if not _sel_ok(sel, t.labels) or not _fits(t.resources, b):
                continue
            free = dict(t.resources)
            for kk, v in b.items():
                free[kk] = free.get(kk, 0.0) - v
            labels = dict(t.labels)
            if anti is not None:
                labels[anti[0]] = anti[1]
            bins.append([free, labels, t.name])
            opened[t.name] += 1
            rec(k + 1, placed_gangs, failed_gangs, plain_unplaced, cost + price[ti], launched + 1)
            opened[t.name] -= 1
            bins.pop()
        # leave it unplaced
        if g >= 0:
            rec(k + 1, placed_gangs, failed_gangs | {g}, plain_unplaced, cost, launched)
        else:
            rec(k + 1, placed_gangs, failed_gangs, plain_unplaced + 1, cost, launched)

    rec(0, frozenset(), frozenset(), 0, 0.0, 0)
    return best[0]
