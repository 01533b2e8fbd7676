"""An in-memory instance store and the reconciler steps that move its records.

This is Ray's instance manager plus the active half of one reconcile tick
(docs/ray-semantics.md §10.1 steps 2-5, §10.2), without Ray:

    handle_timeouts()      step 2  stuck REQUESTED / ALLOCATED / RAY_INSTALLING /
                                   TERMINATING / RAY_STOP_REQUESTED instances move on
    apply_plan(...)        step 3  a scheduler's launches and terminations
    handle_terminations()  step 4  RAY_STOPPED / ALLOCATION_TIMEOUT / RAY_INSTALL_FAILED /
                                   TERMINATION_FAILED -> TERMINATING
    launch_queued()        step 5  QUEUED -> REQUESTED under the launch rate limits
    reconcile(schedule)    all four, in that order

Every change goes through `apply`, which checks a whole batch against the status table
before touching anything: a batch is committed entirely or not at all. Time comes from
an injected clock (a callable returning ns) and ids from an injected factory, so two runs
with the same inputs produce the same records.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from vecsched.engine.model.dtypes import Cause, Kind, Status

from .status import CREATABLE, IllegalTransition, can_transition, status_name

S = Status
NS_PER_S = 1_000_000_000

# KubeRay's `upscalingMode` -> the autoscaler's `upscaling_speed` (its config producer).
UPSCALING_SPEED_BY_MODE = {"Conservative": 1.0, "Default": 1000.0, "Aggressive": 1000.0}

# Environment variables Ray reads for the fields of ReconcileConfig.
ENV_NAMES = {
    "request_status_timeout_s": "RAY_AUTOSCALER_RECONCILE_REQUEST_STATUS_TIMEOUT_S",
    "allocate_status_timeout_s": "RAY_AUTOSCALER_RECONCILE_ALLOCATE_STATUS_TIMEOUT_S",
    "ray_install_status_timeout_s": "RAY_AUTOSCALER_RECONCILE_RAY_INSTALL_STATUS_TIMEOUT_S",
    "terminating_status_timeout_s": "RAY_AUTOSCALER_RECONCILE_TERMINATING_STATUS_TIMEOUT_S",
    "ray_stop_requested_status_timeout_s":
        "RAY_AUTOSCALER_RECONCILE_RAY_STOP_REQUESTED_STATUS_TIMEOUT_S",
    "max_num_retry_request_to_allocate":
        "RAY_AUTOSCALER_RECONCILE_MAX_NUM_RETRY_REQUEST_TO_ALLOCATE",
    "max_concurrent_launches": "AUTOSCALER_MAX_CONCURRENT_LAUNCHES",
}


def upscaling_speed_for_mode(mode: str | None) -> float:
    """KubeRay `upscalingMode` -> `upscaling_speed`; None (the key is absent) is Default."""
    if mode is None:
        return UPSCALING_SPEED_BY_MODE["Default"]
    try:
        return UPSCALING_SPEED_BY_MODE[mode]
    except KeyError:
        raise ValueError(f"unknown upscalingMode {mode!r}; expected one of "
                         f"{sorted(UPSCALING_SPEED_BY_MODE)}") from None


@dataclass(frozen=True)
class ReconcileConfig:
    """Ray's `InstanceReconcileConfig` defaults plus the two launch rate limits."""
    request_status_timeout_s: float = 600          # REQUESTED -> QUEUED / ALLOCATION_FAILED
    allocate_status_timeout_s: float = 3600        # ALLOCATED -> ALLOCATION_TIMEOUT
    ray_install_status_timeout_s: float = 1800     # RAY_INSTALLING -> RAY_INSTALL_FAILED
    terminating_status_timeout_s: float = 300      # TERMINATING -> TERMINATION_FAILED
    ray_stop_requested_status_timeout_s: float = 300  # RAY_STOP_REQUESTED -> RAY_RUNNING
    max_num_retry_request_to_allocate: int = 3     # fail once REQUESTED more often than this
    max_concurrent_launches: int = 10              # REQUESTED instances in flight, all types
    upscaling_speed: float = 0.0                   # Ray v2's default: one launch per type

    @classmethod
    def from_env(cls, env: Mapping[str, str], **overrides) -> ReconcileConfig:
        """Read Ray's environment variables from `env` (pass os.environ explicitly)."""
        values = {name: int(env[var]) for name, var in ENV_NAMES.items() if var in env}
        values.update(overrides)
        return cls(**values)


def sequential_ids(prefix: str = "i-") -> Callable[[], str]:
    """A deterministic id factory: prefix000000, prefix000001, ..."""
    n = -1

    def new_id() -> str:
        nonlocal n
        n += 1
        return f"{prefix}{n:06d}"
    return new_id


@dataclass(eq=False)
class InstanceRecord:
    """One instance-manager record. Read it freely; change it only through the store."""
    instance_id: str
    instance_type: str
    status: int
    status_history: list[tuple[int, int]] = field(default_factory=list)  # (status, ts_ns)
    launch_request_id: str = ""
    cloud_instance_id: str = ""
    node_id: str = ""
    node_kind: int = Kind.WORKER
    termination_cause: int = 0          # dtypes.Cause of the scale-down; 0 = none
    cancelled_before_join: bool = False  # terminated by the scheduler before ray ran on it
    details: str = ""                   # what the last move that gave details said (e.g. why
                                        # a launch failed: a stock-out or another error)

    @property
    def n_requests(self) -> int:
        """How many times the instance was handed to the cloud provider."""
        return sum(1 for s, _ in self.status_history if s == S.REQUESTED)

    def times_ns(self, status: int) -> list[int]:
        return [ts for s, ts in self.status_history if s == status]

    def entered_ns(self, status: int | None = None) -> int | None:
        """Latest time the record entered `status` (default: its current status)."""
        times = self.times_ns(self.status if status is None else status)
        return max(times) if times else None

    def __repr__(self) -> str:
        return (f"InstanceRecord({self.instance_id}, {self.instance_type}, "
                f"{status_name(self.status)})")


@dataclass(frozen=True)
class Move:
    """One status change (or creation). A None field leaves the record's value as is."""
    instance_id: str
    to_status: int
    instance_type: str | None = None
    launch_request_id: str | None = None
    cloud_instance_id: str | None = None
    node_id: str | None = None
    node_kind: int | None = None
    cause: int | None = None
    create: bool = False
    # A scheduler's termination of an instance whose ray node never joined (QUEUED,
    # ALLOCATED, RAY_INSTALLING): a launch cancelled, whatever cause the scheduler gave.
    cancelled_before_join: bool = False
    details: str | None = None          # why (a failed launch's error, as Ray records it)


class InvalidMove(ValueError):
    """A move the status table allows but whose record would be incomplete or unknown."""


@dataclass(frozen=True)
class LaunchStep:
    """What one QUEUED -> REQUESTED step (step 5) found and did: the QUEUED records it
    saw, how many it promoted, and how many it left QUEUED because of each launch limit.
    A type's records left behind count against the limit that bound it: the
    concurrent-launch budget when it was below the type's upscaling-speed allowance,
    else the upscaling speed (`adapters/ray/explain.py` words it the same way)."""
    queued: int = 0
    promoted: int = 0
    held_by_concurrency: int = 0     # max_concurrent_launches (requests in flight) used up
    held_by_speed: int = 0           # upscaling_speed's allowance for the type used up

    @property
    def held(self) -> int:
        return self.held_by_concurrency + self.held_by_speed


@dataclass
class TickMoves:
    """The moves one `reconcile` call committed, step by step, and what the launch step
    found (`LaunchStep`)."""
    timeouts: list[Move]
    plan: list[Move]
    terminations: list[Move]
    launches: list[Move]
    launch_step: LaunchStep = field(default_factory=LaunchStep)


def _value_after(move: Move, rec: InstanceRecord | None, name: str):
    value = getattr(move, name)
    if value is not None:
        return value
    return getattr(rec, name) if rec is not None else ""


# Record fields a move may set.
_CARRIED = ("instance_type", "launch_request_id", "cloud_instance_id", "node_id", "node_kind")

# What a record must carry once it enters a status (Ray's instance manager asserts these).
_REQUIRED = {
    S.REQUESTED: ("launch_request_id", "instance_type"),
    S.ALLOCATED: ("cloud_instance_id", "instance_type"),
    S.RAY_RUNNING: ("node_id",),
    S.TERMINATING: ("cloud_instance_id",),
}


def compute_to_launch(queued_by_type: Mapping[str, Sequence[InstanceRecord]],
                      n_requested: int, n_running_by_type: Mapping[str, int],
                      upscaling_speed: float, max_concurrent_launches: int,
                      held: dict[str, tuple[int, str]] | None = None,
                      ) -> dict[str, list[InstanceRecord]]:
    """Which QUEUED records to promote to REQUESTED this tick (§10.2).

    queued_by_type must list types in first-appearance order of their QUEUED records.
    ``held``, if given, receives for each type with records left QUEUED (count, limit):
    limit "max_concurrent_launches" when the budget left was below the type's speed
    allowance, else "upscaling_speed".
    """
    out: dict[str, list[InstanceRecord]] = {}
    in_flight = n_requested
    for itype, queued in queued_by_type.items():
        running = n_running_by_type.get(itype, 0)
        desired = max(1, math.ceil(upscaling_speed * max(running, 1)))
        budget = max_concurrent_launches - in_flight
        n = min(budget, desired)
        n = min(max(0, n), len(queued))
        if held is not None and n < len(queued):
            held[itype] = (len(queued) - n, "max_concurrent_launches" if budget < desired
                           else "upscaling_speed")
        # Oldest first: by the sorted QUEUED entry times (a retried record keeps its first
        # queue time and so goes ahead); the sort is stable, so ties keep store order.
        out[itype] = sorted(queued, key=lambda r: sorted(r.times_ns(S.QUEUED)))[:n]
        in_flight += n
    return out


def timeout_target(rec: InstanceRecord, now_ns: int, config: ReconcileConfig) -> int | None:
    """Where a record stuck in its status goes at `now_ns` (§10.1 step 2), or None."""
    c = config
    if rec.status == S.REQUESTED:
        timeout_s = c.request_status_timeout_s
        # Requeue for another launch, unless it was already requested too often.
        to = (S.ALLOCATION_FAILED if rec.n_requests > c.max_num_retry_request_to_allocate
              else S.QUEUED)
    elif rec.status == S.ALLOCATED:          # the cloud instance never ran ray
        timeout_s, to = c.allocate_status_timeout_s, S.ALLOCATION_TIMEOUT
    elif rec.status == S.RAY_INSTALLING:     # the install hangs
        timeout_s, to = c.ray_install_status_timeout_s, S.RAY_INSTALL_FAILED
    elif rec.status == S.TERMINATING:        # the cloud did not terminate: retry via step 4
        timeout_s, to = c.terminating_status_timeout_s, S.TERMINATION_FAILED
    elif rec.status == S.RAY_STOP_REQUESTED:  # the drain went nowhere: keep the node
        timeout_s, to = c.ray_stop_requested_status_timeout_s, S.RAY_RUNNING
    else:                                    # QUEUED, RAY_STOPPING, ...: Ray only warns
        return None
    # Ray: strictly more than timeout_s since the latest entry into the current status.
    return to if now_ns - rec.entered_ns() > timeout_s * 1e9 else None


class InstanceStore:
    """Instance records in creation order, changed only by atomic batches of moves."""

    def __init__(self, clock: Callable[[], int], id_factory: Callable[[], str],
                 config: ReconcileConfig | None = None, *,
                 request_id_factory: Callable[[], str] | None = None):
        self._clock = clock
        self._new_id = id_factory
        self._new_request_id = request_id_factory or id_factory
        self.config = config or ReconcileConfig()
        self._records: dict[str, InstanceRecord] = {}
        self.version = 0                  # bumped by every committed, non-empty batch
        self.last_launch_step = LaunchStep()   # what the latest launch_moves() found

    # ---- reading -----------------------------------------------------------------------
    def now_ns(self) -> int:
        return int(self._clock())

    def __len__(self) -> int:
        return len(self._records)

    def __iter__(self) -> Iterator[InstanceRecord]:
        return iter(list(self._records.values()))

    def __contains__(self, instance_id: str) -> bool:
        return instance_id in self._records

    def __getitem__(self, instance_id: str) -> InstanceRecord:
        return self._records[instance_id]

    def get(self, instance_id: str) -> InstanceRecord | None:
        return self._records.get(instance_id)

    def records(self, status: int | None = None,
                instance_type: str | None = None) -> list[InstanceRecord]:
        return [r for r in self._records.values()
                if (status is None or r.status == status)
                and (instance_type is None or r.instance_type == instance_type)]

    def count(self, status: int | None = None, instance_type: str | None = None) -> int:
        return len(self.records(status, instance_type))

    def status_counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self._records.values():
            out[status_name(r.status)] = out.get(status_name(r.status), 0) + 1
        return out

    def histories(self) -> dict[str, tuple[tuple[int, int], ...]]:
        return {i: tuple(r.status_history) for i, r in self._records.items()}

    # ---- the only writer ---------------------------------------------------------------
    def apply(self, moves: Iterable[Move], at_ns: int | None = None) -> list[Move]:
        """Validate every move, then commit them all with one timestamp; or raise and
        change nothing (IllegalTransition for a disallowed edge, InvalidMove otherwise)."""
        moves = list(moves)
        if not moves:
            return moves
        ts = self.now_ns() if at_ns is None else int(at_ns)
        seen: set[str] = set()
        for m in moves:
            if m.instance_id in seen:
                raise InvalidMove(f"instance {m.instance_id} moved twice in one batch")
            seen.add(m.instance_id)
            rec = self._records.get(m.instance_id)
            if m.create:
                if rec is not None:
                    raise InvalidMove(f"instance {m.instance_id} already exists")
                if m.to_status not in CREATABLE:
                    raise IllegalTransition(m.instance_id, None, m.to_status)
            elif rec is None:
                raise InvalidMove(f"no instance {m.instance_id}")
            elif not can_transition(rec.status, m.to_status):
                raise IllegalTransition(m.instance_id, rec.status, m.to_status)
            for name in _REQUIRED.get(m.to_status, ()) + (("instance_type",) if m.create else ()):
                if not _value_after(m, rec, name):
                    raise InvalidMove(f"instance {m.instance_id}: {status_name(m.to_status)} "
                                      f"needs {name}")
            if m.cause is not None and m.cause not in Cause.NAMES:
                raise InvalidMove(f"instance {m.instance_id}: unknown cause {m.cause}")
        for m in moves:                   # commit: nothing below can fail
            rec = self._records.get(m.instance_id)
            if rec is None:
                rec = InstanceRecord(m.instance_id, m.instance_type, m.to_status)
                self._records[m.instance_id] = rec
            for name in _CARRIED:
                value = getattr(m, name)
                if value is not None:
                    setattr(rec, name, value)
            if m.cause is not None:
                rec.termination_cause = m.cause
            if m.cancelled_before_join:
                rec.cancelled_before_join = True
            if m.details is not None:
                rec.details = m.details
            rec.status = m.to_status
            rec.status_history.append((m.to_status, ts))
        self.version += 1
        return moves

    def move(self, instance_id: str, to_status: int, **fields_) -> Move:
        """Apply a single move; see `apply`."""
        return self.apply([Move(instance_id, to_status, **fields_)])[0]

    # ---- step 2: timeouts --------------------------------------------------------------
    def timeout_moves(self) -> list[Move]:
        now = self.now_ns()
        moves = []
        for rec in self._records.values():
            to = timeout_target(rec, now, self.config)
            if to is not None:
                moves.append(Move(rec.instance_id, to))
        return moves

    def handle_timeouts(self) -> list[Move]:
        return self.apply(self.timeout_moves())

    # ---- step 3: the scheduler's plan --------------------------------------------------
    def plan_moves(self, launches: Mapping[str, int] | Iterable[tuple[str, int]],
                   terminations: Iterable[tuple[str, int]]) -> list[Move]:
        """Terminations first (by the record's status), then `count` new QUEUED records per
        launched type, ids from the id factory."""
        moves = []
        for instance_id, cause in terminations:
            rec = self._records.get(instance_id)
            if rec is None:
                raise InvalidMove(f"no instance {instance_id} to terminate")
            if rec.status == S.QUEUED:          # nothing launched yet: cancel outright
                to = S.TERMINATED
            elif rec.status in (S.ALLOCATED, S.RAY_INSTALLING):  # no ray to drain yet
                to = S.TERMINATING
            else:                               # ray may be running: drain / stop it first
                to = S.RAY_STOP_REQUESTED
            moves.append(Move(instance_id, to, cause=int(cause),
                              cancelled_before_join=to != S.RAY_STOP_REQUESTED))
        items = launches.items() if isinstance(launches, Mapping) else launches
        for instance_type, count in items:
            if int(count) < 0:
                raise ValueError(f"negative launch count {count} for {instance_type}")
            for _ in range(int(count)):
                moves.append(Move(self._new_id(), S.QUEUED, instance_type=instance_type,
                                  create=True))
        return moves

    def apply_plan(self, launches: Mapping[str, int] | Iterable[tuple[str, int]],
                   terminations: Iterable[tuple[str, int]] = ()) -> list[Move]:
        return self.apply(self.plan_moves(launches, terminations))

    # ---- step 4: terminate what stopped or failed --------------------------------------
    def termination_moves(self) -> list[Move]:
        to_terminate = {S.RAY_STOPPED, S.ALLOCATION_TIMEOUT, S.RAY_INSTALL_FAILED,
                        S.TERMINATION_FAILED}
        inactive = to_terminate | {S.TERMINATED, S.ALLOCATION_FAILED}
        owned = {r.cloud_instance_id for r in self._records.values()
                 if r.cloud_instance_id and r.status not in inactive}
        moves = []
        for rec in self._records.values():
            if rec.status not in to_terminate:
                continue
            if rec.status == S.RAY_STOPPED and rec.cloud_instance_id in owned:
                # A stale row (ray restarted on the same cloud instance, which another
                # active record now owns): retire the row, keep the cloud instance.
                moves.append(Move(rec.instance_id, S.TERMINATED))
            else:
                moves.append(Move(rec.instance_id, S.TERMINATING))
        return moves

    def handle_terminations(self) -> list[Move]:
        return self.apply(self.termination_moves())

    # ---- step 5: QUEUED -> REQUESTED under the rate limits -----------------------------
    def launch_moves(self) -> list[Move]:
        queued_by_type: dict[str, list[InstanceRecord]] = {}
        running: dict[str, int] = {}
        n_requested = 0
        for rec in self._records.values():
            if rec.status == S.QUEUED:
                queued_by_type.setdefault(rec.instance_type, []).append(rec)
            elif rec.status == S.REQUESTED:
                n_requested += 1
            elif rec.status == S.RAY_RUNNING:
                running[rec.instance_type] = running.get(rec.instance_type, 0) + 1
        if not queued_by_type:
            self.last_launch_step = LaunchStep()
            return []
        c = self.config
        held: dict[str, tuple[int, str]] = {}
        chosen = compute_to_launch(queued_by_type, n_requested, running,
                                   c.upscaling_speed, c.max_concurrent_launches, held)
        self.last_launch_step = LaunchStep(
            queued=sum(len(v) for v in queued_by_type.values()),
            promoted=sum(len(v) for v in chosen.values()),
            held_by_concurrency=sum(n for n, why in held.values()
                                    if why == "max_concurrent_launches"),
            held_by_speed=sum(n for n, why in held.values() if why == "upscaling_speed"))
        moves, fresh = [], None
        for instance_type, recs in chosen.items():
            for rec in recs:
                request_id = rec.launch_request_id   # a retried record keeps its request id
                if not request_id:
                    fresh = fresh or self._new_request_id()   # one new id per tick
                    request_id = fresh
                moves.append(Move(rec.instance_id, S.REQUESTED, instance_type=instance_type,
                                  launch_request_id=request_id))
        return moves

    def launch_queued(self) -> list[Move]:
        return self.apply(self.launch_moves())

    # ---- passive sync helpers ----------------------------------------------------------
    def drain_rejected(self, instance_ids: Iterable[str]) -> list[Move]:
        """Drains that failed: RAY_STOP_REQUESTED -> RAY_RUNNING."""
        return self.apply([Move(i, S.RAY_RUNNING) for i in instance_ids])

    # ---- one tick ----------------------------------------------------------------------
    def reconcile(self, schedule: Callable[[InstanceStore], tuple] | None = None) -> TickMoves:
        """Steps 2-5 of a reconcile tick. `schedule(store)` -> (launches, terminations)
        runs after the timeouts, on the store as it then is."""
        timeouts = self.handle_timeouts()
        plan: list[Move] = []
        if schedule is not None:
            launches, terminations = schedule(self)
            plan = self.apply_plan(launches, terminations)
        terminations_ = self.handle_terminations()
        launches = self.launch_queued()
        return TickMoves(timeouts, plan, terminations_, launches, self.last_launch_step)
