"""Why demand stayed unplaced: the reasons every policy gives, in one place.

``holders(p, rows)`` is the (n, T) test behind every reason: which configured
type could hold one unit of each request row (its resources and its label
selectors). ``why_rows`` names the reason of each row that kept units
unplaced, in this order: no configured type holds one unit
(``NO_NODE_TYPE_FITS``); some do by resources but none matches the row's label
selectors (``NO_LABEL_MATCH``); the cluster's ``max_num_nodes`` is reached
(``MAX_NUM_NODES``); else every holder is at its ``max_worker_nodes``
(``MAX_WORKERS``). ``refine`` then names what the seam itself held back
(``vecsched.engine.tick.seam``): a holder that still had room under its own
``max_worker_nodes`` but was kept from launching by a limit (``LIMIT``) or by
the availability memory (``UNAVAILABLE``).
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.dtypes import Why
from vecsched.engine.model.fits import fit_count, selector_mask
from vecsched.engine.model.plan import Plan
from vecsched.engine.model.problem import Problem

_CAPPED = (Why.MAX_WORKERS, Why.MAX_NUM_NODES)


def holders(p: Problem, rows) -> tuple[np.ndarray, np.ndarray]:
    """((n, T) bool by resources, (n, T) bool by resources and label selectors)
    of request rows ``rows`` (rows of ``p.req``; the plain runs are rows [0, S))."""
    rows = np.asarray(rows, np.int64)
    qty = p.req.qty[rows]
    fits = np.zeros((len(rows), p.T), bool)
    labelled = np.zeros((len(rows), p.T), bool)
    for i, q in enumerate(rows.tolist()):
        fits[i] = p.type_configured & (fit_count(p.type_free, qty[i]) > 0)
        if fits[i].any():
            labelled[i] = fits[i] & selector_mask(p, q, p.type_label)
    return fits, labelled


def why_rows(p: Problem, rows, capped: bool) -> np.ndarray:
    """(n,) i1 the reason of each request row in ``rows`` that kept units unplaced;
    ``capped``: the cluster's ``max_num_nodes`` was reached."""
    return classify(*holders(p, rows), capped)


def classify(fits: np.ndarray, labelled: np.ndarray, capped: bool) -> np.ndarray:
    """(n,) i1 the reasons of rows whose holders are ``fits`` / ``labelled`` ((n, T),
    as ``holders`` returns them; ray-compat tests its derived rows' selectors with
    its own kernel and hands the result here)."""
    return np.where(~fits.any(axis=1), Why.NO_NODE_TYPE_FITS,
                    np.where(~labelled.any(axis=1), Why.NO_LABEL_MATCH,
                             Why.MAX_NUM_NODES if capped else Why.MAX_WORKERS)).astype(np.int8)


def _seam_reason(row_holders: np.ndarray, free_room: np.ndarray, held: np.ndarray,
                 limited: np.ndarray) -> int:
    """LIMIT / UNAVAILABLE when every holder with room of its own was held back by
    the seam, else 0 (the policy's reason stands)."""
    cand = row_holders & free_room
    if not cand.any() or (cand & ~held & ~limited).any():
        return 0
    return Why.LIMIT if (cand & limited).any() else Why.UNAVAILABLE


def pending_rows(p: Problem) -> np.ndarray:
    """The request rows of the tick's pending demand: plain runs with units, every
    placement-group bundle row, the constraint's rows."""
    runs = np.flatnonzero(p.shape_count > 0)
    return np.unique(np.concatenate([runs, p.gang_req.astype(np.int64),
                                     p.con_req.astype(np.int64)]))


def sole_holders(p: Problem, held: np.ndarray, have: np.ndarray) -> np.ndarray:
    """(T,) bool: held types that some pending request fits while no other type with
    room does (its only chance is a held type)."""
    if not held.any():
        return held
    rows = pending_rows(p)
    if not len(rows):
        return np.zeros(p.T, bool)
    _, labelled = holders(p, rows)
    room = p.type_configured & (p.type_max > have)
    other = (labelled & ~held[None, :] & room[None, :]).any(axis=1)
    return (labelled[~other] & held[None, :]).any(axis=0)


def refine(p: Problem, plan: Plan, held: np.ndarray, limited: np.ndarray):
    """(infeasible_why, gang_why, units held back by limits) of ``plan`` with the
    seam's reasons (module docstring). ``held`` / ``limited``: (T,) bool, the
    types the availability memory / a limit kept below their own cap."""
    have = np.bincount(p.node_type, minlength=p.T)
    free_room = p.type_configured & (p.type_max > have)
    why = plan.infeasible_why.copy()
    blocked = 0
    runs = np.flatnonzero((plan.infeasible > 0) & np.isin(why, _CAPPED))
    if len(runs):
        _, labelled = holders(p, runs)
        for i, s in enumerate(runs.tolist()):
            r = _seam_reason(labelled[i], free_room, held, limited)
            if r:
                why[s] = r
                blocked += int(plan.infeasible[s]) if r == Why.LIMIT else 0
    gang_why = plan.gang_why.copy()
    for g in np.flatnonzero(plan.gang_infeasible).tolist():
        if g >= len(gang_why) or gang_why[g] not in _CAPPED:
            continue
        rows = p.gang_req[int(p.gang_ptr[g]): int(p.gang_ptr[g + 1])]
        _, labelled = holders(p, rows)
        codes = [_seam_reason(labelled[i], free_room, held, limited) for i in range(len(rows))]
        if any(codes):
            gang_why[g] = Why.LIMIT if Why.LIMIT in codes else Why.UNAVAILABLE
            blocked += len(rows) if gang_why[g] == Why.LIMIT else 0
    return why, gang_why, int(blocked)


__all__ = ["classify", "holders", "pending_rows", "refine", "sole_holders", "why_rows"]
