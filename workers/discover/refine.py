"""Final refinement and ranking of discovered motifs for planted (l, d) problems.

For an (l, d) problem the right objective is not a likelihood (which can prefer a phase-shifted or a
wrong motif) but the number of sequences holding an ``l``-mer within ``d`` mismatches of the consensus.
:func:`ld_local_search` climbs that objective from a starting consensus by single-letter changes (best
improvement first), with the sum over sequences of the smallest distance (capped at ``l``) as the tie
break, which also gives the climb a slope where the count is flat.  :func:`shifted_consensus` supplies
starting points from a model's sites at phase shifts, so a model that locked on a shifted copy of the
motif is still led to it.  The kernels are numba (host); the windows are the same ``(T, P, l)`` letters
as everywhere (:mod:`workers.discover.windows`).
"""
from __future__ import annotations

import numpy as np

from workers.discover.windows import Windows

def _kernels():
    from workers.discover.refine_numba import local_search, min_dist  # noqa: PLC0415

    return min_dist, local_search


def ld_score(win: Windows, cons: np.ndarray, d: int) -> tuple[int, int]:
    """The (l, d) objective of one consensus.

    Parameters
    ----------
    win : Windows
    cons : array_like, shape (l,), uint8
    d : int

    Returns
    -------
    count : int
        Sequences with a window within ``d`` mismatches of ``cons``.
    total : int
        Sum over sequences of the smallest distance, capped at ``l``.
    """
    min_dist, _ = _kernels()
    dist, _ = min_dist(win.codes, win.valid, np.asarray(cons, np.uint8))
    return int((dist <= d).sum()), int(np.minimum(dist, win.l).sum())


def ld_proxy_order(win: Windows, ppm: np.ndarray, d: int, slack: int = 1) -> np.ndarray:
    """Models ordered by how close their consensus is to an (l, d) solution, best first: sequences with a
    window within ``d + slack`` mismatches (a consensus one letter off the motif still has almost every
    occurrence there), then the summed capped distance.  Likelihood ranks such near-misses far down.

    Parameters
    ----------
    win : Windows
    ppm : ndarray, shape (C, l, 4)
    d, slack : int

    Returns
    -------
    ndarray, shape (C,), int64
        Model indices, best first.
    """
    if win.xp is not np and win.l <= 32:            # GPU: one thread per consensus, popcount distances
        from workers.discover.gpu import ld_proxy_device, pack_words  # noqa: PLC0415

        cnt, tot = ld_proxy_device(win, pack_words(np.argmax(np.asarray(ppm), axis=2)), d + slack)
        return np.lexsort((tot.get(), -cnt.get()))
    min_dist, _ = _kernels()
    keys = np.empty((len(ppm), 2), np.int64)
    for c, m in enumerate(np.asarray(ppm)):
        dist, _ = min_dist(win.codes, win.valid, np.argmax(m, axis=1).astype(np.uint8))
        keys[c] = ((dist <= d + slack).sum(), -np.minimum(dist, win.l).sum())
    return np.lexsort((-keys[:, 1], -keys[:, 0]))


def ld_sites(win: Windows, cons: np.ndarray):
    """The closest window of every sequence to a consensus.

    Parameters
    ----------
    win : Windows
    cons : array_like, shape (l,), uint8

    Returns
    -------
    window : ndarray, shape (T,), int64
        Window index (-1 for a sequence without a valid window).
    distance : ndarray, shape (T,), int64
        Mismatches (``l + 1`` where there is no window).
    """
    min_dist, _ = _kernels()
    dist, arg = min_dist(win.codes, win.valid, np.asarray(cons, np.uint8))
    return arg, dist


def ld_local_search(win: Windows, cons: np.ndarray, d: int, max_moves: int | None = None):
    """Climb from ``cons`` to a local optimum of (count within d ↑, summed distance ↓).

    Parameters
    ----------
    win : Windows
    cons : array_like, shape (l,), uint8
    d : int
    max_moves : int, optional
        Default ``4 l``.

    Returns
    -------
    cons : numpy.ndarray, shape (l,), uint8
    count : int
    total : int
    """
    _, local_search = _kernels()
    c, cnt, tot = local_search(win.codes, win.valid, np.asarray(cons, np.uint8), int(d),
                               int(max_moves if max_moves is not None else 4 * win.l))
    return c, int(cnt), int(tot)


def shifted_consensus(win: Windows, best: np.ndarray, use: np.ndarray, shifts=range(-2, 3)) -> list:
    """Consensus of the windows at ``best`` moved by each phase shift along the motif; a window moved off its
    sequence or onto an N is left out.

    Parameters
    ----------
    win : Windows
    best : ndarray, shape (T,), int
        A window per sequence.
    use : ndarray, shape (T,), bool
        Sequences that count.
    shifts : iterable of int

    Returns
    -------
    list of ndarray, shape (l,), uint8
        One consensus per shift that kept a site (shifts that kept none are left out).
    """
    pf = win.P_fwd
    p, strand = win.position(best)
    out = []
    rows = np.flatnonzero(use)
    for delta in shifts:
        q = np.where(strand == 0, p + delta, p - delta)
        ok = (q >= 0) & (q < pf)
        sel = rows[ok[rows]]
        w = q[sel] + np.where(strand[sel] == 1, pf, 0)
        sel_ok = win.valid[sel, w]
        sel, w = sel[sel_ok], w[sel_ok]
        if sel.size == 0:
            continue
        letters = win.codes[sel, w]                                   # (n, l)
        counts = np.stack([(letters == a).sum(axis=0) for a in range(4)], axis=1)
        out.append(np.argmax(counts, axis=1).astype(np.uint8))
    return out
