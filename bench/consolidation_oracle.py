"""A clairvoyant consolidation victim choice (bench only): how far could consolidation
go on the default openb replay if it knew when every pod will end?

Never production: it reads the replay's true pod end times (``Cluster.placed_at`` +
``duration``), which no autoscaler can know. It plugs into the production path
through the engine's ``EfficientOptions.consolidate_order`` (the victims a caller
ranks itself), so every other rule is the engine's own: nothing pending, the share
threshold, room on one other node, the budget, the stability window, the drain and
its deadline, opt-outs. For each node the engine could drain it computes, at the tick
``now`` (``D`` the drain deadline, ``T`` the replay's last tick):

- ``restarts``: its pods still running at ``now + D`` (cut by the deadline);
- ``stop``: ``now + D`` if any, else its last pod's end plus the drain latency;
- ``natural``: when the node would stop anyway: its last pod's end plus the idle
  timeout and the stop latency;
- ``saved`` GPU-hours: its GPUs x (``min(natural, T) - min(stop, T)``).

Victims must save at least ``min_saved`` GPU-hours, and the replay's restarts (done
plus those the drains in progress will cause, plus those of the victims offered this
tick) stay within ``restart_cap``. ``rank="ratio"``: most GPU-hours saved per restart
first (no restart first), then most saved; ``rank="soonest"``: the node whose work
ends soonest first. Greedy, tick by tick: a bound from below on what a clairvoyant
choice reaches under the rules, not a proof of the optimum. ``tail_only`` variants
drain only after the last arrival (no demand comes back to re-launch what was freed).

    python -m bench.consolidation_oracle --seeds 0 1 2 3 --out oracle.json
    python -m bench.consolidation_oracle --seeds 0 1 2 3 --same-restarts \
        --variants oracle-rules oracle-free oracle-tail-free     # at efficient-consolidate's restarts

Prints one JSON line per (seed, variant): GPU-hours, x Ray's, restarts, moves.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import time

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

# The settings a variant may change (EfficientOptions fields), and the oracle's own.
SAME_RULES = dict(consolidate=0.25, drain_deadline_s=60.0, consolidate_budget=1,
                  consolidate_after_s=300.0)
VARIANTS = {
    # the efficient-consolidate rules, the oracle's victims
    "oracle-rules": dict(opts=SAME_RULES, rank="ratio"),
    "oracle-rules-soonest": dict(opts=SAME_RULES, rank="soonest"),
    # no stability window, budget 3
    "oracle-b3": dict(opts=dict(SAME_RULES, consolidate_after_s=0.0, consolidate_budget=3,
                                consolidate_per_tick=3), rank="ratio"),
    # no window, no budget, any share, 60 s deadline
    "oracle-free": dict(opts=dict(consolidate=0.99, drain_deadline_s=60.0,
                                  consolidate_budget=1000, consolidate_per_tick=1000),
                        rank="ratio"),
    # the same, only in the tail (after the last arrival: no demand comes back)
    "oracle-tail-free": dict(opts=dict(consolidate=0.99, drain_deadline_s=60.0,
                                       consolidate_budget=1000, consolidate_per_tick=1000),
                             rank="ratio", tail_only=True),
    "oracle-tail-b3": dict(opts=dict(SAME_RULES, consolidate_after_s=0.0, consolidate_budget=3,
                                     consolidate_per_tick=3), rank="ratio", tail_only=True),
    "oracle-tail-rules": dict(opts=SAME_RULES, rank="ratio", tail_only=True),
    # the same, stopping at once (no deadline)
    "oracle-free-kill": dict(opts=dict(consolidate=0.99, drain_deadline_s=0.0,
                                       consolidate_budget=1000, consolidate_per_tick=1000),
                             rank="ratio"),
    # the same with a 5 minute deadline
    "oracle-free-300s": dict(opts=dict(consolidate=0.99, drain_deadline_s=300.0,
                                       consolidate_budget=1000, consolidate_per_tick=1000),
                             rank="ratio"),
}
KEYS = ("gpu_hours", "node_hours", "pending_p95_s", "restarts", "lost_gpu_hours",
        "lost_cpu_hours", "consolidations", "drained", "drain_deadline_hit",
        "disrupted_max_concurrent", "relaunch_after_consolidation", "never_placed")


class Oracle:
    """Ranks a tick's possible victims from the replay's truth (module docstring)."""

    def __init__(self, replay, rank: str = "ratio", restart_cap: int = 20,
                 min_saved: float = 0.05, tail_only: bool = False):
        if rank not in ("ratio", "soonest"):
            raise ValueError(f"rank: 'ratio' or 'soonest', got {rank!r}")
        self.r = replay
        self.rank = rank
        self.cap = int(restart_cap)
        self.min_saved = float(min_saved)
        cfg = replay.cfg
        last = float(replay.trace.arrival_s[-1]) if replay.trace.n_units else 0.0
        self.end_s = (int(math.ceil((last + cfg.tail_s) / cfg.tick_s))) * cfg.tick_s
        self.idle_s = float(cfg.idle_timeout_s)
        self.from_s = last if tail_only else -math.inf

    def _ends(self, slot) -> list:
        c = self.r.cluster
        return [float(c.placed_at[u] + c.duration[u]) for u in c.running[slot]]

    def _restarts_coming(self) -> int:
        """Restarts done, plus those the drains in progress will cause."""
        c, p = self.r.cluster, self.r.provider
        n = int(c.requeued)
        for iid, (_, deadline_ns) in p.draining.items():
            slot = c.slot_of.get(iid)
            if slot is not None:
                n += sum(e > deadline_ns / 1e9 for e in self._ends(slot))
        return n

    def order(self, decoded, opts) -> tuple:
        from vecsched.adapters.ray.scheduler import _instance_key
        p = decoded.problem
        c = self.r.cluster
        now = self.r.clock.ns / 1e9
        d = float(opts.drain_deadline_s)
        g = p.gpu_col
        scored = []
        if now < self.from_s:
            return ()
        for n in range(p.N):
            gpus = float(p.node_total[n, g]) if g >= 0 else 0.0
            slot = c.slot_of.get(_instance_key(decoded, int(p.node_source[n])))
            if gpus <= 0 or slot is None or not c.running[slot]:
                continue
            ends = self._ends(slot)
            latency = self.r.provider.spec(self.r.store[c.ids[slot]].instance_type).drain_latency_s
            restarts = sum(e > now + d for e in ends)
            stop = now + d if restarts else max(ends) + latency
            natural = max(ends) + self.idle_s + latency
            saved = gpus * (min(natural, self.end_s) - min(stop, self.end_s)) / 3600.0
            if saved < self.min_saved:
                continue
            key = ((-saved / restarts if restarts else -math.inf, -saved) if self.rank == "ratio"
                   else (max(ends),))
            scored.append((key, n, restarts))
        scored.sort()
        left = self.cap - self._restarts_coming()
        out = []
        for _, n, restarts in scored:
            if restarts <= left:
                out.append(n)
                left -= restarts
        return tuple(out)


def _oracle_scheduler_class():
    from vecsched.adapters.ray.scheduler import EngineScheduler

    class OracleScheduler(EngineScheduler):
        """EngineScheduler whose consolidation victims the oracle ranks."""
        oracle = None

        def _efficient_options(self, decoded):
            opts = super()._efficient_options(decoded)
            if self.oracle is None or opts is None:
                return opts
            return dataclasses.replace(opts, consolidate_order=self.oracle.order(decoded, opts))
    return OracleScheduler


def _oracle_sched(options, name: str):
    """The replay's efficient scheduler, its ``EngineScheduler`` the oracle's subclass."""
    from vecsched.adapters.replay.efficient import EfficientSched

    class Sched(EfficientSched):
        def start(self, clock) -> None:
            super().start(clock)
            cls = _oracle_scheduler_class()
            old = self.sched
            self.sched = cls.__new__(cls)
            self.sched.__dict__.update(old.__dict__)
    return Sched(options=options, name=name)


def run(trace, seed: int, name: str, restart_cap: int = 20, min_saved: float = 0.05):
    """One replay of ``trace`` with the variant ``name``; returns its metrics."""
    from vecsched.adapters.replay import Replay, ReplayConfig
    from vecsched.engine.efficient import EfficientOptions
    v = VARIANTS[name]
    r = Replay(trace, _oracle_sched(EfficientOptions(**v["opts"]), name), ReplayConfig(seed=seed))
    r.scheduler.sched.oracle = Oracle(r, v["rank"], restart_cap, min_saved,
                                      v.get("tail_only", False))
    return r.run().metrics


def same_restarts(trace, seed: int, variants, min_saved: float = 0.05) -> list:
    """``efficient-consolidate`` on ``trace``, then each oracle variant capped at the
    restarts it made: rows with GPU-hours, restarts and the ratio to the oracle's."""
    from vecsched.adapters.replay import Replay, ReplayConfig, make
    real = Replay(trace, make("efficient-consolidate"), ReplayConfig(seed=seed)).run().metrics
    rows = [{"seed": seed, "variant": "efficient-consolidate", **{k: real[k] for k in KEYS}}]
    for name in variants:
        m = run(trace, seed, name, int(real["restarts"]), min_saved)
        rows.append({"seed": seed, "variant": name, "restart_cap": int(real["restarts"]),
                     **{k: m[k] for k in KEYS},
                     "real_gpu_hours_over_this": real["gpu_hours"] / m["gpu_hours"]})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--restart-cap", type=int, default=20)
    ap.add_argument("--min-saved", type=float, default=0.05)
    ap.add_argument("--out", default=None)
    ap.add_argument("--trace", default=None,
                    help="a bundled trace replayed whole (default: the default openb window)")
    ap.add_argument("--compress", type=float, default=1.0,
                    help="with --trace: arrivals and durations this many times shorter")
    ap.add_argument("--same-restarts", action="store_true",
                    help="run efficient-consolidate first and cap each variant at the "
                         "restarts it made (the comparison at the same restart count)")
    a = ap.parse_args()
    from vecsched.adapters.replay import load
    from vecsched.adapters.replay.simulation import DEFAULT_WINDOW
    from vecsched.adapters.replay import Window
    trace = (load(a.trace, None, Window(start=0, pods=None, compress=a.compress,
                                         arrival_scale=1.0))
             if a.trace else load(None, None, DEFAULT_WINDOW))
    rows = []
    for seed in a.seeds:
        if a.same_restarts:
            for row in same_restarts(trace, seed, a.variants, a.min_saved):
                rows.append(row)
                print(json.dumps(row), flush=True)
            continue
        for name in a.variants:
            t = time.perf_counter()
            m = run(trace, seed, name, a.restart_cap, a.min_saved)
            row = {"seed": seed, "variant": name, "restart_cap": a.restart_cap,
                   "min_saved": a.min_saved, "wall_s": round(time.perf_counter() - t, 1),
                   **{k: m[k] for k in KEYS}}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
