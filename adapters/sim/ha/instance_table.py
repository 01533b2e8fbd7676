"""vecsched's instance records in a fenced storage table, and back.

One table entry per `InstanceRecord` (JSON: its fields, its full status history and
its creation sequence number), plus one `#meta` entry for what a new leader must
continue from (id counters, the last tick recorded). `FencedInstanceTable.commit`
writes a tick's changed records and the meta in **one** fenced batch with the storage
version the replica last read, so a tick is recorded entirely or not at all, and only
by the leader of the newest epoch.

`rebuild` turns the entries back into an `InstanceStore` through its public `apply`:
each record is created in its first status and replayed move by move at its recorded
times, so the stored state is checked against the status table on every load; a
stored record that does not come back identical raises `CorruptState`.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from vecsched.adapters.sim.lifecycle import (IllegalTransition, InstanceRecord, InstanceStore, InvalidMove,
                                Move, ReconcileConfig)

from vecsched.adapters.leader.fenced import FencedStorage, StoreStatus
from vecsched.adapters.leader.lease import Token

META = "#meta"            # instance ids never start with '#'


class CorruptState(ValueError):
    """Stored records that the status table or the record fields reject."""


def encode(rec: InstanceRecord, seq: int) -> bytes:
    return json.dumps({
        "seq": seq, "id": rec.instance_id, "type": rec.instance_type,
        "status": int(rec.status), "history": [[int(s), int(t)] for s, t in rec.status_history],
        "request": rec.launch_request_id, "cloud": rec.cloud_instance_id,
        "node": rec.node_id, "kind": int(rec.node_kind), "cause": int(rec.termination_cause),
    }, separators=(",", ":")).encode()


def decode(raw: bytes) -> dict:
    try:
        d = json.loads(raw)
        for name in ("seq", "id", "type", "status", "history", "request", "cloud", "node",
                     "kind", "cause"):
            d[name]
    except (ValueError, KeyError, TypeError) as e:
        raise CorruptState(f"undecodable instance entry: {e}") from None
    if not d["history"]:
        raise CorruptState(f"instance {d['id']}: empty status history")
    return d


def rebuild(entries: Iterable[dict], store: InstanceStore) -> InstanceStore:
    """Replay decoded entries (any order) into an empty `store`; returns it."""
    if len(store):
        raise ValueError("rebuild needs an empty store")
    for d in sorted(entries, key=lambda d: d["seq"]):
        fields = {"instance_type": d["type"], "launch_request_id": d["request"] or None,
                  "cloud_instance_id": d["cloud"] or None, "node_id": d["node"] or None,
                  "node_kind": d["kind"]}
        hist = d["history"]
        try:
            s0, t0 = hist[0]
            store.apply([Move(d["id"], s0, create=True, **fields)], at_ns=t0)
            for i, (s, t) in enumerate(hist[1:], start=2):
                cause = d["cause"] if i == len(hist) and d["cause"] else None
                store.apply([Move(d["id"], s, cause=cause)], at_ns=t)
        except (IllegalTransition, InvalidMove, TypeError, ValueError) as e:
            raise CorruptState(f"instance {d['id']}: {type(e).__name__}: {e}") from None
        rec = store[d["id"]]
        got = json.loads(encode(rec, d["seq"]))
        want = {k: d[k] for k in got}
        if got != want:
            raise CorruptState(f"instance {d['id']}: stored {want} rebuilt as {got}")
    return store


class Counter:
    """A resumable id factory: prefix + a 6-digit counter (like `sequential_ids`)."""

    def __init__(self, prefix: str, next_n: int = 0):
        self.prefix = prefix
        self.next_n = int(next_n)

    def __call__(self) -> str:
        n = self.next_n
        self.next_n += 1
        return f"{self.prefix}{n:06d}"


@dataclass
class Loaded:
    """One consistent read of the table: a rebuilt store and where it stands."""
    store: InstanceStore
    version: int                      # the storage version read
    ids: Counter                      # the store's instance id factory
    requests: Counter                 # the store's launch request id factory
    meta: dict = field(default_factory=dict)
    seq: dict = field(default_factory=dict)   # instance id -> creation sequence number
    drop: set = field(default_factory=set)    # stored ids the next commit deletes


class FencedInstanceTable:
    """vecsched's instance store kept in one table of a `FencedStorage`."""

    def __init__(self, storage: FencedStorage, table: str = "vecsched_instances"):
        self.storage = storage
        self.table = table

    def load(self, clock: Callable[[], int], config: ReconcileConfig) -> Loaded:
        """Read every entry (one snapshot) and rebuild the store; ids continue from the
        stored counters."""
        entries, version = self.storage.get_all(self.table)
        meta = json.loads(entries.pop(META).value) if META in entries else {}
        ids = Counter("i-", meta.get("next_instance", 0))
        requests = Counter("lr-", meta.get("next_request", 0))
        store = InstanceStore(clock, ids, config, request_id_factory=requests)
        decoded = [decode(v.value) for v in entries.values()]
        rebuild(decoded, store)
        return Loaded(store, version, ids, requests, meta,
                      {d["id"]: d["seq"] for d in decoded})

    def replace(self, loaded: Loaded, store: InstanceStore) -> None:
        """Put `store` (rebuilt elsewhere, with `loaded`'s id counters) in place of the
        loaded records: the next commit writes every record of it and deletes the
        stored entries it does not have."""
        loaded.drop = set(loaded.seq) | loaded.drop
        loaded.seq = {}
        loaded.store = store

    def commit(self, loaded: Loaded, changed: Iterable[str], meta: dict,
               token: Token | None = None) -> StoreStatus:
        """Write the changed records and `meta` in one fenced batch, expecting the
        version `loaded` was read at; on success `loaded.version` moves on."""
        store = loaded.store
        changed = set(changed)
        mutation: dict[str, bytes] = {}
        next_seq = max(loaded.seq.values(), default=-1) + 1
        for rec in store:                     # creation order: new records get the next seq
            iid = rec.instance_id
            if iid not in loaded.seq:
                loaded.seq[iid] = next_seq
                next_seq += 1
                changed.add(iid)
            if iid in changed:
                mutation[iid] = encode(rec, loaded.seq[iid])
        full = dict(meta, next_instance=loaded.ids.next_n, next_request=loaded.requests.next_n)
        mutation[META] = json.dumps(full, sort_keys=True).encode()
        deletion = sorted(loaded.drop - set(mutation))
        status = self.storage.batch_update(self.table, mutation, deletion, loaded.version,
                                           token=token)
        if status.success:
            loaded.version = status.version
            loaded.meta = full
            loaded.drop = set()
        return status


def final_records(table: FencedInstanceTable) -> dict:
    """Every stored record as plain data (type, history, request and cloud ids): what
    a run's records are compared by."""
    loaded = table.load(lambda: 0, ReconcileConfig())
    return {r.instance_id: {"type": r.instance_type, "history": list(map(list, r.status_history)),
                            "request": r.launch_request_id, "cloud": r.cloud_instance_id}
            for r in loaded.store}
