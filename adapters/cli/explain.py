"""``vecsched explain``: its arguments and its report (the reasons come from
vecsched.adapters.ray.explain).

The report is a count of unplaced requests by reason, the first ``--limit`` unplaced
rows, and every group that could not grow or shrink; ``--json`` prints everything.
A dump of a hundred thousand request rows is explained in seconds; printing all of
its rows as a table would take minutes and help nobody, hence the limit.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter

DEFAULT_LIMIT = 30
SAMPLE = "explain-sample.json"         # --write-sample without a path


def register(sub) -> None:
    p = sub.add_parser(
        "explain", help="why one dumped autoscaler tick did not scale "
                        "(unplaced requests, groups that could not grow)",
        description="Decide one dumped autoscaler tick with the engine, as the autoscaler "
                    "did, and say why demand waits: no worker group has the shape, no "
                    "group matches the label selector, groups at their maximum, launches "
                    "held back by the upscaling speed or the concurrent-launch limit, "
                    "nodes not running Ray yet, idle nodes kept by the minimum. Try it on "
                    "the sample: vecsched explain --write-sample sample.json && "
                    "vecsched explain sample.json")
    p.add_argument("path", nargs="?",
                   help="a request dumped by the monitor (VECSCHED_DUMP_DIR) or by "
                        "vecsched.adapters.ray.dump_request")
    p.add_argument("--json", action="store_true", help="print the whole explanation as JSON")
    p.add_argument("--limit", type=_count, default=DEFAULT_LIMIT, metavar="N",
                   help=f"unplaced rows shown in the table (default {DEFAULT_LIMIT}; "
                        "0 shows all)")
    p.add_argument("--write-sample", metavar="PATH", nargs="?", const=SAMPLE,
                   help="write a sample dump to PATH (default: ./" + SAMPLE + "; a tick "
                        "showing every kind of answer) and stop")
    p.add_argument("--rows", type=_count, default=4, metavar="N",
                   help="with --write-sample: grow the sample to N request rows (default 4)")
    p.set_defaults(fn=main, needs=("cli", "ray"))


def _count(text: str) -> int:
    """A count argument: a whole number >= 0."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


def main(args) -> int:
    from .errors import UsageError, check_output_file

    if args.write_sample is not None:
        if args.path is not None:
            raise UsageError("explain: give either a dump to explain or --write-sample, "
                             "not both")
        check_output_file(args.write_sample, "--write-sample")
        from vecsched.adapters.ray.explain_sample import write_sample
        print(f"wrote {write_sample(args.write_sample, max(args.rows, 4))}; explain it with: "
              f"vecsched explain {args.write_sample}")
        return 0
    if args.path is None:
        raise UsageError("explain: the dump to explain (PATH) is required "
                         "(or --write-sample PATH to write a sample)")
    from vecsched.adapters.ray.explain import explain
    from vecsched.adapters.ray.explain_input import load_for_explain

    from vecsched.engine.model.problem import ProblemError

    request, context = load_for_explain(args.path)
    try:
        res = explain(request, context)
    except ProblemError as e:              # a value the engine refuses, named by field
        raise UsageError(f"{args.path}: request.{e}") from None
    if args.json:
        print(json.dumps(res, indent=1, default=str))
        return 0
    report(args.path, res, args.limit)
    return 0


def report(path: str, res: dict, limit: int, console=None) -> None:
    """The explanation as rich tables (on ``console``, default stdout)."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = console or Console()
    s = res["summary"]
    console.print(f"[bold]{escape(path)}[/bold]: {s['nodes']} nodes; launch "
                  f"{s['launch'] or 'none'}; terminate {s['terminate'] or 'none'}",
                  highlight=False)
    unplaced = res["unplaced"]
    if len(unplaced) > 1:
        rows, units = Counter(), Counter()
        for u in unplaced:
            rows[u["reason"]] += 1
            units[u["reason"]] += u["count"]
        by = Table(title="Unplaced requests by reason", show_footer=True)
        total = {"reason": "all", "rows": f"{len(unplaced):,}",
                 "units": f"{sum(units.values()):,}"}
        for c in ("reason", "rows", "units"):
            by.add_column(c, footer=total[c], justify="left" if c == "reason" else "right")
        for reason, n in rows.most_common():
            by.add_row(reason, f"{n:,}", f"{units[reason]:,}")
        console.print(by)
    shown = unplaced if limit == 0 else unplaced[:limit]
    of = f"{len(shown):,} of {len(unplaced):,} rows" if len(shown) < len(unplaced) else \
        f"{len(unplaced):,}"
    t = Table(title=f"Unplaced requests ({of})")
    for c in ("kind", "shape", "count", "reason", "why"):
        t.add_column(c, overflow="fold")
    for u in shown:
        t.add_row(u["kind"], escape(json.dumps(u["shape"])), str(u["count"]), u["reason"],
                  escape(u["why"]))
    console.print(t)
    if len(shown) < len(unplaced):
        console.print(f"{len(unplaced) - len(shown):,} more rows not shown (--limit 0 shows "
                      f"all; --json prints everything)", highlight=False)
    g = Table(title=f"Groups that could not grow or shrink ({len(res['groups'])})")
    for c in ("group", "reason", "why"):
        g.add_column(c, overflow="fold")
    for r in res["groups"]:
        g.add_row(escape(r["group"]), r["reason"], escape(r["why"]))
    console.print(g)
