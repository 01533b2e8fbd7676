"""An upper bound on what consolidation can save in the default openb replay's tail
(after the last arrival) with at most ``--cap`` restarted pods (bench only: it reads
the replay's true pod end times).

The efficient mode without consolidation (``efficient-proxy``) is replayed up to the
first tick at or after the last arrival, ``t0``; the replay ends at ``T`` (600 s
later). Every GPU node then running pods is a possible victim, whatever the rules
(no share threshold, no room check, no budget, no stability window). A node with
``G`` GPUs whose pods end at e1 >= e2 >= ... may be drained at any time t >= t0; with
a drain deadline ``D``, draining it at ``t = max(t0, e(k+1) - D)`` restarts its k
longest pods (the fewest restarts for that time) and stops it at ``t + D`` (k > 0) or
``e1 + latency`` (k = 0); left alone, it stops at ``e1 + idle timeout + latency``
(``natural``). What that saves is ``G x (min(natural, T) - min(stop, T))``. The best
choice per node under a total of ``cap`` restarts is a multiple-choice knapsack
(solved exactly by dynamic programming over the restart count).

It is an upper bound for moves in the tail: it ignores whether the restarted pods fit
elsewhere, what they cost there, and every rule. (Moves before the last arrival are
not bounded here: demand still arrives and may re-launch what a move freed.)

    python bench/consolidation_tail_bound.py --seeds 0 1 2 3
"""
from __future__ import annotations

import argparse
import json
import math
import os

os.environ.setdefault("RAY_AUTH_MODE", "disabled")

LATENCY_S = 10.0        # the simulated cloud's drain latency (lifecycle.SimNodeType)


def tail_nodes(trace, seed: int):
    """(t0, T, [(GPUs, pod end times, largest first)]) of ``efficient-proxy`` at the
    first tick at or after the last arrival."""
    from vecsched.adapters.replay import Replay, ReplayConfig, make
    cfg = ReplayConfig(seed=seed)
    r = Replay(trace, make("efficient-proxy"), cfg)
    last = float(trace.arrival_s[-1])
    n_ticks = int(math.ceil((last + cfg.tail_s) / cfg.tick_s)) + 1
    r.begin()
    t0 = last
    for k in range(n_ticks):
        r.tick(k)
        if k * cfg.tick_s >= last:
            t0 = k * cfg.tick_s
            break
    c = r.cluster
    g = c.col.get("GPU")
    nodes = []
    for slot in range(len(c.ids)):
        gpus = c.total[slot, g] / 1e4 if g is not None else 0.0
        if c.alive[slot] and c.running[slot] and gpus > 0:
            ends = sorted((float(c.placed_at[u] + c.duration[u]) for u in c.running[slot]),
                          reverse=True)
            nodes.append((float(gpus), ends))
    return t0, (n_ticks - 1) * cfg.tick_s, nodes, float(cfg.idle_timeout_s)


def options(gpus, ends, t0, end, d, idle):
    """(restarts, GPU-hours saved) for each way of draining one node."""
    natural = min(ends[0] + idle + LATENCY_S, end)
    out = []
    for k in range(len(ends) + 1):
        t = t0 if k == len(ends) else max(t0, ends[k] - d)
        stop = min(t + d if k else ends[0] + LATENCY_S, end)
        out.append((k, gpus * max(0.0, natural - stop) / 3600.0))
    return out


def knapsack(nodes, t0, end, d, idle, cap):
    """best[w]: the most GPU-hours saved with at most w restarts, w = 0..cap."""
    best = [0.0] * (cap + 1)
    for gpus, ends in nodes:
        choices = [c for c in options(gpus, ends, t0, end, d, idle) if c[0] <= cap]
        best = [max(best[w - k] + v for k, v in choices if k <= w) for w in range(cap + 1)]
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--cap", type=int, default=20)
    ap.add_argument("--deadlines", type=float, nargs="+", default=[0.0, 60.0])
    a = ap.parse_args()
    from vecsched.adapters.replay import load
    from vecsched.adapters.replay.simulation import DEFAULT_WINDOW
    trace = load(None, None, DEFAULT_WINDOW)
    for seed in a.seeds:
        t0, end, nodes, idle = tail_nodes(trace, seed)
        for d in a.deadlines:
            best = knapsack(nodes, t0, end, d, idle, a.cap)
            print(json.dumps({"seed": seed, "t0_s": t0, "end_s": end, "deadline_s": d,
                              "busy_gpu_nodes": len(nodes),
                              "their_gpus": sum(g for g, _ in nodes),
                              "max_single_move_gpu_h": max(
                                  (v for g, e in nodes for _, v in options(g, e, t0, end, d, idle)),
                                  default=0.0),
                              "saved_by_restarts": {w: round(best[w], 2)
                                                    for w in (0, 5, 10, 15, a.cap)}}),
                  flush=True)


if __name__ == "__main__":
    main()
