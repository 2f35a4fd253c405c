"""Which motifs are over-represented in a sequence set?  The statistics of ``motifgrid enrich``.

Per motif the counts are the sequences with at least one site (either strand) at the motif's threshold:
``pos_seqs`` of the ``pos_total`` targets and ``neg_seqs`` of the ``neg_total`` controls.  They make the
2 × 2 table ``[[pos_seqs, pos_total - pos_seqs], [neg_seqs, neg_total - neg_seqs]]`` and

- **p-value**: one-sided Fisher's exact test for over-representation in the targets, the statistic of
  MEME's SEA (and HOMER's hypergeometric test): ``P(X ≥ pos_seqs)``, X hypergeometric with the table's
  margins.  It is computed as ``log10 p`` (:func:`fisher_log10_pvalue`): the tail is summed in log space,
  term ratios taken from ``gammaln``, so p-values far below 1e-300 (10⁴ peaks with a strong motif reach
  1e-3000) stay finite and ordered; the ``pvalue`` column is ``10 ** log10_pvalue`` and underflows to 0
  there, ``log10_pvalue`` is what ranks.
- **odds ratio**: ``(a·d) / (b·c)`` of the table; when a cell is 0, the Haldane–Anscombe correction: 0.5
  added to all four cells (so the ratio stays finite and its sign of enrichment right).
- **E-value**: p × the number of motifs tested (SEA, Tomtom, CentriMo).
- **q-value**: Benjamini–Hochberg over the motifs tested, computed from ``log10 p`` (:func:`bh_log10_qvalues`), so
  that a q far below 1e-308 stays ordered; ``log10_evalue`` and ``log10_qvalue`` carry E and q where their float
  columns underflow to 0 (TAp73 peaks: TP53 at E ≈ 1e-324 was written "E=0 q=0", and the top motifs tied), and the
  TSV and the summary write them from the logs (:func:`pipeline.enrich.report.sci`), never as 0.

:func:`enrichment_table` puts this together as the ``enrichment.tsv`` / ``.parquet`` table
(``ENRICHMENT_SCHEMA``), sorted by p-value, with optional cluster columns (``--cluster``) and the
centrality columns of :mod:`pipeline.enrich.centrality` (``--centrality``).
"""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from pipeline import MotifgridError, __version__
from pipeline.io import arrow

#: One row per motif, best first.  ``cluster``/``representative``: the motif's similarity cluster and its
#: best-ranked member (null without ``--cluster``); ``pvalue`` = 10^log10_pvalue (0 below ~1e-308).
ENRICHMENT_SCHEMA = pa.schema([
    pa.field("rank", pa.int32(), nullable=False),
    pa.field("motif_id", pa.string(), nullable=False),
    pa.field("motif_name", pa.string(), nullable=False),
    pa.field("cluster", pa.int32()),
    pa.field("representative", pa.string()),
    pa.field("pos_seqs", pa.int64(), nullable=False),
    pa.field("pos_total", pa.int64(), nullable=False),
    pa.field("neg_seqs", pa.int64(), nullable=False),
    pa.field("neg_total", pa.int64(), nullable=False),
    pa.field("odds_ratio", pa.float64(), nullable=False),
    pa.field("pvalue", pa.float64(), nullable=False),
    pa.field("log10_pvalue", pa.float64(), nullable=False),
    pa.field("evalue", pa.float64(), nullable=False),
    pa.field("qvalue", pa.float64(), nullable=False),
    pa.field("log10_evalue", pa.float64(), nullable=False),
    pa.field("log10_qvalue", pa.float64(), nullable=False),
])
#: columns whose value underflows to 0 below ~1e-308, and the log10 column that carries it on
UNDERFLOWING = {"pvalue": "log10_pvalue", "evalue": "log10_evalue", "qvalue": "log10_qvalue"}

_LN10 = np.log(10.0)
_BLOCK = 256          # tail terms evaluated per pass
_NEGLIGIBLE = -50.0   # a term e^-50 below the tail's first (largest) term no longer changes a float64 sum


class EnrichError(MotifgridError, ValueError):
    """Counts or options enrichment cannot use (one line)."""


class EnrichWarning(UserWarning):
    """An enrichment that ran, but not quite as asked (controls of a wider GC bin, a centrality test on some of the
    targets).  The CLI prints it as one line (``one_line``)."""
    one_line = True


def _log_pmf(x, N, K, n):
    """Natural log of the hypergeometric pmf: x successes in n draws from N holding K successes."""
    from scipy.special import gammaln  # noqa: PLC0415

    return (gammaln(K + 1) - gammaln(x + 1) - gammaln(K - x + 1)
            + gammaln(N - K + 1) - gammaln(n - x + 1) - gammaln(N - K - n + x + 1)
            + gammaln(n + 1) + gammaln(N - n + 1) - gammaln(N + 1))


def _log_tail(start, stop, step: int, N, K, n) -> np.ndarray:
    """``log Σ pmf(x)`` for x from ``start`` to ``stop`` (inclusive) in steps of ``step`` (±1), where the
    terms decrease away from ``start``: summed relative to the first term, block by block, until a block
    ends past ``stop`` or its last term is negligible.  All arguments are float64 arrays of one shape."""
    first = _log_pmf(start, N, K, n)
    acc = np.zeros_like(first)
    pos = start.copy()
    todo = np.flatnonzero((stop - start) * step >= 0)
    j = np.arange(_BLOCK, dtype=np.float64) * step
    while todo.size:
        x = pos[todo, None] + j
        valid = (x - stop[todo, None]) * step <= 0
        x = np.where(valid, x, start[todo, None])          # stay in the support (masked below)
        t = _log_pmf(x, N[todo, None], K[todo, None], n[todo, None]) - first[todo, None]
        t = np.where(valid, t, -np.inf)
        acc[todo] += np.exp(t).sum(axis=1)
        pos[todo] += _BLOCK * step
        todo = todo[valid[:, -1] & (t[:, -1] > _NEGLIGIBLE)]
    return first + np.log(acc)


def fisher_log10_pvalue(pos_seqs, pos_total, neg_seqs, neg_total) -> np.ndarray:
    """``log10`` of the one-sided (greater) Fisher exact p-value of each table
    ``[[pos_seqs, pos_total - pos_seqs], [neg_seqs, neg_total - neg_seqs]]``: P(X ≥ pos_seqs).

    Parameters
    ----------
    pos_seqs, pos_total, neg_seqs, neg_total : array-like of int, one shape (broadcast)

    Returns
    -------
    numpy.ndarray of float64, ≤ 0 (0 is p = 1); finite for any counts (no underflow).

    The upper tail is summed directly when ``pos_seqs`` is above the distribution's mode (terms fall
    from the first); otherwise p = 1 − P(X ≤ pos_seqs − 1), that lower tail summed downwards (its terms
    fall too), and p is then at least the mode's probability, so the subtraction loses nothing.
    """
    a, n1, c, n2 = (np.asarray(v, dtype=np.float64) for v in np.broadcast_arrays(pos_seqs, pos_total,
                                                                                 neg_seqs, neg_total))
    shape = a.shape
    a, n1, c, n2 = a.ravel(), n1.ravel(), c.ravel(), n2.ravel()
    if ((a < 0) | (c < 0) | (a > n1) | (c > n2)).any():
        raise EnrichError("counts must satisfy 0 <= seqs <= total")
    N, K = n1 + n2, a + c
    lo = np.maximum(0.0, n1 - (N - K))
    hi = np.minimum(K, n1)
    mode = np.floor((n1 + 1) * (K + 1) / (N + 2))
    out = np.zeros(a.shape)
    up = a > np.maximum(mode, lo)
    if up.any():
        out[up] = _log_tail(a[up], hi[up], +1, N[up], K[up], n1[up])
    low = (a > lo) & ~up
    if low.any():
        below = _log_tail(a[low] - 1, lo[low], -1, N[low], K[low], n1[low])
        out[low] = np.log(-np.expm1(np.minimum(below, 0.0)))
    return np.minimum(out, 0.0).reshape(shape) / _LN10


def odds_ratio(pos_seqs, pos_total, neg_seqs, neg_total) -> np.ndarray:
    """Sample odds ratio ``(a·d)/(b·c)`` of each table; with a zero cell, Haldane–Anscombe (+0.5 to every
    cell).  Float64 array of the broadcast shape."""
    a, n1, c, n2 = (np.asarray(v, dtype=np.float64) for v in (pos_seqs, pos_total, neg_seqs, neg_total))
    b, d = n1 - a, n2 - c
    zero = (a == 0) | (b == 0) | (c == 0) | (d == 0)
    h = np.where(zero, 0.5, 0.0)
    return (a + h) * (d + h) / ((b + h) * (c + h))


def enrichment_table(motif_ids, motif_names, pos_seqs, pos_total, neg_seqs, neg_total, *,
                     n_tests: int | None = None, clusters=None, representatives=None,
                     extra: pa.Table | None = None, params: dict | None = None) -> pa.Table:
    """The enrichment table of ``ENRICHMENT_SCHEMA`` (+ the columns of ``extra``), best motif first.

    Parameters
    ----------
    motif_ids, motif_names : sequence of str, length M
    pos_seqs, neg_seqs : array-like of int, shape (M,)
        Targets / controls with at least one site of each motif.
    pos_total, neg_total : int or array-like of int, shape (M,)
        Targets / controls scanned.
    n_tests : int, optional
        Motifs tested, for E- and q-values (M by default).
    clusters, representatives : array-like, shape (M,), optional
        Each motif's cluster number and its cluster's representative motif id.
    extra : pyarrow.Table, optional
        M rows of further per-motif columns in motif order (e.g. :func:`pipeline.enrich.centrality.central_enrichment`),
        appended after ``qvalue``.
    params : dict, optional
        Run parameters, stored as JSON under the ``motifgrid.enrich`` metadata key.

    Sorted by ``log10_pvalue``, ties by the larger odds ratio, then motif order; ``rank`` counts from 1.
    """
    M = len(motif_ids)
    if len(motif_names) != M:
        raise EnrichError(f"{len(motif_names)} motif names for {M} motif ids")
    a, n1, c, n2 = (np.broadcast_to(np.asarray(v, dtype=np.int64), (M,))
                    for v in (pos_seqs, pos_total, neg_seqs, neg_total))
    if M and ((n1 < 1).any() or (n2 < 1).any()):
        raise EnrichError("no target or no control sequences were scanned")
    T = M if n_tests is None else int(n_tests)
    if T < M:
        raise EnrichError(f"n_tests ({T}) is below the number of motifs ({M})")
    lp = fisher_log10_pvalue(a, n1, c, n2)
    p = 10.0 ** lp
    orr = odds_ratio(a, n1, c, n2)
    lq = bh_log10_qvalues(lp, T)
    le = np.minimum(lp + np.log10(float(max(T, 1))), np.log10(float(max(T, 1))))
    order = np.lexsort((np.arange(M), -orr, lp))
    cols = {
        "rank": np.arange(1, M + 1, dtype=np.int32),
        "motif_id": [motif_ids[i] for i in order],
        "motif_name": [motif_names[i] for i in order],
        "pos_seqs": a[order], "pos_total": n1[order], "neg_seqs": c[order], "neg_total": n2[order],
        "odds_ratio": orr[order], "pvalue": p[order], "log10_pvalue": lp[order],
        "evalue": _evalues(p, lp, T)[order], "qvalue": (10.0 ** lq)[order],
        "log10_evalue": le[order], "log10_qvalue": lq[order],
    }
    arrays = [arrow.column(cols[f.name], f.type) if f.name in cols else
              _optional(f.name, f.type, clusters if f.name == "cluster" else representatives, order, M)
              for f in ENRICHMENT_SCHEMA]
    schema = ENRICHMENT_SCHEMA
    if extra is not None:
        if extra.num_rows != M:
            raise EnrichError(f"extra columns have {extra.num_rows} rows for {M} motifs")
        taken = extra.take(arrow.column(np.asarray(order, np.int64)))
        arrays += list(taken.columns)
        schema = pa.schema(list(ENRICHMENT_SCHEMA) + list(extra.schema))
    meta = {**(params or {}), "n_tests": T, "motifgrid_version": __version__}
    return pa.Table.from_arrays(arrays, schema=schema).replace_schema_metadata(
        {"motifgrid.enrich": json.dumps(meta)})


def _optional(name: str, typ: pa.DataType, values, order, M: int) -> pa.Array:
    """A nullable column in table order; ``None`` entries are nulls (motifs left out of the clustering)."""
    if values is None:
        return pa.nulls(M, typ)
    values = np.asarray(values, dtype=object)
    if values.shape != (M,):
        raise EnrichError(f"{name}: {values.shape[0] if values.ndim else 0} values for {M} motifs")
    taken = values[order].tolist()
    return arrow.nullable([v if v is None or pa.types.is_string(typ) else int(v) for v in taken], typ)


def bh_log10_qvalues(log10_p: np.ndarray, tests: int) -> np.ndarray:
    """Benjamini–Hochberg q-values, as log10, of ``M`` p-values given as log10 among ``tests >= M`` tests (the others
    taken as p = 1): ``log10 q_(i) = min(0, min_{j >= i} log10 p_(j) + log10(tests / j))``, exact far below 1e-308.

    Parameters
    ----------
    log10_p : numpy.ndarray, shape (M,), float64
    tests : int

    Returns
    -------
    numpy.ndarray, shape (M,), float64, at most 0, in the order of ``log10_p``
    """
    lp = np.asarray(log10_p, dtype=np.float64)
    M = lp.size
    if not M:
        return lp.copy()
    order = np.argsort(lp, kind="stable")
    ranked = lp[order] + np.log10(float(tests)) - np.log10(np.arange(1, M + 1, dtype=np.float64))
    # the tests beyond M (p = 1) rank after every tested motif: their q is 1, which caps the running minimum at 0
    ranked = np.minimum(np.minimum.accumulate(ranked[::-1])[::-1], 0.0)
    out = np.empty(M)
    out[order] = ranked
    return out


def _evalues(p: np.ndarray, lp: np.ndarray, tests: int) -> np.ndarray:
    """E = p × tests: the product where p is a normal float (p = 1 gives exactly ``tests``), from the log below
    (an E above the float range's bottom whose p is not)."""
    m = float(max(tests, 1))
    tiny = p < np.finfo(np.float64).tiny
    return np.where(tiny, np.minimum(10.0 ** (lp + np.log10(m)), m), p * m)

