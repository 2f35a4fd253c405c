"""Distinct (family, p-value) pairs of hits, counted: the kernel of the q-value reduction (numba, no GIL).

:mod:`pipeline.qvalues` reduces every hit's p-value to one sorted, counted pair per distinct (motif family,
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
    each); returns how many pairs.  With counts the runs are merged by a stable merge sort (pieces arrive as
    sorted runs), without them sorted by quicksort."""
    n = fam.size
    k = 0
    lo = 0
    while lo < n:
        f = fam[lo]
        hi = lo + 1
        while hi < n and fam[hi] == f:
            hi += 1
        if count.size == 0:
            seg = np.sort(p[lo:hi])
            c = np.ones(hi - lo, np.int64)
        else:
            o = np.argsort(p[lo:hi], kind="mergesort")
            seg = p[lo:hi][o]
            c = count[lo:hi][o]
        prev = seg[0]
        acc = 0
        for i in range(seg.size):
            if seg[i] != prev:
                out_fam[k] = f
                out_p[k] = prev
                out_count[k] = acc
                k += 1
                prev = seg[i]
                acc = 0
            acc += c[i]
        out_fam[k] = f
        out_p[k] = prev
        out_count[k] = acc
        k += 1
        lo = hi
    return k
