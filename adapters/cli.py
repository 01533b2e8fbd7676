"""The `vecsched` command."""
from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table


def _demo(args) -> int:
    from .demo import demo_tick, run_demo

    console = Console(width=max(Console().width, 120))
    tick = demo_tick(seed=args.seed, n_running=args.nodes, n_pending=args.pending,
                     trace=args.trace)
    console.print(f"[bold]One tick[/bold] - {tick.description}")
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
    console.print(f"engine kernel warm-up (JIT compile or cache load): {res['compile_s']:.2f} s")
    if "same_as_ray" in res:
        verdict = "[green]identical[/green]" if res["same_as_ray"] else "[red]DIFFERENT[/red]"
        console.print(f"engine vs Ray 2.60 decisions: {verdict}; "
                      f"Ray / EngineScheduler time: {res['ratio']:.0f}x")
        return 0 if res["same_as_ray"] else 1
    return 0


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
    args = ap.parse_args(argv)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
