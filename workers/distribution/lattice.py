"""A PWM as scored and its integer lattice with certified rounding: what the exact method, BUCKETSCOREDISTRIBUTION
and COMPARE all start from.

:func:`prepare_matrix` validates the matrix and the background, zeroes the letters that can never occur and
bounds the float64 summation error (``fe``) and the tie width.  :func:`integer_lattice` maps every column to
integers for a step ``eps`` with the residuals kept inside one arc per column, so that every word satisfies
``eps*K(u) + d_lo <= S(u) <= eps*K(u) + d_hi`` whatever the summation order (see
:mod:`workers.distribution.exact`, "Algorithm").
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from workers.distribution import exact_numba as _nb
from workers.distribution.threshold import TIE_MIN

_U = 2.0**-53


@dataclass
class PreparedMatrix:
    """A PWM as scored under a background (:func:`prepare_matrix`)."""
    pwm: np.ndarray        # (m, 4) float64, disallowed entries set to 0
    prob: np.ndarray       # (m, 4) background probability, 0 where disallowed
    allowed: np.ndarray    # (m, 4) bool: bg > 0 and finite entry
    m: int
    max_score: float
    min_score: float
    abs_sum: float
    fe: float
    tie: float
    log_words: float       # m * entropy(bg): log of the effective number of words
    dead: bool             # some column has no allowed letter: every word scores -inf


def _background(background) -> tuple[np.ndarray, float]:
    """Validated, normalised background and its entropy (nats), cached: a batch shares one background."""
    return _checked_background(np.asarray(background, dtype=np.float64).reshape(-1).tobytes())


@functools.lru_cache(maxsize=64)
def _checked_background(raw: bytes) -> tuple[np.ndarray, float]:
    bg = np.frombuffer(raw, dtype=np.float64)
    if bg.shape != (4,) or not np.isfinite(bg).all() or (bg < 0).any():
        raise ValueError("background must be 4 finite non-negative probabilities")
    tot = bg.sum()
    if not abs(tot - 1.0) < 1e-6:
        raise ValueError(f"background must sum to 1 (sums to {tot})")
    bg = bg / tot
    nz = bg[bg > 0]
    return bg, float(-(nz * np.log(nz)).sum())


def prepare_matrix(pwm, background) -> PreparedMatrix:
    """A PWM as scored under a background: validated, with its bounds and error margins.

    Parameters
    ----------
    pwm : array_like, shape (m, 4), float
        Log-odds (bits); ``-inf`` for a letter that never matches.
    background : array_like, shape (4,), float
        Probabilities (validated and normalised once per distinct background).

    Returns
    -------
    PreparedMatrix
        ``pwm`` and ``prob`` (m, 4) float64 (0 where a letter cannot occur), ``allowed`` (m, 4) bool, the best and
        worst scores in column order, the float64 summation bound ``fe`` and the tie width; ``dead`` when a
        column allows no letter.  NaN or +inf entries raise ValueError.
    """
    w = np.ascontiguousarray(pwm, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] != 4 or w.shape[0] < 1:
        raise ValueError(f"pwm must have shape (m, 4), m >= 1, not {w.shape}")
    bg, entropy = _background(background)
    m = w.shape[0]
    # column maxima/minima, scores in column order (like the scan) and abs_sum as NumPy adds it
    wz, prob, allowed, dead, max_score, min_score, abs_sum, bad = _nb.prepare(w, bg)
    if bad:
        raise ValueError("pwm holds NaN or +inf")
    fe = 8.0 * (m + 2) * _U * (abs_sum + 1.0)
    tie = max(TIE_MIN, 64.0 * fe)
    log_words = float(m * entropy)
    return PreparedMatrix(wz, prob, allowed, m, float(max_score), float(min_score), float(abs_sum), fe, tie,
                          log_words, bool(dead))


@dataclass
class Lattice:
    """A PWM on an integer lattice of step ``eps`` with certified residual bounds (:func:`integer_lattice`)."""
    eps: float
    k: np.ndarray          # (m, 4) int64 (0 where disallowed)
    d_lo: float            # widened: eps*K + d_lo <= S_float - tie/2
    d_hi: float            # widened: eps*K + d_hi >= S_float + tie/2
    kmin: np.ndarray       # (m,)
    kmax: np.ndarray       # (m,)


def integer_lattice(P: PreparedMatrix, eps: float, nearest: bool = False) -> Lattice:
    """Every column on integers of step ``eps`` with certified residuals.

    Parameters
    ----------
    P : PreparedMatrix
    eps : float
        Lattice step (bits).
    nearest : bool
        Plain nearest rounding instead of the shortest arc per column.

    Returns
    -------
    Lattice
        ``k`` (m, 4) int64 and ``d_lo``/``d_hi`` (widened by ``fe`` and ``tie/2``) with
        ``eps*K(u) + d_lo <= S(u) <= eps*K(u) + d_hi`` for every word ``u``; ``kmin``/``kmax`` (m,) per column.
    """
    k, dlo, dhi, kmin, kmax = _nb.lattice(P.pwm, P.allowed, float(eps), bool(nearest))
    slack = P.fe + 0.5 * P.tie
    return Lattice(eps, k, float(dlo) - slack, float(dhi) + slack, kmin, kmax)
