"""FIMO's integer-scaled PSSM and the p-values of its scores (MEME suite 5.4.1, ``pssm.c``).

FIMO does not score with the log-odds matrix itself.  ``scale_score_matrix`` maps it onto integers::

    offset = floor(min)                      # an integer, so that log-odds 0 maps back to 0
    scale  = floor(range / (max - offset))   # range = PSSM_RANGE = 1000: a word scores in [0, m*range]
    q[j,x] = nint((pwm[j,x] - offset) * scale)       # nint(v) = (int)(v + 0.5) for v >= 0

(``large == small`` first lowers ``small`` by one.)  A window's integer score ``S`` is the sum of its
columns' ``q``; FIMO reports ``S/scale + m*offset`` (``scaled_to_raw``) and the p-value ``pv[S]`` of the
lookup table ``get_pv_lookup`` builds: the exact distribution of ``S`` under the order-0 background,
by dynamic programming over the columns in float64, then ``pv[x] = min(1, pdf[x] + pv[x+1])``.  A
window is reported when ``pv[S] <= --thresh`` (``fimo.c:fimo_record_score``).

Here the same integers and the same table are computed with the same float64 operations in the same
order, so the scores and p-values are FIMO's doubles.  The scan itself scores the matrix
``q/scale + offset`` (bits, what :class:`LatticeMatrix` gives as ``pwm``) with the usual kernels; its
float64 sums lie within ~1e-13 bits of the lattice scores ``S/scale + m*offset``, which are ``1/scale``
apart (at least 1/1000 bit), so a threshold half a tie below the weakest hit's lattice score, and
table steps half a tie above each lattice score, classify every window as FIMO does; the writer then
snaps each hit's score back onto the lattice (:func:`snap_scores`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workers.distribution.threshold import TIE_MIN, ScoreThreshold

__all__ = ["PSSM_RANGE", "LatticeMatrix", "meme_log2", "scale_pssm", "lattice_pvalues", "lattice_thresholds",
           "snap_scores"]

PSSM_RANGE = 1000            # pssm.h: range of the integer score of one column
_MEME_LOG2_E = 1.44269504    # utils.h my_log2: log(x) * 1.44269504 (not 1/ln 2 to full precision)
_U = 2.0 ** -53


def meme_log2(x: float) -> float:
    """MEME's ``my_log2`` (utils.h): ``log(x) * 1.44269504``; ``1e-300`` (about 0) for ``x == 0``.

    Parameters
    ----------
    x : float
        ``>= 0``.

    Returns
    -------
    float
        The double FIMO computes: the C library's ``log`` (through :func:`math.log`, not NumPy's own
        vectorised ``log``, which may differ in the last bit) times MEME's constant.
    """
    if x > 0.0:
        lx = math.log(x)
        return (-1.0e10 if lx < -0.5e10 else lx) * _MEME_LOG2_E
    if x < 0.0:
        raise ValueError(f"log of a negative value ({x})")
    return 1e-300


def _nint(v: float) -> int:
    """MEME's ``nint`` (utils.h): ``(int)(v + 0.5)`` for ``v >= 0``, ``(int)(v - 0.5)`` below."""
    return int(v + 0.5) if v >= 0 else int(v - 0.5)


@dataclass(frozen=True, eq=False)
class LatticeMatrix:
    """One strand's integer-scaled PSSM.

    Attributes
    ----------
    q : numpy.ndarray, shape (m, 4), int64
        Integer scores, columns A C G T, each in ``[0, PSSM_RANGE]``.
    scale : float
        Integer-valued: lattice scores are ``S/scale + m*offset``.
    offset : float
        Integer-valued (``floor`` of the smallest log-odds entry).
    """
    q: np.ndarray
    scale: float
    offset: float

    @property
    def length(self) -> int:
        return int(self.q.shape[0])

    @property
    def base(self) -> float:
        """``m*offset`` as FIMO computes it (``(w)*(offset)``, an int times a double)."""
        return self.length * self.offset

    @property
    def pwm(self) -> np.ndarray:
        """(m, 4) float64 ``q/scale + offset``: the matrix the scan scores (bits)."""
        return self.q / self.scale + self.offset

    def reverse_complement(self) -> "LatticeMatrix":
        """The reverse-complement matrix on the same lattice.  Under a complement-symmetric background
        (FIMO averages it when both strands are scanned) FIMO's reverse-complement motif has the same
        log-odds entries, hence the same ``scale``, ``offset`` and integers, reversed and complemented."""
        return LatticeMatrix(np.ascontiguousarray(self.q[::-1, ::-1]), self.scale, self.offset)


def scale_pssm(logodds, range_: int = PSSM_RANGE) -> LatticeMatrix:
    """MEME's ``scale_score_matrix`` (no priors): offset, scale and the rounded integer matrix.

    Parameters
    ----------
    logodds : array_like, shape (m, 4), float64
        Log-odds entries in bits as FIMO computes them (``meme_log2(p/bg)``).
    range_ : int
        ``PSSM_RANGE``.

    Returns
    -------
    LatticeMatrix
    """
    w = np.asarray(logodds, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] != 4 or w.shape[0] < 1 or not np.isfinite(w).all():
        raise ValueError(f"expected a finite (m, 4) log-odds matrix, got shape {w.shape}")
    vals = w.tolist()
    small = min(min(r) for r in vals)
    large = max(max(r) for r in vals)
    if large == small:                 # every entry the same
        small = large - 1
    offset = small = float(math.floor(small))
    scale = float(math.floor(range_ / (large - small)))
    # raw_to_scaled(x, 1, scale, offset) = nint((x - 1*offset) * scale)
    q = np.array([[_nint((x - 1 * offset) * scale) for x in r] for r in vals], dtype=np.int64)
    return LatticeMatrix(q, scale, offset)


def lattice_pvalues(q: np.ndarray, background, range_: int = PSSM_RANGE) -> np.ndarray:
    """FIMO's p-value table of an integer matrix (``get_pdf_table`` + ``get_pv_lookup_pos_dep``).

    Parameters
    ----------
    q : numpy.ndarray, shape (m, 4), integer
        Entries in ``[0, range_]``.
    background : array_like, shape (4,), float64
        A C G T probabilities exactly as FIMO holds them (not renormalised here).
    range_ : int

    Returns
    -------
    numpy.ndarray, shape (m * range_ + 1,), float64
        ``pv[x] = P(S >= x)`` for the integer score ``S`` of a background word, in FIMO's float64
        arithmetic: each column adds ``old[k] * bg[j]`` into ``new[k + q[i, j]]`` for ``j = 0..3`` in
        turn (the same additions, in the same order, as the C loops), then the survival sums from the
        top, clamped at 1.
    """
    q = np.asarray(q)
    bg = np.asarray(background, dtype=np.float64)
    m = q.shape[0]
    if q.ndim != 2 or q.shape[1] != 4 or q.min() < 0 or q.max() > range_:
        raise ValueError(f"expected an (m, 4) integer matrix in [0, {range_}]")
    size = m * range_ + 1
    new = np.zeros(size)
    new[0] = 1.0
    for i in range(m):
        old, new = new, np.zeros(size)
        top = i * range_ + 1                       # old[k] may be non-zero for k <= i*range only
        for j in range(4):
            s = int(q[i, j])
            new[s:s + top] += old[:top] * bg[j]
    # pv[i] = min(1, pdf[i] + pv[i+1]), i = size-2 .. 0: a sequential sum from the top (np.add.accumulate
    # adds in order); clamping changes nothing below the first sum that reaches 1 (all later ones do too)
    pv = np.add.accumulate(new[::-1])[::-1]
    return np.minimum(pv, 1.0)


def _tie(pwm: np.ndarray) -> float:
    """Scores closer than this are one score (``workers.distribution``'s rule: ~60x the float64 error of a
    window's sum of ``pwm`` entries)."""
    m = pwm.shape[0]
    abs_sum = float(np.abs(pwm).max(axis=1).sum())
    return max(TIE_MIN, 64.0 * 8.0 * (m + 2) * _U * (abs_sum + 1.0))


def lattice_thresholds(lat: LatticeMatrix, background, pvalues, range_: int = PSSM_RANGE) -> list[ScoreThreshold]:
    """FIMO's hit test as score thresholds and step tables of the matrix ``lat.pwm``.

    Parameters
    ----------
    lat : LatticeMatrix
    background : array_like, shape (4,), float64
        As FIMO holds it (see :func:`lattice_pvalues`).
    pvalues : sequence of float
        FIMO's ``--thresh`` values: a window is a hit when ``pv[S] <= p``.
    range_ : int

    Returns
    -------
    list of ScoreThreshold
        One per p-value (``method="fimo"``).  ``threshold`` is the lattice score of the weakest hit
        (the lowest attained ``S`` with ``pv[S] <= p``) minus ``tie/2``; ``pvalue`` is its ``pv``.  The
        table has one step per attained lattice score from there up (``seg_b = 0``): a score within
        ``tie/2`` of ``S/scale + m*offset`` looks up ``pv[S]``.  Unreachable when no attained score
        has ``pv <= p``.
    """
    pv = lattice_pvalues(lat.q, background, range_)
    pwm = lat.pwm
    tie = _tie(pwm)
    if not tie < 0.25 / lat.scale:
        raise ValueError(f"lattice step 1/{lat.scale:g} too fine for float64 scores of this matrix")
    # attained scores (as FIMO's table sees them): where pv drops, and the top cell if it holds mass
    att = np.flatnonzero(np.r_[pv[:-1] != pv[1:], pv[-1] > 0.0])
    raw = att.astype(np.float64) / lat.scale + lat.base         # scaled_to_raw, as FIMO computes it
    tail = pv[att]
    out = []
    for p in pvalues:
        p = float(p)
        ok = np.flatnonzero(tail <= p)
        common = dict(requested_pvalue=p, rel_tol=0.0, exact_threshold=True, tie=tie, eps=1.0 / lat.scale,
                      method="fimo", score_error=tie,
                      max_score=float(raw[-1]) if raw.size else -math.inf)
        if ok.size == 0:
            out.append(ScoreThreshold(math.inf, 0.0, (0.0, 0.0), False, **{**common, "score_error": math.nan}))
            continue
        k = int(ok[0])
        below = raw[k - 1] if k > 0 else raw[0] - 2 * tie       # exclusive lower edge of the first step
        x0 = np.r_[below, raw[k:-1]] + 0.5 * tie
        a = float(tail[k])
        out.append(ScoreThreshold(float(raw[k]) - 0.5 * tie, a, (a, a), True, **common,
                                  exact_from=-math.inf, seg_x0=x0, seg_a=np.log(tail[k:]),
                                  seg_b=np.zeros(tail.size - k), table_top=float(raw[-1]) + 0.5 * tie,
                                  top_zero=True))
    return out


def snap_scores(scores: np.ndarray, scale: np.ndarray, base: np.ndarray) -> np.ndarray:
    """Hit scores of lattice rows put back on FIMO's lattice: ``S/scale + base``, ``S`` the nearest integer to
    ``(score - base) * scale``.

    Parameters
    ----------
    scores : numpy.ndarray, shape (n,), float64
        Float64 sums of the rows' ``LatticeMatrix.pwm`` entries.
    scale, base : numpy.ndarray, shape (n,), float64
        Each hit's row ``scale`` and ``m*offset``.

    Returns
    -------
    numpy.ndarray, shape (n,), float64
        FIMO's ``scaled_to_raw`` doubles.
    """
    s = np.rint((scores - base) * scale)
    return s / scale + base
