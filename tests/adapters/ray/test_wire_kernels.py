"""The codec's byte kernels (vecsched.adapters.ray.wire) against readable twins:
interning byte strings by their bytes, and gathering strings for one decode."""
from __future__ import annotations

import numpy as np
import pytest

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


@pytest.mark.parametrize("seed", range(40))
def test_intern_equals_its_twin(seed):
    rng = np.random.default_rng(seed)
    blob, off, length = _strings(rng, int(rng.integers(0, 3000)))
    buf = np.frombuffer(blob, np.uint8)
    ids, first = wire._intern(buf, np.asarray(off, np.int64), np.asarray(length, np.int64),
                              _spans(rng, len(off)))
    assert (ids.tolist(), first.tolist()) == intern_twin(blob, off, length)


def _spans(rng, n: int) -> np.ndarray:
    """The rows 0..n cut into spans at random, visited in a random order (the
    numbering must not depend on it)."""
    cuts = np.unique(np.r_[0, rng.integers(0, n + 1, int(rng.integers(0, 12))), n])
    spans = np.stack([cuts[:-1], cuts[1:]], 1) if cuts.size > 1 else np.zeros((0, 2), np.int64)
    return np.ascontiguousarray(spans[rng.permutation(len(spans))], np.int64)


def test_intern_grows_its_table_past_many_distinct_strings():
    names = [f"node:10.0.{i // 256}.{i % 256}".encode() for i in range(5000)]
    blob = b"".join(names * 2)
    length = [len(s) for s in names * 2]
    off = np.cumsum([0] + length[:-1]).tolist()
    buf = np.frombuffer(blob, np.uint8)
    spans = np.array([[5000, 10000], [0, 5000]], np.int64)     # the second half first
    ids, first = wire._intern(buf, np.asarray(off, np.int64), np.asarray(length, np.int64), spans)
    assert ids.tolist() == list(range(5000)) * 2
    assert first.tolist() == list(range(5000))


@pytest.mark.parametrize("seed", range(30))
def test_decode_all_equals_decoding_one_by_one(seed):
    rng = np.random.default_rng(seed)
    words = ["CPU", "memory", "node:10.0.0.1", "ключ", "名前", "", "x" * 9]
    if seed % 3 == 0:
        words.append("a\x00b")          # a NUL inside: the one-by-one path
    picks = [words[int(rng.integers(len(words)))] for _ in range(int(rng.integers(0, 50)))]
    enc = [w.encode() for w in picks]
    blob = b"".join(enc)
    length = np.asarray([len(b) for b in enc], np.int64)
    off = np.cumsum(length) - length
    got = wire._decode_all(blob, np.frombuffer(blob, np.uint8), off, length)
    assert got == picks


def test_gather_counts_the_nuls_the_strings_hold():
    blob = b"ab\x00cd"
    out, nul = wire._gather(np.frombuffer(blob, np.uint8), np.asarray([0, 3], np.int64),
                            np.asarray([3, 2], np.int64))
    assert (out.tobytes(), nul) == (b"ab\x00\x00cd", 1)
