"""COMPARE (TFM-CUDA §4.5): how many words score above the thresholds of two matrices, over all shifts.

For matrices ``A`` (length ``mA``, threshold ``α``) and ``B`` (``mB``, ``β``) placed at a relative shift
(column 0 of ``B`` under column ``s`` of ``A``, ``-(mB-1) <= s <= mA-1``) both are padded with zero
columns to the union length ``L``.  Over the words ``u`` of ``Σ^L`` (background ``bg``):

* ``TP = P(S_A(u) >= α and S_B(u) >= β)`` (true positives; the seed's ``TP_M^M'``, here as a probability:
  the number of words is ``TP · 4^L`` under the uniform background);
* ``only_A = P(S_A >= α) - TP``, ``only_B = P(S_B >= β) - TP``;
* the similarity ``J = TP / (P_A + P_B - TP)``: the Jaccard index of the two occurrence sets.

``B`` is taken on both strands (its reverse complement, with its own threshold), and the best shift
and strand (largest ``J``) is reported.

Algorithm
---------
The joint distribution ``Q(s, s')`` of the seed is computed by a dynamic programme over the columns on
integer lattices (one step per matrix, ``workers.distribution``'s certified per-column rounding: every
word satisfies ``δ K + d_lo <= S <= δ K + d_hi``).  The state is the pair of *deficits* — how far each
partial score lies below the best attainable one — and a state whose deficit already exceeds what the
threshold allows can never become a true positive: it is dropped (TFM-Pvalue's pruning, in two
dimensions).  The grid is therefore only ``(D_A + 1) × (D_B + 1)`` cells, ``D ≈ (max - α)/δ``, whatever
the shift; each column costs four shifted multiply-adds of the grid.  Three cuts are read from the
final grid: a certified lower bound of ``TP`` (cells surely above both thresholds), a certified upper
bound, and the estimate at the centre of the rounding bracket.  The same cuts on one-dimensional DPs give
``P_A`` and ``P_B``, so ``J`` of a matrix with itself is exactly 1.  ``cells`` (default 64) sets
``δ = (max - α) / cells`` per matrix: the seed's ``O((log N)/√B)`` trade-off between grid size and
error, reported as the bracket ``[J_low, J_high]``.

This module takes the pairs apart into cases and picks each pair's best; the DP itself runs on the CPU in
numba (:mod:`workers.compare.cpu`, :mod:`workers.compare.cpu_numba`) or on the GPU, one CUDA block per
(pair, shift, strand) with the grid in shared memory (:mod:`workers.compare.gpu`, ``compare.cu``).  The
matrices' lattices, cuts and marginals are prepared once (:mod:`workers.compare.rows`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workers.compare.cpu import joint_tp_cpu
from workers.compare.gpu import joint_tp_gpu
from workers.compare.rows import CompareRows


def shifts(ma: int, mb: int, min_overlap: int = 1) -> range:
    """Relative shifts of two matrices with at least ``min_overlap`` overlapping columns.

    Parameters
    ----------
    ma, mb : int
        Lengths of A and B.
    min_overlap : int

    Returns
    -------
    range
        Columns of A under B's column 0.
    """
    k = max(1, min(min_overlap, ma, mb))
    return range(-(mb - k), ma - k + 1)


def similarity(tp: np.ndarray, ma: np.ndarray, mb: np.ndarray) -> np.ndarray:
    """The Jaccard similarity of two occurrence sets, ``J = TP / (P_A + P_B - TP)``.

    Parameters
    ----------
    tp, ma, mb : ndarray, shape (..., 3), float
        ``[low, estimate, high]`` of the joint tail and of each marginal.

    Returns
    -------
    ndarray, shape (..., 3), float64
        ``[J_low, J_est, J_high]`` in [0, 1].
    """
    tp, ma, mb = (np.asarray(x, np.float64) for x in (tp, ma, mb))
    def ratio(t, a, b):
        # J = TP / (P_A + P_B - TP) and P_A + P_B - TP >= max(P_A, P_B) >= TP
        den = np.maximum(a + b - t, t)
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(den > 0, t / np.where(den > 0, den, 1.0), 0.0)

    lo = ratio(tp[..., 0], ma[..., 2], mb[..., 2])       # fewest shared words, most words overall
    est = ratio(tp[..., 1], ma[..., 1], mb[..., 1])
    hi = ratio(tp[..., 2], ma[..., 0], mb[..., 0])
    return np.clip(np.stack([lo, est, hi], axis=-1), 0.0, 1.0)


@dataclass
class PairResult:
    """Best shift and strand of each pair, and the numbers there (arrays of one entry per pair)."""
    a: np.ndarray            # (n,) motif index in A
    b: np.ndarray            # (n,) motif index in B
    shift: np.ndarray        # (n,) column of A under B's column 0
    strand: np.ndarray       # (n,) 0: B as given, 1: B reverse-complemented
    overlap: np.ndarray      # (n,) overlapping columns
    jaccard: np.ndarray      # (n, 3) low, estimate, high: bounds of the best over all cases, estimate of the case
    tp: np.ndarray           # (n, 3) of the case reported
    pa: np.ndarray           # (n,) P(S_A >= α) estimate
    pb: np.ndarray           # (n,)
    combos: int = 0          # (pair, shift, strand) cases computed


def _cases(rows_a: CompareRows, rows_b: CompareRows, pairs: np.ndarray, min_overlap: int) -> np.ndarray:
    """Every (pair index, row of A, row of B, shift, strand) to compute, shape (n, 5) int64 (vectorised)."""
    P = pairs.shape[0]
    pidx = np.repeat(np.arange(P), 2)
    strand = np.tile(np.array([0, 1]), P)
    ra = 2 * pairs[pidx, 0]
    rb = 2 * pairs[pidx, 1] + strand
    ma = rows_a.m[ra].astype(np.int64)
    mb = rows_b.m[rb].astype(np.int64)
    k = np.maximum(1, np.minimum(np.minimum(min_overlap, ma), mb))
    n = ma + mb - 2 * k + 1
    rep = np.repeat(np.arange(pidx.size), n)
    first = np.repeat(np.cumsum(n) - n, n)
    sh = -(mb - k)[rep] + (np.arange(rep.size) - first)
    return np.stack([pidx[rep], ra[rep], rb[rep], sh, strand[rep]], axis=1)


def compare_pairs(rows_a: CompareRows, rows_b: CompareRows, pairs: np.ndarray, *, min_overlap: int = 1,
                  device: str = "cpu") -> PairResult:
    """COMPARE each pair of motifs over all shifts and both strands of B; its best case.

    Parameters
    ----------
    rows_a, rows_b : CompareRows
        Row ``2i`` is motif ``i`` forward, ``2i + 1`` its reverse complement.
    pairs : ndarray, shape (n, 2), int
        (motif of A, motif of B).
    min_overlap : int
        Shifts with at least this many common columns.
    device : {"cpu", "gpu"}

    Returns
    -------
    PairResult
        Per pair the best shift and strand (largest estimate, then largest lower bound, then the smallest
        ``|shift|``), its overlap, its joint tail ``(n, 3)`` and marginals, and the Jaccard ``(n, 3)``: the
        estimate of that case between certified bounds of the pair's similarity, the largest ``J`` over all
        shifts and strands (the largest low and the largest high of the cases).
    """
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    C = _cases(rows_a, rows_b, pairs, min_overlap)
    if device == "gpu":
        tp = joint_tp_gpu(rows_a, rows_b, C[:, 1], C[:, 2], C[:, 3])
    else:
        tp = np.stack([joint_tp_cpu(rows_a, int(ra), rows_b, int(rb), int(s))
                       for _, ra, rb, s, _ in C]) if C.size else np.zeros((0, 3))
    J = similarity(tp, rows_a.marg[C[:, 1]], rows_b.marg[C[:, 2]])
    n = pairs.shape[0]
    best = np.full(n, -1, np.int64)
    # best case per pair: largest estimate, then largest lower bound, then the first (smallest |shift|)
    key = np.lexsort((np.abs(C[:, 3]), -J[:, 0], -J[:, 1], C[:, 0]))
    first = np.ones(key.size, bool)
    first[1:] = C[key[1:], 0] != C[key[:-1], 0]
    best[C[key[first], 0]] = key[first]
    b = best
    # the pair's similarity is its best case's: certified bounds of that maximum are the largest low and the
    # largest high over its cases (the estimate may rank a case first whose exact value is not the largest)
    starts = np.flatnonzero(np.r_[True, C[1:, 0] != C[:-1, 0]]) if C.size else np.zeros(0, np.int64)
    bounds = J[b].copy()
    if C.size:
        bounds[C[starts, 0], 0] = np.maximum.reduceat(J[:, 0], starts)
        bounds[C[starts, 0], 2] = np.maximum.reduceat(J[:, 2], starts)
    ma = rows_a.m[C[b, 1]]
    mb = rows_b.m[C[b, 2]]
    sh = C[b, 3]
    overlap = np.minimum(ma, sh + mb) - np.maximum(0, sh)
    return PairResult(a=pairs[:, 0], b=pairs[:, 1], shift=sh, strand=C[b, 4].astype(np.int8),
                      overlap=overlap.astype(np.int32), jaccard=bounds, tp=tp[b],
                      pa=rows_a.marg[C[b, 1], 1], pb=rows_b.marg[C[b, 2], 1], combos=int(C.shape[0]))
