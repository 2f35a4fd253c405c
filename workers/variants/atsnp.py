"""atSNP's statistics of an SNV (Zuo, Shin & Keles 2015) under a first-order Markov background, by importance
sampling, on NumPy or CuPy (``xp``).

For a motif of ``L`` columns, ``X`` is a random ``(2L - 1)``-mer of the Markov chain (first base from ``prior``, then
``trans``) and ``M(X)`` the best score among the ``2L`` windows containing its centre (``L`` starts × the motif's two
strand matrices, each applied to the forward strand, as motifgrid scores).  An allele whose best covering window
scores ``s`` has the p-value ``G(s) = P(M(X) >= s)``: the chance that a random stretch around a random SNV holds a
match this good somewhere over it — not the per-window p-value of the other columns, which ignores that ``L`` windows
on two strands were searched.  The change: ``X^b`` is ``X`` with its centre replaced by one of the three other bases
(uniform), ``D = ln G(M(X)) - ln G(M(X^b))``, and an SNV whose alleles have ``G_ref``, ``G_alt`` has the change
p-value ``H(r) = P(|D| >= r)``, ``r = |ln G_ref - ln G_alt|`` (atSNP's ``pval_rank``).

Both are tails of one distribution per motif, so they are estimated once per motif (not per variant) from ``n``
samples of a defensive mixture proposal: with probability ``a0`` the Markov chain itself, otherwise the chain tilted by
``exp(theta_k S_w(x))`` for one of the ``2L`` windows ``w`` and one of ``K`` tilts ``theta_k`` (chosen so that the
tilted mean score of one window sweeps from the chain's mean to near the best score), sampled exactly by backward
messages.  Each sample's weight is ``P(x) / q(x)`` over the whole mixture (all windows, both strands, every tilt:
atSNP's own proposal tilts the forward windows only and under-estimates non-palindromic motifs about twofold at small
p), so one weighted sample estimates ``G`` at every threshold and ``H`` at every ``r``, each with its standard error
(``rse``: relative).  Tables keep ``GRID`` thresholds per motif; values between are interpolated in ``ln G``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

GRID = 1024             # thresholds kept per table
TIE = 1e-9              # a sample this close below a threshold ties with it (sums in another order round apart)
TILTS = 6               # tilts besides the chain itself
DEFENSIVE = 0.1         # the chain's share of the mixture


@dataclass
class Tail:
    """A tail function on a grid: ``P(stat >= x[i]) = exp(logp[i])`` (``x`` ascending), its relative standard
    error."""
    x: np.ndarray
    logp: np.ndarray
    rse: np.ndarray
    steps: bool             # every distinct sampled threshold kept: the estimate is a step function

    def at(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(ln P(stat >= v), rse)``: the estimate at the first kept threshold at or above ``v`` where every
        sampled one is kept, else interpolated in ``ln P`` between kept thresholds; above the last, its value (no
        sample reached ``v``: an upper bound, rse inf)."""
        v = np.asarray(v, np.float64) - TIE
        i = np.clip(np.searchsorted(self.x, v, side="left"), 0, self.x.size - 1)
        logp = self.logp[i] if self.steps else np.interp(v, self.x, self.logp, left=0.0, right=self.logp[-1])
        logp = np.where(v <= self.x[0], np.maximum(logp, self.logp[0]), logp)
        rse = np.where(v > self.x[-1], np.inf, self.rse[i])
        return logp, rse


@dataclass
class MotifTails:
    allele: Tail            # G over M(X)
    change: Tail            # H over |D|
    samples: int


def markov_of(pairs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(prior, trans)`` of dinucleotide counts ``pairs`` (4, 4): the chain's stationary-ish start (the first bases'
    frequencies) and its row-normalised transitions."""
    pairs = np.asarray(pairs, np.float64) + 1.0
    trans = pairs / pairs.sum(axis=1, keepdims=True)
    prior = pairs.sum(axis=1) / pairs.sum()
    return prior, trans


def _log_z(w: np.ndarray, theta: np.ndarray, prior, trans) -> np.ndarray:
    """``ln E[exp(theta S)]`` of one window of ``w`` under the chain, for every tilt of ``theta`` at once (forward
    recursion, scaled)."""
    theta = np.asarray(theta, np.float64)[:, None]
    top = w.max(axis=1)
    f = prior[None, :] * np.exp(theta * (w[0] - top[0]))
    log = theta[:, 0] * top.sum()
    for j in range(1, w.shape[0]):
        f = (f @ trans) * np.exp(theta * (w[j] - top[j]))
        s = f.sum(axis=1, keepdims=True)
        f /= s
        log += np.log(s[:, 0])
    return log + np.log(f.sum(axis=1))


def tilts(w: np.ndarray, prior, trans, k: int = TILTS) -> np.ndarray:
    """``k`` tilts whose one-window tilted means sweep from the chain's mean score to 97 % of the way to the best
    (bisection on every tilt at once)."""
    def mean(t):
        h = 1e-4
        return (_log_z(w, t + h, prior, trans) - _log_z(w, t - h, prior, trans)) / (2 * h)

    lo, top = float(mean(np.zeros(1))[0]), float(w.max(axis=1).sum())
    target = lo + 0.97 * (top - lo) * np.arange(1, k + 1) / k
    a, b = np.zeros(k), np.ones(k)
    for _ in range(12):
        low = (mean(b) < target) & (b < 1e3)
        if not low.any():
            break
        b = np.where(low, 2 * b, b)
    for _ in range(30):
        c = (a + b) / 2
        below = mean(c) < target
        a, b = np.where(below, c, a), np.where(below, b, c)
    return (a + b) / 2


def _messages(rows: list, thetas: np.ndarray, prior, trans):
    """Normalised backward messages ``(C, n, 4)`` and ``ln Z`` (C,) of every component (tilt, strand row, start),
    and each component's (tilt index, row, start); all components at once, a position at a time."""
    L = rows[0].shape[0]
    n = 2 * L - 1
    comps = np.array([(k, r, s) for k in range(thetas.size) for r in range(2) for s in range(L)])
    C = len(comps)
    w = np.stack(rows)[comps[:, 1]]                                          # (C, L, 4)
    th = thetas[comps[:, 0]][:, None, None]
    e = np.ones((C, n, 4))
    idx = comps[:, 2][:, None] + np.arange(L)[None, :]                       # the window's positions
    e[np.arange(C)[:, None], idx] = np.exp(th * (w - w.max(axis=2, keepdims=True)))
    shift = thetas[comps[:, 0]] * w.max(axis=2).sum(axis=1)
    beta = np.empty((C, n, 4))
    beta[:, n - 1] = e[:, n - 1]
    log = np.zeros(C)
    for i in range(n - 2, -1, -1):
        b = e[:, i] * (beta[:, i + 1] @ trans.T)
        t = b.sum(axis=1, keepdims=True)
        beta[:, i] = b / t
        log += np.log(t[:, 0])
    return beta, shift + log + np.log(beta[:, 0] @ prior), comps


def _window_scores(xp, x, rows_x, L: int):
    """``(N, 2, L)`` scores of every sample's windows (row, start)."""
    N = x.shape[0]
    out = xp.zeros((N, 2, L))
    for r in range(2):
        for j in range(L):
            out[:, r, :] += rows_x[r][j][x[:, j:j + L]]
    return out


def _sample(xp, rng, N: int, betas, comp_p, prior, trans):
    """``N`` sequences of the mixture: a component each, then bases forward by its backward messages."""
    comp = rng.choice(len(comp_p), size=N, p=comp_p)
    b = xp.asarray(betas)[xp.asarray(comp)]                 # (N, n, 4)
    T = xp.asarray(trans)
    n = b.shape[1]
    x = xp.empty((N, n), xp.int64)
    u = xp.asarray(rng.random((N, n)))
    p = xp.asarray(prior)[None, :] * b[:, 0]
    for i in range(n):
        if i:
            p = T[x[:, i - 1]] * b[:, i]
        c = xp.cumsum(p, axis=1)
        x[:, i] = xp.minimum((u[:, i:i + 1] * c[:, -1:] > c).sum(axis=1), 3)
    return x


def _tail(xp, stat, weight, total: int, per_sample: int = 1) -> Tail:
    """The weighted tail ``P(stat >= t)`` at up to ``GRID`` of the samples' thresholds, spread evenly in ``ln P``.
    ``per_sample`` values of ``stat`` come from each of the ``total`` samples: their terms are not independent, so
    the variance is bounded by ``per_sample`` times the sum of their squares (Cauchy-Schwarz)."""
    order = xp.argsort(-stat)
    s, w = stat[order], weight[order]
    cw, cw2 = xp.cumsum(w) / total, xp.cumsum(w * w) / total      # P(stat >= s[i]) with every tie of s[i]
    last = xp.concatenate([s[1:] != s[:-1], xp.ones(1, bool)])
    s, cw, cw2 = (np.asarray(_host(a[last]))[::-1] for a in (s, cw, cw2))   # thresholds ascending
    logp = np.minimum(np.log(np.maximum(cw, 1e-300)), 0.0)                    # from ~0 down
    targets = np.linspace(logp[0], logp[-1], GRID)
    pick = np.unique(np.concatenate([np.searchsorted(-logp, -targets, side="left").clip(0, s.size - 1),
                                     [0, s.size - 1]]))
    rse = np.sqrt(np.maximum(per_sample * cw2 - cw * cw, 0) / total) / np.maximum(cw, 1e-300)
    if s.size <= GRID:
        pick = np.arange(s.size)
    return Tail(np.ascontiguousarray(s[pick]), np.ascontiguousarray(logp[pick]), np.ascontiguousarray(rse[pick]),
                s.size <= GRID)


def _host(a):
    return a.get() if hasattr(a, "get") else a


def motif_tails(plus: np.ndarray, minus: np.ndarray, prior, trans, n: int = 20_000, seed: int = 1,
                xp=np) -> MotifTails:
    """The allele and change tails of one motif (its two strand matrices, (L, 4) each) from ``n`` samples."""
    L = plus.shape[0]
    rows = [np.asarray(plus, np.float64), np.asarray(minus, np.float64)]
    thetas = np.concatenate([[0.0], tilts(rows[0], prior, trans)])
    betas, logz, comps = _messages(rows, thetas, prior, trans)
    share = np.where(comps[:, 0] == 0, DEFENSIVE, (1 - DEFENSIVE) / TILTS) / (2 * L)
    rng = np.random.default_rng(seed)
    x = _sample(xp, rng, n, betas, share / share.sum(), prior, trans)
    rows_x = [xp.asarray(w) for w in rows]
    S = _window_scores(xp, x, rows_x, L)                    # (N, 2, L)
    mix = (xp.asarray(thetas), xp.asarray((np.log(share) - logz).reshape(thetas.size, 2 * L)))
    ratio = _ratio(xp, S, mix)
    M = S.reshape(n, -1).max(axis=1)
    allele = _tail(xp, M, 1 / ratio, n)
    D, w = _change(xp, x, S, rows_x, allele, mix, ratio, xp.asarray(trans))
    change = _tail(xp, xp.abs(D).ravel(), w.ravel() / 3, n, per_sample=3)
    return MotifTails(allele, change, n)


def _ratio(xp, S, mix):
    """``q(x) / P(x)`` of the mixture for samples whose window scores are ``S`` (N, 2, L): the components are (tilt,
    row, start) in that order, ``mix`` their tilts and ``ln share - ln Z``."""
    thetas, fixed = mix
    n = S.shape[0]
    log_terms = thetas[None, :, None] * S.reshape(n, 1, -1) + fixed[None]               # (N, tilts, 2L)
    top = log_terms.max(axis=(1, 2))
    return xp.exp(top) * xp.exp(log_terms - top[:, None, None]).sum(axis=(1, 2))


def _change(xp, x, S, rows_x, allele: Tail, mix, ratio, T):
    """``(N, 3)`` ``D = ln G(M(x)) - ln G(M(x^b))`` for the three other centre bases ``b`` of each sample (every
    window holds the centre, so ``x^b``'s scores are ``x``'s with the centre's column changed), and the pairs'
    weights.  ``|D|`` is symmetric in ``(x, x^b)``, and the proposal, tilted towards high scores, draws pairs whose
    high member is either one: each unordered pair ``{x, y}`` is weighted ``(P(x) + P(y)) / (q(x) + q(y))`` (both
    ways of drawing it), so a gain (``x`` low, ``y`` high) is as well sampled as a loss."""
    L = S.shape[2]
    c = x[:, L - 1]
    col = L - 1 - xp.arange(L)                              # the centre's column in the window starting at s
    M = S.reshape(S.shape[0], -1).max(axis=1)
    g, lg = xp.asarray(allele.x), xp.asarray(allele.logp)
    log_g = _log_g(xp, allele, g, lg, M)
    before = T[x[:, L - 2], c] * T[c, x[:, L]] if L > 1 else xp.ones(c.size)
    out, weights = [], []
    for shift in (1, 2, 3):
        b = (c + shift) % 4
        alt = xp.stack([S[:, r, :] - rows_x[r][col[None, :], c[:, None]] + rows_x[r][col[None, :], b[:, None]]
                        for r in range(2)], axis=1)
        Mb = alt.reshape(alt.shape[0], -1).max(axis=1)
        out.append(log_g - _log_g(xp, allele, g, lg, Mb))
        rho = (T[x[:, L - 2], b] * T[b, x[:, L]] if L > 1 else xp.ones(c.size)) / before   # P(x^b) / P(x)
        weights.append((1 + rho) / (ratio + rho * _ratio(xp, alt, mix)))
    return xp.stack(out, axis=1), xp.stack(weights, axis=1)


def _log_g(xp, tail: Tail, g, lg, v):
    """:meth:`Tail.at`'s ``ln P`` on the device."""
    v = v - TIE
    if tail.steps:
        return lg[xp.clip(xp.searchsorted(g, v, side="left"), 0, g.size - 1)]
    return xp.interp(v, g, lg, left=0.0, right=lg[-1])


def snv_statistics(tails: MotifTails, m_ref: np.ndarray, m_alt: np.ndarray) -> dict:
    """atSNP's p-values of SNVs whose alleles' best covering windows (either strand) score ``m_ref``, ``m_alt``."""
    lr, er = tails.allele.at(m_ref)
    la, ea = tails.allele.at(m_alt)
    lc, ec = tails.change.at(np.abs(lr - la))
    return {"ref": np.exp(lr), "alt": np.exp(la), "change": np.exp(lc), "ref_rse": er, "alt_rse": ea,
            "change_rse": ec}
