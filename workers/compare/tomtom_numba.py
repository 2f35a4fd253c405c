"""Numba kernel of the Tomtom search on the CPU: the span score distributions' convolution step.

:func:`workers.compare.tomtom.span_log_cdf` grows every span's score pmf by one query column at a time.  In
NumPy each tap of the column histogram is a broadcast product and an add over all queries and starts (a
temporary the size of the output per tap): half of the clustering time of ``motifgrid enrich`` (300 motifs,
docs/benchmarks.md, issue 19).  Here one compiled pass, the taps in the same order, so the sums are the same
bit for bit.  Compiled on first use, cached on disk (``cache=True``), like :mod:`workers.compare.cpu_numba`.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def convolve_spans(prev, ker, taps, nxt):  # pragma: no cover - compiled
    """``nxt[q, a, k:k + L] += prev[q, a] * ker[q, a, k]`` for ``k`` in ``taps`` (ascending), every query
    ``q`` and start ``a``.

    Parameters
    ----------
    prev : ndarray, shape (Q, s, L), float64
        Span pmfs.
    ker : ndarray, shape (Q, s, K), float64
        The next column's lattice score histogram of each span.
    taps : ndarray, shape (T,), int64
        The histogram entries that may be non-zero, ascending.
    nxt : ndarray, shape (Q, s, L + K - 1), float64
        Zero on entry; the convolved pmfs.
    """
    Q, s, L = prev.shape
    for q in range(Q):
        for a in range(s):
            p = prev[q, a]
            o = nxt[q, a]
            for t in range(taps.size):
                k = taps[t]
                w = ker[q, a, k]
                if w == 0.0:          # adds +0.0 to non-negative sums: nothing to do
                    continue
                for u in range(L):
                    o[k + u] += p[u] * w


@numba.njit(cache=True, nogil=True)
def log_cdf_spans(pmf, out, log_zero):  # pragma: no cover - compiled
    """``out[q, a, u] = log P(X <= u)`` of each span pmf ``pmf[q, a]``: :func:`workers.compare.tomtom._log_cdf` in
    one pass per row, written straight into the caller's slice of the output (NumPy made eight temporaries the
    size of the output per span length).  The cumulative sums run in NumPy's order (up from the bottom, and down
    from the top for the upper tail), so they are the same bit for bit; ``log`` and ``log1p`` are the C library's.

    Parameters
    ----------
    pmf : ndarray, shape (Q, s, L), float64
    out : ndarray, shape (Q, s, L), float64
        Written.
    log_zero : float
        The value where ``P(X <= u) = 0``.
    """
    Q, s, L = pmf.shape
    above = np.empty(L)
    for q in range(Q):
        for a in range(s):
            p = pmf[q, a]
            o = out[q, a]
            acc = 0.0
            for u in range(L - 1, -1, -1):     # P(X > u), summed from the top
                above[u] = acc
                acc += p[u]
            c = 0.0
            for u in range(L):
                c += p[u]
                if not c > 0.0:
                    o[u] = log_zero
                elif c > 0.5:
                    o[u] = np.log1p(-min(above[u], 0.5))
                else:
                    o[u] = np.log(max(c, 1e-300))
