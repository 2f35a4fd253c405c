"""Numba kernels of BUCKETSCOREDISTRIBUTION and COMPARE (compiled lazily, cached on disk)."""
from __future__ import annotations

import numba
import numpy as np

SUFFIX_MAX = 8          # words of the last ≤ 8 columns of a slice are tabulated once (4^8 = 65,536)


@numba.njit(cache=True, nogil=True)
def slice_hist(sc, pr, lo, inv_delta, out):  # pragma: no cover - compiled
    """Add the probability of every word of one slice to the bucket of its score.

    ``sc``/``pr`` (l, 4): scores and background probabilities of the slice's columns (0 where a
    letter is not allowed); bucket of a word: ``floor((score - lo) * inv_delta)`` clamped to
    ``[0, len(out) - 1]``.  The words of the last ``ls`` columns are tabulated once; the outer loop
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


@numba.njit(cache=True, nogil=True)
def joint_tail(ka, kb, pr, na, nb, qa, qb, out):  # pragma: no cover - compiled
    """COMPARE: pruned 2-D lattice DP of two aligned integer matrices, then three joint tails.

    ``ka``/``kb`` (L, 4) int64: per column and letter, the lattice score of matrix A / B relative to
    that column's best letter (``<= 0``; 0 on padding columns); ``pr`` (L, 4) letter probabilities
    (0 for letters not allowed).  The state grid holds the partial scores that can still reach the
    lowest cut: cell ``(i, j)`` after all columns is ``K_A = i - (na - 1)``, ``K_B = j - (nb - 1)``
    below the best attainable scores.  ``qa``/``qb`` (3,): cut cells of each axis (already in grid
    coordinates); ``out[r] = P(K_A >= qa[r] and K_B >= qb[r])``.
    """
    L = ka.shape[0]
    cur = np.zeros((na, nb))
    nxt = np.zeros((na, nb))
    cur[na - 1, nb - 1] = 1.0
    for c in range(L):
        nxt[:, :] = 0.0
        for x in range(4):
            p = pr[c, x]
            if p == 0.0:
                continue
            da = -ka[c, x]          # >= 0: how far below the column's best letter
            db = -kb[c, x]
            if da >= na or db >= nb:
                continue
            for i in range(na - da):
                src = cur[i + da]
                dst = nxt[i]
                for j in range(nb - db):
                    dst[j] += p * src[j + db]
        cur, nxt = nxt, cur
    for r in range(out.shape[0]):
        a0 = max(qa[r], 0)
        b0 = max(qb[r], 0)
        s = 0.0
        for i in range(a0, na):
            for j in range(b0, nb):
                s += cur[i, j]
        out[r] = s
