"""Exact score distributions, p-values and score thresholds of PWMs (NumPy only).

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
   ``eps*K(u) + D_lo <= S(u) <= eps*K(u) + D_hi``.  Hence, with ``G(k) = P(K >= k)``,

       G(ceil((s - D_lo)/eps))  <=  Pv(s)  <=  G(ceil((s - D_hi)/eps))        (*)

   a rigorous bracket.  ``G`` comes from the dynamic programme of section 4.1 (one vectorised
   shift-and-add per letter and column) on the integer scores, with TFM-Pvalue's pruning:
   a partial score that cannot reach the lowest cell of interest even with the best letters in
   the remaining columns is dropped (it can never contribute to ``G`` there), so the
   array only spans ``max score - threshold``.  Columns are processed by increasing range.
   The bracket width is the mass of about ``W/eps`` cells (``W = D_hi - D_lo``); ``eps`` is
   chosen from a coarse pass (eps ~ 0.05) so that it is ~half of ``rel_tol`` and refined
   (/4) until the bracket at the threshold is within ``rel_tol``.
2. **Gaps.**  If the cells between the two indices of (*) are empty, the bracket collapses:
   the threshold sits in a certified gap of the attained scores and its p-value is exact.
3. **Exact score classes (ties, atoms, short motifs, the top of the distribution).**  Where
   the lattice bracket is not tight (a large atom - a class of tied words - sits inside the
   band, or the tail is made of a few isolated scores), the words scoring at or above a
   bound ``lo`` are enumerated *exactly* by a sparse dynamic programme on a 2^-50-fine
   integer grid (``np.unique`` merges equal partial sums, which is exact integer arithmetic,
   so tied words merge exactly; the same lower-bound pruning keeps only partial scores that
   can still reach ``lo``).  Distinct final scores are grouped into tie classes (gaps >= tie);
   the tail mass of each class is then exact (up to float64 summation, ~1e-13 relative).
   This runs when its estimated size is small (short or low-information motifs), and always
   for the top of the distribution, where the lattice bracket of ``score_to_pvalue`` would be
   too wide.  It gives up (and the lattice result stands) past ``cap`` distinct partial scores.

Threshold semantics (``pvalue_to_score``)
-----------------------------------------
``alpha`` is the smallest threshold with ``Pv(alpha) <= p`` (FIMO: hits have p-value <= p):

* *exact classes* (``exact_threshold=True``): ``alpha = a* - tie/2`` where ``a*`` is the
  lowest attained score (tie class) with ``Pv(a*) <= p``; the next lower attained score has
  ``Pv > p``.  ``alpha`` is at least ~tie/2 away from every attained score, so the float
  summation order of the scan cannot change the hit set.  ``pvalue_bounds`` is a point.
* *lattice* (long, smooth motifs): ``alpha = eps*(k_u - 1) + D_hi + tie`` with ``k_u`` the
  lowest cell with ``G(k_u) <= p``; ``Pv(alpha) <= G(k_u) <= p`` is certified by (*) and
  ``pvalue_bounds`` (relative width <= rel_tol) holds the exact value.  Minimality holds up to
  the bracket: every threshold ``<= eps*(k_u-1) + D_lo`` has ``Pv > p``; lower thresholds in
  between change the p-value by at most the mass of ~2W/eps cells around ``alpha``.
* ``reachable=False`` and ``alpha = +inf`` when even the best tie class has ``Pv > p``.

``pvalue`` reported is the upper end of the bracket: never smaller than the exact value, at
most ``rel_tol`` above it, and ``<= p``.

Score -> p-value (``score_to_pvalue``)
--------------------------------------
The table stores the exact classes above ``exact_from`` (grouped so that the tail varies by at
most a factor ``1 + rel_tol/3`` inside a group) and, below it, the upper bound of (*) as
log-linear segments over the lattice cells, each segment an upper bound of ``G`` that is at
most ``1 + kappa`` above it (``kappa`` chosen so that lattice and compression errors together
stay within ``rel_tol``).  Lattice cells are only used where (*) is certified tight; every
cell above the first loose one belongs to the exact part.  A lookup is one ``searchsorted``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields

import numpy as np

__all__ = [
    "ScoreThreshold",
    "pvalue_to_score",
    "score_to_pvalue",
    "pvalue_of_score",
    "score_distribution",
    "score_classes",
]

_U = 2.0**-53
TIE_MIN = 1e-9
EXACT_GATE_WORDS = 3.0e4   # try the exact enumeration first when the tail holds fewer words
EXACT_CAP = 400_000        # give the exact enumeration up past this many distinct states
TOP_CAP = 400_000
MIN_EPS = 2e-7
MAX_CELLS = 20_000_000


def _empty_f() -> np.ndarray:
    return np.zeros(0, dtype=np.float64)


def _empty_i() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


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
    exact_threshold : bool
        True when ``alpha`` was fixed on the exact tie classes (minimal among attained scores);
        False when it comes from the certified lattice bracket (see module docstring).
    max_score : float
        Best attainable score.
    tie : float
        Scores closer than this are one score.
    eps, d_hi : float
        Lattice step and upper residual offset of the lattice part of the table
        (cell of a score ``s``: ``ceil((s - d_hi)/eps)``).
    seg_start : ndarray of int64, shape (n_seg,)
        First lattice cell of each log-linear segment (ascending).
    seg_a, seg_b : ndarray of float64, shape (n_seg,)
        ``log Pv`` upper bound at ``seg_start`` and its slope per cell (``<= 0``).
    lattice_from : float
        Lowest score the lattice part answers (``nan`` below it).
    exact_from : float
        Scores strictly above this are answered by the exact part.
    exact_edges : ndarray of float64, shape (n_grp,)
        Upper score edge of each group of exact tie classes (ascending).
    exact_tails : ndarray of float64, shape (n_grp,)
        ``Pv`` of the lowest class of each group.
    scores_certified : bool
        False only if the exact top enumeration had to be given up (then lookups near the top
        are upper bounds without the ``rel_tol`` guarantee).
    """

    threshold: float
    pvalue: float
    pvalue_bounds: tuple[float, float]
    reachable: bool
    requested_pvalue: float = math.nan
    exact_threshold: bool = False
    max_score: float = math.nan
    tie: float = TIE_MIN
    eps: float = math.nan
    d_hi: float = math.nan
    seg_start: np.ndarray = field(default_factory=_empty_i)
    seg_a: np.ndarray = field(default_factory=_empty_f)
    seg_b: np.ndarray = field(default_factory=_empty_f)
    lattice_from: float = math.inf
    exact_from: float = math.inf
    exact_edges: np.ndarray = field(default_factory=_empty_f)
    exact_tails: np.ndarray = field(default_factory=_empty_f)
    scores_certified: bool = True

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
        """Size of the tail table arrays in bytes."""
        return sum(getattr(self, n).nbytes for n in
                   ("seg_start", "seg_a", "seg_b", "exact_edges", "exact_tails"))


# --------------------------------------------------------------------------------------------
# preparation


@dataclass
class _Prep:
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


def _prepare(pwm, background) -> _Prep:
    w = np.asarray(pwm, dtype=np.float64)
    if w.ndim != 2 or w.shape[1] != 4 or w.shape[0] < 1:
        raise ValueError(f"pwm must have shape (m, 4), m >= 1, not {w.shape}")
    if np.isnan(w).any() or np.isposinf(w).any():
        raise ValueError("pwm holds NaN or +inf")
    bg = np.asarray(background, dtype=np.float64).reshape(-1)
    if bg.shape != (4,) or not np.isfinite(bg).all() or (bg < 0).any():
        raise ValueError("background must be 4 finite non-negative probabilities")
    tot = bg.sum()
    if not abs(tot - 1.0) < 1e-6:
        raise ValueError(f"background must sum to 1 (sums to {tot})")
    bg = bg / tot
    m = w.shape[0]
    allowed = np.isfinite(w) & (bg > 0)[None, :]
    wz = np.where(allowed, w, 0.0)
    prob = np.where(allowed, bg[None, :], 0.0)
    dead = bool((~allowed.any(axis=1)).any())
    cmax = np.where(allowed, wz, -np.inf).max(axis=1)
    cmin = np.where(allowed, wz, np.inf).min(axis=1)
    if dead:
        max_score = min_score = -math.inf
        abs_sum = float(np.abs(wz).max(axis=1).sum())
    else:
        max_score = 0.0
        min_score = 0.0
        for j in range(m):  # column order, like the scan
            max_score += float(cmax[j])
            min_score += float(cmin[j])
        abs_sum = float(np.maximum(np.abs(cmax), np.abs(cmin)).sum())
    fe = 8.0 * (m + 2) * _U * (abs_sum + 1.0)
    tie = max(TIE_MIN, 64.0 * fe)
    nz = bg[bg > 0]
    log_words = float(m * -(nz * np.log(nz)).sum())
    return _Prep(wz, prob, allowed, m, max_score, min_score, abs_sum, fe, tie, log_words, dead)


# --------------------------------------------------------------------------------------------
# integer lattice and its dynamic programme


@dataclass
class _Lattice:
    eps: float
    k: np.ndarray          # (m, 4) int64 (0 where disallowed)
    d_lo: float            # widened: eps*K + d_lo <= S_float - tie/2
    d_hi: float            # widened: eps*K + d_hi >= S_float + tie/2
    kmin: np.ndarray       # (m,)
    kmax: np.ndarray       # (m,)


def _lattice(P: _Prep, eps: float, nearest: bool = False) -> _Lattice:
    y = P.pwm / eps
    if nearest:
        k = np.rint(y)
    else:
        f = y - np.floor(y)
        f = np.where(P.allowed, f, np.nan)
        fs = np.sort(f, axis=1)                      # NaN last
        n = P.allowed.sum(axis=1)
        rows = np.arange(P.m)
        last = fs[rows, np.maximum(n - 1, 0)]
        inner = np.nan_to_num(np.diff(fs, axis=1), nan=-1.0)   # gap between i and i+1
        wrap = fs[:, 0] + 1.0 - last
        gaps = np.concatenate([inner, wrap[:, None]], axis=1)
        gi = np.argmax(gaps, axis=1)
        arc = 1.0 - gaps[rows, gi]
        start = np.where(gi == 3, fs[:, 0], fs[rows, np.minimum(gi + 1, 3)])
        center = start + 0.5 * arc
        k = np.rint(y - center[:, None])
    k = np.where(P.allowed, k, 0.0).astype(np.int64)
    d = P.pwm - eps * k
    dlo = float(np.where(P.allowed, d, np.inf).min(axis=1).sum())
    dhi = float(np.where(P.allowed, d, -np.inf).max(axis=1).sum())
    slack = P.fe + 0.5 * P.tie
    kmin = np.where(P.allowed, k, np.iinfo(np.int64).max).min(axis=1)
    kmax = np.where(P.allowed, k, np.iinfo(np.int64).min).max(axis=1)
    return _Lattice(eps, k, dlo - slack, dhi + slack, kmin, kmax)


def _columns(P: _Prep, k: np.ndarray):
    """Per column, the distinct integer shifts and their summed probabilities."""
    out = []
    for j in range(P.m):
        acc: dict[int, float] = {}
        for x in range(4):
            if P.allowed[j, x]:
                kk = int(k[j, x])
                acc[kk] = acc.get(kk, 0.0) + float(P.prob[j, x])
        out.append(sorted(acc.items()))
    return out


def _dp(P: _Prep, lat: _Lattice, k_cut: int | None):
    """Distribution of the integer score ``K`` on cells ``>= k_cut`` (all cells if None).

    Returns
    -------
    mass : ndarray of float64, shape (n,)
        ``P(K = lo + i)`` for every cell ``lo + i >= k_cut`` (exact: pruned partial scores
        could not reach ``k_cut``).
    lo : int
        Cell of ``mass[0]``.
    """
    cols = _columns(P, lat.k)
    rng = lat.kmax - lat.kmin
    order = np.argsort(rng, kind="stable")
    kmax_o = lat.kmax[order]
    rest = np.concatenate([np.cumsum(kmax_o[::-1])[::-1][1:], [0]]).astype(np.int64)
    arr = np.ones(1)
    lo = 0
    tmp = np.empty(0)
    for i, j in enumerate(order):
        n_old = arr.size
        hi = lo + n_old - 1
        nlo = lo + int(lat.kmin[j])
        nhi = hi + int(lat.kmax[j])
        if k_cut is not None:
            nlo = max(nlo, int(k_cut) - int(rest[i]))
        if nlo > nhi:
            return np.zeros(0), int(k_cut)
        new = np.zeros(nhi - nlo + 1)
        if tmp.size < n_old:
            tmp = np.empty(max(n_old, 2 * tmp.size))
        for kk, pp in cols[j]:
            s = lo + kk - nlo
            a0 = -s if s < 0 else 0
            if a0 >= n_old:
                continue
            t = tmp[: n_old - a0]
            np.multiply(arr[a0:], pp, out=t)
            dst = new[s + a0: s + n_old]
            np.add(dst, t, out=dst)
        arr = new
        lo = nlo
    return arr, lo


class _Tail:
    """``G(k) = P(K >= k)`` for cells ``k >= lo`` (``G = 0`` above the top cell)."""

    def __init__(self, mass: np.ndarray, lo: int):
        self.lo = lo
        g = np.cumsum(mass[::-1])[::-1]
        self.g = np.concatenate([g, [0.0]])
        self.n = mass.size

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


def _exact_classes(P: _Prep, lo: float, cap: int) -> _Classes | None:
    """Enumerate the distinct scores ``>= lo`` exactly (None past ``cap`` states)."""
    e = math.ceil(math.log2(P.abs_sum + 1.0))
    q = 2.0 ** (e - 56)
    Q = np.where(P.allowed, np.rint(P.pwm / q), 0.0).astype(np.int64)
    eq = P.fe + P.m * q
    lo_q = math.floor((lo - eq) / q)
    qmax = np.where(P.allowed, Q, np.iinfo(np.int64).min).max(axis=1)
    qmin = np.where(P.allowed, Q, np.iinfo(np.int64).max).min(axis=1)
    order = np.argsort(-(qmax - qmin), kind="stable")
    qmax_o = qmax[order]
    rest = np.concatenate([np.cumsum(qmax_o[::-1])[::-1][1:], [0]]).astype(np.int64)
    cols = _columns(P, Q)
    vals = np.zeros(1, dtype=np.int64)
    pr = np.ones(1)
    for i, j in enumerate(order):
        ks = np.array([c[0] for c in cols[j]], dtype=np.int64)
        ps = np.array([c[1] for c in cols[j]])
        bound = lo_q - int(rest[i])
        # vals is sorted: only the rows that can reach the bound with some letter
        start = int(np.searchsorted(vals, bound - int(ks.max()), side="left"))
        v = vals[start:]
        if v.size * ks.size > 4 * cap:
            return None
        nv = (v[:, None] + ks[None, :]).ravel()
        npr = (pr[start:, None] * ps[None, :]).ravel()
        keep = nv >= bound
        nv = nv[keep]
        npr = npr[keep]
        if nv.size == 0:
            return _Classes(lo, _empty_f(), _empty_f(), _empty_f(), _empty_f())
        u, inv = np.unique(nv, return_inverse=True)
        if u.size > cap:
            return None
        pr = np.bincount(inv.ravel(), weights=npr, minlength=u.size)
        vals = u
    tie_q = P.tie / q
    brk = np.flatnonzero(np.diff(vals) > tie_q) + 1
    starts = np.concatenate([[0], brk]).astype(np.int64)
    ends = np.concatenate([brk - 1, [vals.size - 1]]).astype(np.int64)
    mass = np.add.reduceat(pr, starts)
    tail = np.cumsum(mass[::-1])[::-1]
    return _Classes(lo, vals[starts] * q, vals[ends] * q, mass, tail)


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
    P = _prepare(pwm, background)
    c = _exact_classes(P, lo, cap)
    if c is None:
        return None
    return c.vmin, c.vmax, c.mass


# --------------------------------------------------------------------------------------------
# table building


def _group_exact(cl: _Classes, tie: float, kappa: float):
    """Groups of classes whose tails differ by at most ``1 + kappa`` (edges, tails)."""
    if cl.tail.size == 0:
        return _empty_f(), _empty_f()
    b = np.floor(np.log(cl.tail) / math.log1p(kappa))
    newg = np.concatenate([[True], b[1:] != b[:-1]])
    first = np.flatnonzero(newg)
    last = np.concatenate([first[1:] - 1, [cl.tail.size - 1]])
    return cl.vmax[last] + 0.5 * tie, cl.tail[first].copy()


def _segments(lg: np.ndarray, c0: int, kappa: float):
    """Log-linear upper envelopes of ``lg`` (log G over cells ``c0 ..``).

    Each segment ``[s, e]`` gets ``A(x) = a + b*(x - s)`` with ``A(c) >= lg[c]`` and
    ``A(c - 1) <= lg[c] + log1p(kappa)`` for every cell ``c`` in it, so that for any real cell
    coordinate ``x`` in ``(c - 1, c]``: ``G(c) <= exp(A(x)) <= (1 + kappa) G(c)``.
    """
    n = lg.size
    lk = math.log1p(kappa)
    out_s, out_a, out_b = [], [], []
    starts = np.arange(0, n, 4096, dtype=np.int64)
    h = 4096
    while starts.size:
        if h == 1:
            out_s.append(starts)
            out_a.append(lg[starts] + 1e-12)
            out_b.append(np.zeros(starts.size))
            break
        ends = np.minimum(starts + h - 1, n - 1)
        idx = np.minimum(starts[:, None] + np.arange(h)[None, :], ends[:, None])
        L = lg[idx]
        ln = np.maximum(ends - starts, 1)
        b = (lg[ends] - lg[starts]) / ln
        b = np.minimum(b, 0.0)
        rel = idx - starts[:, None]
        dev = L - (lg[starts][:, None] + b[:, None] * rel)
        off = dev.max(axis=1)
        ok = (off - dev.min(axis=1) - b) <= lk * 0.999
        s_ok = starts[ok]
        out_s.append(s_ok)
        out_a.append(lg[s_ok] + off[ok] + 1e-12)
        out_b.append(b[ok])
        bad = starts[~ok]
        nh = max(1, h // 8)
        if bad.size:
            sub = (bad[:, None] + np.arange(0, h, nh)[None, :]).ravel()
            sub = sub[sub < n]
            starts = np.sort(sub)
        else:
            starts = bad
        h = nh
    s = np.concatenate(out_s)
    o = np.argsort(s, kind="stable")
    return s[o] + c0, np.concatenate(out_a)[o], np.concatenate(out_b)[o]


# --------------------------------------------------------------------------------------------
# public API


def _unreachable(p: float, P: _Prep, exact: bool) -> ScoreThreshold:
    return ScoreThreshold(math.inf, 0.0, (0.0, 0.0), False, requested_pvalue=p,
                          exact_threshold=exact, max_score=P.max_score, tie=P.tie)


def _coarse(P: _Prep):
    eps_c = max(0.05, (P.max_score - P.min_score) / 4096.0)
    lat = _lattice(P, eps_c)
    mass, lo = _dp(P, lat, None)
    return lat, _Tail(mass, lo)


def _from_exact(p: float, P: _Prep, cl: _Classes, rel_tol: float) -> ScoreThreshold:
    """Threshold and table from classes that cover the threshold (``cl.total > p``)."""
    i = int(np.searchsorted(-cl.tail, -p, side="left"))
    edges, tails = _group_exact(cl, P.tie, rel_tol / 3.0)
    if i >= cl.tail.size:
        return _unreachable(p, P, True)
    alpha = float(cl.vmin[i]) - 0.5 * P.tie
    pv = float(cl.tail[i])
    return ScoreThreshold(alpha, pv, (pv, pv), True, requested_pvalue=p, exact_threshold=True,
                          max_score=P.max_score, tie=P.tie, exact_from=float(cl.lo) + 0.5 * P.tie,
                          exact_edges=edges, exact_tails=tails)


def pvalue_to_score(pwm: np.ndarray, background: np.ndarray, pvalue: float,
                    rel_tol: float = 1e-3, *, exact_gate: float = EXACT_GATE_WORDS,
                    exact_cap: int = EXACT_CAP) -> ScoreThreshold:
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
    exact_gate, exact_cap : float, int
        Tuning of the exact tie-class enumeration (estimated tail words below which it is tried
        first; distinct states past which it is abandoned).  ``exact_gate=0`` forces the
        lattice path for the threshold (tests).

    Returns
    -------
    ScoreThreshold
        Threshold, certified p-value bracket and the tail table for ``score_to_pvalue``.
        See the module docstring for the exact semantics of ``alpha``.
    """
    if not 0.0 < rel_tol < 0.5:
        raise ValueError("rel_tol must lie in (0, 0.5)")
    p = float(pvalue)
    if not p > 0.0 or math.isnan(p):
        raise ValueError("pvalue must be > 0")
    P = _prepare(pwm, background)
    if P.dead:
        return _unreachable(p, P, True)
    if p >= 1.0:
        return ScoreThreshold(-math.inf, 1.0, (1.0, 1.0), True, requested_pvalue=p,
                              exact_threshold=True, max_score=P.max_score, tie=P.tie)

    lat_c, G_c = _coarse(P)
    ku = G_c.first_le(p)
    s_low = lat_c.eps * (ku - 1) + lat_c.d_lo        # Pv(s_low) >= G_c(ku-1) > p
    pv_low = float(G_c(ku - 1))
    est = pv_low * math.exp(P.log_words)
    if est <= exact_gate:
        cl = _exact_classes(P, s_low, exact_cap)
        if cl is not None and cl.total > p:
            return _from_exact(p, P, cl, rel_tol)

    # local decay rate of the tail (per bit) for the choice of eps
    c_mid = ku
    one = max(1, int(round(1.0 / lat_c.eps)))
    g1 = float(G_c(max(c_mid - one, G_c.lo)))
    g2 = float(G_c(c_mid + one))
    if g2 > 0:
        lam = math.log(g1 / g2) / 2.0
    else:
        lam = math.log(max(g1, 1e-300) / max(p, 1e-300)) + 1.0
    lam = min(max(lam, 0.3), 8.0)
    afrac = 0.5 * P.m + 0.5
    eps = 0.45 * rel_tol / (lam * afrac)
    eps = min(max(eps, MIN_EPS, (P.max_score - s_low) / MAX_CELLS), lat_c.eps / 2)

    rho_tab = 0.6 * rel_tol
    tried_exact = est <= exact_gate
    for _it in range(8):
        lat = _lattice(P, eps)
        k_cut = math.floor((s_low - lat.d_hi) / eps) - 2
        mass, lo = _dp(P, lat, k_cut)
        G = _Tail(mass, lo)
        ku = G.first_le(p)
        W = lat.d_hi - lat.d_lo
        alpha = eps * (ku - 1) + lat.d_hi + P.tie
        hi_b = float(G(ku))
        lo_b = float(G(math.ceil((alpha - lat.d_lo) / eps)))
        thr_ok = hi_b <= lo_b * (1.0 + 0.95 * rel_tol)
        if thr_ok or eps <= MIN_EPS * 1.01:
            break
        if not tried_exact:
            tried_exact = True
            cl = _exact_classes(P, eps * (ku - 1) + lat.d_lo, exact_cap)
            if cl is not None and cl.total > p:
                return _from_exact(p, P, cl, rel_tol)
        ratio = hi_b / lo_b - 1.0 if lo_b > 0 else math.inf
        shrink = 4.0 if not math.isfinite(ratio) else min(8.0, max(2.0, 1.5 * ratio / rel_tol))
        eps = max(eps / shrink, MIN_EPS)

    # table: cells k_u .. c_b-1 are certified by the lattice, above them exact classes
    w = math.ceil(W / eps) + 1
    i0 = ku - G.lo
    g = G.g
    n = G.n
    cells = np.arange(i0, n + 1)
    upper = g[cells]
    lower = g[np.minimum(cells + w, n)]
    bad = ~(upper <= lower * (1.0 + rho_tab))
    cb = int(cells[np.argmax(bad)]) + G.lo if bad.any() else G.lo + n
    s_x = eps * (cb - 1) + lat.d_hi
    cl = _exact_classes(P, s_x - P.tie, TOP_CAP)
    certified = cl is not None
    if cl is not None and cl.total > p:
        return _from_exact(p, P, cl, rel_tol)

    if hi_b == 0.0:
        # the top lattice cell alone holds more than p: decide on its exact classes
        cl = _exact_classes(P, eps * (ku - 1) + lat.d_lo, TOP_CAP)
        if cl is not None and cl.total > p:
            return _from_exact(p, P, cl, rel_tol)
        return _unreachable(p, P, False)
    good = ~bad & (upper > 0)
    ratio_max = float(np.max(upper[good] / lower[good])) if good.any() else 1.0
    kappa = max((1.0 + rel_tol) / ratio_max - 1.0, 1e-6) * 0.98
    seg_lo = max(G.lo, ku - 3)
    seg_hi = min(cb - 1, G.lo + n - 1)
    if seg_hi >= seg_lo:
        lg = np.log(g[seg_lo - G.lo: seg_hi - G.lo + 1])
        ss, sa, sb = _segments(lg, seg_lo, kappa)
    else:
        ss, sa, sb = _empty_i(), _empty_f(), _empty_f()
    if cl is not None:
        edges, tails = _group_exact(cl, P.tie, rel_tol / 3.0)
        exact_from = s_x
    else:
        edges, tails = _empty_f(), _empty_f()
        exact_from = math.inf
    return ScoreThreshold(alpha, hi_b, (lo_b, hi_b), True, requested_pvalue=p,
                          exact_threshold=False, max_score=P.max_score, tie=P.tie,
                          eps=eps, d_hi=lat.d_hi, seg_start=ss, seg_a=sa, seg_b=sb,
                          lattice_from=eps * (seg_lo - 1) + lat.d_hi, exact_from=exact_from,
                          exact_edges=edges, exact_tails=tails, scores_certified=certified)


def score_to_pvalue(table: ScoreThreshold, scores) -> np.ndarray:
    """P-values of hit scores, by lookup in the tail table of ``pvalue_to_score``.

    Parameters
    ----------
    table : ScoreThreshold
        From ``pvalue_to_score``.
    scores : array_like of float, shape (n,) (any shape)
        Scores, normally ``>= table.threshold``.

    Returns
    -------
    ndarray of float64, same shape as ``scores``
        Upper bounds of ``Pv(score)``, at most ``rel_tol`` above the exact value (never
        below it).  ``nan`` for scores below the range of the table (well below ``alpha``).
    """
    s = np.asarray(scores, dtype=np.float64)
    flat = s.reshape(-1)
    out = np.full(flat.shape, np.nan)
    if table.exact_edges.size or math.isfinite(table.exact_from):
        ex = flat > table.exact_from
        if ex.any():
            j = np.searchsorted(table.exact_edges, flat[ex], side="left")
            t = np.concatenate([table.exact_tails, [0.0]])
            out[ex] = t[j]
    else:
        ex = np.zeros(flat.shape, dtype=bool)
    if table.seg_start.size:
        la = ~ex & (flat >= table.lattice_from)
        if la.any():
            x = (flat[la] - table.d_hi) / table.eps
            c = np.ceil(x)
            i = np.searchsorted(table.seg_start, c, side="right") - 1
            i = np.maximum(i, 0)
            v = np.exp(table.seg_a[i] + table.seg_b[i] * (x - table.seg_start[i]))
            out[la] = np.minimum(v, 1.0)
    return out.reshape(s.shape)


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
    P = _prepare(pwm, background)
    s = float(score)
    if P.dead or s - 0.5 * P.tie > P.max_score:
        return 0.0, (0.0, 0.0)
    if s - 0.5 * P.tie <= P.min_score:
        return 1.0, (1.0, 1.0)
    lat_c, G_c = _coarse(P)
    kc = math.ceil((s - lat_c.d_hi) / lat_c.eps)
    pv_up = float(G_c(max(kc, G_c.lo)))
    if pv_up * math.exp(P.log_words) <= EXACT_GATE_WORDS * 10:
        cl = _exact_classes(P, s - 0.5 * P.tie, 4 * EXACT_CAP)
        if cl is not None:
            return cl.total, (cl.total, cl.total)
    eps = min(lat_c.eps / 2, 0.4 * rel_tol / (0.5 * P.m + 0.5))
    best = (1.0, (0.0, 1.0))
    for _it in range(6):
        lat = _lattice(P, eps)
        k_hi = math.ceil((s - lat.d_hi) / eps)
        k_lo = math.ceil((s - lat.d_lo) / eps)
        mass, lo = _dp(P, lat, k_hi)
        G = _Tail(mass, lo)
        hi_b, lo_b = float(G(k_hi)), float(G(k_lo))
        best = (hi_b, (lo_b, hi_b))
        if hi_b <= lo_b * (1.0 + rel_tol):
            return best
        cl = _exact_classes(P, s - 0.5 * P.tie, EXACT_CAP)
        if cl is not None:
            return cl.total, (cl.total, cl.total)
        eps = max(eps / 4, MIN_EPS)
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
    P = _prepare(pwm, background)
    if P.dead:
        return np.zeros(0), math.nan
    lat = _lattice(P, float(eps), nearest=True)
    mass, lo = _dp(P, lat, None)
    return mass, lo * float(eps)
