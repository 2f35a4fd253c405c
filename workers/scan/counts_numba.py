"""One block's hits reduced per (record or region, motif): the kernel of the peaks × motifs table (numba, no GIL).

:func:`pipeline.scan.region_counts.block_counts` turns a block's hits, in (plan row, position) order, into one row per
(key, motif) sorted by (key, motif).  With NumPy that is a run search, five ``reduceat`` calls, an ``argsort`` of
the runs and a second reduction: 30 ms for the 216 k hits of a block of 100,000 peaks, a ninth of the scan task's
thread time beside the scan (docs/benchmarks.md, issue 16, session 9).  Here it is three linear passes: the runs of
equal (row, key), a stable counting sort of the runs by motif and then by key (keys and motifs are small dense
ranges), and the merge of equal (key, motif) neighbours (a motif's two strands).  Compiled on first use, cached on
disk (``cache=True``), like :mod:`workers.scan.cpu_numba`.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _counting_order(values, lo, span, order_in):  # pragma: no cover - compiled
    """``order_in`` stably reordered by ``values[order_in] - lo`` (in ``[0, span)``): one counting sort."""
    counts = np.zeros(span + 1, np.int64)
    for i in order_in:
        counts[values[i] - lo + 1] += 1
    for v in range(span):
        counts[v + 1] += counts[v]
    out = np.empty(order_in.size, np.int64)
    for i in order_in:
        v = values[i] - lo
        out[counts[v]] = i
        counts[v] += 1
    return out


@numba.njit(cache=True, nogil=True)
def _reduce_runs(a, b, weight, score, pvalue):  # pragma: no cover - compiled
    """Items reduced over each run of equal (``a``, ``b``): the run's first item, summed ``weight`` (empty: one
    each, so that a block's hits need no weight array), largest ``score`` and smallest ``pvalue``; shape (k,)
    each."""
    n = a.size
    first = np.empty(n, np.int64)
    total = np.empty(n, np.int64)
    best_s = np.empty(n, np.float64)
    best_p = np.empty(n, np.float64)
    k = -1
    for i in range(n):
        if k < 0 or a[i] != a[i - 1] or b[i] != b[i - 1]:
            k += 1
            first[k], total[k], best_s[k], best_p[k] = i, 0, score[i], pvalue[i]
        total[k] += weight[i] if weight.size else 1
        if score[i] > best_s[k]:
            best_s[k] = score[i]
        if pvalue[i] < best_p[k]:
            best_p[k] = pvalue[i]
    k += 1
    return first[:k], total[:k], best_s[:k], best_p[:k]


@numba.njit(cache=True, nogil=True)
def reduce_block(key, motif, row, score, pvalue, n_motifs):  # pragma: no cover - compiled
    """Hits ((n,) each: key int64, motif and row int32, score and p-value float64, in (row, position) order, so
    that a (row, key) pair is one run) reduced per (key, motif), sorted by (key, motif).

    Returns ``(key, motif, hits, best_score, best_pvalue)``, shape (k,) each: int64, int32, int64, float64,
    float64.  Keys must span a range that a count table holds (the caller sorts otherwise)."""
    first, hits, best_s, best_p = _reduce_runs(row, key, np.zeros(0, np.int64), score, pvalue)
    rk = key[first]
    rm = motif[first]
    order = _counting_order(rm, 0, n_motifs, np.arange(rk.size))
    lo = hi = rk[0] if rk.size else 0
    for v in rk:                      # (not rk.min()/max(): numba compiles those reductions for ~1 s)
        lo = min(lo, v)
        hi = max(hi, v)
    order = _counting_order(rk, lo, hi - lo + 1, order)   # stable: motifs ascend within a key
    rk, rm = rk[order], rm[order]                # the runs (not the hits) reordered, then a motif's two strands
    # (motif, key): the runs are the same either way, and the argument types those of the first call (one compile)
    first2, hits2, best_s2, best_p2 = _reduce_runs(rm, rk, hits[order], best_s[order], best_p[order])
    return rk[first2], rm[first2], hits2, best_s2, best_p2


@numba.njit(cache=True, nogil=True)
def presence_counts(key, motif, lo, span, n_motifs, groups, split, n_groups):  # pragma: no cover - compiled
    """One pass over a block's hits ((n,) key int64 in ``[lo, lo + span)``, motif int32): per (group, motif) the
    number of distinct keys with hits, (n_groups, n_motifs) int64, counting only the keys not ``split``; and the
    distinct (key, motif) pairs of the split keys, (p,) each, in first-seen order.  A (span, n_motifs) table of marks
    settles distinctness (the NumPy form marked, then listed every pair: 64 ms for the 395 k hits of a block of
    100,000 peaks on the VM)."""
    seen = np.zeros((span, n_motifs), np.bool_)
    counts = np.zeros((n_groups, n_motifs), np.int64)
    pk = np.empty(key.size, np.int64)
    pm = np.empty(key.size, np.int32)
    p = 0
    for i in range(key.size):
        k, m = key[i], motif[i]
        if seen[k - lo, m]:
            continue
        seen[k - lo, m] = True
        if split[k]:
            pk[p], pm[p] = k, m
            p += 1
        else:
            counts[groups[k], m] += 1
    return counts, pk[:p], pm[:p]
