"""Numba kernels of the Slices Strategy CPU scan (compiled lazily, cached on disk).

Kept apart from :mod:`workers.scan.cpu` the way sgkit keeps its ``*_numba_fns.py``: importing this
module compiles nothing; the first call on a worker does (and ``cache=True`` keeps the machine code).
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def kmer_codes(codes, n, ell):  # pragma: no cover - compiled
    """Index of the ℓ-mer starting at each position, first base most significant.

    Parameters
    ----------
    codes : ndarray, shape (V,), uint8
        Read as code 4 past its end.
    n : int
        Positions.
    ell : int
        ℓ.

    Returns
    -------
    ndarray, shape (n,), int32
        ``4**ℓ`` where the ℓ-mer holds a code > 3.
    """
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


#: rows a tile's kernel tests together (one AVX-512 register of int8, two of int16): a tile's width is a multiple
CHUNK = 64


@numba.njit(cache=True, nogil=True)
def scan_tile(kmer, n, tables, ell, cand_thr, out_pos, out_col):  # pragma: no cover - compiled
    """Candidates of one tile: windows ``p < n`` whose slice-table sum reaches ``cand_thr``.

    Parameters
    ----------
    kmer : ndarray, shape (n + S*ell,), int32
        :func:`kmer_codes` of the block row.
    n : int
        Window starts.
    tables : tuple of S ndarrays, shape ((4**ℓ + 1) * w,), all int8 or all int16 (quantised) or all float32
        Slice tables of the tile, threshold folded in (:func:`workers.scan.cpu.slice_tiles`), each flattened from
        ``(4**ℓ + 1, w)``; ``w`` is a multiple of :data:`CHUNK`.
    ell : int
    cand_thr : ndarray, shape (w,), the tables' dtype
        Lowest table sum a hit can have, per row.
    out_pos : ndarray, shape (cap,), int64
        Window start of each candidate (written).
    out_col : ndarray, shape (cap,), int32
        Tile column of each candidate (written).

    Returns
    -------
    int
        Candidates found; at most ``cap`` were written (the caller retries with more room if larger).

    The tuple's length is part of its numba type, so each slice count S gets its own machine code in
    which the slice loop is unrolled inside the row loop: LLVM vectorises over the :data:`CHUNK` rows of
    a chunk (64 int8, 32 int16 or 16 float32 lanes per AVX-512 register), each table row is read once per
    position, and the sum stays in registers.  A chunk with a candidate (a few in a hundred) sums its rows
    again one by one: storing the sums instead would let LLVM assume the stores may change ``off``, and it
    would not vectorise.  Every add is cast back to the tables' dtype: numba promotes small-integer
    arithmetic to int64, and the cast lets LLVM keep int8/int16 lanes (the sums never leave the dtype, see
    :func:`workers.scan.cpu._quantise_many`).  Offsets are unsigned so that numba emits no negative-index
    wrap-around per load: with it, scalar address arithmetic outweighed the vector adds.
    """
    S = len(tables)
    w = cand_thr.shape[0]
    dt = cand_thr.dtype.type
    off = np.empty(S, dtype=np.uint64)
    cap = out_pos.shape[0]
    uw = np.uint64(w)
    chunk = np.uint64(CHUNK)
    count = 0
    for p in range(n):
        for s in range(S):
            off[s] = np.uint64(kmer[p + s * ell]) * uw
        for j in range(w // CHUNK):
            k0 = np.uint64(j) * chunk
            hit = False
            for k in range(chunk):
                i = k0 + k
                v = tables[0][off[0] + i]
                for s in range(1, S):
                    v = dt(v + tables[s][off[s] + i])
                hit |= v >= cand_thr[i]
            if hit:
                for k in range(chunk):
                    i = k0 + k
                    v = tables[0][off[0] + i]
                    for s in range(1, S):
                        v = dt(v + tables[s][off[s] + i])
                    if v >= cand_thr[i]:
                        if count < cap:
                            out_pos[count] = p
                            out_col[count] = i
                        count += 1
    return count


@numba.njit(cache=True, nogil=True)
def rescore_windows(codes, npref, pos, rows, weights, starts, lengths, alpha):  # pragma: no cover - compiled
    """Exact float64 score of each candidate window, and whether it is a hit.

    Columns are added in order from 0.0, exactly as a plain float64 loop does (no fast-math: LLVM keeps the
    order), so scores are bit-identical to it.  A window holding a code > 3 is never a hit.

    Parameters
    ----------
    codes : ndarray, shape (>= max(pos) + m,), uint8
    npref : ndarray, shape (codes.size + 1,), int32
        :func:`workers.scan.plan.n_prefix` of ``codes``.
    pos : ndarray, shape (n,), int64
    rows : ndarray, shape (n,), int32
    weights : ndarray, shape (sum of m_r, 4), float64
        All rows' matrices stacked; row ``r`` at ``starts[r] .. starts[r] + lengths[r]``.
    starts, lengths : ndarray, shape (R,), int64
    alpha : ndarray, shape (R,), float64
        Thresholds.

    Returns
    -------
    score : ndarray, shape (n,), float64
        Undefined where the window holds a code > 3.
    hit : ndarray, shape (n,), bool
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


@numba.njit(cache=True, nogil=True)
def hits_by_row(pos, rows, score, hit, n_rows):  # pragma: no cover - compiled
    """The hits among candidates whose positions ascend within each row, in (row, position) order.

    A stable counting sort by row: linear, where ``argsort`` of the packed keys took a tenth of a block's scan.

    Parameters
    ----------
    pos : ndarray, shape (n,), int64
        Candidate window starts, ascending among the candidates of any one row.
    rows : ndarray, shape (n,), int32
    score : ndarray, shape (n,), float64
    hit : ndarray, shape (n,), bool
    n_rows : int
        Rows of the plan (``rows < n_rows``).

    Returns
    -------
    pos, rows, score : ndarray, shape (h,)
        The ``h`` hits, sorted by (row, position).
    """
    start = np.zeros(n_rows + 1, dtype=np.int64)
    for i in range(pos.shape[0]):
        if hit[i]:
            start[rows[i] + 1] += 1
    for r in range(n_rows):
        start[r + 1] += start[r]
    h = start[n_rows]
    out_pos = np.empty(h, dtype=np.int64)
    out_row = np.empty(h, dtype=np.int32)
    out_score = np.empty(h, dtype=np.float64)
    for i in range(pos.shape[0]):
        if hit[i]:
            j = start[rows[i]]
            start[rows[i]] = j + 1
            out_pos[j] = pos[i]
            out_row[j] = rows[i]
            out_score[j] = score[i]
    return out_pos, out_row, out_score
