"""Consolidation (opt-in, ``EfficientOptions.consolidate``): stop a low-use GPU
node when what runs on it would fit on another running node.

Once demand stops arriving, the GPU nodes stay up as long as any of their work
runs: the raylets place, nothing migrates, so a node with one long task left
keeps all its GPUs billed (on the default openb replay that is most of the
efficient mode's waste). Consolidation trades a restart of that work for the
node. On a tick with nothing pending (no demand, no placement group, no
``request_resources()`` constraint) and no launch:

- **victims**: running GPU nodes (RAY_RUNNING, terminable: never the head; not
  below ``min_worker_nodes``) with some work on them, at most ``consolidate`` of
  their GPUs in use, hosting no placement-group bundle (no private resources, no
  ``_PG_`` label) and holding no per-node implicit slot; least-used first, then
  by index (or in the order a caller gives, ``consolidate_order``, e.g. a memory of
  how long each node's work has run);
- **room**: a victim goes only if the resources its work holds (total minus
  available, every column) fit in the free room of one other running node that
  is not a victim, taken first-fit by index and then reserved. One node holding
  it all is enough for the raylet to place the restarted work again whatever
  order it places it in; nothing is launched for it. (What the autoscaler does
  not see: the label selectors of running work, so work that selects node labels
  may find no room and go pending, and get a node launched as any demand does.)

With ``consolidate_replace`` (opt-in), a tick whose delete move found no room for any
victim may instead launch one cheaper node that holds the work of one or more victims
and drain them (``replace.py``).

With ``consolidate_cpu`` > 0, nodes without GPUs are victims too when at most that
share of their CPUs is in use (GPU nodes go first, then CPU nodes, each least used
first). At most ``consolidate_per_tick`` victims a tick, and no more than the disruption
budget leaves (``disruption.py``: nodes opted out by label or worker type are never
victims; nodes already being drained count against the budget), terminated with
cause CONSOLIDATE and value ``drain_deadline_s`` in milliseconds: the node is
drained (no new work; it stops when its work ends or the deadline passes). It is
sent to Ray as OUTDATED, the details saying why and giving the deadline
(``adapters/ray/codec.py``); ``adapters/ray/drain.py`` makes Ray drain it through
the GCS drain request instead of stopping it.
"""
from __future__ import annotations

import numpy as np

from vecsched.engine.model.dtypes import IMPLICIT_PREFIX, PRIVATE_PREFIX, Cause, Status
from vecsched.engine.solver.prices import price_vector
from .disruption import budget_left, opted_out
from .replace import best_replacement, nothing_on_its_way
from .options import EfficientOptions
from .state import State

_EPS = 1e-9


def _nothing_pending(st: State) -> bool:
    p = st.p
    return (int(p.shape_count.sum()) == 0 and p.G == 0 and not p.has_constraint
            and st.M == p.N)


def _hosts_groups(p) -> np.ndarray:
    """(N,) bool: the node hosts placement-group bundles."""
    out = np.asarray([len(x) > 0 for x in p.node_private], bool) if p.N else np.zeros(0, bool)
    pg = [i for i, k in enumerate(p.label_keys[: p.node_label.shape[1]]) if k.startswith("_PG_")]
    if pg:
        out |= (p.node_label[:, pg] >= 0).any(axis=1)
    return out


def _low_use(p, used: np.ndarray, opts: EfficientOptions) -> tuple[np.ndarray, np.ndarray]:
    """(share, low): per node the share of its GPUs in use (GPU nodes) or of its CPUs
    (nodes without GPUs), and whether it is at most ``consolidate`` (GPU nodes) or
    ``consolidate_cpu`` (the others; 0 leaves them alone)."""
    N, g, c = p.N, p.gpu_col, p.col("CPU")
    gpus = p.node_total[:, g] if g >= 0 else np.zeros(N)
    cpus = p.node_total[:, c] if c >= 0 else np.zeros(N)
    share = np.ones(N)
    np.divide(used[:, g], gpus, out=share, where=gpus > 0)
    cpu_node = (gpus <= 0) & (cpus > 0)
    if c >= 0:
        np.divide(used[:, c], cpus, out=share, where=cpu_node)
    low = (gpus > 0) & (opts.consolidate > 0) & (share <= opts.consolidate + _EPS)
    low |= cpu_node & (opts.consolidate_cpu > 0) & (share <= opts.consolidate_cpu + _EPS)
    return share, low


def consolidate(st: State, opts: EfficientOptions) -> int:
    """The delete move, else (opt-in) the replace move; returns how many victims a
    replacement launched this tick is for (0: none)."""
    p = st.p
    g = p.gpu_col
    if (opts.consolidate <= 0 and opts.consolidate_cpu <= 0) or p.N == 0 \
            or not _nothing_pending(st):
        return 0
    N = p.N
    real = np.asarray([not (r.startswith(IMPLICIT_PREFIX) or r.startswith(PRIVATE_PREFIX))
                       for r in p.resources], bool)
    held_slot = ((p.node_free_present & (p.node_free < 1.0 - _EPS))[:, p.implicit]).any(axis=1) \
        if p.implicit.any() else np.zeros(N, bool)
    running = st.alive[:N] & (p.node_status == Status.RAY_RUNNING) & p.node_has_ray
    used = np.where(real[None, :], np.clip(p.node_total - st.free[:N], 0.0, None), 0.0)
    busy = (used > _EPS).any(axis=1)
    share, low = _low_use(p, used, opts)
    victim = (running & st.terminable & busy & low & ~_hosts_groups(p) & ~held_slot
              & ~opted_out(p, opts))
    cand = np.flatnonzero(victim)
    gpu_node = p.node_total[:, g] > 0 if g >= 0 else np.zeros(N, bool)
    room = min(opts.consolidate_per_tick, budget_left(p, st, opts))
    if cand.size == 0:
        return 0
    order = cand[np.lexsort((cand, share[cand], ~gpu_node[cand]))]
    if opts.consolidate_order is not None:
        order = np.asarray([n for n in dict.fromkeys(opts.consolidate_order)
                            if n < N and victim[n]], np.int64)
        victim = np.zeros(N, bool)
        victim[order] = True               # the nodes left out may host the work
    taken = _delete(st, opts, order, used, real, running & ~victim, room) if room > 0 else 0
    if taken or room <= 0 or not opts.consolidate_replace or not nothing_on_its_way(st, p):
        return 0
    order = np.asarray([v for v in order.tolist() if not st.keeps_min(v)], np.int64)
    t, took = best_replacement(st, price_vector(p, opts.prices, opts.gpu_weight), order,
                               used, real, room)
    if t < 0:
        return 0
    st.launch(t)
    deadline_ms = int(round(opts.drain_deadline_s * 1000))
    for v in took:
        st.terminate(v, Cause.CONSOLIDATE, deadline_ms)
    return len(took)


def _delete(st: State, opts: EfficientOptions, order, used, real, hosts0, room: int) -> int:
    """The delete move (module docstring): drains at most ``room`` victims of ``order``;
    returns how many."""
    p = st.p
    N = p.N
    deadline_ms = int(round(opts.drain_deadline_s * 1000))
    free = np.where(real[None, :], st.free[:N], 0.0).copy()
    taken = 0
    gone = np.zeros(N, bool)
    for v in order.tolist():
        if taken >= room:
            break
        if st.keeps_min(v):
            continue
        need = used[v]
        cols = need > _EPS
        hosts = hosts0 & ~gone
        fits = np.flatnonzero(hosts & (free[:, cols] >= need[cols] - _EPS).all(axis=1))
        if fits.size == 0:
            continue
        free[int(fits[0])] -= need
        gone[v] = True
        st.terminate(v, Cause.CONSOLIDATE, deadline_ms)
        taken += 1
    return taken
