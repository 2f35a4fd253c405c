"""Groups of redundant motifs on the identification statistic (``compare A --cluster E``, enrichment's grouping).

Two motifs of one collection are as alike as the Tomtom E-value of their alignment says
(:mod:`pipeline.compare.identify`); the pair's E-value is made symmetric as ``N · max(p_ij, p_ji)`` (``N`` motifs:
the E-value of the worse direction, so a short motif matching inside a long one is not enough on its own).
Clusters are average linkage (UPGMA, scipy) on ``log10 E``: two groups merge while the mean ``log10 E`` over
their cross pairs is at most ``log10(cutoff)`` — on average the members identify each other at ``E <=
cutoff``.  Single linkage would chain a family into its neighbours through one similar pair, complete linkage
splits families whose ends differ (a half site and its dimer); on JASPAR 2024 vertebrates average linkage at
E <= 1 keeps GATA, SOX, FOX and AP-1 (Fos/Jun) families together best (docs/benchmarks.md).  Each cluster's
representative is its medoid: the member with the smallest mean ``log10 E`` to the others (ties: the first
in the file).

:func:`cluster_motifs` computes all of it for a list of motifs (in this process, or on a Dask client);
:func:`cluster_pvalues` clusters an existing all-pairs p-value matrix; :func:`clusters_table` and
:func:`write_clusters` make ``clusters.parquet`` / ``clusters.tsv`` (ids and names).
"""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from pipeline import MotifgridError
from pipeline.io import arrow

#: All pairs of this many motifs are held in memory (N² float64): refuse more.
MAX_MOTIFS = 10_000
#: log10 E below this is one value (p-values underflow near 1e-300)
_LOG_FLOOR = -300.0


class ClusterError(MotifgridError, ValueError):
    pass


def symmetric_evalues(pvalue: np.ndarray) -> np.ndarray:
    """``(N, N)`` float64: ``N · max(p_ij, p_ji)``, 0 on the diagonal, from the ``(N, N)`` p-values of a
    collection against itself (rows: queries)."""
    p = np.asarray(pvalue, dtype=np.float64)
    if p.ndim != 2 or p.shape[0] != p.shape[1]:
        raise ClusterError(f"clustering needs the p-values of a collection against itself, got shape {p.shape}")
    e = np.maximum(p, p.T) * p.shape[0]
    np.fill_diagonal(e, 0.0)
    return e


def _log_e(evalue: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.maximum(np.log10(evalue), _LOG_FLOOR)


def average_linkage(evalue: np.ndarray, cutoff: float) -> np.ndarray:
    """``(N,)`` int64 cluster labels: average linkage on ``log10 E``, cut at ``log10(cutoff)``; labels
    numbered by cluster size (largest first), then by first member."""
    from scipy.cluster.hierarchy import fcluster, linkage  # noqa: PLC0415
    from scipy.spatial.distance import squareform  # noqa: PLC0415

    n = evalue.shape[0]
    if n == 1:
        return np.zeros(1, np.int64)
    d = _log_e(evalue) - _LOG_FLOOR                          # >= 0; a shift does not change averages
    np.fill_diagonal(d, 0.0)
    z = linkage(squareform(d, checks=False), method="average")
    raw = fcluster(z, max(np.log10(cutoff), _LOG_FLOOR) - _LOG_FLOOR, criterion="distance")
    return _renumber(raw)


def _renumber(raw: np.ndarray) -> np.ndarray:
    """Labels 0.. by size (largest first), then by the first member's position."""
    _, inv, counts = np.unique(raw, return_inverse=True, return_counts=True)
    first = np.full(counts.size, raw.size)
    np.minimum.at(first, inv, np.arange(raw.size))
    order = np.lexsort((first, -counts))
    rank = np.empty_like(order)
    rank[order] = np.arange(order.size)
    return rank[inv].astype(np.int64)


def medoids(labels: np.ndarray, evalue: np.ndarray) -> np.ndarray:
    """``(K,)`` int64: each cluster's member with the smallest mean ``log10 E`` to the other members (ties:
    the first)."""
    loge = _log_e(evalue)
    reps = np.empty(int(labels.max()) + 1, np.int64)
    for k in range(reps.size):
        members = np.flatnonzero(labels == k)
        cost = loge[np.ix_(members, members)].sum(axis=1) - np.diag(loge)[members]
        reps[k] = members[int(np.argmin(cost))]
    return reps


def cluster_pvalues(pvalue: np.ndarray, cutoff: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Clusters of a collection from its ``(N, N)`` all-pairs Tomtom p-values (rows: queries).

    Returns
    -------
    labels : ndarray, shape (N,), int64
    representatives : ndarray, shape (K,), int64
        Index of each cluster's representative.
    evalue_to_representative : ndarray, shape (N,), float64
        Symmetric E-value of each motif with its representative (0 for the representative).
    """
    if not cutoff > 0:
        raise ClusterError(f"the clustering E-value cut-off must be > 0, got {cutoff}")
    e = symmetric_evalues(pvalue)
    labels = average_linkage(e, cutoff)
    reps = medoids(labels, e)
    return labels, reps, e[np.arange(labels.size), reps[labels]]


def cluster_motifs(motifs, *, evalue: float = 1.0, client=None, device: str | None = None,
                   **options) -> tuple[np.ndarray, np.ndarray]:
    """Group redundant motifs: ``(labels (N,) int64, representatives (K,) int64)``, indices into ``motifs``.

    Every motif is identified against the others (:func:`pipeline.compare.identify.run_identify`, on ``client``'s
    workers or here); clusters as :func:`cluster_pvalues` at ``E <= evalue``.  ``options``: the
    identification's (``distance``, ``min_overlap``, ``pseudocount``, ``background``, ``both_strands``).
    """
    from pipeline.compare.identify import run_identify  # noqa: PLC0415

    motifs = list(motifs)
    if len(motifs) > MAX_MOTIFS:
        raise ClusterError(f"{len(motifs)} motifs: clustering holds all pairs in memory, at most {MAX_MOTIFS:,}")
    if len(motifs) == 1:
        return np.zeros(1, np.int64), np.zeros(1, np.int64)
    res = run_identify(motifs, motifs, client, top=1, device=device, exclude_self=True, keep_pvalues=True, **options)
    labels, reps, _ = cluster_pvalues(res.pvalue, evalue)
    return labels, reps


def clusters_table(ids: list, names: list, labels: np.ndarray, reps: np.ndarray, to_rep: np.ndarray,
                   schema: pa.Schema) -> pa.Table:
    """The clusters table (``schema``: ``pipeline.io.schema.CLUSTERS_TOMTOM_SCHEMA`` or ``..._OCCURRENCE_SCHEMA``,
    whose last column ``to_rep`` fills), rows by cluster, then file order."""
    n = len(ids)
    labels = np.asarray(labels, np.int64)
    size = np.bincount(labels, minlength=reps.size)
    rep_of = np.asarray(reps, np.int64)[labels]
    table = arrow.table({
        "motif_id": arrow.strings(ids),
        "motif_name": arrow.strings(names),
        "cluster": arrow.column(labels, pa.int32()),
        "cluster_size": arrow.column(size[labels], pa.int32()),
        "representative": arrow.strings([ids[r] for r in rep_of]),
        "representative_name": arrow.strings([names[r] for r in rep_of]),
        schema.names[-1]: arrow.column(np.asarray(to_rep, np.float64), pa.float64()),
    }, schema=schema)
    return table.take(arrow.column(np.lexsort((np.arange(n), labels))))


def write_clusters(out: str, table: pa.Table) -> None:
    """``OUT/clusters.parquet`` and ``OUT/clusters.tsv``, each written atomically."""
    from pipeline.engine.dataset import atomic_write_bytes, table_tsv  # noqa: PLC0415
    from pipeline.io.storage import write_parquet  # noqa: PLC0415

    write_parquet(table, os.path.join(out, "clusters.parquet"))
    atomic_write_bytes(os.path.join(out, "clusters.tsv"), table_tsv(table))
