"""The gang passes as one kernel call each (``effp_pass._gang_pass``): what they are given, built once per tick, and their calls.

``gang_place._pass_py`` is the same passes in Python around the per-row kernels
(their readable twin: tests compare the two on seeded ticks). The kernels run when
no request row of a group has label selectors (their masks are read from the
labels as the pass changes them, which only the twin does); ``gang_place._pass``
chooses. The kernel changes the State's arrays while it runs and puts them back
before it returns (its module docstring), so a pass leaves the State as the
twin's pass followed by its ``restore`` does.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.kernels.effp_pass import _gang_pass
from .cost import Costs
from .options import EfficientOptions
from .place import _type_ok
from .state import State


class KernelPrep:
    """What every gang pass of a tick gives the kernel and no pass changes:
    the groups' items in one table (request row, bundle, units, size, GPU demand,
    anti-affinity, the types a fresh node of which may take one, the existing
    slots that could hold one), each group's items largest first and the
    variants to run (``gang_place._prepare``)."""

    def __init__(self, st: State, costs: Costs, opts: EfficientOptions, batches, prep: list,
                 variants: tuple):
        p = st.p
        g = p.gpu_col
        self.keep = bool(opts.keep_gpu_for_gpu and g >= 0)
        rows = np.concatenate([b[0] for b in batches]).astype(np.int64)
        qty = np.ascontiguousarray(np.concatenate([b[1] for b in batches]), np.float64)
        self.want = np.ascontiguousarray(np.concatenate([b[2] for b in batches]), np.int64)
        self.gptr = np.zeros(len(batches) + 1, np.int64)
        self.gptr[1:] = np.cumsum([len(b[0]) for b in batches])
        gpu = qty[:, g] > 0 if g >= 0 else np.zeros(len(rows), bool)
        spare = self.keep & ~gpu
        anti = st.anti_arr[rows].reshape(-1, 2)       # the State's label columns
        ok = np.asarray([_type_ok(st, int(r), q) for r, q in zip(rows.tolist(), qty)],
                        bool).reshape(len(rows), p.T)
        walk_id, walks = np.empty(len(rows), np.int64), {}
        for i in range(len(rows)):
            w = st.walk(0, qty[i], bool(spare[i]))
            walk_id[i] = walks.setdefault(id(w), (len(walks), w))[0]
        parts = [w for _, w in walks.values()]
        walk_ptr = np.zeros(len(parts) + 1, np.int64)
        walk_ptr[1:] = np.cumsum([len(w) for w in parts])
        walk = np.concatenate(parts).astype(np.int64) if parts else np.zeros(0, np.int64)
        self.items = (qty, np.ascontiguousarray(anti[:, 0]), np.ascontiguousarray(anti[:, 1]),
                      np.ascontiguousarray(costs.size(qty), np.float64), gpu, spare, walk_id,
                      walk_ptr, walk, np.ascontiguousarray(costs.inv_ref, np.float64))
        type_label = np.ascontiguousarray(st.type_label, np.int32)
        if type_label.shape[1] != st.label.shape[1]:
            raise ValueError("gang_kernel: type labels and slot labels differ in width")
        self.types = (costs.type_free, type_label, np.ascontiguousarray(costs.type_gpu, bool),
                      np.ascontiguousarray(costs.price, np.float64), costs.running_by_kind,
                      np.ascontiguousarray(costs.fit_ref, np.float64), ok)
        self.largest = np.concatenate([o for o, _ in prep]).astype(np.int64) if prep else \
            np.zeros(0, np.int64)
        V = len(variants)
        self.todo = np.zeros((len(prep), V), np.int64)
        self.ntodo = np.asarray([len(t) for _, t in prep], np.int64)
        for k, (_, t) in enumerate(prep):
            self.todo[k, :len(t)] = t
        self.credits = np.asarray([c for _, c in variants], np.float64)
        self.sorts = np.asarray([s for s, _ in variants], bool)
        units = np.asarray([int(b[2].sum()) for b in batches], np.int64)
        self.units = int(units.sum())
        # journal entries: one per unit placed on a journaled slot, per trial (the
        # variants and one re-run)
        self.journal = int((units * (self.ntodo + 1)).sum()) + 16


def selectors_free(p, batches) -> bool:
    """No request row of any group has label selectors (the kernel's condition)."""
    if not batches:
        return True
    rows = np.concatenate([b[0] for b in batches]).astype(np.int64)
    return not bool((p.req.sel_ptr[rows + 1] > p.req.sel_ptr[rows]).any())


def _kernel_state(st: State, kp: KernelPrep):
    """The State's arrays as the kernels take them (grown for every launch a pass
    can make), a counter block and a copy of the launch rooms; and the journal."""
    R = st.free.shape[1]
    st._grow(st.M + kp.units + 1)
    cap = st.free.shape[0]
    ctr = np.asarray([st.M, st.global_room, 0, st._floor], np.int64)
    room = np.asarray(st.type_room, np.int64).copy()
    cur = np.zeros(len(kp.items[7]) - 1, np.int64)      # per walk: slots known full
    state = (st.free, st.label, st.type, st.gpu, st.alive, st.ready, st.received, ctr, room,
             st.N, cur)
    J = kp.journal
    journal = (np.empty(J, np.int64), np.empty((J, R)), np.empty(J, np.int64),
               np.empty(J, np.int32), np.empty(J, bool), np.empty(cap, np.int64),
               np.empty(cap, np.int64), np.empty((cap, R)))
    return state, journal


def myopic_pass(st: State, kp: KernelPrep, order: list, tight: bool):
    """One myopic pass (``effp_pass``): ((G,) bool infeasible, placements
    (group, item, slot, units, slot type)); the State is as it was."""
    state, journal = _kernel_state(st, kp)
    bad, out = _gang_pass(False, state, journal, kp.types, kp.items, kp.gptr, kp.want,
                          np.asarray(order, np.int64), kp.largest, kp.todo, kp.ntodo,
                          kp.credits, kp.sorts, kp.keep, bool(tight), kp.units)
    return bad, [tuple(x) for x in out.tolist()]


def joint_pass(st: State, kp: KernelPrep, order: list, tight: bool):
    """The joint pass (``effp_pass._gang_pass``; twin ``gang_place._joint``), as
    ``myopic_pass``."""
    state, journal = _kernel_state(st, kp)
    bad, out = _gang_pass(True, state, journal, kp.types, kp.items, kp.gptr, kp.want,
                          np.asarray(order, np.int64), kp.largest, kp.todo, kp.ntodo,
                          kp.credits, kp.sorts, kp.keep, bool(tight), kp.units)
    return bad, [tuple(x) for x in out.tolist()]
