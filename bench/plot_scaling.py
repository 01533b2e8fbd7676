"""Time per tick against nodes, pending requests and request shapes, engine vs Ray 2.60.

Runs compare_ray.run_one (same SchedulingRequest for both, decisions checked
equal, Ray capped in a forked child) over three sweeps; writes the plot and the raw rows
(``--out``: PNG and JSON) and rewrites the markdown table between the markers of
``--doc`` (docs/performance.md, "The scaling sweep"):

    python -m bench.plot_scaling        # -> docs/perf.png, docs/perf.json, the table in docs/performance.md
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from bench import compare_ray

NODES = (100, 300, 1000, 3000, 10000)          # at 1,000 pending units, 20 shapes
PENDING = (100, 1000, 10000, 100000)           # at 1,000 nodes, 20 shapes
SHAPES = (10, 20, 50, 100, 200)                # at 1,000 nodes, 10,000 pending units


def sweep(cap: float, repeat: int) -> list[dict]:
    import vecsched.engine as engine
    engine.warmup()
    rows = []
    for n in NODES:
        rows.append(dict(compare_ray.run_one(n, 1000, 20, "saturated", 0, repeat, cap,
                                             engine_repeat=15),
                         sweep="nodes"))
        print(f"nodes {n} done", file=sys.stderr, flush=True)
    for k in PENDING:
        rows.append(dict(compare_ray.run_one(1000, k, 20, "saturated", 0, repeat, cap,
                                             engine_repeat=15),
                         sweep="pending"))
        print(f"pending {k} done", file=sys.stderr, flush=True)
    for m in SHAPES:
        rows.append(dict(compare_ray.run_one(1000, 10000, m, "saturated", 0, repeat, cap,
                                             engine_repeat=15),
                         sweep="shapes"))
        print(f"shapes {m} done", file=sys.stderr, flush=True)
    return rows


def plot(rows: list[dict], path: Path, cap: float) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.6))
    for ax, which, xkey, label in ((axes[0], "nodes", "nodes", "nodes (1,000 pending units)"),
                                   (axes[1], "pending", "requests",
                                    "pending request units (1,000 nodes)"),
                                   (axes[2], "shapes", "shapes",
                                    "request shapes (1,000 nodes, 10,000 units)")):
        rs = [r for r in rows if r["sweep"] == which]
        x = [r[xkey] for r in rs]
        ax.plot(x, [r["engine_median_s"] for r in rs], "o-", label="vecsched EngineScheduler")
        ax.plot(x, [r["engine_timing"]["engine_s"] for r in rs], "o--", color="C0", alpha=0.5,
                label="  its engine part (decode/encode excluded)")
        ray = [(r[xkey], r["ray_median_s"]) for r in rs if r["ray_median_s"] is not None]
        capped = [r[xkey] for r in rs if r["ray_median_s"] is None]
        ax.plot([a for a, _ in ray], [b for _, b in ray], "s-", label="Ray 2.60 scheduler")
        if capped:
            ax.plot(capped, [cap] * len(capped), "rv", label=f"Ray > {cap:g} s (capped)")
        ax.axhline(5.0, color="grey", ls=":", lw=1, label="5 s reconcile interval")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(label)
        ax.set_ylabel("seconds per tick (median, end to end)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle("Time per autoscaler tick, saturated synthetic cluster (docs/ray-semantics.md §12)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def table(rows: list[dict], cap: float) -> str:
    out = ["| nodes | pending units | shapes | Ray 2.60 median | EngineScheduler median "
           "| engine part | ratio | decisions equal |",
           "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        ray = f"{r['ray_median_s']:.3f} s" if r["ray_median_s"] is not None else f"> {cap:g} s"
        ratio = (f"{r['ray_median_s'] / r['engine_median_s']:.0f}x" if r["ray_median_s"]
                 else f"> {cap / r['engine_median_s']:.0f}x")
        eq = {True: "yes", False: "NO", None: "n/a (Ray capped)"}[r["decisions_equal"]]
        out.append(f"| {r['nodes']} | {r['requests']} | {r['shapes']} | {ray} | "
                   f"{r['engine_median_s'] * 1000:.1f} ms | "
                   f"{r['engine_timing']['engine_s'] * 1000:.1f} ms | {ratio} | {eq} |")
    return "\n".join(out)


BEGIN = "<!-- bench.plot_scaling: table begin -->"
END = "<!-- bench.plot_scaling: table end -->"


def refresh_section(text: str, table_md: str) -> str:
    """`text` with the lines between its BEGIN and END markers replaced by `table_md`
    (the markers stay); a page without both markers, in that order, is an error."""
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise ValueError(f"no {BEGIN!r} ... {END!r} section to refresh")
    head = text[:start + len(BEGIN)]
    return head + "\n" + table_md.rstrip("\n") + "\n" + text[end:]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/perf", help="path prefix for the .png and .json")
    ap.add_argument("--doc", default="docs/performance.md",
                    help="the page whose marked section gets the table")
    ap.add_argument("--ray-cap", type=float, default=30.0)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args(argv)
    rows = sweep(a.ray_cap, a.repeat)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    plot(rows, out.with_suffix(".png"), a.ray_cap)
    md = table(rows, a.ray_cap)
    doc = Path(a.doc)
    doc.write_text(refresh_section(doc.read_text(encoding="utf-8"), md), encoding="utf-8")
    out.with_suffix(".json").write_text(json.dumps(rows, indent=1, default=str))
    print(md)
    return 1 if any(r["decisions_equal"] is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
