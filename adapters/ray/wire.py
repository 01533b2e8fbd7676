"""The Ray nodes' maps of a tick read from their wire bytes, in two numba passes.

Reading a protobuf map from Python costs about 1 µs a map plus 0.1 µs an
entry (a wrapper, an iterator, a new str per key, a look-up per value). Here
every NodeState is serialised (C speed), the bytes are scanned once to count
and once to place the entries of the total, available and label maps; the
placing scan also interns equal byte strings (keys and label values) while
the node's bytes are in cache, so Python decodes each distinct name once.

The scan is one kernel call that holds no GIL, run on a thread of its own
(``start`` / ``Scan.result``): the codec reads the instances' other fields in
the meantime, on the other core.

Exactness: the engine must see each map in Python's iteration order (Ray's
float sums follow it). upb, the runtime Ray 2.60 installs, writes a map's
entries in the reverse of that order, so the entries are placed back to front.
``read`` checks this on the tick's own messages (one map of each kind with two
or more entries) and returns None when it does not hold, or when anything in
the bytes is not what the schema says; the codec then reads the maps one by one.
"""
from __future__ import annotations

import threading
from operator import attrgetter, methodcaller
from typing import Optional

import numpy as np
from numba import njit

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.internal import api_implementation
from ray.core.generated.autoscaler_pb2 import NodeState

from vecsched.engine.warmup import njit_inner, shipped
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


# Helpers called per field or per string: inlined into the scans and compiled
# without numba's reference counting (an array argument is borrowed, so no
# atomic increment and decrement per call; they make no arrays), and without a
# Python entry point or machine code of their own (only the scans call them; their
# code is in the scans' cache: engine/kernels/_linked.py).
_INNER = njit_inner(hot=True)
# The passes ``_scan`` calls: they make arrays (numba's reference counting on) and
# have no Python entry point either (their code is in ``_scan``'s cache; the tests
# call them through kernels of their own).
_PASS = njit_inner(alloc=True)


@_INNER
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


@_INNER
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


@_INNER
def _which(nums, f):
    for k in range(nums.size):
        if nums[k] == f:
            return k
    return -1


@_PASS
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


@_INNER
def _word(buf, b):
    """The 8 bytes at ``b`` as one little-endian word (LLVM makes it one load; a
    ``view`` of a slice costs 20 times more)."""
    x = np.uint64(0)
    for k in range(8):
        x |= np.uint64(buf[b + k]) << np.uint64(8 * k)
    return x


@_INNER
def _hash(buf, o, ln):
    """FNV-1a over the bytes at ``o``, eight at a time (the tail one by one),
    then MurmurHash3's final mix (the table's slot is the low bits)."""
    h = np.uint64(14695981039346656037) ^ np.uint64(ln)
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


@_INNER
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


@_INNER
def _lookup(buf, o, ln, table, ent, nd):
    """(id of the ``ln`` bytes at ``o``, ids so far): a new byte string takes
    the next id, in ``table`` and in ``ent`` (its hash, offset and length, side
    by side). The caller doubles the table when it is half full (``_grown``).
    Exact: the hash only picks the slot, the bytes decide equality."""
    h = np.int64(_hash(buf, o, ln) >> np.uint64(1))
    mask = table.size - 1
    slot = h & mask
    while True:
        d = table[slot]
        if d < 0:
            table[slot] = nd
            ent[nd, 0], ent[nd, 1], ent[nd, 2] = h, o, ln
            return nd, nd + 1
        if ent[d, 0] == h and ent[d, 2] == ln and _same(buf, ent[d, 1], o, ln):
            return d, nd
        slot = (slot + 1) & mask


@_PASS
def _grown(table, ent, nd):
    """``table``, or a table twice its size when more than half full."""
    if 2 * nd <= table.size:
        return table
    size = 2 * table.size
    out = np.full(size, -1, np.int64)
    for j in range(nd):
        slot = ent[j, 0] & (size - 1)
        while out[slot] >= 0:
            slot = (slot + 1) & (size - 1)
        out[slot] = j
    return out


@_PASS
def _place(buf, starts, nums, is_str, seg):
    """Every entry at its place: map k of node n fills seg[k*N+n] up to
    seg[k*N+n+1], back to front (upb writes a map in reverse iteration order).
    Returns each entry's key id, value (a double) and string value's id (-1 for
    a double), and ``ent``: the hash, offset and length of each id. Ids number
    the distinct byte strings, keys and values alike, while the node's bytes
    are in cache (a missing key or value is the empty string)."""
    N = starts.size - 1
    total = seg[-1]
    kid = np.zeros(total, np.int64)
    vid = np.full(total, -1, np.int64)
    val = np.zeros(total, np.float64)
    table = np.full(64, -1, np.int64)
    ent = np.empty((2 * total, 3), np.int64)
    nd = 0
    word = np.zeros(1, np.uint64)
    as_double = word.view(np.float64)
    placed = np.zeros(nums.size, np.int64)
    for n in range(N):
        i, end = starts[n], starts[n + 1]
        placed[:] = 0
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
            ko, kl, vo, vl = i, 0, i, 0
            while i < stop:
                t2, i = _varint(buf, i)
                f2, w2 = t2 >> 3, t2 & 7
                if f2 == 1 and w2 == 2:
                    kl, i = _varint(buf, i)
                    ko = i
                    i += kl
                elif f2 == 2 and w2 == 1 and not is_str[k]:
                    word[0] = _word(buf, i)
                    val[pos] = as_double[0]
                    i += 8
                elif f2 == 2 and w2 == 2 and is_str[k]:
                    vl, i = _varint(buf, i)
                    vo = i
                    i += vl
                else:
                    i = _skip(buf, i, w2)
            kid[pos], nd = _lookup(buf, ko, kl, table, ent, nd)
            if is_str[k]:
                vid[pos], nd = _lookup(buf, vo, vl, table, ent, nd)
            if 2 * nd > table.size:
                table = _grown(table, ent, nd)
            i = stop
    return kid, val, vid, ent[:nd]


@_PASS
def _first_seen(ids, nd):
    """``ids`` (each < nd) renumbered in first-seen order, and the first index
    of each new id."""
    new = np.full(nd, -1, np.int64)
    out = np.empty(ids.size, np.int64)
    first = np.empty(ids.size, np.int64)
    k = 0
    for e in range(ids.size):
        d = ids[e]
        if new[d] < 0:
            new[d] = k
            first[k] = e
            k += 1
        out[e] = new[d]
    return out, first[:k]


@_PASS
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


_SERIALIZE = methodcaller("SerializeToString")


@_PASS
def _renumbered(buf, ids, nd, ent):
    """(ids renumbered in first-seen order, the distinct strings' offsets and
    lengths, the strings gathered with a NUL between them and how many NULs they
    hold) of entries whose strings have ids into ``ent`` (``_place``)."""
    out, first = _first_seen(ids, nd)
    off = np.empty(first.size, np.int64)
    length = np.empty(first.size, np.int64)
    for k in range(first.size):
        e = ids[first[k]]
        off[k], length[k] = ent[e, 1], ent[e, 2]
    gathered, nul = _gather(buf, off, length)
    return out, off, length, gathered, nul


def _names(blob: bytes, off, length, gathered, nul) -> list:
    """The strings at these byte ranges, decoded in one call: gathered with a NUL
    between them (``_gather``), decoded once and split (a node's own names,
    ``node:<ip>``, are one per node: 50,000 one-by-one decodes were 0.1 s). One
    by one when there are fewer than two or a string holds a NUL itself."""
    if off.size < 2 or nul:
        return [blob[o:o + k].decode() for o, k in zip(off.tolist(), length.tolist())]
    return gathered.tobytes().decode().split("\x00")


@njit(cache=True, nogil=True)
def _scan(buf, starts, nums, is_str, idle_num):
    """Both passes over the bytes and the strings' renumbering, in one call that
    holds no GIL (a thread running it needs the GIL only to start and to end).
    ``ok`` is False when a message does not parse to its end."""
    cnt, idle, ok = _count(buf, starts, nums, idle_num)
    N = starts.size - 1
    seg = np.zeros(cnt.size + 1, np.int64)
    if ok:
        flat = cnt.ravel()
        for s in range(flat.size):
            seg[s + 1] = seg[s] + flat[s]
    # not ok: no node is placed (the counts cannot be trusted)
    kid, val, vid, ent = _place(buf, starts if ok else starts[:1].copy(), nums, is_str, seg)
    # totals and availabilities share one name list (a node names mostly the
    # same resources in both), the labels have their own
    mid, hi, end = seg[N], seg[2 * N], seg[3 * N]
    nd = ent.shape[0]
    return (ok, cnt, idle, val, mid, hi, _renumbered(buf, kid[:hi], nd, ent),
            _renumbered(buf, kid[hi:end], nd, ent), _renumbered(buf, vid[hi:end], nd, ent))


shipped(_scan)                          # a read-only cache built at install time


class Scan:
    """The scan of one tick's NodeState bytes, running on a thread of its own
    (its kernels hold no GIL) while the caller reads the instances' other fields;
    ``result()`` waits for it and is ``read``'s answer. An error in the scan is
    raised by ``result()``, in the caller's thread."""

    def __init__(self, nodes: list, blob: bytes, buf, starts):
        self._nodes, self._blob = nodes, blob
        self._out, self._error = None, None
        self._thread = threading.Thread(target=self._run, args=(buf, starts),
                                        name="vecsched-wire-scan", daemon=True)
        self._thread.start()

    def _run(self, buf, starts) -> None:
        try:
            self._out = _scan(buf, starts, _NUMS, _STR, _IDLE)
        except BaseException as e:          # noqa: BLE001 (raised again by result())
            self._error = e

    def result(self) -> Optional[tuple]:
        self._thread.join()
        if self._error is not None:
            raise self._error
        ok, cnt, idle, val, mid, hi, both, keys, values = self._out
        if not ok:
            return None
        blob = self._blob
        ids, names = both[0], _names(blob, *both[1:])
        out = [FlatMaps(names, ids[:mid], val[:mid], cnt[0].copy()),
               FlatMaps(names, ids[mid:], val[mid:hi], cnt[1].copy())]
        vnames = _names(blob, *values[1:])
        out.append(FlatMaps(_names(blob, *keys[1:]), keys[0], pick(vnames, values[0]),
                            cnt[2].copy()))
        if not all(_order_holds(self._nodes, f, name) for f, (name, _) in zip(out, _MAPS)):
            return None
        return (*out, idle, cnt[3])


def start(nodes: list) -> Optional[Scan]:
    """Serialise these NodeState messages (in C, holding the GIL) and start
    scanning their bytes; None when the bytes cannot be vouched for (see the
    module docstring)."""
    if not _SCHEMA_OK:
        return None
    parts = list(map(_SERIALIZE, nodes))
    blob = b"".join(parts)
    starts = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, parts), np.int64, len(parts)), out=starts[1:])
    return Scan(nodes, blob, np.frombuffer(blob, np.uint8), starts)


def read(nodes: list) -> Optional[tuple]:
    """(total, available, labels) FlatMaps, idle times (int64 array) and the
    count of dynamic labels per node, of these NodeState messages; None when
    the bytes cannot be vouched for (see the module docstring)."""
    scan = start(nodes)
    return scan.result() if scan is not None else None


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
