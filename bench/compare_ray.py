"""Time Ray 2.60's ResourceDemandScheduler against EngineScheduler on one request,
and check that they decide the same.

    python -m bench.compare_ray [--nodes 1000] [--requests|--units 1000] [--shapes 20]
        [--gangs|--groups 0] [--scenario saturated|fragmented] [--seed 0] [--repeat 5]
        [--ray-cap 60] [--no-ray] [--grid | --rows scale|N/U/G,...] [--json] [--profile TOP]
    python -m bench.compare_ray --mode efficient [--rows scale|1000/1000/50,...]
        [--nodes N --units U --groups G] [--repeat 5] [--eff-cap 300] [--ray-cap 60]
        [--no-ray] [--json]

One SchedulingRequest is built from the seeded generator in
bench/benchmarks/common.py (building is not timed). The engine is warmed up first
(numba compile or cache load; reported on its own). Ray runs in a forked child
process: a single ``schedule()`` call still running after --ray-cap seconds is
killed and reported as "> cap"; Ray repeats only while the next run is expected to
finish within the cap (docs/ray-semantics.md §12 protocol). Then the engine runs in
this process. Every call gets its own deep copy of the request (copying is not
timed). Times are ``time.perf_counter`` medians; beside them the engine's CPU
seconds (``time.process_time``, less moved by other jobs on a shared machine) and
the peak resident-memory growth of its calls (bench/benchmarks/peak_rss.py: the
largest rise of the process's peak above its size before a call).
``--rows scale`` runs the largest clusters (``SCALE_ROWS``: 10k / 100k / 1,000 up
to 50k / 1M / 5,000, cluster_v2); ``--no-ray`` leaves Ray's own scheduler out.

Decisions are compared as in docs/ray-semantics.md §8: launches as a multiset of
instance types, terminations as a set of (instance_id, cause), infeasible requests
as a multiset of serialized messages (plus the gang and constraint lists).
The engine runs in ray-compat mode; on this generator's inputs (no min workers, no
max_num_nodes, no unconfigured types) none of its documented crash-class fixes
(Q3, Q4, Q12, Q13) can apply, so plain Ray is the reference. Exit status 1 when any
configuration's decisions differ.

``--mode efficient`` times the opt-in efficient mode side by side with
ray-compat in one process, on ``cluster_v2`` rows nodes/units/groups (default
1k/1k/50, 1k/30k/0, 10k/100k/1,000): ``engine.schedule`` of the built Problem in
each mode (median of --repeat ticks after one untimed call, the ratio efficient /
ray-compat), Ray's own scheduler on the same request, and
``EngineScheduler(mode="efficient")`` end to end (decode, tick, encode; one
instance across calls, median of --repeat after one untimed call) next to
``EngineScheduler()``. The numba compile (or cache load) of both modes' kernels
is timed first, on a tiny tick, and reported on its own. Efficient ticks run in a
forked child capped at --eff-cap seconds per call (a tick still running is
reported as "> cap"), and so do ray-compat's, so both see the same process;
``--nodes/--units/--groups`` without ``--rows`` make one row;
the EngineScheduler calls run in this process, the efficient ones only when its
tick ended within the cap. Decisions are not compared: the efficient mode plans
differently by design (its launches are listed).
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

from bench.benchmarks import common
from bench.benchmarks.peak_rss import PeakRss, mib

GRID = [(n, k, scen) for scen in ("saturated", "fragmented")
        for n in (100, 1000, 3000) for k in (1000, 10000)]
# The largest clusters (nodes / units / placement groups, cluster_v2): ``--rows scale``.
SCALE_ROWS = ((10000, 100000, 1000), (30000, 300000, 3000), (50000, 1000000, 0),
              (50000, 100000, 1000), (50000, 1000000, 5000))


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
    runs, dec, error = _collect(parent, proc, start, cap)
    return {"runs": runs, "decisions": dec, "error": error,
            "median_s": statistics.median(runs) if runs else None}


def _collect(parent, proc, start: float, cap: float):
    """The parent's side of a capped child (``_ray_child``, ``_capped_child``): its runs'
    seconds, the first run's result and any error; the first call is capped at ``cap``,
    then the child stops itself before a run that would not end within it. The child
    is killed if it still runs."""
    runs, first, error = [], None, None
    while True:
        left = start + (cap if not runs else 2 * cap) - time.perf_counter()
        if left <= 0 or not parent.poll(left):
            break
        try:
            kind, a, b = parent.recv()
        except EOFError:
            error = error or "child exited"
            break
        if kind == "run":
            runs.append(a)
            first = first if b is None else b
        elif kind == "error":
            error = a
            break
        else:
            break
    if proc.is_alive():
        proc.kill()
    proc.join()
    return runs, first, error


# ---- the engine in this process ---------------------------------------------------------
def time_engine(req, repeat: int) -> dict:
    from vecsched.adapters.ray import EngineScheduler
    # One instance across runs, as inside the autoscaler: its first call starts
    # with empty caches (resource columns, placement groups decoded last tick).
    sched = EngineScheduler()
    runs, cpus, peaks, timing, decs = [], [], [], [], []
    for _ in range(repeat):
        r = copy.deepcopy(req)
        with PeakRss() as mem:
            c0, t0 = time.process_time(), time.perf_counter()
            reply = sched.schedule(r)
            runs.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        peaks.append(mem.growth)
        timing.append(dict(sched.last_timing))
        decs.append(decisions(reply))
        del r
    stable = all(d == decs[0] for d in decs)
    parts = {k: statistics.median(t[k] for t in timing) for k in timing[0]} if timing and timing[0] else {}
    return {"runs": runs, "median_s": statistics.median(runs), "decisions": decs[0],
            "cpu_median_s": statistics.median(cpus), "peak_growth_bytes": max(peaks),
            "peak_exact": mem.exact,
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
            engine_repeat=None, with_ray=True) -> dict:
    """One configuration: Ray ``repeat`` times (capped; not with ``with_ray``
    False), the engine ``engine_repeat`` times (default ``repeat``; its calls are
    cheap, more of them steady the median)."""
    spec = _spec(nodes, units, shapes, scenario, seed, gangs)
    req = common.scheduling_request(spec)
    ray = (time_ray(req, repeat, cap) if with_ray else
           {"runs": [], "decisions": None, "error": None, "median_s": None})
    eng = time_engine(req, engine_repeat or repeat)
    row = {"scenario": scenario, "nodes": nodes, "requests": units, "shapes": shapes,
           "gangs": gangs,
           "seed": seed, "instances": len(spec.nodes), "ray_cap_s": cap,
           "ray_median_s": ray["median_s"], "ray_runs": len(ray["runs"]),
           "ray_runs_s": ray["runs"],
           "ray_error": ray["error"],
           "engine_median_s": eng["median_s"], "engine_runs": len(eng["runs"]),
           "engine_runs_s": eng["runs"], "engine_cpu_median_s": eng["cpu_median_s"],
           "engine_peak_growth_bytes": eng["peak_growth_bytes"],
           "engine_peak_exact": eng["peak_exact"], "ray_run": with_ray,
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


# ---- --mode efficient ----------------------------------------------------------------
EFFICIENT_ROWS = ((1000, 1000, 50), (1000, 30000, 0), (10000, 100000, 1000))


def _capped_child(conn, fn, repeat: int, cap: float) -> None:
    import gc
    gc.freeze()        # the parent's objects: not scanned (nor copied on write) by the GC here
    start = time.perf_counter()
    try:
        for i in range(repeat):
            t0 = time.perf_counter()
            out = fn()
            dt = time.perf_counter() - t0
            conn.send(("run", dt, out if i == 0 else None))
            if time.perf_counter() - start + dt > cap:
                break
        conn.send(("done", None, None))
    except BaseException as e:            # report, never hang the parent
        conn.send(("error", repr(e), None))


def time_capped(fn, repeat: int, cap: float) -> dict:
    """``fn()`` ``repeat`` times in a forked child, each call capped at ``cap``
    seconds (as ``time_ray``); returns the runs, the first call's result, the
    median and any error."""
    ctx = mp.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_capped_child, args=(child, fn, repeat, cap), daemon=True)
    start = time.perf_counter()
    proc.start()
    child.close()
    runs, first, error = _collect(parent, proc, start, cap)
    return {"runs": runs, "first": first, "error": error,
            "median_s": statistics.median(runs) if runs else None}


def _scheduler_call(req, mode: str):
    """A function making one ``EngineScheduler(mode=mode).schedule`` call per
    call on one instance (each on a fresh deep copy of ``req``, copying not
    timed); returns its seconds."""
    from vecsched.adapters.ray import EngineScheduler
    sched = EngineScheduler(mode=mode)

    def call():
        r = copy.deepcopy(req)
        with PeakRss() as mem:
            t0 = time.perf_counter()
            sched.schedule(r)
            dt = time.perf_counter() - t0
        call.peaks.append(mem.growth)
        return dt
    call.peaks = []
    return call


def _capped_runs(fn, repeat: int, cap: float) -> dict:
    """``fn`` once untimed, then ``repeat`` timed calls, in a forked child where
    each call is capped at ``cap`` seconds (``time_capped``); the timed runs."""
    got = time_capped(fn, repeat + 1, cap)
    got["runs"] = got["runs"][1:]
    got["median_s"] = statistics.median(got["runs"]) if got["runs"] else None
    return got


def warm_efficient() -> dict:
    """Compile (or load from numba's cache) both modes' kernels on a tiny
    cluster_v2 tick with groups; seconds per mode."""
    import vecsched.engine as engine
    from vecsched.engine import schedule
    t0 = time.perf_counter()
    engine.warmup()
    t1 = time.perf_counter()
    tiny = common.engine_problem(common.cluster_v2(nodes=30, units=60, gangs=3))
    schedule(tiny, mode="efficient")
    return {"ray_compat_s": t1 - t0, "efficient_s": time.perf_counter() - t1}


def run_efficient(nodes, units, gangs, scenario, seed, repeat, eff_cap, ray_cap,
                  with_ray=True) -> dict:
    """One --mode efficient row (module docstring)."""
    from vecsched.engine import schedule
    spec = common.cluster_v2(nodes=nodes, units=units, scenario=scenario, seed=seed, gangs=gangs)
    p = common.engine_problem(spec)
    req = common.scheduling_request(spec)
    # Both modes alike: each in a forked child of this process, capped per call.
    runs, launched, e2e_runs, errors, peaks = {}, {}, {}, {}, {}
    for mode in ("ray-compat", "efficient"):
        got = _capped_runs(lambda mode=mode: schedule(p, mode=mode).n_launched, repeat, eff_cap)
        runs[mode], launched[mode], errors[mode] = got["runs"], got["first"], got["error"]
    # End to end in this process (a forked child's first touches of the parent's
    # heap doubled these times), and only once the efficient tick is known to end.
    for mode in ("ray-compat", "efficient"):
        errors["e2e " + mode] = None
        if not runs[mode]:
            e2e_runs[mode] = []
            errors["e2e " + mode] = errors[mode]
            continue
        call = _scheduler_call(req, mode)
        call()
        e2e_runs[mode] = [call() for _ in range(repeat)]
        peaks[mode] = max(call.peaks)
    rc, eff_runs = runs["ray-compat"], runs["efficient"]
    launched_rc, e2e_rc = launched["ray-compat"], e2e_runs["ray-compat"]
    ray = time_ray(req, repeat, ray_cap) if with_ray else None
    med = statistics.median
    row = {"scenario": scenario, "nodes": nodes, "requests": units, "gangs": gangs,
           "seed": seed, "instances": len(spec.nodes), "repeat": repeat,
           "eff_cap_s": eff_cap, "ray_cap_s": ray_cap,
           "ray_compat_runs_s": rc, "ray_compat_median_s": med(rc) if rc else None,
           "efficient_runs_s": eff_runs, "efficient_median_s": med(eff_runs) if eff_runs else None,
           "efficient_error": errors["efficient"], "errors": errors,
           "launched_ray_compat": launched_rc,
           "launched_efficient": launched["efficient"],
           "e2e_ray_compat_runs_s": e2e_rc,
           "e2e_ray_compat_median_s": med(e2e_rc) if e2e_rc else None,
           "e2e_efficient_runs_s": e2e_runs["efficient"],
           "e2e_efficient_median_s": (med(e2e_runs["efficient"]) if e2e_runs["efficient"]
                                      else None),
           "e2e_efficient_error": errors["e2e efficient"],
           "e2e_peak_growth_bytes": peaks,
           "ray_median_s": ray["median_s"] if ray else None,
           "ray_runs": len(ray["runs"]) if ray else 0, "ray_error": ray["error"] if ray else None}
    row["ratio_vs_ray_compat"] = (row["efficient_median_s"] / row["ray_compat_median_s"]
                                  if row["efficient_median_s"] and row["ray_compat_median_s"]
                                  else None)
    row["ray_over_efficient"] = (row["ray_median_s"] / row["efficient_median_s"]
                                 if row["efficient_median_s"] and row["ray_median_s"] else None)
    return row


def _ms(x) -> str:
    return "-" if x is None else f"{x * 1000:.1f}"


def efficient_table(rows: list, warm: dict) -> str:
    out = [f"numba compile / cache load on a tiny tick: ray-compat {warm['ray_compat_s']:.2f} s, "
           f"efficient {warm['efficient_s']:.2f} s (not in the rows)",
           "| nodes / units / groups | ray-compat ms | efficient ms (runs) | eff / ray-compat "
           "| Ray ms (runs) | Ray / eff | EngineScheduler e2e ms: ray-compat / efficient "
           "| e2e peak RSS growth MiB: ray-compat / efficient | launched rc / eff |",
           "|" + "---|" * 9]
    for r in rows:
        eff = _ms(r["efficient_median_s"]) if r["efficient_median_s"] is not None else \
            (f"> {r['eff_cap_s']:g} s" if not r["efficient_error"] else f"error {r['efficient_error']}")
        ratio = "-" if r["ratio_vs_ray_compat"] is None else f"{r['ratio_vs_ray_compat']:.2f}x"
        if r["ray_median_s"] is not None:
            ray = f"{_ms(r['ray_median_s'])} ({r['ray_runs']})"
        elif r["ray_error"]:
            ray = f"error {r['ray_error']}"
        else:
            ray = "not run" if r["ray_runs"] == 0 and r["ray_cap_s"] == 0 else f"> {r['ray_cap_s']:g} s"
        vs_ray = "-" if r["ray_over_efficient"] is None else f"{r['ray_over_efficient']:.1f}x"
        e2e = _ms(r["e2e_efficient_median_s"]) if r["e2e_efficient_median_s"] is not None else \
            (f"> {r['eff_cap_s']:g} s" if not r["e2e_efficient_error"]
             else f"error {r['e2e_efficient_error']}")
        pk = r["e2e_peak_growth_bytes"]
        mem = " / ".join("-" if m not in pk else f"{mib(pk[m]):.0f}"
                         for m in ("ray-compat", "efficient"))
        out.append(f"| {r['nodes']} / {r['requests']} / {r['gangs']} | "
                   f"{_ms(r['ray_compat_median_s'])} | {eff} ({len(r['efficient_runs_s'])}) | "
                   f"{ratio} | {ray} | {vs_ray} | {_ms(r['e2e_ray_compat_median_s'])} / {e2e} | "
                   f"{mem} | {r['launched_ray_compat']} / {r['launched_efficient']} |")
    return "\n".join(out)


def parse_rows(text: str, default) -> list:
    """--rows: ``scale`` (SCALE_ROWS), ``default`` or nodes/units/groups[,...]."""
    if text in ("", "default"):
        return list(default)
    if text == "scale":
        return list(SCALE_ROWS)
    try:
        rows = [tuple(int(x) for x in part.split("/")) for part in text.split(",")]
    except ValueError:
        raise SystemExit(f"--rows: expected scale or nodes/units/groups[,...], got {text!r}")
    if any(len(r) != 3 for r in rows):
        raise SystemExit(f"--rows: expected scale or nodes/units/groups[,...], got {text!r}")
    return rows


def main_efficient(a) -> int:
    if a.rows or (a.nodes, a.requests, a.gangs) == (None, None, None):
        rows_spec = parse_rows(a.rows, EFFICIENT_ROWS)
    else:                   # one row from --nodes / --units / --groups
        rows_spec = [(a.nodes or 1000, a.requests or 1000, a.gangs or 0)]
    warm = warm_efficient()
    rows = []
    for n, k, g in rows_spec:
        rows.append(run_efficient(n, k, g, a.scenario, a.seed, a.repeat, a.eff_cap,
                                  0.0 if a.no_ray else a.ray_cap, with_ray=not a.no_ray))
        if not a.json:
            print(f"  done {n}/{k}/{g}", file=sys.stderr, flush=True)
    if a.json:
        print(json.dumps({"warmup": warm, "rows": rows}, indent=1, default=str))
    else:
        print(f"--mode efficient: generator cluster_v2, {a.scenario}, seed {a.seed}, "
              f"medians of {a.repeat} ticks after one untimed tick, one process")
        print(efficient_table(rows, warm))
    return 0


# ---- output ---------------------------------------------------------------------------------
def _fmt_s(x) -> str:
    return "-" if x is None else f"{x:.4f}" if x < 10 else f"{x:.2f}"


def table(rows: list[dict]) -> str:
    head = ("| scen | nodes | requests | shapes | gangs | ray median s (runs) "
            "| engine median s (runs; first call) | ratio | equal | launched | term | infeas "
            "| engine decode / engine / encode s | engine CPU s | peak RSS growth MiB |")
    out = [head, "|" + "---|" * 15]
    for r in rows:
        if not r.get("ray_run", True):
            ray = "not run"
        elif r["ray_median_s"] is None:
            ray = f"> {r['ray_cap_s']:g} s" if not r["ray_error"] else f"error {r['ray_error']}"
        else:
            ray = f"{_fmt_s(r['ray_median_s'])} ({r['ray_runs']})"
        ratio = "-" if r["ratio"] is None else f"{r['ratio']:.1f}x"
        if (r["ratio"] is None and r["ray_median_s"] is None and not r["ray_error"]
                and r.get("ray_run", True)):
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
                   f"{eq} | {e['launched']} | {e['terminated']} | {e['infeasible']} | {parts} | "
                   f"{_fmt_s(r['engine_cpu_median_s'])} | "
                   f"{mib(r['engine_peak_growth_bytes']):.0f}{'' if r['engine_peak_exact'] else '?'} |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=None, help="nodes (default 1000)")
    ap.add_argument("--requests", "--units", dest="requests", type=int, default=None,
                    help="pending request units K (default 1000)")
    ap.add_argument("--shapes", type=int, default=20)
    ap.add_argument("--scenario", choices=common.SCENARIOS, default="saturated")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gangs", "--groups", dest="gangs", type=int, default=None,
                    help="placement groups (cluster_v2; 0, the default, keeps cluster_v1)")
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
    ap.add_argument("--mode", choices=("ray-compat", "efficient"), default="ray-compat",
                    help="efficient: the efficient mode's rows (module docstring)")
    ap.add_argument("--rows", default="",
                    help="cluster_v2 rows nodes/units/groups[,...], or scale ("
                         + ",".join("/".join(map(str, r)) for r in SCALE_ROWS)
                         + "); --mode efficient's default: "
                         + ",".join("/".join(map(str, r)) for r in EFFICIENT_ROWS))
    ap.add_argument("--eff-cap", type=float, default=300.0,
                    help="--mode efficient: seconds per efficient tick before it is cut")
    ap.add_argument("--no-ray", action="store_true",
                    help="skip timing Ray's own scheduler (decisions then not compared)")
    a = ap.parse_args(argv)
    if a.mode == "efficient":
        return main_efficient(a)
    a.nodes = 1000 if a.nodes is None else a.nodes
    a.requests = 1000 if a.requests is None else a.requests
    a.gangs = a.gangs or 0
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
    if a.rows:
        configs = [(n, k, a.shapes, a.scenario, g) for n, k, g in parse_rows(a.rows, ())]
    elif a.grid:
        configs = [(n, k, a.shapes, s, a.gangs) for n, k, s in GRID]
    else:
        configs = [(a.nodes, a.requests, a.shapes, a.scenario, a.gangs)]
    rows = []
    for n, k, s, scen, g in configs:
        rows.append(run_one(n, k, s, scen, a.seed, a.repeat, a.ray_cap, g,
                            with_ray=not a.no_ray))
        if len(configs) > 1 and not a.json:
            print(f"  done {scen} {n}/{k}/{g}", file=sys.stderr, flush=True)
    if a.json:
        print(json.dumps({"warmup_s": warm, "warmup_wall_s": warm_wall, "rows": rows},
                         indent=1, default=str))
    else:
        print(f"engine compile/warm-up: {warm:.3f} s (vecsched.engine.warmup() in this process, numba "
              f"disk cache as found), generator "
              f"{_generator(a.shapes, a.gangs or bool(a.rows))}, seed {a.seed}")
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
