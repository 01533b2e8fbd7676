"""Leader election for the autoscaler: a lease with a fencing token (epoch), writes
fenced by it in Redis, and the passive-replica gate (`Lease.token()`).

    lease.py          Lease, LeaseBackend (the interface both backends
                      implement), LeaseKeeper, stats
    redis_backend.py  the lease as a Redis key with expiry, changed by Lua
    kube_backend.py   the lease as a Kubernetes coordination.k8s.io/v1 Lease
    redis_health.py   refusing a Redis that persists nothing; noticing its restart
    fenced.py         Ray's Storage interface on Redis, every write fenced (Lua)
    ray_storage.py    Ray's own InstanceStorage on the fenced storage
"""
from .fenced import FencedOut, FencedStorage, StorageUnavailable, StoreStatus, VersionedValue
from .lease import (BackendError, Grant, Lease, LeaseBackend, LeaseKeeper, LeaseStats,
                    NotLeader, Token, holder_id)
from .kube_backend import KubeLeaseBackend, new_holder_id
from .redis_backend import Keys, RedisLeaseBackend, connect
from .redis_health import RunIdWatch, VolatileRedis, require_persistence

__all__ = [
    "BackendError", "FencedOut", "FencedStorage",
    "Grant", "Keys", "KubeLeaseBackend", "Lease", "LeaseBackend", "LeaseKeeper", "LeaseStats",
    "NotLeader", "RedisLeaseBackend", "RunIdWatch",
    "StorageUnavailable", "StoreStatus", "Token", "VersionedValue", "VolatileRedis",
    "connect", "holder_id", "new_holder_id", "require_persistence",
]
