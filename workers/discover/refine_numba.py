"""Numba kernels of the (l, d) refinement (compiled lazily, cached on disk; see :mod:`workers.discover.refine`)."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def min_dist(codes, valid, cons):  # pragma: no cover - compiled
    """The closest valid window of every sequence to ``cons``.

    Parameters
    ----------
    codes : ndarray, shape (T, P, l), uint8
        Window letters (:func:`workers.discover.windows.window_codes`).
    valid : ndarray, shape (T, P), bool
    cons : ndarray, shape (l,), uint8

    Returns
    -------
    dist : ndarray, shape (T,), int64
        Mismatches of the closest window (``l + 1``: no valid window).
    arg : ndarray, shape (T,), int64
        Its index (-1: none; the first on ties).
    """
    T, P, l = codes.shape
    out = np.full(T, l + 1, np.int64)
    arg = np.full(T, -1, np.int64)
    for i in range(T):
        for p in range(P):
            if not valid[i, p]:
                continue
            dd = 0
            for j in range(l):
                if codes[i, p, j] != cons[j]:
                    dd += 1
            if dd < out[i]:
                out[i] = dd
                arg[i] = p
    return out, arg


@numba.njit(cache=True, nogil=True)
def neighbour_mins(codes, valid, cons, mind):
    """Every single-letter neighbour's smallest distance in every sequence, in one pass over the windows.

    Parameters
    ----------
    codes : ndarray, shape (T, P, l), uint8
    valid : ndarray, shape (T, P), bool
    cons : ndarray, shape (l,), uint8
    mind : ndarray, shape (T, l, 4), int64
        Written: ``mind[i, j, b]`` = smallest distance in sequence ``i`` to ``cons`` with position ``j`` set to
        letter ``b``.
    """
    T, P, l = codes.shape
    for i in range(T):
        for j in range(l):
            for b in range(4):
                mind[i, j, b] = l + 1
        for p in range(P):
            if not valid[i, p]:
                continue
            base = 0
            for j in range(l):
                if codes[i, p, j] != cons[j]:
                    base += 1
            if base > 2 * l:       # never: keeps numba's range analysis simple
                continue
            for j in range(l):
                a = codes[i, p, j]
                bj = base - (1 if a != cons[j] else 0)
                for b in range(4):
                    v = bj + (1 if a != b else 0)
                    if v < mind[i, j, b]:
                        mind[i, j, b] = v


@numba.njit(cache=True, nogil=True)
def local_search(codes, valid, cons, d, max_moves):
    """Best-improvement climb of (sequences within ``d`` ↑, summed capped distance ↓) by single-letter changes.

    Parameters
    ----------
    codes : ndarray, shape (T, P, l), uint8
    valid : ndarray, shape (T, P), bool
    cons : ndarray, shape (l,), uint8
        Start.
    d : int
    max_moves : int

    Returns
    -------
    cons : ndarray, shape (l,), uint8
        The optimum reached.
    count, total : int
    """
    T, P, l = codes.shape
    c = cons.copy()
    mind = np.empty((T, l, 4), np.int64)
    dist, _ = min_dist(codes, valid, c)
    cnt = 0
    tot = 0
    for i in range(T):
        if dist[i] <= d:
            cnt += 1
        tot += min(dist[i], l)
    moves = 0
    while moves < max_moves:
        neighbour_mins(codes, valid, c, mind)
        best_cnt, best_tot, bj, bb = cnt, tot, -1, -1
        for j in range(l):
            for b in range(4):
                if b == c[j]:
                    continue
                k = 0
                s = 0
                for i in range(T):
                    v = mind[i, j, b]
                    if v <= d:
                        k += 1
                    s += min(v, l)
                if k > best_cnt or (k == best_cnt and s < best_tot):
                    best_cnt, best_tot, bj, bb = k, s, j, b
        if bj < 0:
            break
        c[bj] = bb
        cnt, tot = best_cnt, best_tot
        moves += 1
    return c, cnt, tot
