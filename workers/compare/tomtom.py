"""Motif identification: Tomtom's complete-score statistic (Gupta et al. 2007) as array programs.

Question: which motif of a target database is this query, and how surprising is the match?  The
statistic is MEME suite 5.x ``tomtom`` with its defaults (``-dist ed``, complete scores, ``-min-overlap 1``,
both strands; read in ``src/tomtom.c``), computed for all queries and targets at once:

1. **Column scores.**  Every query column ``q_i`` against every target column ``t_c`` of the whole
   database, forward and reverse-complement targets (the *target columns*), as one matrix product:
   ``ed``: ``S = -||q_i - t_c||₂`` from ``|q|² + |t|² - 2 q·t`` (MEME 5's default), or ``pearson``:
   the correlation of the two columns (MEME 4's default) from centred, normalised columns.
2. **Complete score.**  Each query column's scores minus their median over all target columns, so a
   query column left unaligned (overhang) scores 0, an uninformative column loses less by staying
   unaligned than an informative one (tomtom.c ``shift_all_pairwise_scores``).
3. **Lattice.**  Per query: ``o = floor(min shifted score)``, ``scale = floor(BINS / (max shifted - o))``
   (tomtom.c ``scale_score_matrix``, BINS = 100); integer column scores
   ``c = floor((S - median - o)·scale + 0.5) + o·scale`` (the shifted score in units of ``1/scale``).
4. **Best alignment** of a (query, target): the largest sum of ``c`` over the overlapping columns, over
   every offset with at least ``min(min_overlap, n, t)`` overlapping columns and both strands.  Sums
   along the diagonals of the integer score matrix, one vectorised pass (targets laid out with zero
   columns between them, which is what an overhang scores).
5. **Null.**  Each query column's score is an independent draw from its scores against all target
   columns (equal weights).  The pmf of the sum over query columns ``a .. a+m-1`` is the convolution
   of the columns' histograms, computed for every span (``n(n+1)/2`` per query, all queries of one
   width together).  With the ``n + t - 1`` alignments of a width-``t`` target (each with its span of
   query columns) and both strands taken as independent, ``p = 1 - Π P(span sum < s)^strands``:
   the probability that a random width-``t`` target aligns as well somewhere (tomtom.c
   ``calc_shifted_scores_pvalues_per_query``).  Products are sums of ``log P`` taken as
   ``log1p(-survival)`` in the tail, so p-values keep their relative precision far below 1e-16.

E-value = p × number of targets; q-values: Benjamini-Hochberg over the query's targets (:func:`bh_qvalues`).

Differences from MEME's binary, all small: the exact median (tomtom.c averages sorted elements
``floor(n/2)-1`` and ``ceil(n/2)-1``, slightly below it); ``floor(x + 0.5)`` rounding; float64 p-values
(tomtom.c stores them in a float); BH q-values (tomtom.c estimates π₀ with Storey's bootstrap, giving
q-values at most BH's).  memelite's ``tomtom`` approximates the median (binned) and by default merges
similar target columns (``n_target_bins``); its p-values agree with these to rounding of the lattice.

Conventions: ``offset`` o means query column ``i`` faces target column ``i + o`` of the target as
matched (its reverse complement when ``strand`` is 1), so ``o < 0`` when the query starts to the left
of the target; ``overlap`` is the number of facing columns (MEME's and memelite's conventions).
Ties between alignments of equal score: the larger overlap, then the forward strand, then the
smaller offset.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workers.backend import array_module, resolve_device, to_numpy

#: Lattice steps of one column's score range (tomtom.c ``BINS``).
BINS = 100
#: Column comparison functions; "ed" is MEME 5's default.
DISTANCES = ("ed", "pearson")
#: log P for an impossible event (P = 0): finite, so sums stay NaN-free; exp() of it is 0.
_LOG_ZERO = -1.0e300


@dataclass
class TargetSet:
    """A target database laid out once for any number of query batches.

    Attributes
    ----------
    cols : array, shape (C, 4), float64 (``xp``)
        Columns of every target, forward targets first, then (``strands == 2``) their reverse
        complements in the same order.
    lengths : numpy.ndarray, shape (N,), int64
        Target widths.
    starts : numpy.ndarray, shape (strands * N,), int64
        First row in ``cols`` of each stacked target (forward ones, then reverse complements).
    strands : int
        1 (forward only) or 2.
    distance : str
        One of ``DISTANCES``.
    device : str
        "cpu" or "gpu".
    norms : array, shape (C,), float64 (``xp``)
        ``|t|²`` (ed) or the centred column norms (pearson).
    """
    cols: object
    lengths: np.ndarray
    starts: np.ndarray
    strands: int
    distance: str
    device: str
    norms: object

    @property
    def xp(self):
        return array_module(self.device)

    @property
    def n_targets(self) -> int:
        return int(self.lengths.size)

    @property
    def n_columns(self) -> int:
        return int(self.cols.shape[0])


def _module_of(a):
    """numpy or cupy, whichever ``a`` belongs to."""
    return array_module("gpu" if type(a).__module__.startswith("cupy") else "cpu")


def _check_ppms(ppms, what: str) -> list[np.ndarray]:
    out = []
    for k, p in enumerate(ppms):
        a = np.asarray(p, dtype=np.float64)
        if a.ndim != 2 or a.shape[1] != 4 or a.shape[0] < 1:
            raise ValueError(f"{what} {k}: expected an (m, 4) probability matrix, got shape {a.shape}")
        if not np.all(np.isfinite(a)) or np.any(a < 0) or np.any(np.abs(a.sum(axis=1) - 1.0) > 1e-6):
            raise ValueError(f"{what} {k}: rows must be letter probabilities (finite, >= 0, summing to 1)")
        out.append(a)
    if not out:
        raise ValueError(f"no {what}s given")
    return out


def _prepare_columns(cols, distance: str, xp):
    """``(cols', norms)``: the operands of the column-score product for ``distance``."""
    if distance == "ed":
        return cols, (cols * cols).sum(axis=1)
    centred = cols - 0.25                     # a probability column's mean is 1/4 (tomtom.c x_bar)
    return centred, xp.sqrt((centred * centred).sum(axis=1))


def prepare_targets(ppms, *, distance: str = "ed", both_strands: bool = True, device=None) -> TargetSet:
    """Lay out target probability matrices for :func:`search`.

    Parameters
    ----------
    ppms : list of numpy.ndarray, each shape (t_j, 4), float64
        Letter probabilities (rows A C G T summing to 1), one matrix per target.
    distance : {"ed", "pearson"}
    both_strands : bool
        Also match the targets' reverse complements (their columns join the background too).
    device : None, "cpu" or "gpu"

    Returns
    -------
    TargetSet
        The targets' columns laid out on the device for :func:`search`.
    """
    if distance not in DISTANCES:
        raise ValueError(f"distance must be one of {DISTANCES}, got {distance!r}")
    ppms = _check_ppms(ppms, "target")
    device = resolve_device(device)
    xp = array_module(device)
    mats = ppms + ([p[::-1, ::-1] for p in ppms] if both_strands else [])
    lengths = np.array([p.shape[0] for p in ppms], np.int64)
    all_len = np.array([p.shape[0] for p in mats], np.int64)
    starts = np.concatenate([[0], np.cumsum(all_len)[:-1]]).astype(np.int64)
    cols, norms = _prepare_columns(xp.asarray(np.concatenate(mats, axis=0)), distance, xp)
    return TargetSet(cols=cols, lengths=lengths, starts=starts, strands=2 if both_strands else 1,
                     distance=distance, device=device, norms=norms)


def column_scores(qcols, targets: TargetSet):
    """Scores of every query column against every target column.

    Parameters
    ----------
    qcols : array, shape (R, 4), float64 (``targets.xp``)
        Query columns (letter probabilities).
    targets : TargetSet

    Returns
    -------
    array, shape (R, C), float64
        ``-||q - t||₂`` (ed) or Pearson's r (pearson; 0 where a column is uniform).
    """
    xp = targets.xp
    q, qn = _prepare_columns(qcols, targets.distance, xp)
    out = q @ targets.cols.T                                      # the one BLAS product
    # in place from here: each temporary of this size is a fresh, page-faulting allocation
    if targets.distance == "ed":
        out *= -2.0
        out += qn[:, None]
        out += targets.norms[None, :]
        xp.maximum(out, 0.0, out=out)
        xp.sqrt(out, out=out)
        return xp.negative(out, out=out)
    # a uniform column (centred norm 0) has a zero dot product with everything: r = 0 there
    out *= xp.where(qn > 0, 1.0 / xp.where(qn > 0, qn, 1.0), 0.0)[:, None]
    out *= xp.where(targets.norms > 0, 1.0 / xp.where(targets.norms > 0, targets.norms, 1.0), 0.0)[None, :]
    return out


def _row_medians(S, xp):
    """Median of each row (exact; the average of the two middle values of an even count), as np.median.

    NumPy partitions each row; on CuPy, whose median sorts every row, :func:`_select_medians`."""
    if xp is np:
        return np.median(S, axis=1)
    return _select_medians(S, xp)


def _select_medians(S, xp, nb: int = 4096):
    """Exact row medians by selection: a histogram of each row on ``nb`` bins finds the bins of the two
    middle order statistics; only the values in those bins are sorted (by row, then value).

    Parameters
    ----------
    S : array, shape (R, C), float64

    Returns
    -------
    array, shape (R,), float64
        Equal to ``np.median(S, axis=1)``.
    """
    R, C = S.shape
    lo, hi = S.min(axis=1), S.max(axis=1)
    span = hi - lo
    inv = xp.where(span > 0, (nb - 1) / xp.where(span > 0, span, 1.0), 0.0)
    b = ((S - lo[:, None]) * inv[:, None]).astype(xp.int32)      # >= 0, so truncation is floor
    xp.clip(b, 0, nb - 1, out=b)
    cnt = xp.bincount((b + xp.arange(R, dtype=xp.int32)[:, None] * nb).ravel(), minlength=R * nb).reshape(R, nb)
    cum = xp.cumsum(cnt, axis=1)
    k1, k2 = (C - 1) // 2, C // 2                                 # the middle order statistics
    b1 = xp.argmax(cum > k1, axis=1)
    b2 = xp.argmax(cum > k2, axis=1)
    mask = (b >= b1[:, None]) & (b <= b2[:, None])
    del b
    rows = xp.nonzero(mask)[0]
    vals = S[mask]
    vals = vals[xp.lexsort(xp.stack([vals, rows.astype(xp.float64)]))]
    count = mask.sum(axis=1)
    start = xp.cumsum(count) - count                             # first selected value of each row
    r = xp.arange(R)
    below = cum[r, b1] - cnt[r, b1]                              # values in bins below b1
    return (vals[start + k1 - below] + vals[start + k2 - below]) / 2


def quantise(S, n: int, bins: int = BINS):
    """Median-shifted integer column scores of queries of one width ``n`` (tomtom.c's lattice).

    Parameters
    ----------
    S : array, shape (Q*n, C), float64
        :func:`column_scores` of ``Q`` queries' columns, query by query; overwritten.
    n : int
    bins : int

    Returns
    -------
    ints : array, shape (Q, n, C), int16
        Lattice bin of every score, in ``[0, bins]``.
    z0 : numpy.ndarray, shape (Q,), int64
        Bin of a column's median (``-o·scale``); ``ints - z0`` is the complete-score contribution.
    scale : numpy.ndarray, shape (Q,), float64
        Lattice steps per unit of column score.
    """
    xp = _module_of(S)
    Q, C = S.shape[0] // n, S.shape[1]
    S -= _row_medians(S, xp)[:, None]                             # in place: S is consumed
    R = S.reshape(Q, n * C)
    small = to_numpy(R.min(axis=1))
    large = to_numpy(R.max(axis=1))
    small = np.where(large == small, large - 1.0, small)          # tomtom.c: all scores equal
    o = np.floor(small)
    scale = np.maximum(np.floor(bins / (large - o)), 1.0)
    z0 = np.rint(-o * scale).astype(np.int64)
    R -= xp.asarray(o)[:, None]
    R *= xp.asarray(scale)[:, None]
    R += 0.5
    xp.floor(R, out=R)
    xp.clip(R, 0, bins, out=R)
    return R.astype(xp.int16).reshape(Q, n, C), z0, scale


def column_histograms(ints, bins: int = BINS):
    """Per query column, the distribution of its lattice score over all target columns.

    Parameters
    ----------
    ints : array, shape (Q, n, C), int16

    Returns
    -------
    array, shape (Q, n, bins + 1), float64
        Row sums 1.
    """
    xp = _module_of(ints)
    Q, n, C = ints.shape
    rows = xp.arange(Q * n, dtype=xp.int32)[:, None] * (bins + 1)
    counts = xp.bincount((ints.reshape(Q * n, C).astype(xp.int32) + rows).ravel(), minlength=Q * n * (bins + 1))
    return (counts.reshape(Q, n, bins + 1) / C).astype(xp.float64)


def _span_index(n: int) -> np.ndarray:
    """``first[m]``: flat index of span (a=0, length m) among all spans of a width-``n`` query,
    spans ordered by length then start: span (a, m) is ``first[m] + a``."""
    first = np.zeros(n + 2, np.int64)
    for m in range(1, n + 1):
        first[m + 1] = first[m] + (n - m + 1)
    return first


def _log_cdf(pmf, xp):
    """``log P(X <= u)`` for each pmf on its last axis; the upper tail from the survival function so
    that values near 0 (``P`` near 1) keep their precision."""
    cdf = xp.cumsum(pmf, axis=-1)
    sf = xp.cumsum(pmf[..., ::-1], axis=-1)[..., ::-1]           # P(X >= u), summed from the top
    above = xp.zeros_like(sf)
    above[..., :-1] = sf[..., 1:]                                 # P(X > u)
    lower = xp.log(xp.maximum(cdf, 1e-300))
    upper = xp.log1p(-xp.minimum(above, 0.5))                    # used only where P(X <= u) > 1/2
    out = xp.where(cdf > 0.5, upper, lower)
    return xp.where(cdf > 0, out, _LOG_ZERO)


def span_log_cdf(f):
    """``log P(sum of the lattice scores of query columns a..a+m-1 <= u)`` for every span.

    Parameters
    ----------
    f : array, shape (Q, n, K), float64
        :func:`column_histograms` (``K = bins + 1``) of ``Q`` queries of width ``n``.

    Returns
    -------
    array, shape (Q, n(n+1)/2, n·bins + 1), float64
        Span ``(a, m)`` at index ``_span_index(n)[m] + a``; 0 past a span's largest sum.

    The pmf of span ``(a, m+1)`` is that of ``(a, m)`` convolved with column ``a+m``'s histogram; all
    starts and all queries advance together, one tap of the kernel at a time (non-negative terms
    only, so small tail probabilities keep their relative precision).
    """
    xp = _module_of(f)
    Q, n, K = f.shape
    bins = K - 1
    first = _span_index(n)
    out = xp.zeros((Q, int(first[n + 1]), n * bins + 1))
    taps = np.flatnonzero(to_numpy(f.reshape(-1, K).any(axis=0)))
    pmf = f
    if xp is np:
        from workers.compare.tomtom_numba import log_cdf_spans  # noqa: PLC0415
    for m in range(1, n + 1):
        L = m * bins + 1
        if xp is np:
            log_cdf_spans(pmf, out[:, first[m]:first[m + 1], :L], _LOG_ZERO)
        else:
            out[:, first[m]:first[m + 1], :L] = _log_cdf(pmf, xp)
        if m == n:
            break
        pmf = _convolve(pmf[:, :n - m], f[:, m:], taps, xp)
    return out


def _convolve(prev, ker, taps: np.ndarray, xp):
    """Each span's pmf ``prev`` (Q, s, L) convolved with its next column's histogram ``ker`` (Q, s, K), the
    non-zero entries ``taps``: shape (Q, s, L + K - 1).  On the CPU one numba pass
    (:mod:`workers.compare.tomtom_numba`), on the GPU one broadcast add per tap; the same sums in the same order."""
    Q, s, L = prev.shape
    nxt = xp.zeros((Q, s, L + ker.shape[2] - 1))
    if xp is np:
        from workers.compare.tomtom_numba import convolve_spans  # noqa: PLC0415

        convolve_spans(prev, ker, np.asarray(taps, np.int64), nxt)
        return nxt
    for k in taps:
        nxt[:, :, k:k + L] += prev * ker[:, :, k:k + 1]
    return nxt


@dataclass
class _Layout:
    """Stacked targets with ``pad`` zero columns before, between and after them, for one query width."""
    pos: object            # (C,) int64 (xp): padded position of each target column
    width: int             # padded length
    pstart: np.ndarray     # (strands*N,) padded start of each stacked target
    tlen: np.ndarray       # (strands*N,) widths


def _layout(targets: TargetSet, pad: int) -> _Layout:
    tlen = np.tile(targets.lengths, targets.strands)
    which = np.repeat(np.arange(tlen.size), tlen)                 # stacked target of each column
    pos = np.arange(targets.n_columns, dtype=np.int64) + pad * (which + 1)
    pstart = targets.starts + pad * (np.arange(tlen.size) + 1)
    return _Layout(pos=targets.xp.asarray(pos), width=int(targets.n_columns + pad * (tlen.size + 1)),
                   pstart=pstart, tlen=tlen)


def best_alignments(C, targets: TargetSet, min_overlap: int = 1):
    """Best complete-score alignment of every (query, target) over offsets and strands.

    Parameters
    ----------
    C : array, shape (Q, n, C), int16 or int32
        Complete-score contributions ``ints - z0`` (0 = the column's median score).
    targets : TargetSet
    min_overlap : int
        Offsets with fewer than ``min(min_overlap, n, t)`` facing columns are not considered.

    Returns
    -------
    score, offset, strand, overlap : numpy.ndarray, shape (Q, N)
        int64 lattice score, int32 offset, int8 strand (0 forward, 1 reverse complement), int32 overlap.
    """
    xp = targets.xp
    Q, n, _ = C.shape
    N, S = targets.n_targets, targets.strands
    lay = _layout(targets, n - 1)
    dt = xp.int16 if n * BINS < 2 ** 15 else xp.int32
    padded = xp.zeros((Q, n, lay.width), dtype=dt)
    padded[:, :, lay.pos] = C.astype(dt)
    wd = lay.width - (n - 1)
    D = padded[:, 0, :wd].copy()                                  # D[x] = Σ_i C[i, x + i]
    for i in range(1, n):
        D += padded[:, i, i:i + wd]
    del padded
    mo = np.minimum(min_overlap, np.minimum(n, lay.tlen))
    lo, hi = mo - n, lay.tlen - mo                                # offsets considered
    win = int((hi - lo).max()) + 1
    off = lo[:, None] + np.arange(win)[None, :]                   # (S*N, win)
    ok = off <= hi[:, None]
    x = np.clip(lay.pstart[:, None] + off, 0, wd - 1)
    ov = np.minimum(n, lay.tlen[:, None] - off) - np.maximum(0, -off)
    # one integer key per alignment, score first, then overlap (|score| <= n·BINS: int32 holds it);
    # masked offsets never win
    key = D[:, xp.asarray(x)].astype(xp.int32)
    key *= n + 1
    key += xp.asarray(ov.astype(np.int32))
    key = xp.where(xp.asarray(ok)[None], key, np.int32(np.iinfo(np.int32).min))
    at = xp.argmax(key, axis=2)                                   # (Q, S*N): first best = smallest offset
    best = xp.take_along_axis(key, at[:, :, None], axis=2)[:, :, 0].reshape(Q, S, N)
    strand = xp.argmax(best, axis=1)                              # ties: the forward strand
    k = xp.take_along_axis(best, strand[:, None, :], axis=1)[:, 0, :]
    at = to_numpy(at).reshape(Q, S, N)
    strand = to_numpy(strand)
    at = np.take_along_axis(at, strand[:, None, :], axis=1)[:, 0, :]
    k = to_numpy(k).astype(np.int64)
    overlap = k % (n + 1)
    score = (k - overlap) // (n + 1)
    offset = lo[np.arange(N)][None, :] + at                       # lo depends on the width only
    return score.astype(np.int64), offset.astype(np.int32), strand.astype(np.int8), overlap.astype(np.int32)


def pair_pvalues(logF, z0: np.ndarray, score: np.ndarray, targets: TargetSet) -> np.ndarray:
    """P-value of each best alignment: ``1 - Π_alignments P(span sum < score)^strands``.

    Parameters
    ----------
    logF : array, shape (Q, n(n+1)/2, n·bins + 1), float64
        :func:`span_log_cdf` of ``Q`` queries of width ``n``.
    z0 : numpy.ndarray, shape (Q,), int64
    score : numpy.ndarray, shape (Q, N), int64
        Best complete score (lattice units) of every pair.
    targets : TargetSet

    Returns
    -------
    numpy.ndarray, shape (Q, N), float64
    """
    xp = targets.xp
    Q, nspan, width = logF.shape
    n = int(round((math.sqrt(8 * nspan + 1) - 1) / 2))
    first = _span_index(n)
    t = targets.lengths
    o = np.arange(n + int(t.max()) - 1) - (n - 1)                 # every offset of the widest target
    a = np.maximum(0, -o)                                         # first query column aligned
    m = np.minimum(n, t[:, None] - o[None, :]) - a[None, :]       # (N, conf): columns aligned
    valid = m >= 1
    span = first[np.clip(m, 1, n)] + a[None, :]
    # a span of m columns scores below s exactly when its lattice sum is <= s + m·z0 - 1
    u = xp.asarray(score)[:, :, None] + xp.asarray(m)[None] * xp.asarray(z0)[:, None, None] - 1
    low = u < 0
    u = xp.clip(u, 0, width - 1)
    flat = (xp.arange(Q)[:, None, None] * nspan + xp.asarray(span)[None]) * width + u
    vals = logF.reshape(-1)[flat]
    vals = xp.where(low, _LOG_ZERO, vals)
    vals = xp.where(xp.asarray(valid)[None], vals, 0.0)
    log_g = vals.sum(axis=2)
    return to_numpy(-xp.expm1(targets.strands * log_g))


@dataclass
class TomtomResult:
    """Best alignment and its p-value for every (query, target); arrays of shape (Q, N), host."""
    pvalue: np.ndarray       # float64
    score: np.ndarray        # float64: complete score, in column-score units (lattice score / scale)
    offset: np.ndarray       # int32: query column i faces target column i + offset
    strand: np.ndarray       # int8: 0 target as given, 1 its reverse complement
    overlap: np.ndarray      # int32: facing columns


def _bytes_per_query(n: int, targets: TargetSet) -> int:
    """Peak memory of one width-``n`` query in :func:`_search_width`: the largest of its phases (estimate,
    checked against tracemalloc's peak on the CPU)."""
    C, N, S = targets.n_columns, targets.n_targets, targets.strands
    win = n + int(targets.lengths.max())
    width = n * BINS + 1
    scores = n * C * (8 * 2 + 4 + 2)                              # S (in place), median's copy, bincount, ints
    spans = (n * (n + 1) // 2) * width * 8 + 8 * n * width * 8     # the table, one span length's temporaries
    align = n * (C + (n - 1) * (S * N + 1)) * 2 + n * C * 2 + S * N * win * 18
    pairs = N * win * 8 * 4
    return int(1.25 * max(scores, spans, align, pairs))


def _search_width(qppms: np.ndarray, targets: TargetSet, min_overlap: int) -> tuple:
    """:func:`search` for queries of one width: ``qppms`` (Q, n, 4) float64."""
    xp = targets.xp
    Q, n, _ = qppms.shape
    S = column_scores(xp.asarray(qppms.reshape(Q * n, 4)), targets)
    ints, z0, scale = quantise(S, n)
    del S
    logF = span_log_cdf(column_histograms(ints))
    C = ints - xp.asarray(z0.astype(np.int16))[:, None, None]     # int16: |C| <= BINS
    del ints
    score, offset, strand, overlap = best_alignments(C, targets, min_overlap)
    del C
    p = pair_pvalues(logF, z0, score, targets)
    return p, score / scale[:, None], offset, strand, overlap


def search(query_ppms, targets: TargetSet, *, min_overlap: int = 1, chunk_bytes: int | None = None) -> TomtomResult:
    """Tomtom p-values and best alignments of every query against every target.

    Parameters
    ----------
    query_ppms : list of numpy.ndarray, each shape (n_i, 4), float64
        Query letter probabilities.
    targets : TargetSet
        From :func:`prepare_targets` (the background is the targets' columns).
    min_overlap : int
        Smallest number of facing columns of a reported alignment (capped at both widths).  The
        p-value still counts every offset, as tomtom.c does.
    chunk_bytes : int, optional
        Memory budget of one batch of queries; default 256 MiB on CPUs, 4 GiB on GPUs.

    Returns
    -------
    TomtomResult
        Rows in the order of ``query_ppms``, columns in the order of the targets.

    Queries are grouped by width (each group shares its span layout) and cut into batches within
    ``chunk_bytes``; every query's result depends only on itself and the targets, so batches are
    independent (a unit of work for Dask).
    """
    qs = _check_ppms(query_ppms, "query")
    if min_overlap < 1:
        raise ValueError(f"min_overlap must be >= 1, got {min_overlap}")
    if chunk_bytes is None:
        chunk_bytes = (4 << 30) if targets.device == "gpu" else (256 << 20)
    Q, N = len(qs), targets.n_targets
    res = TomtomResult(pvalue=np.ones((Q, N)), score=np.zeros((Q, N)), offset=np.zeros((Q, N), np.int32),
                       strand=np.zeros((Q, N), np.int8), overlap=np.zeros((Q, N), np.int32))
    widths = np.array([q.shape[0] for q in qs])
    for n in np.unique(widths):
        idx = np.flatnonzero(widths == n)
        step = max(1, chunk_bytes // _bytes_per_query(int(n), targets))
        for s in range(0, idx.size, step):
            rows = idx[s:s + step]
            out = _search_width(np.stack([qs[i] for i in rows]), targets, min_overlap)
            for arr, val in zip((res.pvalue, res.score, res.offset, res.strand, res.overlap), out):
                arr[rows] = val
    return res


def bh_qvalues(p: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg q-values along the last axis: ``q_(i) = min_{j >= i} p_(j) · N / j``.

    Parameters
    ----------
    p : numpy.ndarray, shape (..., N), float64

    Returns
    -------
    numpy.ndarray, shape (..., N), float64, at most 1
    """
    p = np.asarray(p, dtype=np.float64)
    N = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ranked = np.take_along_axis(p, order, axis=-1) * N / np.arange(1, N + 1)
    ranked = np.minimum.accumulate(ranked[..., ::-1], axis=-1)[..., ::-1]
    q = np.empty_like(ranked)
    np.put_along_axis(q, order, np.minimum(ranked, 1.0), axis=-1)
    return q


def column_similarity(q: np.ndarray, t: np.ndarray, distance: str = "ed") -> np.ndarray:
    """Similarity of facing columns, for reports: ``1 - ||q - t||₂ / √2`` in [0, 1] (ed; 1 = equal
    columns, 0 = different certain letters) or Pearson's r in [-1, 1] (pearson).

    Parameters
    ----------
    q, t : numpy.ndarray, shape (k, 4), float64

    Returns
    -------
    numpy.ndarray, shape (k,), float64
    """
    q, t = np.asarray(q, np.float64), np.asarray(t, np.float64)
    if distance == "ed":
        return 1.0 - np.sqrt(((q - t) ** 2).sum(axis=1)) / math.sqrt(2.0)
    qc, tc = q - 0.25, t - 0.25
    den = np.sqrt((qc * qc).sum(axis=1) * (tc * tc).sum(axis=1))
    return np.where(den > 0, (qc * tc).sum(axis=1) / np.where(den > 0, den, 1.0), 0.0)


def alignment_similarity(q: np.ndarray, t: np.ndarray, offset: int, strand: int, distance: str = "ed") -> float:
    """Mean :func:`column_similarity` over the facing columns of one alignment.

    Parameters
    ----------
    q : numpy.ndarray, shape (n, 4)
    t : numpy.ndarray, shape (w, 4)
        The target as given; ``strand`` 1 aligns its reverse complement.
    offset, strand : int
        As in :class:`TomtomResult`.

    Returns
    -------
    float
        0 when no columns face each other.
    """
    t = t[::-1, ::-1] if strand else t
    i0, i1 = max(0, -offset), min(q.shape[0], t.shape[0] - offset)
    if i1 <= i0:
        return 0.0
    return float(column_similarity(q[i0:i1], t[i0 + offset:i1 + offset], distance).mean())
