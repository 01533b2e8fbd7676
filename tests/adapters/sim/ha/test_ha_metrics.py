"""An HA replica process serves its lease metrics: scraped over HTTP from a live replica
(real redis-server, the simulated world in its own process) once it leads."""
from __future__ import annotations

import json
import os
import time
import urllib.request
from dataclasses import asdict

import pytest

pytest.importorskip("prometheus_client")

from vecsched.adapters.sim.ha.procs import Child, first_leader, start_replica, world_address  # noqa: E402
from vecsched.adapters.sim.ha.run import DemoConfig  # noqa: E402

from tests.kits.ha_kit import redis_server  # noqa: E402,F401 (fixture)


def _scrape(port: int) -> dict:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.rpartition(" ")
            out[key] = float(value)
    return out


@pytest.mark.slow
def test_a_leading_replica_serves_its_lease_metrics(redis_server, tmp_path):
    dc = DemoConfig(scheduler="baseline", allow_volatile_redis=False)
    authkey = os.urandom(16)
    children: list[Child] = []
    try:
        world = Child("world", "vecsched.adapters.sim.ha.world_server",
                      json.dumps(asdict(dc.sim)), authkey, tmp_path)
        children.append(world)
        addr = world_address(world, dc.wait_s)
        a = start_replica("A", dc, redis_server, addr, authkey, tmp_path, children)
        ready = a.wait_for("ready", dc.wait_s)
        port = ready["metrics_port"]
        assert isinstance(port, int) and port > 0
        first_leader([a], 5 * dc.ttl_s + 5)
        holder = ready["holder"]
        deadline = time.monotonic() + 10
        while True:                       # the keeper's state is read at scrape time
            got = _scrape(port)
            if got.get(f'vecsched_lease_is_leader{{holder="{holder}"}}') == 1.0:
                break
            assert time.monotonic() < deadline, got
            time.sleep(0.2)
        assert got[f'vecsched_lease_epoch{{holder="{holder}"}}'] >= 1
        assert got[f'vecsched_lease_transitions_total{{holder="{holder}"}}'] >= 1
        assert got[f'vecsched_lease_max_epoch_seen{{holder="{holder}"}}'] >= \
            got[f'vecsched_lease_epoch{{holder="{holder}"}}']
    finally:
        for c in children:
            c.close()
