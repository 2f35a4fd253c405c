"""Numba kernel of BUCKETSCOREDISTRIBUTION: one slice's words into buckets (compiled lazily, cached on disk)."""
from __future__ import annotations

import numba
import numpy as np

SUFFIX_MAX = 8          # words of the last ≤ 8 columns of a slice are tabulated once (4^8 = 65,536)


@numba.njit(cache=True, nogil=True)
def slice_hist(sc, pr, lo, inv_delta, out):  # pragma: no cover - compiled
    """Add the probability of every word of one slice to the bucket of its score.

    Parameters
    ----------
    sc, pr : ndarray, shape (l, 4), float64
        Scores and background probabilities of the slice's columns (0 where a letter is not allowed).
    lo : float
        Score of bucket 0.
    inv_delta : float
        1 / bucket width; a word's bucket is ``floor((score - lo) * inv_delta)`` clamped to ``[0, len(out) - 1]``.
    out : ndarray, shape (ncell,), float64
        Added to.

    The words of the last ``ls`` columns are tabulated once; the outer loop
    walks the prefixes, the inner loop the tabulated suffixes (the order of TFM-CUDA §4.4: all
    iterations of the inner loop do the same work on neighbouring words).
    """
    l = sc.shape[0]
    ls = min(l, SUFFIX_MAX)
    lp = l - ls
    ns = 1 << (2 * ls)
    ss = np.empty(ns)
    sp = np.empty(ns)
    for w in range(ns):
        s = 0.0
        p = 1.0
        x = w
        for j in range(l - 1, lp - 1, -1):
            d = x & 3
            x >>= 2
            s += sc[j, d]
            p *= pr[j, d]
        ss[w] = s
        sp[w] = p
    top = out.shape[0] - 1
    npre = 1 << (2 * lp)
    for w in range(npre):
        s = 0.0
        p = 1.0
        x = w
        for j in range(lp - 1, -1, -1):
            d = x & 3
            x >>= 2
            s += sc[j, d]
            p *= pr[j, d]
        if p == 0.0:
            continue
        base = s - lo
        for t in range(ns):
            q = sp[t]
            if q == 0.0:
                continue
            v = (base + ss[t]) * inv_delta
            k = int(v) if v > 0.0 else 0
            if k > top:
                k = top
            out[k] += p * q
