"""Versioned tables in Redis whose every write carries a fencing token.

`FencedStorage` has the methods and the semantics of Ray 2.60's autoscaler
`Storage` interface (`ray/autoscaler/v2/instance_manager/storage.py`, as its
`InMemoryStorage` implements it): one storage version bumped by every successful
change, each entry stamped with the version that last wrote it, `batch_update` and
`update` with an expected storage / entry version, `insert_only`, reads that return
`(entries, storage_version)`. So Ray's own `InstanceStorage` runs on it unchanged
(`ray_storage.py`), and so does vecsched's instance store (`records.py`).

Every write goes through one Lua script, atomic in Redis, which checks in this order:

1. the token's epoch against the fence (the highest epoch granted, `Keys.epoch`):
   older -> rejected as **stale** (a newer leader exists), newer -> **unknown**;
2. with `live_lease` (the lease lives in the same Redis): the lease key must still
   be exactly this (epoch, holder) -> otherwise **expired** (the writer's lease ran
   out on Redis's clock, even if nobody took over yet);
3. the expected storage / entry versions, as Ray does -> `StoreStatus(False, v)`.

A successful write also raises the **stamp** (`Keys.stamp`), the highest epoch any
write carried: a lease acquisition grants above it, so the epochs the stored data
was written under are never granted again even if the epoch key alone was lost.

A rejection by 1 or 2 raises `FencedOut`: the writer must step down, never retry.
A write whose token is not given takes it from the bound lease's `token()`, which
raises `NotLeader` when the lease is not valid by the replica's own clock, so nothing
is even sent on a possibly expired lease. Redis errors raise `StorageUnavailable`
(the outcome of that write is unknown: reload before acting again).

With `audit`, the script also appends every write attempt to a capped Redis list
(`audit()` reads it): epoch, holder, the fence, the result. It is the store's own
record of who wrote in which epoch, which the demo and the tests check.
"""
from __future__ import annotations

from collections import namedtuple
from collections.abc import Mapping, Sequence

import redis

from .lease import Lease, Token
from .redis_backend import UNREACHABLE, Keys

# The same shapes as Ray's storage module.
StoreStatus = namedtuple("StoreStatus", ["success", "version"])
VersionedValue = namedtuple("VersionedValue", ["value", "version"])

# KEYS: 1 fence (epoch), 2 lease, 3 storage version, 4 table values, 5 table entry
# versions, 6 audit list, 7 stamp (the highest epoch written).
# ARGV: 1 epoch, 2 holder, 3 live-lease check '1'/'0',
# 4 expected storage version ('' = any), 5 audit cap (0 = off), 6 mode 'batch'/'one',
# then batch: n_mut, key, value, ..., n_del, key, ...
#      one:   key, value, expected entry version ('' = any), insert_only '1'/'0'
_WRITE = """
local version = tonumber(redis.call('GET', KEYS[3]) or '0')
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
local epoch = tonumber(ARGV[1])
local function audit(code, v)
  local cap = tonumber(ARGV[5])
  if cap > 0 then
    redis.call('RPUSH', KEYS[6], table.concat({code, epoch, ARGV[2], fence, v, ARGV[4]}, ' '))
    redis.call('LTRIM', KEYS[6], -cap, -1)
  end
end
local code = 1
if epoch < fence then code = -1
elseif epoch > fence then code = -2
elseif ARGV[3] == '1' and redis.call('GET', KEYS[2]) ~= ARGV[1] .. ':' .. ARGV[2] then
  code = -3
elseif ARGV[4] ~= '' and tonumber(ARGV[4]) ~= version then code = 0
elseif ARGV[6] == 'one' then
  local cur = redis.call('HGET', KEYS[5], ARGV[7])
  if ARGV[10] == '1' and cur then code = 0 end
  if ARGV[9] ~= '' and tonumber(ARGV[9]) ~= tonumber(cur or '-1') then code = 0 end
end
if code ~= 1 then
  audit(code, version)
  return {code, version, fence}
end
version = redis.call('INCR', KEYS[3])
if ARGV[6] == 'one' then
  redis.call('HSET', KEYS[4], ARGV[7], ARGV[8])
  redis.call('HSET', KEYS[5], ARGV[7], version)
else
  local n = tonumber(ARGV[7])
  for i = 0, n - 1 do
    redis.call('HSET', KEYS[4], ARGV[8 + 2 * i], ARGV[9 + 2 * i])
    redis.call('HSET', KEYS[5], ARGV[8 + 2 * i], version)
  end
  local d = 8 + 2 * n
  for i = 1, tonumber(ARGV[d]) do
    redis.call('HDEL', KEYS[4], ARGV[d + i])
    redis.call('HDEL', KEYS[5], ARGV[d + i])
  end
end
if epoch > tonumber(redis.call('GET', KEYS[7]) or '0') then redis.call('SET', KEYS[7], epoch) end
audit(1, version)
return {1, version, fence}
"""

# Raise the fence to ARGV[1] (never lower it): for a lease kept outside this Redis
# (a Kubernetes Lease), the new leader claims its epoch here before writing.
_CLAIM = """
local fence = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > fence then redis.call('SET', KEYS[1], ARGV[1]) return 1 end
return 0
"""

REASONS = {-1: "stale", -2: "unknown", -3: "expired"}


class FencedOut(Exception):
    """A write was rejected by its fencing token: the writer is not (or no longer)
    the leader. `reason` is stale / unknown / expired; `version` the store's."""

    def __init__(self, reason: str, epoch: int, fence: int, version: int,
                 expected: int | None):
        self.reason, self.epoch, self.fence = reason, epoch, fence
        self.version, self.expected = version, expected
        super().__init__(f"write fenced out ({reason}): epoch {epoch}, fence {fence}")

    @property
    def version_matched(self) -> bool:
        """The expected storage version matched: only the fence stopped this write."""
        return self.expected is None or self.expected == self.version


class StorageUnavailable(Exception):
    """Redis did not answer in time; a write's outcome is unknown."""


class FencedStorage:
    """Ray's `Storage` interface on Redis, every write fenced (module docstring)."""

    def __init__(self, client: redis.Redis, keys: Keys | str, lease: Lease | None = None,
                 *, live_lease: bool = True, audit: int = 0):
        self.client = client
        self.keys = keys if isinstance(keys, Keys) else Keys(keys)
        self.lease = lease
        self.live_lease = bool(live_lease)
        self.audit_cap = int(audit)
        self._write = client.register_script(_WRITE)
        self._claim = client.register_script(_CLAIM)

    # ---- keys --------------------------------------------------------------------------
    def _values(self, table: str) -> str:
        return self.keys.key(f"t:{table}")

    def _versions(self, table: str) -> str:
        return self.keys.key(f"tv:{table}")

    # ---- writes ------------------------------------------------------------------------
    def _token(self, token: Token | None) -> Token:
        if token is not None:
            return token
        if self.lease is None:
            raise ValueError("a write needs a token: pass token= or bind a lease")
        return self.lease.token()

    def _run(self, table: str, token: Token, expected: int | None, tail: list) -> StoreStatus:
        k = self.keys
        keys = [k.epoch, k.lease, k.key("version"), self._values(table),
                self._versions(table), k.key("audit"), k.stamp]
        args = [token.epoch, token.holder, "1" if self.live_lease else "0",
                "" if expected is None else int(expected), self.audit_cap] + tail
        try:
            code, version, fence = self._write(keys=keys, args=args)
        except UNREACHABLE as e:
            raise StorageUnavailable(f"redis: {type(e).__name__}: {e}") from e
        code, version = int(code), int(version)
        if code < 0:
            raise FencedOut(REASONS[code], token.epoch, int(fence), version, expected)
        return StoreStatus(code == 1, version)

    def batch_update(self, table: str, mutation: Mapping[str, bytes | str] | None = None,
                     deletion: Sequence[str] | None = None,
                     expected_storage_version: int | None = None, *,
                     token: Token | None = None) -> StoreStatus:
        """Upsert `mutation` and delete `deletion` atomically, iff the storage version
        is `expected_storage_version` (None: any). (True, new version) or (False,
        current version); FencedOut / NotLeader / StorageUnavailable otherwise."""
        mutation = dict(mutation or {})
        deletion = list(deletion or [])
        tok = self._token(token)
        tail = ["batch", len(mutation)]
        for key, value in mutation.items():
            tail += [key, value]
        tail += [len(deletion)] + deletion
        return self._run(table, tok, expected_storage_version, tail)

    def update(self, table: str, key: str, value: bytes | str,
               expected_entry_version: int | None = None,
               expected_storage_version: int | None = None, insert_only: bool = False,
               *, token: Token | None = None) -> StoreStatus:
        """Upsert one entry, iff its version is `expected_entry_version` (-1: absent),
        the storage version is `expected_storage_version`, and with `insert_only` the
        entry is absent."""
        tok = self._token(token)
        tail = ["one", key, value,
                "" if expected_entry_version is None else int(expected_entry_version),
                "1" if insert_only else "0"]
        return self._run(table, tok, expected_storage_version, tail)

    def claim(self, epoch: int) -> bool:
        """Raise the fence to `epoch` (no-op if it is already as high)."""
        try:
            return bool(self._claim(keys=[self.keys.epoch], args=[int(epoch)]))
        except UNREACHABLE as e:
            raise StorageUnavailable(f"redis: {type(e).__name__}: {e}") from e

    # ---- reads (one MULTI/EXEC each: a consistent snapshot) ----------------------------
    def _snapshot(self, table: str, keys: Sequence[str] | None):
        try:
            p = self.client.pipeline(transaction=True)
            if keys:
                p.hmget(self._values(table), list(keys))
                p.hmget(self._versions(table), list(keys))
            else:
                p.hgetall(self._values(table))
                p.hgetall(self._versions(table))
            p.get(self.keys.key("version"))
            values, versions, version = p.execute()
        except UNREACHABLE as e:
            raise StorageUnavailable(f"redis: {type(e).__name__}: {e}") from e
        if keys:
            values = {k: v for k, v in zip(keys, values) if v is not None}
            versions = {k: v for k, v in zip(keys, versions) if v is not None}
        else:
            values = {_s(k): v for k, v in values.items()}
            versions = {_s(k): v for k, v in versions.items()}
        out = {k: VersionedValue(v, int(versions[k])) for k, v in values.items()}
        return out, int(version or 0)

    def get_all(self, table: str) -> tuple[dict[str, VersionedValue], int]:
        return self._snapshot(table, None)

    def get(self, table: str, keys: Sequence[str]) -> tuple[dict[str, VersionedValue], int]:
        """The entries of `keys` that exist (all entries if `keys` is empty)."""
        return self._snapshot(table, list(keys) if keys else None)

    def get_version(self) -> int:
        try:
            return int(self.client.get(self.keys.key("version")) or 0)
        except UNREACHABLE as e:
            raise StorageUnavailable(f"redis: {type(e).__name__}: {e}") from e

    def audit(self) -> list[dict]:
        """Every audited write attempt, oldest first: result (1 written, 0 version
        conflict, stale / unknown / expired), epoch, holder, fence, storage version
        after (or at) the attempt, expected version (None: any)."""
        rows = self.client.lrange(self.keys.key("audit"), 0, -1)
        out = []
        for row in rows:
            code, epoch, holder, fence, version, expected = _s(row).split(" ")
            out.append({"result": {1: "written", 0: "conflict"}.get(int(code),
                                                                    REASONS.get(int(code))),
                        "epoch": int(epoch), "holder": holder, "fence": int(fence),
                        "version": int(version),
                        "expected": int(expected) if expected else None})
        return out


def _s(x) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)
