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
    """A uniformly random valid window per chain and sequence: ``(n_chains, T)`` int64 (host)."""
    T, P = win.T, win.P
    table = np.zeros((T, P), np.int64)
    for i in range(T):
        v = np.flatnonzero(win.valid[i])
        table[i, :v.size] = v
    r = np.floor(rng.random((n_chains, T)) * np.maximum(win.n_valid, 1)).astype(np.int64)
    return table[np.arange(T)[None, :], r]


def profile_score(counts: np.ndarray, n: float, bg: np.ndarray, pseudocount: float) -> np.ndarray:
    """Average relative entropy of profiles from ``counts (C, l, 4)`` of ``n`` rows (float64 reference)."""
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
    """
    if update not in ("best", "sample"):
        raise ValueError(f"update must be 'best' or 'sample', got {update!r}")
    xp = win.xp
    T, P, l = win.T, win.P, win.l
    L4 = 4 * l
    C0 = starts.shape[0]
    if C0 == 0 or T < 2:
        raise ValueError("Gibbs sampling needs at least one chain and two sequences")
    max_steps = max_sweeps * T if max_steps is None else int(max_steps)
    if kernels is not None or (xp is not np and l <= 32 and engine != "arrays"):
        return _run_chains_kernel(win, starts, bg, update, max_steps, pseudocount, patience, seed, kernels)
    bg = np.asarray(bg, np.float64)
    bg4 = xp.asarray(np.tile(bg, l))                                     # (4l,) float64
    logbg4 = xp.log(bg4)
    X = win.onehot                                                       # (T, P, 4l) float32
    all_valid = bool(win.valid.all())
    bias = win.bias[:, :, 0]                                             # (T, P)
    dcodes = win.dcodes                                                  # (T, P, l) uint8
    col4 = xp.asarray((4 * np.arange(l)).astype(np.int64))[None, :]       # (1, l)
    pos = xp.array(np.asarray(starts, np.int64), copy=True)             # (C, T); the caller's starts stay as given
    chain = xp.arange(C0, dtype=xp.int64)
    counts = xp.zeros((C0, L4), xp.float64)
    for i in range(T):
        counts += X[i, pos[:, i]]
    n = float(T)
    den = n + pseudocount
    q = (counts + pseudocount * bg4) / den
    score = _f(xp, q, bg4).sum(axis=1) / l                               # (C,)
    still = xp.zeros(C0, xp.int64)
    steps = xp.zeros(C0, xp.int64)
    sample = update == "sample"
    if sample:
        best_score, best_pos, best_counts = score.copy(), pos.copy(), counts.copy()
        grng = xp.random.default_rng(seed) if xp is not np else np.random.default_rng(seed)
    limit = T if not sample else patience * T
    out = {k: [] for k in ("counts", "score", "pos", "steps", "chain")}

    def retire(mask):
        sel = xp.flatnonzero(mask)
        if sample:
            out["counts"].append(to_numpy(best_counts[sel]))
            out["score"].append(to_numpy(best_score[sel]))
            out["pos"].append(to_numpy(best_pos[sel]))
        else:
            out["counts"].append(to_numpy(counts[sel]))
            out["score"].append(to_numpy(score[sel]))
            out["pos"].append(to_numpy(pos[sel]))
        out["steps"].append(to_numpy(steps[sel]))
        out["chain"].append(to_numpy(chain[sel]))

    next_check = 2 * T
    every = max(1, T // 2)
    step = 0
    while step < max_steps and chain.size:
        i = step % T
        old = pos[:, i]
        # correcting value of the removed site (seed eq. 3): its l entries go down by one
        ia = col4 + dcodes[i, old].astype(xp.int64)                      # (C, l) entries of the old letters
        c_old = xp.take_along_axis(counts, ia, axis=1)
        b_a = bg4[ia]
        d_rm = (_f(xp, (c_old - 1 + pseudocount * b_a) / den, b_a) - _f(xp, (c_old + pseudocount * b_a) / den, b_a)).sum(axis=1)
        counts -= X[i, old]
        # score every window of sequence i under every chain's (T-1)-row profile: one GEMM
        W = (xp.log((counts + pseudocount * bg4) / (n - 1 + pseudocount)) - logbg4).astype(xp.float32)
        S = W @ X[i].T                                                   # (C, P)
        if not all_valid:
            S += bias[i][None, :]
        if sample:
            u = grng.random(S.shape, dtype=np.float32) if xp is not np else grng.random(S.shape, np.float32)
            S = S - xp.log(-xp.log(xp.maximum(u, 1e-38)))                # Gumbel-max: a draw from softmax(S)
        new = xp.argmax(S, axis=1).astype(xp.int64)
        # correcting value of the added site (seed eq. 2), on the counts without it
        ib = col4 + dcodes[i, new].astype(xp.int64)
        c_new = xp.take_along_axis(counts, ib, axis=1)
        b_b = bg4[ib]
        d_add = (_f(xp, (c_new + 1 + pseudocount * b_b) / den, b_b) - _f(xp, (c_new + pseudocount * b_b) / den, b_b)).sum(axis=1)
        counts += X[i, new]
        score = score + (d_rm + d_add) / l                               # seed eq. 4
        changed = new != old
        pos[:, i] = new
        steps += 1
        if sample:
            better = score > best_score + 1e-12
            best_score = xp.where(better, score, best_score)
            best_pos[better] = pos[better]
            best_counts[better] = counts[better]
            still = xp.where(better, 0, still + 1)
        else:
            still = xp.where(changed, 0, still + 1)
        step += 1
        if step >= next_check or step >= max_steps:
            next_check = step + every
            done = still >= limit
            if step >= max_steps:
                done = xp.ones_like(done)
            if bool(done.any()):
                retire(done)
                live = xp.flatnonzero(~done)
                pos, counts, score, still, steps, chain = (a[live] for a in (pos, counts, score, still, steps, chain))
                if sample:
                    best_score, best_pos, best_counts = best_score[live], best_pos[live], best_counts[live]
    if chain.size:
        retire(xp.ones(chain.size, bool))
    cnt = np.concatenate(out["counts"]).reshape(-1, l, 4)
    order = np.argsort(np.concatenate(out["chain"]), kind="stable")
    ppm = (cnt + pseudocount * bg) / (n + pseudocount)
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
    """Indices of the ``keep`` best-scoring models with distinct consensus strings (best first)."""
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
