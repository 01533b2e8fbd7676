"""Why units wait: every placement of one suite cell split by cause, per scheduler.

    .venv/bin/python -m bench.wait_split gpuspec33 --gangs 0 --seed 0
    .venv/bin/python -m bench.wait_split openb --gangs 0.2 --schedulers engine,efficient

Replays one cell of ``bench/suite.py`` (same trace window, gang overlay and
``ReplayConfig(seed=seed)``) with each scheduler, watching the cluster stand-in, and
prints one markdown table with a column per scheduler:

- **placements by cause**: placed the moment the unit became pending; waited for room
  to free on a node that was already running (work completing there); waited for a
  node that was already booting (launched before the unit arrived); waited for a node
  launched after it arrived. Counts, and the mean wait of each.
- **waits with a fitting node just stopped**: waiting units for which a node whose type
  holds them was idle-terminated in the 60 s (or 5 s) before they arrived;
  **booting node slower than a fresh one**: units that waited for an already booting
  node which joined later than a node launched at the next tick would have (about
  90 s after it);
- **plan vs replay**: units the scheduler's plan put on a node that was running (the
  cluster had already placed what fit there, so any is a plan the replay does not
  follow), on a booting node, on a new node (summed over ticks; engine modes only);
- **blocked at arrival**: units that could not be placed when they arrived, by what
  the running nodes lacked: no node with the GPU room (GPUs and accelerator), or GPU
  room only on nodes short of CPU / memory; and the mean free GPUs on running nodes
  over the placement passes;
- **by pod kind** (CPU only, fractional GPU, whole GPUs; "+model" when the pod names
  an accelerator): placed at once / units, and the kind's pending p50;
- **launches**: mean seconds a launch sat QUEUED (the concurrent-launch limit), mean
  boot (REQUESTED to RAY_RUNNING).

Deterministic (the replay is); the cluster is watched by wrapping two methods of the
replay's own ``Cluster`` object, nothing else changes.
"""
from __future__ import annotations

import argparse
import collections
import types

import numpy as np

from bench.suite import WORKLOADS
from vecsched.adapters.replay import GangOverlay, Replay, ReplayConfig, load, make
from vecsched.engine.model.dtypes import Cause, Status

NS = 1e9
CAUSES = ("placed at once", "room freed on a running node", "node already booting",
          "node launched after arrival")
_STOPPED = (Status.RAY_STOP_REQUESTED, Status.RAY_STOPPING, Status.TERMINATING, Status.TERMINATED)


class Watch:
    """What the cluster did: every start (unit, pending since, placed at, slot) and, at
    each placement pass, why the units that just arrived and stayed pending did."""

    def __init__(self, cluster):
        self.starts: list = []
        self.blocked: collections.Counter = collections.Counter()
        self.free_gpu: list = []
        self._seen: set = set()
        start, place = cluster.start_unit, cluster.place

        def _start(c, u, slot, now):
            self.starts.append((u, float(c.pending_since[u]), now, slot))
            return start(u, slot, now)

        def _place(c, now):
            n = place(now)
            self._pass(c, now)
            return n
        cluster.start_unit = types.MethodType(_start, cluster)
        cluster.place = types.MethodType(_place, cluster)

    def _pass(self, c, now: float) -> None:
        g = c.gpu_col
        idx = np.flatnonzero(c.placeable)
        free = c.total[idx] - c.used[idx]
        if g is not None:
            self.free_gpu.append(float(free[:, g].sum()) / 1e4)
        for s, q in enumerate(c.queues):
            for u in q:
                if c.pending_since[u] != now or u in self._seen:
                    continue
                self._seen.add(u)
                self.blocked[_blocker(c, s, free)] += 1


def _blocker(c, s: int, free: np.ndarray) -> str:
    """What the running nodes lack for one unit of shape s: for a GPU unit, the GPU
    room (GPUs and accelerator) or, where that is free, the rest; for a unit without
    GPUs, the resources short on every node. Per-node caps (implicit slots) are one
    name."""
    need, pos = c.shape_fp[s], c.shape_pos[s]
    gp = [j for j in pos if c.columns[j] == "GPU" or c.columns[j].startswith("accelerator")]
    if not free.shape[0]:
        return "no node running"
    gpu_ok = (free[:, gp] >= need[gp]).all(axis=1) if gp else np.ones(free.shape[0], bool)
    if not gpu_ok.any():
        return "no node with the GPU room"
    short = sorted({"per-node cap" if c.implicit[j] else c.columns[j]
                    for k in np.flatnonzero(gpu_ok) for j in pos if free[k, j] < need[j]})
    what = "+".join(short)
    if not short:
        return "fits (drained)"
    return f"GPU room only where {what} short" if gp else f"no GPU: {what} short"


def _kind(shape: dict) -> str:
    g = shape.get("GPU", 0.0)
    model = "+model" if any(k.startswith("accelerator_type") for k in shape) else ""
    if g <= 0:
        return "cpu"
    return ("fractional GPU" if g < 1 else "whole GPUs") + model


def _fits(shape: dict, res: dict) -> bool:
    return all(res.get(k, 0.0) + 1e-9 >= v for k, v in shape.items() if v > 0)


def _plan_logger(sched, log: list):
    """Wrap ``sched.after`` to add, per tick, the units its plan put on running,
    booting and new nodes (engine modes: ``EngineScheduler.last_plan``)."""
    inner = getattr(sched, "sched", None)
    if inner is None or not hasattr(inner, "last_plan"):
        return
    after = sched.after

    def logged(state, decision):
        plan = inner.last_plan
        if plan is not None and plan.n_nodes == len(state.nodes):
            status = np.array([n.status for n in state.nodes], np.int64)
            slot, cnt = plan.place_slot, plan.place_count
            old = (slot >= 0) & (slot < plan.n_nodes)
            run = np.zeros(len(slot), bool)
            run[old] = status[slot[old]] == Status.RAY_RUNNING
            log.append((int(cnt[run].sum()), int(cnt[old & ~run].sum()),
                        int(cnt[slot >= plan.n_nodes].sum())))
        return after(state, decision)
    sched.after = logged


def split(trace, name: str, seed: int) -> dict:
    """One replay of ``trace`` with scheduler ``name``: the figures of the module docstring."""
    sched = make(name)
    rep = Replay(trace, sched, ReplayConfig(seed=seed))
    watch = Watch(rep.cluster)
    plan_log: list = []
    _plan_logger(sched, plan_log)
    metrics = rep.run().metrics
    c, store = rep.cluster, rep.store
    nodes = []
    for iid, ty in zip(c.ids, c.types):
        rec = store.get(iid)
        q, j = rec.times_ns(Status.QUEUED), rec.times_ns(Status.RAY_RUNNING)
        nodes.append((q[0] / NS if q else None, j[0] / NS if j else 0.0))
    res = {t.name: t.resources for t in trace.types}
    stops = sorted((min(ts for s, ts in r.status_history if s in _STOPPED) / NS, r.instance_type)
                   for r in store if r.termination_cause == Cause.IDLE
                   and r.times_ns(Status.RAY_RUNNING)
                   and any(s in _STOPPED for s, _ in r.status_history))
    cause = collections.Counter()
    wait_sum = collections.Counter()
    extra = collections.Counter()
    kinds: dict = collections.defaultdict(list)
    for u, since, at, slot in watch.starts:
        shape = trace.shapes[int(trace.unit_shape[u])]
        wait = at - since
        queued, joined = nodes[slot]
        if wait <= 1e-9:
            k = CAUSES[0]
        elif joined <= since + 1e-9:
            k = CAUSES[1]
        elif queued is not None and queued <= since:
            k = CAUSES[2]
            if joined > np.ceil(since / 5.0) * 5.0 + 90.0:
                extra["booting node slower than a fresh one"] += 1
        else:
            k = CAUSES[3]
        if wait > 1e-9:
            for window in (60.0, 5.0):
                if any(since - window <= t <= since + 1e-9 and _fits(shape, res[ty])
                       for t, ty in stops):
                    extra[f"waited; a fitting node was idle-stopped <= {window:g} s before"] += 1
        cause[k] += 1
        wait_sum[k] += wait
        kinds[_kind(shape)].append(wait)
    launches = [((r.times_ns(Status.REQUESTED)[0] - r.times_ns(Status.QUEUED)[0]) / NS,
                 ((r.times_ns(Status.RAY_RUNNING) or [np.nan])[0]
                  - r.times_ns(Status.REQUESTED)[0]) / NS)
                for r in store if r.times_ns(Status.QUEUED) and r.times_ns(Status.REQUESTED)]
    lq = np.array(launches, float).reshape(-1, 2)
    out = {"pending p50 s": metrics["pending_p50_s"], "pending p95 s": metrics["pending_p95_s"],
           "GPU-hours": metrics["gpu_hours"], "launches": metrics["instances"]["launched"]}
    n = len(watch.starts)
    for k in CAUSES:
        mean = wait_sum[k] / cause[k] if cause[k] else 0.0
        out[k] = f"{cause[k]} ({100 * cause[k] / max(n, 1):.0f} %, mean {mean:.0f} s)"
    out.update(dict(sorted(extra.items())))
    if plan_log:
        a = np.array(plan_log)
        out["plan: units on running nodes"] = int(a[:, 0].sum())
        out["plan: units on booting nodes"] = int(a[:, 1].sum())
        out["plan: units on new nodes"] = int(a[:, 2].sum())
    for k, v in sorted(watch.blocked.items()):
        out[f"blocked at arrival: {k}"] = v
    out["mean free GPUs on running nodes"] = float(np.mean(watch.free_gpu)) if watch.free_gpu else 0.0
    for k, waits in sorted(kinds.items()):
        w = np.asarray(waits)
        out[f"{k}: at once / units, p50 s"] = (f"{int((w <= 1e-9).sum())} / {w.size}, "
                                               f"{np.percentile(w, 50):.1f}")
    if lq.size:
        out["launch: mean s QUEUED"] = float(lq[:, 0].mean())
        out["launch: mean boot s"] = float(np.nanmean(lq[:, 1]))
    return out


def _fmt(v) -> str:
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("workload", choices=[w.name for w in WORKLOADS])
    ap.add_argument("--gangs", type=float, default=0.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--schedulers", default="engine,efficient")
    args = ap.parse_args(argv)
    w = {x.name: x for x in WORKLOADS}[args.workload]
    if args.gangs not in w.gangs:
        raise SystemExit(f"--gangs: {args.workload} is replayed with {list(w.gangs)}")
    names = [s.strip() for s in args.schedulers.split(",") if s.strip()]
    trace = load(w.trace, None, w.window, GangOverlay(args.gangs, seed=args.seed))
    cols = {name: split(trace, name, args.seed) for name in names}
    keys = list(dict.fromkeys(k for c in cols.values() for k in c))
    print(f"{args.workload}, gangs {args.gangs:g}, seed {args.seed}\n")
    print("| | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for k in keys:
        print(f"| {k} | " + " | ".join(_fmt(cols[n].get(k, "")) for n in names) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
