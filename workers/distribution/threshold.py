"""The score threshold of one PWM at one p-value and its tail table: the result type of the exact method
(:mod:`workers.distribution.exact`) and of BUCKETSCOREDISTRIBUTION (:mod:`workers.distribution.bucket`)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

#: Smallest tie width (bits): scores closer than ``tie`` are one score (see :mod:`workers.distribution.exact`).
TIE_MIN = 1e-9


def _empty_f() -> np.ndarray:
    return np.zeros(0, dtype=np.float64)


@dataclass(eq=False)
class ScoreThreshold:
    """Score threshold of one PWM at one p-value, and its tail table.

    Attributes
    ----------
    threshold : float
        ``alpha``; a window is a hit iff its float64 score ``>= alpha``.  ``+inf`` when the
        motif cannot reach the p-value (then ``reachable`` is False).
    pvalue : float
        ``Pv(alpha)``: the upper end of ``pvalue_bounds``; ``<= requested_pvalue``.
    pvalue_bounds : tuple of float
        Certified bracket ``(low, high)`` of the exact ``Pv(alpha)``; ``high <= low*(1+rel_tol)``.
    reachable : bool
        False when no attained score has ``Pv <= requested_pvalue``.
    requested_pvalue : float
        The ``p`` asked for.
    rel_tol : float
        Relative precision of ``pvalue_bounds`` and of ``score_to_pvalue``.
    exact_threshold : bool
        True when ``alpha`` was fixed on the exact tie classes (minimal among attained scores);
        False when it comes from the certified lattice bracket (see module docstring).
    max_score : float
        Best attainable score.
    tie : float
        Scores closer than this are one score.
    eps : float
        Step of the finest integer lattice used (``nan`` when only exact classes were used).
    exact_from : float
        Scores above this were resolved into exact tie classes.
    seg_x0 : ndarray of float64, shape (n_seg,)
        Tail table: exclusive lower score edge of each segment (ascending).  Segment ``i``
        answers scores in ``(seg_x0[i], seg_x0[i+1]]`` (the last one up to ``table_top``).
    seg_a : ndarray of float64, shape (n_seg,)
        ``log`` of the p-value upper bound at ``seg_x0``.
    seg_b : ndarray of float64, shape (n_seg,)
        Its slope per bit (``<= 0``): ``Pv(s) <= exp(seg_a + seg_b*(s - seg_x0))``.
    table_top : float
        Upper end of the table.  Above it the p-value is 0 when ``top_zero`` (the top was
        enumerated exactly), else bounded by its value at ``table_top``.
    top_zero : bool
        See ``table_top``.
    has_table : bool
        False when built with ``table=False`` (threshold only).
    method : str
        "exact" (lattice DP and exact tie classes, this module) or "bucket" (``workers.distribution.bucket``).
    score_error : float
        Certified bound of ``alpha - alpha*``, ``alpha*`` the exact smallest threshold with
        ``Pv <= requested_pvalue``: every score ``<= alpha - score_error`` has ``Pv > p``.  ``tie``
        for exact tie classes; NaN when unreachable.
    n_slices, n_buckets : int
        BUCKETSCOREDISTRIBUTION's ``N`` and (effective) ``B``; 0 for the exact method.
    seed_bound : float
        The seed's score error bound ``⌈1 + log2 N⌉ Δ_M`` for those ``N``, ``B`` (NaN for "exact").
    """

    threshold: float
    pvalue: float
    pvalue_bounds: tuple[float, float]
    reachable: bool
    requested_pvalue: float = math.nan
    rel_tol: float = 1e-3
    exact_threshold: bool = False
    max_score: float = math.nan
    tie: float = TIE_MIN
    eps: float = math.nan
    exact_from: float = math.inf
    seg_x0: np.ndarray = field(default_factory=_empty_f)
    seg_a: np.ndarray = field(default_factory=_empty_f)
    seg_b: np.ndarray = field(default_factory=_empty_f)
    table_top: float = -math.inf
    top_zero: bool = True
    has_table: bool = True
    method: str = "exact"
    score_error: float = math.nan
    n_slices: int = 0
    n_buckets: int = 0
    seed_bound: float = math.nan

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScoreThreshold):
            return NotImplemented
        for f in fields(self):
            a, b = getattr(self, f.name), getattr(other, f.name)
            if isinstance(a, np.ndarray):
                if not np.array_equal(a, b, equal_nan=True):
                    return False
            elif isinstance(a, float):
                if not (a == b or (math.isnan(a) and math.isnan(b))):
                    return False
            elif a != b:
                return False
        return True

    @property
    def nbytes(self) -> int:
        """Size of the tail table in bytes."""
        return self.seg_x0.nbytes + self.seg_a.nbytes + self.seg_b.nbytes
