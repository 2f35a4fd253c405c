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

CPU: numba (``workers.distribution.bucket_numba.joint_tail``); GPU: one CUDA block per (pair, shift, strand), the
grid in shared memory (``workers/distribution/bucket.cu``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workers.distribution.exact import _lattice, _prepare

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
    """Lattices, cuts and marginals of every row (``thresholds[r]``: the row's score threshold)."""
    bg = np.asarray(background, dtype=np.float64)
    ms, kd, pr, cuts, margs, deltas = [], [], [], [], [], []
    for w, alpha in zip(pwms, thresholds):
        P = _prepare(w, bg)
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
        lat = _lattice(P, delta)
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


def aligned(rows_a: CompareRows, ra: int, rows_b: CompareRows, rb: int, shift: int):
    """Union-length tables of two rows at ``shift``: deficits of A and B, joint letter probabilities."""
    ka, pa = rows_a.rows_kdef(ra), rows_a.rows_prob(ra)
    kb, pb = rows_b.rows_kdef(rb), rows_b.rows_prob(rb)
    ma, mb = ka.shape[0], kb.shape[0]
    start = min(0, shift)
    L = max(ma, shift + mb) - start
    KA = np.zeros((L, 4), np.int64)
    KB = np.zeros((L, 4), np.int64)
    bg = rows_a.background
    PR = np.tile(bg, (L, 1))
    ia = -start
    ib = shift - start
    KA[ia: ia + ma] = ka
    KB[ib: ib + mb] = kb
    # a letter forbidden in either matrix has probability 0 (the background's own zeros included)
    okA = np.ones((L, 4), bool)
    okA[ia: ia + ma] = pa > 0
    okB = np.ones((L, 4), bool)
    okB[ib: ib + mb] = pb > 0
    PR = np.where(okA & okB, PR, 0.0)
    KA = np.where(PR > 0, KA, 0)
    KB = np.where(PR > 0, KB, 0)
    return KA, KB, PR


def shifts(ma: int, mb: int, min_overlap: int = 1) -> range:
    """Relative shifts with at least ``min_overlap`` overlapping columns."""
    k = max(1, min(min_overlap, ma, mb))
    return range(-(mb - k), ma - k + 1)


def joint_tp_cpu(rows_a: CompareRows, ra: int, rows_b: CompareRows, rb: int, shift: int) -> np.ndarray:
    """``[TP_low, TP_est, TP_high]`` of one row pair at one shift (numba)."""
    from workers.distribution.bucket_numba import joint_tail  # noqa: PLC0415

    ca, cb = rows_a.cut[ra], rows_b.cut[rb]
    out = np.zeros(3)
    if ca[2] < 0 or cb[2] < 0:
        return out
    KA, KB, PR = aligned(rows_a, ra, rows_b, rb, shift)
    na, nb = int(ca[2]) + 1, int(cb[2]) + 1
    qa = (na - 1 - ca).astype(np.int64)       # grid coordinates: i = na-1-deficit
    qb = (nb - 1 - cb).astype(np.int64)
    qa = np.where(ca < 0, na, qa)
    qb = np.where(cb < 0, nb, qb)
    joint_tail(-KA, -KB, PR, na, nb, qa, qb, out)
    return out


def similarity(tp: np.ndarray, ma: np.ndarray, mb: np.ndarray) -> np.ndarray:
    """``[J_low, J_est, J_high]`` from ``TP`` and the marginals (each ``[low, est, high]``)."""
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
    jaccard: np.ndarray      # (n, 3) low, estimate, high
    tp: np.ndarray           # (n, 3)
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
    """COMPARE every (motif ``i`` of A, motif ``j`` of B) in ``pairs`` (n, 2) over all shifts and both
    strands of B.  Row ``2i`` of a ``CompareRows`` is motif ``i`` forward, ``2i + 1`` its reverse complement."""
    pairs = np.asarray(pairs, np.int64).reshape(-1, 2)
    C = _cases(rows_a, rows_b, pairs, min_overlap)
    if device == "gpu":
        from workers.compare.gpu import joint_tp_gpu  # noqa: PLC0415

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
    ma = rows_a.m[C[b, 1]]
    mb = rows_b.m[C[b, 2]]
    sh = C[b, 3]
    overlap = np.minimum(ma, sh + mb) - np.maximum(0, sh)
    return PairResult(a=pairs[:, 0], b=pairs[:, 1], shift=sh, strand=C[b, 4].astype(np.int8),
                      overlap=overlap.astype(np.int32), jaccard=J[b], tp=tp[b],
                      pa=rows_a.marg[C[b, 1], 1], pb=rows_b.marg[C[b, 2], 1], combos=int(C.shape[0]))
