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
from workers.distribution.threshold import ScoreThreshold

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


def _threshold(t) -> tuple[float, bool, float | None]:
    """``(alpha, gap, pvalue)`` of a threshold given as a float or a ``ScoreThreshold``: ``gap`` when it was
    fixed on the exact tie classes, so no attained score lies within ``tie/2`` of it; ``pvalue`` the middle
    of its certified p-value bracket (None for a float)."""
    if isinstance(t, ScoreThreshold):
        if not t.reachable:
            return math.inf, False, None
        return float(t.threshold), bool(t.exact_threshold), 0.5 * (t.pvalue_bounds[0] + t.pvalue_bounds[1])
    return float(t), False, None


def _calibrated(cut: tuple, cs: np.ndarray, pvalue: float | None) -> tuple:
    """The estimate's cut moved, within the certified ``[cut_low, cut_high]``, to the deficit whose marginal
    ``P(deficit <= c)`` is nearest the threshold's known p-value (ties: the centre's cut).  The lattice cannot
    tell apart the words within its residual bracket of the threshold; the p-value says how much of them
    passes.  A matrix compared with itself still scores 1 (one cut on both sides)."""
    if pvalue is None:
        return cut
    cands = np.arange(cut[0], cut[2] + 1)
    mass = np.where(cands >= 0, cs[np.maximum(cands, 0)], 0.0)
    err = np.abs(mass - pvalue)
    best = cands[err <= err.min() * (1 + 1e-12)]
    return cut[0], int(best[np.argmin(np.abs(best - cut[1]))]), cut[2]


def _lattice_cuts(P, alpha: float, gap: bool, cells: int):
    """``(delta, kdef, cut)`` of one reachable row: the lattice step, the deficits (m, 4) and the three cuts.

    Every word satisfies ``delta*K + d_lo <= S - tie/2`` and ``delta*K + d_hi >= S + tie/2`` (the lattice is
    widened by ``tie/2``: scores closer than that are one score).  A word is surely above the threshold when
    ``delta*K + d_lo >= alpha`` and possibly above when ``delta*K + d_hi >= alpha``.  Where ``alpha`` sits in a
    gap (``gap``: exact tie classes put it ``tie/2`` below the lowest passing score, and the next lower score
    is at least ``tie/2`` below it) the tie widening is given back: ``delta*K + d_lo >= alpha - tie/2`` means
    ``S >= alpha`` already.  Without that, a word scoring exactly on an exact threshold (a matrix whose
    threshold is its best word's score) was never surely above it and, rounded to the lattice, fell below
    the estimate's cut as well (p = 0 for a matrix that matches one word in 4^m).

    The step is ``span / cells`` with ``span`` the distance from the threshold to the best score, so the
    grid has about ``cells`` cells whatever the span: a threshold a tie away from the best score gets a step
    fine enough to tell that word apart from every other.  Deficits beyond the loosest cut are clamped to it
    plus one (they leave the grid all the same; int32 holds them).
    """
    give_back = 0.5 * P.tie if gap else 0.0
    span = P.max_score - alpha
    # lattice thresholds (no gap) keep a floor: their words within tie/2 of alpha are ambiguous anyway
    delta = (max(span, 0.5 * P.tie) if gap else max(span, 0.05)) / cells
    lat = integer_lattice(P, delta)
    kmax_col = np.where(P.allowed, lat.k, np.iinfo(np.int64).min).max(axis=1)
    kmax = int(kmax_col.sum())
    # K >= ceil((α - d_hi)/δ): possibly above; K >= ceil((α - d_lo)/δ): surely above
    k_poss = math.ceil((alpha + give_back - lat.d_hi) / delta)
    k_sure = math.ceil((alpha - give_back - lat.d_lo) / delta)
    k_mid = math.ceil((alpha - 0.5 * (lat.d_lo + lat.d_hi)) / delta)
    cut = tuple(max(kmax - k, -1) for k in (k_sure, k_mid, k_poss))
    deficit = np.minimum(kmax_col[:, None] - lat.k, max(cut[2], 0) + 1)
    kdef = np.where(P.allowed, deficit, FORBIDDEN).astype(np.int32)
    return delta, kdef, cut


def prepare_rows(pwms: list[np.ndarray], thresholds: list, background, cells: int = 64) -> CompareRows:
    """Lattices, cuts and marginals of every row.

    Parameters
    ----------
    pwms : list of ndarray, shape (m_r, 4), float64
        Every (motif, strand) row, as ``MotifSet.rows()`` orders them.
    thresholds : list of float or ScoreThreshold
        Each row's score threshold (``inf``, or an unreachable ``ScoreThreshold``: the row never matches).
        A ``ScoreThreshold`` fixed on exact tie classes also tells that no word scores within ``tie/2`` of
        it, which lets words on an exact threshold be counted exactly (:func:`_lattice_cuts`); its p-value
        places the estimate's cut (:func:`_calibrated`).
    background : array_like, shape (4,)
    cells : int
        Lattice cells between a row's threshold and its best score (the grid's precision).

    Returns
    -------
    CompareRows
    """
    bg = np.asarray(background, dtype=np.float64)
    ms, kd, pr, cuts, margs, deltas = [], [], [], [], [], []
    for w, t in zip(pwms, thresholds):
        alpha, gap, pvalue = _threshold(t)
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
        delta, kdef, cut = _lattice_cuts(P, alpha, gap, cells)
        cs = np.cumsum(_marginal(kdef, P.prob, max(cut[2], 0)))
        cut = _calibrated(cut, cs, pvalue)
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
