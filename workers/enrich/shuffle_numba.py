"""Numba kernels of the dinucleotide shuffle (compiled lazily, cached on disk).

One call shuffles every record of a batch ``copies`` times.  Each record has its own random stream
(xoshiro256**, seeded by splitmix64 from the run's root words and the record's number), so a record's
shuffles do not depend on which other records share its batch.  See :mod:`workers.enrich.shuffle` for the
algorithm and why it samples uniformly.
"""
from __future__ import annotations

import numba
import numpy as np

ALPHABET = 5          # codes 0-3 (A C G T) and 4 (N / any other letter), each a vertex of the graph

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


@numba.njit(cache=True, nogil=True, inline="always")
def _mix(z):  # pragma: no cover - compiled
    """splitmix64's output function (a bijection of 64-bit words)."""
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, nogil=True, inline="always")
def _rotl(x, k):  # pragma: no cover - compiled
    return (x << np.uint64(k)) | (x >> np.uint64(64 - k))


@numba.njit(cache=True, nogil=True, inline="always")
def _next(s):  # pragma: no cover - compiled
    """xoshiro256** step on the state ``s`` (4 uint64, updated in place)."""
    out = _rotl(s[1] * np.uint64(5), 7) * np.uint64(9)
    t = s[1] << np.uint64(17)
    s[2] ^= s[0]
    s[3] ^= s[1]
    s[1] ^= s[2]
    s[0] ^= s[3]
    s[2] ^= t
    s[3] = _rotl(s[3], 45)
    return out


@numba.njit(cache=True, nogil=True)
def _seed(s, root, index):  # pragma: no cover - compiled
    """The stream of record ``index``: splitmix64 from a word that depends on the root and the index."""
    z = root[0] ^ _mix(np.uint64(index) + root[1])
    for j in range(4):
        z = z + _GOLDEN + root[2 + (j & 1)]
        s[j] = _mix(z)


@numba.njit(cache=True, nogil=True, inline="always")
def _below(s, n):  # pragma: no cover - compiled
    """Uniform integer in ``[0, n)`` (n >= 1): masked draws, rejected above n (no modulo bias)."""
    m = np.uint64(n - 1)
    m |= m >> np.uint64(1)
    m |= m >> np.uint64(2)
    m |= m >> np.uint64(4)
    m |= m >> np.uint64(8)
    m |= m >> np.uint64(16)
    m |= m >> np.uint64(32)
    while True:
        r = _next(s) >> np.uint64(11) & m
        if r < np.uint64(n):
            return np.int64(r)


@numba.njit(cache=True, nogil=True)
def _shuffle_one(seq, out, s, start, deg, work, last, ptr, in_tree):  # pragma: no cover - compiled
    """One uniform Eulerian trail of the record's doublet graph, written to ``out`` (same length).

    ``work[start[a]:start[a] + deg[a]]`` holds the successors of letter ``a`` (its out-edges); the
    caller fills it fresh before each copy.
    """
    L = seq.shape[0]
    e = seq[L - 1]
    # last exits: a random arborescence towards e by Wilson's loop-erased walks, each step a uniform
    # out-edge (so an edge is chosen in proportion to its multiplicity)
    for a in range(ALPHABET):
        in_tree[a] = a == e or deg[a] == 0
    for v in range(ALPHABET):
        u = v
        while not in_tree[u]:
            last[u] = _below(s, deg[u])
            u = work[start[u] + last[u]]
        u = v
        while not in_tree[u]:
            in_tree[u] = True
            u = work[start[u] + last[u]]
    # every other exit order is equally likely: the last exit goes to the end, the rest are permuted
    for a in range(ALPHABET):
        n = deg[a]
        if n == 0:
            continue
        b = start[a]
        if a != e:
            j = b + last[a]
            work[j], work[b + n - 1] = work[b + n - 1], work[j]
            n -= 1
        for i in range(n - 1, 0, -1):
            j = b + _below(s, i + 1)
            work[b + i], work[j] = work[j], work[b + i]
    for a in range(ALPHABET):
        ptr[a] = 0
    x = seq[0]
    out[0] = x
    for t in range(1, L):
        y = work[start[x] + ptr[x]]
        ptr[x] += 1
        out[t] = y
        x = y


@numba.njit(cache=True, nogil=True)
def shuffle_records(codes, offsets, index, copies, root):  # pragma: no cover - compiled
    """Shuffle every record ``codes[offsets[i]:offsets[i + 1]]`` ``copies`` times.

    Returns (copies · V,) uint8: record i's copy k at ``copies · offsets[i] + k · len_i``.
    """
    n = offsets.shape[0] - 1
    out = np.empty(copies * codes.shape[0], np.uint8)
    s = np.empty(4, np.uint64)
    start = np.zeros(ALPHABET, np.int64)
    deg = np.zeros(ALPHABET, np.int64)
    last = np.zeros(ALPHABET, np.int64)
    ptr = np.zeros(ALPHABET, np.int64)
    in_tree = np.zeros(ALPHABET, np.bool_)
    longest = 0
    for i in range(n):
        longest = max(longest, offsets[i + 1] - offsets[i])
    succ = np.empty(max(longest, 1), np.uint8)
    work = np.empty(max(longest, 1), np.uint8)
    for i in range(n):
        seq = codes[offsets[i]:offsets[i + 1]]
        L = seq.shape[0]
        base = copies * offsets[i]
        if L <= 2:                      # one sequence has these doublets, first and last letters
            for k in range(copies):
                out[base + k * L:base + (k + 1) * L] = seq
            continue
        _seed(s, root, index[i])
        deg[:] = 0
        for t in range(L - 1):
            deg[seq[t]] += 1
        acc = 0
        for a in range(ALPHABET):
            start[a] = acc
            acc += deg[a]
        fill = start.copy()
        for t in range(L - 1):         # successors grouped by letter, in sequence order
            succ[fill[seq[t]]] = seq[t + 1]
            fill[seq[t]] += 1
        for k in range(copies):
            work[:L - 1] = succ[:L - 1]
            _shuffle_one(seq, out[base + k * L:base + (k + 1) * L], s, start, deg, work, last, ptr, in_tree)
    return out
