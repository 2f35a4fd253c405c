"""Which known motif is this?  Tomtom-grade identification of query motifs against a target database.

:func:`match_all` gives every (query, target) its best alignment and Tomtom p-value
(:mod:`workers.compare.tomtom`), with E-values (p × number of targets) and per-query Benjamini-Hochberg
q-values; :func:`best_matches` keeps each query's ``top`` targets as an Arrow table
(``pipeline.io.schema.BEST_MATCHES_SCHEMA``); :func:`identify` does both.  :func:`run_identify` does the same on
Dask (``motifgrid compare``, ``discover --compare-to``, ``pipeline.compare.motif_clusters``): the queries cut into
tasks (:class:`pipeline.engine.dataset.TaskRun`), the targets' matrices scattered once and laid out once per worker
(``prepare_targets``, on the worker's GPU when it has one), each task ranking its queries against every
target (so its E- and q-values are final), the rows put back in query order.

This answers "which factor is this?", unlike COMPARE (:mod:`pipeline.compare.run`), which measures how far
two matrices call the same sites (Jaccard index of their occurrence sets at a score threshold).

Inputs are :class:`pipeline.motifs.Motif` records (``read_motifs``); their letter probabilities come
from :func:`pipeline.motifs.motif_probabilities` with Tomtom's default pseudocount (``-motif-pseudo
0.1``: ``p' = (p·N + 0.1·bg) / (N + 0.1)``).  The p-values take the target columns as the background,
so they depend on the target set: with fewer than ``MIN_TARGETS`` targets a warning says so (MEME's
tomtom warns below 50).
"""
from __future__ import annotations

import json
import os
import threading
import time
import warnings
import weakref
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipeline import MotifgridError, __version__
from pipeline.io import arrow
from pipeline.io.schema import BEST_MATCHES_SCHEMA

#: Below this many targets the p-values depend strongly on which targets are given (tomtom.c).
MIN_TARGETS = 50


class FewTargetsWarning(RuntimeWarning):
    """Fewer than ``MIN_TARGETS`` targets: the p-values depend strongly on which targets are given.  The CLI
    prints it as one line (``one_line``)."""
    one_line = True


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


def check_motifs(motifs, role: str) -> None:
    """An :class:`IdentifyError` (one line naming the file and record) for motifs identification cannot use."""
    if not motifs:
        raise IdentifyError(f"no {role} motifs given")
    for m in motifs:
        if m.kind == "logodds":
            raise IdentifyError(f"{m.source}: motif {m.id} (record {m.record}) is a log-odds matrix; "
                                f"identification needs letter counts or probabilities")


def _ppms(motifs, role: str, background, pseudocount: float) -> list[np.ndarray]:
    from pipeline.motifs import motif_probabilities  # noqa: PLC0415

    check_motifs(motifs, role)
    return [motif_probabilities(m, background, pseudocount) for m in motifs]


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
                      FewTargetsWarning, stacklevel=3)
    return qp, tp


def self_index(queries, targets) -> np.ndarray:
    """``(Q,)`` int64: the target that is the same object as each query, -1 where none (one collection
    against itself)."""
    where = {id(t): j for j, t in enumerate(targets)}
    return np.array([where.get(id(q), -1) for q in queries], dtype=np.int64)


def assemble(queries, targets, query_ppms, target_ppms, res, params: dict, selves: np.ndarray | None = None) -> Matches:
    """:class:`Matches` from a ``workers.compare.tomtom.TomtomResult`` of the queries × all targets: self-matches
    excluded (``params["exclude_self"]``; ``selves``: each query's own target index, -1 for none, by default
    :func:`self_index`), E-values, per-query BH q-values."""
    from workers.compare.tomtom import bh_qvalues  # noqa: PLC0415

    excluded = np.zeros(res.pvalue.shape, dtype=bool)
    if params["exclude_self"]:
        selves = self_index(queries, targets) if selves is None else np.asarray(selves)
        rows = np.flatnonzero(selves >= 0)
        excluded[rows, selves[rows]] = True
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


# ------------------------------------------------------------------------------------ on Dask
#: CPU target layouts prepared on this process, per scattered context (kept while the context lives)
_prepared: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_prepared_lock = threading.Lock()


@dataclass(eq=False)
class IdentifyContext:
    """What every identification task needs, scattered to each worker once: the motifs (host matrices) and
    the run's parameters.  The targets' device layout is made on the worker, once (:meth:`target_set`)."""
    queries: list
    targets: list
    query_ppms: list
    target_ppms: list
    params: dict
    top: int
    device: str
    selves: np.ndarray          # (Q,) int64: each query's own target (exclude_self), -1 none
    keep_pvalues: bool
    chunk_bytes: int | None = None

    def target_set(self):
        """The ``TargetSet`` of this context on this worker's device, prepared by the first task that asks
        (the GPU's kept per device while the context lives, as the scan's plans are)."""
        if self.device == "gpu":
            from workers.backend import on_device  # noqa: PLC0415

            return on_device(self, _prepare_targets)
        with _prepared_lock:
            ts = _prepared.get(self)
            if ts is None:
                ts = _prepared[self] = _prepare_targets(self)
        return ts


def _prepare_targets(ctx: IdentifyContext):
    from workers.compare.tomtom import prepare_targets  # noqa: PLC0415

    return prepare_targets(ctx.target_ppms, distance=ctx.params["distance"], both_strands=ctx.params["both_strands"],
                           device=ctx.device)


def identify_task(ctx: IdentifyContext, part: int, rows: np.ndarray) -> dict:
    """Queries ``rows`` against every target: their best-matches rows (E- and q-values final, since every
    target is here) and, with ``keep_pvalues``, their ``(len(rows), N)`` p-values."""
    from workers.compare.tomtom import search  # noqa: PLC0415

    t0 = time.perf_counter()
    ts = ctx.target_set()
    qp = [ctx.query_ppms[i] for i in rows]
    res = search(qp, ts, min_overlap=ctx.params["min_overlap"], chunk_bytes=ctx.chunk_bytes)
    m = assemble([ctx.queries[i] for i in rows], ctx.targets, qp, ctx.target_ppms, res, ctx.params,
                 selves=ctx.selves[rows])
    table = best_matches(m, ctx.top)
    return {"part": part, "rows": rows, "table": table, "pvalue": m.pvalue if ctx.keep_pvalues else None,
            "seconds": time.perf_counter() - t0}


def query_tasks(widths: np.ndarray, n_workers: int, per_task: int | None = None) -> list[np.ndarray]:
    """Query indices cut into tasks: sorted by width (a task's queries share span tables), about four tasks
    per worker, at least 8 queries each unless ``per_task`` says otherwise."""
    order = np.argsort(np.asarray(widths), kind="stable")
    if per_task is None:
        per_task = max(8, -(-order.size // (4 * max(1, n_workers))))
    return [order[s:s + per_task] for s in range(0, order.size, per_task)]


@dataclass
class Identification:
    """What :func:`run_identify` returns."""
    table: pa.Table                 # BEST_MATCHES_SCHEMA, queries in input order, ranks 1..top
    pvalue: np.ndarray | None       # (Q, N) float64 with keep_pvalues (self-matches 1)
    params: dict
    tasks: int
    seconds_tasks: float            # wall time of the tasks (client side)
    task_seconds: float             # their compute time, summed


def run_identify(queries, targets, client=None, *, top: int = 5, device: str | None = None,
                 exclude_self: bool = False, keep_pvalues: bool = False, progress=None,
                 queries_per_task: int | None = None, chunk_bytes: int | None = None, **options) -> Identification:
    """Best ``top`` matches of every query among ``targets`` on ``client``'s workers (in this process when
    ``client`` is None).

    ``options``: ``distance``, ``min_overlap``, ``pseudocount``, ``background``, ``both_strands`` as
    :func:`match_all`.  ``exclude_self``: a query that is one of the targets (the same object) is not matched
    with itself.  ``progress(done, total)`` is called with queries done.  ``device``: the workers' ("cpu",
    "gpu"; None: this process chooses).
    """
    from pipeline.engine.dataset import TaskRun  # noqa: PLC0415
    from workers.backend import resolve_device  # noqa: PLC0415

    if int(top) < 1:
        raise IdentifyError(f"top must be >= 1, got {top}")
    params = parameters(exclude_self=exclude_self, **options)
    qp, tp = probabilities(queries, targets, params)
    device = resolve_device(device) if client is None else (device or "cpu")
    ctx = IdentifyContext(queries=list(queries), targets=list(targets), query_ppms=qp, target_ppms=tp,
                          params={**params, "targets": len(tp)}, top=int(top), device=device,
                          selves=self_index(queries, targets) if exclude_self else np.full(len(qp), -1, np.int64),
                          keep_pvalues=keep_pvalues, chunk_bytes=chunk_bytes)
    # in this process: CPU tasks on threads (NumPy releases the GIL); GPU tasks one after another (one device)
    threads = min(os.cpu_count() or 1, 8) if device == "cpu" else 1
    if client is None:
        n_workers = threads
    else:       # CPU tasks: a few per thread (a GPU worker has a thread per core); GPU tasks: a few per GPU
        workers = client.scheduler_info().get("workers", {}).values()
        n_workers = sum(w.get("nthreads", 1) for w in workers) if device == "cpu" else len(workers)
    parts = query_tasks(np.array([p.shape[0] for p in qp]), n_workers, queries_per_task)
    t0 = time.perf_counter()
    results, done = [], 0
    if client is None:
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        pool = ThreadPoolExecutor(threads, thread_name_prefix="identify")
        stream = pool.map(lambda kr: identify_task(ctx, *kr), list(enumerate(parts)))
    else:
        run = TaskRun(client, identify_task, ctx, list(enumerate(parts)), name="identify", key=lambda k, r: k)
        stream = run.results(lambda exc: IdentifyError(f"an identification task failed: {type(exc).__name__}: {exc}"))
    try:
        for res in stream:
            results.append(res)
            done += len(res["rows"])
            if progress is not None:
                progress(done, len(qp))
    finally:
        if client is None:
            pool.shutdown(cancel_futures=True)
    wall = time.perf_counter() - t0
    results.sort(key=lambda r: r["part"])
    rows = np.concatenate([r["rows"] for r in results])
    table = pa.concat_tables([r["table"] for r in results])
    # each task's table holds its queries in its order, ranks 1..k each: back to the input order
    owner = np.concatenate([np.repeat(r["rows"], r["table"].num_rows // max(len(r["rows"]), 1)) for r in results])
    table = table.take(arrow.column(np.argsort(owner, kind="stable"))).replace_schema_metadata(
        {"motifgrid.identify": json.dumps({**ctx.params, "top": int(top)})})
    pvalue = None
    if keep_pvalues:
        pvalue = np.empty((len(qp), len(tp)))
        pvalue[rows] = np.concatenate([r["pvalue"] for r in results])
    return Identification(table=table, pvalue=pvalue, params=ctx.params, tasks=len(parts), seconds_tasks=wall,
                          task_seconds=float(sum(r["seconds"] for r in results)))
