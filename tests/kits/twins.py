"""Slow, readable twins of the numba kernels: one unit at a time, Python floats,
Ray's own formulas. Tests compare each kernel against its twin."""
from __future__ import annotations


def fit_count_ref(free, present, implicit, qty, limit):
    """Place units of bundle qty one at a time, as Ray does; returns (count, free, present)."""
    free = [float(x) for x in free]
    present = [bool(x) for x in present]
    n = 0
    while n < limit:
        if any(v > 0 and v > free[r] for r, v in enumerate(qty)):
            break
        for r, v in enumerate(qty):
            if v > 0:
                free[r] -= v
                present[r] = True
        n += 1
    return n, free, present


def util_terms_ref(total, order, free, present):
    terms = []
    for r in order:
        if r < 0:
            break
        v = float(total[r])
        if v == 0 or not present[r]:
            continue
        u = (v - float(free[r])) / v
        terms.append(v * (u ** 3))
    return (min(terms) if terms else 0, float(sum(terms)) / len(terms) if terms else 0)


def score_ref(total, order, free, present, placed_res, placed_gpu, gpu_col, conserve):
    gpu_ok = not (conserve and gpu_col >= 0 and total[gpu_col] > 0 and not placed_gpu)
    match = sum(1 for r in order if r >= 0 and placed_res[r])
    lo, mean = util_terms_ref(total, order, free, present)
    return (int(gpu_ok), match, lo, mean)


def victim_util_ref(total, order, free, present):
    out = []
    for m in range(len(total)):
        utils = []
        for r in order[m]:
            if r < 0:
                break
            v = float(total[m][r])
            if v <= 0:
                continue
            a = float(free[m][r]) if present[m][r] else 0.0
            utils.append((v - a) / v)
        out.append(sum(utils) / len(utils) if utils else 0)
    return out


def first_selector_ref(label, selectors):
    """Index of the first satisfied selector (each a list of (key, op, values)), -1."""
    for i, sel in enumerate(selectors):
        ok = True
        for key, op, values in sel:
            v = label[key]
            found = v >= 0 and v in values
            ok = found if op == 1 else not found
            if not ok:
                break
        if ok:
            return i
    return -1


def label_score_ref(label, placed_reqs, reqs):
    for q in placed_reqs:
        i = first_selector_ref(label, reqs[q]["sel"])
        if reqs[q]["sel"] and i >= 0:
            return len(reqs[q]["sel"]) - i
    return 0


def walk_ref(free, present, res, label, hist, implicit, runs, left, reqs, gpu_key):
    """Ray's greedy walk, one unit at a time. reqs[q]: {"qty", "sel", "anti"}.
    Returns taken, gpu, free, present, res, label, placed request list."""
    free, present, res, label, hist = list(free), list(present), list(res), list(label), list(hist)
    taken, gpu = [], False
    for q, want in zip(runs, left):
        n = 0
        while n < want:
            rq = reqs[q]
            if rq["sel"] and first_selector_ref(label, rq["sel"]) < 0:
                break
            if rq["anti"] is not None and label[rq["anti"][0]] == rq["anti"][1]:
                break
            k, free, present = fit_count_ref(free, present, implicit, rq["qty"], 1)
            if k == 0:
                break
            n += 1
            gpu = gpu or bool(gpu_key[q])
            for r, v in enumerate(rq["qty"]):
                if v > 0:
                    res[r] = True
            if rq["anti"] is not None:
                label[rq["anti"][0]] = rq["anti"][1]
            hist.append(q)
        taken.append(n)
    return taken, gpu, free, present, res, label, hist


def best_node_ref(cands, cls, total, order, free, present, placed_res, placed_gpu, label, hist,
                  rec, prio, avail, implicit, runs, left, reqs, gpu_key, gpu_col, conserve):
    """Ray's _sched_best_node: try each candidate, sort by key descending (stable)."""
    seen, results = set(), []
    for i, m in enumerate(cands):
        if cls[m] >= 0:
            if cls[m] in seen:
                continue
            seen.add(cls[m])
        taken, gpu, f, p, res, lab, hst = walk_ref(free[m], present[m], placed_res[m], label[m],
                                                   hist[m], implicit, runs, left, reqs, gpu_key)
        if sum(taken) == 0:
            continue
        score = score_ref(total[m], order[m], f, p, res, placed_gpu[m] or gpu, gpu_col, conserve)
        key = (label_score_ref(lab, hst, reqs),) + score
        results.append((key, float(rec[m]), int(prio[m]), float(avail[m]), i, taken))
    if not results:
        return -1, None
    results = sorted(results, key=lambda x: x[:4], reverse=True)
    return results[0][4], results[0][5]


def gang_list_ref(lst, running, holders, winners, launches):
    """Ray's node list after a placed gang (kernels/listorder.py): its winners in
    pick order, then the nodes it visited (every non-running node, and the
    running ``holders``) in their old order, then the others in their old order,
    then its ``launches``."""
    won = set(winners)
    visited = [m for m in lst if (m not in running or m in holders) and m not in won]
    rest = [m for m in lst if m in running and m not in holders and m not in won]
    return list(winners) + visited + rest + list(launches)


class ClassListsRef:
    """Per class its members in list order, and per shape the classes that
    hold a unit of it (kernels/pendclass.py): lists, nothing kept incrementally."""

    def __init__(self, holds):
        self.members: dict = {}      # class -> members, first first
        self.holds = holds           # (class, shape) -> bool

    def join(self, c, m, at_head):
        lst = self.members.setdefault(c, [])
        lst.insert(0, m) if at_head else lst.append(m)

    def leave(self, c, m):
        self.members[c].remove(m)

    def next_of(self, c, m):
        lst = self.members[c]
        i = lst.index(m)
        return lst[i + 1] if i + 1 < len(lst) else -1

    def firsts(self, shapes):
        """The first member of each class with members holding one of ``shapes``."""
        return {lst[0] for c, lst in self.members.items()
                if lst and any(self.holds(c, s) for s in shapes)}
