"""The leader lease on a real redis-server: acquire / renew / lose, fencing, leader
death and pause, Redis restart, a delayed network, replicas starting together."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest

from vecsched.adapters.leader import (FencedOut, FencedStorage, Keys, Lease, LeaseKeeper, NotLeader,
                             RedisLeaseBackend, StorageUnavailable, connect)
from vecsched.adapters.leader.lease import NS
from tests.kits.ha_kit import DelayProxy, redis_server  # noqa: F401 (fixture)

TTL = 0.5


def _lease(server, holder, ttl=TTL, cluster="c", port=None, timeout_s=0.2, **kw) -> Lease:
    client = connect(port=port or server.port, timeout_s=timeout_s)
    return Lease(RedisLeaseBackend(client, Keys(cluster)), holder, ttl, **kw)


def _wait(pred, timeout_s: float, step_s: float = 0.005) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step_s)
    return pred()


def test_epoch_grows_with_every_change_of_holder(redis_server):
    a, b = _lease(redis_server, "A"), _lease(redis_server, "B")
    assert a.try_acquire() and a.epoch == 1
    assert not b.try_acquire() and b.max_epoch_seen == 1      # held: B sees who has it
    assert a.renew() and a.epoch == 1                         # renewing keeps the epoch
    a.release()
    assert b.try_acquire() and b.epoch == 2
    b.release()
    assert a.try_acquire() and a.epoch == 3                   # the same holder again: new term
    a.lose("test")                                            # stepped down, key still live
    assert not b.try_acquire()
    assert a.try_acquire() and a.epoch == 4                   # re-taken: a new term again
    assert RedisLeaseBackend(connect(port=redis_server.port), "c").read().holder == "A"


def test_leader_death_next_leader_only_after_the_dead_one_stopped(redis_server):
    """A leader that dies (stops renewing) is replaced after its lease runs out on
    Redis's clock, never before its own clock told it to stop acting."""
    a, b = _lease(redis_server, "A"), _lease(redis_server, "B")
    assert a.try_acquire()
    a_until = a.valid_until_ns                    # A is "killed" here: no more renewals
    attempts_before_expiry = 0
    while not b.try_acquire():
        attempts_before_expiry += 1
        time.sleep(0.01)
    assert attempts_before_expiry > 0             # B really had to wait for the expiry
    assert b.epoch == a.epoch + 1
    assert a_until <= b.last_sent_ns             # A had stopped before B's term began
    with pytest.raises(NotLeader):
        a.token()
    assert a.stats.losses == {"expired": 1}


def test_paused_leader_write_is_rejected_by_the_fence(redis_server):
    """A leader paused between its lease check and its write (a GC pause, SIGSTOP)
    wakes after another replica took over: its write is refused atomically, even
    though its expected storage version still matches."""
    a, b = _lease(redis_server, "A"), _lease(redis_server, "B")
    sa = FencedStorage(a.backend.client, Keys("c"), a, audit=100)
    sb = FencedStorage(b.backend.client, Keys("c"), b, audit=100)
    assert a.try_acquire()
    assert sa.batch_update("t", {"x": b"1"}, [], 0).success
    token = a.token()                             # checked ... then paused
    assert _wait(b.try_acquire, 3 * TTL)          # B takes over after A's lease ran out
    with pytest.raises(FencedOut) as e:
        sa.batch_update("t", {"x": b"stale", "y": b"stale"}, [], 1, token=token)
    assert e.value.reason == "stale" and e.value.version_matched
    assert sa.get_all("t") == ({"x": (b"1", 1)}, 1)         # nothing of it landed
    assert sb.batch_update("t", {"x": b"2"}, [], 1).success
    audit = sa.audit()
    assert [(r["result"], r["epoch"], r["fence"]) for r in audit] == [
        ("written", 1, 1), ("stale", 1, 2), ("written", 2, 2)]


def test_write_after_expiry_is_rejected_even_without_a_new_leader(redis_server):
    a = _lease(redis_server, "A")
    s = FencedStorage(a.backend.client, Keys("c"), a)
    assert a.try_acquire()
    token = a.token()
    time.sleep(TTL + 0.1)                         # the lease ran out on Redis too
    with pytest.raises(NotLeader):                # the lease client refuses to send it
        s.batch_update("t", {"x": b"1"})
    with pytest.raises(FencedOut) as e:           # and Redis refuses it if sent anyway
        s.batch_update("t", {"x": b"1"}, token=token)
    assert e.value.reason == "expired"
    assert s.get_version() == 0


def test_validity_is_counted_from_the_send_time_with_a_margin(redis_server):
    """An injected clock drives the local validity: valid from before the request
    left, for ttl less the margin; a failed renewal never extends it."""
    now = [10 * NS]
    a = _lease(redis_server, "A", ttl=30.0, margin_s=3.0, clock=lambda: now[0])
    assert a.try_acquire()
    assert a.valid_until_ns == 10 * NS + 27 * NS
    now[0] += 26 * NS
    assert a.token().epoch == 1
    redis_server.kill()
    assert not a.renew() and a.stats.renew_failures == 1
    assert a.valid_until_ns == 37 * NS
    now[0] += 1 * NS
    with pytest.raises(NotLeader):
        a.token()
    assert a.stats.losses == {"expired": 1}


def test_redis_restart_leader_fails_fast_and_no_write_is_lost(redis_server):
    a = _lease(redis_server, "A", ttl=1.0)
    s = FencedStorage(a.backend.client, Keys("c"), a)
    assert a.try_acquire()
    acked = {}
    for i in range(20):
        st = s.batch_update("t", {f"k{i}": f"v{i}".encode()}, [], i)
        assert st.success
        acked[f"k{i}"] = (f"v{i}".encode(), st.version)
    redis_server.kill()                           # a crash: SIGKILL, no shutdown save
    failures_before = a.stats.renew_failures
    tried = 0
    while a.leading():                            # keep trying to renew and to write
        a.poll()
        tried += 1
        # Refused either way: Redis is gone, or (on a loaded machine, where poll() can
        # outlast what was left of the lease) the lease ran out first.
        with pytest.raises((StorageUnavailable, NotLeader)):
            s.batch_update("t", {"lost": b"x"}, [], 20)
        time.sleep(0.02)
    # Every attempt failed fast (no retries, a short socket timeout), and the leader
    # stepped down within its lease: at most ttl after its last successful renewal.
    # (tried >= 5: no single call waited out the lease in retries.)
    assert a.stats.renew_failures > failures_before and tried >= 5
    assert a.valid_until_ns <= a.last_sent_ns + int(1.0 * NS)
    with pytest.raises(NotLeader):
        s.batch_update("t", {"lost": b"x"}, [], 20)
    redis_server.restart()                        # same port, same directory
    assert s.get_all("t") == (acked, 20)          # every acknowledged write is there
    assert _wait(a.try_acquire, 3.0)
    assert a.epoch == 2                           # a new term; the epoch key survived too
    assert s.batch_update("t", {"k20": b"v20"}, [], 20) == (True, 21)


def test_network_delay_on_renew(redis_server):
    """Renewals through a proxy that really delays Redis's answers: latency is
    exported; a late answer never extends the lease past Redis's own expiry; once
    answers come later than the timeout the leader steps down before anybody else
    can be granted the lease."""
    # Loose on time, for a loaded machine: a 2 s TTL and a 2 s timeout behind a 0.3 s
    # delay (a 0.3 s timeout behind a 0.2 s delay failed on a busy machine), then a
    # delay far past the timeout.
    proxy = DelayProxy(redis_server.port)
    try:
        a = _lease(redis_server, "A", ttl=2.0, port=proxy.port, timeout_s=2.0)
        b = _lease(redis_server, "B", ttl=2.0, timeout_s=2.0)
        direct = connect(port=redis_server.port)
        assert a.try_acquire()
        proxy.delay_s = 0.3                       # slower than the 0.2 s margin
        for _ in range(3):
            assert a.renew()
            pttl_ms = direct.pttl(Keys("c").lease)
            now = time.monotonic_ns()
            assert a.valid_until_ns <= now + pttl_ms * 1_000_000
        assert a.stats.renewals == 3 and a.snapshot()["renew_latency_ms"]["p50"] >= 300
        proxy.delay_s = 30.0                      # answers far later than the 2 s timeout
        keeper = LeaseKeeper(a, 0.02).start()
        try:
            assert _wait(b.try_acquire, 60.0)
        finally:
            keeper.stop()
        assert a.stats.renew_failures >= 1
        assert not a.leading() and a.valid_until_ns <= b.last_sent_ns
    finally:
        proxy.close()


_CONTENDER = textwrap.dedent("""
    import json, sys, time
    from vecsched.adapters.leader import Keys, Lease, RedisLeaseBackend, connect
    port, name, start, rounds = int(sys.argv[1]), sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
    client = connect(port=port, timeout_s=1.0)
    client.ping()
    for r in range(rounds):
        lease = Lease(RedisLeaseBackend(client, Keys(f"round-{r}")), name, 30.0)
        while time.monotonic() < start + 0.05 * r:
            pass
        won = lease.try_acquire()
        print(json.dumps({"round": r, "won": won, "epoch": lease.epoch}), flush=True)
""")


def test_replicas_starting_together_exactly_one_leads(redis_server):
    """Two processes try to take a fresh lease at the same instant, 20 times."""
    rounds = 20
    start = time.monotonic() + 4.0               # CLOCK_MONOTONIC: shared by the processes
    procs = [subprocess.Popen([sys.executable, "-c", _CONTENDER, str(redis_server.port), n,
                               repr(start), str(rounds)], stdout=subprocess.PIPE, text=True)
             for n in ("A", "B")]
    outs = [p.communicate(timeout=60)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    results = [[json.loads(line) for line in out.splitlines()] for out in outs]
    for r in range(rounds):
        won = [res[r]["won"] for res in results]
        assert sum(won) == 1, f"round {r}: {won}"
        assert max(res[r]["epoch"] for res in results) == 1
