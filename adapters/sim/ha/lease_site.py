"""Where a replica's lease lives: the backend named in its config, and what the
fenced store needs to know about it.

    redis  the lease is a key in the same Redis as the fenced records
           (`RedisLeaseBackend`); its acquisition raises the store's fence itself,
           and every write also checks the lease key (`live_lease`).
    kube   the lease is a `coordination.k8s.io/v1` Lease on a Kubernetes API server
           (`KubeLeaseBackend`, here the loopback stand-in over HTTPS with a client
           certificate); the records stay in Redis. The store cannot see that lease,
           so a new leader claims its epoch in the store (`FencedStorage.claim`)
           before it reads or writes there, and the acquisition's floor includes
           the highest epoch the store has recorded (its fence and its stamp), so
           an epoch is never granted below what the records were written under.

Either way the records are in Redis, so a Redis that persists nothing is refused
unless `allow_volatile_redis`.

`kube_settings` checks the `kube` part of a replica's config; every bad value is a
`ValueError` naming its field.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import redis

from vecsched.adapters.leader import (KubeLeaseBackend, Keys, LeaseBackend, RedisLeaseBackend,
                                     require_persistence)

BACKENDS = ("redis", "kube")
_KUBE_REQUIRED = ("url", "ca", "client_cert", "client_key")
_KUBE_OPTIONAL = ("namespace", "name")


def check_backend(name) -> str:
    """`name` if it is a known lease backend, else a ValueError naming `backend`."""
    if name not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    return name


def kube_settings(backend: str, kube) -> dict | None:
    """The `kube` config part checked against `backend`: required (url, ca,
    client_cert, client_key; optional namespace, name) with `kube`, absent with
    `redis`."""
    check_backend(backend)
    if backend != "kube":
        if kube is not None:
            raise ValueError(f"kube: settings given but backend is {backend!r}")
        return None
    if not isinstance(kube, dict):
        raise ValueError(f"kube: a mapping with {', '.join(_KUBE_REQUIRED)} is required "
                         f"with backend 'kube', got {kube!r}")
    for k in _KUBE_REQUIRED:
        if not isinstance(kube.get(k), str) or not kube[k]:
            raise ValueError(f"kube.{k}: a non-empty string is required, got {kube.get(k)!r}")
    unknown = sorted(set(kube) - set(_KUBE_REQUIRED) - set(_KUBE_OPTIONAL))
    if unknown:
        raise ValueError(f"kube.{unknown[0]}: not a setting (known: "
                         f"{', '.join(_KUBE_REQUIRED + _KUBE_OPTIONAL)})")
    return dict(kube)


@dataclass(frozen=True)
class LeaseSite:
    """A built lease backend and how the fenced store must treat it."""
    backend: LeaseBackend
    live_lease: bool                       # the lease key is in the store's Redis
    claim_store: bool                      # a new leader claims its epoch in the store
    floor_source: Callable[[], int] | None  # extra floor for acquisitions


def build_site(backend: str, kube: dict | None, client: redis.Redis, keys: Keys, *,
               allow_volatile_redis: bool, timeout_s: float) -> LeaseSite:
    """The lease backend a replica's config names (see the module docstring)."""
    kube = kube_settings(backend, kube)
    if backend == "redis":
        return LeaseSite(RedisLeaseBackend(client, keys, allow_volatile=allow_volatile_redis),
                         live_lease=True, claim_store=False, floor_source=None)
    if not allow_volatile_redis:          # the records are in Redis all the same
        require_persistence(client)
    kb = KubeLeaseBackend(kube["url"], kube.get("namespace", "default"),
                          kube.get("name", "vecsched-ha-demo"), ca=kube["ca"],
                          client_cert=kube["client_cert"], client_key=kube["client_key"],
                          timeout_s=timeout_s)
    return LeaseSite(kb, live_lease=False, claim_store=True,
                     floor_source=lambda: stored_epoch(client, keys))


def stored_epoch(client: redis.Redis, keys: Keys) -> int:
    """The highest epoch the fenced store knows of: its fence (the epoch last
    claimed) or its stamp (the highest epoch a write carried). Raises the client's
    error if Redis does not answer (`Lease` then goes on without it)."""
    fence, stamp = client.mget([keys.epoch, keys.stamp])
    return max(int(fence or 0), int(stamp or 0))
