"""The best window of motif rows on allele contexts, in two passes.

An allele's context is its sequence with ``flank`` bases of the genome on each side (N past a record's end); its edit
is ``[e0, e1)`` of the context (empty for the reference side of an insertion or the alternative side of a deletion).
A window of length ``m`` starting at ``s`` covers the edit when ``e0 - m < s < e1``: it overlaps the edited bases,
or, for an empty edit, holds both bases beside the junction.  Windows with an N are not scored (as in the scan).

``reaching``: which (context, row) pairs have a covering window scoring at least the row's threshold — each window's
columns added most informative first, abandoned as soon as the best the rest could add cannot reach the threshold
(MOODS's lookahead; a margin keeps every window that reaches in float64).  ``best_of``: the best covering window of
given (context, row) pairs, float64 sums in column order, the scan's rescoring, so a window scores the same here as in
a scan; the leftmost on ties."""
from __future__ import annotations

import numba
import numpy as np

MARGIN = 1e-9           # the filter's sums run in another order than the exact ones: it keeps what is this close


@numba.njit(cache=True, nogil=True, parallel=True)
def _reaching(codes, starts, e0, e1, pwms, lengths, order, rest, alpha, out):  # pragma: no cover - compiled
    for a in numba.prange(starts.size - 1):
        lo = starts[a]
        size = starts[a + 1] - lo
        for r in range(lengths.size):
            m = lengths[r]
            need = alpha[r] - MARGIN
            hit = False
            for s in range(max(e0[a] - m + 1, 0), min(e1[a] - 1, size - m) + 1):
                acc = 0.0
                done = True
                for jj in range(m):
                    j = order[r, jj]
                    c = codes[lo + s + j]
                    if c > 3:
                        done = False
                        break
                    acc += pwms[r, j, c]
                    if acc + rest[r, jj] < need:
                        done = False
                        break
                if done:
                    hit = True
                    break
            out[a, r] = hit


@numba.njit(cache=True, nogil=True, parallel=True)
def _best_of(codes, starts, e0, e1, pwms, lengths, ctx, rows, best, where):  # pragma: no cover - compiled
    for i in numba.prange(ctx.size):
        a, r = ctx[i], rows[i]
        lo = starts[a]
        size = starts[a + 1] - lo
        m = lengths[r]
        top = -np.inf
        at = -1
        for s in range(max(e0[a] - m + 1, 0), min(e1[a] - 1, size - m) + 1):
            acc = 0.0
            for j in range(m):
                c = codes[lo + s + j]
                if c > 3:
                    acc = -np.inf
                    break
                acc += pwms[r, j, c]
            if acc > top:
                top = acc
                at = s
        best[i] = top
        where[i] = at


class Rows:
    """Motif rows laid out for the kernels: the matrices stacked (zero-padded), their lengths, each row's columns by
    decreasing spread (max - min) and the most the columns after each could add."""

    def __init__(self, pwms: list, alpha: np.ndarray | None = None):
        self.lengths = np.array([w.shape[0] for w in pwms], dtype=np.int64)
        width = int(self.lengths.max(initial=1))
        self.stack = np.zeros((len(pwms), width, 4), np.float64)
        self.order = np.zeros((len(pwms), width), np.int64)
        self.rest = np.zeros((len(pwms), width), np.float64)
        for r, w in enumerate(pwms):
            m = w.shape[0]
            self.stack[r, :m] = w
            o = np.argsort(-(w.max(1) - w.min(1)), kind="stable")
            self.order[r, :m] = o
            tail = np.cumsum(w.max(1)[o][::-1])[::-1]               # the most columns jj.. can add
            self.rest[r, :m - 1] = tail[1:]
        self.alpha = None if alpha is None else np.ascontiguousarray(alpha, np.float64)


def _contig(codes, starts, e0, e1):
    return (np.ascontiguousarray(codes, np.uint8), np.ascontiguousarray(starts, np.int64),
            np.ascontiguousarray(e0, np.int64), np.ascontiguousarray(e1, np.int64))


def reaching(codes, starts, e0, e1, rows: Rows) -> np.ndarray:
    """``(n_contexts, n_rows)`` bool: a covering window of the row may reach its threshold (every one that does is
    marked; a few within ``MARGIN`` below it may be too)."""
    out = np.zeros((starts.size - 1, rows.lengths.size), np.bool_)
    _reaching(*_contig(codes, starts, e0, e1), rows.stack, rows.lengths, rows.order, rows.rest, rows.alpha, out)
    return out


def best_of(codes, starts, e0, e1, rows: Rows, ctx: np.ndarray, row: np.ndarray):
    """``(score, start)`` of the best covering window of each (context ``ctx[i]``, row ``row[i]``) pair (``-inf`` and
    ``-1`` where none is scored: an edit beside a record's end, or Ns)."""
    best = np.empty(ctx.size, np.float64)
    where = np.empty(ctx.size, np.int64)
    _best_of(*_contig(codes, starts, e0, e1), rows.stack, rows.lengths, np.ascontiguousarray(ctx, np.int64),
             np.ascontiguousarray(row, np.int64), best, where)
    return best, where


def best_windows(codes, starts, e0, e1, pwms: list):
    """``(score, start)``, each ``(n_contexts, n_rows)``: every row's best covering window on every context."""
    rows = Rows(pwms)
    n, R = starts.size - 1, len(pwms)
    ctx, row = np.repeat(np.arange(n), R), np.tile(np.arange(R), n)
    best, where = best_of(codes, starts, e0, e1, rows, ctx, row)
    return best.reshape(n, R), where.reshape(n, R)
