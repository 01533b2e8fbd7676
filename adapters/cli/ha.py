"""`vecsched ha-demo`: its arguments and its report (registered by adapters/cli/main.py)."""
from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser(
        "ha-demo", help="two autoscaler replicas (lease in Redis or a Kubernetes Lease): a leader "
             "killed, a leader paused",
        description="Start a private redis-server and two autoscaler replicas (separate "
                    "processes) on a trace replay against a shared simulated cloud; "
                    "SIGKILL the leader mid-scale-up, SIGSTOP the next leader past its "
                    "lease and resume it; write ha.json (failover times, stale writes "
                    "rejected, launches lost / duplicated, demand lost, counted from the "
                    "cloud's own record against a failure-free run). Needs redis-server "
                    "(apt-get install -y redis-server).")
    p.add_argument("--out", default="ha-out", help="directory for ha.json, the Redis files "
                                                  "and the logs (default: ha-out)")
    p.add_argument("--ttl", type=float, default=1.0, help="lease ttl in seconds (1.0)")
    p.add_argument("--tick", type=float, default=0.2,
                   help="real seconds per autoscaler tick (0.2)")
    p.add_argument("--ticks", type=int, default=80, help="simulated ticks of 5 s (80)")
    p.add_argument("--pods", type=int, default=300,
                   help="replay the last N pods of the trace (300)")
    p.add_argument("--trace", default="openb", help="bundled trace (openb)")
    p.add_argument("--seed", type=int, default=0, help="seed of the simulated cloud")
    p.add_argument("--scheduler", default="engine", choices=("engine", "baseline"),
                   help="the replicas' scheduler (engine)")
    p.add_argument("--scenario", default="kill-pause",
                   choices=("kill-pause", "redis-restart", "redis-old-snapshot"),
                   help="kill-pause (default): SIGKILL a leader mid-scale-up, SIGSTOP the "
                        "next past its lease; redis-restart: restart Redis with its files "
                        "deleted while the leader is mid-scale-up; redis-old-snapshot: "
                        "restore Redis from a backup whose epoch is below the replicas' "
                        "while the leader is mid-scale-up (redis backend only)")
    p.add_argument("--backend", default="redis",
                   help="where the replicas' leader lease lives: redis (default: a key in "
                        "the records' Redis) or kube (a coordination.k8s.io/v1 Lease on the "
                        "Kubernetes API stand-in the demo starts on 127.0.0.1 over HTTPS; "
                        "the instance records stay in Redis; --ttl in whole seconds)")
    p.add_argument("--allow-volatile-redis", action="store_true",
                   help="run the demo's Redis without persistence and let the replicas "
                        "accept it (they refuse a Redis with neither appendonly nor save "
                        "otherwise)")
    p.set_defaults(fn=run)


def check_args(args: argparse.Namespace) -> None:
    """Refuse a bad HA demo request before any process starts: positive times and
    counts, a lease longer than a tick, a bundled trace, a writable ``--out``."""
    import math

    from vecsched.adapters.traces import TRACES

    from .errors import UsageError, check_output_dir

    for option, v in (("--ttl", args.ttl), ("--tick", args.tick)):
        if not (v > 0 and math.isfinite(v)):
            raise UsageError(f"{option} must be a finite number > 0, got {v}")
    if args.tick >= args.ttl:
        raise UsageError(f"--tick ({args.tick}) must be shorter than --ttl ({args.ttl})")
    for option, n in (("--ticks", args.ticks), ("--pods", args.pods)):
        if n < 1:
            raise UsageError(f"{option} must be >= 1, got {n}")
    if args.seed < 0:
        raise UsageError(f"--seed must be >= 0, got {args.seed}")
    if args.trace not in TRACES:
        raise UsageError(f"--trace {args.trace}: unknown bundled trace; choose from "
                         f"{', '.join(TRACES)}")
    check_output_dir(args.out, "--out")


def run(args: argparse.Namespace) -> int:
    check_args(args)
    from rich.console import Console
    from rich.table import Table

    from vecsched.adapters.leader import VolatileRedis
    from vecsched.adapters.sim.redis_server import RedisUnavailable

    from vecsched.adapters.sim.ha.run import DemoConfig, run_demo
    from vecsched.adapters.sim.ha.procs import DemoError
    from vecsched.adapters.sim.ha.world import SimConfig

    console = Console()
    try:
        if not (args.ttl > 0 and args.tick > 0):
            raise ValueError(f"--ttl and --tick must be > 0, got {args.ttl}, {args.tick}")
        if args.tick >= args.ttl:
            raise ValueError(f"--tick ({args.tick}) must be shorter than --ttl ({args.ttl})")
        dc = DemoConfig(sim=SimConfig(trace=args.trace, pods=args.pods, ticks=args.ticks,
                                      seed=args.seed),
                        ttl_s=args.ttl, tick_real_s=args.tick, scheduler=args.scheduler,
                        scenario=args.scenario, backend=args.backend,
                        allow_volatile_redis=args.allow_volatile_redis)
        result = run_demo(args.out, dc, log=console.print)
    except (ValueError, RedisUnavailable, VolatileRedis, DemoError, FileNotFoundError) as e:
        console.print(f"[red]error:[/red] {e}")
        return 2
    t = Table(title=f"HA demo ({dc.backend} lease): ttl {dc.ttl_s:g} s, "
                    f"tick {dc.tick_real_s:g} s")
    t.add_column("figure")
    t.add_column("value", justify="right")
    fo = ", ".join(f"{x:.2f} s" if x is not None else "never" for x in result["failover_s"])
    rows = [("failovers", result["failovers"]),
            (f"failover time (bound: ttl + one tick = {result['failover_bound_s']:g} s)", fo),
            ("stale writes attempted / rejected",
             f"{result['stale_writes_attempted']} / {result['stale_writes_rejected']}"),
            ("  of which only the fence stopped", result["stale_writes_only_the_fence_stopped"]),
            ("stale cloud calls refused", result["stale_cloud_calls_refused"]),
            ("launches lost / duplicated",
             f"{result['launches_lost']} / {result['launches_duplicated']}"),
            ("demand lost / delayed", f"{result['demand_lost']} / {result['demand_delayed']}"),
            ("epoch regressions", result["epoch_regressions"]),
            ("new-term calls while the old leader's lease could run",
             result["acted_during_reset"])]
    if result["stuck_s"] is not None:
        rows += [("stuck after the Redis restart", f"{result['stuck_s']:.2f} s"),
                 ("records rebuilt from the cloud",
                  ", ".join(f"{r['records']} at tick {r['tick']}"
                            for r in result["detail"]["rebuilds"]) or "never")]
    rows += [("cloud instances (reference run)",
              f"{result['detail']['cloud_instances']} "
              f"({result['detail']['reference_cloud_instances']})")]
    for k, v in rows:
        t.add_row(k, str(v))
    console.print(t)
    bad = [k for k, ok in result["checks"].items() if not ok]
    verdict = "[green]all checks pass[/green]" if not bad else f"[red]failed: {', '.join(bad)}[/red]"
    console.print(f"{verdict}; {args.out}/ha.json written ({result['wall_s']:.1f} s)")
    return 0 if not bad else 1
