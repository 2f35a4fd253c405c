"""Exact score distributions, p-values and score thresholds of PWMs (NumPy; inner loops in numba).

Definitions
-----------
A PWM is a float64 array ``(m, 4)`` (columns A C G T, in bits).  The score of a word ``u``
is ``S(u) = sum_j pwm[j, u_j]``; the scan computes it in float64, summing columns in the
order ``j = 0 .. m-1``.  The background ``bg`` ``(4,)`` is an iid order-0 model, and the
p-value of a score ``s`` is ``Pv(s) = P(S(U) >= s)`` with ``U ~ bg^m``
(Giraud & Varre, TFM-CUDA, section 4; Touzet & Varre, TFM-Pvalue).

Scores closer to each other than ``tie`` (``>= 1e-9`` bits; it grows with ``m`` and the size
of the PWM entries so that it stays ~60x above the worst float64 summation error) are *ties*:
floating point cannot tell them apart reliably (``a+b+c`` and ``a+c+b`` may differ by an
ulp), so they are treated as one score.  ``Pv(s)`` below is ``P(S >= s - tie/2)``.

Algorithm (what is computed, and why it is exact)
-------------------------------------------------
1. **Integer lattice with certified error.**  For a step ``eps`` every column is mapped to
   integers ``k[j, x]``; the per-letter residual ``d[j, x] = pwm[j, x] - eps*k[j, x]`` is kept
   inside an arc of width < eps chosen per column (the shortest arc covering the four
   fractional parts of ``pwm[j]/eps``; at most 3/4 eps wide, about half eps on average, which
   beats plain nearest rounding).  With ``D_lo = sum_j min_x d``, ``D_hi = sum_j max_x d``
   (both widened by the float64 error bound ``fe`` and by ``tie/2``) every word satisfies
   ``eps*K(u) + D_lo <= S(u) <= eps*K(u) + D_hi``, whatever the summation order.  Hence, with
   ``G(k) = P(K >= k)``,

       G(ceil((s - D_lo)/eps))  <=  Pv(s)  <=  G(ceil((s - D_hi)/eps))        (*)

   a rigorous bracket (the DP and its cumulative sums add positive float64 numbers: relative
   error ~1e-11 at most, far below 1e-3).  ``G`` comes from the dynamic programme of section
   4.1 (one vectorised shift-and-add per distinct letter shift and column) on the integer
   scores, with TFM-Pvalue's pruning: a partial score that cannot reach the lowest cell of
   interest even with the best letters of the remaining columns is dropped (it can never
   contribute to ``G`` there), so the array only spans ``max score - threshold``.  The
   bracket width is the mass of about ``W/eps`` cells (``W = D_hi - D_lo``, ~ m*eps/2); a
   coarse full pass (eps >= 0.05) locates the threshold and the local decay rate of the tail,
   from which ``eps`` is set so that the bracket is ~0.3 rel_tol, then refined (x1/2..1/8)
   until the bracket at the threshold is within ``rel_tol``.
2. **Gaps.**  If the cells between the two indices of (*) are empty, the bracket collapses:
   the threshold sits in a certified gap of the attained scores and its p-value is exact.
3. **Exact tie classes (atoms, short or low-information motifs, the top of the tail).**  The
   words scoring at or above a bound ``lo`` are enumerated *exactly* by a sparse dynamic
   programme on an integer grid of 2^-56 times the score range (``np.unique`` merges equal
   partial sums - exact integer arithmetic, so words tied in real arithmetic merge exactly
   whatever the column order; the same lower-bound pruning keeps only partial scores that can
   still reach ``lo``).  The distinct final scores are grouped into tie classes (gaps > tie)
   and the tail mass of each class is exact (up to float64 summation).  It is tried first for
   the threshold with a state cap that keeps its cost below that of the lattice (so short
   and low-information matrices, where ties abound, are resolved exactly), again when the
   lattice bracket at the threshold stays loose (an atom or a near tie sits there), and for
   the top of the tail in the table (below).  Past its cap it gives up and the lattice
   result stands.

Threshold semantics (``pvalue_to_score``)
-----------------------------------------
``alpha`` is the smallest threshold with ``Pv(alpha) <= p`` (FIMO: hits have p-value <= p):

* *exact classes* (``exact_threshold=True``): ``alpha = a* - tie/2`` where ``a*`` is the
  lowest attained score (tie class) with ``Pv(a*) <= p``; the next lower attained score has
  ``Pv > p``.  ``alpha`` sits in a gap, at least ~tie/2 from every attained score, so the
  float summation order of the scan (column order, BLAS, GPU) cannot change the hit set.
  ``pvalue_bounds`` is a point.
* *lattice* (long, smooth matrices): ``alpha = eps*(k_u - 1) + D_hi + tie`` with ``k_u`` the
  lowest cell with ``G(k_u) <= p``; ``Pv(alpha) <= G(k_u) <= p`` is certified by (*) and
  ``pvalue_bounds`` (relative width <= rel_tol) holds the exact value.  Minimality holds up to
  the bracket: every threshold ``<= eps*(k_u-1) + D_lo`` has ``Pv > p``; thresholds in
  between change the p-value by at most the mass of ~2W/eps cells around ``alpha``.  Words
  that score within ~1e-12 of such an ``alpha`` may fall on either side depending on the
  summation order; the bracket accounts for them.
* *lattice, resolved* (most lattice cases): the words scoring inside the lattice's bracket
  ``(eps*(k_u-1) + D_lo, alpha]`` are listed by meet in the middle and ``alpha`` is fixed among them as for exact
  classes (:mod:`workers.distribution.band`; ``exact_threshold=True``, a point bracket); the tail table then starts
  below the new ``alpha``.  Where a half of the matrix keeps too many words, the lattice's ``alpha`` stands.
* ``reachable=False`` and ``alpha = +inf`` when even the best tie class has ``Pv > p``.

``pvalue`` reported is the upper end of the bracket: never smaller than the exact value, at
most ``rel_tol`` above it, and ``<= p``.

Score -> p-value (``score_to_pvalue``)
--------------------------------------
``Pv`` is a non-increasing step function of the score.  The table is built from certified
steps: lattice cells (value: the upper bound of (*)) from just below ``alpha`` up to the
first cell whose bracket is wider than 0.75 rel_tol; above it finer lattice levels on the
remaining top of the tail (each a new pruned DP, cheap because the span shrinks), and finally
the exact tie classes of the top, enumerated once they are affordable.  The steps are then
compressed into log-linear segments (upper envelopes; each step may be overestimated by the
part of ``rel_tol`` that its own bracket leaves free), so that every lookup is never below
the exact p-value and at most ``rel_tol`` above it.  A lookup is one ``searchsorted`` and an
``exp``; a typical table holds a few thousand segments (tens of kB; the lumpy top of long
matrices needs most of them).  If even the top could not be enumerated (``top_zero=False``,
seen only for a few very long low-information matrices) the top lookups are still upper
bounds, without the ``rel_tol`` guarantee.
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass

import numpy as np

from workers.distribution import exact_numba as _nb
from workers.distribution.band import band_threshold
from workers.distribution.lattice import Lattice, PreparedMatrix, integer_lattice, prepare_matrix
from workers.distribution.pvalue_table import PvalueTable
from workers.distribution.threshold import ScoreThreshold

__all__ = [
    "pvalue_to_score",
    "pvalues_to_scores",
    "score_to_pvalue",
    "pvalue_of_score",
    "score_distribution",
    "score_classes",
]

MIN_CAP = 40_000           # exact enumeration: always allow this many distinct states
CAP_RATIO = 5.0            # ... else about (lattice cells) / CAP_RATIO: the cost break-even of the numba kernels
                           # (docs/benchmarks.md, "Exact-enumeration caps re-tuned for the numba kernels")
EXACT_CAP = 400_000        # cap when resolving an atom at the threshold
BIG_CAP = 4_000_000        # last resort
MAX_LEVELS = 6
RHO_THR = 0.3              # lattice step: bracket ~ RHO_THR * rel_tol at the threshold
RHO_TAB = 0.75             # lattice cells certified for the table: bracket <= RHO_TAB * rel_tol
MIN_EPS = 2e-7
MAX_CELLS = 4_000_000
_SCRATCH_MAX = 1 << 20       # per-thread DP buffers kept up to this many cells (8 MB each)


# --------------------------------------------------------------------------------------------
# the dynamic programme on the integer lattice


def _dp(P: PreparedMatrix, lat: Lattice, k_cut: int | None):
    """Distribution of the integer score ``K`` on cells ``>= k_cut`` (all cells if None).

    Returns
    -------
    mass : ndarray of float64, shape (n,)
        ``P(K = lo + i)`` for every cell ``lo + i >= k_cut`` (exact: pruned partial scores
        could not reach ``k_cut``).
    lo : int
        Cell of ``mass[0]``.
    """
    rng = lat.kmax - lat.kmin
    order = np.argsort(rng, kind="stable")
    kmax_o = lat.kmax[order]
    rest = np.concatenate([np.cumsum(kmax_o[::-1])[::-1][1:], [0]]).astype(np.int64)
    # windows first, so that three buffers serve every column (no allocation per column:
    # Dask worker processes set MALLOC_TRIM_THRESHOLD_, which makes large allocations costly)
    wins = []
    lo, hi = 0, 0
    for i, j in enumerate(order):
        nlo = lo + int(lat.kmin[j])
        nhi = hi + int(lat.kmax[j])
        if k_cut is not None:
            nlo = max(nlo, int(k_cut) - int(rest[i]))
        if nlo > nhi:
            return np.zeros(0), int(k_cut)
        wins.append((nlo, nhi))
        lo, hi = nlo, nhi
    size = max(b - a + 1 for a, b in wins)
    ks, ps, nk = _nb.columns(P.allowed, P.prob, lat.k)
    bufs = _scratch(2, size)
    w = np.array(wins, dtype=np.int64)
    arr = _nb.dp(order.astype(np.int64), w[:, 0].copy(), w[:, 1].copy(), ks, ps, nk, bufs[0], bufs[1])
    return arr, int(w[-1, 0])


_local = threading.local()


def _scratch(k: int, size: int) -> list[np.ndarray]:
    """``k`` float64 work arrays of ``size`` (views of per-thread buffers, reused).

    Reuse matters in Dask worker processes: the nanny sets ``MALLOC_TRIM_THRESHOLD_``, which
    turns every large allocation into a fresh mmap whose pages fault in when first written.
    Buffers above ``_SCRATCH_MAX`` elements are not kept.
    """
    pool = getattr(_local, "pool", None)
    if pool is None or len(pool) < k or pool[0].size < size:
        if size > _SCRATCH_MAX:
            return [np.empty(size) for _ in range(k)]
        cap = max(size, 1 << 16)
        pool = [np.empty(cap) for _ in range(max(k, len(pool) if pool else 0))]
        _local.pool = pool
    return [b[:size] for b in pool[:k]]


class _Tail:
    """``G(k) = P(K >= k)`` for cells ``k >= lo`` (``G = 0`` above the top cell)."""

    def __init__(self, mass: np.ndarray, lo: int):
        self.lo = lo
        n = mass.size
        self.g = _nb.tail_sums(mass)
        self.n = n

    def __call__(self, k):
        idx = np.asarray(k, dtype=np.int64) - self.lo
        if np.any(idx < 0):
            raise IndexError("lattice cell below the computed range")
        return self.g[np.minimum(idx, self.n)]

    def first_le(self, p: float) -> int:
        """Lowest cell ``k`` with ``G(k) <= p``."""
        i = int(np.searchsorted(-self.g, -p, side="left"))
        return self.lo + i


# --------------------------------------------------------------------------------------------
# exact tie classes


@dataclass
class _Classes:
    lo: float              # every word scoring >= lo (float, scan order) is enumerated
    vmin: np.ndarray       # (n,) lowest score of each class, ascending
    vmax: np.ndarray       # (n,) highest score of each class
    mass: np.ndarray       # (n,)
    tail: np.ndarray       # (n,) P(S >= vmin_i) restricted to words >= lo

    @property
    def total(self) -> float:
        return float(self.tail[0]) if self.tail.size else 0.0


def _exact_classes(P: PreparedMatrix, lo: float, cap: int) -> _Classes | None:
    """Enumerate the distinct scores ``>= lo`` exactly (None past ``cap`` states)."""
    e = math.ceil(math.log2(P.abs_sum + 1.0))
    q = 2.0 ** (e - 56)
    eq = P.fe + P.m * q
    lo_q = math.floor((lo - eq) / q)
    Q, order, rest = _nb.classes_setup(P.pwm, P.allowed, q)
    ks, ps, nk = _nb.columns(P.allowed, P.prob, Q)
    vals, pr, status = _nb.classes(order, rest, ks, ps, nk, np.int64(lo_q), np.int64(cap))
    if status == 1:
        return None
    if status == 2:
        return _Classes(lo, *(np.zeros(0, dtype=np.float64) for _ in range(4)))
    vmin, vmax, mass, rtail = _nb.classes_finish(vals, pr, P.tie / q, q)
    return _Classes(lo, vmin, vmax, mass, rtail[::-1])


def score_classes(pwm, background, lo: float, cap: int = 2_000_000):
    """Exact distinct scores (tie classes) ``>= lo`` and their probabilities.

    Parameters
    ----------
    pwm : ndarray, shape (m, 4)
    background : ndarray, shape (4,)
    lo : float
        Lower score bound.
    cap : int
        Give up past this many distinct partial scores.

    Returns
    -------
    vmin, vmax, mass : ndarray of float64, shape (n,)
        Lowest and highest score of each tie class (ascending) and its probability.
        ``None`` when ``cap`` was exceeded.
    """
    P = prepare_matrix(pwm, background)
    c = _exact_classes(P, lo, cap)
    if c is None:
        return None
    return c.vmin, c.vmax, c.mass


# --------------------------------------------------------------------------------------------
# tail table


def _segments(x: np.ndarray, y: np.ndarray, x_first: float, kappa):
    """Compress a decreasing step function into log-linear upper envelopes.

    Parameters
    ----------
    x : ndarray of float64, shape (n,)
        Ascending breakpoints; the step ``i`` covers scores in ``(x[i-1], x[i]]``
        (``(x_first, x[0]]`` for ``i = 0``).
    y : ndarray of float64, shape (n,)
        ``log`` of the p-value upper bound on step ``i`` (non-increasing, finite).
    x_first : float
        Exclusive lower edge of the first step.
    kappa : float or ndarray of float64, shape (n,)
        Allowed relative excess (per step).

    Returns
    -------
    x0, a, b : ndarray of float64, shape (n_seg,)
        Segment ``j`` covers ``(x0[j], x0[j+1]]`` with ``A(s) = a[j] + b[j]*(s - x0[j])``;
        on every step ``i`` inside it ``y[i] <= A(s) <= y[i] + log1p(kappa)``.
    """
    lk = np.log1p(np.broadcast_to(np.asarray(kappa, dtype=np.float64), (x.size,))) * 0.999
    return _segments_lk(x, y, x_first, lk)


def _segments_lk(x: np.ndarray, y: np.ndarray, x_first: float, lk: np.ndarray):
    """:func:`_segments` with the allowed log excess per step ``lk`` given (``log1p(kappa) * 0.999``)."""
    x0, a, b = _nb.segments(np.ascontiguousarray(x, dtype=np.float64), np.ascontiguousarray(y, dtype=np.float64),
                            float(x_first), np.ascontiguousarray(lk, dtype=np.float64), 4096)
    return x0, a + 1e-12, b


def _class_steps(cl: _Classes, tie: float, above: float):
    """Breakpoints and log tails of the exact classes whose step lies above ``above``."""
    x = cl.vmax + 0.5 * tie
    keep = x > above
    return x[keep], np.log(cl.tail[keep])


# --------------------------------------------------------------------------------------------
# public API


def _unreachable(p: float, P: PreparedMatrix, exact: bool, rel_tol: float) -> ScoreThreshold:
    return ScoreThreshold(math.inf, 0.0, (0.0, 0.0), False, requested_pvalue=p,
                          rel_tol=rel_tol, exact_threshold=exact, max_score=P.max_score,
                          tie=P.tie)


def _coarse(P: PreparedMatrix):
    eps_c = max(0.05, (P.max_score - P.min_score) / 4096.0)
    lat = integer_lattice(P, eps_c)
    mass, lo = _dp(P, lat, None)
    return lat, _Tail(mass, lo)


def _from_exact(p: float, P: PreparedMatrix, cl: _Classes, rel_tol: float,
                table: bool) -> ScoreThreshold:
    """Threshold and table from classes that cover the threshold (``cl.total > p``)."""
    i = int(np.searchsorted(-cl.tail, -p, side="left"))
    if i >= cl.tail.size:
        return _unreachable(p, P, True, rel_tol)
    alpha = float(cl.vmin[i]) - 0.5 * P.tie
    pv = float(cl.tail[i])
    if not table:
        return ScoreThreshold(alpha, pv, (pv, pv), True, requested_pvalue=p, rel_tol=rel_tol,
                              exact_threshold=True, max_score=P.max_score, tie=P.tie,
                              exact_from=float(cl.lo) + 0.5 * P.tie, has_table=False,
                              score_error=P.tie)
    j = max(i - 2, 1)            # a little below alpha; never the (possibly cut) lowest class
    x = cl.vmax[j:] + 0.5 * P.tie
    y = np.log(cl.tail[j:])
    x0, a, b = _segments(x, y, float(cl.vmax[j - 1]) + 0.5 * P.tie, rel_tol)
    return ScoreThreshold(alpha, pv, (pv, pv), True, requested_pvalue=p, rel_tol=rel_tol,
                          exact_threshold=True, max_score=P.max_score, tie=P.tie,
                          exact_from=float(cl.lo) + 0.5 * P.tie, seg_x0=x0, seg_a=a, seg_b=b,
                          table_top=float(x[-1]), score_error=P.tie)


def pvalue_to_score(pwm: np.ndarray, background: np.ndarray, pvalue: float,
                    rel_tol: float = 1e-3, *, table: bool = True,
                    exact: bool = True) -> ScoreThreshold:
    """Smallest score threshold ``alpha`` with ``Pv(alpha) <= pvalue`` (FIMO semantics).

    Parameters
    ----------
    pwm : ndarray of float64, shape (m, 4)
        Log-odds matrix in bits, columns A C G T.  ``-inf`` entries are letters that never
        match.
    background : ndarray of float64, shape (4,)
        Background letter probabilities (iid, order 0).
    pvalue : float
        Requested p-value ``p`` (> 0).
    rel_tol : float
        Relative precision of the reported p-values (default 1e-3).
    table : bool
        Build the tail table for ``score_to_pvalue`` (default).  False computes the
        threshold only (about twice as fast; ``score_to_pvalue`` then refuses the result).
    exact : bool
        Try the exact tie classes for the threshold (default).  False forces the certified
        lattice path for the threshold (tests, comparisons).

    Returns
    -------
    ScoreThreshold
        Threshold, certified p-value bracket and the tail table for ``score_to_pvalue``.
        See the module docstring for the exact semantics of ``alpha``.
    """
    if not 0.0 < rel_tol < 0.5:
        raise ValueError("rel_tol must lie in (0, 0.5)")
    return _pvalue_to_score(prepare_matrix(pwm, background), float(pvalue), rel_tol, table, exact, {})


def pvalues_to_scores(pwm: np.ndarray, background: np.ndarray, pvalues, rel_tol: float = 1e-3, *,
                      table: bool = True, exact: bool = True) -> list[ScoreThreshold]:
    """``pvalue_to_score`` at several p-values of one matrix, sharing work between them.

    The coarse lattice pass is done once; without tables, the exact tie classes enumerated for the
    largest p-value (the lowest threshold) also answer the smaller ones (the classes above a bound and
    their tails do not depend on the bound).  Results are in the order of ``pvalues``; each equals
    ``pvalue_to_score`` at that p-value except, when ``table=False``, ``exact_from`` (where the shared
    enumeration started).

    Parameters
    ----------
    pwm : ndarray, shape (m, 4), float
    background : ndarray, shape (4,)
    pvalues : sequence of float
    rel_tol : float
    table : bool
        Build each tail table (for ``score_to_pvalue``).
    exact : bool
        Try the exact tie classes first (as ``pvalue_to_score``).

    Returns
    -------
    list of ScoreThreshold
        One per p-value, in the order of ``pvalues``.
    """
    if not 0.0 < rel_tol < 0.5:
        raise ValueError("rel_tol must lie in (0, 0.5)")
    P = prepare_matrix(pwm, background)
    ps = [float(p) for p in pvalues]
    memo: dict = {}
    out: list = [None] * len(ps)
    for i in sorted(range(len(ps)), key=lambda k: -ps[k]):
        out[i] = _pvalue_to_score(P, ps[i], rel_tol, table, exact, memo)
    return out


def _best_word_mass(P: PreparedMatrix) -> float:
    """Probability that every column shows one of its best letters (a lower bound of Pv(max score))."""
    cmax = np.where(P.allowed, P.pwm, -np.inf).max(axis=1)
    return float(np.prod(np.where(P.allowed & (P.pwm == cmax[:, None]), P.prob, 0.0).sum(axis=1)))


def _pvalue_to_score(P: PreparedMatrix, p: float, rel_tol: float, table: bool, exact: bool,
                     memo: dict) -> ScoreThreshold:
    if not p > 0.0 or math.isnan(p):
        raise ValueError("pvalue must be > 0")
    if P.dead:
        return _unreachable(p, P, True, rel_tol)
    if p >= 1.0:
        return ScoreThreshold(-math.inf, 1.0, (1.0, 1.0), True, requested_pvalue=p,
                              rel_tol=rel_tol, exact_threshold=True, max_score=P.max_score,
                              tie=P.tie)
    if "best" not in memo:
        memo["best"] = _best_word_mass(P)
    if memo["best"] > p:
        # even the best tie class holds more than p: unreachable (certain, no enumeration needed)
        return _unreachable(p, P, True, rel_tol)
    s_low, eps, span = _first_step(P, p, rel_tol, memo)

    # exact tie classes first, while they cost less than the lattice would
    if exact:
        prev = memo.get("classes")
        if not table and prev is not None and prev.lo <= s_low and prev.total > p:
            return _from_exact(p, P, prev, rel_tol, table)
        cl = _exact_classes(P, s_low, max(MIN_CAP, int(span / eps / CAP_RATIO)))
        if cl is not None and cl.total > p:
            memo["classes"] = cl
            return _from_exact(p, P, cl, rel_tol, table)
    found = _lattice_threshold(P, p, rel_tol, table, exact, memo, s_low, eps, span)
    if isinstance(found, ScoreThreshold):
        return found
    lat, G, eps, ku, alpha, lo_b, hi_b = found
    bounds = (lo_b, hi_b)
    score_error = alpha - (eps * (ku - 1) + lat.d_lo)   # thresholds <= eps*(ku-1) + d_lo have Pv > p
    band = band_threshold(P, p, eps * (ku - 1) + lat.d_lo, alpha) if exact else None
    if band is not None and (table and eps * (G.lo - 1) + lat.d_hi >= band[0]):
        band = None                                  # (the lattice's cells do not reach down to it)
    if band is not None:                            # the bracket resolved: the exact threshold
        alpha, hi_b = band
        bounds, score_error = (hi_b, hi_b), P.tie
    if not table:
        return ScoreThreshold(alpha, hi_b, bounds, True, requested_pvalue=p, rel_tol=rel_tol,
                              exact_threshold=band is not None, max_score=P.max_score, tie=P.tie,
                              eps=eps, has_table=False, score_error=score_error)
    return _tail_table(P, p, rel_tol, lat, G, eps, ku, alpha, bounds, score_error, band is not None)


def _first_step(P: PreparedMatrix, p: float, rel_tol: float, memo: dict) -> tuple:
    """From the coarse lattice (computed once per matrix, kept in ``memo``): ``(s_low, eps, span)``, a score
    certainly below the threshold, the lattice step for the bracket asked for, and the span above ``s_low``."""
    if "coarse" not in memo:
        memo["coarse"] = _coarse(P)
    lat_c, G_c = memo["coarse"]
    ku = G_c.first_le(p)
    s_low = lat_c.eps * (ku - 1) + lat_c.d_lo        # Pv(s_low) >= G_c(ku-1) > p

    # lattice step from the local decay rate of the tail (per bit)
    one = max(1, int(round(1.0 / lat_c.eps)))
    g1 = float(G_c(max(ku - one, G_c.lo)))
    g2 = float(G_c(ku + one))
    lam = math.log(g1 / g2) / 2.0 if g2 > 0 else math.log(max(g1, 1e-300) / p) + 1.0
    lam = min(max(lam, 0.3), 8.0)
    eps = RHO_THR * rel_tol / (lam * (0.5 * P.m + 0.5))
    span = P.max_score - s_low
    eps = min(max(eps, MIN_EPS, span / MAX_CELLS), lat_c.eps / 2)
    return s_low, eps, span


def _lattice_threshold(P: PreparedMatrix, p: float, rel_tol: float, table: bool, exact: bool, memo: dict,
                       s_low: float, eps: float, span: float):
    """The threshold on lattices refined until its bracket holds: ``(lat, G, eps, ku, alpha, lo_b, hi_b)``;
    or the ScoreThreshold itself where exact classes resolve it (an atom or a near tie at the threshold) or
    the p-value cannot be reached."""
    tried_exact = not exact
    for _it in range(8):
        prev = memo.get("lattice") if (_it == 0 and not table) else None
        if (prev is not None and prev[0].eps <= 2.0 * eps
                and prev[1].lo <= math.floor((s_low - prev[0].d_hi) / prev[0].eps) - 2):
            # the lattice of a larger p-value of this matrix covers this threshold: try it first
            lat, G = prev
            eps = lat.eps
        else:
            lat = integer_lattice(P, eps)
            k_cut = math.floor((s_low - lat.d_hi) / eps) - 2
            mass, lo = _dp(P, lat, k_cut)
            G = _Tail(mass, lo)
            if not table:
                memo["lattice"] = (lat, G)
        ku = G.first_le(p)
        alpha = eps * (ku - 1) + lat.d_hi + P.tie
        hi_b = float(G(ku))
        lo_b = float(G(math.ceil((alpha - lat.d_lo) / eps)))
        thr_ok = hi_b <= lo_b * (1.0 + 0.95 * rel_tol)
        if thr_ok or eps <= max(MIN_EPS, span / MAX_CELLS) * 1.01:
            break
        if not tried_exact:
            # an atom or a near tie sits at the threshold: resolve it exactly if affordable
            tried_exact = True
            cl = _exact_classes(P, eps * (ku - 1) + lat.d_lo, EXACT_CAP)
            if cl is not None and cl.total > p:
                return _from_exact(p, P, cl, rel_tol, table)
        ratio = hi_b / lo_b - 1.0 if lo_b > 0 else math.inf
        shrink = 4.0 if not math.isfinite(ratio) else min(8.0, max(2.0, 1.5 * ratio / rel_tol))
        eps = max(eps / shrink, MIN_EPS, span / MAX_CELLS)

    if hi_b == 0.0 or (exact and not thr_ok):
        # the top lattice cell alone holds more than p, or the bracket stayed loose:
        # last resort, the exact classes with a large cap
        cl = _exact_classes(P, eps * (ku - 1) + lat.d_lo, BIG_CAP)
        if cl is not None and cl.total > p:
            return _from_exact(p, P, cl, rel_tol, table)
        if hi_b == 0.0:
            return _unreachable(p, P, False, rel_tol)
    return lat, G, eps, ku, alpha, lo_b, hi_b


def _tail_table(P: PreparedMatrix, p: float, rel_tol: float, lat: Lattice, G, eps: float, ku: int,
                alpha: float, bounds: tuple, score_error: float, exact_alpha: bool = False) -> ScoreThreshold:
    """The threshold with its tail table: lattice levels while the bracket (*) is tight, exact classes above.
    ``exact_alpha``: ``alpha`` was resolved inside the lattice's bracket (:mod:`workers.distribution.band`), maybe
    below its cell ``ku``: the table starts below it (its lookups are capped at ``bounds[1]`` from ``alpha`` up)."""
    hi_b = bounds[1]
    xs, ys, ks = [], [], []
    c_start = max(min(ku - 3, math.floor((alpha - lat.d_hi) / eps) - 1), G.lo)
    x_first = eps * (c_start - 1) + lat.d_hi
    cl = None
    prev_sx = -math.inf
    for level in range(MAX_LEVELS):
        W = lat.d_hi - lat.d_lo
        w = math.ceil(W / eps) + 1
        i0 = c_start - G.lo
        upper = G.g[i0:]                          # G(c) for c = c_start .. top + 1
        # first cell (at or above alpha) whose bracket G(c) / G(c + w) is too wide
        ib = _nb.first_loose(upper, w, 1.0 + RHO_TAB * rel_tol, max(0, ku - c_start))
        if ib > 0:
            x, y, lk = _nb.lattice_steps(upper, w, ib, eps, c_start, lat.d_hi, rel_tol, 0.98)
            xs.append(x)
            ys.append(y)
            ks.append(lk)
        cb = c_start + ib
        s_x = eps * (cb - 1) + lat.d_hi
        lower_ib = float(upper[ib + w]) if ib + w < upper.size else 0.0     # G(cb + w)
        ratio = float(upper[ib]) / lower_ib - 1.0 if lower_ib > 0 else math.inf
        shrink = 4.0 if not math.isfinite(ratio) else min(8.0, max(2.0, 2.0 * ratio / (RHO_TAB * rel_tol)))
        eps_next = max(eps / shrink, MIN_EPS, (P.max_score - s_x) / MAX_CELLS)
        # a level that hardly moved the exact part up will not be followed by a better one
        stalled = s_x - prev_sx < 0.1 * (P.max_score - prev_sx)
        last = level == MAX_LEVELS - 1 or eps_next >= eps or stalled
        prev_sx = s_x
        cap = BIG_CAP if last else max(MIN_CAP, int((P.max_score - s_x) / eps_next / CAP_RATIO))
        cl = _exact_classes(P, s_x - P.tie, cap)
        if cl is not None or last:
            break
        # next, finer lattice level on the scores above s_x
        eps = eps_next
        lat = integer_lattice(P, eps)
        k_cut = math.floor((s_x - lat.d_hi) / eps) - 2
        mass, lo = _dp(P, lat, k_cut)
        G = _Tail(mass, lo)
        c_start = math.floor((s_x - lat.d_hi) / eps) + 1   # first cell above s_x
        ku = c_start
    if cl is not None:
        cx, cy = _class_steps(cl, P.tie, s_x)
        xs.append(cx)
        ys.append(cy)
        ks.append(np.full(cx.size, math.log1p(rel_tol * 0.98) * 0.999))
        exact_from = s_x
    else:
        exact_from = math.inf
    x = np.concatenate(xs)
    y = np.concatenate(ys)
    x0, a, b = _segments_lk(x, y, x_first, np.concatenate(ks))
    return ScoreThreshold(alpha, hi_b, bounds, True, requested_pvalue=p, rel_tol=rel_tol,
                          exact_threshold=exact_alpha, max_score=P.max_score, tie=P.tie, eps=eps,
                          exact_from=exact_from, seg_x0=x0, seg_a=a, seg_b=b,
                          table_top=float(x[-1]), top_zero=cl is not None, score_error=score_error)


def score_to_pvalue(table: ScoreThreshold, scores) -> np.ndarray:
    """P-values of hit scores, by lookup in the tail table of ``pvalue_to_score``.

    Parameters
    ----------
    table : ScoreThreshold
        From ``pvalue_to_score``.
    scores : array_like of float, any shape
        Scores, normally ``>= table.threshold``.

    Returns
    -------
    ndarray of float64, same shape as ``scores``
        Upper bounds of ``Pv(score)``, at most ``table.rel_tol`` above the exact value (never
        below it) and, from ``alpha`` up, at most ``table.pvalue`` (so never above the p-value asked for); 0 above
        the best attainable score; ``nan`` below the range of the table
        (a little under ``alpha``), and everywhere for an unreachable motif.
    """
    if not table.has_table:
        raise ValueError("this ScoreThreshold was computed with table=False")
    s = np.asarray(scores, dtype=np.float64)
    flat = s.reshape(-1)        # the scans' own lookup (PvalueTable, as the GPU's pvalue_of): the same bits
    return PvalueTable.from_thresholds([table]).lookup(np.zeros(flat.size, np.int32), flat).reshape(s.shape)


def pvalue_of_score(pwm: np.ndarray, background: np.ndarray, score: float,
                    rel_tol: float = 1e-3) -> tuple[float, tuple[float, float]]:
    """Exact p-value of one score.

    Parameters
    ----------
    pwm : ndarray, shape (m, 4)
    background : ndarray, shape (4,)
    score : float
    rel_tol : float

    Returns
    -------
    pvalue : float
        Upper end of the bracket (never below the exact ``Pv(score)``).
    bounds : tuple of float
        Certified ``(low, high)`` bracket; ``high <= low*(1+rel_tol)`` (a point when the
        exact classes were enumerated).
    """
    P = prepare_matrix(pwm, background)
    s = float(score)
    if P.dead or s - 0.5 * P.tie > P.max_score:
        return 0.0, (0.0, 0.0)
    if s - 0.5 * P.tie <= P.min_score:
        return 1.0, (1.0, 1.0)
    lat_c, G_c = _coarse(P)
    eps = min(lat_c.eps / 2, RHO_THR * rel_tol / (0.5 * P.m + 0.5))
    span = P.max_score - s
    eps = max(eps, MIN_EPS, span / MAX_CELLS)
    cl = _exact_classes(P, s - 0.5 * P.tie, max(MIN_CAP, int(span / eps / CAP_RATIO)))
    if cl is not None:
        return cl.total, (cl.total, cl.total)
    best = (1.0, (0.0, 1.0))
    for it in range(8):
        lat = integer_lattice(P, eps)
        k_hi = math.ceil((s - lat.d_hi) / eps)
        k_lo = math.ceil((s - lat.d_lo) / eps)
        mass, lo = _dp(P, lat, k_hi)
        G = _Tail(mass, lo)
        hi_b, lo_b = float(G(k_hi)), float(G(k_lo))
        best = (hi_b, (lo_b, hi_b))
        if hi_b <= lo_b * (1.0 + rel_tol):
            return best
        if it == 0:
            cl = _exact_classes(P, s - 0.5 * P.tie, EXACT_CAP)
            if cl is not None:
                return cl.total, (cl.total, cl.total)
        if eps <= max(MIN_EPS, span / MAX_CELLS) * 1.01:
            break
        ratio = hi_b / lo_b - 1.0 if lo_b > 0 else math.inf
        shrink = 4.0 if not math.isfinite(ratio) else min(8.0, max(2.0, 1.5 * ratio / rel_tol))
        eps = max(eps / shrink, MIN_EPS, span / MAX_CELLS)
    cl = _exact_classes(P, s - 0.5 * P.tie, BIG_CAP)
    if cl is not None:
        return cl.total, (cl.total, cl.total)
    return best


def score_distribution(pwm: np.ndarray, background: np.ndarray, eps: float):
    """Full score distribution on the rounded lattice of step ``eps`` (nearest rounding).

    Parameters
    ----------
    pwm : ndarray, shape (m, 4)
    background : ndarray, shape (4,)
    eps : float
        Lattice step (bits).

    Returns
    -------
    probs : ndarray of float64, shape (n,)
        ``probs[i] = P(K = i + k0)`` where ``K = sum_j round(pwm[j, u_j]/eps)``; the score of
        cell ``i`` is ``origin + i*eps`` and differs from the real score of its words by at
        most ``sum_j max_x |pwm[j,x] - eps*round(pwm[j,x]/eps)|``.  Mass of letters that can
        never occur (``bg = 0`` or ``-inf`` entries) is absent.
    origin : float
        Score of cell 0.
    """
    P = prepare_matrix(pwm, background)
    if P.dead:
        return np.zeros(0), math.nan
    lat = integer_lattice(P, float(eps), nearest=True)
    mass, lo = _dp(P, lat, None)
    return mass.copy(), lo * float(eps)
