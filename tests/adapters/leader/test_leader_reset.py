"""The lease on a Redis that lost its data (a real redis-server restarted with its
files deleted): epochs never go back, a paused leader's write is still refused,
holder ids do not repeat, and a Redis that persists nothing is refused."""
from __future__ import annotations

import itertools

import pytest

from vecsched.adapters.leader import (FencedOut, FencedStorage, Keys, Lease,
                                      RedisLeaseBackend, RunIdWatch, VolatileRedis, connect,
                                      holder_id, require_persistence)
from vecsched.adapters.leader.lease import Grant, LeaseBackend
from vecsched.adapters.sim.redis_server import RedisServer
from tests.kits.ha_kit import redis_server  # noqa: F401 (fixture)


def _lease(server, holder, ttl=30.0, cluster="c", **kw) -> Lease:
    client = connect(port=server.port, timeout_s=1.0)
    return Lease(RedisLeaseBackend(client, Keys(cluster)), holder, ttl, **kw)


def _cycle_to(lease: Lease, epoch: int) -> None:
    """Acquire and release until `lease` holds `epoch`."""
    while True:
        assert lease.try_acquire()
        if lease.epoch == epoch:
            return
        lease.release()


def test_empty_restart_next_grant_is_above_what_the_acquirer_saw(redis_server):
    a = _lease(redis_server, holder_id("A"))
    _cycle_to(a, 3)
    redis_server.restart(empty=True)
    assert RedisLeaseBackend(connect(port=redis_server.port), "c").read().epoch == 0
    a.lose("test")
    assert a.try_acquire() and a.epoch == 4           # not 1: the floor was 3
    assert a.stats.backend_resets == 1 and a.stats.epoch_regressions == 0
    snap = a.snapshot()
    assert snap["max_epoch_seen"] == 4 and snap["backend_resets"] == 1


def test_a_newcomer_takes_its_floor_from_the_cloud_fence(redis_server):
    """A replica that has never seen an epoch (started after the reset) asks its
    floor source, e.g. the cloud's own fence; an unreachable source is skipped."""
    cloud_fence = [7]
    b = _lease(redis_server, holder_id("B"), floor_source=lambda: cloud_fence[0])
    assert b.try_acquire() and b.epoch == 8
    b.release()

    def down():
        raise ConnectionError("cloud unreachable")
    c = _lease(redis_server, holder_id("C"), floor_source=down)
    assert c.try_acquire() and c.epoch == 9           # the epoch key still says 8


def test_the_write_stamp_alone_keeps_epochs_up(redis_server):
    """If only the epoch key was lost (evicted, deleted by hand), the highest epoch
    any write carried still sets the next grant."""
    a = _lease(redis_server, holder_id("A"))
    _cycle_to(a, 5)
    s = FencedStorage(a.backend.client, Keys("c"), a)
    assert s.batch_update("t", {"x": b"1"}).success
    a.release()
    connect(port=redis_server.port).delete(Keys("c").epoch)
    b = _lease(redis_server, holder_id("B"))          # knows nothing
    assert b.try_acquire() and b.epoch == 6


class _Forgetful(LeaseBackend):
    """A backend that ignores the floor (as one that lost its data and does not take
    a floor would): the lease must not act on what it grants."""

    def __init__(self, inner: RedisLeaseBackend):
        self.inner = inner

    def try_acquire(self, holder, ttl_ms, floor=0):
        return self.inner.try_acquire(holder, ttl_ms)

    def renew(self, holder, epoch, ttl_ms):
        return self.inner.renew(holder, epoch, ttl_ms)

    def release(self, holder, epoch):
        return self.inner.release(holder, epoch)

    def read(self) -> Grant:
        return self.inner.read()


def test_a_grant_at_or_below_the_floor_is_refused(redis_server):
    inner = RedisLeaseBackend(connect(port=redis_server.port, timeout_s=1.0), Keys("c"))
    lease = Lease(_Forgetful(inner), holder_id("A"), 30.0)
    lease.observe(3)
    assert not lease.try_acquire() and lease.epoch == 0
    assert lease.stats.epoch_regressions == 1
    assert inner.read().holder == ""                  # the bad grant was handed back


class _NoFloor(_Forgetful):
    """A backend written before the floor existed: `try_acquire` takes none."""

    def try_acquire(self, holder, ttl_ms):
        return self.inner.try_acquire(holder, ttl_ms)


def test_a_backend_without_a_floor_climbs_above_it_without_acting_below(redis_server):
    inner = RedisLeaseBackend(connect(port=redis_server.port, timeout_s=1.0), Keys("c"))
    lease = Lease(_NoFloor(inner), holder_id("A"), 30.0)
    lease.observe(3)
    granted = []
    while not lease.try_acquire():
        granted.append(inner.read().epoch)
    assert lease.epoch == 4 and lease.stats.epoch_regressions == 3
    assert granted == [1, 2, 3]                      # each refused grant handed back
    assert not lease.leading() and lease.waiting() > 0   # a loss was seen: it waits


def test_zombie_write_after_an_empty_restart_is_refused(redis_server):
    """The leader (epoch 3) checks its lease and pauses; Redis comes back empty; the
    other replica, which saw epoch 3 while passive, is granted 4; the zombie's write
    with epoch 3 is refused as stale, even with the zombie's holder string."""
    now = [0]
    a = _lease(redis_server, holder_id("A"), clock=lambda: now[0])
    b = _lease(redis_server, holder_id("B"), clock=lambda: now[0])
    _cycle_to(a, 3)
    assert not b.try_acquire() and b.max_epoch_seen == 3
    sa = FencedStorage(a.backend.client, Keys("c"), a)
    assert sa.batch_update("t", {"x": b"a"}).success
    token = a.token()                                 # checked ... then paused
    redis_server.restart(empty=True)
    assert b.try_acquire() and b.epoch == 4
    now[0] += 20 * 10**9                              # B waits out A's ttl (renewing),
    assert b.renew()
    now[0] += 10 * 10**9 + 1                          # then acts
    sb = FencedStorage(b.backend.client, Keys("c"), b)
    assert sb.batch_update("t", {"x": b"b"}, [], 0).success
    with pytest.raises(FencedOut) as e:
        sa.batch_update("t", {"x": b"zombie"}, token=token)
    assert e.value.reason == "stale" and e.value.fence == 4
    reused = _lease(redis_server, a.holder)           # a replica reusing A's string
    with pytest.raises(FencedOut):
        FencedStorage(reused.backend.client, Keys("c"), reused).batch_update(
            "t", {"x": b"zombie"}, token=token)
    assert sb.get_all("t")[0]["x"].value == b"b"


def test_same_name_replicas_get_distinct_holders_and_do_not_share_a_lease(redis_server):
    n = itertools.count()
    ids = [holder_id("A", unique=lambda: f"u{next(n)}") for _ in range(2)]
    assert ids == ["A-u0", "A-u1"]
    assert holder_id("A") != holder_id("A")            # uuid4 by default
    first, second = (_lease(redis_server, holder_id("A")) for _ in range(2))
    assert first.try_acquire()
    assert not second.try_acquire() and second.epoch == 0
    # What the holder id prevents: an identical string is taken for the holder.
    twin = _lease(redis_server, first.holder)
    assert twin.try_acquire() and twin.epoch == 2
    with pytest.raises(ValueError, match="name"):
        holder_id("has space")


def test_a_redis_without_persistence_is_refused_unless_allowed(tmp_path):
    with RedisServer(tmp_path / "volatile", persistent=False) as server:
        client = connect(port=server.port, timeout_s=1.0)
        with pytest.raises(VolatileRedis) as e:
            RedisLeaseBackend(client, Keys("c"))
        assert e.value.setting == "appendonly" and e.value.value == "no"
        assert "appendonly" in str(e.value) and "--allow-volatile-redis" in str(e.value)
        lease = Lease(RedisLeaseBackend(client, Keys("c"), allow_volatile=True), "A", 30.0)
        assert lease.try_acquire()
        client.config_set("save", "60 1")              # snapshots: persistent enough
        assert require_persistence(client)["save"] == "60 1"
        assert RedisLeaseBackend(client, Keys("c")).persistence["appendonly"] == "no"


def test_run_id_watch_notices_a_restart(redis_server):
    watch = RunIdWatch(connect(port=redis_server.port, timeout_s=1.0))
    assert not watch.changed() and not watch.changed()
    redis_server.restart(empty=True)
    assert watch.changed() and watch.restarts == 1
    assert not watch.changed()

