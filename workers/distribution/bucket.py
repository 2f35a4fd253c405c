"""BUCKETSCOREDISTRIBUTION: score distributions of long PWMs from enumerated slices (TFM-CUDA §4.2–4.4).

The matrix ``M`` (m columns) is cut into ``N`` contiguous slices; the ``4^l`` words of each slice are
enumerated and the background probability of each word is added to the bucket of its score (CPU:
numba; GPU: CuPy, one thread per prefix walking the neighbouring suffixes, bucket increments with
shared-memory atomics).  The slice tables are then merged by convolution (direct, or FFT where it pays)
into the distribution of the whole matrix, from which SCORETOPVALUE and PVALUETOSCORE are read.

One grid for all slices (a design choice, see docs/architecture.md)
-------------------------------------------------------------------
The seed discretises every table, merged ones included, into ``B`` buckets of its own width
(``Δ_{Mi⊕Mj} = Δ_Mi + Δ_Mj``), which costs ``⌈1 + log2 N⌉ Δ_M`` in score (``Δ_M = (max M - min M)/B``).
Here every slice is bucketed on one common step ``δ = Δ_M / N`` (about ``B`` buckets per slice, as in
the seed) and the merges are exact integer convolutions — which is also what makes FFT merging
possible.  Only the ``N`` slice roundings remain: a word's score ``S`` and its cell ``K`` satisfy

    origin + δ K  <=  S  <  origin + δ K + N δ          (N δ = Δ_M  <=  ⌈1 + log2 N⌉ Δ_M)

(widened by the float64 error of the slice sums and of the scan, and by the tie width of
``workers.distribution.lattice``).  Hence, with ``G(k) = P(K >= k)``, the certified bracket

    G(ceil((s - origin + lo_err)/δ))  <=  Pv(s)  <=  G(ceil((s - origin - hi_err)/δ))

which is the seed's inequality ``Pv[s] <= Pv(s) <= Pv[s + ⌈1 + log N⌉ Δ_M]`` with a tighter right end.
FFT merges add a rounding error that is bounded (``fft_err``, absolute, typically 1e-14) and added
to both ends.

Precision
---------
With ``n_buckets`` given, ``δ = (max M - min M) / (N B)`` (the seed's fixed-``B`` mode).  Otherwise the
step is chosen for a requested relative precision of the p-values: a coarse pass locates each
threshold and the local decay rate of the tail, then the step is set so that the bracket at the
threshold is about half of ``rel_tol``, and refined until it holds (as the exact lattice of
``workers.distribution.exact`` does).  Slices below every threshold of interest are pruned (a cell that
cannot reach the lowest cut even with the best cells of the other slices is dropped).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workers.distribution.lattice import prepare_matrix
from workers.distribution.threshold import ScoreThreshold

_U = 2.0**-53
MAX_SLICE_CPU = 12           # 4^12 = 16.8 M words per slice at most when N is chosen automatically
MAX_SLICE_GPU = 16
MAX_CELLS = 1 << 22          # cells of the merged table (32 MB)
FFT_MIN = 1 << 16            # direct convolution below this product of lengths
COARSE_B = 512
RHO = 0.5                    # target bracket: RHO * rel_tol at the threshold
ENUM_COST = 1.5              # relative cost of one enumerated word vs one convolution cell·log


def split_slices(m: int, n: int) -> list[tuple[int, int]]:
    """Contiguous slices of near-equal length covering a matrix.

    Parameters
    ----------
    m : int
        Columns.
    n : int
        Slices, ``1 <= n <= m``.

    Returns
    -------
    list of (int, int)
        ``[a, b)`` column ranges, longer slices first.
    """
    if not 1 <= n <= m:
        raise ValueError(f"number of slices must be in 1..{m}, not {n}")
    base, extra = divmod(m, n)
    out, a = [], 0
    for i in range(n):
        b = a + base + (1 if i < extra else 0)
        out.append((a, b))
        a = b
    return out


def choose_slices(m: int, span_cells: float, device: str = "cpu") -> int:
    """The number of slices that minimises enumeration plus merge cost.

    Parameters
    ----------
    m : int
        Columns.
    span_cells : float
        Cells of one slice's table (the merged table holds ``N * span_cells``).
    device : {"cpu", "gpu"}
        The enumeration's device (the GPU enumerates longer slices).

    Returns
    -------
    int
        ``N``.
    """
    lmax = MAX_SLICE_GPU if device == "gpu" else MAX_SLICE_CPU
    best, best_cost = None, math.inf
    for n in range(max(1, math.ceil(m / lmax)), m + 1):
        words = sum(4 ** (b - a) for a, b in split_slices(m, n))
        cells = n * span_cells
        cost = ENUM_COST * words + n * cells * max(1.0, math.log2(max(cells, 2.0)))
        if device == "gpu":
            cost = words / 50.0 + n * cells * max(1.0, math.log2(max(cells, 2.0)))
        if cost < best_cost:
            best, best_cost = n, cost
    return int(best)


# ------------------------------------------------------------------------------------ slices
def _slice_hist(sc: np.ndarray, pr: np.ndarray, lo: float, delta: float, ncell: int,
                device: str) -> np.ndarray:
    if device == "gpu":
        from workers.distribution.bucket_gpu import slice_hist_gpu  # noqa: PLC0415

        return slice_hist_gpu(sc, pr, lo, delta, ncell)
    from workers.distribution.bucket_numba import slice_hist  # noqa: PLC0415

    out = np.zeros(ncell)
    slice_hist(np.ascontiguousarray(sc), np.ascontiguousarray(pr), float(lo), 1.0 / delta, out)
    return out


def _convolve(a, b, ea: float, eb: float):
    """Convolution of two non-negative tables and a bound on the l1 error of the result.

    ``ea``/``eb``: l1 error bounds of the inputs.  Direct convolution of non-negative numbers has a
    relative error below ``n u`` (negligible); FFT an absolute one, bounded through
    ``||fft(a*b) - a*b||_2 <= c u log2(n) ||a||_2 ||b||_2`` (``c = 8``) and ``||.||_1 <= sqrt(n) ||.||_2``.
    """
    xp = np if isinstance(a, np.ndarray) and isinstance(b, np.ndarray) else _cupy()
    sa, sb = float(a.sum()), float(b.sum())
    err = ea * sb + eb * sa
    n = a.size + b.size - 1
    if xp is np and (a.size * b.size <= FFT_MIN or min(a.size, b.size) < 64):
        return np.convolve(a, b), err + 4 * n * _U * sa * sb
    nfft = 1 << (n - 1).bit_length()
    c = xp.fft.irfft(xp.fft.rfft(xp.asarray(a), nfft) * xp.fft.rfft(xp.asarray(b), nfft), nfft)[:n]
    xp.maximum(c, 0.0, out=c)
    err += math.sqrt(n) * 8.0 * _U * math.log2(nfft) * float(xp.linalg.norm(a)) * float(xp.linalg.norm(b))
    return c, err


def _cupy():
    import cupy  # noqa: PLC0415

    return cupy


@dataclass
class BucketDistribution:
    """Bucketed score distribution of one PWM.

    ``mass[i] = P(K = k0 + i)`` for the cells ``>= k0`` (lower cells were pruned: their words cannot
    reach any cut asked for).  Cell ``k`` holds the words with ``origin + δk <= S < origin + δ(k + N)``
    (up to ``lo_err``/``hi_err``).
    """
    n_slices: int
    slices: list
    delta: float
    n_buckets: int           # effective B: (max - min) / (N δ)
    origin: float
    k0: int
    mass: np.ndarray
    lo_err: float            # origin + δK - lo_err <= S (scan's float sum, ties included)
    hi_err: float            # S <= origin + δK + hi_err
    fft_err: float           # absolute error bound of any tail sum
    max_score: float
    min_score: float
    tie: float
    device: str = "cpu"

    def __post_init__(self):
        n = self.mass.size
        self._g = np.zeros(n + 1)
        if n:
            self._g[:n] = np.cumsum(self.mass[::-1])[::-1]

    @property
    def delta_m(self) -> float:
        """``Δ_M = (max M - min M) / B`` of the seed."""
        return (self.max_score - self.min_score) / self.n_buckets

    @property
    def seed_bound(self) -> float:
        """The seed's score error bound ``⌈1 + log2 N⌉ Δ_M``."""
        return math.ceil(1.0 + math.log2(self.n_slices)) * self.delta_m

    def tail(self, k) -> np.ndarray:
        """``G(k) = P(K >= k)``; NaN below the computed cells (when cells were pruned)."""
        idx = np.asarray(k, dtype=np.int64) - self.k0
        g = self._g[np.clip(idx, 0, self.mass.size)]
        return g if self.k0 == 0 else np.where(idx < 0, np.nan, g)     # k0 = 0: nothing was pruned

    def _ka(self, s):
        return np.ceil((np.asarray(s, float) - self.origin - self.hi_err) / self.delta).astype(np.int64)

    def _kb(self, s):
        return np.ceil((np.asarray(s, float) - self.origin + self.lo_err) / self.delta).astype(np.int64)

    def pvalue_bounds(self, scores) -> tuple[np.ndarray, np.ndarray]:
        """Certified ``(low, high)`` brackets of ``Pv(s)`` (NaN where the cells were pruned)."""
        s = np.asarray(scores, dtype=np.float64)
        hi = np.minimum(self.tail(self._ka(s)) + self.fft_err, 1.0)
        lo = np.maximum(self.tail(self._kb(s)) - self.fft_err, 0.0)
        top = s - 0.5 * self.tie > self.max_score
        bottom = s - 0.5 * self.tie <= self.min_score
        hi = np.where(top, 0.0, np.where(bottom, 1.0, hi))
        lo = np.where(top, 0.0, np.where(bottom, 1.0, lo))
        return lo, hi

    def threshold(self, pvalue: float, rel_tol: float = math.nan) -> ScoreThreshold:
        """PVALUETOSCORE: smallest certified threshold ``alpha`` with ``Pv(alpha) <= pvalue``.

        ``score_error`` of the result bounds ``alpha - alpha*`` (``alpha*`` the exact smallest threshold
        with ``Pv <= p``): every score ``<= alpha - score_error`` has ``Pv > p``.
        """
        p = float(pvalue)
        g = self._g
        common = dict(requested_pvalue=p, rel_tol=rel_tol, exact_threshold=False,
                      max_score=self.max_score, tie=self.tie, eps=self.delta, has_table=False,
                      method="bucket", n_slices=self.n_slices, n_buckets=self.n_buckets,
                      seed_bound=self.seed_bound)
        # lowest cell whose certified upper bound is <= p (g is non-increasing)
        i = int(np.searchsorted(-(g + self.fft_err), -p, side="left"))
        if i == 0 and self.k0 > 0 and g[0] + self.fft_err <= p:
            raise ValueError("cells below the pruning cut are needed; recompute with a lower cut")
        ku = self.k0 + i
        alpha = self.origin + self.delta * ku + self.hi_err
        alpha += 1e-12 * max(1.0, abs(alpha))
        if alpha - 0.5 * self.tie > self.max_score:
            return ScoreThreshold(math.inf, 0.0, (0.0, 0.0), False, score_error=math.nan, **common)
        lo, hi = self.pvalue_bounds(alpha)
        # every score <= origin + δ k' - lo_err has Pv >= G(k') - fft_err > p
        j = int(np.searchsorted(-(g - self.fft_err), -p, side="left")) - 1
        if j < 0:
            if self.k0 > 0:
                raise ValueError("cells below the pruning cut are needed; recompute with a lower cut")
            s_low = self.min_score
        else:
            s_low = self.origin + self.delta * (self.k0 + j) - self.lo_err
        err = alpha - s_low
        return ScoreThreshold(alpha, float(hi), (float(lo), float(hi)), True, score_error=err, **common)


def _slice_info(P, slices, delta: float):
    """Per slice: (scores, probabilities, lowest score, cells, float slack η); and the origin."""
    info, origin = [], 0.0
    for a, b in slices:
        sc, pr, al = P.pwm[a:b], P.prob[a:b], P.allowed[a:b]
        lo = hi = 0.0
        for j in range(b - a):       # column order
            lo += float(sc[j][al[j]].min())
            hi += float(sc[j][al[j]].max())
        ncell = int(math.floor((hi - lo) / delta)) + 1
        abs_sum = float(np.abs(sc).max(axis=1).sum())
        eta = 1e-11 * (1.0 + abs_sum) + 8.0 * _U * (ncell + 1) * delta
        info.append((sc, pr, lo, ncell, eta))
        origin += lo
    return info, origin


def bucket_distribution(pwm, background, *, n_slices: int | None = None,
                        n_buckets: int | None = None, delta: float | None = None,
                        cut_score: float | None = None, device: str = "cpu") -> BucketDistribution:
    """BUCKETSCOREDISTRIBUTION of one matrix.

    Parameters
    ----------
    pwm : ndarray, shape (m, 4)
        Log-odds matrix (bits), ``-inf`` for letters that never match.
    background : ndarray, shape (4,)
    n_slices : int, optional
        ``N``; default: the cheapest for the step (``choose_slices``).
    n_buckets : int, optional
        ``B``: buckets per slice; sets ``δ = (max - min) / (N B)``.  Give this or ``delta``.
    delta : float, optional
        The common bucket width (bits).
    cut_score : float, optional
        Only scores ``>= cut_score`` are needed: slice cells that cannot reach it are dropped.
    device : "cpu" or "gpu"

    Returns
    -------
    BucketDistribution
        ``mass`` (n,) float64 over the cells ``>= k0`` and the certified error terms of its brackets.
    """
    P = prepare_matrix(pwm, background)
    if P.dead:
        raise ValueError("every word of this matrix scores -inf (a column allows no letter)")
    if (delta is None) == (n_buckets is None):
        raise ValueError("give exactly one of n_buckets and delta")
    rng = max(P.max_score - P.min_score, 1e-9)
    if n_slices is None:
        per_slice = n_buckets if n_buckets is not None else rng / delta
        n_slices = choose_slices(P.m, per_slice, device)
    n = int(n_slices)
    slices = split_slices(P.m, n)
    delta = float(delta) if delta is not None else rng / (n * int(n_buckets))
    info, origin = _slice_info(P, slices, delta)
    eta = float(sum(i[4] for i in info))
    lo_err = eta + P.fe + 0.5 * P.tie
    hi_err = n * delta + eta + P.fe + 0.5 * P.tie
    common = dict(n_slices=n, slices=slices, delta=delta, n_buckets=max(1, int(round(rng / (n * delta)))),
                  origin=origin, lo_err=lo_err, hi_err=hi_err, max_score=P.max_score,
                  min_score=P.min_score, tie=P.tie, device=device)
    k_cut = None
    if cut_score is not None:
        k_cut = max(0, math.ceil((float(cut_score) - origin - hi_err) / delta) - 1)
    kmax_total = sum(i[3] - 1 for i in info)
    tabs = []
    for sc, pr, lo, ncell, _ in info:
        start = 0 if k_cut is None else max(0, k_cut - (kmax_total - (ncell - 1)))
        if start >= ncell:      # nothing reaches the cut
            return BucketDistribution(k0=k_cut, mass=np.zeros(0), fft_err=0.0, **common)
        h = _slice_hist(sc, pr, lo, delta, ncell, device)
        tabs.append((start, ncell - 1, h[start:]))
    tabs.sort(key=lambda t: t[2].size)       # merge the small tables first
    k0, _, acc = tabs[0]
    rest = sum(t[1] for t in tabs[1:])       # best cells of the slices not merged yet
    err = 0.0
    for s2, top2, t2 in tabs[1:]:
        acc, err = _convolve(acc, t2, err, 0.0)
        k0 += s2
        rest -= top2
        if k_cut is not None and k_cut - rest > k0:       # cells that cannot reach the cut any more
            acc = acc[k_cut - rest - k0:]
            k0 = k_cut - rest
    if k_cut is not None and k_cut > k0:
        acc = acc[k_cut - k0:]
        k0 = k_cut
    if device == "gpu" and not isinstance(acc, np.ndarray):
        acc = acc.get()
    return BucketDistribution(k0=k0, mass=np.ascontiguousarray(acc, dtype=np.float64), fft_err=err, **common)


def pvalues_to_scores_bucket(pwm, background, pvalues, rel_tol: float = 1e-3, *,
                             n_slices: int | None = None, n_buckets: int | None = None,
                             device: str = "cpu", max_passes: int = 4) -> list[ScoreThreshold]:
    """PVALUETOSCORE for several p-values of one matrix from one bucketed distribution.

    With ``n_buckets`` the seed's fixed-``B`` computation (full distribution, one pass); otherwise the
    step adapts until every bracket is within ``rel_tol`` (or ``max_passes`` refinements were made,
    or the table would exceed ``MAX_CELLS``; the achieved brackets are reported either way).

    Parameters
    ----------
    pwm : ndarray, shape (m, 4), float
        Log-odds matrix (bits), ``-inf`` for letters that never match.
    background : ndarray, shape (4,)
    pvalues : float or sequence of float
    rel_tol : float
        Relative width of the p-value brackets asked for.
    n_slices, n_buckets : int, optional
        The seed's ``N`` and ``B`` (default: ``N`` chosen per step, ``B`` adaptive).
    device : {"cpu", "gpu"}
        Where the slices are enumerated (and, on the GPU, merged).
    max_passes : int
        Refinements of the step at most.

    Returns
    -------
    list of ScoreThreshold
        One per p-value, in order (``method="bucket"``, no tail table).
    """
    ps = [float(p) for p in np.atleast_1d(pvalues)]
    if not 0.0 < rel_tol < 1.0:
        raise ValueError("rel_tol must lie in (0, 1)")
    P = prepare_matrix(pwm, background)
    if P.dead:
        return [ScoreThreshold(math.inf, 0.0, (0.0, 0.0), False, requested_pvalue=p, method="bucket",
                               has_table=False) for p in ps]
    rng = max(P.max_score - P.min_score, 1e-9)
    if n_buckets is not None:
        d = bucket_distribution(pwm, background, n_slices=n_slices, n_buckets=n_buckets, device=device)
        return [d.threshold(p, rel_tol) for p in ps]
    # coarse pass: full distribution, B = COARSE_B per slice
    n = n_slices or choose_slices(P.m, COARSE_B, device)
    d = bucket_distribution(pwm, background, n_slices=n, n_buckets=COARSE_B, device=device)
    need, lows = [], []
    for p in ps:
        t = d.threshold(p, rel_tol)
        lows.append(t.threshold - t.score_error if t.reachable else P.max_score - 1.0)
        ku = math.ceil((t.threshold - d.origin - d.hi_err) / d.delta) if t.reachable else d.k0 + d.mass.size
        w = max(n + 1, int(math.ceil(0.5 / d.delta)))
        g1 = float(d.tail(max(ku - w, d.k0)))
        g2 = float(d.tail(ku + w))
        span = (min(ku + w, d.k0 + d.mass.size) - max(ku - w, d.k0)) * d.delta
        lam = math.log(g1 / g2) / span if g2 > 0 and span > 0 else 8.0
        lam = min(max(lam, 0.1), 30.0)
        need.append(math.log1p(RHO * rel_tol) / (lam * (n + 1.5)))
    delta = max(min(need), rng / MAX_CELLS)
    cut = min(lows) - 1e-9
    result = None
    for _ in range(max_passes):
        if n_slices is None:
            n = choose_slices(P.m, rng / delta / max(n, 1), device)
            delta = max(delta, rng / MAX_CELLS)
        d = bucket_distribution(pwm, background, n_slices=n, delta=delta, cut_score=cut, device=device)
        try:
            result = [d.threshold(p, rel_tol) for p in ps]
        except ValueError:          # the cut was too high (coarse pass misled): no pruning
            cut = P.min_score
            continue
        worst = max((t.pvalue_bounds[1] / t.pvalue_bounds[0] - 1.0) if t.pvalue_bounds[0] > 0
                    else (0.0 if t.pvalue_bounds[1] == 0 else math.inf) for t in result)
        if worst <= rel_tol or delta <= rng / MAX_CELLS * 1.01:
            break
        shrink = 4.0 if not math.isfinite(worst) else min(8.0, max(2.0, 1.5 * worst / rel_tol))
        delta = max(delta / shrink, rng / MAX_CELLS)
    return result
