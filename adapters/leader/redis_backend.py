"""The lease in Redis: one key with an expiry, changed only by Lua scripts.

Keys of one cluster (the `{...}` hash tag keeps them in one Redis Cluster slot, so a
script may touch them all):

    vecsched:{<cluster>}:lease    "<epoch>:<holder>", expiring after the lease ttl
    vecsched:{<cluster>}:epoch    the highest epoch ever granted: the fence every
                                  fenced write is checked against (fenced.py)

The epoch key never expires, so it survives the lease; with the append-only file on
(`redis_server.RedisServer` turns it on, fsync on every write) it survives a Redis
restart too, and an epoch is never granted twice.

`connect()` makes a client that fails fast: one attempt per command (no retry, whose
backoff would outlast a lease) and a socket timeout well under the lease ttl.
"""
from __future__ import annotations

from dataclasses import dataclass

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .lease import BackendError, Grant, LeaseBackend

# The lease is free, expired, or already ours: grant a fresh epoch.
_ACQUIRE = """
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, ':', 1, true)
  local holder = string.sub(cur, sep + 1)
  if holder ~= ARGV[1] then
    return {0, tonumber(string.sub(cur, 1, sep - 1)), holder, redis.call('PTTL', KEYS[1])}
  end
end
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], epoch .. ':' .. ARGV[1], 'PX', ARGV[2])
return {1, epoch, ARGV[1], tonumber(ARGV[2])}
"""

# Extend iff the lease is still exactly (epoch, holder).
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
"""

_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return 0
"""

_READ = """
local cur = redis.call('GET', KEYS[1])
local top = tonumber(redis.call('GET', KEYS[2]) or '0')
if not cur then return {0, top, '', -1} end
local sep = string.find(cur, ':', 1, true)
return {0, tonumber(string.sub(cur, 1, sep - 1)), string.sub(cur, sep + 1),
        redis.call('PTTL', KEYS[1])}
"""

# What redis-py raises when the server cannot be reached or answers too late.
UNREACHABLE = (redis.ConnectionError, redis.TimeoutError, OSError)


@dataclass(frozen=True)
class Keys:
    """The Redis keys of one cluster's lease and fenced state."""
    cluster: str

    def __post_init__(self):
        if not self.cluster or any(c in self.cluster for c in "{}"):
            raise ValueError(f"cluster: a non-empty name without braces, got {self.cluster!r}")

    def key(self, name: str) -> str:
        return f"vecsched:{{{self.cluster}}}:{name}"

    @property
    def lease(self) -> str:
        return self.key("lease")

    @property
    def epoch(self) -> str:
        return self.key("epoch")


def connect(host: str = "127.0.0.1", port: int = 6379, *, timeout_s: float = 0.25,
            **kwargs) -> redis.Redis:
    """A client that fails fast: no retries, `timeout_s` to connect and per command."""
    return redis.Redis(host=host, port=port, socket_timeout=timeout_s,
                       socket_connect_timeout=timeout_s, retry=Retry(NoBackoff(), 0),
                       retry_on_error=[], health_check_interval=0, **kwargs)


def _int(x) -> int:
    return int(x)


def _str(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


class RedisLeaseBackend(LeaseBackend):
    """`LeaseBackend` over a Redis server (see the module docstring)."""

    def __init__(self, client: redis.Redis, keys: Keys | str):
        self.client = client
        self.keys = keys if isinstance(keys, Keys) else Keys(keys)
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._read = client.register_script(_READ)

    def _call(self, script, keys, args):
        try:
            return script(keys=keys, args=args)
        except UNREACHABLE as e:
            raise BackendError(f"redis: {type(e).__name__}: {e}") from e

    def try_acquire(self, holder: str, ttl_ms: int) -> Grant:
        ok, epoch, who, ttl = self._call(self._acquire, [self.keys.lease, self.keys.epoch],
                                         [holder, int(ttl_ms)])
        return Grant(bool(ok), _int(epoch), _str(who), _int(ttl))

    def renew(self, holder: str, epoch: int, ttl_ms: int) -> bool:
        return bool(self._call(self._renew, [self.keys.lease], [f"{epoch}:{holder}",
                                                                int(ttl_ms)]))

    def release(self, holder: str, epoch: int) -> bool:
        return bool(self._call(self._release, [self.keys.lease], [f"{epoch}:{holder}"]))

    def read(self) -> Grant:
        _, epoch, who, ttl = self._call(self._read, [self.keys.lease, self.keys.epoch], [])
        return Grant(False, _int(epoch), _str(who), _int(ttl))
