"""What a replica checks about the Redis it is pointed at: that it persists its data,
and that it is still the same server process (its `run_id`).

A Redis that keeps nothing on disk comes back empty after a restart: the lease, the
epoch counter (the fence) and every instance record are gone. The lease code copes
with that (epochs are granted above every epoch the acquirer has seen, records are
rebuilt from the cloud), but an operator should not run that way by accident, so
`require_persistence` refuses such a server unless told otherwise.

`RunIdWatch` notices a restart: every start of redis-server gets a fresh random
`run_id` (INFO server), so a changed id means that whatever this replica read
before (its lease, the records it cached) may no longer be there.
"""
from __future__ import annotations

import redis

from .lease import BackendError

UNREACHABLE = (redis.ConnectionError, redis.TimeoutError, OSError)


class VolatileRedis(Exception):
    """The Redis server keeps nothing on disk (or will not say): `setting` names the
    configuration that was checked, `value` what the server answered."""

    def __init__(self, setting: str, value: str, message: str):
        self.setting, self.value = setting, value
        super().__init__(message)


def _config(client: redis.Redis, name: str) -> str:
    try:
        got = client.config_get(name)
    except redis.ResponseError as e:     # CONFIG renamed or disabled (managed Redis)
        raise VolatileRedis(name, "", f"CONFIG GET {name} was refused ({e}): cannot tell "
                            f"whether this Redis persists its data; pass "
                            f"allow_volatile=True (--allow-volatile-redis) to run "
                            f"anyway") from None
    except UNREACHABLE as e:
        raise BackendError(f"redis: {type(e).__name__}: {e}") from e
    value = got.get(name, got.get(name.encode(), ""))
    return value.decode() if isinstance(value, bytes) else str(value)


def persistence(client: redis.Redis) -> dict:
    """The server's persistence settings: appendonly, appendfsync and save."""
    return {name: _config(client, name) for name in ("appendonly", "appendfsync", "save")}


def require_persistence(client: redis.Redis) -> dict:
    """Return the persistence settings, or raise `VolatileRedis` when the server has
    neither the append-only file (`appendonly yes`) nor snapshots (`save` rules)."""
    cfg = persistence(client)
    if cfg["appendonly"].lower() == "yes" or cfg["save"].strip():
        return cfg
    raise VolatileRedis(
        "appendonly", cfg["appendonly"],
        f"this Redis persists nothing (appendonly={cfg['appendonly']!r}, "
        f"save={cfg['save']!r}): a restart would lose the lease epoch and every "
        f"instance record. Turn on appendonly (appendonly yes, appendfsync always), "
        f"or pass allow_volatile=True (--allow-volatile-redis) to run anyway")


def run_id(client: redis.Redis) -> str:
    """The server process's run id (INFO server)."""
    try:
        info = client.info("server")
    except UNREACHABLE as e:
        raise BackendError(f"redis: {type(e).__name__}: {e}") from e
    return str(info["run_id"])


class RunIdWatch:
    """Remembers the server's run id; `changed()` says whether it differs since the
    last call (the first call only records it)."""

    def __init__(self, client: redis.Redis):
        self.client = client
        self.current: str | None = None
        self.restarts = 0

    def changed(self) -> bool:
        rid = run_id(self.client)
        before, self.current = self.current, rid
        if before is not None and before != rid:
            self.restarts += 1
            return True
        return False
