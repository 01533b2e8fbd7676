"""What a replay measures, per tick and at the end. ``DEFINITIONS`` holds the one-line
definitions the report prints under its table (and ``vecsched replay --help`` points to).

Definitions (all times simulated, except the scheduler's and the replay's wall time):

- **pending time**: for every placement, the time from the unit becoming pending
  (its arrival, or its requeue after losing its node) to being placed. Units still
  pending at the end, other than the ones the scheduler calls infeasible, count with
  their wait so far (a lower bound), so leaving demand unplaced never looks fast.
- **node-hours** of an instance: from its cloud instance being allocated (ALLOCATED) to
  TERMINATED or the end of the replay, i.e. what a cloud bills, boot time included (the
  head too). **GPU-hours** = node-hours x the type's GPUs. **cost** = node-hours x the
  worker group's ``price`` per node-hour, summed over the priced groups (the head has
  no price); shown only when some group has a price.
- **utilisation** (CPU, GPU): resource-hours held by running units / resource-hours of
  the allocated nodes (so boot time and idle time both lower it).
- **instances** (workers; ``accounting.py``, from the store's records and the simulated
  cloud's own record, identities checked every replay): *decided* (records the
  scheduler's launches created, QUEUED), *requested* from the cloud (launch calls),
  *allocated* by the cloud, *failed* launch calls, *running* (the ray node joined),
  *never launched* (never left QUEUED: cancelled, or still queued at the end).
- **running / allocated instances per tick** (the plots, peak and mean): records whose
  ray node is up (RAY_RUNNING, or draining) / whose cloud instance exists (ALLOCATED up
  to TERMINATED: what node-hours bill), the head included.
- **terminations**: the scheduler's terminations the instance store applied, by cause;
  a termination of an instance whose ray node never joined (QUEUED, ALLOCATED,
  RAY_INSTALLING) is a launch cancelled and counts under its own cause,
  ``CANCELLED_BEFORE_JOIN``, whatever cause the scheduler gave (the efficient mode's
  ``cancel_pending`` says IDLE). **cancelled before join** counts them, by stage:
  *queued* (never requested from the cloud: free) and *booting* (allocated: billed
  from ALLOCATED to TERMINATED for nothing). **cancelled after request** is the booting
  count (cloud churn: the cloud was asked); **cancelled queued** the queued one
  (re-planning of launches that never left QUEUED: not cloud churn).
- **lower bounds** (``bounds.py``): ``cost_lower_bound`` / ``gpu_hours_lower_bound``,
  the least any schedule could pay for the trace's work with this run's start delays:
  the covering LP of the work alive at each tick (the cheapest fractional mix of worker
  groups holding it, every resource column, per-node packing relaxed) priced by its
  duals, each unit at its worst start within its own delay; provably below this run's
  cost. ``lower_bound`` adds the LP integrated over the trace's alive sets (every unit
  starting on arrival) and the run's longest start delay. ``vecsched replay`` and the
  suite report, per trace window, the least of their runs' bounds (valid for all).
- **requeued**: units that lost their node while running (preempted, or stopped by a
  termination that was not idle: ``efficient-consolidate``'s CONSOLIDATE) and went back
  to pending to restart; **lost CPU-hours / GPU-hours**: the CPU- and GPU-hours they
  had run, thrown away.
- **launches held back**: the reconciler's QUEUED -> REQUESTED step (``LaunchStep``)
  left records QUEUED because of ``max_concurrent_launches`` or ``upscaling_speed``; a
  warning names the knob when it did so in at least ``HELD_SHARE`` of the ticks that
  had records to launch, and in at least ``HELD_MIN_TICKS`` ticks.
- **never placed** = units pending at the end = **infeasible** (units of the last tick's
  infeasible list, and the members of the placement groups it called infeasible) +
  **still pending**; **placed** = every other unit. The replay asserts units in =
  placed + still pending + infeasible.
- **tick time**: wall time of the scheduler call proper (``scheduler.seconds``:
  ``EngineScheduler.schedule(request)`` for the engine, decode and encode included;
  Ray's ``schedule(request)``; the baseline's ``build_problem`` and packing). Building
  the request (Ray's reconciler's work) and the --check-ray call to Ray are not included.
"""
from __future__ import annotations

from collections import Counter

import numpy as np

from vecsched.engine.model.dtypes import Cause, Status

from .disruption import DisruptionMetrics, disruption_summary

S = Status
_RAY_UP = (S.RAY_RUNNING, S.RAY_STOP_REQUESTED, S.RAY_STOPPING)
_NOT_ALLOCATED = (S.QUEUED, S.REQUESTED, S.TERMINATED, S.ALLOCATION_FAILED)

# The launch-limit warning: a knob held launches back in at least this share of the
# ticks whose launch step had QUEUED records, and in at least this many ticks.
HELD_SHARE = 0.25
HELD_MIN_TICKS = 5
KNOBS = {"max_concurrent_launches": "--max-launches", "upscaling_speed": "--upscaling-speed"}

DEFINITIONS = (
    "node-hours: allocated (ALLOCATED) to TERMINATED, boot included, head included; "
    "cost: node-hours x the group's price per node-hour (priced groups only)",
    "instances (workers): decided = records the scheduler's launches created (QUEUED); "
    "requested = launch calls the simulated cloud received; allocated / failed = what it "
    "answered; running = the ray node joined; never launched = never left QUEUED",
    "running / allocated per tick (peak / mean, plots): ray node up / cloud instance "
    "billed, head included; launches held back: ticks whose QUEUED -> REQUESTED step left "
    "records queued by that limit",
    "requeued: units whose node went away while they ran, restarted from scratch; lost "
    "CPU-h / GPU-h: what they had run",
    "cancelled before join (queued / booting): the scheduler's terminations of instances "
    "whose ray node never joined, counted under the cause CANCELLED_BEFORE_JOIN (not IDLE); "
    "cancelled after request = booting (the cloud was asked), cancelled queued = queued",
    "stockouts / launch failures / interruptions: the simulated cloud's refusals (a launch "
    "over a group's capacity, a failed launch call, a spot instance taken back); peak "
    "asked: per resource (and cost_per_hour) the peak total of every instance from QUEUED "
    "to running; limit blocked ticks: ticks on which a --limit held demand back "
    "(docs/capacity.md)",
    "cost / GPU-hours lower bound: the trace's covering LP per tick (cheapest fractional "
    "mix of worker groups holding the work then), priced by its duals at the runs' start "
    "delays: no schedule with those delays pays less (adapters/replay/bounds.py)",
    "restarts = requeued; drained: consolidation drains ended (deadline hit: with work "
    "still running); disrupted max: most nodes stopping at once for a non-idle cause; "
    "relaunch: consolidations followed within 10 min by a launch of the same type",
)
CANCELLED = "CANCELLED_BEFORE_JOIN"     # the terminations_by_cause key of a cancelled launch


def _pct(x, q) -> float:
    return float(np.percentile(x, q)) if len(x) else 0.0


class Metrics:
    """Per-tick samples and applied-decision counters of one replay."""

    def __init__(self, type_names):
        self.type_names = list(type_names)
        self.type_index = {t: i for i, t in enumerate(self.type_names)}
        self.t: list[float] = []
        self.pending: list[int] = []
        self.tick_s: list[float] = []
        self.running: list[np.ndarray] = []
        self.allocated: list[np.ndarray] = []
        self.queued: list[int] = []
        self.requested: list[int] = []
        self.launches = 0
        self.launches_by_type: Counter = Counter()
        self.terminations: Counter = Counter()        # by cause name
        self.cancelled: Counter = Counter()           # cancelled before join, by stage
        self.rejected_ticks = 0
        self.rejections: list[str] = []
        self.launch_ticks = 0                         # launch steps with QUEUED records
        self.held_ticks: Counter = Counter()          # knob -> ticks it held launches
        self.held_records: Counter = Counter()        # knob -> records held, summed
        self.disruption = DisruptionMetrics()         # restarts, drains (disruption.py)

    def applied(self, moves) -> None:
        for m in moves:
            if m.create:
                self.launches += 1
                self.launches_by_type[m.instance_type] += 1
            elif m.cause is not None and m.cancelled_before_join:
                self.terminations[CANCELLED] += 1
                self.cancelled["queued" if m.to_status == S.TERMINATED else "booting"] += 1
            elif m.cause is not None:
                self.terminations[Cause.NAMES.get(m.cause, str(m.cause))] += 1

    def launch_step(self, step) -> None:
        """The reconciler's launch step of one tick (``lifecycle.LaunchStep``)."""
        if not step.queued:
            return
        self.launch_ticks += 1
        for knob, n in (("max_concurrent_launches", step.held_by_concurrency),
                        ("upscaling_speed", step.held_by_speed)):
            if n:
                self.held_ticks[knob] += 1
                self.held_records[knob] += n

    def rejected(self, now: float, why: str) -> None:
        self.rejected_ticks += 1
        if len(self.rejections) < 5:
            self.rejections.append(f"t={now:.0f}s: {why}")

    def tick(self, now: float, pending: int, seconds: float, store) -> None:
        T = len(self.type_names)
        running = np.zeros(T, dtype=np.int32)
        allocated = np.zeros(T, dtype=np.int32)
        queued = requested = 0
        for rec in store:
            s = rec.status
            if s == S.QUEUED:
                queued += 1
            elif s == S.REQUESTED:
                requested += 1
            if s not in _NOT_ALLOCATED:
                i = self.type_index[rec.instance_type]
                allocated[i] += 1
                if s in _RAY_UP:
                    running[i] += 1
        self.t.append(now)
        self.pending.append(int(pending))
        self.tick_s.append(float(seconds))
        self.running.append(running)
        self.allocated.append(allocated)
        self.queued.append(queued)
        self.requested.append(requested)
        self.disruption.tick(store)

    def series(self) -> dict:
        T = len(self.type_names)

        def stack(rows):
            return np.vstack(rows) if rows else np.zeros((0, T), dtype=np.int32)
        return {"t_s": np.asarray(self.t), "pending": np.asarray(self.pending),
                "tick_s": np.asarray(self.tick_s), "running": stack(self.running),
                "allocated": stack(self.allocated),
                "queued": np.asarray(self.queued, dtype=np.int64),
                "requested": np.asarray(self.requested, dtype=np.int64)}

    def launch_limits(self, config, launched: int) -> dict:
        """Launches held back, per knob, and the warnings (see the module docstring);
        ``launched``: the instances that left QUEUED, for the mean wait."""
        out = {"launch_ticks": self.launch_ticks, "warnings": []}
        for knob, flag in KNOBS.items():
            n = self.held_ticks[knob]
            out[f"held_ticks_{knob}"] = n
            out[f"held_records_{knob}"] = self.held_records[knob]
            if n >= HELD_MIN_TICKS and n >= HELD_SHARE * self.launch_ticks:
                wait = self.held_records[knob] * config.tick_s / max(launched, 1)
                out["warnings"].append(
                    f"{knob} ({getattr(config, knob):g}, {flag}) held launches back in {n} "
                    f"of the {self.launch_ticks} ticks with instances to launch "
                    f"({n / self.launch_ticks:.0%}); launched instances waited {wait:.0f} s "
                    f"on average for it (part of the pending time is the limit's, not the "
                    f"scheduler's: raise {flag} to see the scheduler alone)")
        return out


def _node_seconds(store, end_ns: int) -> Counter:
    out: Counter = Counter()
    for rec in store:
        alloc = rec.times_ns(S.ALLOCATED)
        if not alloc:
            continue
        start = min(alloc)
        stop = rec.times_ns(S.TERMINATED)
        stop = min(stop) if stop else end_ns
        out[rec.instance_type] += max(0, stop - start) / 1e9
    return out


def cost(node_h: dict, prices: dict) -> dict:
    """``cost`` (None when no worker group has a price), ``cost_by_type`` and the
    node-hours of groups used without a price (``unpriced_node_hours``; the head is
    never priced and not counted there)."""
    priced = {k: v for k, v in prices.items() if v is not None}
    if not priced:
        return {"cost": None, "cost_by_type": {}, "unpriced_node_hours": 0.0}
    by = {k: h * float(priced[k]) for k, h in node_h.items() if k in priced}
    unpriced = sum(h for k, h in node_h.items() if k in prices and k not in priced)
    return {"cost": float(sum(by.values())), "cost_by_type": by,
            "unpriced_node_hours": float(unpriced)}


def summarize(trace, config, world, metrics: Metrics, *, check, warm, last, gang_name,
              end_s: float, wall_s: float) -> dict:
    """The end-of-replay metrics (see the module docstring) of a replay of ``trace``
    under ``config``: its ``world.World`` at ``end_s``, its ``metrics``, its scheduler's
    ``check`` (``RayCheck`` or None), its ``warm_start.WarmStart``, the last tick's
    decision ``last`` and the placement groups' names ``gang_name``
    (``pending_demand.demand_summary``)."""
    from .accounting import count_instances
    from .bounds import replay_bounds
    from .pending_demand import demand_summary
    m = metrics
    c = world.cluster
    d, waits = demand_summary(trace, c, last, gang_name, end_s)
    end_ns = int(round(end_s * 1e9))
    node_s = _node_seconds(world.store, end_ns)
    types = {t.name: t for t in trace.types}
    node_h = {k: v / 3600 for k, v in sorted(node_s.items()) if v > 0}
    gpu_h = {k: v * float(types[k].resources.get("GPU", 0.0))
             for k, v in node_h.items() if types[k].resources.get("GPU", 0.0) > 0}
    cap = {r: sum(v * float(types[k].resources.get(r, 0.0)) for k, v in node_s.items())
           for r in ("CPU", "GPU")}
    used = {r: float(c.used_seconds[c.col[r]]) if r in c.col else 0.0 for r in ("CPU", "GPU")}
    inst = count_instances(world.store, world.provider.cloud, m.launches_by_type, end_ns,
                           head_ids=("head", *warm.ids))
    ticks = np.asarray(m.tick_s)
    running = np.vstack(m.running).sum(axis=1) if m.running else np.zeros(1)
    allocated = np.vstack(m.allocated).sum(axis=1) if m.allocated else np.zeros(1)
    limits = m.launch_limits(config, inst["total"]["launched"])
    return {
        **d,
        "lost_cpu_hours": (float(c.lost_seconds[c.col["CPU"]]) / 3600 if "CPU" in c.col
                           else 0.0),
        "pending_p50_s": _pct(waits, 50),
        "pending_p95_s": _pct(waits, 95),
        "pending_p99_s": _pct(waits, 99),
        "node_hours": sum(node_h.values()),
        "gpu_hours": sum(gpu_h.values()),
        "node_hours_by_type": node_h,
        "gpu_hours_by_type": gpu_h,
        **cost(node_h, trace.prices),
        "price_source": trace.price_source,
        "util_cpu": used["CPU"] / cap["CPU"] if cap["CPU"] else 0.0,
        "util_gpu": used["GPU"] / cap["GPU"] if cap["GPU"] else 0.0,
        "instances": inst["total"],
        "instances_by_type": inst["by_type"],
        "peak_running": int(running.max()),
        "mean_running": float(running.mean()),
        "peak_allocated": int(allocated.max()),
        "mean_allocated": float(allocated.mean()),
        "peak_queued": int(max(m.queued, default=0)),
        "terminations": sum(m.terminations.values()),
        "terminations_by_cause": dict(sorted(m.terminations.items())),
        "cancelled_before_join": sum(m.cancelled.values()),
        "cancelled_before_join_by_stage": {k: m.cancelled[k] for k in ("queued", "booting")},
        # churn counted honestly: the cloud was asked (booting) / re-planning (queued)
        "cancelled_after_request": m.cancelled["booting"],
        "cancelled_queued": m.cancelled["queued"],
        # the trace's lower bounds, valid for this run (bounds.py)
        **replay_bounds(trace, config, c, end_s),
        "launch_limits": limits,
        "ticks": len(m.t),
        "rejected_ticks": m.rejected_ticks,
        "rejections": list(m.rejections),
        "tick_p50_ms": _pct(ticks, 50) * 1e3,
        "tick_p99_ms": _pct(ticks, 99) * 1e3,
        "tick_max_ms": float(ticks.max() * 1e3) if ticks.size else 0.0,
        "scheduler_s": float(ticks.sum()),
        "check_ray_s": check.seconds if check is not None else 0.0,
        "wall_s": wall_s,
        "sim_end_s": end_s,
        "provider": dict(world.provider.stats),
        "warm_start": dict(warm.info),
        **disruption_summary(c, world.drains, m.disruption),   # restarts, drains, disruption
    }
