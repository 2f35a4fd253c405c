"""PROJECTION (Buhler & Tompa; Clemente, Cabarle & Adorna on GPUs) and batched EM refinement.

One trial projects every window (``l``-mer) onto ``k`` random positions, buckets the windows by their
projected ``k``-mer and keeps the buckets holding at least ``s`` windows (the enriched buckets).  Bucketing
is a sort of integer keys (``trial * 2^31 + k-mer code``) for a whole batch of trials at once — one 1-D
argsort on the device, no ``4^k`` table and no ``O(x^2)`` all-pairs comparison as in the paper's GPU
version.  Each enriched bucket seeds a motif model (its windows' letter frequencies plus a pseudocount);
the models of every trial of a batch are refined together by EM, where one iteration over ``C`` models is
two GEMMs on the one-hot windows (:mod:`workers.discover.windows`) and a per-sequence softmax.

EM is OOPS or ZOOPS, on one or both strands.  It screens: ``screen_iters`` iterations on every
candidate, then only the best ``keep`` (by the likelihood) go on, which is where the work goes on real
data (hundreds of thousands of buckets).  Candidate batches are chunked so the ``(T, P, C)`` score array
stays within a memory budget.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from workers.backend import to_numpy
from workers.discover.windows import Windows

#: Largest projection: a k-mer code must fit the 31 low bits of a sort key.
MAX_K = 15
#: PROJECTION trials at most: Buhler & Tompa's count is capped here (where it reaches the cap, the planted
#: bucket is out of reach: pipeline.discover.run leaves PROJECTION out of an ``--algorithm both`` round)
MAX_TRIALS = 100_000
#: Keys of invalid windows sort last and never form a bucket.
_SENTINEL = np.int64(1) << np.int64(62)


# ------------------------------------------------------------------------------------ parameters
def planted_bucket_probability(l: int, d: int, k: int) -> float:
    """The probability that a planted occurrence's projection equals the motif's, ``p̂ = C(l-d, k) / C(l, k)``.

    Parameters
    ----------
    l, d, k : int
        Motif width, mutations, projected positions.

    Returns
    -------
    float
    """
    if k > l - d:
        return 0.0
    return math.comb(l - d, k) / math.comb(l, k)


def binom_cdf_below(n: int, p: float, s: int) -> float:
    """``P(Bin(n, p) < s)``.

    Parameters
    ----------
    n : int
    p : float
    s : int

    Returns
    -------
    float
    """
    return float(sum(math.comb(n, i) * p ** i * (1 - p) ** (n - i) for i in range(0, min(s, n + 1))))


@dataclass(frozen=True)
class ProjectionParameters:
    """PROJECTION's parameters for one run (:func:`choose_parameters`): ``k`` projected positions, bucket size
    ``s`` that counts as enriched, ``m`` trials."""
    k: int
    s: int
    m: int
    p_hat: float           # probability a planted occurrence lands in the planted bucket
    t_hat: int             # sequences expected to hold an occurrence
    q: float               # asked probability that some trial's planted bucket reaches s


def choose_parameters(l: int, d: int, t: int, n: int, both_strands: bool = False, model: str = "oops",
                      k: int | None = None, s: int | None = None, m: int | None = None, q: float = 0.95,
                      max_trials: int = MAX_TRIALS) -> ProjectionParameters:
    """k, s and m as Buhler & Tompa derive them, where not given.

    ``k``: the smallest projection size with ``4^k`` above the number of windows (so random buckets stay
    small), but below ``l - d`` (so planted occurrences still share projections).  ``s``: twice the mean
    random bucket size, at least 3 (the paper's 3-4 for the challenge problems).  ``m``: trials so that, with
    probability ``q``, at least one trial's planted bucket holds ``s`` or more planted occurrences:
    ``m = ceil(log(1 - q) / log B(t̂, p̂, s))`` with ``B`` the binomial probability of fewer than ``s``.
    ``t̂`` is ``t`` (OOPS) or ``ceil(0.75 t)`` (ZOOPS).

    Parameters
    ----------
    l, d : int
        Motif width and mutations (``0 <= d < l``).
    t, n : int
        Sequences and their length.
    both_strands : bool
    model : {"oops", "zoops"}
    k, s, m : int, optional
        Given values are kept (``k`` checked).
    q : float
    max_trials : int

    Returns
    -------
    ProjectionParameters
    """
    if l < 2:
        raise ValueError(f"motif width must be >= 2, got {l}")
    if not 0 <= d < l:
        raise ValueError(f"mutations d must be in [0, width), got d={d} for width {l}")
    windows = max(1, t * max(1, n - l + 1) * (2 if both_strands else 1))
    if k is None:
        k = 1
        while 4 ** k <= windows and k < l - d - 1:
            k += 1
        k = max(1, min(k, l - d - 1 if l - d > 1 else 1, MAX_K))
    if not 1 <= k <= min(l, MAX_K):
        raise ValueError(f"projection size k must be in [1, min(width, {MAX_K})], got {k}")
    if s is None:
        s = max(3, math.ceil(2 * windows / 4 ** k))
    t_hat = t if model == "oops" else max(1, math.ceil(0.75 * t))
    p_hat = planted_bucket_probability(l, d, k)
    if m is None:
        below = binom_cdf_below(t_hat, p_hat, s)
        if below >= 1.0:
            m = max_trials
        elif below <= 0.0:
            m = 1
        else:
            m = math.ceil(math.log(1 - q) / math.log(below))
        m = int(min(max(m, 4), max_trials))
    return ProjectionParameters(k=int(k), s=int(s), m=int(m), p_hat=p_hat, t_hat=t_hat, q=q)


# ------------------------------------------------------------------------------------ trials
def projection_seeds(win: Windows, k: int, s: int, positions: np.ndarray, max_buckets: int = 1000,
                     pseudocount: float = 1.0, bg: np.ndarray | None = None):
    """Enriched buckets of a batch of trials and the motif models they seed.

    Parameters
    ----------
    win : Windows
    k, s : int
        Projection size and bucket threshold.
    positions : numpy.ndarray, shape (m, k), int
        The projected positions of each trial (sorted within a row).
    max_buckets : int
        At most this many buckets per trial (the largest; ties by key) go on to EM.
    pseudocount : float
        Total pseudocount (spread by ``bg``) added to a bucket's letter counts.
    bg : numpy.ndarray, shape (4,), optional (uniform)

    Returns
    -------
    ppm : numpy.ndarray, shape (B, l, 4), float64 (host)
    info : numpy.ndarray, shape (B, 3), int64
        trial index, bucket size and projected k-mer code of each seed.
    """
    xp = win.xp
    T, P, l = win.T, win.P, win.l
    bg = np.full(4, 0.25) if bg is None else np.asarray(bg, np.float64)
    m = positions.shape[0]
    if m == 0:
        return np.zeros((0, l, 4)), np.zeros((0, 3), np.int64)
    N = T * P
    codes = win.dcodes.reshape(N, l)
    valid = xp.asarray(win.valid.reshape(N))
    pos = xp.asarray(positions.astype(np.int64))                              # (m, k)
    shifts = xp.asarray((2 * np.arange(k)).astype(np.int64))
    # (m, N) k-mer codes: gather the k projected columns of every window for every trial
    kmer = (codes[:, pos].astype(xp.int64) << shifts[None, None, :]).sum(axis=2).T   # (m, N)
    trial = xp.arange(m, dtype=xp.int64)[:, None]
    keys = xp.where(valid[None, :], (trial << 31) + kmer, _SENTINEL + trial).ravel()
    order = xp.argsort(keys, kind="stable") if xp is np else xp.argsort(keys)
    sk = keys[order]
    starts = xp.flatnonzero(xp.concatenate([xp.ones(1, bool), sk[1:] != sk[:-1]]))
    lens = xp.diff(xp.concatenate([starts, xp.asarray([sk.size])]))
    ok = (lens >= s) & (sk[starts] < _SENTINEL)
    starts, lens = starts[ok], lens[ok]
    bkeys = sk[starts]
    btrial = bkeys >> 31
    # largest buckets first within a trial, ties by key (deterministic); at most max_buckets per trial
    h_trial, h_len, h_key = (np.asarray(to_numpy(a)) for a in (btrial, lens, bkeys & ((1 << 31) - 1)))
    h_starts = np.asarray(to_numpy(starts))
    rank = np.lexsort((h_key, -h_len, h_trial))
    h_trial, h_len, h_key, h_starts = h_trial[rank], h_len[rank], h_key[rank], h_starts[rank]
    first = np.searchsorted(h_trial, h_trial, side="left")
    keep = (np.arange(h_trial.size) - first) < max_buckets
    h_trial, h_len, h_key, h_starts = h_trial[keep], h_len[keep], h_key[keep], h_starts[keep]
    B = h_trial.size
    if B == 0:
        return np.zeros((0, l, 4)), np.zeros((0, 3), np.int64)
    # letter counts of each bucket's members: expand runs to member rows, scatter-add their one-hot rows
    total = int(h_len.sum())
    bid = np.repeat(np.arange(B), h_len)
    offs = np.arange(total) - np.repeat(np.cumsum(h_len) - h_len, h_len)
    member = xp.asarray(h_starts[bid] + offs)
    rows = order[member] % N
    onehot = win.onehot.reshape(N, 4 * l)
    counts = xp.zeros((B, 4 * l), xp.float32)
    _scatter_add(xp, counts, xp.asarray(bid), onehot[rows])
    counts = np.asarray(to_numpy(counts), np.float64).reshape(B, l, 4)
    ppm = (counts + pseudocount * bg) / (h_len[:, None, None] + pseudocount)
    return ppm, np.stack([h_trial, h_len, h_key], axis=1).astype(np.int64)


def random_positions(rng: np.random.Generator, m: int, l: int, k: int) -> np.ndarray:
    """Random projections: sorted ``k``-subsets of the motif positions.

    Parameters
    ----------
    rng : numpy.random.Generator
    m, l, k : int
        Trials, width, positions per trial.

    Returns
    -------
    ndarray, shape (m, k), int64
    """
    return np.sort(np.argsort(rng.random((m, l)), axis=1)[:, :k], axis=1)


def _scatter_add(xp, out, idx, vals):
    if xp is np:
        np.add.at(out, idx, vals)
    else:
        import cupyx  # noqa: PLC0415

        cupyx.scatter_add(out, idx, vals)


# ------------------------------------------------------------------------------------ EM
@dataclass
class EMResult:
    """Refined motif models, best first.

    ppm : (C, l, 4) float64; loglik : (C,) log-likelihood ratio to the background (nats) of the final
    models; gamma : (C,) ZOOPS fraction of sequences with a site (1 for OOPS); index : (C,) index of each
    model in the input.
    """
    ppm: np.ndarray
    loglik: np.ndarray
    gamma: np.ndarray
    index: np.ndarray


def _chunk(win: Windows, budget: int) -> int:
    return max(1, budget // max(1, win.T * win.P))


def _e_step(win: Windows, logodds, gamma, zoops: bool, want_counts: bool):
    """One E-step for models ``logodds (C, 4l)`` (natural log); returns ll (C,), counts (C, 4l), gamma (C,).

    Scores are laid out ``(C, T, P)`` so the per-sequence reductions run along the contiguous axis.
    """
    xp = win.xp
    T, P, l4 = win.T, win.P, 4 * win.l
    C = logodds.shape[0]
    X = win.onehot.reshape(T * P, l4)
    S = (logodds @ X.T).reshape(C, T, P)
    if not win.valid.all():
        S += win.bias[:, :, 0][None]
    mx = S.max(axis=2, keepdims=True)
    S -= mx
    E = xp.exp(S, out=S)
    Z = E.sum(axis=2)                                                  # (C, T)
    has = xp.asarray(win.n_valid > 0)[None, :]
    lognv = xp.asarray(np.log(np.maximum(win.n_valid, 1)).astype(np.float32))[None, :]
    seq = xp.where(has, mx[:, :, 0] + xp.log(Z) - lognv, 0.0)          # log mean likelihood ratio per sequence
    if zoops:
        lg, l1g = xp.log(gamma)[:, None], xp.log1p(-gamma)[:, None]
        a = seq + lg
        tot = xp.logaddexp(a, l1g)
        post = xp.where(has, xp.exp(a - tot), 0.0)
        ll = xp.where(has, tot, 0.0).sum(axis=1)
    else:
        post = xp.broadcast_to(xp.where(has, 1.0, 0.0).astype(xp.float32), (C, T))
        ll = seq.sum(axis=1)
    if not want_counts:
        return ll, None, None
    E *= (post / Z)[:, :, None].astype(E.dtype)
    counts = E.reshape(C, T * P) @ X
    ng = max(1, int((win.n_valid > 0).sum()))
    return ll, counts, post.sum(axis=1) / ng


def em_refine(win: Windows, ppm0: np.ndarray, bg: np.ndarray, model: str = "oops", iters: int = 5,
              screen_iters: int = 1, keep: int | None = None, gamma0: float = 0.5, pseudocount: float = 0.5,
              memory_budget: int = 1 << 24, screen_sequences: int | None = None) -> EMResult:
    """Batched EM from ``C`` starting models; returns the best ``keep`` (all if None), best first.

    Parameters
    ----------
    win : Windows
    ppm0 : numpy.ndarray, shape (C, l, 4)
        Starting letter probabilities (rows > 0).
    bg : numpy.ndarray, shape (4,)
    model : "oops" | "zoops"
    iters : int
        EM iterations in all (M-steps).
    screen_iters : int
        Iterations run on every model before only the best ``keep`` go on.
    keep : int, optional
    gamma0 : float
        ZOOPS starting fraction of sequences with a site.
    pseudocount : float
        Total pseudocount, spread by ``bg``, in every M-step.
    memory_budget : int
        Elements of the ``(T, P, C)`` score array per chunk of models.
    screen_sequences : int, optional
        With ``screen_iters=0``: screen on this many evenly spaced sequences only (when there are more):
        on large sets the screen's ranking needs only a sample of the sequences.

    Returns
    -------
    EMResult
        ``ppm (K, l, 4)``, ``loglik (K,)``, ``gamma (K,)`` and the starting model's ``index (K,)``, best first.
    """
    xp = win.xp
    l = win.l
    zoops = model == "zoops"
    ppm0 = np.asarray(ppm0, np.float64)
    C = ppm0.shape[0]
    bgx = np.asarray(bg, np.float64)
    logbg = np.tile(np.log(bgx), l)
    theta = np.log(np.maximum(ppm0.reshape(C, 4 * l), 1e-12)) - logbg     # (C, 4l) host float64
    gamma = np.full(C, gamma0 if zoops else 1.0)
    idx = np.arange(C)
    ll = np.full(C, -np.inf)
    chunk = _chunk(win, memory_budget)
    if keep is not None and screen_iters == 0 and keep < C:
        # screen on the starting models' likelihood (E-step only, no M-step GEMM), keep the best
        sw = win
        if screen_sequences is not None and win.T > screen_sequences:
            sw = win.subset(np.unique(np.linspace(0, win.T - 1, screen_sequences).round().astype(np.int64)))
        sch = _chunk(sw, memory_budget)
        for a in range(0, C, sch):
            lo = xp.asarray(theta[a:a + sch].astype(np.float32))
            g = xp.asarray(np.clip(gamma[a:a + sch], 1e-4, 1 - 1e-4).astype(np.float32))
            ll[a:a + sch] = np.asarray(to_numpy(_e_step(sw, lo, g, zoops, want_counts=False)[0]), np.float64)
        top = np.argsort(-ll, kind="stable")[:keep]
        theta, gamma, idx, ll = theta[top], gamma[top], idx[top], ll[top]
    for it in range(iters + 1):
        last = it == iters
        new_theta, new_gamma = np.empty_like(theta), np.empty_like(gamma)
        for a in range(0, theta.shape[0], chunk):
            lo = xp.asarray(theta[a:a + chunk].astype(np.float32))
            g = xp.asarray(np.clip(gamma[a:a + chunk], 1e-4, 1 - 1e-4).astype(np.float32))
            ll_c, counts, g_new = _e_step(win, lo, g, zoops, want_counts=not last)
            ll[a:a + chunk] = np.asarray(to_numpy(ll_c), np.float64)
            if not last:
                cnt = np.asarray(to_numpy(counts), np.float64).reshape(-1, l, 4)
                p = (cnt + pseudocount * bgx) / (cnt.sum(axis=2, keepdims=True) + pseudocount)
                new_theta[a:a + chunk] = np.log(np.maximum(p.reshape(-1, 4 * l), 1e-12)) - logbg
                new_gamma[a:a + chunk] = np.asarray(to_numpy(g_new), np.float64) if zoops else 1.0
        if last:
            break
        if keep is not None and it + 1 == screen_iters and keep < theta.shape[0]:
            # ll is the likelihood of the models before this M-step: rank on it, keep the best
            top = np.argsort(-ll, kind="stable")[:keep]
            new_theta, new_gamma, idx, ll = new_theta[top], new_gamma[top], idx[top], ll[top]
        theta, gamma = new_theta, np.clip(new_gamma, 1e-4, 1 - 1e-4) if zoops else new_gamma
    order = np.argsort(-ll, kind="stable")
    if keep is not None:
        order = order[:keep]
    ppm = np.exp(theta + logbg).reshape(-1, l, 4)
    ppm /= ppm.sum(axis=2, keepdims=True)
    return EMResult(ppm=ppm[order], loglik=ll[order], gamma=gamma[order], index=idx[order])


def em_sites(win: Windows, ppm: np.ndarray, bg: np.ndarray, model: str = "oops", gamma: float = 1.0):
    """Best window of every sequence under one model and its posterior of holding a site.

    Parameters
    ----------
    win : Windows
    ppm : numpy.ndarray, shape (l, 4)
    bg : numpy.ndarray, shape (4,)
    model : {"oops", "zoops"}
    gamma : float
        ZOOPS prior fraction of sequences with a site.

    Returns
    -------
    best : numpy.ndarray, shape (T,), int64
        Window index (see :meth:`Windows.position`).
    score : numpy.ndarray, shape (T,), float64
        Log2-odds score (bits) of that window.
    post : numpy.ndarray, shape (T,), float64
        P(site in the sequence) (ZOOPS); 1 for OOPS.
    """
    l = win.l
    bg = np.asarray(bg, np.float64)
    w2 = np.log2(np.maximum(np.asarray(ppm, np.float64), 1e-12) / bg)          # (l, 4) bits
    codes = win.codes
    sc = np.zeros(win.valid.shape)
    for j in range(l):
        sc += w2[j][np.minimum(codes[:, :, j], 3)]
    sc = np.where(win.valid, sc, -np.inf)
    best = np.argmax(sc, axis=1)
    bscore = sc[np.arange(win.T), best]
    if model == "oops":
        return best, bscore, np.where(win.n_valid > 0, 1.0, 0.0)
    lnr = sc * np.log(2)
    mx = np.max(np.where(np.isfinite(lnr), lnr, -1e300), axis=1, keepdims=True)
    with np.errstate(divide="ignore"):     # a sequence without a valid window: log(0) = -inf, its post 0 below
        seq = mx[:, 0] + np.log(np.exp(lnr - mx).sum(axis=1)) - np.log(np.maximum(win.n_valid, 1))
    g = min(max(gamma, 1e-4), 1 - 1e-4)
    a = seq + np.log(g)
    post = np.exp(a - np.logaddexp(a, np.log1p(-g)))
    return best, bscore, np.where(win.n_valid > 0, post, 0.0)
