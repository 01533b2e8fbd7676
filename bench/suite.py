"""The workload suite: every scheduler on a set of workloads x seeds, one table, one plot.

    .venv/bin/python -m bench.suite --quick                 # seed 0 only (~3-4 min here)
    .venv/bin/python -m bench.suite                          # seeds 0-3 (~11 min here)
    .venv/bin/python -m bench.suite --workloads services --schedulers engine,efficient

Each cell is one ``vecsched.adapters.replay.Replay`` of one workload window, gang
share, seed and scheduler (``ReplayConfig(seed=seed)``: the ``vecsched replay``
defaults; the seed drives the simulated cloud and the gang overlay). The workloads
(``WORKLOADS``; ``docs/suite.md`` says why each is there):

- the bundled openb traces: the default pod list and its three published variants
  (``openb_cpu250``: more CPU-only work, ``openb_gpushare100``: every GPU pod shares a
  GPU, ``openb_gpuspec33``: a third of the GPU pods name the models they accept), each
  on the openb worker groups (27 types, illustrative prices), in the window ``vecsched
  replay`` uses (``DEFAULT_WINDOW``: the last 2,000 pods, arrivals 200x denser,
  durations as recorded), plain and with the seeded gang overlay ``--gangs 0.2``;
- the services family (``synth_services.py``; names start with ``services``, and the
  services targets apply to them): ``services`` (748 long-lived replicas, per-node caps
  per app, a custom resource, three worker groups) and ``services_mixgpu`` (a small
  1-GPU group against an 8-GPU group and a CPU group), each one hour in real time, and
  ``services_daily`` (two days of demand with a daily cycle, half at night), 12x
  compressed. Their replicas are mostly capped, and capped units never join the
  overlay's placement groups, so they are replayed plain only.

- when the cloud says no (docs/capacity.md): ``stockout-*`` (each openb-family mix with
  the efficient mode's two most-launched worker groups capped at ``STOCKOUT_CAP`` live
  instances), ``launchfail-*`` (every launch call fails with probability 0.3),
  ``spot-*`` (the openb groups plus a spot twin of each priced group at
  ``SPOT_DISCOUNT`` x its price, interrupted ``SPOT_RATE_PER_H`` times per running
  instance-hour) and ``limit70-*`` (``GPU`` limited to 70 % of the same scheduler's
  unconstrained peak on the same mix and seed: ``peak_gpu`` of that cell, run first).

``suite.json`` holds ``{"cells": [...], "meta": {...}}``: per cell exactly the keys of
``CELL_KEYS`` (``restarts`` is the replay's ``requeued``: units restarted because
their node went; ``launches`` the instances that left QUEUED; ``cancelled_before_join``
the scheduler's terminations of instances whose ray never joined). It is rewritten
after every cell, so an interrupted run keeps what it measured. The table (stdout, and
``suite.md``) gives each cell's figures and the efficient modes' ratios to Ray's (the
engine: it decides as Ray 2.60 does) and to the better of Ray and FFD (the baseline),
with the efficient mode's targets (docs/suite.md) checked; the plot (``suite.png``) shows the ratios per
workload.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass
from typing import Optional

from vecsched.adapters.replay import (DEFAULT_WINDOW, GangOverlay, Replay, ReplayConfig,
                                      Window, load, make)
from vecsched.adapters.replay.bounds import common_bounds
from vecsched.adapters.replay.excess import Excess, excess_parts

CELL_KEYS = ("workload", "gangs", "seed", "scheduler", "gpu_hours", "node_hours", "cost",
             "pending_p50_s", "pending_p95_s", "launches", "cancelled_before_join",
             "restarts", "tick_p50_ms", "tick_max_ms",
             # when the cloud says no (docs/capacity.md)
             "placed", "never_placed", "stockouts", "launch_failures", "interruptions",
             "lost_gpu_hours", "peak_gpu", "limit_gpu", "limit_blocked_ticks",
             # the trace's lower bounds (adapters/replay/bounds.py) and honest churn
             "cost_lower_bound", "gpu_hours_lower_bound", "cancelled_after_request",
             "cancelled_queued", "split")
SCHEDULERS = ("engine", "baseline", "efficient", "efficient-proxy")
SEEDS = (0, 1, 2, 3)
GANG_SHARE = 0.2


@dataclass(frozen=True)
class Workload:
    """A bundled trace, its window and the gang shares it is replayed with; for the
    cloud's refusals, its worker groups changed (``cloud``: ``(column, {group: value})``
    pairs of the worker-group table's cloud columns; ``spot``: add spot twins), replay
    options (``config``) and a GPU limit as a share of an unconstrained peak
    (``limit_gpu_share``)."""
    name: str
    trace: str
    window: Window
    gangs: tuple = (0.0, GANG_SHARE)
    cloud: tuple = ()
    spot: bool = False
    config: tuple = ()                 # (ReplayConfig field, value) pairs
    limit_gpu_share: Optional[float] = None

    def groups(self):
        """The worker-group table to replay (None: the trace's own, unchanged)."""
        if not self.cloud and not self.spot:
            return None
        from vecsched.adapters.replay.capacity import spot_twins, with_cloud
        from vecsched.adapters.traces import bundled_trace, read_worker_groups
        table = read_worker_groups(bundled_trace(self.trace)[1])
        if self.spot:
            table = spot_twins(table, SPOT_DISCOUNT, SPOT_RATE_PER_H)
        for column, values in self.cloud:
            table = with_cloud(table, column, dict(values))
        return table


SERVICES_WINDOW = Window(start=0, pods=None, arrival_scale=1.0)
# two days of services_daily in four hours: arrivals and durations 12x shorter (boots,
# the idle timeout and the ticks are not compressed)
DAILY_WINDOW = Window(start=0, pods=None, compress=12.0, arrival_scale=1.0)
# The efficient mode's two most-launched worker groups on each openb-family mix (the
# default window, seed 0, plain; measured before any cap: openb and cpu250 41-43 g3 and
# 35-36 g2 launches; gpushare100 43 g3, 25 p100-64c; gpuspec33 65 t4-104c, 29 g2),
# capped at STOCKOUT_CAP live instances each: the case that showed the efficient mode
# asking for an out-of-stock group tick after tick.
STOCKOUT_CAP = 10
STOCKOUT_GROUPS = {"openb": ("g3-128c-768g-8gpu", "g2-96c-384g-8gpu"),
                   "openb_cpu250": ("g3-128c-768g-8gpu", "g2-96c-384g-8gpu"),
                   "openb_gpushare100": ("g3-128c-768g-8gpu", "p100-64c-256g-2gpu"),
                   "openb_gpuspec33": ("t4-104c-512g-2gpu", "g2-96c-384g-8gpu")}
# Spot twins: 40 % of the on-demand price (spot prices run at 30-70 % off), taken back
# 0.2 times per running instance-hour (far above a public cloud's average, so that a
# 40-minute replay sees tens of interruptions).
SPOT_DISCOUNT = 0.4
SPOT_RATE_PER_H = 0.2
LAUNCH_FAILURE_RATE = 0.3
LIMIT_GPU_SHARE = 0.7
_MIXES = (("openb", "openb"), ("cpu250", "openb_cpu250"), ("gpushare100", "openb_gpushare100"),
          ("gpuspec33", "openb_gpuspec33"))

WORKLOADS = (
    Workload("openb", "openb", DEFAULT_WINDOW),
    Workload("cpu250", "openb_cpu250", DEFAULT_WINDOW),
    Workload("gpushare100", "openb_gpushare100", DEFAULT_WINDOW),
    Workload("gpuspec33", "openb_gpuspec33", DEFAULT_WINDOW),
    Workload("services", "services", SERVICES_WINDOW, gangs=(0.0,)),
    Workload("services_mixgpu", "services_mixgpu", SERVICES_WINDOW, gangs=(0.0,)),
    Workload("services_daily", "services_daily", DAILY_WINDOW, gangs=(0.0,)),
)
# When the cloud says no (docs/capacity.md): run with --workloads NAME,... or --cloud.
CLOUD_WORKLOADS = tuple(
    Workload(f"stockout-{name}", trace, DEFAULT_WINDOW, gangs=(0.0,),
             cloud=(("capacity", tuple((g, STOCKOUT_CAP) for g in STOCKOUT_GROUPS[trace])),))
    for name, trace in _MIXES) + tuple(
    Workload(f"launchfail-{name}", trace, DEFAULT_WINDOW, gangs=(0.0,),
             config=(("launch_failure_rate", LAUNCH_FAILURE_RATE),))
    for name, trace in _MIXES) + tuple(
    Workload(f"spot-{name}", trace, DEFAULT_WINDOW, gangs=(0.0,), spot=True)
    for name, trace in _MIXES[:2]) + tuple(
    Workload(f"limit70-{name}", trace, DEFAULT_WINDOW, gangs=(0.0,),
             limit_gpu_share=LIMIT_GPU_SHARE)
    for name, trace in _MIXES)
ALL_WORKLOADS = WORKLOADS + CLOUD_WORKLOADS

# The efficient mode's targets, per cell (``check``; docs/suite.md says why each).
TARGETS = ("cost <= min(Ray, FFD)", "GPU-h <= min(Ray, FFD)", "node-h <= Ray",
           "p95 <= 1.05 x Ray", "p50 <= 1.10 x Ray", "cancelled <= 5 % of launches",
           # against the trace's lower bound, and churn counted after the cloud was asked
           "excess over bound <= 0.75 x FFD's", "cancelled after request <= 2 %",
           "services: cost <= 0.97 x min(Ray, FFD)", "services: GPU-h <= Ray")
SERVICES = "services"      # the services family: workloads whose names start with it


def cell(metrics: dict, workload: str, gangs: float, seed: int, scheduler: str,
         split: dict = None) -> dict:
    """One suite cell from a replay's metrics (``CELL_KEYS``, in that order);
    ``split``: ``Excess.split``'s parts."""
    out = {"workload": workload, "gangs": gangs, "seed": seed, "scheduler": scheduler,
           "gpu_hours": metrics["gpu_hours"], "node_hours": metrics["node_hours"],
           "cost": metrics["cost"], "pending_p50_s": metrics["pending_p50_s"],
           "pending_p95_s": metrics["pending_p95_s"],
           "launches": metrics["instances"]["launched"],
           "cancelled_before_join": metrics["cancelled_before_join"],
           "restarts": metrics["requeued"], "tick_p50_ms": metrics["tick_p50_ms"],
           "tick_max_ms": metrics["tick_max_ms"],
           "placed": metrics["placed"], "never_placed": metrics["never_placed"],
           "stockouts": metrics["stockouts"],
           "launch_failures": metrics["launch_failures"],
           "interruptions": metrics["interruptions"],
           "lost_gpu_hours": metrics["lost_gpu_hours"],
           "peak_gpu": metrics["peak_asked"].get("GPU", 0.0),
           "limit_gpu": (metrics.get("limits") or {}).get("GPU"),
           "limit_blocked_ticks": metrics["limit_blocked_ticks"],
           "cost_lower_bound": metrics["cost_lower_bound"],
           "gpu_hours_lower_bound": metrics["gpu_hours_lower_bound"],
           "cancelled_after_request": metrics["cancelled_after_request"],
           "cancelled_queued": metrics["cancelled_queued"],
           "split": split}
    assert tuple(out) == CELL_KEYS
    return out


def run_cells(workloads, seeds, schedulers, *, on_cell=None, window=None):
    """Every cell, workload by workload, gang share, seed, scheduler (that order); each
    trace window is loaded once per gang share and seed. ``window`` (a ``Window``)
    replaces every workload's (asv's short windows). ``on_cell(cell, seconds)`` is called
    after each. Returns the cells."""
    cells = []
    for w in workloads:
        for gangs in w.gangs:
            for seed in seeds:
                trace = load(w.trace, w.groups(), window or w.window,
                             GangOverlay(gangs, seed=seed))
                group = []
                for name in schedulers:
                    t0 = time.perf_counter()
                    config = ReplayConfig(seed=seed, **dict(w.config),
                                          **_limit(w, trace, seed, name, cells))
                    c = _one_cell(trace, w.name, gangs, seed, name, config)
                    group.append(c)
                    common_bounds(group)      # the least of the runs' bounds: valid for all
                    cells.append(c)
                    if on_cell is not None:
                        on_cell(c, time.perf_counter() - t0)
    return cells


def _limit(w: Workload, trace, seed: int, name: str, cells: list) -> dict:
    """``limits`` for a ``limit70-*`` cell: GPU at the workload's share of the same
    scheduler's unconstrained peak on the same mix and seed (that cell's ``peak_gpu``
    when this run has it, else one unconstrained replay now); {} otherwise."""
    if w.limit_gpu_share is None:
        return {}
    base = next((c for c in cells if c["seed"] == seed and c["scheduler"] == name
                 and c["gangs"] == 0.0 and c["workload"] == _base_name(w.trace)), None)
    if base is not None:
        peak = base["peak_gpu"]
    else:
        peak = Replay(trace, make(name), ReplayConfig(seed=seed)).run().metrics[
            "peak_asked"].get("GPU", 0.0)
    return {"limits": {"GPU": round(w.limit_gpu_share * peak, 6)}}


def _base_name(trace: str) -> str:
    return next(n for n, t in _MIXES if t == trace)


def _one_cell(trace, workload: str, gangs: float, seed: int, name: str,
              config: ReplayConfig) -> dict:
    """One replay of a loaded window: its cell, with the run's lower bounds
    (``bounds.replay_bounds``: valid for this run) and where its cost goes."""
    replay = Replay(trace, make(name), config)
    excess = Excess(replay)
    m = replay.run(excess).metrics
    return cell(m, workload, gangs, seed, name, excess.split(m))


# ---- targets and the table -----------------------------------------------------------------

def _group(cells) -> dict:
    """(workload, gangs, seed) -> scheduler -> cell."""
    out: dict = {}
    for c in cells:
        out.setdefault((c["workload"], c["gangs"], c["seed"]), {})[c["scheduler"]] = c
    return out


def _ratio(a, b):
    return a / b if a is not None and b else None


def excess(c: dict):
    """cost / the trace's lower bound - 1 (None without a bound)."""
    b = c.get("cost_lower_bound")
    return c["cost"] / b - 1 if b and c["cost"] is not None else None


def check(eff: dict, ray: dict, ffd: dict) -> dict:
    """The per-cell targets for an efficient cell against Ray's and FFD's: target
    -> met (None when a figure is missing, e.g. no prices, or the target is not the
    workload's: the services targets)."""
    best = (lambda k: min(ray[k], ffd[k]) if ray[k] is not None and ffd[k] is not None
            else None)
    launches = max(eff["launches"], 1)
    services = str(eff.get("workload", "")).startswith(SERVICES)
    e, f = excess(eff), excess(ffd)
    return {
        TARGETS[0]: None if best("cost") is None else eff["cost"] <= best("cost"),
        TARGETS[1]: eff["gpu_hours"] <= best("gpu_hours"),
        TARGETS[2]: eff["node_hours"] <= ray["node_hours"],
        TARGETS[3]: eff["pending_p95_s"] <= 1.05 * ray["pending_p95_s"],
        TARGETS[4]: eff["pending_p50_s"] <= 1.10 * ray["pending_p50_s"],
        TARGETS[5]: eff["cancelled_before_join"] <= 0.05 * launches,
        TARGETS[6]: None if e is None or f is None else e <= 0.75 * f,
        TARGETS[7]: eff.get("cancelled_after_request", 0) <= 0.02 * launches,
        TARGETS[8]: (None if not services or best("cost") is None
                     else eff["cost"] <= 0.97 * best("cost")),
        TARGETS[9]: None if not services else eff["gpu_hours"] <= ray["gpu_hours"],
    }


def _fmt(x, spec=".1f") -> str:
    return "-" if x is None else format(x, spec)


def table(cells) -> str:
    """The suite's markdown table: every cell's figures, ratios to Ray's (engine) and to
    the better of Ray and FFD for the efficient modes, and the targets missed."""
    head = ("| workload | gangs | seed | scheduler | GPU-h | node-h | cost | p50 s | p95 s | "
            "launches | cancelled queued / after request | restarts | tick p50 / max ms | "
            "cost / bound | cost / best | GPU-h / best | node-h / Ray | p50 / Ray | p95 / Ray "
            "| targets missed |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (w, g, s), row in _group(cells).items():
        ray, ffd = row.get("engine"), row.get("baseline")
        for name, c in row.items():
            ratios = ["", "", "", "", ""]
            missed = ""
            if ray and ffd and name not in ("engine", "baseline"):
                best = {k: min(x for x in (ray[k], ffd[k]) if x is not None)
                        if ray[k] is not None or ffd[k] is not None else None
                        for k in ("cost", "gpu_hours")}
                ratios = [_fmt(_ratio(c["cost"], best["cost"]), ".3f"),
                          _fmt(_ratio(c["gpu_hours"], best["gpu_hours"]), ".3f"),
                          _fmt(_ratio(c["node_hours"], ray["node_hours"]), ".3f"),
                          _fmt(_ratio(c["pending_p50_s"], ray["pending_p50_s"]), ".2f"),
                          _fmt(_ratio(c["pending_p95_s"], ray["pending_p95_s"]), ".2f")]
                missed = ", ".join(t for t, ok in check(c, ray, ffd).items() if ok is False)
                missed = missed or "none"
            if c["cost_lower_bound"] is not None and c["cost"] is not None \
                    and c["cost_lower_bound"] > c["cost"]:
                missed = "BOUND ABOVE COST " + missed
            lines.append(
                f"| {w} | {g:g} | {s} | {name} | {c['gpu_hours']:.1f} | {c['node_hours']:.1f} "
                f"| {_fmt(c['cost'])} | {c['pending_p50_s']:.0f} | {c['pending_p95_s']:.0f} | "
                f"{c['launches']} | {c['cancelled_queued']} / {c['cancelled_after_request']} | "
                f"{c['restarts']} | {c['tick_p50_ms']:.1f} / {c['tick_max_ms']:.0f} | "
                f"{_fmt(_ratio(c['cost'], c['cost_lower_bound']), '.3f')} | "
                + " | ".join(ratios) + f" | {missed} |")
    return "\n".join(lines)


def _pct0(x: float) -> str:
    """A share as a whole percentage, never "-0"."""
    s = f"{100 * x:.0f}"
    return "0" if s == "-0" else s


def bound_table(cells) -> str:
    """Per window: the trace's lower bounds, each scheduler's cost as a multiple of the
    cost bound, and where its excess goes (``excess.excess_parts``, as % of the bound:
    booting / up while arriving beyond the bound / up in the tail beyond it / rest)."""
    groups = _group(cells)
    names = [n for n in SCHEDULERS if any(n in r for r in groups.values())]
    head = ("| workload | gangs | seed | cost bound | GPU-h bound | " + " | ".join(
        f"{n}: cost / bound (boot / arriving / tail / rest %)" for n in names)
        + " | efficient excess / FFD's |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for (w, g, s), row in groups.items():
        any_c = next(iter(row.values()))
        cols = []
        for n in names:
            c = row.get(n)
            parts = excess_parts((c.get("split") or {}).get("cost"), c["cost"],
                                 c["cost_lower_bound"]) if c else {}
            pct = {k: _pct0(v) for k, v in parts.items()}
            cols.append("-" if not parts else
                        f"{1 + parts['excess']:.3f} ({pct['booting']} / "
                        f"{pct['while arriving']} / {pct['in the tail']} / {pct['rest']})")
        e = excess(row["efficient"]) if "efficient" in row else None
        f = excess(row["baseline"]) if "baseline" in row else None
        lines.append(f"| {w} | {g:g} | {s} | {_fmt(any_c['cost_lower_bound'])} | "
                     f"{any_c['gpu_hours_lower_bound']:.1f} | " + " | ".join(cols)
                     + f" | {_fmt(_ratio(e, f), '.2f')} |")
    return "\n".join(lines)


def averages(cells, scheduler: str = "efficient") -> dict:
    """Over the suite's cells: the mean of ``scheduler``'s cost / the better of Ray's and
    FFD's (the suite-wide target: <= 0.90), and the cells meeting every target."""
    ratios, met, n, over = [], 0, 0, []
    for row in _group(cells).values():
        ray, ffd, c = row.get("engine"), row.get("baseline"), row.get(scheduler)
        if not (ray and ffd and c):
            continue
        n += 1
        e, f = excess(c), excess(ffd)
        if e is not None and f:
            over.append(e / f)
        met += all(ok is not False for ok in check(c, ray, ffd).values())
        best = min(x for x in (ray["cost"], ffd["cost"]) if x is not None) \
            if ray["cost"] is not None else None
        if best and c["cost"] is not None:
            ratios.append(c["cost"] / best)
    return {"cells": n, "cells_meeting_every_target": met,
            "mean_cost_over_best": sum(ratios) / len(ratios) if ratios else None,
            "excess_over_ffd_excess_max": max(over) if over else None}


# ---- when the cloud says no: the targets (docs/capacity.md) ----------------------------------

def cloud_targets(cells) -> list:
    """Per cloud cell, each target of docs/capacity.md against Ray's decisions (the
    ``engine`` cell of the same workload and seed): (workload, seed, scheduler, target,
    met, figures). Stock-outs: never placed, stock-out calls and cost at most Ray's,
    p95 at most 1.10 x. Launch failures: pods placed and p95 within 5 % of Ray's.
    Limits: the peak asked never above the GPU limit. Spot: the efficient mode's cost
    below its own on the plain mix (on-demand only)."""
    rows, groups = [], _group(cells)
    for (w, g, s), row in groups.items():
        ray = row.get("engine")
        for name, c in row.items():
            if w.startswith("limit70-") and c["limit_gpu"] is not None:
                rows.append((w, s, name, "peak GPU <= limit", c["peak_gpu"] <= c["limit_gpu"]
                             + 1e-6, f"{c['peak_gpu']:g} of {c['limit_gpu']:g}, "
                             f"{c['limit_blocked_ticks']} ticks held back"))
            if w.startswith("spot-") and name.startswith("efficient"):
                od = groups.get((w[len("spot-"):], 0.0, s), {}).get(name)
                if od is not None and c["cost"] is not None and od["cost"] is not None:
                    rows.append((w, s, name, "cost < on-demand only", c["cost"] < od["cost"],
                                 f"{c['cost']:.0f} vs {od['cost']:.0f}; lost GPU-h "
                                 f"{c['lost_gpu_hours']:.1f}, {c['interruptions']} "
                                 f"interruptions"))
            if ray is None or name == "engine":
                continue
            if w.startswith("stockout-"):
                for t, ok, fig in (
                        ("never placed <= Ray", c["never_placed"] <= ray["never_placed"],
                         f"{c['never_placed']} vs {ray['never_placed']}"),
                        ("stockouts <= Ray", c["stockouts"] <= ray["stockouts"],
                         f"{c['stockouts']} vs {ray['stockouts']}"),
                        ("p95 <= 1.10 x Ray", c["pending_p95_s"] <= 1.10 * ray["pending_p95_s"],
                         f"{c['pending_p95_s']:.0f} vs {ray['pending_p95_s']:.0f} s"),
                        ("cost <= Ray", c["cost"] is None or c["cost"] <= ray["cost"],
                         f"{_fmt(c['cost'], '.0f')} vs {_fmt(ray['cost'], '.0f')}")):
                    rows.append((w, s, name, t, ok, fig))
            if w.startswith("launchfail-"):
                for t, ok, fig in (
                        ("placed >= 0.95 x Ray", c["placed"] >= 0.95 * ray["placed"],
                         f"{c['placed']} vs {ray['placed']}"),
                        ("p95 <= 1.05 x Ray", c["pending_p95_s"] <= 1.05 * ray["pending_p95_s"],
                         f"{c['pending_p95_s']:.0f} vs {ray['pending_p95_s']:.0f} s")):
                    rows.append((w, s, name, t, ok, fig))
    return rows


def cloud_table(cells) -> str:
    rows = cloud_targets(cells)
    if not rows:
        return ""
    lines = ["| workload | seed | scheduler | target | met | figures |", "|---|---|---|---|---|---|"]
    lines += [f"| {w} | {s} | {n} | {t} | {'yes' if ok else '**no**'} | {fig} |"
              for w, s, n, t, ok, fig in rows]
    met = sum(ok for *_, ok, _ in rows)
    return "\n".join(lines + ["", f"cloud targets met: {met} of {len(rows)}"])


def bound_violations(cells) -> list:
    """Cells whose lower bound is above their cost or GPU-hours (a bug if any)."""
    return [c for c in cells
            if (c["cost_lower_bound"] is not None and c["cost"] is not None
                and c["cost_lower_bound"] > c["cost"])
            or c["gpu_hours_lower_bound"] > c["gpu_hours"] + 1e-9]


# ---- the command ---------------------------------------------------------------------------

def _pick(spec, known, what):
    if spec is None:
        return list(known)
    names = [s.strip() for s in spec.split(",") if s.strip()]
    bad = [n for n in names if n not in known]
    if bad or not names:
        raise SystemExit(f"--{what}: unknown {', '.join(bad) or '(empty)'}; "
                         f"choose from {', '.join(known)}")
    return names


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="seed 0 only")
    ap.add_argument("--seeds", default=None, help="comma-separated seeds (default 0,1,2,3)")
    ap.add_argument("--workloads", default=None,
                    help=f"comma-separated, of {', '.join(w.name for w in ALL_WORKLOADS)} "
                         f"(default: {', '.join(w.name for w in WORKLOADS)})")
    ap.add_argument("--cloud", action="store_true",
                    help="the cloud-refusal workloads (stockout-*, launchfail-*, spot-*, "
                         "limit70-*) and the four plain openb mixes they are compared "
                         "with, instead of the default workloads")
    ap.add_argument("--schedulers", default=None,
                    help=f"comma-separated (default {','.join(SCHEDULERS)})")
    ap.add_argument("--out", default="suite-out",
                    help="directory for suite.json, suite.md and suite.png (default suite-out)")
    ap.add_argument("--cells", default=None,
                    help="comma-separated suite.json files of earlier runs: merge their cells "
                         "and write the table, plot and suite.json again (no replay)")
    args = ap.parse_args(argv)
    if args.cells:
        return merge([p for p in args.cells.split(",") if p], args.out)
    by_name = {w.name: w for w in ALL_WORKLOADS}
    # --cloud: the cloud workloads and the plain mixes they are compared with (the spot
    # target compares with the plain mix, limit70 takes its limit from its peak)
    cloud = [w for w in WORKLOADS if w.trace in STOCKOUT_GROUPS] + list(CLOUD_WORKLOADS)
    default = ",".join(w.name for w in (cloud if args.cloud else WORKLOADS))
    workloads = [by_name[n] for n in _pick(args.workloads or default, by_name, "workloads")]
    schedulers = _pick(args.schedulers, SCHEDULERS, "schedulers")
    if args.quick and args.seeds:
        raise SystemExit("--quick is seed 0: leave out --seeds")
    try:
        seeds = [0] if args.quick else ([int(s) for s in args.seeds.split(",")]
                                        if args.seeds else list(SEEDS))
    except ValueError:
        raise SystemExit(f"--seeds: comma-separated integers, got {args.seeds!r}") from None
    os.makedirs(args.out, exist_ok=True)
    out_json = os.path.join(args.out, "suite.json")
    from vecsched.engine import warmup
    warmup()
    meta = {"seeds": seeds, "schedulers": schedulers,
            "workloads": {w.name: {"trace": w.trace, "window": repr(w.window),
                                   "gangs": list(w.gangs)} for w in workloads}}
    cells: list = []
    t_start = time.perf_counter()

    def on_cell(c, seconds):
        cells.append(c)
        with open(out_json, "w") as f:
            json.dump({"cells": cells, "meta": meta}, f, indent=1)
        print(f"[{time.perf_counter() - t_start:6.0f} s] {c['workload']} gangs {c['gangs']:g} "
              f"seed {c['seed']} {c['scheduler']}: {seconds:.1f} s", file=sys.stderr,
              flush=True)
    run_cells(workloads, seeds, schedulers, on_cell=on_cell)
    meta["wall_s"] = time.perf_counter() - t_start
    write_outputs(cells, meta, args.out)
    return 0


def merge(paths, out: str) -> int:
    """``--cells``: the cells of earlier runs (e.g. Ray and FFD in one run, the efficient
    modes in another) as one suite: the bound of each window the least over all its
    runs', the table, the plot and suite.json written again into ``out``."""
    cells, meta = [], {"merged_from": list(paths), "wall_s": 0.0}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        cells += doc["cells"]
        meta["wall_s"] += float(doc["meta"].get("wall_s", 0.0))
        for k in ("seeds", "schedulers", "workloads"):
            v = doc["meta"].get(k)
            if isinstance(v, list):
                meta[k] = list(dict.fromkeys(meta.get(k, []) + v))
            elif isinstance(v, dict):
                meta[k] = {**meta.get(k, {}), **v}
    order = {n: i for i, n in enumerate(SCHEDULERS)}
    names = [w.name for w in ALL_WORKLOADS]
    cells.sort(key=lambda c: (names.index(c["workload"]) if c["workload"] in names else 99,
                              c["gangs"], c["seed"], order.get(c["scheduler"], 99)))
    for group in _group(cells).values():
        common_bounds(list(group.values()))
    os.makedirs(out, exist_ok=True)
    write_outputs(cells, meta, out)
    return 0


def write_outputs(cells, meta: dict, out: str) -> None:
    """suite.json (the cells, meta with the averages), suite.md (the tables and the
    averages, also printed) and suite.png in ``out``."""
    schedulers = list(dict.fromkeys(c["scheduler"] for c in cells))
    avg = {name: averages(cells, name) for name in schedulers
           if name not in ("engine", "baseline")}
    meta["averages"] = avg
    meta["bound_violations"] = len(bound_violations(cells))
    out_json = os.path.join(out, "suite.json")
    with open(out_json, "w") as f:
        json.dump({"cells": cells, "meta": meta}, f, indent=1)
    lines = [table(cells), "", bound_table(cells), ""] + [
        f"{name}: {a['cells_meeting_every_target']} of {a['cells']} cells meet every target; "
        f"mean cost / best of Ray and FFD {_fmt(a['mean_cost_over_best'], '.3f')} "
        f"(target <= 0.90); efficient excess over the bound at most "
        f"{_fmt(a['excess_over_ffd_excess_max'], '.2f')} x FFD's (target <= 0.75)"
        for name, a in avg.items()]
    lines.append(f"cells with the bound above the cost or GPU-hours: "
                 f"{meta['bound_violations']} (must be 0)")
    cloud = cloud_table(cells)
    if cloud:
        lines += ["", cloud]
    lines.append(f"wall time {meta['wall_s']:.0f} s")
    print("\n".join(lines))
    with open(os.path.join(out, "suite.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    from bench.suite_plot import plot
    plot(cells, os.path.join(out, "suite.png"), _group, _ratio, SCHEDULERS)
    print(f"wrote {out_json}, suite.md, suite.png in {out}")


if __name__ == "__main__":
    raise SystemExit(main())
