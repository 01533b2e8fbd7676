"""Ray's own instance storage on the fenced Redis storage (needs `vecsched[ray]`).

`FencedStorage` implements the methods of Ray 2.60's `Storage` interface; registering
it as a virtual subclass lets Ray's `InstanceStorage` and `InstanceManager` use it as
they are: every write of Ray's instance manager then carries the lease's fencing token
and is rejected (`FencedOut`) when a newer leader exists.
"""
from __future__ import annotations

from ray.autoscaler.v2.instance_manager.instance_storage import InstanceStorage
from ray.autoscaler.v2.instance_manager.storage import Storage

from .fenced import FencedStorage

Storage.register(FencedStorage)


def ray_instance_storage(cluster_id: str, storage: FencedStorage) -> InstanceStorage:
    """Ray's `InstanceStorage` (table `instance_table@<cluster_id>`) on `storage`."""
    return InstanceStorage(cluster_id, storage)


__all__ = ["ray_instance_storage"]
