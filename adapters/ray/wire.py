"""The Ray nodes' maps of a tick read from their wire bytes, in two numba passes.

Reading a protobuf map from Python costs about 1 µs a map plus 0.1 µs an
entry (a wrapper, an iterator, a new str per key, a look-up per value). Here
every NodeState is serialised (C speed), the bytes are scanned once to count
and once to place the entries of the total, available and label maps, and
equal key bytes are interned so Python decodes each distinct key once.

Exactness: the engine must see each map in Python's iteration order (Ray's
float sums follow it). upb, the runtime Ray 2.60 installs, writes a map's
entries in the reverse of that order, so the entries are placed back to front.
``read`` checks this on the tick's own messages (one map of each kind with two
or more entries) and returns None when it does not hold, or when anything in
the bytes is not what the schema says; the codec then reads the maps one by one.
"""
from __future__ import annotations

from operator import attrgetter, methodcaller
from typing import Optional

import numpy as np
from numba import njit

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.internal import api_implementation
from ray.core.generated.autoscaler_pb2 import NodeState

from vecsched.engine.warmup import shipped
from vecsched.engine.model.node_columns import FlatMaps, pick

_FIELDS = NodeState.DESCRIPTOR.fields_by_name
# the maps read, in this order: (field, value is a string)
_MAPS = (("total_resources", False), ("available_resources", False), ("labels", True),
         ("dynamic_labels", True))
_NUMS = np.array([_FIELDS[f].number for f, _ in _MAPS], np.int64)
_STR = np.array([s for _, s in _MAPS], np.bool_)
_IDLE = _FIELDS["idle_duration_ms"].number
_SCHEMA_OK = (
    api_implementation.Type() == "upb"
    and _FIELDS["idle_duration_ms"].type == FieldDescriptor.TYPE_INT64
    and all(_FIELDS[f].message_type is not None
            and _FIELDS[f].message_type.GetOptions().map_entry
            and _FIELDS[f].message_type.fields_by_name["key"].number == 1
            and _FIELDS[f].message_type.fields_by_name["value"].number == 2
            and _FIELDS[f].message_type.fields_by_name["value"].type
            == (FieldDescriptor.TYPE_STRING if s else FieldDescriptor.TYPE_DOUBLE)
            for f, s in _MAPS))


@njit(cache=True)
def _varint(buf, i):
    x = np.int64(0)
    shift = 0
    while True:
        c = buf[i]
        i += 1
        x |= (np.int64(c) & 0x7F) << shift
        shift += 7
        if c < 0x80 or shift > 63:
            return x, i


@njit(cache=True)
def _skip(buf, i, wire_type):
    """Past one field's value; -1 for a wire type proto3 does not write."""
    if wire_type == 0:
        _, i = _varint(buf, i)
    elif wire_type == 1:
        i += 8
    elif wire_type == 2:
        n, i = _varint(buf, i)
        i += n
    elif wire_type == 5:
        i += 4
    else:
        return -1
    return i


@njit(cache=True)
def _which(nums, f):
    for k in range(nums.size):
        if nums[k] == f:
            return k
    return -1


@njit(cache=True)
def _count(buf, starts, nums, idle_num):
    """Entries of each map of each node (K, N), each node's idle time, and
    whether every message parsed to its end."""
    N, K = starts.size - 1, nums.size
    cnt = np.zeros((K, N), np.int64)
    idle = np.zeros(N, np.int64)
    for n in range(N):
        i, end = starts[n], starts[n + 1]
        while i < end:
            tag, i = _varint(buf, i)
            f, wt = tag >> 3, tag & 7
            k = _which(nums, f)
            if k >= 0 and wt == 2:
                ln, i = _varint(buf, i)
                cnt[k, n] += 1
                i += ln
            elif f == idle_num and wt == 0:
                idle[n], i = _varint(buf, i)
            else:
                i = _skip(buf, i, wt)
                if i < 0:
                    return cnt, idle, False
        if i != end:
            return cnt, idle, False
    return cnt, idle, True


@njit(cache=True)
def _place(buf, starts, nums, is_str, seg):
    """Every entry's key (offset, length) and value (a double, or a string's
    offset and length) at its place: map k of node n fills seg[k*N+n] up to
    seg[k*N+n+1], back to front (upb writes a map in reverse iteration order)."""
    N = starts.size - 1
    total = seg[-1]
    koff = np.zeros(total, np.int64)
    klen = np.zeros(total, np.int64)
    val = np.zeros(total, np.float64)
    voff = np.zeros(total, np.int64)
    vlen = np.zeros(total, np.int64)
    for n in range(N):
        i, end = starts[n], starts[n + 1]
        placed = np.zeros(nums.size, np.int64)
        while i < end:
            tag, i = _varint(buf, i)
            f, wt = tag >> 3, tag & 7
            k = _which(nums, f)
            if k < 0 or wt != 2:
                i = _skip(buf, i, wt)
                continue
            ln, i = _varint(buf, i)
            stop = i + ln
            pos = seg[k * N + n + 1] - 1 - placed[k]
            placed[k] += 1
            koff[pos], voff[pos] = i, i
            while i < stop:
                t2, i = _varint(buf, i)
                f2, w2 = t2 >> 3, t2 & 7
                if f2 == 1 and w2 == 2:
                    klen[pos], i = _varint(buf, i)
                    koff[pos] = i
                    i += klen[pos]
                elif f2 == 2 and w2 == 1 and not is_str[k]:
                    val[pos] = buf[i:i + 8].view(np.float64)[0]
                    i += 8
                elif f2 == 2 and w2 == 2 and is_str[k]:
                    vlen[pos], i = _varint(buf, i)
                    voff[pos] = i
                    i += vlen[pos]
                else:
                    i = _skip(buf, i, w2)
            i = stop
    return koff, klen, val, voff, vlen


@njit(cache=True)
def _word(buf, b):
    """The 8 bytes at ``b`` as one little-endian word (LLVM makes it one load; a
    ``view`` of a slice costs 20 times more)."""
    x = np.uint64(0)
    for k in range(8):
        x |= np.uint64(buf[b + k]) << np.uint64(8 * k)
    return x


@njit(cache=True)
def _hash(buf, o, ln):
    """FNV-1a over the bytes at ``o``, eight at a time (the tail one by one),
    then MurmurHash3's final mix (the table's slot is the low bits)."""
    h = np.uint64(14695981039346656037)
    b, stop = o, o + ln
    while b + 8 <= stop:
        h = (h ^ _word(buf, b)) * np.uint64(1099511628211)
        b += 8
    while b < stop:
        h = (h ^ np.uint64(buf[b])) * np.uint64(1099511628211)
        b += 1
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@njit(cache=True)
def _same(buf, a, b, ln):
    """Whether the ``ln`` bytes at ``a`` and at ``b`` are equal."""
    k = 0
    while k + 8 <= ln:
        if _word(buf, a + k) != _word(buf, b + k):
            return False
        k += 8
    while k < ln:
        if buf[a + k] != buf[b + k]:
            return False
        k += 1
    return True


@njit(cache=True)
def _intern(buf, off, length, spans):
    """Equal byte strings get one id, numbered in first-seen order: (id of each
    string, the first string of each id). Exact: hashes only pick the slot,
    bytes decide equality. The strings are visited span by span (``spans``:
    [lo, hi) rows covering each string once): a node's totals, then its
    availabilities, while its bytes are still in cache. The table grows with
    the distinct strings (a tick's keys are mostly the same few names), and
    each id keeps its hash and bytes' place side by side."""
    n = off.size
    size = 64
    table = np.full(size, -1, np.int64)
    ent = np.empty((n, 3), np.int64)        # per id: hash (63 bits), offset, length
    ids = np.empty(n, np.int64)
    nd = 0
    for s in range(spans.shape[0]):
        for e in range(spans[s, 0], spans[s, 1]):
            o, ln = off[e], length[e]
            h = np.int64(_hash(buf, o, ln) >> np.uint64(1))
            slot = h & (size - 1)
            while True:
                d = table[slot]
                if d < 0:
                    table[slot] = nd
                    ent[nd, 0], ent[nd, 1], ent[nd, 2] = h, o, ln
                    ids[e] = nd
                    nd += 1
                    break
                if ent[d, 0] == h and ent[d, 2] == ln and _same(buf, ent[d, 1], o, ln):
                    ids[e] = d
                    break
                slot = (slot + 1) & (size - 1)
            if 2 * nd > size:               # at most half full: double and re-place
                size *= 2
                table = np.full(size, -1, np.int64)
                for d in range(nd):
                    slot = ent[d, 0] & (size - 1)
                    while table[slot] >= 0:
                        slot = (slot + 1) & (size - 1)
                    table[slot] = d
    return _first_seen(ids, nd)


@njit(cache=True)
def _first_seen(ids, nd):
    """``ids`` renumbered in first-seen order, in place, and the first index of
    each id."""
    new = np.full(nd, -1, np.int64)
    first = np.empty(nd, np.int64)
    k = 0
    for e in range(ids.size):
        d = ids[e]
        if new[d] < 0:
            new[d] = k
            first[k] = e
            k += 1
        ids[e] = new[d]
    return ids, first


@njit(cache=True)
def _gather(buf, off, length):
    """The byte strings at ``off``/``length`` one after another with a NUL
    between them, and how many NULs the strings hold themselves."""
    n = off.size
    out = np.zeros(max(length.sum() + n - 1, 0), np.uint8)
    p = 0
    nul = 0
    for j in range(n):
        o = off[j]
        for b in range(length[j]):
            c = buf[o + b]
            out[p] = c
            nul += c == 0
            p += 1
        p += 1
    return out, nul


for _kernel in (_varint, _skip, _which, _count, _place, _word, _hash, _same, _intern,
                _first_seen, _gather):
    shipped(_kernel)                    # a read-only cache built at install time

_SERIALIZE = methodcaller("SerializeToString")


def _strings(blob: bytes, buf, off, length, spans=None):
    """(id of each string, the distinct strings decoded) of byte ranges, visited
    in ``spans`` (default: in order)."""
    if spans is None:
        spans = np.array([[0, off.size]], np.int64)
    ids, first = _intern(buf, off, length, spans)
    return ids, _decode_all(blob, buf, off[first], length[first])


def _decode_all(blob: bytes, buf, off, length) -> list:
    """The strings at these byte ranges, decoded in one call: gathered with a NUL
    between them, decoded once and split (a node's own names, ``node:<ip>``, are
    one per node: 50,000 one-by-one decodes were 0.1 s). One by one when a string
    holds a NUL itself."""
    if off.size < 2:
        return [blob[o:o + k].decode() for o, k in zip(off.tolist(), length.tolist())]
    out, nul = _gather(buf, off, length)
    if nul:
        return [blob[o:o + k].decode() for o, k in zip(off.tolist(), length.tolist())]
    return out.tobytes().decode().split("\x00")


def read(nodes: list) -> Optional[tuple]:
    """(total, available, labels) FlatMaps, idle times (int64 array) and the
    count of dynamic labels per node, of these NodeState messages; None when
    the bytes cannot be vouched for (see the module docstring)."""
    if not _SCHEMA_OK:
        return None
    parts = list(map(_SERIALIZE, nodes))
    blob = b"".join(parts)
    buf = np.frombuffer(blob, np.uint8)
    starts = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)), out=starts[1:])
    cnt, idle, ok = _count(buf, starts, _NUMS, _IDLE)
    if not ok:
        return None
    seg = np.zeros(cnt.size + 1, np.int64)
    np.cumsum(cnt.ravel(), out=seg[1:])
    koff, klen, val, voff, vlen = _place(buf, starts, _NUMS, _STR, seg)
    N = len(parts)
    # totals and availabilities share one name list (a node names mostly the
    # same resources in both), the labels have their own
    mid, hi = seg[N], seg[2 * N]
    spans = np.stack([seg[:N], seg[1:N + 1], seg[N:2 * N], seg[N + 1:2 * N + 1]], 1)
    kid, names = _strings(blob, buf, koff[:hi], klen[:hi], spans.reshape(2 * N, 2))
    out = [FlatMaps(names, kid[:mid], val[:mid], cnt[0].copy()),
           FlatMaps(names, kid[mid:], val[mid:hi], cnt[1].copy())]
    lo, hi = hi, seg[3 * N]
    kid, names = _strings(blob, buf, koff[lo:hi], klen[lo:hi])
    vid, vnames = _strings(blob, buf, voff[lo:hi], vlen[lo:hi])
    out.append(FlatMaps(names, kid, pick(vnames, vid), cnt[2].copy()))
    if not all(_order_holds(nodes, f, name) for f, (name, _) in zip(out, _MAPS)):
        return None
    return (*out, idle, cnt[3])


def _order_holds(nodes: list, flat: FlatMaps, field: str) -> bool:
    """The first map with two or more entries reads the same here as from Python."""
    multi = np.flatnonzero(flat.lens >= 2)
    if multi.size == 0:
        return True
    n = int(multi[0])
    lo = int(flat.lens[:n].sum())
    got = flat.key_at(np.arange(lo, lo + int(flat.lens[n])))
    return got == list(attrgetter(field)(nodes[n]))


def warmup() -> None:
    """Compile (or load from numba's cache) the scan on one tiny message."""
    m = NodeState(idle_duration_ms=3)
    m.total_resources["CPU"] = 1.0
    m.total_resources["GPU"] = 2.0
    m.available_resources["CPU"] = 0.5
    m.labels["k"] = "v"
    read([m])
