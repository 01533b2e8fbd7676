"""After the lease backend lost its records (a real redis-server restarted with its
files deleted), a new holder waits out every holder from before the loss, and the
holder from before may finish what it is doing until its own lease runs out.

The clocks are injected: every lease here reads the same test clock, so "A's lease
ran out" and "ttl passed since B's grant" are exact points, not sleeps."""
from __future__ import annotations

import pytest

from vecsched.adapters.leader import (Keys, Lease, NotLeader, RedisLeaseBackend, connect,
                                      holder_id)
from tests.kits.ha_kit import redis_server  # noqa: F401 (fixture)

MS = 1_000_000


class _Clock:
    """Monotonic ns that only moves when told."""

    def __init__(self):
        self.ns = 0

    def __call__(self) -> int:
        return self.ns

    def at_ms(self, ms: float) -> None:
        self.ns = int(ms * MS)


def _lease(server, name, clock, ttl=1.0, **kw) -> Lease:
    client = connect(port=server.port, timeout_s=1.0)
    return Lease(RedisLeaseBackend(client, Keys("c")), holder_id(name), ttl, clock=clock, **kw)


def test_a_reset_grant_waits_out_any_earlier_holder_before_acting(redis_server):
    """After Redis lost its data, the lease key of the holder from before is gone and a
    passive replica is granted at once; that holder may still act until its own lease
    runs out (ttl after its last renewal, sent before the loss). The new holder renews
    but neither leads nor gets a token until ttl has passed since its acquisition."""
    clock = _Clock()
    a, b = _lease(redis_server, "A", clock), _lease(redis_server, "B", clock)
    assert a.try_acquire() and a.epoch == 1
    b.observe(a.epoch)                                # B read A's lease while passive
    redis_server.restart(empty=True)
    clock.at_ms(100)
    assert b.try_acquire() and b.epoch == 2           # granted: the key was gone
    assert b.stats.backend_resets == 1
    assert a.leading() and a.token().epoch == 1       # A's own lease still runs
    assert not b.leading() and b.waiting() == 1000 * MS
    with pytest.raises(NotLeader, match="lost its records"):
        b.token()
    assert b.epoch == 2 and "expired" not in b.stats.losses     # held, not lost
    clock.at_ms(700)
    assert b.renew()                                  # B keeps its lease meanwhile
    clock.at_ms(950)                                  # A's lease is over by its clock
    assert not a.leading()
    assert not b.leading() and b.waiting() == 150 * MS
    clock.at_ms(1100)                                 # ttl since B's acquisition
    assert b.leading() and b.token().epoch == 2 and b.waiting() == 0
    snap = b.snapshot()
    assert snap["reset_waits"] == 1 and snap["reset_waits_ms"] == 1000.0


def test_a_first_grant_on_an_empty_backend_acts_at_once(redis_server):
    """A fresh cluster (no epoch ever seen, nothing lost) is no reset: no wait."""
    a = _lease(redis_server, "A", _Clock())
    assert a.try_acquire() and a.leading() and a.token().epoch == 1
    assert a.stats.backend_resets == 0 and a.snapshot()["reset_waits"] == 0


def test_a_refused_renewal_leaves_the_holder_its_lease_until_it_runs_out(redis_server):
    """The backend refuses A's renewal while A's lease is valid by A's clock: the
    backend lost A's record (no other holder can have been granted it otherwise). A
    renews no more but may act until valid_until (the recorded calls of its tick get
    made); the step-down is then recorded as "lost". A refusal after valid_until is
    a loss at once."""
    clock = _Clock()
    a = _lease(redis_server, "A", clock)
    assert a.try_acquire()                            # valid until 900 ms (margin 10 %)
    redis_server.restart(empty=True)
    clock.at_ms(300)
    assert not a.renew() and a.refused
    assert a.stats.renew_rejected == 1 and a.stats.losses == {}
    assert a.leading() and a.token().valid_until_ns == 900 * MS   # not extended
    assert not a.renew() and a.stats.renew_rejected == 1   # not even asked again
    clock.at_ms(500)
    assert a.poll() and a.stats.renew_rejected == 1        # the keeper does not renew
    clock.at_ms(900)
    with pytest.raises(NotLeader):
        a.token()
    assert a.stats.losses == {"lost": 1} and not a.refused

    late = _lease(redis_server, "L", clock)
    assert late.try_acquire()                          # granted at 900 ms: to 1800 ms
    redis_server.restart(empty=True)
    clock.at_ms(1800)
    assert not late.renew() and late.stats.losses == {"lost": 1}


def test_a_newcomer_fenced_out_while_valid_waits_on_its_next_grant(redis_server):
    """A replica that knew no epoch (floor 0) is granted 1 by the emptied Redis; the
    cloud's fence refuses it (the holder from before the loss claimed there): that
    is the loss, seen by the replica itself. Its next grant, although the epoch key
    is there again (no reset by the backend's word), waits until ttl has passed since
    the refused grant's acquisition."""
    clock = _Clock()
    a = _lease(redis_server, "A", clock)
    assert a.try_acquire() and a.epoch == 1            # A claims epoch 1 at the cloud
    redis_server.restart(empty=True)
    clock.at_ms(50)
    c = _lease(redis_server, "C", clock)
    assert c.try_acquire() and c.epoch == 1 and c.leading()   # nothing says "lost"
    c.observe(1)                                       # its claim refused: fence 1 (A's)
    c.lose("fenced")
    clock.at_ms(60)
    assert c.try_acquire() and c.epoch == 2            # its own key: granted again
    assert c.stats.backend_resets == 0
    assert not c.leading() and c.waiting() == 990 * MS       # until 50 ms + ttl
    clock.at_ms(899)
    assert a.leading()                                 # A still acts: C must not
    assert c.renew() and not c.leading()               # C keeps its lease meanwhile
    clock.at_ms(1050)
    assert not a.leading() and c.leading()
    assert c.snapshot()["reset_waits_ms"] == 990.0


def test_a_lease_fenced_out_after_it_ran_out_does_not_wait(redis_server):
    """A zombie (paused past its lease) fenced out on waking is the ordinary case,
    not a loss: its next grant acts at once."""
    clock = _Clock()
    a = _lease(redis_server, "A", clock)
    assert a.try_acquire()
    a.release()
    assert a.try_acquire() and a.epoch == 2
    clock.at_ms(2000)                                  # paused: its lease ran out
    a.lose("fenced")
    a.backend.release(a.holder, 2)
    assert a.try_acquire() and a.leading() and a.waiting() == 0


def _restore(server, keep: dict, lease_key: bytes) -> None:
    """Redis back from an old snapshot: every key as it was then; the lease key of then
    had expired long ago, so it is not there."""
    client = connect(port=server.port, timeout_s=1.0)
    client.flushall()
    for key, raw in keep.items():
        if key != lease_key:
            client.restore(key, 0, raw)
    client.close()


def test_a_grant_from_an_epoch_key_restored_below_the_floor_waits(redis_server):
    """Redis restored from an old snapshot: its epoch key says 1 while B has seen A's
    epoch 2. The grant (3: above the floor, no regression) still comes from a Redis that
    forgot a grant, so A may be mid-tick on epoch 2 by its own clock: B waits one ttl,
    as after an empty restart. A key equal to the floor is no loss: no wait."""
    clock = _Clock()
    a, b = _lease(redis_server, "A", clock), _lease(redis_server, "B", clock)
    keys = Keys("c")
    client = connect(port=redis_server.port, timeout_s=1.0)
    assert a.try_acquire() and a.epoch == 1
    snapshot = {k: client.dump(k) for k in client.keys("*")}       # epoch key 1
    a.release()
    assert a.try_acquire() and a.epoch == 2
    assert not b.try_acquire() and b.max_epoch_seen == 2            # B read A's lease
    _restore(redis_server, snapshot, keys.lease.encode())
    assert client.get(keys.epoch) == b"1"
    clock.at_ms(100)
    assert b.try_acquire() and b.epoch == 3
    assert b.stats.backend_resets == 1 and b.stats.epoch_regressions == 0
    assert a.leading() and a.token().epoch == 2                     # A's lease still runs
    assert not b.leading() and b.waiting() == 1000 * MS
    with pytest.raises(NotLeader, match="lost its records"):
        b.token()
    clock.at_ms(700)
    assert b.renew() and not b.leading()                            # B keeps its lease
    clock.at_ms(1100)
    assert not a.leading() and b.leading() and b.token().epoch == 3

    c = _lease(redis_server, "C", clock)                            # the ordinary case
    b.release()
    assert c.try_acquire() and c.epoch == 4 and c.leading()          # key 3, floor 3
    assert c.stats.backend_resets == 0


def test_the_write_stamp_above_the_epoch_key_is_a_loss(redis_server):
    """The epoch key alone went back (restored, or deleted by hand) while the stamp of
    the writes remembers epoch 2: whatever the acquirer saw, that is a lost grant."""
    clock = _Clock()
    keys = Keys("c")
    client = connect(port=redis_server.port, timeout_s=1.0)
    client.set(keys.epoch, 1)
    client.set(keys.stamp, 2)
    d = _lease(redis_server, "D", clock)                            # knows nothing
    assert d.try_acquire() and d.epoch == 3 and d.stats.backend_resets == 1
    assert not d.leading() and d.waiting() == 1000 * MS
