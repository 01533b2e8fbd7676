"""The efficient mode on the default openb replay, beside the engine (Ray's
choice), the FFD baseline and, with ``--ray``, Ray 2.60's own scheduler.

    .venv/bin/python -m bench.replay_efficient              # seed 0, the `vecsched replay` defaults
    .venv/bin/python -m bench.replay_efficient --seeds 0,1,2,3 --plot docs/efficient.png
    .venv/bin/python -m bench.replay_efficient --split     # where each one's GPU-hours go

It runs ``vecsched.adapters.replay.Replay`` with the registered schedulers (``efficient`` is
``EngineScheduler(mode="efficient")`` priced from the worker groups, ``efficient-proxy``
the same priced by GPU-hours then node-hours) on the window and config ``vecsched replay``
uses, and prints the metrics the efficient mode's targets name, the ratios to the engine's
(Ray's choice) and whether each target holds. (``vecsched replay --scheduler
engine,efficient,baseline,ray`` shows the same for one seed.)

``--split`` says where each scheduler's GPU-hours go (``gpu_split``, from
``vecsched.adapters.replay.excess``, which ``bench/suite.py`` runs on every cell):

- **booting**: from ALLOCATED to the ray node joining (RAY_RUNNING), or to the end of
  the record if it never joined (cancelled while booting); exact, from the records;
- **used** / **free while arriving**: the GPUs of the cluster's nodes held by running
  units / left free, up to the last arrival;
- **used** / **free in the tail**: the same after the last arrival (the replay's
  ``tail_s``, 600 s by default), when nothing new arrives: the free GPUs there sit on
  nodes that their last units keep up (the raylets place; nothing migrates) or on idle
  nodes waiting out the idle timeout, and no scheduler decision can free them without
  stopping running work;
- **rest**: what is left of the metric: nodes that left ray (RAY_STOPPED) waiting
  for the cloud to terminate them, and the sampling's rounding.

The four middle parts are sampled at every tick (5 s) over the nodes the cluster
stand-in holds (RAY_RUNNING and draining).
"""
from __future__ import annotations

import argparse
import json

from vecsched.adapters.replay import DEFAULT_WINDOW, Replay, ReplayConfig, load
from vecsched.adapters.replay import make
from vecsched.adapters.replay.excess import Excess

KEYS = ("node_hours", "gpu_hours", "cost", "pending_p50_s", "pending_p95_s", "terminations",
        "never_placed", "requeued", "lost_gpu_hours", "tick_p50_ms", "scheduler_s")
EFFICIENT = ("efficient", "efficient-proxy", "efficient-consolidate")


def run(loaded, sched, seed: int, split: bool = False) -> dict:
    replay = Replay(loaded, sched, ReplayConfig(seed=seed))
    sample = Excess(replay) if split else None
    m = replay.run(sample).metrics
    out = {k: m[k] for k in KEYS} | {
        "launches": m["instances"]["launched"],
        "launches_by_type": {t: c["launched"] for t, c in m["instances_by_type"].items()}}
    if split:
        out["gpu_split"] = gpu_split(sample.split(m)["gpu_hours"])
    return out


def gpu_split(parts: dict) -> dict:
    """The GPU-hour parts of ``Excess.split`` as this bench prints them: booting, used
    and free while arriving, used and free in the tail, rest."""
    out = {"booting": parts["booting"]}
    for when in ("while arriving", "in the tail"):
        out["used " + when] = parts["used " + when]
        out["free " + when] = parts["up " + when] - parts["used " + when]
    out["rest"] = parts["rest"]
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="0")
    ap.add_argument("--ray", action="store_true", help="also Ray 2.60's own scheduler (slow)")
    ap.add_argument("--split", action="store_true",
                    help="also where each scheduler's GPU-hours go (module docstring)")
    ap.add_argument("--json", default=None, help="write the figures to this file")
    ap.add_argument("--plot", default=None,
                    help="write a PNG of GPU-hours against pending p95 (every seed) here")
    args = ap.parse_args(argv)
    from vecsched.engine import warmup
    warmup()
    loaded = load(None, None, DEFAULT_WINDOW)
    out = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        rows = {name: run(loaded, make(name), seed, args.split)
                for name in ("engine", "baseline") + EFFICIENT}
        if args.ray:
            rows["ray"] = run(loaded, make("ray"), seed, args.split)
        out[seed] = rows
        ray, ffd = rows["engine"], rows["baseline"]
        print(f"seed {seed}")
        for name, r in rows.items():
            print(f"  {name:21s} node-h {r['node_hours']:6.1f}  GPU-h {r['gpu_hours']:6.1f}  "
                  f"cost {r['cost'] or 0:6.1f}  pending p50/p95 {r['pending_p50_s']:5.1f}/"
                  f"{r['pending_p95_s']:5.1f} s  launches {r['launches']:4d}  terminations "
                  f"{r['terminations']:4d}  never placed {r['never_placed']}  requeued "
                  f"{r['requeued']} ({r['lost_gpu_hours']:.1f} GPU-h lost)  tick p50 "
                  f"{r['tick_p50_ms']:.1f} ms")
        if args.split:
            print("  GPU-hours by where they go:")
            for name, r in rows.items():
                print(f"    {name:21s} " + ", ".join(f"{k} {v:5.1f}"
                                                  for k, v in r["gpu_split"].items()))
        for name in EFFICIENT:
            eff = rows[name]
            checks = {
                "GPU-h <= 0.85 x Ray's": eff["gpu_hours"] <= 0.85 * ray["gpu_hours"],
                "node-h <= 0.8 x Ray's": eff["node_hours"] <= 0.8 * ray["node_hours"],
                "pending p95 <= 1.05 x Ray's":
                    eff["pending_p95_s"] <= 1.05 * ray["pending_p95_s"],
                "GPU-h and node-h below FFD's": eff["gpu_hours"] < ffd["gpu_hours"]
                and eff["node_hours"] < ffd["node_hours"],
            }
            cost = (f", cost {eff['cost'] / ray['cost']:.3f} (FFD "
                    f"{ffd['cost'] / ray['cost']:.3f})" if ray["cost"] else "")
            print(f"  {name} / Ray's choice: GPU-h {eff['gpu_hours'] / ray['gpu_hours']:.3f}, "
                  f"node-h {eff['node_hours'] / ray['node_hours']:.3f}, "
                  f"p95 {eff['pending_p95_s'] / ray['pending_p95_s']:.3f}{cost}: " +
                  ", ".join(f"{'met' if ok else 'MISSED'} {what}" for what, ok in checks.items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1, sort_keys=True)
    if args.plot:
        plot(out, args.plot)
    return 0


LABELS = {"ray": "Ray 2.60 (= engine, ray-compat)",
          "engine": "Ray 2.60 (= engine, ray-compat)",
          "baseline": "first-fit-decreasing baseline",
          "efficient": "efficient mode (worker groups' prices)",
          "efficient-proxy": "efficient mode (proxy prices: GPUs, nodes)",
          "efficient-consolidate": "efficient-proxy + consolidation (restarts work)"}


def _style(name: str) -> tuple:
    """(colour, marker, label): the replay plots' colours (palette.py), the engine's
    marker drawn as Ray's since it decides as Ray does on every tick."""
    from vecsched.adapters.replay.palette import scheduler_color, scheduler_marker
    as_ = "ray" if name == "engine" else name
    return scheduler_color(as_), scheduler_marker(as_), LABELS[name]


def plot(out: dict, path: str) -> None:
    """GPU-hours against pending p95, one marker per scheduler and seed. The engine
    decides as Ray does on every tick (--check-ray), so one marker stands for both."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    fig = Figure(figsize=(9.5, 4.8), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    seen = set()
    for seed, rows in sorted(out.items()):
        for name in ("engine", "baseline") + EFFICIENT:
            r = rows[name]
            color, marker, label = _style(name)
            ax.scatter(r["pending_p95_s"], r["gpu_hours"], c=color, marker=marker, s=46,
                       label=None if label in seen else label, edgecolors="black",
                       linewidths=0.4)
            seen.add(label)
    ray = [rows["engine"]["gpu_hours"] for rows in out.values()]
    ax.axhline(0.85 * sum(ray) / len(ray), color=_style("ray")[0], ls=":", lw=1,
               label="0.85 x Ray's GPU-hours (mean over seeds)")
    ax.set_xlabel("pending time p95 (s)")
    ax.set_ylabel("GPU-hours")
    ax.set_title(f"Default openb replay, seeds {', '.join(str(s) for s in sorted(out))}: "
                 "GPU-hours against pending p95", fontsize=10)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", fontsize=8)
    fig.savefig(path)
    print(f"plot: {path}")


if __name__ == "__main__":
    raise SystemExit(main())
