"""A simulated instance store on its own clock, for the lifecycle and replay tests."""
from __future__ import annotations

from vecsched.adapters.sim.lifecycle import InstanceStore, ReconcileConfig, SimClock, sequential_ids


def make_store(**config):
    """(InstanceStore, SimClock) with ``ReconcileConfig(**config)`` and sequential ids."""
    clock = SimClock()
    return InstanceStore(clock, sequential_ids(), ReconcileConfig(**config),
                         request_id_factory=sequential_ids("req-")), clock
