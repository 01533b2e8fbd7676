"""The lease in Redis: one key with an expiry, changed only by Lua scripts.

Keys of one cluster (the `{...}` hash tag keeps them in one Redis Cluster slot, so a
script may touch them all):

    vecsched:{<cluster>}:lease    "<epoch>:<holder>", expiring after the lease ttl
    vecsched:{<cluster>}:epoch    the highest epoch ever granted: the fence every
                                  fenced write is checked against (fenced.py)
    vecsched:{<cluster>}:stamp    the highest epoch any fenced write carried

The epoch key never expires, so it survives the lease; with the append-only file on
(`redis_server.RedisServer` turns it on, fsync on every write) it survives a Redis
restart too. A Redis that lost its data (no append-only file, a lost disk, a
snapshot from before the last grant) forgets it, so an acquisition also takes a
**floor** from the acquirer: the highest epoch it knows of from anywhere (its own
past grants and reads, the cloud's fence). The epoch granted is one above the
highest of the epoch key, the stamp and the floor, and an epoch is never granted
twice as long as some acquirer or the cloud remembers it. A grant made while the
epoch key was missing although the floor was not 0, or was **below** the floor or the
stamp (a Redis restored from an old snapshot: its epoch key says 1 while a replica has
seen 2), says so (`Grant.reset`): a grant was forgotten, so its holder may still be
acting, and `Lease` waits it out before the new holder acts.

`RedisLeaseBackend` refuses a Redis that persists nothing (`redis_health`) unless
built with `allow_volatile=True`.

`connect()` makes a client that fails fast: one attempt per command (no retry, whose
backoff would outlast a lease) and a socket timeout well under the lease ttl.
"""
from __future__ import annotations

from dataclasses import dataclass

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .lease import BackendError, Grant, LeaseBackend
from .redis_health import require_persistence

# The lease is free, expired, or already ours: grant a fresh epoch above the epoch
# key, the write stamp and the acquirer's floor (ARGV[3]).
_ACQUIRE = """
local cur = redis.call('GET', KEYS[1])
if cur then
  local sep = string.find(cur, ':', 1, true)
  local holder = string.sub(cur, sep + 1)
  if holder ~= ARGV[1] then
    return {0, tonumber(string.sub(cur, 1, sep - 1)), holder, redis.call('PTTL', KEYS[1]), 0}
  end
end
local known = redis.call('GET', KEYS[2])
local key = tonumber(known or '0')
local stamp = tonumber(redis.call('GET', KEYS[3]) or '0')
local floor = tonumber(ARGV[3])
local epoch = math.max(key, stamp, floor) + 1
redis.call('SET', KEYS[2], epoch)
redis.call('SET', KEYS[1], epoch .. ':' .. ARGV[1], 'PX', ARGV[2])
-- a loss: the epoch key is gone, or below an epoch the acquirer saw or a write carried
local reset = 0
if (floor > 0 and (not known or key < floor)) or stamp > key then reset = 1 end
return {1, epoch, ARGV[1], tonumber(ARGV[2]), reset}
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
local top = math.max(tonumber(redis.call('GET', KEYS[2]) or '0'),
                    tonumber(redis.call('GET', KEYS[3]) or '0'))
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

    @property
    def stamp(self) -> str:
        return self.key("stamp")


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
    """`LeaseBackend` over a Redis server (see the module docstring). Unless
    `allow_volatile`, the constructor asks the server for its persistence settings
    and raises `redis_health.VolatileRedis` if it keeps nothing on disk (and
    `BackendError` if it does not answer)."""

    def __init__(self, client: redis.Redis, keys: Keys | str, *, allow_volatile: bool = False):
        self.client = client
        self.keys = keys if isinstance(keys, Keys) else Keys(keys)
        self.persistence = None if allow_volatile else require_persistence(client)
        self._acquire = client.register_script(_ACQUIRE)
        self._renew = client.register_script(_RENEW)
        self._release = client.register_script(_RELEASE)
        self._read = client.register_script(_READ)

    def _call(self, script, keys, args):
        try:
            return script(keys=keys, args=args)
        except UNREACHABLE as e:
            raise BackendError(f"redis: {type(e).__name__}: {e}") from e

    def try_acquire(self, holder: str, ttl_ms: int, floor: int = 0) -> Grant:
        k = self.keys
        ok, epoch, who, ttl, reset = self._call(self._acquire, [k.lease, k.epoch, k.stamp],
                                                [holder, int(ttl_ms), max(0, int(floor))])
        return Grant(bool(ok), _int(epoch), _str(who), _int(ttl), bool(reset))

    def renew(self, holder: str, epoch: int, ttl_ms: int) -> bool:
        return bool(self._call(self._renew, [self.keys.lease], [f"{epoch}:{holder}",
                                                                int(ttl_ms)]))

    def release(self, holder: str, epoch: int) -> bool:
        return bool(self._call(self._release, [self.keys.lease], [f"{epoch}:{holder}"]))

    def read(self) -> Grant:
        k = self.keys
        _, epoch, who, ttl = self._call(self._read, [k.lease, k.epoch, k.stamp], [])
        return Grant(False, _int(epoch), _str(who), _int(ttl))
