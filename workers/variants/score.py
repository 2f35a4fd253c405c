"""The best window of motif rows on allele contexts, in two passes.

An allele's context is its sequence with ``flank`` bases of the genome on each side (N past a record's end); its edit
is ``[e0, e1)`` of the context (empty for the reference side of an insertion or the alternative side of a deletion).
A window of length ``m`` starting at ``s`` covers the edit when ``e0 - m < s < e1``: it overlaps the edited bases,
or, for an empty edit, holds both bases beside the junction.  Windows with an N are not scored (as in the scan).

``reaching``: which (allele, row) pairs have a covering window on either allele scoring at least the row's threshold —
each window's columns added in float32, most informative first, abandoned as soon as the best the rest could add
cannot reach the threshold (MOODS's lookahead; a margin keeps every window that reaches in float64); an SNV's two
alleles in one pass, its column counting the better of the two bases.  ``best_of``: the best covering window of
given (context, row) pairs, float64 sums in column order, the scan's rescoring, so a window scores the same here as in
a scan; the leftmost on ties."""
from __future__ import annotations

import numba
import numpy as np

from workers.backend import resolve_device

MARGIN = 1e-3           # the filter sums float32 in another order than the exact float64 sums: it keeps what is this
                        # close (a sum of <= 64 columns of |score| < 100 errs by < 4e-4 in float32)


#: codes of the filter's contexts: 0-3 A C G T, 4 N (scores -1e30: the window fails), 5-10 an SNV's two bases (the
#: better of the two counts: AC AG AT CG CT GT), so that one pass over the ref context tests both alleles
PAIRS = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
PAIR_CODE = np.full((4, 4), -1, np.int64)
for _k, (_x, _y) in enumerate(PAIRS):
    PAIR_CODE[_x, _y] = PAIR_CODE[_y, _x] = 5 + _k


@numba.njit(cache=True, nogil=True, parallel=True)
def _reaching(codes, starts, e0, e1, snv, pwms, lengths, order, rest, alpha, out):  # pragma: no cover - compiled
    # rows outside, alleles inside: a row's matrix stays in L1 while every allele's context passes.  The six most
    # informative columns are added without a branch (N and pair codes are columns of the matrix): most windows fail
    # there, on a branch the CPU predicts
    n = snv.size
    for r in numba.prange(lengths.size):
        m = lengths[r]
        need = alpha[r] - MARGIN
        o0, o1, o2 = order[r, 0], order[r, 1 % m], order[r, 2 % m]
        o3, o4, o5 = order[r, 3 % m], order[r, 4 % m], order[r, 5 % m]
        head = min(m, 6)
        cut = rest[r, head - 1] if head >= 1 else 0.0
        for i in range(n):
            hit = False
            for side in range(2):
                if side == 1 and snv[i]:
                    break                       # an SNV: both alleles were tested in the ref context's pass
                a = i + side * n
                lo = starts[a]
                size = starts[a + 1] - lo
                for s in range(max(e0[a] - m + 1, 0), min(e1[a] - 1, size - m) + 1):
                    w = lo + s
                    acc = pwms[r, o0, codes[w + o0]]
                    if head > 1:
                        acc += pwms[r, o1, codes[w + o1]]
                    if head > 2:
                        acc += pwms[r, o2, codes[w + o2]]
                    if head > 3:
                        acc += pwms[r, o3, codes[w + o3]]
                    if head > 4:
                        acc += pwms[r, o4, codes[w + o4]]
                    if head > 5:
                        acc += pwms[r, o5, codes[w + o5]]
                    if acc + cut < need:
                        continue
                    ok = True
                    for jj in range(head, m):
                        j = order[r, jj]
                        acc += pwms[r, j, codes[w + j]]
                        if acc + rest[r, jj] < need:
                            ok = False
                            break
                    if ok:
                        hit = True
                        break
                if hit:
                    break
            out[i, r] = hit


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
    """Motif rows laid out for the kernels: the matrices stacked (zero-padded; float64, and float32 for the filter),
    their lengths, each row's columns by decreasing spread (max - min) and the most the columns after each could add."""

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
        self.stack32 = np.zeros((len(pwms), width, 5 + len(PAIRS)), np.float32)
        self.stack32[:, :, :4] = self.stack
        self.stack32[:, :, 4] = -1e30
        for k, (x, y) in enumerate(PAIRS):
            self.stack32[:, :, 5 + k] = np.maximum(self.stack[:, :, x], self.stack[:, :, y])
        self.rest32 = (self.rest + MARGIN / 4).astype(np.float32)       # rounded up a little: never cuts a reacher
        self.alpha = None if alpha is None else np.ascontiguousarray(alpha, np.float64)


def _contig(codes, starts, e0, e1):
    return (np.ascontiguousarray(codes, np.uint8), np.ascontiguousarray(starts, np.int64),
            np.ascontiguousarray(e0, np.int64), np.ascontiguousarray(e1, np.int64))


def reaching(codes, starts, e0, e1, rows: Rows, device: str = "cpu") -> np.ndarray:
    """``(n, n_rows)`` bool for the ``n`` alleles whose ref contexts are ``0..n-1`` and alt contexts ``n..2n-1``: a
    covering window of the row on either allele may reach its threshold (every pair where one does is marked; a few
    within ``MARGIN`` below it may be too).  An SNV's two alleles are tested in one pass over its ref context."""
    codes, starts, e0, e1 = _contig(codes, starts, e0, e1)
    n = (starts.size - 1) // 2
    at_ref, at_alt = starts[:n] + e0[:n], starts[n:2 * n] + e0[n:]
    one = (e1[:n] - e0[:n] == 1) & (e1[n:] - e0[n:] == 1)
    one &= (codes[at_ref] < 4) & (codes[at_alt] < 4)
    merged = codes.copy()
    merged[at_ref[one]] = PAIR_CODE[codes[at_ref[one]], codes[at_alt[one]]]
    if resolve_device(device) == "gpu":
        from workers.variants.gpu import reaching_gpu  # noqa: PLC0415

        return reaching_gpu(merged, starts, e0, e1, one, rows, MARGIN)
    out = np.zeros((n, rows.lengths.size), np.bool_)
    alpha = np.where(np.isfinite(rows.alpha), rows.alpha, np.inf).astype(np.float32)
    _reaching(merged, starts, e0, e1, one, rows.stack32, rows.lengths, rows.order, rows.rest32, alpha, out)
    return out


def best_of(codes, starts, e0, e1, rows: Rows, ctx: np.ndarray, row: np.ndarray, device: str = "cpu"):
    """``(score, start)`` of the best covering window of each (context ``ctx[i]``, row ``row[i]``) pair (``-inf`` and
    ``-1`` where none is scored: an edit beside a record's end, or Ns)."""
    if resolve_device(device) == "gpu":
        from workers.variants.gpu import best_of_gpu  # noqa: PLC0415

        return best_of_gpu(codes, starts, e0, e1, rows, ctx, row)
    best = np.empty(ctx.size, np.float64)
    where = np.empty(ctx.size, np.int64)
    _best_of(*_contig(codes, starts, e0, e1), rows.stack, rows.lengths, np.ascontiguousarray(ctx, np.int64),
             np.ascontiguousarray(row, np.int64), best, where)
    return best, where
