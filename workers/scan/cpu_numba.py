"""Numba kernels of the Slices Strategy CPU scan (compiled lazily, cached on disk).

Kept apart from :mod:`workers.scan.cpu` the way sgkit keeps its ``*_numba_fns.py``: importing this
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
def scan_tile(kmer, n, tables, ell, cand_thr, out_pos, out_col):  # pragma: no cover - compiled
    """Candidates of one tile: windows p < n whose slice-table sum reaches ``cand_thr``.

    kmer : (n + S*ell,) int32 ℓ-mer indices; tables : tuple of S (4**ℓ + 1, c) slice tables, all int16
    (quantised) or all float32, threshold folded in; cand_thr : (c,) of the tables' dtype.  Writes at
    most ``out_pos.size`` candidates and returns how many there were (the caller retries with more room
    if larger).

    The tuple's length is part of its numba type, so each slice count S gets its own machine code in
    which the slice loop is unrolled inside the row loop: LLVM vectorises over rows (32 int16 or 16
    float32 lanes per AVX-512 register), each table row is read once per position, and the sum stays
    in registers.  A position with a candidate (a few in a hundred) sums its rows again one by one:
    storing the sums instead would let LLVM assume the stores may change ``off``, and it would not
    vectorise.  Every add is cast back to the tables' dtype: numba promotes int16 arithmetic to int64,
    and the cast lets LLVM keep int16 lanes (the sums never leave int16, see
    :func:`workers.scan.slice_tiles`).
    """
    S = len(tables)
    c = cand_thr.shape[0]
    dt = cand_thr.dtype.type
    off = np.empty(S, dtype=np.int64)
    cap = out_pos.shape[0]
    count = 0
    for p in range(n):
        for s in range(S):
            off[s] = kmer[p + s * ell]
        hit = False
        for k in range(c):
            v = tables[0][off[0], k]
            for s in range(1, S):
                v = dt(v + tables[s][off[s], k])
            hit |= v >= cand_thr[k]
        if hit:
            for k in range(c):
                v = tables[0][off[0], k]
                for s in range(1, S):
                    v = dt(v + tables[s][off[s], k])
                if v >= cand_thr[k]:
                    if count < cap:
                        out_pos[count] = p
                        out_col[count] = k
                    count += 1
    return count


@numba.njit(cache=True, nogil=True)
def rescore_windows(codes, npref, pos, rows, weights, starts, lengths, alpha):  # pragma: no cover - compiled
    """Exact float64 score of each candidate window, and whether it is a hit.

    codes : (>= max pos + m,) uint8; npref : prefix count of codes > 3 (``workers.scan.plan.n_prefix``);
    pos, rows : (n,) candidates; weights : (sum of m, 4) float64 matrices of all rows stacked, row r at
    ``starts[r] .. starts[r] + lengths[r]``; alpha : (R,) thresholds.  Columns are added in order from
    0.0, exactly as a plain float64 loop does (no fast-math: LLVM keeps the order), so scores are
    bit-identical to it.  A window holding a code > 3 is never a hit.
    """
    n = pos.shape[0]
    score = np.empty(n, dtype=np.float64)
    hit = np.zeros(n, dtype=np.bool_)
    for i in range(n):
        p = pos[i]
        r = rows[i]
        m = lengths[r]
        if npref[p + m] != npref[p]:
            continue
        acc = 0.0
        w0 = starts[r]
        for j in range(m):
            acc += weights[w0 + j, codes[p + j]]
        score[i] = acc
        hit[i] = acc >= alpha[r]
    return score, hit
