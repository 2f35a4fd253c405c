"""One block's hits reduced per (record or region, motif): the kernel of the peaks × motifs table (numba, no GIL).

:func:`pipeline.region_counts.block_counts` turns a block's hits, in (plan row, position) order, into one row per
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
def reduce_block(key, motif, row, score, pvalue, n_motifs):  # pragma: no cover - compiled
    """Hits ((n,) each: key int64, motif and row int32, score and p-value float64, in (row, position) order, so
    that a (row, key) pair is one run) reduced per (key, motif), sorted by (key, motif).

    Returns ``(key, motif, hits, best_score, best_pvalue)``, shape (k,) each: int64, int32, int64, float64,
    float64.  Keys must span a range that a count table holds (the caller sorts otherwise)."""
    n = key.size
    # runs of equal (row, key)
    rk = np.empty(n, np.int64)
    rm = np.empty(n, np.int32)
    rh = np.empty(n, np.int64)
    rs = np.empty(n, np.float64)
    rp = np.empty(n, np.float64)
    r = -1
    for i in range(n):
        if i == 0 or row[i] != row[i - 1] or key[i] != key[i - 1]:
            r += 1
            rk[r], rm[r], rh[r], rs[r], rp[r] = key[i], motif[i], 0, score[i], pvalue[i]
        rh[r] += 1
        if score[i] > rs[r]:
            rs[r] = score[i]
        if pvalue[i] < rp[r]:
            rp[r] = pvalue[i]
    nr = r + 1
    kmin, kmax = rk[0], rk[0]
    for j in range(nr):
        kmin = min(kmin, rk[j])
        kmax = max(kmax, rk[j])
    order = _counting_order(rm, 0, n_motifs, np.arange(nr))
    order = _counting_order(rk, kmin, kmax - kmin + 1, order)      # stable: motifs stay ascending within a key
    ok = np.empty(nr, np.int64)
    om = np.empty(nr, np.int32)
    oh = np.empty(nr, np.int64)
    os_ = np.empty(nr, np.float64)
    op = np.empty(nr, np.float64)
    k = -1
    for j in order:
        if k < 0 or rk[j] != ok[k] or rm[j] != om[k]:
            k += 1
            ok[k], om[k], oh[k], os_[k], op[k] = rk[j], rm[j], 0, rs[j], rp[j]
        oh[k] += rh[j]
        if rs[j] > os_[k]:
            os_[k] = rs[j]
        if rp[j] < op[k]:
            op[k] = rp[j]
    k += 1
    return ok[:k], om[:k], oh[:k], os_[:k], op[:k]
