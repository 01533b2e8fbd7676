"""When the simulated cloud says no, in a replay: per-group cloud behaviour, the
cloud's answers handed to the schedulers, the user's limits, and what is measured.

- **Per worker group** (``GroupCloud``; the worker-group table's optional columns
  ``capacity``, ``capacity_schedule``, ``launch_failure_rate``, ``spot``,
  ``interruption_rate_per_h``, and ``vecsched replay --capacity GROUP=N``): the live
  instances the cloud will give (None: unlimited; a schedule changes it over time:
  ``"0:10,600:2,1800:none"`` = 10 from t = 0, 2 from 600 s, unlimited from 1800 s), the
  share of launch calls that error, and for a spot group the rate (per instance-hour)
  at which running instances are taken back. A launch over capacity is a stock-out:
  the record goes to ALLOCATION_FAILED with the cloud's capacity error in its details.
- **The answers** (``CloudFeed``): every tick, the records that failed, landed or were
  taken back since the last tick, as the instance records Ray's reconciler hands its
  scheduler (``Instance`` messages with their status history and details). They go
  into the request of the engine-backed schedulers (``EngineScheduler`` keeps its
  availability memory from them, as inside Ray), into the baseline's memory, and into
  ``RayCloudMonitor``, which derives Ray's two availability maps (docs/ray-semantics.md
  §14) for every scheduler's request, Ray's own included.
- **Limits** (``vecsched replay --limit RESOURCE=N``, ``GROUP/RESOURCE=N`` for one
  group; ``cost_per_hour`` priced by the worker groups): handed to the engine-backed
  schedulers and the baseline (Ray's own scheduler has none).
- **Measured** (``CapacityMetrics``): ``stockouts``, ``launch_failures`` and
  ``interruptions`` (the cloud's answers), ``peak_asked`` (per resource, the peak over
  ticks of the totals of every instance from QUEUED to running, after the tick's
  launches; ``cost_per_hour`` from the prices), ``limit_violations`` (limits that peak
  exceeded) and ``limit_blocked_ticks`` (ticks on which a limit held demand back).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Mapping, Optional

from vecsched.adapters.traces.schema import CLOUD_COLUMNS, capacity_schedule
from vecsched.engine.tick import COST, Limits


@dataclass(frozen=True)
class GroupCloud:
    """How the simulated cloud treats one worker group (None: the replay's default)."""
    capacity: Optional[int] = None
    schedule: tuple = ()                    # ((from_s, capacity or None), ...) ascending
    launch_failure_rate: Optional[float] = None
    spot: bool = False
    interruption_rate_per_h: Optional[float] = None

    def __post_init__(self):
        if self.capacity is not None and (not isinstance(self.capacity, int)
                                          or isinstance(self.capacity, bool)
                                          or self.capacity < 0):
            raise ValueError(f"capacity must be an integer >= 0 or None, got {self.capacity!r}")
        for name, hi in (("launch_failure_rate", 1.0), ("interruption_rate_per_h", math.inf)):
            v = getattr(self, name)
            if v is not None and (not isinstance(v, (int, float)) or isinstance(v, bool)
                                  or not math.isfinite(v) or not 0 <= v <= hi):
                raise ValueError(f"{name} must be a finite number within [0, {hi:g}], "
                                 f"got {v!r}")
        times = [t for t, _ in self.schedule]
        if any(not isinstance(t, (int, float)) or isinstance(t, bool) or not math.isfinite(t)
               or t < 0 for t in times) or times != sorted(times):
            raise ValueError(f"capacity schedule: times must be finite, >= 0 and ascending, "
                             f"got {times}")
        for _, c in self.schedule:
            if c is not None and (not isinstance(c, int) or isinstance(c, bool) or c < 0):
                raise ValueError(f"capacity schedule: each capacity must be an integer >= 0 "
                                 f"or None, got {c!r}")

    def capacity_at(self, t_s: float) -> Optional[int]:
        cap = self.capacity
        for at, c in self.schedule:
            if at <= t_s:
                cap = c
        return cap


def parse_schedule(text: str, where: str) -> tuple:
    """``"0:10,600:2,1800:none"`` -> ((0.0, 10), (600.0, 2), (1800.0, None)), the
    worker-group table's ``capacity_schedule`` format."""
    try:
        return capacity_schedule(text)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def group_clouds(table) -> dict:
    """``GroupCloud`` per worker group of a (validated) worker-group table that sets
    any of its cloud columns."""
    out = {}
    for row in table.select(["type"] + list(CLOUD_COLUMNS)).to_pylist():
        if all(row[k] is None for k in CLOUD_COLUMNS):
            continue
        sched = row["capacity_schedule"]
        out[row["type"]] = GroupCloud(
            capacity=row["capacity"], schedule=capacity_schedule(sched) if sched else (),
            launch_failure_rate=row["launch_failure_rate"], spot=bool(row["spot"]),
            interruption_rate_per_h=row["interruption_rate_per_h"])
    return out


def with_cloud(table, column: str, values: Mapping[str, object]):
    """A worker-group table with ``column`` (a cloud column) set for the groups in
    ``values`` (group -> value); other groups keep theirs."""
    import pyarrow as pa
    from vecsched.adapters.traces.schema import validate_worker_groups
    table = validate_worker_groups(table)
    unknown = sorted(set(values) - set(table.column("type").to_pylist()))
    if unknown:
        raise ValueError(f"{column}: no worker group named {', '.join(unknown)}")
    old = table.column(column).to_pylist()
    new = [values.get(t, o) for t, o in zip(table.column("type").to_pylist(), old)]
    i = table.schema.get_field_index(column)
    out = table.set_column(i, table.schema.field(i), pa.array(new, table.schema.field(i).type))
    return validate_worker_groups(out)


def spot_twins(table, discount: float, rate_per_h: float, suffix: str = "-spot"):
    """The worker-group table plus, after its groups, a spot twin of each priced group:
    the same shape, labels and bounds, named ``<group><suffix>``, priced ``discount``
    x the group's price, ``spot`` and interrupted at ``rate_per_h`` per running
    instance-hour."""
    import pyarrow as pa
    from vecsched.adapters.traces.schema import validate_worker_groups
    if not 0 < discount <= 1 or not rate_per_h >= 0:
        raise ValueError(f"spot twins: discount in (0, 1] and rate >= 0, got {discount!r}, "
                         f"{rate_per_h!r}")
    table = validate_worker_groups(table)
    rows = table.to_pylist()
    twins = []
    for r in rows:
        if r["price"] is None:
            continue
        twins.append(dict(r, type=r["type"] + suffix, price=r["price"] * discount, spot=True,
                          interruption_rate_per_h=float(rate_per_h)))
    out = pa.Table.from_pylist(rows + twins, schema=table.schema)
    return validate_worker_groups(out.replace_schema_metadata(table.schema.metadata))


def parse_capacity(text: str) -> tuple[str, GroupCloud]:
    """``GROUP=N`` or ``GROUP=TIME:N,TIME:N`` (``--capacity``)."""
    group, sep, value = str(text).partition("=")
    if not sep or not group.strip():
        raise ValueError(f"--capacity {text!r}: expected GROUP=N or GROUP=TIME:N,...")
    value = value.strip()
    if ":" in value:
        return group.strip(), GroupCloud(schedule=parse_schedule(value, f"--capacity {text!r}"))
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"--capacity {text!r}: N must be a whole number >= 0") from None
    if n < 0:
        raise ValueError(f"--capacity {text!r}: N must be >= 0")
    return group.strip(), GroupCloud(capacity=n)


def parse_limit(text: str) -> tuple[Optional[str], str, float]:
    """``RESOURCE=N`` (cluster-wide) or ``GROUP/RESOURCE=N`` (``--limit``)."""
    name, sep, value = str(text).partition("=")
    try:
        v = float(value)
    except ValueError:
        v = float("nan")
    group, slash, res = name.strip().rpartition("/")
    if not sep or not res.strip() or (slash and not group.strip()) or not math.isfinite(v) \
            or v < 0:
        raise ValueError(f"--limit {text!r}: expected RESOURCE=N (or GROUP/RESOURCE=N) with "
                         f"N a number >= 0; {COST} is the cost per hour")
    return (group.strip() if slash else None), res.strip(), v


def capacity_groups(capacity: Optional[Mapping[str, object]]) -> dict:
    """``ReplayConfig.capacity`` (group -> a count or a schedule string) as GroupCloud."""
    if capacity is not None and not isinstance(capacity, Mapping):
        raise ValueError(f"capacity must be a table of worker group -> N or \"TIME:N,...\", "
                         f"got {capacity!r}")
    out = {}
    for group, value in (capacity or {}).items():
        text = f"{group}={value}" if not isinstance(value, bool) else f"{group}=x"
        out[str(group)] = parse_capacity(text)[1]
    return out


def limit_items(limits: Optional[Mapping[str, float]]) -> list:
    """``ReplayConfig.limits`` ("RESOURCE" or "GROUP/RESOURCE" -> value) as parsed
    ``--limit`` items."""
    if limits is not None and not isinstance(limits, Mapping):
        raise ValueError(f"limits must be a table of \"RESOURCE\" or \"GROUP/RESOURCE\" -> N, "
                         f"got {limits!r}")
    return [parse_limit(f"{k}={v}") for k, v in (limits or {}).items()]


def merged_groups(table_groups: Mapping[str, GroupCloud],
                  capacity: Optional[Mapping[str, object]]) -> dict:
    """The worker table's cloud behaviour with ``ReplayConfig.capacity`` over its
    capacities (a flag's capacity replaces the table's count and schedule)."""
    out = dict(table_groups)
    for group, g in capacity_groups(capacity).items():
        base = out.get(group, GroupCloud())
        out[group] = replace(base, capacity=g.capacity, schedule=g.schedule)
    return out


def check_groups(config, trace) -> None:
    """ValueError naming the group when ``config.capacity`` or a per-group limit names
    no worker group of ``trace``, a limit names a resource none of the groups it covers
    offers (it would cap nothing: ``gpu`` for ``GPU``), or a ``cost_per_hour`` limit
    covers a group with no price."""
    names = [t.name for t in trace.types]
    for g in sorted(capacity_groups(config.capacity)):
        if g not in names:
            raise ValueError(f"--capacity {g}: no worker group named {g!r} (groups: "
                             f"{', '.join(names)})")
    offers = {t.name: {k for k, v in dict(t.resources).items() if float(v) > 0}
              for t in trace.types}
    for group, res, _ in limit_items(config.limits):
        if group is not None and group not in names:
            raise ValueError(f"--limit {group}/{res}: no worker group named {group!r}")
        covered = names if group is None else [group]
        have = sorted(set().union(*(offers[n] for n in covered)))
        if res != COST and res not in have:
            near = [r for r in have + [COST] if r.lower() == res.lower()]
            raise ValueError(f"--limit {res if group is None else f'{group}/{res}'}: "
                             + ("no worker group offers" if group is None else
                                f"worker group {group!r} does not offer")
                             + f" a resource named {res!r}, so it would cap nothing"
                             + (f"; did you mean {near[0]!r}?" if near else
                                f" (resources: {', '.join(have)}; {COST} for the cost)"))
        if res == COST:
            covered = names if group is None else [group]
            unpriced = [n for n in covered if n != "head" and trace.prices.get(n) is None]
            if unpriced:
                raise ValueError(f"--limit {COST}: worker group {unpriced[0]!r} has no price "
                                 f"(the worker table's price column)")


def limits_of(items, prices: Mapping[str, Optional[float]]) -> Optional[Limits]:
    """The ``Limits`` of parsed ``--limit`` items, priced by the worker groups."""
    if not items:
        return None
    total, per = {}, {}
    for group, res, v in items:
        (total if group is None else per.setdefault(group, {}))[res] = v
    priced = {k: float(p) for k, p in prices.items() if p is not None}
    priced.setdefault("head", 0.0)         # the replay's head has no price: it counts 0
    return Limits(total=total, per_group=per, prices=priced)


def sim_types(groups: Mapping[str, GroupCloud], default, names) -> dict:
    """``SimNodeType`` per worker group in ``names``: the replay's default with the
    group's own behaviour (its capacity at t = 0)."""
    out = {}
    for name in names:
        g = groups.get(name)
        if g is None:
            continue
        out[name] = replace(
            default, capacity=g.capacity_at(0.0),
            launch_failure_rate=(default.launch_failure_rate if g.launch_failure_rate is None
                                 else float(g.launch_failure_rate)),
            preemption_rate_per_h=(default.preemption_rate_per_h
                                   if g.interruption_rate_per_h is None
                                   else float(g.interruption_rate_per_h)))
    return out


def apply_schedules(cloud, groups: Mapping[str, GroupCloud], now_s: float) -> None:
    """The capacity schedules at ``now_s``, into the simulated cloud's types."""
    for name, g in groups.items():
        if g.schedule and name in cloud.types:
            cap = g.capacity_at(now_s)
            if cloud.types[name].capacity != cap:
                cloud.types[name] = replace(cloud.types[name], capacity=cap)


__all__ = ["GroupCloud", "apply_schedules", "capacity_groups", "check_groups", "group_clouds", "limit_items",
           "merged_groups", "limits_of", "parse_capacity",
           "parse_limit", "parse_schedule", "sim_types", "spot_twins", "with_cloud"]
