"""Numba kernels of the Slices Strategy CPU scan (compiled lazily, cached on disk).

Kept apart from :mod:`workers.scan` the way sgkit keeps its ``*_numba_fns.py``: importing this
module compiles nothing; the first call on a worker does (and ``cache=True`` keeps the machine code).
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def kmer_codes(codes, n, ell):  # pragma: no cover - compiled
    """Index of the ℓ-mer starting at each position 0..n-1 (4**ℓ when it holds a code > 3)."""
    out = np.empty(n, dtype=np.int32)
    bad = 1 << (2 * ell)
    mask = bad - 1
    size = codes.shape[0]
    v = 0
    last_n = -1                 # position of the last code > 3 seen
    for i in range(n + ell - 1):
        c = codes[i] if i < size else 4
        if c > 3:
            last_n = i
            c = 0
        v = ((v << 2) | c) & mask
        p = i - ell + 1
        if p >= 0:
            out[p] = bad if last_n >= p else v
    return out


@numba.njit(cache=True, nogil=True)
def scan_tile(kmer, n, T, ell, cand_thr, out_pos, out_col):  # pragma: no cover - compiled
    """Candidates of one tile: windows p < n whose slice-table sum reaches ``cand_thr``.

    kmer : (n + S*ell,) int32 ℓ-mer indices; T : (S, 4**ℓ + 1, c) float32 slice tables with the
    threshold folded in; cand_thr : (c,) float32 (= -margin).  Writes at most ``out_pos.size``
    candidates and returns how many there were (the caller retries with more room if larger).
    """
    S = T.shape[0]
    c = T.shape[2]
    acc = np.empty(c, dtype=np.float32)
    cap = out_pos.shape[0]
    count = 0
    for p in range(n):
        if S == 1:
            last = T[0, kmer[p]]
            hit = False
            for k in range(c):
                v = last[k]
                acc[k] = v
                hit |= v >= cand_thr[k]
        else:
            first = T[0, kmer[p]]
            for k in range(c):
                acc[k] = first[k]
            for s in range(1, S - 1):
                row = T[s, kmer[p + s * ell]]
                for k in range(c):
                    acc[k] += row[k]
            last = T[S - 1, kmer[p + (S - 1) * ell]]
            hit = False
            for k in range(c):
                v = acc[k] + last[k]
                acc[k] = v
                hit |= v >= cand_thr[k]
        if hit:
            for k in range(c):
                if acc[k] >= cand_thr[k]:
                    if count < cap:
                        out_pos[count] = p
                        out_col[count] = k
                    count += 1
    return count
