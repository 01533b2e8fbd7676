"""The leader lease on a Kubernetes ``coordination.k8s.io/v1`` Lease
(``adapters/leader/kube_backend.py``), over HTTPS with a client certificate against
the Kubernetes API STAND-IN (``adapters/sim/kube``: no real API server runs here; its
Lease objects have the real optimistic concurrency: 409 on a stale resourceVersion).

The contract tests mirror the ones the Redis backend passes
(tests/adapters/leader/test_leader_lease.py) where they are about the lease rather
than Redis: epochs, leader death, validity and margin, the backend down, replicas
starting together; then what is particular to the Kubernetes rule: expiry by this
replica's own observation (not renewTime against its wall clock), whole-second
durations, unique holder identities.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
import requests

from vecsched.adapters.leader import Lease, LeaseKeeper, NotLeader
from vecsched.adapters.leader.kube_backend import KubeLeaseBackend, new_holder_id
from vecsched.adapters.leader.lease import NS
from vecsched.adapters.sim.kube.apiserver import KubeApiStandIn
from vecsched.adapters.sim.kube.tls import Certs
from tests.kits.ha_kit import DelayProxy

TTL = 1.0                 # Lease durations are whole seconds
NAMESPACE, NAME = "default", "vecsched-leader"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs.make(str(tmp_path_factory.mktemp("tls")))


@pytest.fixture
def api(certs):
    a = KubeApiStandIn(certs).start()
    yield a
    a.stop()


def _backend(api, name=NAME, **kw) -> KubeLeaseBackend:
    c = api.certs
    kw.setdefault("timeout_s", 0.5)
    return KubeLeaseBackend(api.url, NAMESPACE, name, ca=c.ca, client_cert=c.client_cert,
                            client_key=c.client_key, **kw)


def _lease(api, holder, ttl=TTL, clock=None, **kw) -> Lease:
    bkw = {"clock": clock} if clock else {}
    lkw = {"clock": clock} if clock else {}
    return Lease(_backend(api, **bkw), holder, ttl, **lkw, **kw)


def _object(api, name=NAME) -> dict:
    return api.store.get("leases", NAMESPACE, name)


def _wait(pred, timeout_s: float, step_s: float = 0.01) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(step_s)
    return pred()


# ------------------------------------------------------------------ the contract

def test_epoch_grows_with_every_change_of_holder(api):
    a, b = _lease(api, "A"), _lease(api, "B")
    assert a.try_acquire() and a.epoch == 1
    assert not b.try_acquire() and b.max_epoch_seen == 1
    assert a.renew() and a.epoch == 1
    a.release()
    assert b.try_acquire() and b.epoch == 2                 # released: no wait
    b.release()
    assert a.try_acquire() and a.epoch == 3
    a.lose("test")                                          # stepped down, Lease still held
    assert not b.try_acquire()
    assert a.try_acquire() and a.epoch == 4                 # re-taken: a new term
    assert _backend(api).read().holder == "A"
    spec = _object(api)["spec"]
    assert (spec["holderIdentity"], spec["leaseTransitions"], spec["leaseDurationSeconds"]) \
        == ("A", 4, 1)
    obj = _object(api)
    assert (obj["apiVersion"], obj["kind"]) == ("coordination.k8s.io/v1", "Lease")
    assert spec["renewTime"].endswith("Z") and "." in spec["renewTime"]     # MicroTime


def test_leader_death_next_leader_only_after_the_dead_one_stopped(api):
    a, b = _lease(api, "A"), _lease(api, "B")
    assert a.try_acquire()
    a_until = a.valid_until_ns                    # A is "killed": no more renewals
    attempts_before_expiry = 0
    while not b.try_acquire():
        attempts_before_expiry += 1
        time.sleep(0.02)
    assert attempts_before_expiry > 0
    assert b.epoch == a.epoch + 1
    assert a_until <= b.last_sent_ns
    with pytest.raises(NotLeader):
        a.token()
    assert a.stats.losses == {"expired": 1}


def test_validity_from_the_send_time_with_a_margin_and_the_api_down(api):
    now = [10 * NS]
    a = _lease(api, "A", ttl=30.0, margin_s=3.0, clock=lambda: now[0])
    assert a.try_acquire()
    assert a.valid_until_ns == 10 * NS + 27 * NS
    now[0] += 26 * NS
    assert a.token().epoch == 1
    api.stop()                                    # the API server is gone
    assert not a.renew() and a.stats.renew_failures == 1
    assert a.valid_until_ns == 37 * NS            # a failed renewal never extends it
    now[0] += 1 * NS
    with pytest.raises(NotLeader):
        a.token()


def test_keeper_renews_and_a_contender_never_gets_in(api):
    a, b = _lease(api, "A"), _lease(api, "B")
    keeper = LeaseKeeper(a, 0.05).start()
    try:
        assert _wait(a.leading, 2.0)
        t_end = time.monotonic() + 2.5 * TTL      # well past one lease duration
        while time.monotonic() < t_end:
            assert not b.try_acquire()
            time.sleep(0.05)
        assert a.leading() and a.stats.renewals >= 3
    finally:
        keeper.stop(release=True)
    assert b.try_acquire() and b.epoch == 2


def test_network_delay_on_renew(api):
    """Renewals through a proxy that really delays the API server's answers (TLS passes
    through it): a late answer never extends the holder's lease past the expiry another
    replica counts from its own sighting; once answers come later than the timeout the
    leader steps down before anybody else is granted the lease."""
    # Loose on time, for a loaded machine: a 2 s TTL and a 2 s request timeout behind a
    # 0.3 s delay (10x the delay's margin to the timeout; a 0.3 s timeout behind a 0.2 s
    # delay failed on a busy machine), then a delay far past the timeout.
    port = api.port
    proxy = DelayProxy(port)
    ttl = 2.0
    try:
        via = api.url.replace(f":{port}", f":{proxy.port}")
        c = api.certs
        slow = KubeLeaseBackend(via, NAMESPACE, NAME, ca=c.ca, client_cert=c.client_cert,
                                client_key=c.client_key, timeout_s=2.0)
        a, b = Lease(slow, "A", ttl), _lease(api, "B", ttl=ttl)
        assert a.try_acquire()
        proxy.delay_s = 0.3                       # slower than the 0.2 s margin
        for _ in range(3):
            assert a.renew()
            g = b.backend.read()                  # B sees the new version now
            assert g.holder == "A"
            assert a.valid_until_ns <= time.monotonic_ns() + (g.ttl_ms + 1) * 1_000_000
        assert a.stats.renewals == 3 and a.snapshot()["renew_latency_ms"]["p50"] >= 600
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
    from vecsched.adapters.leader import Lease
    from vecsched.adapters.leader.kube_backend import KubeLeaseBackend
    url, ca, cert, key, name, start, rounds = sys.argv[1:8]
    start, rounds = float(start), int(rounds)
    for r in range(rounds):
        b = KubeLeaseBackend(url, "default", f"round-{r}", ca=ca, client_cert=cert,
                             client_key=key, timeout_s=5.0)
        lease = Lease(b, name, 30.0)
        while time.monotonic() < start + 0.1 * r:
            pass
        won = lease.try_acquire()
        print(json.dumps({"round": r, "won": won, "epoch": lease.epoch}), flush=True)
""")


@pytest.mark.slow
def test_replicas_starting_together_exactly_one_leads(api):
    """Two processes take a fresh Lease at the same instant, 10 times: the API
    server's create / compare-and-swap lets exactly one of them in."""
    rounds, c = 10, api.certs
    start = time.monotonic() + 5.0
    procs = [subprocess.Popen([sys.executable, "-c", _CONTENDER, api.url, c.ca, c.client_cert,
                               c.client_key, n, repr(start), str(rounds)],
                              stdout=subprocess.PIPE, text=True) for n in ("A", "B")]
    outs = [p.communicate(timeout=90)[0] for p in procs]
    assert all(p.returncode == 0 for p in procs)
    results = [[json.loads(line) for line in out.splitlines()] for out in outs]
    for r in range(rounds):
        won = [res[r]["won"] for res in results]
        assert sum(won) == 1, f"round {r}: {won}"
        assert max(res[r]["epoch"] for res in results) == 1
        assert _object(api, f"round-{r}")["spec"]["leaseTransitions"] == 1


# ------------------------------------------------------------------ the Kubernetes rule

def test_expiry_is_judged_by_the_local_observation_not_renew_time(api):
    """B judges A's lease by when B itself last saw it change, on B's monotonic clock.
    A's renewTime written by a wall clock 26 years behind (and frozen) does not make
    it expired; each renewal of A is a new version that restarts B's count; only a
    full duration without a change does."""
    mono = [100 * NS]
    a = Lease(_backend(api, wall=lambda: 946684800.0), "A", 30.0,       # wall: year 2000
              clock=lambda: mono[0])             # A's monotonic clock runs at B's rate
    b = Lease(_backend(api, clock=lambda: mono[0]), "B", 30.0, clock=lambda: mono[0])
    assert a.try_acquire()
    assert _object(api)["spec"]["renewTime"].startswith("2000-01-01")
    assert not b.try_acquire()                   # B observes A's version at t = 100 s
    mono[0] += 29 * NS
    assert not b.try_acquire()                   # 29 s without a change: still A's
    rv = _object(api)["metadata"]["resourceVersion"]
    assert a.renew()                             # the frozen wall clock still makes ...
    assert _object(api)["metadata"]["resourceVersion"] != rv       # ... a new version
    assert not b.try_acquire()                   # B sees it at t = 129 s
    mono[0] += 29 * NS
    assert not b.try_acquire()
    mono[0] += 1 * NS + 1
    assert b.try_acquire() and b.epoch == 2      # 30 s with no change: expired
    assert not a.renew()                         # A's term is over: the renewal is refused
    assert a.stats.losses == {"lost": 1}         # (and by A's own clock it had run out)


def test_sub_second_ttl_rounds_the_lease_up(api):
    a = _lease(api, "A", ttl=0.4)
    assert a.try_acquire()
    assert _object(api)["spec"]["leaseDurationSeconds"] == 1
    assert a.valid_until_ns - a.last_sent_ns == int(0.36 * NS)   # the holder: 0.4 s less 10 %


def test_holder_ids_are_unique_per_process_start(api):
    """Two replicas named alike (PID 1 in both containers) still have distinct
    identities, so the second can neither take nor renew the first one's lease."""
    h1, h2 = new_holder_id("replica"), new_holder_id("replica")
    assert h1 != h2 and h1.startswith("replica-") and len(h1) == len("replica-") + 36
    a, b = _lease(api, h1), _lease(api, h2)
    assert a.try_acquire()
    assert not b.try_acquire()
    assert not b.backend.renew(h2, a.epoch, 1000)          # not its term
    assert a.renew()


def test_stale_resource_version_is_a_409_and_the_lease_survives(api):
    """A zombie writing from an old read of the Lease is refused by the API server."""
    a = _lease(api, "A")
    assert a.try_acquire()
    old = _object(api)
    assert a.renew()                                        # a newer version now
    zombie = dict(old, spec=dict(old["spec"], holderIdentity="Z", leaseTransitions=9))
    r = requests.put(f"{api.url}/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/"
                     f"{NAME}", json=zombie, timeout=5, **api.certs.requests_kwargs())
    assert r.status_code == 409 and r.json()["reason"] == "Conflict"
    assert _object(api)["spec"]["holderIdentity"] == "A" and a.renew()


@pytest.mark.parametrize("kw,field", [
    ({"api_url": "http://127.0.0.1:1"}, "api_url"),
    ({"namespace": "Bad NS"}, "namespace"),
    ({"name": ""}, "name"),
    ({"client_key": None}, "client_cert / client_key"),
    ({"timeout_s": 0}, "timeout_s"),
])
def test_bad_configuration_names_the_field(api, kw, field):
    c = api.certs
    args = {"api_url": api.url, "namespace": NAMESPACE, "name": NAME, "ca": c.ca,
            "client_cert": c.client_cert, "client_key": c.client_key, **kw}
    url, ns, name = args.pop("api_url"), args.pop("namespace"), args.pop("name")
    with pytest.raises(ValueError, match=field.split()[0]):
        KubeLeaseBackend(url, ns, name, **args)
    with pytest.raises(ValueError, match="name"):
        new_holder_id("two words")


# ------------------------------------------------------------------ the epoch floor

def test_grant_is_above_the_floor_and_above_lease_transitions(api):
    """The epoch granted is one above max(leaseTransitions, floor), on create and on
    takeover, and the Lease object records it."""
    b = _backend(api)
    g = b.try_acquire("A", 1000, floor=7)
    assert g.acquired and g.epoch == 8 and _object(api)["spec"]["leaseTransitions"] == 8
    assert b.release("A", 8)
    g = b.try_acquire("B", 1000, floor=3)          # a floor below: leaseTransitions wins
    assert g.acquired and g.epoch == 9
    assert b.release("B", 9)
    g = b.try_acquire("A", 1000, floor=20)         # a floor above: the floor wins
    assert g.acquired and g.epoch == 21 and _object(api)["spec"]["leaseTransitions"] == 21
    with pytest.raises(ValueError, match="floor"):
        b.try_acquire("A", 1000, floor=-1)


def test_a_recreated_lease_object_never_regrants_an_epoch_the_lease_knew_of(api):
    """The Lease object deleted (its leaseTransitions restart): a replica whose backend
    never saw the old object, but which knows epoch 5 from elsewhere (the fenced
    records, the cloud's fence), is granted 6 through `Lease`'s floor, not 1."""
    a = _lease(api, "A")
    for _ in range(5):
        assert a.try_acquire()
        a.release()
    assert a.max_epoch_seen == 5
    api.store.delete("leases", NAMESPACE, NAME, "test")
    b = _lease(api, "B", floor_source=lambda: 5)   # a fresh process: a fresh backend
    assert b.try_acquire() and b.epoch == 6
    assert b.stats.epoch_regressions == 0
    assert _object(api)["spec"]["leaseTransitions"] == 6


def test_a_deleted_lease_is_a_reset_the_next_holder_waits_out(api):
    """Someone deletes the Lease object (the stand-in deletes as the API server
    does) while A holds it: A's renewal is refused, but A may act until its lease
    runs out by its clock; B, which saw epoch 1, creates the object again with epoch
    2, a grant after a loss (`reset`): it renews but does not act until one ttl
    after its acquisition. A first grant on a fresh cluster is no reset."""
    mono = [100 * NS]
    clock = lambda: mono[0]                      # noqa: E731
    a, b = _lease(api, "A", clock=clock), _lease(api, "B", clock=clock)
    assert a.try_acquire() and a.epoch == 1 and a.leading()
    assert a.stats.backend_resets == 0           # nothing was known: no wait
    assert not b.try_acquire() and b.max_epoch_seen == 1
    api.store.delete("leases", NAMESPACE, NAME, "kubectl")
    mono[0] += NS // 10
    assert b.try_acquire() and b.epoch == 2 and b.stats.backend_resets == 1
    assert not b.leading() and b.waiting() == NS
    assert not a.renew() and a.refused and a.leading()     # A acts on, renews no more
    mono[0] += NS // 2
    assert b.renew() and not b.leading()
    mono[0] += NS * 4 // 10                      # A's lease is over (0.9 s after its grant)
    assert not a.leading() and a.stats.losses == {"lost": 1}
    assert not b.leading()
    mono[0] += NS // 10                          # one ttl since B's acquisition
    assert b.leading() and b.token().epoch == 2
    assert _object(api)["spec"]["leaseTransitions"] == 2


def test_a_lease_restored_below_the_floor_is_a_reset_the_next_holder_waits_out(api):
    """The Lease object restored from an old backup (leaseTransitions 1, holder gone)
    while B has seen epoch 2: B's grant (3) comes from a Lease that forgot a grant, so
    it waits one ttl; the old holder may still act until its own lease runs out."""
    mono = [100 * NS]
    clock = lambda: mono[0]                      # noqa: E731
    a, b = _lease(api, "A", clock=clock), _lease(api, "B", clock=clock)
    assert a.try_acquire() and a.epoch == 1
    old = _object(api)
    a.release()
    assert a.try_acquire() and a.epoch == 2
    assert not b.try_acquire() and b.max_epoch_seen == 2
    restored = dict(old, metadata={k: v for k, v in _object(api)["metadata"].items()})
    restored["spec"] = dict(old["spec"], holderIdentity="", leaseTransitions=1)
    api.store.update("leases", NAMESPACE, NAME, restored, "velero")
    mono[0] += NS // 10
    assert b.try_acquire() and b.epoch == 3 and b.stats.backend_resets == 1
    assert not b.leading() and b.waiting() == NS
    assert a.leading()
    mono[0] += NS // 2
    assert b.renew() and not b.leading()         # B keeps its lease meanwhile
    mono[0] += NS // 2
    assert not a.leading() and b.leading() and b.token().epoch == 3
