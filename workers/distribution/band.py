"""The exact threshold inside a lattice bracket, by meet in the middle (NumPy).

For long, smooth matrices the lattice of :mod:`workers.distribution.exact` certifies ``Pv(a_lo) > p >= Pv(a_hi)``
with ``a_hi - a_lo`` its score error (up to ~1e-3 bits); the words scoring in between (tens to hundreds for JASPAR's
15-21-long matrices at 1e-4) have p-values within the lattice's 0.1 % of ``p`` and it cannot tell which of them
reach ``p``: FIMO and MOODS users found windows with exact p-values just under ``--pvalue`` left out.

Here the matrix is cut into two halves of columns.  The words of each half that can still reach ``a_lo`` with the
other half's best score are enumerated (column by column from both ends, pruned as they go: the far tail keeps
few), the smaller half's words sorted with their tail masses.  Then, exactly (up to float64 sums):

* the tail mass above the bracket, ``P(S >= top)``, is one binary search per left word;
* the words scoring in the bracket are listed pair by pair, grouped into tie classes (gaps > ``tie``), and their
  masses added from the top down: ``alpha = a* - tie/2`` where ``a*`` is the lowest class whose tail is ``<= p``.

``top`` is put in a gap of the attained scores above ``a_hi`` so that no tie class straddles it.  Where a half or
the bracket holds more words than the caps, None: the lattice's certified threshold stands (its score error is in
the thresholds' table).
"""
from __future__ import annotations

import numpy as np

from workers.distribution.exact_numba import extend_half

MAX_HALF = 2_000_000       # words kept per half (two float64 arrays each)
MAX_BAND = 1_000_000       # words listed in the bracket


def _halves(P, bound: float):
    """The words of two halves of the columns that reach ``bound`` with the best letters of every column not in
    their half: ``((scores, probabilities) of columns 0..i-1, (…) of columns i..m-1)``, or None past
    :data:`MAX_HALF` (or where a column's extension would pass twice that before pruning).

    The halves grow from both ends, the one holding fewer words by a column at a time, until they meet: the cut
    falls where their words balance, not at ``m // 2`` (JASPAR's vertebrates at 1e-4: the largest half 1.26 M words
    at the middle column; docs/benchmarks.md, session 29).  Left words are summed in column order, right words from
    the last column back: a word's two sums differ from a column-order sum by less than the tie width."""
    m = P.m
    best = np.where(P.allowed, P.pwm, -np.inf).max(axis=1)
    prefix = np.concatenate([[0.0], np.cumsum(best)])              # best of columns 0..j-1
    suffix = np.concatenate([np.cumsum(best[::-1])[::-1], [0.0]])  # best of columns i..m-1
    half = [[np.zeros(1), np.ones(1)], [np.zeros(1), np.ones(1)]]
    i, j = 0, m
    while i < j:
        side = 0 if half[0][0].size <= half[1][0].size else 1
        col = i if side == 0 else j - 1
        s, q = half[side]
        ok = P.allowed[col]
        if s.size * int(ok.sum()) > 2 * MAX_HALF:
            return None
        if side == 0:
            i += 1
        else:
            j -= 1
        half[side] = list(extend_half(s, q, np.ascontiguousarray(P.pwm[col][ok]),
                                      np.ascontiguousarray(P.prob[col][ok]),
                                      float(suffix[i] if side == 0 else prefix[j]), float(bound)))
        if half[side][0].size > MAX_HALF:
            return None
    return half


def _band(ls, lq, rs, rq, floor: float, edge: float):
    """The words scoring in ``[floor, edge)``, highest first: scores and masses; None past :data:`MAX_BAND`.
    Also the index of ``edge`` in ``rs`` per left word."""
    lo = np.searchsorted(rs, floor - ls, "left")
    hi = np.searchsorted(rs, edge - ls, "left")
    n = hi - lo
    total = int(n.sum())
    if total > MAX_BAND:
        return None
    first = np.repeat(lo, n) + (np.arange(total) - np.repeat(np.cumsum(n) - n, n))
    score = np.repeat(ls, n) + rs[first]
    mass = np.repeat(lq, n) * rq[first]
    o = np.argsort(-score)
    return score[o], mass[o], hi


def _top(score: np.ndarray, a_hi: float, edge: float, tie: float):
    """A score above ``a_hi`` with no listed score within ``tie`` of it (in the lowest such gap; words at or above
    ``edge`` are not listed, so it stays ``tie`` below ``edge``); None without one."""
    upper = np.concatenate([[edge], score])
    lo_v = np.maximum(upper[1:] + tie, a_hi)         # the gap below upper[i]: (upper[i+1] + tie, upper[i] - tie)
    hi_v = upper[:-1] - tie
    ok = np.flatnonzero(hi_v > lo_v)
    return float(0.5 * (lo_v[ok[-1]] + hi_v[ok[-1]])) if ok.size else None


def band_threshold(P, p: float, a_lo: float, a_hi: float):
    """``(alpha, Pv(alpha))`` exact for ``p`` where the lattice says ``Pv(a_lo) > p >= Pv(a_hi)``; None past the
    caps (or where the bracket does not hold the threshold: then the lattice's result stands).

    Parameters
    ----------
    P : workers.distribution.lattice.PreparedMatrix
    p : float
    a_lo, a_hi : float
        The lattice's bracket of the threshold, bits.

    Returns
    -------
    tuple of float, or None
        ``alpha = a* - tie/2`` (``a*`` the lowest tie class with ``Pv <= p``: every window scoring ``>= alpha`` has
        ``Pv <= p``, every other ``Pv > p``) and ``Pv(a*)``.
    """
    m, tie = P.m, P.tie
    if m < 2:
        return None
    floor = a_lo - 2.0 * tie                       # every word of the bracket's classes reaches it
    halves = _halves(P, floor - tie)
    if halves is None:
        return None
    (ls, lq), (rs, rq) = sorted(halves, key=lambda h: -h[0].size)   # the smaller half sorted, the larger searched
    order = np.argsort(rs)
    rs, rq = rs[order], rq[order]
    rtail = np.concatenate([np.cumsum(rq[::-1])[::-1], [0.0]])      # mass of right words rs[i:]
    edge, top = a_hi + 16.0 * tie, None
    for _ in range(8):
        listed = _band(ls, lq, rs, rq, floor, edge)
        if listed is None:
            return None
        score, mass, at_edge = listed
        top = _top(score, a_hi, edge, tie)
        if top is not None:
            break
        edge = a_hi + 4.0 * (edge - a_hi)
    if top is None:
        return None
    n_above = int(np.searchsorted(-score, -top))                      # listed words above top
    above = float(np.dot(lq, rtail[at_edge])) + float(mass[:n_above].sum())
    score, mass = score[n_above:], mass[n_above:]
    if score.size == 0:
        return None
    new = np.concatenate([[True], score[:-1] - score[1:] > tie])     # a class starts after a gap > tie
    cls = np.cumsum(new) - 1
    tail = above + np.cumsum(np.bincount(cls, weights=mass))         # Pv of each class, from the top
    vmin = score[np.concatenate([np.flatnonzero(new)[1:] - 1, [score.size - 1]])]
    k = int(np.searchsorted(tail, p, "right")) - 1                   # the lowest class with Pv <= p
    if k < 0 or k == tail.size - 1:
        return None                                 # the threshold is not inside the bracket as listed
    return float(vmin[k]) - 0.5 * tie, float(tail[k])
