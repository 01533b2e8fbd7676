"""`vecsched demo` and `vecsched replay`: their arguments, their run, their report.

``adapters/cli/main.py`` registers the two subcommands with ``add_demo_arguments`` /
``add_replay_arguments`` and dispatches to ``run_demo`` / ``run_replay``. The report
(rich tables, PNG plots) needs the ``cli`` extra; the replay itself does not.
``summary()`` is what ``summary.json`` holds: one key per scheduler under
``schedulers``, ``check_ray``, and room for more (``extra``).
"""
from __future__ import annotations

import argparse
import json
import time
from dataclasses import asdict

from . import argtypes
from .errors import UsageError, check_output_dir
from .data_terms import terms_lines
from .status import step
from .warmup import warm_with_spinner

METRICS_HELP = """\
metrics (adapters/replay/metrics.py defines each; the identities are checked every replay):
  pending time         arrival (or requeue) to placement; units still pending count their
                       wait so far
  node-hours           cloud instance allocated (ALLOCATED) to TERMINATED, boot included,
                       head included; GPU-hours = node-hours x GPUs
  cost                 node-hours x the worker group's price per node-hour (only when a
                       group has a price; the head is not priced)
  instances decided    records the scheduler's launches created (QUEUED)
  requested            launch calls the simulated cloud received (retries included)
  allocated / failed   what the cloud answered: instances allocated / calls that errored
  running              instances whose ray node joined
  never launched       records that never left QUEUED (cancelled, or queued at the end)
                       requested = allocated + failed (+ lost, orphaned, in flight);
                       decided = launched + never launched
  running / allocated  per tick, peak / mean (and the plots): ray node up / cloud instance
                       billed, head included
  launches held back   ticks whose QUEUED -> REQUESTED step left records queued because of
                       --max-launches or --upscaling-speed; a warning names the knob when
                       that happened in >= {share:.0%} of the ticks with instances to launch
                       (and >= {ticks} ticks)
"""


def _console():
    from rich.console import Console          # the cli extra: main.py checked it is there
    return Console(width=max(Console().width, 120))


# ---- demo --------------------------------------------------------------------------------
def add_demo_arguments(d: argparse.ArgumentParser) -> None:
    d.add_argument("--trace", default="openb", help="bundled trace (openb, openb_gpuspec33)")
    d.add_argument("--nodes", type=argtypes.positive_int, default=400, help="running nodes")
    d.add_argument("--pending", type=argtypes.positive_int, default=2000,
                   help="pending pods")
    d.add_argument("--seed", type=argtypes.count, default=0)
    d.add_argument("--repeat", type=argtypes.positive_int, default=3,
                   help="decide the tick this many times, report the median time (3)")
    d.add_argument("--no-ray", action="store_true", help="skip Ray's scheduler")


def check_demo_args(args) -> None:
    """Refuse a bad demo request before any work (the numbers are checked by their
    argparse types)."""
    from vecsched.adapters.traces import TRACES
    if args.trace not in TRACES:
        raise UsageError(f"--trace {args.trace}: unknown bundled trace; choose from "
                         f"{', '.join(TRACES)}")


def run_demo(args) -> int:
    check_demo_args(args)
    from rich.table import Table

    from vecsched.adapters.replay.demo_tick import demo_tick, run_demo as decide

    console = _console()
    with step(console, f"loading the {args.trace} trace and building the tick"):
        tick = demo_tick(seed=args.seed, n_running=args.nodes, n_pending=args.pending,
                         trace=args.trace)
    console.print(f"[bold]One tick[/bold] - {tick.description}")
    warm = warm_with_spinner(console)
    with_ray = not args.no_ray
    if with_ray and not _have_ray():
        console.print("[yellow]ray is not installed: deciding without Ray's scheduler "
                      "(pip install 'vecsched[ray]')[/yellow]")
        with_ray = False
    who = "the engine, the baseline" + (" and Ray 2.60's scheduler (the slow one)"
                                        if with_ray else "")
    with step(console, f"deciding the tick {args.repeat} time(s) with {who}"):
        res = decide(tick, repeat=args.repeat, with_ray=with_ray)
    rows = res["rows"]
    table = Table(title="Decisions side by side (median time per tick)")
    for col in ("scheduler", "time", "nodes launched", "GPU nodes", "terminated",
                "infeasible units"):
        table.add_column(col, justify="right" if col != "scheduler" else "left")
    for name, r in rows.items():
        table.add_row(name, f"{r['seconds'] * 1000:.1f} ms", str(r["nodes"]),
                      str(r["gpu_nodes"]), str(r["terminate"]), str(r["infeasible"]))
    console.print(table)
    by_type = Table(title="Nodes launched by worker group")
    by_type.add_column("worker group")
    for name in rows:
        by_type.add_column(name, justify="right")
    kinds = sorted({k for r in rows.values() for k in r["launch"]},
                   key=lambda k: -max(r["launch"].get(k, 0) for r in rows.values()))
    for k in kinds:
        by_type.add_row(k, *(str(r["launch"].get(k, 0)) for r in rows.values()))
    console.print(by_type)
    console.print(f"engine kernel warm-up ({'JIT compile' if warm['compiled'] else 'cache load'})"
                  f": {warm['seconds']:.2f} s")
    if "same_as_ray" in res:
        verdict = "[green]identical[/green]" if res["same_as_ray"] else "[red]DIFFERENT[/red]"
        console.print(f"engine vs Ray 2.60 decisions: {verdict}; "
                      f"Ray / EngineScheduler time: {res['ratio']:.0f}x")
        return 0 if res["same_as_ray"] else 1
    return 0


def _have_ray() -> bool:
    try:
        import ray.autoscaler.v2.scheduler  # noqa: F401
    except ImportError:
        return False
    return True


# ---- replay ------------------------------------------------------------------------------
def _add_cloud_arguments(r: argparse.ArgumentParser) -> None:
    """``--capacity`` and ``--limit``: when the cloud, or the user, says no."""
    r.add_argument("--capacity", action="append", default=[], metavar="GROUP=N",
                   help="the simulated cloud gives worker group GROUP at most N live "
                        "instances (a launch beyond is a stock-out); GROUP=TIME:N,TIME:N "
                        "changes it over time (none: unlimited). Repeatable; over the "
                        "worker table's capacity column (docs/capacity.md)")
    r.add_argument("--limit", dest="limits", action="append", default=[],
                   metavar="RESOURCE=N",
                   help="never ask for more than N of RESOURCE in total (CPU, GPU, memory, "
                        "any custom one; cost_per_hour from the groups' prices), counting "
                        "every instance from QUEUED to running; GROUP/RESOURCE=N for one "
                        "group. Repeatable; Ray's own scheduler has no limits "
                        "(docs/capacity.md)")


def add_replay_arguments(r: argparse.ArgumentParser) -> None:
    r.add_argument("trace", nargs="?", default=None,
                   help="bundled trace (openb, openb_gpuspec33) or a demand Parquet file "
                        "(default: openb)")
    r.add_argument("--groups", default=None,
                   help="worker groups: bundled name (openb_nodes, pai2020_nodes, "
                        "spot2026_nodes) or a Parquet file (default: the trace's)")
    r.add_argument("--scheduler", default=None,
                   help="comma-separated: engine,baseline,ray,efficient,efficient-proxy,"
                        "efficient-consolidate (default: "
                        "engine,baseline,ray)")
    r.add_argument("--out", default="replay-out", help="directory for the plots and "
                                                      "summary.json (default: replay-out)")
    r.add_argument("--from", dest="t_from", default=None, metavar="TIME",
                   help="window by time: replay the arrivals from TIME on (trace seconds, or "
                        "with a unit: 90s, 30m, 2h, 12d); the pods alive then run from t = 0 "
                        "(see --warm-start)")
    r.add_argument("--to", dest="t_to", default=None, metavar="TIME",
                   help="window by time: up to TIME (exclusive; default: the trace's end)")
    r.add_argument("--duration", default=None, metavar="TIME",
                   help="window by time: TIME long (from --from, or up to --to, or from the "
                        "trace's first arrival)")
    r.add_argument("--warm-start", action=argparse.BooleanOptionalAction, default=None,
                   help="run the pods alive at the window's start from t = 0 on nodes the "
                        "scheduler under test launches for them (default: on for a window "
                        "by time, off for a window by rows)")
    r.add_argument("--pods", type=int, default=None,
                   help="window by rows: how many pods (trace rows) to replay (the bundled "
                        "demo: 2000)")
    r.add_argument("--start", type=int, default=None,
                   help="window by rows: first trace row (default: the last --pods rows)")
    r.add_argument("--compress", type=float, default=1.0,
                   help="divide inter-arrival times and durations by F (default 1)")
    r.add_argument("--arrival-scale", type=float, default=None,
                   help="divide inter-arrival times only by K: K times the load (default 1, "
                        "the recorded rate; 200 only for the bundled demo: a bundled trace "
                        "without --from/--to/--duration)")
    r.add_argument("--gangs", type=float, default=0.0, metavar="SHARE",
                   help="gang overlay: group about SHARE of the pods (e.g. 0.2) into "
                        "placement groups of 2-8 bundles, strategies PACK / SPREAD / "
                        "STRICT_PACK / STRICT_SPREAD, seeded by --seed (default 0: none; "
                        "see adapters/replay/placement_groups.py)")
    r.add_argument("--seed", type=int, default=0,
                   help="seed of the simulated cloud and the gang overlay")
    r.add_argument("--check-ray", action=argparse.BooleanOptionalAction, default=None,
                   help="also run Ray's scheduler on the engine's every tick and count the "
                        "ticks whose decisions differ (default: on when ray is installed)")
    r.add_argument("--idle-timeout", type=float, default=60.0, help="idle_timeout_s (60)")
    r.add_argument("--pending-idle-timeout", type=float, default=None,
                   help="Ray's pending-node idle tracking timeout in seconds (default: off, "
                        "as Ray's)")
    r.add_argument("--tail", type=float, default=600.0,
                   help="simulated seconds replayed after the last arrival (600)")
    r.add_argument("--max-launches", type=int, default=10,
                   help="max_concurrent_launches (Ray's default 10)")
    r.add_argument("--upscaling-speed", type=float, default=1000.0,
                   help="upscaling_speed (1000 = KubeRay's Default mode; Ray v2's own is 0)")
    r.add_argument("--preemption-rate", type=float, default=0.0,
                   help="preemptions per running-node hour in the simulated cloud (0)")
    r.add_argument("--launch-failure-rate", type=float, default=0.0,
                   help="probability a launch call fails in the simulated cloud (0)")
    _add_cloud_arguments(r)
    r.add_argument("--cross-check", action="store_true",
                   help="on every tick with pending placement groups, solve them with CP-SAT "
                        "(untimed, off the tick path) and write each scheduler's gap to "
                        "the optimum to summary.json (needs the solver extra; "
                        "adapters/replay/cross_check.py)")
    r.add_argument("--progress-every", type=float, default=10.0, metavar="SECONDS",
                   help="without a terminal (output to a file or a pipe): a progress line "
                        "at least every SECONDS, and at every tenth of the ticks (10)")
    from vecsched.adapters.replay.metrics import HELD_MIN_TICKS, HELD_SHARE
    r.formatter_class = argparse.RawDescriptionHelpFormatter
    r.epilog = METRICS_HELP.format(share=HELD_SHARE, ticks=HELD_MIN_TICKS)


# A trace file replayed with no window given: its last 6 hours of arrivals, with the
# work alive before them as a warm start (a whole trace of weeks at 5 s ticks would take
# hours); the header says so.
DEFAULT_LAST_S = 6 * 3600.0


def replay_window(args, demo):
    """The replay's ``Window`` from the command line: by time (--from / --to /
    --duration) or by rows (--start / --pods). The arrival scale is 1 (the recorded
    rate) unless --arrival-scale is given, except for the bundled demo: a bundled trace
    replayed by rows, whose default is ``demo``'s window and scale (200x), stated in the
    header with how to turn it off. A trace file with no window: its last
    ``DEFAULT_LAST_S`` of arrivals (the whole trace if it is shorter), stated."""
    from vecsched.adapters.replay.window import Window, parse_seconds
    from vecsched.adapters.traces import BUNDLED, TRACES
    t_from = None if args.t_from is None else parse_seconds(args.t_from, "--from")
    t_to = None if args.t_to is None else parse_seconds(args.t_to, "--to")
    if args.duration is not None:
        span = parse_seconds(args.duration, "--duration")
        if span <= 0:
            raise ValueError(f"--duration must be > 0, got {args.duration!r}")
        if t_from is not None and t_to is not None:
            raise ValueError("--duration: give two of --from, --to and --duration")
        if t_to is not None:
            t_from = max(0.0, t_to - span)
        else:
            t_from = 0.0 if t_from is None else t_from
            t_to = t_from + span
    by_time = t_from is not None or t_to is not None
    by_rows = args.pods is not None or args.start is not None
    if by_time and by_rows:
        raise ValueError("--from/--to/--duration (a window by time) and --start/--pods (a "
                         "window by rows) exclude each other")
    bundled = args.trace is None or args.trace in TRACES or args.trace in BUNDLED
    scale, note = args.arrival_scale, ""
    if not by_time and bundled:                  # the bundled demo: a row window, x200
        if scale is None:
            scale, note = demo.arrival_scale, ("the bundled demo's default; --arrival-scale 1 "
                                               "for the recorded rate")
        start = args.start if args.start is not None else (demo.start if args.pods is None
                                                           else None)
        return Window(start=start, pods=args.pods if args.pods is not None else demo.pods,
                      compress=args.compress, arrival_scale=scale,
                      warm_start=args.warm_start, note=note)
    if scale is None:
        scale = 1.0
    if by_time:
        return Window(start=0, compress=args.compress, arrival_scale=scale,
                      t_from=t_from, t_to=t_to, warm_start=args.warm_start)
    if not by_rows:                              # a trace file, no window: its last hours
        return Window(start=0, compress=args.compress, arrival_scale=scale,
                      last_s=DEFAULT_LAST_S, warm_start=args.warm_start)
    return Window(start=args.start, pods=args.pods, compress=args.compress,
                  arrival_scale=scale, warm_start=args.warm_start)


def summary(trace, config, results, *, compile_s: float, wall_s: float,
            extra: dict | None = None) -> dict:
    """What ``summary.json`` holds: the trace and its scaling, the config, one metrics
    dict per scheduler (``schedulers.<name>``, same keys for every scheduler), the Ray
    check, and any ``extra`` top-level keys."""
    from vecsched.adapters.replay.bounds import common_bounds
    from vecsched.adapters.replay.metrics import DEFINITIONS
    common_bounds([r.metrics for r in results])   # the least of the runs': valid for all
    out = {"trace": trace.name, "scaling": trace.scaling, "load": trace.load_info,
           "warnings": trace.warnings,
           "placement_groups": trace.gangs.describe(), "caps": trace.caps,
           "config": asdict(config),
           "price_source": trace.price_source, "definitions": list(DEFINITIONS),
           "compile_s": compile_s, "wall_s": wall_s,
           "schedulers": {r.scheduler: r.metrics for r in results},
           "check_ray": next((r.check for r in results if r.check), None)}
    out.update(extra or {})
    return out


# (option, whether its value is acceptable, what it must be); None values are defaults
_REPLAY_LIMITS = (
    ("pods", lambda v: v >= 1, ">= 1"), ("start", lambda v: v >= 0, ">= 0"),
    ("compress", lambda v: v > 0, "> 0"), ("arrival_scale", lambda v: v > 0, "> 0"),
    ("gangs", lambda v: 0 <= v <= 1, "between 0 and 1"), ("seed", lambda v: v >= 0, ">= 0"),
    ("idle_timeout", lambda v: v >= 0, ">= 0"), ("pending_idle_timeout", lambda v: v >= 0, ">= 0"),
    ("tail", lambda v: v >= 0, ">= 0"), ("max_launches", lambda v: v >= 1, ">= 1"),
    ("upscaling_speed", lambda v: v >= 0, ">= 0"), ("preemption_rate", lambda v: v >= 0, ">= 0"),
    ("launch_failure_rate", lambda v: 0 <= v <= 1, "between 0 and 1"),
    ("progress_every", lambda v: v > 0, "> 0"),
)


def check_replay_args(args, known: list) -> tuple[list, bool]:
    """Refuse a bad replay request before any work: each number in its range (NaN
    refused), schedulers by name, Ray when a scheduler needs it, the trace and
    worker-group names or files, and an ``--out`` that can be written. Returns the
    schedulers to run and whether to check the engine against Ray."""
    import math
    from pathlib import Path

    from vecsched.adapters.traces import TRACES, WORKER_GROUP_SETS

    for attr, ok, must in _REPLAY_LIMITS:
        v = getattr(args, attr, None)
        if v is not None and (not ok(v) or (isinstance(v, float) and math.isnan(v))):
            raise UsageError(f"--{attr.replace('_', '-')} must be {must}, got {v}")
    default = [n for n in known if n in ("engine", "baseline", "ray")]
    names = [n.strip() for n in (args.scheduler or ",".join(default)).split(",") if n.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise UsageError(f"--scheduler: unknown {', '.join(bad) or '(empty)'}; "
                         f"choose from {', '.join(known)}")
    for value, option, names_ok in ((args.trace, "trace", TRACES),
                                    (args.groups, "--groups", WORKER_GROUP_SETS)):
        if value is not None and value not in names_ok and not Path(value).is_file():
            raise UsageError(f"{option} {value}: neither a bundled name "
                             f"({', '.join(names_ok)}) nor an existing file")
    have_ray = _have_ray()
    if not have_ray and ([n for n in names if n != "baseline"] or args.check_ray):
        if args.scheduler is None and args.check_ray is None:
            names = ["baseline"]
        else:
            raise UsageError("ray is not installed (pip install 'vecsched[ray]'); without "
                             "it only --scheduler baseline runs")
    check = ("engine" in names and have_ray) if args.check_ray is None else args.check_ray
    if check and "engine" not in names:
        raise UsageError("--check-ray checks the engine: add engine to --scheduler")
    check_output_dir(args.out, "--out")
    return names, check


def run_replay(args) -> int:
    """Run ``vecsched replay``: load the trace, replay it under each scheduler asked for,
    print the report, write the plots and ``summary.json``; exit code 1 when
    ``--check-ray`` found a differing tick."""
    from vecsched.adapters.replay.registry import SCHEDULERS, make
    from vecsched.adapters.replay.simulation import Replay

    t_start = time.perf_counter()
    names, check = check_replay_args(args, list(SCHEDULERS))
    console = _console()
    if args.scheduler is None and names == ["baseline"]:
        console.print("[yellow]ray is not installed: replaying the baseline only (the "
                      "engine runs through Ray's protobuf interface; pip install "
                      "'vecsched[ray]')[/yellow]")
    config, trace = _load_replay(args)
    _refuse_unplaceable(trace, args)
    _print_trace(console, args, trace)
    compile_s = warm_with_spinner(console)["seconds"]
    from vecsched.adapters.replay.cross_check import for_command
    checker = for_command(args.cross_check, make)
    results = _run_all(console, names, check, trace, config,
                       checker.make if checker else make, Replay, args.progress_every)
    _print_results(console, results, checker)
    from vecsched.adapters.replay.plots import write_plots
    paths = write_plots(results, args.out)
    wall = time.perf_counter() - t_start
    doc = summary(trace, config, results, compile_s=compile_s, wall_s=wall,
                  extra={"cross_check": checker.summary()} if checker else None)
    (paths[0].parent / "summary.json").write_text(json.dumps(doc, indent=2, default=float))
    console.print("plots: " + ", ".join(str(p) for p in paths) + f"; metrics: "
                  f"{paths[0].parent / 'summary.json'}")
    code = _print_verdicts(console, results)
    per = ", ".join(f"{r.scheduler} {r.metrics['wall_s']:.1f} s" for r in results)
    console.print(f"wall time: {wall:.1f} s in all ({per}; engine warm-up {compile_s:.2f} s; "
                  f"imports, loading and plots the rest)")
    return code


def _load_replay(args):
    """(replay config, loaded trace) from the arguments; a trace, window or config the
    replay refuses becomes a ``UsageError`` with the reason."""
    from vecsched.engine.model.problem import ProblemError

    from vecsched.adapters.traces import TraceError
    from vecsched.adapters.replay.placement_groups import GangOverlay
    from vecsched.adapters.replay.simulation import DEFAULT_WINDOW, ReplayConfig, load
    try:
        window = replay_window(args, DEFAULT_WINDOW)
        config = ReplayConfig(seed=args.seed, idle_timeout_s=args.idle_timeout,
                              tail_s=args.tail, max_concurrent_launches=args.max_launches,
                              upscaling_speed=args.upscaling_speed,
                              preemption_rate_per_h=args.preemption_rate,
                              capacity=_capacity_flags(args.capacity),
                              limits=_limit_flags(args.limits),
                              launch_failure_rate=args.launch_failure_rate,
                              pending_idle_timeout_s=args.pending_idle_timeout)
        trace = load(args.trace, args.groups, window, GangOverlay(args.gangs, seed=args.seed))
        from vecsched.adapters.replay.capacity import check_groups
        check_groups(config, trace)
    except (TraceError, ProblemError) as e:
        raise UsageError(str(e)) from None
    except (ValueError, KeyError) as e:      # a window or config value the replay refuses
        raise UsageError(str(e.args[0]) if e.args else type(e).__name__) from None
    return config, trace


def _refuse_unplaceable(trace, args) -> None:
    """A window of which no worker group can hold a single unit is an error saying why
    (a resource no group has, or too large), not a replay that places nothing."""
    import numpy as np

    from vecsched.adapters.traces.fit import gaps
    counts = np.bincount(trace.unit_shape, minlength=len(trace.shapes))
    g = gaps(trace.shapes, counts, [dict(t.resources) for t in trace.types])
    if g.all_unplaceable:
        from vecsched.adapters.traces import BUNDLED
        groups = (f"--groups {args.groups}" if args.groups else "the trace's worker groups"
                  if args.trace is None or args.trace in BUNDLED else
                  "the bundled openb worker groups (a trace file's default)")
        raise UsageError(f"{groups} cannot hold any of the {g.units} units to replay: "
                         f"{g.describe()}. Give worker groups that can (--groups FILE; "
                         f"vecsched trace import NODES.csv --map MAP.toml --kind groups "
                         f"--out DIR makes DIR/groups.parquet)")


def _capacity_flags(items: list):
    """``--capacity GROUP=N`` flags as ``ReplayConfig.capacity`` (None: none given)."""
    from vecsched.adapters.replay.capacity import parse_capacity
    out = {}
    for text in items:
        group, spec = parse_capacity(text)               # ValueError names the flag
        out[group] = spec.capacity if not spec.schedule else text.partition("=")[2].strip()
    return out or None


def _limit_flags(items: list):
    """``--limit RESOURCE=N`` flags as ``ReplayConfig.limits`` (None: none given)."""
    from vecsched.adapters.replay.capacity import parse_limit
    out = {}
    for text in items:
        group, res, v = parse_limit(text)
        out[res if group is None else f"{group}/{res}"] = v
    return out or None


def _print_trace(console, args, trace) -> None:
    """What is about to be replayed: the trace, its terms, the load, its placement
    groups, caps and warnings."""
    console.print(f"[bold]Replay[/bold] {trace.name}: {trace.n_units} units in "
                  f"{len(trace.shapes)} shapes, {len(trace.types) - 1} worker groups + head")
    for line in terms_lines(args.trace, args.groups):
        console.print(line, style="dim", highlight=False)
    console.print(f"load replayed: {trace.scaling}")
    if trace.gangs.G:
        console.print(f"placement groups: {trace.gangs.describe()}")
    if trace.caps:
        console.print(trace.caps)
    for w in trace.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")


def _print_results(console, results, checker) -> None:
    """The report tables: warm starts, the summary and its legend, launch-limit
    warnings, the hours table and, with ``--cross-check``, its table."""
    from vecsched.adapters.replay.cross_check import table as cross_table
    from vecsched.adapters.replay.report import hours_table, legend, summary_table
    for r in results:
        w = r.metrics.get("warm_start") or {}
        if w.get("units"):
            console.print(f"warm start, {r.scheduler}: {w['placed']} of {w['units']} pods "
                          f"placed at t = 0 on {w['nodes']} nodes it launched for them",
                          highlight=False)
    console.print(summary_table(results))
    for line in legend(results):
        console.print(line, style="dim", highlight=False)
    for r in results:
        for w in r.metrics["launch_limits"]["warnings"]:
            console.print(f"[yellow]warning:[/yellow] {r.scheduler}: {w}", highlight=False)
    console.print(hours_table(results))
    if checker:
        console.print(cross_table(checker.summary()))


def _print_verdicts(console, results) -> int:
    """Lost ticks and the ``--check-ray`` verdict per scheduler; the exit code (1 when
    the last checked scheduler differed from Ray on some tick)."""
    code = 0
    for r in results:
        if r.metrics["rejected_ticks"]:
            console.print(f"[yellow]{r.scheduler}: {r.metrics['rejected_ticks']} ticks lost "
                          f"(scheduler error, or rejected by the instance manager)[/yellow]: "
                          f"{r.metrics['rejections'][0]}")
        if r.check:
            c = r.check
            verdict = ("[green]identical on every tick[/green]" if c["differing"] == 0 else
                       f"[red]{c['differing']} differing ticks[/red]")
            pg = (f", {c['ticks_with_placement_groups']} with pending placement groups"
                  if c["ticks_with_placement_groups"] else "")
            console.print(f"--check-ray: engine vs Ray 2.60 on the same SchedulingRequest, "
                          f"{c['ticks']} ticks{pg}: {verdict} (Ray took {c['seconds']:.1f} s)")
            for ex in c["examples"]:
                console.print(f"  {ex}")
            code = 1 if c["differing"] else 0
    return code


def _run_all(console, names, check, trace, config, make, Replay, every_s: float = 10.0
             ) -> list:
    """Each scheduler's replay, with rich's progress bars on a terminal and progress
    lines otherwise (``ProgressLines``)."""
    from vecsched.adapters.replay.report import ProgressLines
    results = []
    if not console.is_terminal:
        for name in names:
            lines = ProgressLines(console, name, every_s)
            sched = make(name, check_ray=check and name == "engine")
            results.append(Replay(trace, sched, config).run(lines))
        return results
    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)
    with Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("ticks"), TimeElapsedColumn(), console=console) as progress:
        for name in names:
            task = progress.add_task(name, total=None)

            def tick(k, n, task=task):
                if k == 1 or k % 10 == 0 or k == n:
                    progress.update(task, completed=k, total=n)
            sched = make(name, check_ray=check and name == "engine")
            results.append(Replay(trace, sched, config).run(tick))
    return results
