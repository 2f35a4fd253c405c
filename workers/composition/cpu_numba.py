"""Numba kernels of the CPU composition comparison (compiled lazily, cached on disk).

One call per test length: window cells from a sliding count, a counting sort of the windows by cell,
then every test row reads its L1 ball one (Δa, Δc) row at a time (one interval of Δg = one run of
contiguous cells).  See :mod:`workers.composition` for the geometry.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _g_interval(da, dc, dmax):  # pragma: no cover - compiled
    """Δg interval with |Δa| + |Δc| + |Δg| + |Δa + Δc + Δg| <= dmax (empty: lo > hi)."""
    r = dmax - abs(da) - abs(dc)
    s = da + dc
    if r < abs(s):
        return 1, 0
    return -((r + s) // 2), (r - s) // 2


@numba.njit(cache=True, nogil=True, inline="always")
def _cell_span(ha, hc, hg, da, dc, dmax, a0, c0, g0, d0, d1, d2):  # pragma: no cover - compiled
    """One (Δa, Δc) row of a test's L1 ball inside the box: cells ``base + glo .. base + ghi`` (empty:
    glo > ghi)."""
    a = ha + da - a0
    c = hc + dc - c0
    if a < 0 or a >= d0 or c < 0 or c >= d1:
        return 0, 1, 0
    glo, ghi = _g_interval(da, dc, dmax)
    return (a * d1 + c) * d2, max(hg + glo - g0, 0), min(hg + ghi - g0, d2 - 1)


@numba.njit(cache=True, nogil=True)
def length_pass(codes, starts, ns, L, lo, dim, dmax, rows, hits):  # pragma: no cover - compiled
    """Compare the windows of length ``L`` with the test rows of that length.

    Parameters
    ----------
    codes : ndarray, shape (V,), uint8
    starts, ns : ndarray, shape (k,), int64
        Windows start in ``[starts[i], starts[i] + ns[i])`` (and end by ``V``).
    L, dmax : int
        Length, and the largest L1 distance that matches.
    lo, dim : ndarray, shape (3,), int32
        The (a, c, g) box of this length.
    rows : ndarray, shape (r, 3), int32
        (a, c, g) of each test row of this length.
    hits : bool

    Returns
    -------
    counts : ndarray, shape (r,), int64
    row, pos, dist : ndarray, shape (h,), int32, int64, int32
        Every match, rows grouped (empty without ``hits``).
    """
    V = codes.shape[0]
    d0, d1, d2 = dim[0], dim[1], dim[2]
    a0, c0, g0 = lo[0], lo[1], lo[2]
    ncell = d0 * d1 * d2
    hist = np.zeros(ncell + 1, np.int32)          # a task holds < 2**31 windows
    cell = np.full(V if hits else 0, -1, np.int32)
    # the window's counts packed in 16-bit fields (A, C, G, N), one table lookup per base in and out
    pack = np.array([1, 1 << 16, 1 << 32, 0, 1 << 48], np.int64)
    for s in range(starts.shape[0]):
        p0 = starts[s]
        p1 = min(p0 + ns[s], V - L + 1)
        if p1 <= p0:
            continue
        w = 0
        for i in range(p0, p0 + L):
            w += pack[codes[i]]
        for p in range(p0, p1):
            if p > p0:
                w += pack[codes[p + L - 1]] - pack[codes[p - 1]]
            if (w >> 48) != 0:
                continue
            a = (w & 0xFFFF) - a0
            c = ((w >> 16) & 0xFFFF) - c0
            g = ((w >> 32) & 0xFFFF) - g0
            if a < 0 or a >= d0 or c < 0 or c >= d1 or g < 0 or g >= d2:
                continue
            x = (a * d1 + c) * d2 + g
            hist[x + 1] += 1
            if hits:
                cell[p] = x
    for i in range(ncell):                         # exclusive offsets of each cell
        hist[i + 1] += hist[i]
    off = hist
    r = rows.shape[0]
    k = dmax // 2
    counts = np.zeros(r, np.int64)
    for j in range(r):
        ha, hc, hg = rows[j, 0], rows[j, 1], rows[j, 2]
        tot = 0
        for da in range(-k, k + 1):
            for dc in range(-k, k + 1):
                base, glo, ghi = _cell_span(ha, hc, hg, da, dc, dmax, a0, c0, g0, d0, d1, d2)
                if glo <= ghi:
                    tot += off[base + ghi + 1] - off[base + glo]
        counts[j] = tot
    if not hits:
        return counts, np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int32)
    out_row, out_pos, out_d = _emit(off, cell, counts, rows, dmax, lo, dim)
    return counts, out_row, out_pos, out_d


@numba.njit(cache=True, nogil=True)
def _emit(off, cell, counts, rows, dmax, lo, dim):  # pragma: no cover - compiled
    """The matches of :func:`length_pass` (hit mode): window starts counting-sorted by cell, then each row's
    ball read cell run by cell run.  ``(row, pos, dist)`` of every match, rows grouped."""
    V = cell.shape[0]
    d0, d1, d2 = dim[0], dim[1], dim[2]
    a0, c0, g0 = lo[0], lo[1], lo[2]
    ncell = d0 * d1 * d2
    r = rows.shape[0]
    k = dmax // 2
    # counting sort of window starts by cell (ascending positions within a cell)
    order = np.empty(off[ncell], np.int32)
    cur = off[:ncell].copy()
    for p in range(V):
        x = cell[p]
        if x >= 0:
            order[cur[x]] = p
            cur[x] += 1
    total = counts.sum()
    out_row = np.empty(total, np.int32)
    out_pos = np.empty(total, np.int64)
    out_d = np.empty(total, np.int32)
    o = 0
    for j in range(r):
        ha, hc, hg = rows[j, 0], rows[j, 1], rows[j, 2]
        for da in range(-k, k + 1):
            for dc in range(-k, k + 1):
                base, glo, ghi = _cell_span(ha, hc, hg, da, dc, dmax, a0, c0, g0, d0, d1, d2)
                s = da + dc
                for gg in range(glo, ghi + 1):
                    dg = gg + g0 - hg
                    D = abs(da) + abs(dc) + abs(dg) + abs(s + dg)
                    for q in range(off[base + gg], off[base + gg + 1]):
                        out_row[o] = j
                        out_pos[o] = order[q]
                        out_d[o] = D
                        o += 1
    return out_row, out_pos, out_d


@numba.njit(cache=True, nogil=True)
def sliding_count(codes, starts, ns, test_hist, L, dmax):  # pragma: no cover - compiled
    """The straightforward loop (the seed's CPU version, its Figure 6): for each test, slide a window
    histogram along the sequence (one count in, one count out) and compare with the test.  The baseline of
    ``benchmarks/composition.py``.

    Parameters
    ----------
    codes : ndarray, shape (V,), uint8
    starts, ns : ndarray, shape (k,), int64
        Windows start in ``[starts[i], starts[i] + ns[i])``.
    test_hist : ndarray, shape (t, 4), int
        A, C, G, T counts of each test (all of length ``L``).
    L, dmax : int

    Returns
    -------
    ndarray, shape (t,), int64
        Matching windows per test.
    """
    nt = test_hist.shape[0]
    out = np.zeros(nt, np.int64)
    h = np.zeros(5, np.int64)
    for t in range(nt):
        ta, tc, tg, tt = test_hist[t, 0], test_hist[t, 1], test_hist[t, 2], test_hist[t, 3]
        cnt = 0
        for s in range(starts.shape[0]):
            p0 = starts[s]
            p1 = p0 + ns[s]
            if p1 + L - 1 > codes.shape[0]:
                p1 = codes.shape[0] - L + 1
            if p1 <= p0:
                continue
            for x in range(5):
                h[x] = 0
            for i in range(p0, p0 + L):
                h[codes[i]] += 1
            for p in range(p0, p1):
                if p > p0:
                    h[codes[p - 1]] -= 1
                    h[codes[p + L - 1]] += 1
                if h[4] == 0:
                    D = abs(h[0] - ta) + abs(h[1] - tc) + abs(h[2] - tg) + abs(h[3] - tt)
                    if D <= dmax:
                        cnt += 1
        out[t] = cnt
    return out
