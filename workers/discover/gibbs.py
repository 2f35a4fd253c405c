"""Thousands of Gibbs-sampling chains at once (Yu & Xu's G-processes), as batched arrays.

Every chain holds one site (window index) per sequence, ``pos (C, T)``, and its letter counts
``counts (C, 4l)``.  A step updates the same sequence ``i`` in every active chain (the seed's in-order
update): remove the chain's site in ``i`` from its counts, score every window of ``i`` under every chain's
log-odds matrix with one GEMM ``X_i (P, 4l) @ W.T (4l, C)``, take the best window (the seed's deterministic
update) or draw one from the posterior (the classic stochastic update, by the Gumbel-max trick), add it.
The same code runs on NumPy and CuPy (``win.xp``).

The chain score is the average relative entropy of the chain's profile, ``(1/l) sum_j sum_x q log2(q/b)``
(seed eq. 1), kept up to date with the seed's correcting values (eqs. 2-4): only the ``l`` entries of the
removed and of the added site change, so a step costs ``O(l)`` per chain for the score.

Checkpoints (the seed's thread reorganisation): after ``2T`` steps and then every ``T/2`` steps the chains
that have finished — deterministic: no site changed during a whole sweep; stochastic: no better score for
``patience`` sweeps — are taken out and the arrays compacted, so the device works only on live chains.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workers.backend import to_numpy
from workers.discover.windows import Windows, relative_entropy


@dataclass
class ChainResult:
    """Finished chains.

    ppm : (C, l, 4) float64 — profile with the pseudocount; score : (C,) average relative entropy
    (bits per column) by the incremental updates; positions : (C, T) window index per sequence;
    steps : (C,) updates the chain ran; chain : (C,) index of the chain in the batch.
    """
    ppm: np.ndarray
    score: np.ndarray
    positions: np.ndarray
    steps: np.ndarray
    chain: np.ndarray


def _f(xp, q, b):
    """q log2(q / b), 0 at q = 0."""
    return xp.where(q > 0, q * xp.log2(xp.maximum(q, 1e-300) / b), 0.0)


def random_starts(win: Windows, n_chains: int, rng: np.random.Generator) -> np.ndarray:
    """A uniformly random valid window per chain and sequence.

    Parameters
    ----------
    win : Windows
    n_chains : int
    rng : numpy.random.Generator
        Draws ``(n_chains, T)`` uniforms.

    Returns
    -------
    numpy.ndarray, shape (n_chains, T), int64
        Window indices (0 for a sequence without a valid window).
    """
    T, P = win.T, win.P
    table = np.zeros((T, P), np.int64)
    for i in range(T):
        v = np.flatnonzero(win.valid[i])
        table[i, :v.size] = v
    r = np.floor(rng.random((n_chains, T)) * np.maximum(win.n_valid, 1)).astype(np.int64)
    return table[np.arange(T)[None, :], r]


def profile_score(counts: np.ndarray, n: float, bg: np.ndarray, pseudocount: float) -> np.ndarray:
    """Average relative entropy of profiles, computed from scratch in float64 (the reference of the chains'
    incremental scores).

    Parameters
    ----------
    counts : ndarray, shape (C, l, 4)
        Letter counts of each profile.
    n : float
        Rows (sites) counted.
    bg : ndarray, shape (4,), float64
    pseudocount : float
        Spread by ``bg``.

    Returns
    -------
    ndarray, shape (C,), float64
        Bits per column.
    """
    q = (np.asarray(counts, np.float64) + pseudocount * bg) / (n + pseudocount)
    return relative_entropy(q, bg).mean(axis=-1)


def run_chains(win: Windows, starts: np.ndarray, bg: np.ndarray, update: str = "best", max_sweeps: int = 20,
               pseudocount: float = 1.0, patience: int = 3, seed: int = 0, max_steps: int | None = None,
               kernels=None, engine: str = "auto") -> ChainResult:
    """Run a batch of chains to convergence (or ``max_sweeps`` sweeps over the sequences).

    Parameters
    ----------
    win : Windows
    starts : numpy.ndarray, shape (C, T), int
        Starting window of every chain in every sequence (:func:`random_starts`).
    bg : numpy.ndarray, shape (4,)
    update : "best" | "sample"
        The seed's deterministic best-window update, or the classic draw from the posterior.
    max_sweeps : int
    pseudocount : float
        Total pseudocount spread by ``bg`` in the profiles.
    patience : int
        Stochastic update: sweeps without a better score after which a chain has finished (its best
        alignment is reported).
    seed : int
        Seeds the device random generator of the stochastic update.
    max_steps : int, optional
        Stop after this many steps (default ``max_sweeps * T``).
    kernels : optional
        Kernel launcher of :mod:`workers.discover.gpu` (tests); on CuPy arrays the chains run in the CUDA
        kernel (one warp per chain, the whole run in one launch) for widths up to 32.
    engine : "auto" | "arrays"
        "arrays" runs the array program below on CuPy too (the launch-bound baseline of the benchmarks).

    Returns
    -------
    ChainResult
        Every chain in chain order: ``ppm (C, l, 4)`` float64, ``score (C,)``, ``positions (C, T)`` int64,
        ``steps (C,)`` int64.
    """
    if update not in ("best", "sample"):
        raise ValueError(f"update must be 'best' or 'sample', got {update!r}")
    T = win.T
    if starts.shape[0] == 0 or T < 2:
        raise ValueError("Gibbs sampling needs at least one chain and two sequences")
    max_steps = max_sweeps * T if max_steps is None else int(max_steps)
    if kernels is not None or (win.xp is not np and win.l <= 32 and engine != "arrays"):
        return _run_chains_kernel(win, starts, bg, update, max_steps, pseudocount, patience, seed, kernels)
    chains = _Chains(win, starts, bg, pseudocount, update == "sample", seed)
    limit = T if update == "best" else patience * T
    next_check = 2 * T
    every = max(1, T // 2)
    step = 0
    while step < max_steps and chains.chain.size:
        chains.step(step % T)
        step += 1
        if step >= next_check or step >= max_steps:
            next_check = step + every
            done = chains.still >= limit
            if step >= max_steps:
                done = win.xp.ones_like(done)
            if bool(done.any()):
                chains.retire(done)
    if chains.chain.size:
        chains.retire(win.xp.ones(chains.chain.size, bool))
    return chains.result()


class _Chains:
    """The live chains of a batch as arrays on ``win.xp`` (chain ``c``: sites ``pos[c]``, letter counts
    ``counts[c]``, score, sweeps without change ``still``), and the finished chains already on the host."""

    def __init__(self, win: Windows, starts: np.ndarray, bg: np.ndarray, pseudocount: float, sample: bool,
                 seed: int):
        xp, T, l = win.xp, win.T, win.l
        self.win, self.xp, self.l, self.sample, self.pseudocount = win, xp, l, sample, pseudocount
        self.bg = np.asarray(bg, np.float64)
        self.bg4 = xp.asarray(np.tile(self.bg, l))                       # (4l,) float64
        self.logbg4 = xp.log(self.bg4)
        self.all_valid = bool(win.valid.all())
        self.col4 = xp.asarray((4 * np.arange(l)).astype(np.int64))[None, :]    # (1, l)
        C0 = starts.shape[0]
        self.pos = xp.array(np.asarray(starts, np.int64), copy=True)     # (C, T); the caller's starts stay as given
        self.chain = xp.arange(C0, dtype=xp.int64)
        self.counts = xp.zeros((C0, 4 * l), xp.float64)
        for i in range(T):
            self.counts += win.onehot[i, self.pos[:, i]]
        self.n = float(T)
        self.den = self.n + pseudocount
        q = (self.counts + pseudocount * self.bg4) / self.den
        self.score = _f(xp, q, self.bg4).sum(axis=1) / l                 # (C,)
        self.still = xp.zeros(C0, xp.int64)
        self.steps = xp.zeros(C0, xp.int64)
        if sample:
            self.best_score, self.best_pos, self.best_counts = self.score.copy(), self.pos.copy(), self.counts.copy()
            self.grng = xp.random.default_rng(seed) if xp is not np else np.random.default_rng(seed)
        self.out = {k: [] for k in ("counts", "score", "pos", "steps", "chain")}

    def _correction(self, i: int, site, delta: int):
        """Change of every chain's score when its letters at window ``site`` of sequence ``i`` go from the
        current counts to counts + ``delta`` (the seed's correcting values, eqs. 2-3), summed over columns."""
        xp, pc, den = self.xp, self.pseudocount, self.den
        idx = self.col4 + self.win.dcodes[i, site].astype(xp.int64)      # (C, l) entries of the site's letters
        c = xp.take_along_axis(self.counts, idx, axis=1)
        b = self.bg4[idx]
        return (_f(xp, (c + delta + pc * b) / den, b) - _f(xp, (c + pc * b) / den, b)).sum(axis=1)

    def step(self, i: int) -> None:
        """Update sequence ``i`` in every live chain: remove its site, score every window of ``i`` under the
        chain's ``(T-1)``-row profile (one GEMM), take the best window or a draw, add it."""
        xp, X, pc = self.xp, self.win.onehot, self.pseudocount
        old = self.pos[:, i]
        d_rm = self._correction(i, old, -1)                              # seed eq. 3, before the removal
        self.counts -= X[i, old]
        W = (xp.log((self.counts + pc * self.bg4) / (self.n - 1 + pc)) - self.logbg4).astype(xp.float32)
        S = W @ X[i].T                                                   # (C, P)
        if not self.all_valid:
            S += self.win.bias[:, :, 0][i][None, :]
        if self.sample:
            u = (self.grng.random(S.shape, dtype=np.float32) if xp is not np
                 else self.grng.random(S.shape, np.float32))
            S = S - xp.log(-xp.log(xp.maximum(u, 1e-38)))                # Gumbel-max: a draw from softmax(S)
        new = xp.argmax(S, axis=1).astype(xp.int64)
        d_add = self._correction(i, new, +1)                             # seed eq. 2, on the counts without it
        self.counts += X[i, new]
        self.score = self.score + (d_rm + d_add) / self.l                # seed eq. 4
        changed = new != old
        self.pos[:, i] = new
        self.steps += 1
        if self.sample:
            better = self.score > self.best_score + 1e-12
            self.best_score = xp.where(better, self.score, self.best_score)
            self.best_pos[better] = self.pos[better]
            self.best_counts[better] = self.counts[better]
            self.still = xp.where(better, 0, self.still + 1)
        else:
            self.still = xp.where(changed, 0, self.still + 1)

    def retire(self, done) -> None:
        """Take the chains ``done`` out (their alignment, the best one when sampling, to the host) and compact."""
        xp = self.xp
        sel = xp.flatnonzero(done)
        keep = (self.best_counts, self.best_score, self.best_pos) if self.sample else (self.counts, self.score, self.pos)
        for k, a in zip(("counts", "score", "pos"), keep):
            self.out[k].append(to_numpy(a[sel]))
        self.out["steps"].append(to_numpy(self.steps[sel]))
        self.out["chain"].append(to_numpy(self.chain[sel]))
        live = xp.flatnonzero(~done)
        self.pos, self.counts, self.score, self.still, self.steps, self.chain = (
            a[live] for a in (self.pos, self.counts, self.score, self.still, self.steps, self.chain))
        if self.sample:
            self.best_score, self.best_pos, self.best_counts = (
                self.best_score[live], self.best_pos[live], self.best_counts[live])

    def result(self) -> ChainResult:
        """The finished chains in chain order."""
        out = self.out
        cnt = np.concatenate(out["counts"]).reshape(-1, self.l, 4)
        order = np.argsort(np.concatenate(out["chain"]), kind="stable")
        ppm = (cnt + self.pseudocount * self.bg) / (self.n + self.pseudocount)
        return ChainResult(ppm=ppm[order], score=np.concatenate(out["score"])[order],
                           positions=np.concatenate(out["pos"])[order], steps=np.concatenate(out["steps"])[order],
                           chain=np.concatenate(out["chain"])[order])


def _run_chains_kernel(win, starts, bg, update, max_steps, pseudocount, patience, seed, kernels) -> ChainResult:
    from workers.discover.gpu import run_chains_device  # noqa: PLC0415

    T, l = win.T, win.l
    r = run_chains_device(win, bg, 0, starts=starts, seed=seed, update=update, max_steps=max_steps,
                          pseudocount=pseudocount, patience=patience, kernels=kernels)
    cnt = to_numpy(r["counts"]).reshape(-1, l, 4).astype(np.float64)
    ppm = (cnt + pseudocount * np.asarray(bg, np.float64)) / (T + pseudocount)
    return ChainResult(ppm=ppm, score=to_numpy(r["score"]), positions=to_numpy(r["pos"]).astype(np.int64),
                       steps=to_numpy(r["steps"]).astype(np.int64), chain=np.arange(ppm.shape[0]))


def distinct_best(ppm: np.ndarray, score: np.ndarray, keep: int) -> np.ndarray:
    """The best-scoring models with distinct consensus strings.

    Parameters
    ----------
    ppm : ndarray, shape (C, l, 4)
    score : ndarray, shape (C,)
    keep : int

    Returns
    -------
    ndarray, shape (<= keep,), int64
        Model indices, best first (ties: the first).
    """
    order = np.argsort(-np.asarray(score), kind="stable")
    cons = np.argmax(ppm, axis=2)
    seen, out = set(), []
    for k in order:
        key = cons[k].tobytes()
        if key in seen:
            continue
        seen.add(key)
        out.append(k)
        if len(out) >= keep:
            break
    return np.asarray(out, np.int64)
