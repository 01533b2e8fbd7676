"""The codec's byte kernels (vecsched.adapters.ray.wire) against readable twins:
interning byte strings by their bytes, and gathering strings for one decode."""
from __future__ import annotations

import numpy as np
import pytest
from numba import njit

from vecsched.adapters.ray import wire


def intern_twin(blob: bytes, off: list, length: list) -> tuple:
    """(id of each string, the first index of each id), ids in first-seen order."""
    ids, first, seen = [], [], {}
    for e, (o, k) in enumerate(zip(off, length)):
        s = blob[o:o + k]
        if s not in seen:
            seen[s] = len(first)
            first.append(e)
        ids.append(seen[s])
    return ids, first


def _strings(rng, n: int) -> tuple:
    """A blob and n byte ranges in it: repeated names, near misses (same length,
    one byte apart; a common prefix), empty strings, NULs, lengths around 8."""
    pool = [b"CPU", b"GPU", b"memory", b"object_store_memory", b"", b"\x00", b"a\x00b",
            b"node:10.0.0.1", b"node:10.0.0.2", b"node:10.0.0.12", b"12345678",
            b"12345679", b"123456781", b"\xff" * 16, b"\xff" * 17]
    pool += [bytes(rng.integers(0, 256, int(rng.integers(0, 20)), dtype=np.uint8))
             for _ in range(int(rng.integers(0, 40)))]
    picks = [pool[int(rng.integers(len(pool)))] for _ in range(n)]
    off, blob, at = [], bytearray(), 0
    for s in picks:
        pad = bytes(rng.integers(0, 256, int(rng.integers(0, 4)), dtype=np.uint8))
        blob += pad + s
        off.append(at + len(pad))
        at += len(pad) + len(s)
    return bytes(blob), off, [len(s) for s in picks]


@njit
def _intern_all(buf, off, length):
    """wire._lookup (a helper only kernels call) over the strings in order, the
    table grown as _place grows it."""
    table, ent, nd = np.full(64, -1, np.int64), np.empty((off.size, 3), np.int64), 0
    ids = np.empty(off.size, np.int64)
    for e in range(off.size):
        ids[e], nd = wire._lookup(buf, off[e], length[e], table, ent, nd)
        table = wire._grown(table, ent, nd)
    return ids, ent[:nd]


@njit
def _first_seen(ids, nd):
    return wire._first_seen(ids, nd)          # a helper only kernels call


@njit
def _gather(buf, off, length):
    return wire._gather(buf, off, length)


def intern(blob: bytes, off: list, length: list) -> tuple:
    buf = np.frombuffer(blob, np.uint8)
    ids, ent = _intern_all(buf, np.asarray(off, np.int64), np.asarray(length, np.int64))
    ids, nd = ids.tolist(), ent.shape[0]
    assert [blob[o:o + k] for o, k in ent[:nd, 1:].tolist()] == \
        [blob[off[e]:off[e] + length[e]] for e in intern_twin(blob, off, length)[1]]
    return ids, nd


@pytest.mark.parametrize("seed", range(40))
def test_lookup_equals_its_twin(seed):
    rng = np.random.default_rng(seed)
    blob, off, length = _strings(rng, int(rng.integers(0, 1500)))
    ids, _ = intern(blob, off, length)
    assert ids == intern_twin(blob, off, length)[0]


def test_lookup_grows_its_table_past_many_distinct_strings():
    names = [f"node:10.0.{i // 256}.{i % 256}".encode() for i in range(3000)]
    length = [len(s) for s in names * 2]
    off = np.cumsum([0] + length[:-1]).tolist()
    ids, nd = intern(b"".join(names * 2), off, length)
    assert (ids, nd) == (list(range(3000)) * 2, 3000)


@pytest.mark.parametrize("seed", range(20))
def test_first_seen_equals_its_twin(seed):
    rng = np.random.default_rng(seed)
    nd = int(rng.integers(1, 30))
    ids = rng.integers(0, nd, int(rng.integers(0, 200))).astype(np.int64)
    got, first = _first_seen(ids, nd)
    order = list(dict.fromkeys(ids.tolist()))
    assert got.tolist() == [order.index(d) for d in ids.tolist()]
    assert first.tolist() == [ids.tolist().index(d) for d in order]


@pytest.mark.parametrize("seed", range(30))
def test_names_equal_decoding_one_by_one(seed):
    rng = np.random.default_rng(seed)
    words = ["CPU", "memory", "node:10.0.0.1", "ключ", "名前", "", "x" * 9]
    if seed % 3 == 0:
        words.append("a\x00b")          # a NUL inside: the one-by-one path
    picks = [words[int(rng.integers(len(words)))] for _ in range(int(rng.integers(0, 50)))]
    enc = [w.encode() for w in picks]
    blob = b"".join(enc)
    length = np.asarray([len(b) for b in enc], np.int64)
    off = np.cumsum(length) - length
    got = wire._names(blob, off, length, *_gather(np.frombuffer(blob, np.uint8), off,
                                                       length))
    assert got == picks


def test_gather_counts_the_nuls_the_strings_hold():
    blob = b"ab\x00cd"
    out, nul = _gather(np.frombuffer(blob, np.uint8), np.asarray([0, 3], np.int64),
                       np.asarray([3, 2], np.int64))
    assert (out.tobytes(), nul) == (b"ab\x00\x00cd", 1)
