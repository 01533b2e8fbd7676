"""Time Ray 2.60's ResourceDemandScheduler against EngineScheduler on one request,
and check that they decide the same.

    python bench/compare_ray.py [--nodes 1000] [--requests 1000] [--shapes 20]
        [--scenario saturated|fragmented] [--seed 0] [--repeat 5] [--ray-cap 60]
        [--grid] [--json] [--profile TOP]

One SchedulingRequest is built from the seeded generator in
bench/benchmarks/common.py (building is not timed). The engine is warmed up first
(numba compile or cache load; reported on its own). Ray runs in a forked child
process: a single ``schedule()`` call still running after --ray-cap seconds is
killed and reported as "> cap"; Ray repeats only while the next run is expected to
finish within the cap (docs/ray-semantics.md §12 protocol). Then the engine runs in
this process. Every call gets its own deep copy of the request (copying is not
timed). Times are ``time.perf_counter`` medians.

Decisions are compared as in docs/ray-semantics.md §8: launches as a multiset of
instance types, terminations as a set of (instance_id, cause), infeasible requests
as a multiset of serialized messages (plus the gang and constraint lists).
The engine runs in ray-compat mode; on this generator's inputs (no min workers, no
max_num_nodes, no unconfigured types) none of its documented crash-class fixes
(Q3, Q4, Q12, Q13) can apply, so plain Ray is the reference. Exit status 1 when any
configuration's decisions differ.
"""
from __future__ import annotations

import argparse
import copy
import json
import multiprocessing as mp
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "benchmarks"))
import common  # noqa: E402  (also puts the repo root on sys.path)

GRID = [(n, k, scen) for scen in ("saturated", "fragmented")
        for n in (100, 1000, 3000) for k in (1000, 10000)]


# ---- decisions ------------------------------------------------------------------------
def decisions(reply) -> dict:
    """The decision content of a SchedulingReply (ids, timestamps, details dropped)."""
    launch = Counter()
    for lr in reply.to_launch:
        launch[lr.instance_type] += lr.count
    return {
        "launch": dict(sorted(launch.items())),
        "terminate": sorted((t.instance_id, int(t.cause)) for t in reply.to_terminate),
        "infeasible": Counter(r.SerializeToString(deterministic=True)
                              for r in reply.infeasible_resource_requests),
        "infeasible_gang": Counter(g.SerializeToString(deterministic=True)
                                   for g in reply.infeasible_gang_resource_requests),
        "infeasible_constraints": len(reply.infeasible_cluster_resource_constraints),
    }


def _show(key, value) -> str:
    """Readable form of a multiset of serialized messages (bundles for requests)."""
    from ray.core.generated.autoscaler_pb2 import GangResourceRequest, ResourceRequest
    out = {}
    for blob, k in value.items():
        if key == "infeasible":
            m = ResourceRequest()
            m.ParseFromString(blob)
            name = json.dumps(dict(sorted(m.resources_bundle.items())))
        else:
            m = GangResourceRequest()
            m.ParseFromString(blob)
            name = json.dumps([dict(sorted(r.resources_bundle.items())) for r in m.requests])
        out[name] = k
    return json.dumps(out, sort_keys=True)


def diff(ray: dict, eng: dict) -> list[str]:
    out = []
    for k in ray:
        if ray[k] == eng[k]:
            continue
        if k == "terminate":
            a, b = set(map(tuple, ray[k])), set(map(tuple, eng[k]))
            out.append(f"terminate: only ray {sorted(a - b)}; only engine {sorted(b - a)}")
        elif k in ("infeasible", "infeasible_gang"):
            out.append(f"{k}: ray-engine {_show(k, ray[k] - eng[k])}; "
                       f"engine-ray {_show(k, eng[k] - ray[k])}")
        else:
            out.append(f"{k}: ray={ray[k]} engine={eng[k]}")
    return out


def summary(d: dict) -> dict:
    return {"launched": sum(d["launch"].values()), "terminated": len(d["terminate"]),
            "infeasible": sum(d["infeasible"].values()), "launch": d["launch"]}


# ---- Ray in a forked child -------------------------------------------------------------
def _ray_child(conn, req, repeat: int, cap: float) -> None:
    from ray.autoscaler.v2.scheduler import ResourceDemandScheduler
    start = time.perf_counter()
    try:
        for i in range(repeat):
            r = copy.deepcopy(req)
            t0 = time.perf_counter()
            reply = ResourceDemandScheduler().schedule(r)
            dt = time.perf_counter() - t0
            conn.send(("run", dt, decisions(reply) if i == 0 else None))
            if time.perf_counter() - start + dt > cap:
                break                     # the next run would not end within the cap
        conn.send(("done", None, None))
    except BaseException as e:            # report, never hang the parent
        conn.send(("error", repr(e), None))


def time_ray(req, repeat: int, cap: float) -> dict:
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_ray_child, args=(child, req, repeat, cap), daemon=True)
    start = time.perf_counter()
    proc.start()
    child.close()
    runs, dec, error = [], None, None
    while True:
        budget = cap if not runs else 2 * cap      # first call capped; then the child self-limits
        left = start + budget - time.perf_counter()
        if left <= 0 or not parent.poll(left):
            break
        try:
            kind, a, b = parent.recv()
        except EOFError:
            error = error or "child exited"
            break
        if kind == "run":
            runs.append(a)
            dec = dec if b is None else b
        elif kind == "error":
            error = a
            break
        else:
            break
    if proc.is_alive():
        proc.kill()
    proc.join()
    return {"runs": runs, "decisions": dec, "error": error,
            "median_s": statistics.median(runs) if runs else None}


# ---- the engine in this process ---------------------------------------------------------
def time_engine(req, repeat: int) -> dict:
    from vecsched.adapters.ray import EngineScheduler
    # One instance across runs, as inside the autoscaler: its first call starts
    # with empty caches (resource columns, placement groups decoded last tick).
    sched = EngineScheduler()
    runs, timing, decs = [], [], []
    for _ in range(repeat):
        r = copy.deepcopy(req)
        t0 = time.perf_counter()
        reply = sched.schedule(r)
        runs.append(time.perf_counter() - t0)
        timing.append(dict(sched.last_timing))
        decs.append(decisions(reply))
    stable = all(d == decs[0] for d in decs)
    parts = {k: statistics.median(t[k] for t in timing) for k in timing[0]} if timing and timing[0] else {}
    return {"runs": runs, "median_s": statistics.median(runs), "decisions": decs[0],
            "deterministic": stable, "timing": parts, "stats": dict(sched.stats)}


def _generator(shapes, gangs) -> str:
    return "cluster_pr64175" if shapes == 0 else "cluster_v2" if gangs else "cluster_v1"


def _spec(nodes, units, shapes, scenario, seed, gangs):
    if shapes == 0:            # --pr64175: every request the same 2-CPU task
        return common.cluster_pr64175(nodes=nodes, units=units, scenario=scenario, seed=seed)
    if gangs:
        return common.cluster_v2(nodes=nodes, units=units, shapes=shapes, scenario=scenario,
                                 seed=seed, gangs=gangs)
    return common.cluster_v1(nodes=nodes, units=units, shapes=shapes, scenario=scenario,
                             seed=seed)


def run_one(nodes, units, shapes, scenario, seed, repeat, cap, gangs=0,
            engine_repeat=None) -> dict:
    """One configuration: Ray ``repeat`` times (capped), the engine ``engine_repeat``
    times (default ``repeat``; its calls are cheap, more of them steady the median)."""
    spec = _spec(nodes, units, shapes, scenario, seed, gangs)
    req = common.scheduling_request(spec)
    ray = time_ray(req, repeat, cap)
    eng = time_engine(req, engine_repeat or repeat)
    row = {"scenario": scenario, "nodes": nodes, "requests": units, "shapes": shapes,
           "gangs": gangs,
           "seed": seed, "instances": len(spec.nodes), "ray_cap_s": cap,
           "ray_median_s": ray["median_s"], "ray_runs": len(ray["runs"]),
           "ray_runs_s": ray["runs"],
           "ray_error": ray["error"],
           "engine_median_s": eng["median_s"], "engine_runs": len(eng["runs"]),
           "engine_runs_s": eng["runs"],
           "engine_timing": eng["timing"], "engine_deterministic": eng["deterministic"],
           "engine_stats": eng["stats"], "engine": summary(eng["decisions"])}
    if ray["median_s"] is not None:
        row["ratio"] = ray["median_s"] / eng["median_s"]
        problems = diff(ray["decisions"], eng["decisions"])
        row["decisions_equal"] = not problems
        row["diff"] = problems
        row["ray"] = summary(ray["decisions"])
    else:
        row["ratio"] = None
        row["decisions_equal"] = None          # unknown: Ray did not finish
        row["diff"] = []
    return row


def profile(nodes, units, shapes, scenario, seed, top, calls, gangs=0) -> int:
    import cProfile
    import pstats

    import vecsched.engine as engine
    from vecsched.adapters.ray import EngineScheduler
    engine.warmup()
    req = common.scheduling_request(_spec(nodes, units, shapes, scenario, seed, gangs))
    sched = EngineScheduler()
    sched.schedule(copy.deepcopy(req))            # steady state: vocab known, kernels loaded
    prof = cProfile.Profile()
    walls, timing = [], []
    for _ in range(calls):
        r = copy.deepcopy(req)
        t0 = time.perf_counter()
        prof.enable()
        sched.schedule(r)
        prof.disable()
        walls.append(time.perf_counter() - t0)
        timing.append(sched.last_timing)
    parts = {k: round(statistics.median(t[k] for t in timing), 4) for k in timing[0]}
    print(f"cProfile of {calls} EngineScheduler.schedule calls (after one unprofiled call), "
          f"{scenario} {nodes} nodes / {units} units / {shapes} shapes, seed {seed}: "
          f"median {statistics.median(walls):.4f} s per call under the profiler; "
          f"median last_timing {parts}")
    pstats.Stats(prof, stream=sys.stdout).strip_dirs().sort_stats("cumulative").print_stats(top)
    return 0


# ---- output ---------------------------------------------------------------------------------
def _fmt_s(x) -> str:
    return "-" if x is None else f"{x:.4f}" if x < 10 else f"{x:.2f}"


def table(rows: list[dict]) -> str:
    head = ("| scen | nodes | requests | shapes | gangs | ray median s (runs) "
            "| engine median s (runs; first call) | ratio | equal | launched | term | infeas "
            "| engine decode / engine / encode s |")
    out = [head, "|" + "---|" * 13]
    for r in rows:
        if r["ray_median_s"] is None:
            ray = f"> {r['ray_cap_s']:g} s" if not r["ray_error"] else f"error {r['ray_error']}"
        else:
            ray = f"{_fmt_s(r['ray_median_s'])} ({r['ray_runs']})"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.1f}x"
        if r["ratio"] is None and r["ray_median_s"] is None and not r["ray_error"]:
            ratio = f"> {r['ray_cap_s'] / r['engine_median_s']:.0f}x"
        eq = {True: "yes", False: "NO", None: "n/a"}[r["decisions_equal"]]
        if not r["engine_deterministic"]:
            eq += " (engine nondeterministic!)"
        e = r["engine"]
        tm = r["engine_timing"]
        parts = " / ".join(_fmt_s(tm.get(k)) for k in ("decode_s", "engine_s", "encode_s"))
        out.append(f"| {r['scenario'][:4]} | {r['nodes']} | {r['requests']} | {r['shapes']} | "
                   f"{r.get('gangs', 0)} | "
                   f"{ray} | {_fmt_s(r['engine_median_s'])} ({r['engine_runs']}; "
                   f"{_fmt_s(r['engine_runs_s'][0])}) | {ratio} | "
                   f"{eq} | {e['launched']} | {e['terminated']} | {e['infeasible']} | {parts} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=1000, help="pending request units K")
    ap.add_argument("--shapes", type=int, default=20)
    ap.add_argument("--scenario", choices=common.SCENARIOS, default="saturated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gangs", type=int, default=0,
                    help="placement groups (cluster_v2; 0 keeps cluster_v1)")
    ap.add_argument("--pr64175", action="store_true",
                    help="ray-project/ray PR #64175's round: 1,337 nodes, 13,315 pending "
                         "{CPU: 2} tasks (cluster_pr64175; --nodes/--requests change it)")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--ray-cap", type=float, default=60.0, help="seconds per Ray call")
    ap.add_argument("--grid", action="store_true",
                    help="nodes 100/1000/3000 x requests 1000/10000 x both scenarios")
    ap.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    ap.add_argument("--profile", type=int, metavar="TOP", default=0,
                    help="skip Ray; cProfile --repeat EngineScheduler.schedule calls (after "
                         "one unprofiled call) and print the TOP functions by cumulative time")
    a = ap.parse_args(argv)
    if a.pr64175:
        a.shapes = 0                       # _spec's marker for cluster_pr64175
        a.nodes = 1337 if a.nodes == 1000 else a.nodes
        a.requests = 13315 if a.requests == 1000 else a.requests
    if a.profile:
        return profile(a.nodes, a.requests, a.shapes, a.scenario, a.seed, a.profile, a.repeat,
                       a.gangs)

    import vecsched.engine as engine
    t0 = time.perf_counter()
    warm = engine.warmup()
    warm_wall = time.perf_counter() - t0
    configs = ([(n, k, a.shapes, s) for n, k, s in GRID] if a.grid
               else [(a.nodes, a.requests, a.shapes, a.scenario)])
    rows = []
    for n, k, s, scen in configs:
        rows.append(run_one(n, k, s, scen, a.seed, a.repeat, a.ray_cap, a.gangs))
        if a.grid and not a.json:
            print(f"  done {scen} {n}/{k}", file=sys.stderr, flush=True)
    if a.json:
        print(json.dumps({"warmup_s": warm, "warmup_wall_s": warm_wall, "rows": rows},
                         indent=1, default=str))
    else:
        print(f"engine compile/warm-up: {warm:.3f} s (vecsched.engine.warmup() in this process, numba "
              f"disk cache as found), generator {_generator(a.shapes, a.gangs)}, "
              f"seed {a.seed}")
        print(table(rows))
        for r in rows:
            for line in r["diff"]:
                print(f"DIFF {r['scenario']} {r['nodes']}/{r['requests']}/{r['shapes']} "
                      f"seed {r['seed']}: {line}")
            if r["ray_error"]:
                print(f"RAY ERROR {r['scenario']} {r['nodes']}/{r['requests']}: {r['ray_error']}")
            if r["engine_stats"].get("delegated_ticks"):
                print(f"WARNING: EngineScheduler delegated to Ray: {r['engine_stats']}")
    return 1 if any(r["decisions_equal"] is False or not r["engine_deterministic"]
                    for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
