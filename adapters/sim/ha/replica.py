"""An autoscaler replica as its own process (`python -m vecsched.adapters.sim.ha.replica CONFIG`).

It reports to its parent as JSON lines on stdout (`ev`: ready, leader, waiting,
reloaded, hold, fenced, passive, error, redis-restart, rebuilt, tick, stats, exit; `t`:
CLOCK_MONOTONIC seconds,
comparable across the processes of one machine) and takes commands on stdin:

    start                     begin (the lease keeper runs from `ready` on)
    hold POINT FROM [launch]  pause at the next POINT (prewrite / postwrite) at a world
                              tick >= FROM (with `launch`: one that requests launches),
                              report `hold`, and wait for `go`
    go                        continue from a hold
    stop                      release the lease and exit

Holds exist so a harness can SIGKILL or SIGSTOP a replica at an exact point of its
tick (between its lease check and its write, or between its write and its cloud
calls); without commands a replica simply runs.

Its lease lives where `backend` says (`lease_site.py`): in the records' Redis
(default) or on a Kubernetes API server (`kube`: URL and TLS file paths); a bad
backend or kube setting is one `error` event (kind ConfigError) naming the field,
and exit code 2.

Its holder id is unique to the process start (`holder_id`: name and a UUID). It
refuses to start against a Redis that persists nothing unless its config says
`allow_volatile_redis`. It watches Redis's run id: after a restart it steps down and
drops what it cached, and every epoch it hears of (the cloud's fence, read while
passive or learnt from a refusal) raises the floor of its next lease acquisition.
A lease granted after a loss of the backend's records waits out the holder from
before the loss (`Lease.waiting()`): meanwhile the replica reports `waiting` once,
keeps renewing (its keeper) and reads as a passive replica does, but does not tick;
it reports `leader` when the wait is over.
"""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Optional

from vecsched.adapters.leader import (BackendError, FencedOut, FencedStorage, Keys, Lease,
    LeaseKeeper, NotLeader, RunIdWatch, StorageUnavailable, VolatileRedis, connect,
    holder_id)
from vecsched.adapters.metrics_lease import serve_lease_metrics
from vecsched.adapters.sim.ha.instance_table import FencedInstanceTable
from .instance_table import CorruptState
from .lease_site import build_site, kube_settings

from .replica_tick import Autoscaler, VersionConflict, WorldMismatch
from .replay_link import make
from .world_server import AUTHKEY_ENV, WorldClient, WorldUnavailable


@dataclass(frozen=True)
class ReplicaConfig:
    name: str
    redis: tuple                   # (host, port)
    world: tuple                   # (host, port)
    cluster: str = "ha-demo"
    ttl_s: float = 1.0
    tick_real_s: float = 0.1       # real seconds per leader tick (at most one per)
    poll_s: float = 0.02           # lease keeper cadence (acquire attempts, renew checks)
    scheduler: str = "engine"
    audit: int = 100_000
    passive_read_s: float = 0.5
    allow_volatile_redis: bool = False
    metrics_port: Optional[int] = 0  # lease metrics on 127.0.0.1 (0: a free port; None: off)
    backend: str = "redis"         # where the lease lives: redis or kube (lease_site.py)
    kube: Optional[dict] = None    # with kube: url, ca, client_cert, client_key[, namespace, name]

    def __post_init__(self):
        kube_settings(self.backend, self.kube)      # ValueError naming the field


class _Control:
    """Commands from stdin, and the one hold armed at a time."""

    def __init__(self):
        self.lock = threading.Condition()
        self.started = False
        self.stopped = False
        self.hold: tuple | None = None     # (point, from_tick, launch_only)
        self.go = 0

    def read(self, stream) -> None:
        for line in stream:
            parts = line.split()
            with self.lock:
                if not parts:
                    continue
                if parts[0] == "start":
                    self.started = True
                elif parts[0] == "stop":
                    self.stopped = True
                elif parts[0] == "go":
                    self.go += 1
                elif parts[0] == "hold":
                    self.hold = (parts[1], int(parts[2]), len(parts) > 3)
                self.lock.notify_all()
        with self.lock:                    # parent gone: stop
            self.stopped = True
            self.lock.notify_all()


def emit(ev: str, **info) -> None:
    sys.stdout.write(json.dumps({"ev": ev, "t": time.monotonic(), **info}, default=str) + "\n")
    sys.stdout.flush()


def run(cfg: ReplicaConfig, control: _Control, authkey: bytes) -> int:
    """Run the replica until `stop` (or its parent is gone): report `ready`, wait for
    `start` while reporting who leads, then tick while leading and read while passive;
    release the lease and report `stats`. Returns the exit code (0)."""
    loop = _build(cfg, control, authkey)
    keeper = LeaseKeeper(loop.lease, cfg.poll_s).start()
    metrics_port = None
    if cfg.metrics_port is not None:      # without prometheus_client: (None, None)
        _, metrics_port = serve_lease_metrics(loop.lease, cfg.metrics_port, "127.0.0.1")
    emit("ready", holder=loop.holder, metrics_port=metrics_port, backend=cfg.backend)
    loop.await_start()
    loop.next_tick = time.monotonic()
    while not control.stopped:
        loop.turn()
    keeper.stop(release=True)
    loop.report_stats()
    return 0


@dataclass
class _Loop:
    """A running replica's parts and what its loop keeps from one turn to the next:
    the epoch it last reported leading in (0: passive), when it first acted in that
    epoch, when it last read while passive, when its next tick is due, the time spent
    in holds (kept out of step times) and the step times."""
    cfg: ReplicaConfig
    control: _Control
    holder: str
    lease: Lease
    watch: RunIdWatch
    world: WorldClient
    auto: Optional[Autoscaler] = None
    was_leader: int = 0
    waited: int = 0                # the last epoch whose wait was reported
    first_write: Optional[float] = None
    last_read: float = 0.0
    next_tick: float = 0.0
    held_s: float = 0.0
    step_ms: list = field(default_factory=list)

    def hook(self, point: str, tick: int, **info) -> None:
        """The autoscaler's hold point: wait for `go` here if the armed hold matches."""
        control = self.control
        with control.lock:
            h = control.hold
            if h is None or h[0] != point or tick < h[1] or (h[2] and not info["requested"]):
                return
            control.hold = None
            seen = control.go
            emit("hold", point=point, tick=tick, epoch=self.lease.epoch, **info)
            t0 = time.perf_counter()
            control.lock.wait_for(lambda: control.go > seen or control.stopped)
            self.held_s += time.perf_counter() - t0

    def await_start(self) -> None:
        """Before `start`: only report who leads."""
        control, lease = self.control, self.lease
        while True:
            with control.lock:
                if control.lock.wait_for(lambda: control.started or control.stopped,
                                         timeout=self.cfg.poll_s):
                    break
            if lease.leading() and lease.epoch != self.was_leader:
                self.was_leader = lease.epoch
                emit("leader", epoch=self.was_leader)

    def turn(self) -> None:
        """One pass of the main loop: a passive read, a wait for the next tick, a
        step down after a Redis restart, or a tick."""
        cfg, lease = self.cfg, self.lease
        if not lease.leading():
            self.passive_turn()
            return
        epoch = lease.epoch
        if epoch != self.was_leader:
            self.was_leader, self.first_write = epoch, None
            # backend_resets: grants made while Redis had lost its epoch record
            emit("leader", epoch=epoch, backend_resets=lease.stats.backend_resets)
        now = time.monotonic()
        if now < self.next_tick:
            time.sleep(min(self.next_tick - now, cfg.poll_s))
            return
        self.next_tick = now + cfg.tick_real_s
        if _redis_restarted(self.watch):      # what this leader read or holds may be gone
            self.auto.drop()
            lease.lose("redis-restart")
            emit("redis-restart", run_id=self.watch.current, restarts=self.watch.restarts,
                 max_epoch_seen=lease.max_epoch_seen)
            return
        self.tick(epoch)

    def passive_turn(self) -> None:
        """Not leading: report stepping down once, read the cloud's fence and the
        records every `passive_read_s`, and sleep one poll."""
        cfg, lease = self.cfg, self.lease
        if self.was_leader:
            emit("passive", epoch=self.was_leader, stats=lease.snapshot())
            self.was_leader = 0
        self.report_wait()
        if time.monotonic() - self.last_read >= cfg.passive_read_s:
            self.last_read = time.monotonic()
            try:
                lease.observe(self.world.call("fence_now"))
                self.auto.passive_read()
            except (StorageUnavailable, CorruptState, WorldUnavailable):
                pass
        time.sleep(cfg.poll_s)

    def report_wait(self) -> None:
        """Report, once per epoch, a lease held but waiting out an earlier holder."""
        lease = self.lease
        epoch, wait_ns = lease.epoch, lease.waiting()
        if wait_ns and epoch and epoch != self.waited:
            self.waited = epoch
            emit("waiting", epoch=epoch, wait_s=wait_ns / 1e9,
                 backend_resets=lease.stats.backend_resets)

    def tick(self, epoch: int) -> None:
        """One autoscaler step as the leader of `epoch`, and the events it calls for."""
        auto = self.auto
        recorded, rebuilds = auto.counts["recorded"], auto.counts["rebuilds"]
        t_step, held0 = time.perf_counter(), self.held_s
        try:
            result = auto.step()
            self.step_ms.append((time.perf_counter() - t_step - (self.held_s - held0)) * 1000)
        except NotLeader:
            auto.drop()
            return
        except FencedOut as e:
            auto.drop()
            self.lease.observe(e.fence)
            self.lease.lose("fenced")
            emit("fenced", epoch=e.epoch, fence=e.fence, reason=e.reason,
                 version_matched=e.version_matched, cloud=e.version < 0)
            return
        except (StorageUnavailable, WorldUnavailable, VersionConflict, WorldMismatch,
                CorruptState) as e:
            auto.drop()
            emit("error", kind=type(e).__name__, message=str(e))
            return
        self.after_step(epoch, result, recorded, rebuilds)

    def after_step(self, epoch: int, result: str, recorded: int, rebuilds: int) -> None:
        """Report a rebuild, the first action of this epoch, and the end of the run
        (then wait up to one tick for `stop`)."""
        auto, control = self.auto, self.control
        if auto.counts["rebuilds"] > rebuilds:
            emit("rebuilt", epoch=epoch, **auto.rebuilds[-1])
        if self.first_write is None and (auto.counts["recorded"] > recorded
                                         or result == "ticked"):
            self.first_write = time.monotonic()
            emit("acting", epoch=epoch, tick=auto.loaded.meta.get("tick_done"))
        if result == "end":
            emit("end", epoch=epoch)
            with control.lock:
                control.lock.wait_for(lambda: control.stopped, timeout=self.cfg.tick_real_s)

    def report_stats(self) -> None:
        """Report the lease's counters, the autoscaler's counts and the step times;
        close the world connection."""
        step_ms = sorted(self.step_ms)
        timing = {"steps": len(step_ms),
                  "p50_ms": step_ms[len(step_ms) // 2] if step_ms else None,
                  "max_ms": step_ms[-1] if step_ms else None}
        emit("stats", lease=self.lease.snapshot(), counts=self.auto.counts, step=timing)
        self.world.close()


def _build(cfg: ReplicaConfig, control: _Control, authkey: bytes) -> _Loop:
    """Connect to Redis and the world, build the lease where `cfg.backend` says, the
    fenced instance table and the autoscaler (warming the engine up first)."""
    holder = holder_id(cfg.name)
    client = connect(*cfg.redis, timeout_s=min(0.25, cfg.ttl_s / 4))
    keys = Keys(cfg.cluster)
    site = build_site(cfg.backend, cfg.kube, client, keys,
                      allow_volatile_redis=cfg.allow_volatile_redis,
                      timeout_s=min(0.25, cfg.ttl_s / 4))
    lease = Lease(site.backend, holder, cfg.ttl_s, floor_source=site.floor_source)
    watch = RunIdWatch(client)
    table = FencedInstanceTable(FencedStorage(client, keys, lease, live_lease=site.live_lease,
                                              audit=cfg.audit))
    world = WorldClient(cfg.world, authkey)
    sched = make(cfg.scheduler)
    if cfg.scheduler == "engine":
        from vecsched.engine import warmup
        warmup()
    loop = _Loop(cfg, control, holder, lease, watch, world)
    loop.auto = Autoscaler(cfg.name, lease, table, world, sched, loop.hook,
                           claim_store=site.claim_store)
    return loop


def _redis_restarted(watch: RunIdWatch) -> bool:
    """Whether Redis's run id changed since the last look (unreachable: not known)."""
    try:
        return watch.changed()
    except BackendError:
        return False


def parse_config(text: str) -> ReplicaConfig:
    """A ReplicaConfig from its JSON; every problem is a ValueError naming the field."""
    try:
        raw = json.loads(text)
    except ValueError as e:
        raise ValueError(f"config: not JSON ({e})") from None
    if not isinstance(raw, dict):
        raise ValueError(f"config: a JSON object is required, got {type(raw).__name__}")
    for k in ("name", "redis", "world"):
        if k not in raw:
            raise ValueError(f"{k}: required")
    known = ReplicaConfig.__dataclass_fields__
    unknown = sorted(set(raw) - set(known))
    if unknown:
        raise ValueError(f"{unknown[0]}: not a replica setting")
    return ReplicaConfig(**{**raw, "redis": tuple(raw["redis"]), "world": tuple(raw["world"])})


def main(argv=None) -> int:
    faulthandler.register(signal.SIGUSR1, all_threads=True)   # stacks on demand
    argv = sys.argv[1:] if argv is None else argv
    try:
        cfg = parse_config(argv[0])
    except ValueError as e:
        emit("error", kind="ConfigError", message=str(e))
        emit("exit", code=2)
        return 2
    control = _Control()
    threading.Thread(target=control.read, args=(sys.stdin,), daemon=True).start()
    try:
        code = run(cfg, control, bytes.fromhex(os.environ[AUTHKEY_ENV]))
    except VolatileRedis as e:
        emit("error", kind="VolatileRedis", setting=e.setting, message=str(e))
        code = 2
    except BackendError as e:            # Redis unreachable at start-up
        emit("error", kind="BackendError", message=str(e))
        code = 3
    emit("exit", code=code)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
