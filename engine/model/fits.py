"""Which request row may go where: resource fit, label selectors, anti-affinity.

Plain numpy over the Problem's request table (``problem.req``) and label rows
(``node_label`` (N, L), ``type_label`` (T, L)): the rules of docs/ray-semantics.md
§4.7 item 2-4 and §4.9, for the efficient mode (``vecsched.engine.efficient``) and the
CP-SAT cross-check (``vecsched.engine.solver``). Ray-compat has its own numba kernels;
this module is read-only support for the modes that are not Ray-exact.

Index names: q request row, m label row (a node or a node type), r column.
"""
from __future__ import annotations

import numpy as np

from .problem import Problem

# Relative slack when counting how many units fit, so that 0.3 / 0.1
# (2.9999999999999996 in binary64) counts as 3; far below validate's 1e-9.
FIT_SLACK = 1e-12
BIG_COUNT = 1 << 40          # "fits without bound": a unit with no positive entry

IN, NOT_IN = 1, 2            # Ray's LabelSelectorOperator values (vecsched.engine.model.requests)


def fit_count(free: np.ndarray, qty: np.ndarray) -> np.ndarray:
    """(M,) i8 units of one bundle ``qty`` (R,) that fit in each row of ``free`` (M, R).

    Zero entries always fit, so only positive columns bound the count; a bundle
    with none fits without bound (``BIG_COUNT``)."""
    free = np.atleast_2d(free)
    pos = qty > 0
    if not pos.any():
        return np.full(free.shape[0], BIG_COUNT, np.int64)
    k = np.floor((free[:, pos] / qty[pos]).min(axis=1) * (1.0 + FIT_SLACK))
    return np.clip(k, 0, BIG_COUNT).astype(np.int64)


def fits_one(free: np.ndarray, qty: np.ndarray) -> np.ndarray:
    """(M,) bool: one unit of ``qty`` fits in each row of ``free``."""
    return fit_count(free, qty) >= 1


def selector_mask(p: Problem, q: int, labels: np.ndarray) -> np.ndarray:
    """(M,) bool: row q's label selectors hold on each label row (M, L).

    No selector: always true. Otherwise any one selector must hold, and a
    selector holds when all its constraints do: IN needs the key with a listed
    value, NOT_IN needs the key absent or its value unlisted (§4.9)."""
    t = p.req
    labels = np.atleast_2d(labels)
    lo, hi = int(t.sel_ptr[q]), int(t.sel_ptr[q + 1])
    if hi <= lo:
        return np.ones(labels.shape[0], bool)
    out = np.zeros(labels.shape[0], bool)
    for s in range(lo, hi):
        ok = np.ones(labels.shape[0], bool)
        for c in range(int(t.sel_con_ptr[s]), int(t.sel_con_ptr[s + 1])):
            key = int(t.con_key[c])
            vals = t.con_vals[int(t.con_val_ptr[c]): int(t.con_val_ptr[c + 1])]
            have = labels[:, key] if key < labels.shape[1] else np.full(labels.shape[0], -1)
            listed = (have >= 0) & np.isin(have, vals)
            ok &= listed if int(t.con_op[c]) == IN else ~listed
        out |= ok
    return out


def anti_mask(p: Problem, q: int, labels: np.ndarray) -> np.ndarray:
    """(M,) bool: row q's anti-affinity (if any) allows each label row: the row
    must not already carry the label ``key == value`` (§4.7 item 3)."""
    labels = np.atleast_2d(labels)
    key, val = (int(x) for x in p.req.anti[q])
    if key < 0:
        return np.ones(labels.shape[0], bool)
    if key >= labels.shape[1]:
        return np.ones(labels.shape[0], bool)
    return labels[:, key] != val


def placeable(p: Problem, q: int, free: np.ndarray, labels: np.ndarray,
              qty: np.ndarray | None = None) -> np.ndarray:
    """(M,) bool: one unit of row q (or of ``qty``, a merged bundle carrying row
    q's selectors and constraint) may go on each (free, labels) row."""
    qty = p.req.qty[q] if qty is None else qty
    return fits_one(free, qty) & selector_mask(p, q, labels) & anti_mask(p, q, labels)


def gang_items(p: Problem, g: int) -> list[tuple[np.ndarray, int, list[int]]]:
    """Gang g's placement items after the STRICT_PACK merge (§3.7 item 3): a list of
    (bundle (R,), request row whose selectors and constraint it carries, the
    gang's bundle positions it stands for).

    Bundles with an affinity are grouped by (label key, value, selectors) and
    each group becomes one item whose bundle is the per-column sum and whose
    selectors are its first member's; every other bundle is its own item. The
    order is Ray's: unmerged bundles first, in gang order, then the merged ones
    in first-seen order."""
    t = p.req
    lo, hi = int(p.gang_ptr[g]), int(p.gang_ptr[g + 1])
    rows = p.gang_req[lo:hi].tolist()
    out, groups = [], {}
    for i, q in enumerate(rows):
        if t.aff[q, 0] < 0:
            out.append((t.qty[q].copy(), q, [i]))
        else:
            key = (int(t.aff[q, 0]), int(t.aff[q, 1]), t.sel_key[q])
            groups.setdefault(key, []).append(i)
    for members in groups.values():
        qty = t.qty[[rows[i] for i in members]].sum(axis=0)
        out.append((qty, rows[members[0]], members))
    return out


def strict_gangs(p: Problem) -> np.ndarray:
    """(G,) whether ``gang_strategy`` of each gang starts with STRICT, for all
    gangs at once (the constraints read as arrays, the names one by one)."""
    t, G = p.req, p.G
    gid = np.repeat(np.arange(G), np.diff(p.gang_ptr))
    rows = p.gang_req[:gid.size]
    constrained = np.zeros(G, bool)
    constrained[gid[(t.aff[rows, 0] >= 0) | (t.anti[rows, 0] >= 0)]] = True
    names = list(p.gang_names[:G]) + [""] * max(0, G - len(p.gang_names))
    named = np.fromiter((len(parts) >= 2 and parts[1] in ("STRICT_PACK", "STRICT_SPREAD")
                         for parts in (n.split(":") for n in names)), bool, G)
    return constrained | named


def gang_strategy(p: Problem, g: int) -> str:
    """The strategy of gang g as far as the scheduler can tell: STRICT_PACK
    (affinity bundles), STRICT_SPREAD (anti-affinity bundles), else the name
    given in the GCS details ``<pg>:<strategy>:<state>`` (PACK or SPREAD, which
    Ray schedules alike), else PACK."""
    t = p.req
    rows = p.gang_req[int(p.gang_ptr[g]): int(p.gang_ptr[g + 1])]
    if len(rows) and (t.aff[rows, 0] >= 0).any():
        return "STRICT_PACK"
    if len(rows) and (t.anti[rows, 0] >= 0).any():
        return "STRICT_SPREAD"
    name = p.gang_names[g] if g < len(p.gang_names) else ""
    parts = name.split(":")
    if len(parts) >= 2 and parts[1] in ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"):
        return parts[1]
    return "PACK"
