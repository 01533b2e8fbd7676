"""The `vecsched` command."""
from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from . import cli_warmup
from .cli_warmup import warm_with_spinner


def _demo(args) -> int:
    from .demo import demo_tick, run_demo

    console = Console(width=max(Console().width, 120))
    tick = demo_tick(seed=args.seed, n_running=args.nodes, n_pending=args.pending,
                     trace=args.trace)
    console.print(f"[bold]One tick[/bold] - {tick.description}")
    warm = warm_with_spinner(console)
    res = run_demo(tick, repeat=args.repeat, with_ray=not args.no_ray)
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


def _replay(args) -> int:
    import json
    import time
    from dataclasses import asdict

    from rich.progress import (BarColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn)

    from engine.problem import ProblemError
    from engine.traces import TraceError

    from .replay import DEFAULT_WINDOW, Replay, ReplayConfig, Window, load
    from .replay_sched import NAMES, make

    t_start = time.perf_counter()
    console = Console(width=max(Console().width, 120))
    names = [n.strip() for n in (args.scheduler or ",".join(NAMES)).split(",") if n.strip()]
    bad = [n for n in names if n not in NAMES]
    if bad or not names:
        console.print(f"[red]error:[/red] --scheduler: unknown {', '.join(bad) or '(empty)'}; "
                      f"choose from {', '.join(NAMES)}")
        return 2
    try:
        import ray.autoscaler.v2.scheduler  # noqa: F401
        have_ray = True
    except ImportError:
        have_ray = False
    if not have_ray and ("ray" in names or args.check_ray):
        if args.scheduler is None and args.check_ray is None:
            names = [n for n in names if n != "ray"]
            console.print("[yellow]ray is not installed: replaying without Ray's scheduler "
                          "(pip install -e '.[ray]')[/yellow]")
        else:
            console.print("[red]error:[/red] ray is not installed (pip install -e '.[ray]')")
            return 2
    check = ("engine" in names and have_ray) if args.check_ray is None else args.check_ray
    if check and "engine" not in names:
        console.print("[red]error:[/red] --check-ray checks the engine: add engine to --scheduler")
        return 2
    try:
        window = Window(start=args.start if args.start is not None else DEFAULT_WINDOW.start,
                        pods=args.pods if args.pods is not None else DEFAULT_WINDOW.pods,
                        compress=args.compress,
                        arrival_scale=(args.arrival_scale if args.arrival_scale is not None
                                       else DEFAULT_WINDOW.arrival_scale))
        config = ReplayConfig(seed=args.seed, idle_timeout_s=args.idle_timeout,
                              tail_s=args.tail, max_concurrent_launches=args.max_launches,
                              upscaling_speed=args.upscaling_speed,
                              preemption_rate_per_h=args.preemption_rate,
                              launch_failure_rate=args.launch_failure_rate)
        trace = load(args.trace, args.groups, window)
    except (TraceError, ProblemError, ValueError, FileNotFoundError, KeyError) as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    console.print(f"[bold]Replay[/bold] {trace.name}: {trace.n_units} units in "
                  f"{len(trace.shapes)} shapes, {len(trace.types) - 1} worker groups + head")
    console.print(f"scaling: {trace.scaling}")
    for w in trace.warnings:
        console.print(f"[yellow]warning:[/yellow] {w}")
    compile_s = warm_with_spinner(console)["seconds"]
    results = []
    with Progress(TextColumn("{task.description:<10}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("ticks"), TimeElapsedColumn(), console=console) as progress:
        for name in names:
            task = progress.add_task(name, total=None)

            def tick(k, n, task=task):
                if k == 1 or k % 10 == 0 or k == n:
                    progress.update(task, completed=k, total=n)
            sched = make(name, check_ray=check and name == "engine")
            results.append(Replay(trace, sched, config).run(tick))

    console.print(_summary_table(results))
    console.print(_hours_table(results))
    from .plots import write_plots
    paths = write_plots(results, args.out)
    wall = time.perf_counter() - t_start
    summary = {"trace": trace.name, "scaling": trace.scaling, "warnings": trace.warnings,
               "config": asdict(config), "compile_s": compile_s, "wall_s": wall,
               "schedulers": {r.scheduler: r.metrics for r in results},
               "check_ray": next((r.check for r in results if r.check), None)}
    (paths[0].parent / "summary.json").write_text(json.dumps(summary, indent=2, default=float))
    console.print("plots: " + ", ".join(str(p) for p in paths) + f"; metrics: "
                  f"{paths[0].parent / 'summary.json'}")
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
            console.print(f"--check-ray: engine vs Ray 2.60 on the same SchedulingRequest, "
                          f"{c['ticks']} ticks: {verdict} (Ray took {c['seconds']:.1f} s)")
            for ex in c["examples"]:
                console.print(f"  {ex}")
            code = 1 if c["differing"] else 0
    per = ", ".join(f"{r.scheduler} {r.metrics['wall_s']:.1f} s" for r in results)
    console.print(f"wall time: {wall:.1f} s in all ({per}; engine warm-up {compile_s:.2f} s; "
                  f"imports, loading and plots the rest)")
    return code


def _summary_table(results) -> Table:
    rows = [
        ("units in", lambda m: f"{m['units_in']}"),
        ("placed", lambda m: f"{m['placed']}"),
        ("never placed: still pending", lambda m: f"{m['still_pending']}"),
        ("never placed: infeasible", lambda m: f"{m['infeasible']}"),
        ("requeued (node lost)", lambda m: f"{m['requeued']}"),
        ("pending time p50 / p95 / p99 (s)",
         lambda m: f"{m['pending_p50_s']:.0f} / {m['pending_p95_s']:.0f} / "
                   f"{m['pending_p99_s']:.0f}"),
        ("node-hours", lambda m: f"{m['node_hours']:.1f}"),
        ("GPU-hours", lambda m: f"{m['gpu_hours']:.1f}"),
        ("utilisation CPU / GPU", lambda m: f"{m['util_cpu']:.1%} / {m['util_gpu']:.1%}"),
        ("peak / mean instances", lambda m: f"{m['peak_nodes']} / {m['mean_nodes']:.0f}"),
        ("launches", lambda m: f"{m['launches']}"),
        ("terminations", lambda m: f"{m['terminations']}"),
        ("ticks (lost)", lambda m: f"{m['ticks']} ({m['rejected_ticks']})"),
        ("tick time p50 / p99 (ms)",
         lambda m: f"{m['tick_p50_ms']:.1f} / {m['tick_p99_ms']:.1f}"),
        ("scheduler time total (s)", lambda m: f"{m['scheduler_s']:.2f}"),
        ("replay wall time (s)", lambda m: f"{m['wall_s']:.1f}" + (
            f" (Ray check {m['check_ray_s']:.1f})" if m["check_ray_s"] else "")),
    ]
    table = Table(title=f"Replay summary ({results[0].metrics['sim_end_s'] / 60:.0f} simulated "
                        f"minutes)")
    table.add_column("metric")
    for r in results:
        table.add_column(r.scheduler, justify="right")
    for label, fmt in rows:
        table.add_row(label, *(fmt(r.metrics) for r in results))
    return table


def _hours_table(results, top: int = 8) -> Table:
    hours: dict = {}
    for r in results:
        for k, v in r.metrics["node_hours_by_type"].items():
            hours[k] = hours.get(k, 0.0) + v
    kinds = sorted(hours, key=lambda k: (-hours[k], k))
    table = Table(title="Node-hours (GPU-hours) by worker group")
    table.add_column("worker group")
    for r in results:
        table.add_column(r.scheduler, justify="right")

    def cell(m, k):
        n = m["node_hours_by_type"].get(k, 0.0)
        g = m["gpu_hours_by_type"].get(k)
        return f"{n:.1f}" + (f" ({g:.1f})" if g else "")
    for k in kinds[:top]:
        table.add_row(k, *(cell(r.metrics, k) for r in results))
    rest = kinds[top:]
    if rest:
        table.add_row(f"{len(rest)} others", *(
            f"{sum(r.metrics['node_hours_by_type'].get(k, 0.0) for k in rest):.1f}"
            for r in results))
    return table


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="vecsched", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("demo", help="one realistic tick: engine vs greedy baseline vs Ray")
    d.add_argument("--trace", default="openb", help="bundled trace (openb, openb_gpuspec33)")
    d.add_argument("--nodes", type=int, default=400, help="running nodes")
    d.add_argument("--pending", type=int, default=2000, help="pending pods")
    d.add_argument("--seed", type=int, default=0)
    d.add_argument("--repeat", type=int, default=3)
    d.add_argument("--no-ray", action="store_true", help="skip Ray's scheduler")
    d.set_defaults(fn=_demo)
    r = sub.add_parser(
        "replay", help="replay a trace through the instance lifecycle: engine vs baseline vs Ray",
        description="Replay a recorded trace on a simulated clock with each scheduler; print "
                    "a summary table and write PNG plots. Default: the last 2,000 openb pods, "
                    "durations as recorded, arrivals 200x denser (see adapters/replay.py).")
    r.add_argument("trace", nargs="?", default=None,
                   help="bundled trace (openb, openb_gpuspec33) or a demand Parquet file "
                        "(default: openb)")
    r.add_argument("--groups", default=None,
                   help="worker groups: bundled name (openb_nodes, pai2020_nodes, "
                        "spot2026_nodes) or a Parquet file (default: the trace's)")
    r.add_argument("--scheduler", default=None,
                   help="comma-separated: engine,baseline,ray (default: all three)")
    r.add_argument("--out", default="replay-out", help="directory for the plots and "
                                                      "summary.json (default: replay-out)")
    r.add_argument("--pods", type=int, default=None,
                   help="how many pods (trace rows) to replay (default 2000)")
    r.add_argument("--start", type=int, default=None,
                   help="first trace row of the window (default: the last --pods rows)")
    r.add_argument("--compress", type=float, default=1.0,
                   help="divide inter-arrival times and durations by F (default 1)")
    r.add_argument("--arrival-scale", type=float, default=None,
                   help="divide inter-arrival times only by K: K times the load "
                        "(default 200)")
    r.add_argument("--seed", type=int, default=0, help="seed of the simulated cloud")
    r.add_argument("--check-ray", action=argparse.BooleanOptionalAction, default=None,
                   help="also run Ray's scheduler on the engine's every tick and count the "
                        "ticks whose decisions differ (default: on when ray is installed)")
    r.add_argument("--idle-timeout", type=float, default=60.0, help="idle_timeout_s (60)")
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
    r.set_defaults(fn=_replay)
    cli_warmup.add_parser(sub)
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
