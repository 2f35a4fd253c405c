"""Which known motif is this?  Tomtom-grade identification of query motifs against a target database.

:func:`match_all` gives every (query, target) its best alignment and Tomtom p-value
(:mod:`workers.compare.tomtom`), with E-values (p × number of targets) and per-query Benjamini-Hochberg
q-values; :func:`best_matches` keeps each query's ``top`` targets as an Arrow table
(``BEST_MATCHES_SCHEMA``); :func:`identify` does both.

This answers "which factor is this?", unlike COMPARE (:mod:`pipeline.compare`), which measures how far
two matrices call the same sites (Jaccard index of their occurrence sets at a score threshold).

Inputs are :class:`pipeline.motifs.Motif` records (``read_motifs``); their letter probabilities come
from :func:`pipeline.motifs.motif_probabilities` with Tomtom's default pseudocount (``-motif-pseudo
0.1``: ``p' = (p·N + 0.1·bg) / (N + 0.1)``).  The p-values take the target columns as the background,
so they depend on the target set: with fewer than ``MIN_TARGETS`` targets a warning says so (MEME's
tomtom warns below 50).
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipeline import MotifgridError, __version__, arrow

#: Below this many targets the p-values depend strongly on which targets are given (tomtom.c).
MIN_TARGETS = 50

#: One row per (query, rank).  ``offset``: query column i faces target column i + offset of the target
#: as matched (its reverse complement on strand "-"); ``similarity``: mean column similarity over the
#: overlap (ed: 1 - Euclidean distance / √2, in [0, 1]; pearson: Pearson's r, in [-1, 1]).
BEST_MATCHES_SCHEMA = pa.schema([
    pa.field("query", pa.string(), nullable=False),
    pa.field("query_name", pa.string(), nullable=False),
    pa.field("rank", pa.int32(), nullable=False),
    pa.field("target", pa.string(), nullable=False),
    pa.field("target_name", pa.string(), nullable=False),
    pa.field("pvalue", pa.float64(), nullable=False),
    pa.field("evalue", pa.float64(), nullable=False),
    pa.field("qvalue", pa.float64(), nullable=False),
    pa.field("similarity", pa.float64(), nullable=False),
    pa.field("offset", pa.int32(), nullable=False),
    pa.field("strand", pa.string(), nullable=False),
    pa.field("overlap", pa.int32(), nullable=False),
])


class IdentifyError(MotifgridError, ValueError):
    """Input identification cannot use (one line, naming the motif and its source)."""


@dataclass
class Matches:
    """Every (query, target) pair: arrays of shape (Q, N) (host), with the inputs they came from."""
    queries: list
    targets: list
    query_ppms: list
    target_ppms: list
    pvalue: np.ndarray
    evalue: np.ndarray
    qvalue: np.ndarray
    score: np.ndarray          # complete score (column-score units)
    offset: np.ndarray
    strand: np.ndarray         # 0 "+", 1 "-"
    overlap: np.ndarray
    excluded: np.ndarray       # bool: a query paired with itself (exclude_self)
    params: dict


def _ppms(motifs, role: str, background, pseudocount: float) -> list[np.ndarray]:
    from pipeline.motifs import motif_probabilities  # noqa: PLC0415

    if not motifs:
        raise IdentifyError(f"no {role} motifs given")
    out = []
    for m in motifs:
        if m.kind == "logodds":
            raise IdentifyError(f"{m.source}: motif {m.id} (record {m.record}) is a log-odds matrix; "
                                f"identification needs letter counts or probabilities")
        out.append(motif_probabilities(m, background, pseudocount))
    return out


def match_all(queries, targets, *, distance: str = "ed", min_overlap: int = 1, pseudocount: float = 0.1,
              background=None, both_strands: bool = True, exclude_self: bool = False, device=None,
              chunk_bytes: int | None = None) -> Matches:
    """Tomtom statistics of every query against every target, in this process.

    Parameters
    ----------
    queries, targets : list of pipeline.motifs.Motif
    distance : {"ed", "pearson"}
        Column comparison (Tomtom's ``-dist``); "ed" is MEME 5's default.
    min_overlap : int
        Fewest facing columns of a reported alignment (Tomtom's ``-min-overlap``).
    pseudocount : float
        Tomtom's ``-motif-pseudo``, applied to queries and targets.
    background : array-like of 4 floats, optional
        Background of the pseudocount; uniform by default.
    both_strands : bool
        Also match the targets' reverse complements (Tomtom without ``-norc``).
    exclude_self : bool
        A query that is the same object as a target (one collection against itself) is not matched
        with itself: p = 1, never reported.  E- and q-values still count all N targets.
    device : None, "cpu" or "gpu"
    chunk_bytes : int, optional
        Memory budget of one batch of queries (:func:`workers.compare.tomtom.search`).

    A fan-out (Dask) does the same in three steps: :func:`probabilities` once, then
    ``workers.compare.tomtom.search`` per batch of queries against one ``prepare_targets`` per worker, then
    :func:`assemble` on the rows put back together.
    """
    from workers.compare.tomtom import prepare_targets, search  # noqa: PLC0415

    params = parameters(distance=distance, min_overlap=min_overlap, pseudocount=pseudocount,
                        background=background, both_strands=both_strands, exclude_self=exclude_self)
    qp, tp = probabilities(queries, targets, params)
    ts = prepare_targets(tp, distance=distance, both_strands=both_strands, device=device)
    res = search(qp, ts, min_overlap=min_overlap, chunk_bytes=chunk_bytes)
    return assemble(queries, targets, qp, tp, res, params)


def parameters(*, distance: str = "ed", min_overlap: int = 1, pseudocount: float = 0.1, background=None,
               both_strands: bool = True, exclude_self: bool = False) -> dict:
    """The checked parameters of a run, as recorded in the outputs' metadata."""
    from workers.compare.tomtom import BINS, DISTANCES  # noqa: PLC0415

    if distance not in DISTANCES:
        raise IdentifyError(f"distance must be one of {', '.join(DISTANCES)}, got {distance!r}")
    if int(min_overlap) < 1:
        raise IdentifyError(f"min_overlap must be >= 1, got {min_overlap}")
    bg = np.full(4, 0.25) if background is None else np.asarray(background, dtype=np.float64)
    return {"method": "tomtom", "distance": distance, "min_overlap": int(min_overlap),
            "pseudocount": float(pseudocount), "background": [float(x) for x in bg],
            "both_strands": bool(both_strands), "exclude_self": bool(exclude_self), "bins": BINS,
            "motifgrid_version": __version__}


def probabilities(queries, targets, params: dict) -> tuple[list, list]:
    """Letter probabilities of the queries and targets (Tomtom's pseudocount rule); warns when the
    target set is too small for the background to mean much."""
    bg = np.asarray(params["background"])
    qp = _ppms(queries, "query", bg, params["pseudocount"])
    tp = _ppms(targets, "target", bg, params["pseudocount"])
    if len(tp) < MIN_TARGETS:
        warnings.warn(f"{len(tp)} target motifs: Tomtom p-values take the target columns as their background, "
                      f"so with fewer than {MIN_TARGETS} targets they depend strongly on which targets are given",
                      RuntimeWarning, stacklevel=3)
    return qp, tp


def assemble(queries, targets, query_ppms, target_ppms, res, params: dict) -> Matches:
    """:class:`Matches` from a ``workers.compare.tomtom.TomtomResult`` of all queries × all targets: self-matches
    excluded (``params["exclude_self"]``), E-values, per-query BH q-values."""
    from workers.compare.tomtom import bh_qvalues  # noqa: PLC0415

    excluded = np.zeros(res.pvalue.shape, dtype=bool)
    if params["exclude_self"]:
        where = {id(t): j for j, t in enumerate(targets)}
        for i, q in enumerate(queries):
            if id(q) in where:
                excluded[i, where[id(q)]] = True
    p = np.where(excluded, 1.0, res.pvalue)
    return Matches(queries=list(queries), targets=list(targets), query_ppms=query_ppms, target_ppms=target_ppms,
                   pvalue=p, evalue=p * len(targets), qvalue=bh_qvalues(p), score=res.score, offset=res.offset,
                   strand=res.strand, overlap=res.overlap, excluded=excluded,
                   params={**params, "targets": len(targets)})


def ranking(m: Matches, top: int) -> np.ndarray:
    """``(Q, k)`` target indices of each query's best ``k = min(top, N)`` matches: smallest p-value,
    then the larger overlap, then file order; a query's excluded self-match never ranks."""
    Q, N = m.pvalue.shape
    k = min(int(top), N - int(m.excluded.any(axis=1).max(initial=0)))
    out = np.empty((Q, max(k, 0)), dtype=np.int64)
    cols = np.arange(N)
    for i in range(Q):
        order = np.lexsort((cols, -m.overlap[i], m.pvalue[i], m.excluded[i]))
        out[i] = order[:k]
    return out


def best_matches(m: Matches, top: int = 5) -> pa.Table:
    """Each query's ``top`` best targets as a table of ``BEST_MATCHES_SCHEMA`` (queries in input
    order, ranks 1..top), with the parameters as JSON under the ``motifgrid.identify`` metadata key."""
    from workers.compare.tomtom import alignment_similarity  # noqa: PLC0415

    if int(top) < 1:
        raise IdentifyError(f"top must be >= 1, got {top}")
    idx = ranking(m, top)
    Q, k = idx.shape
    qi = np.repeat(np.arange(Q), k)
    tj = idx.ravel()
    sim = np.array([alignment_similarity(m.query_ppms[i], m.target_ppms[j], int(m.offset[i, j]),
                                         int(m.strand[i, j]), m.params["distance"]) for i, j in zip(qi, tj)])
    table = arrow.table({
        "query": [m.queries[i].id for i in qi],
        "query_name": [m.queries[i].name for i in qi],
        "rank": np.tile(np.arange(1, k + 1, dtype=np.int32), Q),
        "target": [m.targets[j].id for j in tj],
        "target_name": [m.targets[j].name for j in tj],
        "pvalue": m.pvalue[qi, tj],
        "evalue": m.evalue[qi, tj],
        "qvalue": m.qvalue[qi, tj],
        "similarity": sim.astype(np.float64),
        "offset": m.offset[qi, tj].astype(np.int32),
        "strand": np.where(m.strand[qi, tj] == 0, "+", "-"),
        "overlap": m.overlap[qi, tj].astype(np.int32),
    }, schema=BEST_MATCHES_SCHEMA)
    return table.replace_schema_metadata({"motifgrid.identify": json.dumps({**m.params, "top": int(top)})})


def identify(queries, targets, *, top: int = 5, **kwargs) -> pa.Table:
    """Best ``top`` matches of every query among ``targets`` (:func:`match_all` then
    :func:`best_matches`); keyword arguments as :func:`match_all`."""
    if int(top) < 1:
        raise IdentifyError(f"top must be >= 1, got {top}")
    return best_matches(match_all(queries, targets, **kwargs), top)
