"""Do a motif's best sites crowd the sequence centres?  CentriMo's central-enrichment test (``--centrality``).

What is implemented is CentriMo's default mode (MEME suite ``centrimo``, read in ``src/centrimo.c``:
``score_sequence``, ``calculate_best_windows``, ``window_binomial``, ``LOGEV``), with the site threshold
given by the run (the motif's p-value threshold, as CentriMo's ``--use-pvalues``) instead of 5 bits:

1. **Best site.**  Per (sequence, motif), the best-scoring site over both strands; a sequence counts for
   the motif when that site passes the threshold (``total_sites`` = such sequences).  Sites tied for best
   share the sequence: ``1/n`` each (scores within ``1e-9`` relative are ties: a palindrome's two strands
   score equal but for float rounding in another column order).
2. **Positions.**  A site's centre, in half-base units from the sequence start: ``2·start + w − 1``
   (``w`` the motif width); the ``n_bins = L − w + 1`` possible positions of a width-``w`` site in a
   length-``L`` sequence all have one parity.  The sequence centre is ``L − 1``.
3. **Central windows.**  Windows of ``k`` positions around the centre, ``k = 1, 3, 5, …`` when ``n_bins``
   is odd and ``2, 4, 6, …`` when even, up to ``n_bins − 1`` (one position always outside).
4. **Statistic.**  For each window, the one-tailed binomial test of the weighted sites inside:
   ``P(X ≥ sites)``, ``X ~ Binomial(total_sites, k / n_bins)``, computed as the regularised incomplete
   beta ``I_{k/n_bins}(sites, total − sites + 1)`` (continuous in ``sites``, as the tie weights need).
   p = 1 when the window holds no site.
5. **Multiple tests.**  ``p_adj = 1 − (1 − p)^m`` with ``m`` the number of windows tested; the reported
   window is the one with the smallest ``p_adj`` (ties: the narrower); the E-value is ``p_adj`` × the
   number of motifs.

Everything is kept in logs (``log_betainc`` switches to the continued fraction in log space where
``scipy.special.betainc`` would underflow), so summit-centred motifs of large peak sets keep ordered
values far below 1e-300.  CentriMo's options ``--local``, ``--optimize-score``, ``--flip``, ``--neg`` /
Fisher mode and ``--cd`` are not implemented.  CentriMo needs sequences of one length (it keeps those of
the first sequence's length); :func:`central_enrichment` takes that length and the sites of sequences of
that length, the caller choosing which.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from pipeline.enrich.stats import EnrichError
from pipeline.io import arrow

#: Per motif (in motif order): CentriMo's best central window.  ``centrality_pvalue`` is the adjusted
#: p-value (CentriMo's adj_p-value), ``centrality_width`` its window in positions (bin_width),
#: ``centrality_sites`` the weighted best sites inside (sites_in_bin), ``centrality_total`` the sequences with a
#: best site (total_sites), ``centrality_bins`` the positions a site can take (total_width),
#: ``centrality_tests`` the windows tested (mult_tests).
CENTRALITY_SCHEMA = pa.schema([
    pa.field("centrality_pvalue", pa.float64(), nullable=False),
    pa.field("centrality_log10_pvalue", pa.float64(), nullable=False),
    pa.field("centrality_evalue", pa.float64(), nullable=False),
    pa.field("centrality_width", pa.int32(), nullable=False),
    pa.field("centrality_sites", pa.float64(), nullable=False),
    pa.field("centrality_total", pa.int64(), nullable=False),
    pa.field("centrality_bins", pa.int32(), nullable=False),
    pa.field("centrality_tests", pa.int32(), nullable=False),
])

_LN10 = np.log(10.0)
TIE_TOLERANCE = 1e-9


def _betacf(a, b, x) -> np.ndarray:
    """Continued fraction of the incomplete beta function (modified Lentz), vectorised; converges fast
    for ``x < (a + 1) / (a + b + 2)``."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(a)
    d = 1.0 - qab * x / qap
    d = 1.0 / np.where(np.abs(d) < tiny, tiny, d)
    h = d.copy()
    todo = np.ones(a.shape, dtype=bool)
    m = 0
    while todo.any() and m < 100000:
        m += 1
        i = np.flatnonzero(todo)
        for aa in (m * (b[i] - m) * x[i] / ((qam[i] + 2 * m) * (a[i] + 2 * m)),
                   -(a[i] + m) * (qab[i] + m) * x[i] / ((a[i] + 2 * m) * (qap[i] + 2 * m))):
            dd = 1.0 + aa * d[i]
            dd = 1.0 / np.where(np.abs(dd) < tiny, tiny, dd)
            cc = 1.0 + aa / c[i]
            cc = np.where(np.abs(cc) < tiny, tiny, cc)
            d[i], c[i] = dd, cc
            step = dd * cc
            h[i] *= step
        todo[i] = np.abs(step - 1.0) > 3e-16
    return h


def log_betainc(a, b, x) -> np.ndarray:
    """Natural log of the regularised incomplete beta ``I_x(a, b)`` (a, b > 0, 0 ≤ x ≤ 1), finite where
    the value underflows double precision: there ``a·log x + b·log(1 − x) − log B(a, b) − log a`` plus the
    log of the continued fraction (the form ``scipy.special.betainc`` itself takes in that tail)."""
    from scipy.special import betainc, betaln  # noqa: PLC0415

    shape = np.broadcast(a, b, x).shape
    a, b, x = (np.atleast_1d(np.asarray(v, dtype=np.float64)) for v in np.broadcast_arrays(a, b, x))
    r = betainc(a, b, x)
    with np.errstate(divide="ignore"):
        out = np.log(r)
    small = (r < 1e-280) & (x > 0) & (x < (a + 1.0) / (a + b + 2.0))
    if small.any():
        s_a, s_b, s_x = a[small], b[small], x[small]
        front = s_a * np.log(s_x) + s_b * np.log1p(-s_x) - betaln(s_a, s_b) - np.log(s_a)
        out[small] = front + np.log(_betacf(s_a, s_b, s_x))
    return out.reshape(shape)


def binomial_log_sf(sites, total, p_success) -> np.ndarray:
    """CentriMo's ``window_binomial``: natural log of ``P(X ≥ sites)``, X ~ Bin(total, p_success), for
    real ``sites`` (tie weights); 0 (p = 1) when ``sites`` is 0 or ``p_success`` is 1."""
    s, n, p = (np.asarray(v, dtype=np.float64) for v in np.broadcast_arrays(sites, total, p_success))
    out = np.zeros(s.shape)
    ok = (s > 0) & (p < 1.0)
    if ok.any():
        out[ok] = log_betainc(s[ok], n[ok] - s[ok] + 1.0, p[ok])
    return np.minimum(out, 0.0)


def log_adjust(log_p, n_tests) -> np.ndarray:
    """CentriMo's ``LOGEV``: ``log(1 − (1 − p)^n)`` from ``log p``, exact where ``p`` underflows."""
    lp, n = (np.asarray(v, dtype=np.float64) for v in np.broadcast_arrays(log_p, n_tests))
    out = np.array(lp + np.log(n))          # n·p: the value to double precision once n·p < 1e-10
    big = lp + np.log(n) > np.log(1e-10)
    if big.any():
        p = np.exp(lp[big])
        out[big] = np.log(-np.expm1(n[big] * np.log1p(-np.minimum(p, 1.0 - 1e-16))))
    return np.minimum(out, 0.0)


def central_windows(n_bins: int, min_win: int = 1, max_win: int | None = None) -> np.ndarray:
    """The window sizes (in positions) CentriMo tests for a motif with ``n_bins`` possible positions:
    those of ``n_bins``'s parity from ``min_win`` to ``max_win`` (default and most ``n_bins − 1``)."""
    hi = n_bins - 1 if max_win is None or max_win >= n_bins else int(max_win)
    lo = max(int(min_win), 1)
    if lo % 2 != n_bins % 2:
        lo += 1
    if hi % 2 != n_bins % 2:
        hi -= 1
    return np.arange(lo, hi + 1, 2, dtype=np.int64) if hi >= lo else np.zeros(0, dtype=np.int64)


def best_sites(motif, record, start, score) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The best site(s) of every (motif, record) among the given sites (those passing the threshold).

    Returns ``(motif, record, start, weight)``: the sites tied for the best score (within
    ``TIE_TOLERANCE`` relative), each weighted ``1/n`` for the ``n`` tied sites of its (motif, record).
    """
    motif, record, start = (np.asarray(v, dtype=np.int64) for v in (motif, record, start))
    score = np.asarray(score, dtype=np.float64)
    if motif.size == 0:
        return motif, record, start, np.zeros(0)
    order = np.lexsort((-score, record, motif))
    motif, record, start, score = motif[order], record[order], start[order], score[order]
    first = np.ones(motif.size, dtype=bool)
    first[1:] = (motif[1:] != motif[:-1]) | (record[1:] != record[:-1])
    group = np.cumsum(first) - 1
    best = score[first][group]
    keep = score >= best - TIE_TOLERANCE * np.maximum(1.0, np.abs(best))
    ties = np.bincount(group[keep])
    return motif[keep], record[keep], start[keep], 1.0 / ties[group[keep]]


def central_enrichment(widths, seq_length: int, motif, record, start, score, *, n_motifs_tested: int | None = None,
                       min_win: int = 1, max_win: int | None = None) -> pa.Table:
    """CentriMo's central enrichment of every motif, one row per motif (``CENTRALITY_SCHEMA``).

    Parameters
    ----------
    widths : array-like of int, shape (M,)
        Motif widths.
    seq_length : int
        The sequences' common length L.
    motif, record, start, score : array-like, shape (S,)
        The sites passing each motif's threshold in sequences of length L: motif index, sequence
        number, 0-based start on the forward strand (either strand's site), score.
    n_motifs_tested : int, optional
        For the E-value (M by default).
    min_win, max_win : int
        CentriMo's ``--minreg`` / ``--maxreg`` (positions).
    """
    widths = np.asarray(widths, dtype=np.int64)
    M, L = widths.size, int(seq_length)
    m, _, s, wt = best_sites(motif, record, start, score)
    if m.size and ((m < 0).any() or (m >= M).any()):
        raise EnrichError(f"a site names motif {int(m.max())}; there are {M} motifs")
    pos = 2 * s + widths[m] - 1
    if ((s < 0) | (pos > 2 * L - widths[m] - 1)).any():
        raise EnrichError(f"a site lies outside its sequence of length {L}")
    total = np.bincount(m, weights=wt, minlength=M).round().astype(np.int64)
    counts = np.zeros((M, 2 * L), dtype=np.float64)
    np.add.at(counts, (m, pos + 1), wt)          # counts[:, j + 1]: sites at position j
    cum = np.cumsum(counts, axis=1)              # cum[:, j + 1]: sites at positions <= j
    cols = {k: np.zeros(M) for k in ("log_adj", "width", "sites", "bins", "tests")}
    for w in np.unique(widths):
        idx = np.flatnonzero(widths == w)
        n_bins = L - int(w) + 1
        k = central_windows(n_bins, min_win, max_win)
        cols["bins"][idx] = max(n_bins, 0)
        cols["tests"][idx] = max(k.size, 1)
        if k.size == 0:
            continue
        c = L - 1
        inside = cum[np.ix_(idx, c + k)] - cum[np.ix_(idx, c - k + 1)]     # positions c-(k-1) .. c+(k-1)
        inside = np.maximum(inside, 0.0)
        lp = binomial_log_sf(inside, total[idx, None], k[None, :] / n_bins)
        la = log_adjust(lp, k.size)
        best = np.argmin(la, axis=1)            # first minimum: the narrower window on ties
        rows = np.arange(idx.size)
        cols["log_adj"][idx] = la[rows, best]
        cols["width"][idx] = k[best]
        cols["sites"][idx] = inside[rows, best]
    T = M if n_motifs_tested is None else int(n_motifs_tested)
    l10 = cols["log_adj"] / _LN10
    return arrow.table({
        "centrality_pvalue": 10.0 ** l10,
        "centrality_log10_pvalue": l10,
        "centrality_evalue": np.minimum(10.0 ** (l10 + np.log10(max(T, 1))), float(max(T, 1))),
        "centrality_width": cols["width"].astype(np.int32),
        "centrality_sites": cols["sites"],
        "centrality_total": total,
        "centrality_bins": cols["bins"].astype(np.int32),
        "centrality_tests": cols["tests"].astype(np.int32),
    }, schema=CENTRALITY_SCHEMA)
