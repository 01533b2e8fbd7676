"""A leader lease with a fencing token, judged on the holder's own monotonic clock.

A `LeaseBackend` holds the lease: a Redis key (`redis_backend.RedisLeaseBackend`) or a
Kubernetes `coordination.k8s.io/v1` Lease (`kube_backend.KubeLeaseBackend`, its
`leaseTransitions` being the epoch and its `resourceVersion` the compare-and-swap).
Every successful acquisition grants an **epoch** strictly greater than every epoch
granted before: the fencing token each write of the holder carries (`fenced.py`).
The acquirer passes a **floor** with each attempt, the highest epoch it knows of from
anywhere durable (`max_epoch_seen`: its own grants, the holders it read, epochs it
was fenced out by; and whatever `floor_source` reports, e.g. the cloud's own fence),
and the backend grants above it: a backend that lost its data (a Redis restarted
empty) cannot hand out an epoch again. A grant at or below the floor (a backend that
ignored it) is refused here, handed back and counted (`LeaseStats.epoch_regressions`).
A backend whose `try_acquire` takes no `floor` (written before it existed) is called
without one; the refusal alone then keeps its epochs from going back: each refused
grant is released, the next is one higher, until one is above the floor.

Holder ids must be unique per process start (`holder_id`: the replica's name and a
random UUID): a name-and-pid id repeats in containers (PID 1), and a second replica,
or a zombie of the first, with the same id would be taken for the holder.

`Lease` is one replica's view of it. The holder acts only while its lease is valid by
its own clock, and it counts validity pessimistically:

    valid_until = t_sent + ttl - margin

where `t_sent` is read *before* the acquire / renew request leaves, so the backend's
own expiry (`t_received + ttl` on the backend's clock, `t_received >= t_sent`) is
always later, as long as the two clocks' rates differ by less than `margin / ttl`
(defaults 10 %; NTP keeps real clocks within 0.05 %). A holder that cannot renew
therefore stops acting before any other replica can be granted the lease: a renew
that fails, times out or is answered late never extends `valid_until`. `token()` is
the only way to obtain the right to act; it raises `NotLeader` once the lease is no
longer valid, and records the step-down.

A renewal the backend *refuses* while the lease is still valid by this clock means
the backend lost the lease's record (a Redis restarted empty, a deleted Lease
object): under the rule above nobody else can have been granted it otherwise. The
holder then stops renewing but keeps the right to act until `valid_until`, as after a
renewal that failed: a tick whose records were written before the loss can still
make its recorded cloud calls, instead of leaving some made and some not.

That is safe because a grant from a backend that had lost its records waits out
every holder from before the loss: such a holder's lease runs until `ttl` after its
last renewal, sent before the loss. The new holder renews but does not act
(`leading()` False, `token()` refuses: `waiting()`) until `ttl` has passed since its
own acquisition was sent; by then, by the clock rule above, every earlier holder has
stopped acting. A grant waits so when the backend says it lost its epoch record
(`Grant.reset`: gone, or below the acquirer's floor), when this replica has seen
evidence of a loss itself (the backend granted at or below the floor; or a lease of
ours, valid by our clock, was fenced out: someone else was granted an epoch at or
above ours meanwhile, which only a backend that forgot us does), the wait then
running from that earlier acquisition.
The time held back is counted (`LeaseStats.reset_waits`, `reset_waits_ms`): it is
time in which no replica acts.

Clocks are injected (`clock`: a callable returning monotonic ns) so tests can drive
time; `LeaseKeeper` runs `poll()` on a thread for a long-lived replica.
"""
from __future__ import annotations

import inspect
import threading
import time
import uuid
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

NS = 1_000_000_000


@dataclass(frozen=True)
class Grant:
    """A backend's answer to an acquisition, or its reading of the current lease."""
    acquired: bool
    epoch: int            # the epoch just granted, or the current holder's (0: never granted)
    holder: str           # who holds the lease now ('' if nobody)
    ttl_ms: int           # time left on the backend's clock (-1: unknown / no lease)
    reset: bool = False   # granted while the backend had lost its epoch record (gone,
    #                       or below an epoch the acquirer saw: a restored snapshot)


def holder_id(name: str, unique: Callable[[], str] = lambda: uuid.uuid4().hex) -> str:
    """A holder id unique to this process start: `name-<uuid4 hex>` (`unique` is
    injectable for deterministic tests). The name may not contain spaces."""
    if not name or any(c.isspace() for c in name):
        raise ValueError(f"name: a non-empty replica name without spaces is required, "
                         f"got {name!r}")
    return f"{name}-{unique()}"


@dataclass(frozen=True)
class Token:
    """The right to act: the epoch and holder a fenced write carries."""
    epoch: int
    holder: str
    valid_until_ns: int   # on the holder's clock


class BackendError(Exception):
    """The lease backend did not answer in time (down, unreachable, too slow)."""


class NotLeader(Exception):
    """This replica does not hold a valid lease: it must not write or call the cloud."""


class LeaseBackend(ABC):
    """Where a lease lives. Each call is one atomic operation of the backend; a call
    that cannot complete within the backend's timeout raises `BackendError`."""

    @abstractmethod
    def try_acquire(self, holder: str, ttl_ms: int, floor: int = 0) -> Grant:
        """Take the lease if nobody else holds it (free, expired, or ours), granting a
        fresh epoch greater than every epoch granted before and greater than `floor`
        (the highest epoch the acquirer knows of)."""

    @abstractmethod
    def renew(self, holder: str, epoch: int, ttl_ms: int) -> bool:
        """Extend the lease to ttl_ms from now iff (holder, epoch) still holds it."""

    @abstractmethod
    def release(self, holder: str, epoch: int) -> bool:
        """Give the lease up iff (holder, epoch) holds it."""

    @abstractmethod
    def read(self) -> Grant:
        """The current holder (acquired=False)."""


class LeaseStats:
    """Counters a replica exports (the REP's `is_leader`, `leader_transitions_total`,
    renew latency and failure counts). Thread-safe through the owning Lease's lock."""

    def __init__(self, window: int = 4096):
        self.acquisitions = 0            # times this replica was granted the lease
        self.acquire_attempts = 0
        self.acquire_errors = 0          # backend errors while trying to acquire
        self.renewals = 0                # successful renewals
        self.renew_failures = 0          # backend errors (timeout, refused) on renew
        self.renew_rejected = 0          # the backend said the lease is no longer ours
        self.epoch_regressions = 0       # grants at or below the floor, refused here
        self.backend_resets = 0          # grants where the backend had lost its epoch
        self.reset_waits = 0             # grants held back to wait out an earlier holder
        self.reset_waits_ms = 0.0        # the time they were held back, in total
        self.losses: dict[str, int] = {}  # step-downs by reason
        self.latency_ms: deque[float] = deque(maxlen=window)   # renew round trips
        self.max_latency_ms = 0.0

    def as_dict(self, leading: bool, epoch: int, max_epoch_seen: int = 0) -> dict:
        lat = sorted(self.latency_ms)

        def q(p: float) -> float | None:
            return lat[min(len(lat) - 1, int(p * len(lat)))] if lat else None
        return {
            "is_leader": int(leading), "epoch": epoch,
            "leader_transitions_total": self.acquisitions,
            "acquire_attempts": self.acquire_attempts, "acquire_errors": self.acquire_errors,
            "renewals": self.renewals, "renew_failures": self.renew_failures,
            "renew_rejected": self.renew_rejected, "losses": dict(self.losses),
            "max_epoch_seen": max_epoch_seen, "epoch_regressions": self.epoch_regressions,
            "backend_resets": self.backend_resets, "reset_waits": self.reset_waits,
            "reset_waits_ms": self.reset_waits_ms,
            "renew_latency_ms": {"p50": q(0.5), "p99": q(0.99), "max": self.max_latency_ms,
                                 "samples": len(lat)},
        }


class Lease:
    """One replica's lease: acquire, renew, lose; `token()` while valid.

    ttl_s: lease duration granted by the backend; margin_s (default 10 % of ttl):
    how much earlier than the backend this replica considers the lease over;
    renew_every_s (default ttl / 4): how often `poll()` renews while leading;
    floor_source: a callable returning the highest epoch known outside the backend
    (e.g. the cloud's fence), asked before each acquisition; if it fails (raises
    any exception) the attempt goes on with `max_epoch_seen` alone.
    """

    def __init__(self, backend: LeaseBackend, holder: str, ttl_s: float, *,
                 margin_s: float | None = None, renew_every_s: float | None = None,
                 clock: Callable[[], int] = time.monotonic_ns,
                 floor_source: Callable[[], int] | None = None):
        if not holder or any(c.isspace() for c in holder):
            raise ValueError(f"holder: a non-empty replica identity without spaces is "
                             f"required, got {holder!r}")
        if not (ttl_s > 0):
            raise ValueError(f"ttl_s must be > 0, got {ttl_s!r}")
        margin_s = 0.1 * ttl_s if margin_s is None else margin_s
        renew_every_s = ttl_s / 4 if renew_every_s is None else renew_every_s
        if not (0 <= margin_s < ttl_s):
            raise ValueError(f"margin_s must be within [0, ttl_s), got {margin_s!r}")
        if not (0 < renew_every_s < ttl_s - margin_s):
            raise ValueError(f"renew_every_s must be within (0, ttl_s - margin_s), "
                             f"got {renew_every_s!r}")
        self.backend = backend
        self.holder = holder
        self.ttl_ms = int(round(ttl_s * 1000))
        self._clock = clock
        self._ttl_ns = self.ttl_ms * 1_000_000
        self._margin_ns = int(round(margin_s * NS))
        self._renew_every_ns = int(round(renew_every_s * NS))
        self._lock = threading.RLock()
        self.epoch = 0                  # the epoch held, 0 when not leading
        self.valid_until_ns = 0
        self.act_after_ns = 0           # after a reset grant: act only from this time on
        self.acquired_ns = 0            # when the acquisition of the held epoch left
        self.refused = False            # the backend refused a renewal: valid_until is final
        self._settle_until_ns = 0       # a loss was seen: no grant acts before this time
        self.last_sent_ns = 0           # when the last successful acquire / renew left
        self.max_epoch_seen = 0         # highest epoch this replica has heard of
        self.floor_source = floor_source
        self._pass_floor = _takes_floor(backend)
        self.stats = LeaseStats()

    # ---- reading -----------------------------------------------------------------------
    def now_ns(self) -> int:
        return int(self._clock())

    def leading(self) -> bool:
        """Holds a lease that is still valid by this replica's clock and may act on it
        (not waiting out an earlier holder); an expiry seen here is recorded as a
        step-down."""
        with self._lock:
            now = self.now_ns()
            if self.epoch > 0 and now >= self.valid_until_ns:
                self._expire()
            return self.epoch > 0 and now >= self.act_after_ns

    def waiting(self) -> int:
        """Nanoseconds this replica still waits before it may act on the epoch it
        holds (0: it acts, or holds nothing)."""
        with self._lock:
            if self.epoch == 0:
                return 0
            return max(0, self.act_after_ns - self.now_ns())

    def token(self) -> Token:
        """The right to act now, or NotLeader (and a recorded step-down) if the lease
        is not valid any more. Call it right before every write and cloud call."""
        with self._lock:
            now = self.now_ns()
            if self.epoch > 0 and now < self.valid_until_ns:
                if now < self.act_after_ns:
                    raise NotLeader(f"{self.holder}: epoch {self.epoch} was granted by a "
                                    f"backend that lost its records; waiting out any "
                                    f"earlier holder until the lease's ttl has passed")
                return Token(self.epoch, self.holder, self.valid_until_ns)
            if self.epoch > 0:
                self._expire()
            raise NotLeader(f"{self.holder}: no valid lease")

    def snapshot(self) -> dict:
        with self._lock:
            return self.stats.as_dict(self.leading(), self.epoch, self.max_epoch_seen)

    def observe(self, epoch: int) -> None:
        """Remember an epoch heard of elsewhere (a fence that refused a call, a cloud's
        record): the next acquisition grants above it."""
        with self._lock:
            self.max_epoch_seen = max(self.max_epoch_seen, int(epoch))

    def _floor(self) -> int:
        outside = 0
        if self.floor_source is not None:
            try:
                outside = int(self.floor_source())
            except Exception:           # an unreachable source: go on with what we saw
                outside = 0
        with self._lock:
            self.max_epoch_seen = max(self.max_epoch_seen, outside)
            return self.max_epoch_seen

    # ---- changing ----------------------------------------------------------------------
    # The backend is called without the lock held, so `token()` never waits on a slow
    # backend; the result is applied only if nothing changed meanwhile.
    def try_acquire(self) -> bool:
        """Try to become leader (True: leading with a fresh epoch)."""
        with self._lock:
            if self.epoch > 0 and self.now_ns() < self.valid_until_ns:
                return True
            self.stats.acquire_attempts += 1
        floor = self._floor()
        t0 = self.now_ns()
        try:
            g = (self.backend.try_acquire(self.holder, self.ttl_ms, floor=floor)
                 if self._pass_floor else self.backend.try_acquire(self.holder, self.ttl_ms))
        except BackendError:
            with self._lock:
                self.stats.acquire_errors += 1
            return False
        with self._lock:
            self.max_epoch_seen = max(self.max_epoch_seen, g.epoch)
            if not g.acquired:
                return False
            if g.epoch > floor:
                self._granted(g, t0)
                return True
            self.stats.epoch_regressions += 1    # the backend went back: never act on it
            self._settle_from(t0)                # ... and it forgot whoever held before
        try:
            self.backend.release(self.holder, g.epoch)
        except BackendError:
            pass
        return False

    def _granted(self, g: Grant, t0: int) -> None:
        """Hold the epoch of grant `g`, whose acquisition left at `t0`; after a
        loss (the backend's word, or what this replica saw) act only once `ttl` has
        passed since the acquisition that followed the loss."""
        self.stats.backend_resets += int(g.reset)
        if g.reset:
            self._settle_from(t0)
        self.epoch = g.epoch
        self.acquired_ns = self.last_sent_ns = t0
        self.valid_until_ns = t0 + self._ttl_ns - self._margin_ns
        self.refused = False
        self.act_after_ns = self._settle_until_ns if self._settle_until_ns > t0 else 0
        if self.act_after_ns:
            self.stats.reset_waits += 1
            self.stats.reset_waits_ms += (self.act_after_ns - t0) / 1e6
        self.stats.acquisitions += 1

    def _settle_from(self, t0: int) -> None:
        """A loss of the backend's records was seen by an acquisition sent at `t0`:
        every holder from before it stops acting by `t0 + ttl`."""
        self._settle_until_ns = max(self._settle_until_ns, t0 + self._ttl_ns)

    def renew(self) -> bool:
        """Extend the lease; False if the backend refused (the lease is not ours on
        the backend any more) or failed. Either way the lease runs out on its own at
        valid_until_ns; after a refusal it is never renewed again."""
        with self._lock:
            epoch = self.epoch
            if epoch == 0 or self.refused:
                return False
        t0 = self.now_ns()
        try:
            ok = self.backend.renew(self.holder, epoch, self.ttl_ms)
            error = False
        except BackendError:
            ok, error = False, True
        ms = (self.now_ns() - t0) / 1e6
        with self._lock:
            self.stats.latency_ms.append(ms)
            self.stats.max_latency_ms = max(self.stats.max_latency_ms, ms)
            if error:
                self.stats.renew_failures += 1
                return False
            if self.epoch != epoch:         # stepped down while the renewal was out
                return False
            if not ok:
                self.stats.renew_rejected += 1
                if self.now_ns() < self.valid_until_ns:
                    self.refused = True         # act on until valid_until, renew no more
                else:
                    self._lose("lost")
                return False
            self.stats.renewals += 1
            self.last_sent_ns = t0
            # Never extend past what this renewal itself guarantees.
            self.valid_until_ns = t0 + self._ttl_ns - self._margin_ns
            return True

    def poll(self) -> bool:
        """One keeper step: renew when due while leading, else try to acquire. Returns
        whether this replica leads afterwards."""
        with self._lock:
            if self.epoch > 0 and self.now_ns() >= self.valid_until_ns:
                self._expire()
            leading = self.epoch > 0
            due = leading and not self.refused and \
                self.now_ns() - self.last_sent_ns >= self._renew_every_ns
        if not leading:
            return self.try_acquire()
        if due:
            self.renew()
        return self.leading()

    def lose(self, reason: str) -> None:
        """Step down now (e.g. a write was fenced out: a newer epoch exists). A lease
        fenced out (`reason` "fenced") while still valid by this clock was taken from
        under it by a backend that lost its records: the next grant waits out the
        holder that fenced it (`ttl` from this lease's acquisition)."""
        with self._lock:
            if self.epoch > 0:
                if reason == "fenced" and self.now_ns() < self.valid_until_ns:
                    self._settle_from(self.acquired_ns)
                self._lose(reason)

    def release(self) -> None:
        """Step down and hand the lease back so another replica need not wait."""
        with self._lock:
            if self.epoch == 0:
                return
            epoch = self.epoch
            self._lose("released")
            try:
                self.backend.release(self.holder, epoch)
            except BackendError:
                pass                    # it expires on its own

    def _expire(self) -> None:
        """The held lease ran out by this clock: "lost" if the backend had refused a
        renewal, else "expired"."""
        self._lose("lost" if self.refused else "expired")

    def _lose(self, reason: str) -> None:
        self.epoch = 0
        self.valid_until_ns = 0
        self.act_after_ns = 0
        self.refused = False
        self.stats.losses[reason] = self.stats.losses.get(reason, 0) + 1


def _takes_floor(backend: LeaseBackend) -> bool:
    """Whether the backend's `try_acquire` accepts a `floor` keyword."""
    try:
        params = inspect.signature(backend.try_acquire).parameters
    except (TypeError, ValueError):
        return False
    return "floor" in params or any(p.kind == p.VAR_KEYWORD for p in params.values())


class LeaseKeeper:
    """Runs `lease.poll()` every `every_s` on a daemon thread (renewing while leading,
    trying to acquire otherwise), so a slow tick never starves the renewals."""

    def __init__(self, lease: Lease, every_s: float):
        self.lease = lease
        self.every_s = float(every_s)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"lease-{lease.holder}",
                                        daemon=True)

    def start(self) -> LeaseKeeper:
        self._thread.start()
        return self

    def stop(self, release: bool = False) -> None:
        self._stop.set()
        self._thread.join()
        if release:
            self.lease.release()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.lease.poll()
            self._stop.wait(self.every_s)
