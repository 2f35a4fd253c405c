"""Numba kernel of COMPARE: the pruned 2-D lattice DP of two aligned matrices (compiled lazily, cached on disk)."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def joint_tail(ka, kb, pr, na, nb, qa, qb, out):  # pragma: no cover - compiled
    """COMPARE: pruned 2-D lattice DP of two aligned integer matrices, then three joint tails.

    The state grid holds the partial scores that can still reach the lowest cut: cell ``(i, j)`` after all
    columns is ``K_A = i - (na - 1)``, ``K_B = j - (nb - 1)`` below the best attainable scores.

    Parameters
    ----------
    ka, kb : ndarray, shape (L, 4), int64
        Per column and letter, the lattice score of matrix A / B relative to that column's best letter
        (``<= 0``; 0 on padding columns).
    pr : ndarray, shape (L, 4), float64
        Letter probabilities (0 for letters not allowed).
    na, nb : int
        Grid cells per axis.
    qa, qb : ndarray, shape (3,), int64
        Cut cells of each axis, in grid coordinates.
    out : ndarray, shape (3,), float64
        Written: ``out[r] = P(K_A >= qa[r] and K_B >= qb[r])``.
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
