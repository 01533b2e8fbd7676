"""Property: over any schedule of ticks, pauses, resumes, kills and waits of three
replicas sharing one real Redis, no two writers are ever accepted in one epoch, no
write older than the newest granted epoch is accepted, and the accepted epochs never
go back.

A replica is modelled in this process (so the schedule is exact): a tick is one
iteration of its loop (keeper poll, then a write if its lease is valid); `pause`
freezes it right after its lease check with the write not yet sent (what SIGSTOP or a
long GC pause does at the worst moment; its keeper is frozen too); `resume` sends that
write (the one paused longest ago first); `kill` loses it and starts a new incarnation with a new identity; `sleep` lets
real time pass (in halves of the lease ttl), so leases really expire in Redis.

A second property adds `reset`: Redis restarted with its files deleted (lease, epoch
counter, fence and audit gone). Each replica then takes its floor from what it saw
and from a durable record outside Redis (the cloud's fence: the highest epoch of an
accepted write), and the same holds across the resets.
"""
from __future__ import annotations

import itertools
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from vecsched.adapters.leader import (FencedOut, FencedStorage, Keys, Lease, NotLeader,
                             RedisLeaseBackend, connect)
from tests.kits.ha_kit import redis_server  # noqa: F401 (fixture)

TTL = 0.1
_clusters = itertools.count()

# A schedule is a list of rounds: replica `r` ticks `ticks` times, is paused (or not),
# real time passes (`wait` halves of the ttl), then maybe the replica paused longest
# ago is resumed and maybe one is killed. Rounds keep the interesting interleavings
# likely (a leader paused, the lease expiring, another taking over, the first waking).
_round_parts = (st.integers(0, 2), st.integers(1, 2), st.booleans(), st.integers(0, 3),
                st.booleans(), st.sampled_from([None, None, None, 0, 1, 2]))
round_strategy = st.tuples(*_round_parts)
schedules = st.lists(round_strategy, min_size=2, max_size=10)


# The same rounds, each maybe ending with an empty Redis restart.
reset_schedules = st.lists(st.tuples(*_round_parts, st.booleans()), min_size=2, max_size=10)


def steps_of(rounds) -> list:
    steps = []
    for r, ticks, pause, wait, resume, kill, *reset in rounds:
        steps += [("tick", r)] * ticks + ([("pause", r)] if pause else [])
        steps += [("sleep", wait - 1)] if wait else []
        steps += [("resume", None)] if resume else []
        steps += [("kill", kill)] if kill is not None else []
        steps += [("reset", None)] if reset and reset[0] else []
    return steps


class Replica:
    def __init__(self, port: int, keys: Keys, name: str, floor_source=None):
        client = connect(port=port, timeout_s=0.5)
        self.lease = Lease(RedisLeaseBackend(client, keys), name, TTL,
                           floor_source=floor_source)
        self.storage = FencedStorage(client, keys, self.lease, audit=100_000)
        self.frozen = False
        self.pending = None              # the token captured before a pause


def run_schedule(port: int, steps, server=None) -> tuple[list, list]:
    """Run `steps`; with `server`, `reset` restarts it empty (the audit read before
    each reset is kept) and the replicas' floor source is the cloud's fence."""
    import time

    keys = Keys(f"prop-{next(_clusters)}")
    incarnation = defaultdict(int)
    cloud_fence = [0]                    # durable, outside Redis: the highest accepted epoch
    floor = (lambda: cloud_fence[0]) if server is not None else None
    reps = {r: Replica(port, keys, f"r{r}.0", floor) for r in range(3)}
    granted = 0                          # the newest epoch any replica was granted
    attempts = []                        # (epoch, holder, newest granted then, accepted)
    audit_before: list = []

    def write(rep: Replica, token) -> None:
        try:
            rep.storage.batch_update("t", {"x": str(len(attempts)).encode()}, [], None,
                                     token=token)
            ok = True
            cloud_fence[0] = max(cloud_fence[0], token.epoch)
        except FencedOut:
            ok = False
        attempts.append((token.epoch, token.holder, granted, ok))

    paused = []                          # frozen replicas, the longest frozen first
    for op, r in steps:
        if op == "reset":                # Redis loses everything; its audit kept here
            audit_before += reps[0].storage.audit()
            server.restart(empty=True)
            continue
        if op == "resume":               # the replica paused longest ago, if any
            if not paused:
                continue
            r = paused.pop(0)
        rep = reps[r]
        if op == "sleep":
            time.sleep((r + 1) * TTL / 2)
        elif op == "kill":
            incarnation[r] += 1
            reps[r] = Replica(port, keys, f"r{r}.{incarnation[r]}", floor)
            if r in paused:
                paused.remove(r)
        elif op == "resume":
            if rep.frozen:
                rep.frozen, token, rep.pending = False, rep.pending, None
                if token is not None:
                    write(rep, token)
        elif rep.frozen:
            continue
        elif op == "pause":
            try:
                rep.pending = rep.lease.token()
            except NotLeader:
                rep.pending = None
            rep.frozen = True
            paused.append(r)
        else:                            # tick
            rep.lease.poll()
            granted = max(granted, rep.lease.epoch)
            try:
                token = rep.lease.token()
            except NotLeader:
                continue
            write(rep, token)
    return attempts, audit_before + reps[0].storage.audit()


def check(attempts, audit) -> None:
    writers = defaultdict(set)
    accepted = []
    for epoch, holder, granted, ok in attempts:
        if epoch < granted:
            assert not ok, f"a write of epoch {epoch} accepted after epoch {granted} was granted"
        if ok:
            assert epoch == granted
            writers[epoch].add(holder)
            accepted.append(epoch)
    assert all(len(h) == 1 for h in writers.values()), dict(writers)
    assert accepted == sorted(accepted)
    # The store's own record says the same, attempt by attempt.
    assert [(a["epoch"], a["holder"], a["result"] == "written") for a in audit] == \
        [(e, h, ok) for e, h, _, ok in attempts]
    assert all(a["epoch"] == a["fence"] for a in audit if a["result"] == "written")


@settings(max_examples=40, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(rounds=schedules)
# The classic cases, always run: a leader paused past its ttl while another takes over;
# a paused leader nobody replaced; a killed leader; two replicas pausing in turn.
@example(rounds=[(0, 1, True, 3, False, None), (1, 1, False, 0, True, None)])
@example(rounds=[(0, 1, True, 3, True, None), (0, 1, False, 0, False, None)])
@example(rounds=[(0, 1, False, 3, False, 0), (1, 2, False, 0, False, None)])
@example(rounds=[(0, 1, True, 3, False, None), (1, 1, True, 3, False, None),
                 (2, 1, False, 0, True, None), (2, 1, False, 0, True, None)])
@pytest.mark.slow
def test_never_two_writers_in_one_epoch(redis_server, rounds):
    attempts, audit = run_schedule(redis_server.port, steps_of(rounds))
    check(attempts, audit)


@settings(max_examples=30, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture,
                                 HealthCheck.too_slow])
@given(rounds=reset_schedules)
# Always run: the leader checks its lease, pauses, Redis restarts empty, another
# replica (and then a fresh incarnation that saw nothing) takes over, the first wakes.
@example(rounds=[(0, 1, True, 0, False, None, True), (1, 1, False, 0, False, 1, False),
                 (1, 1, False, 0, True, None, False)])
@example(rounds=[(0, 2, False, 0, False, 0, True), (0, 1, False, 0, False, None, False),
                 (1, 1, False, 3, False, None, True), (2, 1, False, 0, False, None, False)])
@pytest.mark.slow
def test_never_two_writers_in_one_epoch_across_empty_restarts(redis_server, rounds):
    attempts, audit = run_schedule(redis_server.port, steps_of(rounds), redis_server)
    check(attempts, audit)
