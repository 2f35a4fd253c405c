"""Matrices prepared for COMPARE: the types and the host-side preparation that the CPU and GPU code share.

Every (motif, strand) row becomes integer *deficits* on the lattice of :mod:`workers.distribution.lattice`
(how far each letter lies below its column's best, in cells of the row's own step), the three cuts of its
threshold (surely above, estimate, possibly above) and the marginal probability of reaching each cut.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workers.distribution.lattice import integer_lattice, prepare_matrix

FORBIDDEN = 1 << 20          # deficit of a letter that never matches (prob 0): skipped
MAX_GRID = 128               # cells per axis on the GPU (shared memory)


@dataclass
class CompareRows:
    """Matrices prepared for COMPARE: one row per (motif, strand), as ``MotifSet.rows()`` orders them.

    ``kdef[off[r]:off[r]+m[r]]`` (int32, (m, 4)): per column and letter the lattice deficit below the
    column's best letter (``FORBIDDEN`` where the letter cannot occur).  ``cut[r]`` (3,): the largest
    total deficit that is (certainly above the threshold, estimate, possibly above): lower, mid, upper.
    ``marg[r]`` (3,): ``P(deficit <= cut)`` for the three cuts.
    """
    m: np.ndarray            # (R,) int32
    off: np.ndarray          # (R,) int64
    kdef: np.ndarray         # (sum m, 4) int32
    cut: np.ndarray          # (R, 3) int32, ascending; -1: cannot be reached
    marg: np.ndarray         # (R, 3) float64
    delta: np.ndarray        # (R,) float64
    prob: np.ndarray         # (sum m, 4) float64 letter probabilities (0 where forbidden)
    background: np.ndarray   # (4,)

    @property
    def n(self) -> int:
        return int(self.m.size)

    def rows_kdef(self, r: int) -> np.ndarray:
        return self.kdef[self.off[r]: self.off[r] + self.m[r]]

    def rows_prob(self, r: int) -> np.ndarray:
        return self.prob[self.off[r]: self.off[r] + self.m[r]]


def _marginal(kdef: np.ndarray, prob: np.ndarray, dmax: int) -> np.ndarray:
    """``P(total deficit = d)`` for ``d = 0..dmax`` (deficits above ``dmax`` dropped)."""
    cur = np.zeros(dmax + 1)
    cur[0] = 1.0
    for c in range(kdef.shape[0]):
        nxt = np.zeros(dmax + 1)
        for x in range(4):
            p, d = prob[c, x], int(kdef[c, x])
            if p == 0.0 or d > dmax:
                continue
            nxt[d:] += p * cur[: dmax + 1 - d]
        cur = nxt
    return cur


def prepare_rows(pwms: list[np.ndarray], thresholds: list[float], background, cells: int = 64) -> CompareRows:
    """Lattices, cuts and marginals of every row.

    Parameters
    ----------
    pwms : list of ndarray, shape (m_r, 4), float64
        Every (motif, strand) row, as ``MotifSet.rows()`` orders them.
    thresholds : list of float
        Each row's score threshold (``inf``: unreachable, the row never matches).
    background : array_like, shape (4,)
    cells : int
        Lattice cells between a row's threshold and its best score (the grid's precision).

    Returns
    -------
    CompareRows
    """
    bg = np.asarray(background, dtype=np.float64)
    ms, kd, pr, cuts, margs, deltas = [], [], [], [], [], []
    for w, alpha in zip(pwms, thresholds):
        P = prepare_matrix(w, bg)
        m = P.m
        ms.append(m)
        if P.dead or not math.isfinite(alpha) or alpha - 0.5 * P.tie > P.max_score:
            kd.append(np.full((m, 4), FORBIDDEN, np.int32))
            pr.append(np.zeros((m, 4)))
            cuts.append((-1, -1, -1))
            margs.append((0.0, 0.0, 0.0))
            deltas.append(math.nan)
            continue
        span = max(P.max_score - alpha, 0.0)
        delta = max(span, 0.05) / cells
        lat = integer_lattice(P, delta)
        kmax_col = np.where(P.allowed, lat.k, np.iinfo(np.int64).min).max(axis=1)
        kdef = np.where(P.allowed, kmax_col[:, None] - lat.k, FORBIDDEN).astype(np.int32)
        kmax = int(kmax_col.sum())
        # K >= ceil((α - d_hi)/δ): possibly above; K >= ceil((α - d_lo)/δ): surely above
        k_poss = math.ceil((alpha - lat.d_hi) / delta)
        k_sure = math.ceil((alpha - lat.d_lo) / delta)
        k_mid = math.ceil((alpha - 0.5 * (lat.d_lo + lat.d_hi)) / delta)
        cut = tuple(max(kmax - k, -1) for k in (k_sure, k_mid, k_poss))
        dist = _marginal(kdef, P.prob, max(cut[2], 0))
        cs = np.cumsum(dist)
        margs.append(tuple(float(cs[c]) if c >= 0 else 0.0 for c in cut))
        kd.append(kdef)
        pr.append(P.prob)
        cuts.append(cut)
        deltas.append(delta)
    m = np.asarray(ms, np.int32)
    off = np.concatenate([[0], np.cumsum(m)[:-1]]).astype(np.int64)
    return CompareRows(m=m, off=off, kdef=np.concatenate(kd).astype(np.int32),
                       cut=np.asarray(cuts, np.int32).reshape(-1, 3),
                       marg=np.asarray(margs, np.float64).reshape(-1, 3),
                       delta=np.asarray(deltas), prob=np.concatenate(pr), background=bg)
