"""Distinct (family, p-value) pairs of hits, counted: the kernel of the q-value reduction (numba, no GIL).

:mod:`pipeline.scan.qvalues` reduces every hit's p-value to one sorted, counted pair per distinct (motif family,
p-value).  Done with NumPy, a family's run costs a few Python calls (slice, sort, compare): on a 16-thread GPU
worker those calls hand the GIL around between every sort, and the reduction of 36 M hits at p = 1e-5 spent
27 thread-seconds there (750 ns a hit; docs/benchmarks.md, session 8).  One compiled call per array holds no
GIL at all.  Compiled on first use, cached on disk (``cache=True``), like :mod:`workers.scan.cpu_numba`.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def distinct_runs(fam, p, count, out_fam, out_p, out_count):  # pragma: no cover - compiled
    """Per run of equal ``fam`` (non-decreasing, (n,) int64), the run's distinct ``p`` ((n,) float64) ascending
    with their summed ``count`` ((n,) int64; an empty array: each item counts 1).  Written to ``out_*`` ((n,)
    each); returns how many pairs.  Each run is sorted by :func:`_sort_pairs` (numba's ``np.sort`` and
    ``np.argsort`` cost a new machine 3.9 s of compile for the same speed: docs/benchmarks.md)."""
    n = fam.size
    ap, bp = np.empty(n, np.float64), np.empty(n, np.float64)
    ac, bc = np.empty(n, np.int64), np.empty(n, np.int64)
    k = 0
    lo = 0
    while lo < n:
        f = fam[lo]
        hi = lo + 1
        while hi < n and fam[hi] == f:
            hi += 1
        m = hi - lo
        for i in range(m):
            ap[i] = p[lo + i]
            ac[i] = 1 if count.size == 0 else count[lo + i]
        sp, sc = (bp, bc) if _sort_pairs(m, ap, ac, bp, bc) else (ap, ac)
        prev = sp[0]
        acc = 0
        for i in range(m):
            if sp[i] != prev:
                out_fam[k] = f
                out_p[k] = prev
                out_count[k] = acc
                k += 1
                prev = sp[i]
                acc = 0
            acc += sc[i]
        out_fam[k] = f
        out_p[k] = prev
        out_count[k] = acc
        k += 1
        lo = hi
    return k


@numba.njit(cache=True, nogil=True)
def _sort_pairs(n, ap, ac, bp, bc):  # pragma: no cover - compiled
    """Sort ``ap[:n]`` ascending, ``ac[:n]`` moved alongside (stable): insertion sort of runs of 16, then merges of
    neighbouring runs back and forth between the ``a`` and ``b`` buffers ((n,) each at least).  Returns True when the
    sorted pairs ended in ``bp, bc``."""
    for s in range(0, n, 16):
        for i in range(s + 1, min(s + 16, n)):
            v, w = ap[i], ac[i]
            j = i - 1
            while j >= s and ap[j] > v:
                ap[j + 1], ac[j + 1] = ap[j], ac[j]
                j -= 1
            ap[j + 1], ac[j + 1] = v, w
    width = 16
    in_b = False
    while width < n:
        sp, sc, dp, dc = (bp, bc, ap, ac) if in_b else (ap, ac, bp, bc)
        for s in range(0, n, 2 * width):
            mid, e = min(s + width, n), min(s + 2 * width, n)
            i, j = s, mid
            for k in range(s, e):
                if j >= e or (i < mid and sp[i] <= sp[j]):
                    dp[k], dc[k] = sp[i], sc[i]
                    i += 1
                else:
                    dp[k], dc[k] = sp[j], sc[j]
                    j += 1
        in_b = not in_b
        width *= 2
    return in_b


@numba.njit(cache=True, nogil=True)
def bh_steps(fam, p, count, tests, out_p, out_q, out_hits, out_fam):  # pragma: no cover - compiled
    """Benjamini-Hochberg steps of every family at once: :func:`pipeline.scan.qvalues.steps` per run of equal ``fam``.

    ``fam`` (n,) int64 non-decreasing, ``p`` (n,) float64 ascending and distinct within a family, ``count`` (n,)
    int64 hits at each, ``tests`` (families,) int64.  Writes, per q-value step, its last p-value, q-value,
    cumulative hits and family to ``out_*`` ((n,) each) and returns how many; -1 - i when family run starting
    at i has more hits than tests (the caller raises)."""
    n = fam.size
    k = 0
    lo = 0
    q = np.empty(n, np.float64)
    while lo < n:
        f = fam[lo]
        hi = lo + 1
        while hi < n and fam[hi] == f:
            hi += 1
        t = float(tests[f])
        acc = 0
        for i in range(lo, hi):
            acc += count[i]
            q[i] = p[i] * t / acc
        if acc > tests[f]:
            return -1 - lo
        best = 1.0
        for i in range(hi - 1, lo - 1, -1):      # q_i = min over j >= i, capped at 1
            if q[i] < best:
                best = q[i]
            q[i] = best
        acc = 0
        for i in range(lo, hi):
            acc += count[i]
            if i == hi - 1 or q[i + 1] != q[i]:
                out_p[k] = p[i]
                out_q[k] = q[i]
                out_hits[k] = acc
                out_fam[k] = f
                k += 1
        lo = hi
    return k


@numba.njit(cache=True, nogil=True)
def merge_two(af, ap, ac, bf, bp, bc, of, op, oc):  # pragma: no cover - compiled
    """Merge two distinct, sorted (family, p-value) lists with counts ((n,) int64, float64, int64 each) into
    ``o*`` (room for both), a pair found in both once with the counts summed; returns how many pairs.  Linear:
    the pieces of the q-value reduction arrive sorted, and sorting their concatenation again cost a genome's
    reduction 2 thread-s of device sorts (docs/benchmarks.md, issue 18)."""
    i = 0
    j = 0
    k = 0
    na = af.size
    nb = bf.size
    while i < na and j < nb:
        if af[i] < bf[j] or (af[i] == bf[j] and ap[i] < bp[j]):
            of[k], op[k], oc[k] = af[i], ap[i], ac[i]
            i += 1
        elif af[i] == bf[j] and ap[i] == bp[j]:
            of[k], op[k], oc[k] = af[i], ap[i], ac[i] + bc[j]
            i += 1
            j += 1
        else:
            of[k], op[k], oc[k] = bf[j], bp[j], bc[j]
            j += 1
        k += 1
    while i < na:
        of[k], op[k], oc[k] = af[i], ap[i], ac[i]
        i += 1
        k += 1
    while j < nb:
        of[k], op[k], oc[k] = bf[j], bp[j], bc[j]
        j += 1
        k += 1
    return k
