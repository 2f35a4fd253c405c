"""``motifgrid compare``: motifs against motifs (within one collection or A × B), on Dask.

Two questions, two methods (``CompareSettings.method``):

* ``tomtom`` (default) — *which known motif is this?*  Tomtom's complete-score statistic
  (:mod:`pipeline.compare.identify`): per query its best-aligned targets with p-, E- and q-values, offset, strand,
  overlap.  Queries are cut into tasks, the targets scattered once and laid out once per worker.
  ``--cluster E`` groups the motifs of one collection (:mod:`pipeline.compare.motif_clusters`).
* ``occurrence`` — *do these two matrices call the same sites?*  The TFM-CUDA seed's COMPARE: thresholds of
  every (motif, strand) row (``pipeline.distribution.thresholds``, fanned out), their lattices
  (``workers.compare.prepare_rows``) scattered once; the pairs cut into tasks, each running
  ``workers.compare.compare_pairs`` (CPU numba or GPU kernel) and writing its own Parquet part atomically; the
  Jaccard index of the two occurrence sets with certified brackets.  ``--cluster S``: leader clustering.

Output folder::

    OUT/best_matches.parquet, .tsv       tomtom: per query its top matches (``pipeline.io.schema.BEST_MATCHES_SCHEMA``)
    OUT/pairs/part-000000.parquet ...   occurrence: one row per pair (``pipeline.io.schema.PAIRS_SCHEMA``)
    OUT/thresholds.parquet              occurrence: the thresholds used (one row per motif and strand)
    OUT/clusters.parquet, clusters.tsv  with --cluster (ids and names)
    OUT/_run.json, OUT/_summary.json    parameters and provenance; timings and counts
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline import MotifgridError, __version__
from pipeline.engine.dataset import TaskRun, atomic_write_bytes, table_tsv
from pipeline.io import arrow
from pipeline.io.storage import write_parquet


class CompareError(MotifgridError, RuntimeError):
    pass


@dataclass
class CompareContext:
    """What each task needs, scattered once."""
    rows_a: object
    rows_b: object
    ids_a: list
    names_a: list
    ids_b: list
    names_b: list
    out: str
    min_overlap: int
    device: str
    metadata: dict


def pairs_table(ctx: CompareContext, res) -> pa.Table:
    from pipeline.io.schema import PAIRS_SCHEMA  # noqa: PLC0415

    a, b = res.a, res.b
    pa_, pb_, tp = res.pa, res.pb, res.tp[:, 1]
    return arrow.table({                        # typed by the schema
        "motif_a": [ctx.ids_a[i] for i in a],
        "name_a": [ctx.names_a[i] for i in a],
        "motif_b": [ctx.ids_b[i] for i in b],
        "name_b": [ctx.names_b[i] for i in b],
        "similarity": res.jaccard[:, 1],
        "similarity_low": res.jaccard[:, 0],
        "similarity_high": res.jaccard[:, 2],
        "shift": res.shift,
        "strand": np.where(res.strand == 0, "+", "-"),
        "overlap": res.overlap,
        "tp": tp,
        "tp_low": res.tp[:, 0],
        "tp_high": res.tp[:, 2],
        "only_a": np.maximum(pa_ - tp, 0.0),
        "only_b": np.maximum(pb_ - tp, 0.0),
        "p_a": pa_,
        "p_b": pb_,
    }, schema=PAIRS_SCHEMA)


def compare_task(ctx: CompareContext, part: int, pairs: np.ndarray) -> dict:
    """Compare one chunk of pairs and write its Parquet part.  Returns small statistics."""
    from workers.compare import compare_pairs  # noqa: PLC0415

    t0 = time.perf_counter()
    res = compare_pairs(ctx.rows_a, ctx.rows_b, pairs, min_overlap=ctx.min_overlap, device=ctx.device)
    t1 = time.perf_counter()
    table = pairs_table(ctx, res)
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **ctx.metadata})
    write_parquet(table, os.path.join(ctx.out, "pairs", f"part-{part:06d}.parquet"), compression="zstd")
    return {"pairs": int(len(pairs)), "combos": res.combos, "seconds_compute": t1 - t0,
            "seconds_io": time.perf_counter() - t1}


METHODS = ("tomtom", "occurrence")


@dataclass
class CompareSettings:
    """What ``motifgrid compare`` computes.  Both methods read ``method``, ``min_overlap``, ``pseudocount``,
    ``background`` (None: uniform; ``background_spec`` is how it was given) and ``cluster`` (its cut-off:
    an E-value for tomtom, a similarity in (0, 1] for occurrence; None: no clustering).  ``tomtom`` also reads
    ``top`` and ``distance``; ``occurrence`` reads ``pvalue``, ``cells``, ``pairs_per_task`` and
    ``threshold_method``."""
    method: str = "tomtom"
    min_overlap: int = 1
    pseudocount: float = 0.1
    background: tuple | None = None
    background_spec: str = "uniform"
    cluster: float | None = None
    top: int = 5
    distance: str = "ed"
    pvalue: float = 1e-4
    cells: int = 64
    pairs_per_task: int | None = None
    threshold_method: str = "auto"

    def check(self) -> None:
        """One :class:`CompareError` line for the first setting that cannot be used."""
        if self.method not in METHODS:
            raise CompareError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.min_overlap < 1 or self.top < 1:
            raise CompareError(f"min_overlap and top must be >= 1, got {self.min_overlap} and {self.top}")
        if self.method == "occurrence" and not 4 <= self.cells <= 110:
            raise CompareError(f"--cells must be in 4..110 (the GPU grid holds 128 cells a side), got {self.cells}")
        if self.cluster is not None and (not self.cluster > 0 or (self.method == "occurrence" and self.cluster > 1)):
            what = "a similarity in (0, 1]" if self.method == "occurrence" else "an E-value > 0"
            raise CompareError(f"--cluster for --method {self.method} is {what}, got {self.cluster}")

    def bg(self) -> np.ndarray:
        return np.full(4, 0.25) if self.background is None else np.asarray(self.background, float)


#: settings only one method reads, and their defaults (None: the configuration's)
METHOD_OPTIONS = {"tomtom": {"top": 5, "distance": "ed"},
                  "occurrence": {"pvalue": None, "cells": 64, "pairs_per_task": None}}


def settings_for(method: str, options: dict, *, cluster: float | None = None, default_cluster: bool = False,
                 **common) -> CompareSettings:
    """``CompareSettings`` of ``method`` from the command's options (``options``: each of ``METHOD_OPTIONS``,
    None where not given); an option of the other method is refused.  ``default_cluster``: ``--cluster``
    without a value (E 1 for tomtom, similarity 0.5 for occurrence)."""
    import dask.config  # noqa: PLC0415

    if method not in METHODS:
        raise CompareError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    other = "occurrence" if method == "tomtom" else "tomtom"
    given = [k for k in METHOD_OPTIONS[other] if options.get(k) is not None]
    if given:
        raise CompareError(f"--{given[0].replace('_', '-')} is a setting of --method {other}")
    own = {k: v if options.get(k) is None else options[k] for k, v in METHOD_OPTIONS[method].items()}
    if method == "occurrence" and own["pvalue"] is None:
        own["pvalue"] = float(dask.config.get("motifgrid.scan.pvalue"))
    if default_cluster:
        cluster = 1.0 if method == "tomtom" else 0.5
    st = CompareSettings(method=method, cluster=cluster, **own, **common)
    st.check()
    return st


def best_match_lines(out: str) -> list:
    """Each query's best match, one tab-separated line each (from ``OUT/best_matches.parquet``): what
    ``motifgrid compare`` prints."""
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415

    t = pq.read_table(os.path.join(out, "best_matches.parquet"))
    def named(i, n):           # a PFM's motifs are named by their ids: said once
        return i if not n or n == i else f"{i} {n}"

    return [f"{named(r['query'], r['query_name'])}\t{named(r['target'], r['target_name'])}\tp={r['pvalue']:.3g}\t"
            f"E={r['evalue']:.3g}\tq={r['qvalue']:.3g}\toffset={r['offset']}\tstrand={r['strand']}"
            for r in t.filter(pc.equal(t["rank"], 1)).to_pylist()]


def summary_line(res: dict, st: CompareSettings, out: str) -> str:
    """The line ``motifgrid compare`` ends with: what was compared, where, how long, where the output is."""
    if st.method == "tomtom":
        msg = (f"{res['queries']:,} queries x {res['targets']:,} targets (Tomtom, {res['tasks']} tasks) on "
               f"{res['workers']} {res['device']} worker(s) in {res['seconds']:.1f} s → {out}/best_matches.tsv")
        at = f"E <= {st.cluster:g}" if st.cluster is not None else ""
    else:
        msg = (f"{res['pairs']:,} pairs ({res['combos']:,} shift/strand cases) on {res['workers']} {res['device']} "
               f"worker(s) in {res['seconds']:.1f} s → {out}/pairs")
        at = f"similarity >= {st.cluster:g}" if st.cluster is not None else ""
    if "clusters" in res:
        msg += f"; {res['clusters']} clusters at {at} → {out}/clusters.tsv"
    return msg


def _claim(out: str, dirs: tuple = ()) -> None:
    p = Path(out)
    if p.exists() and (not p.is_dir() or any(p.iterdir())):
        raise CompareError(f"{out}: exists and is not an empty folder; choose another output")
    try:
        p.mkdir(parents=True, exist_ok=True)
        for d in dirs:
            (p / d).mkdir(exist_ok=True)
    except OSError as e:
        raise CompareError(f"{out}: cannot create the output folder ({e.strerror})") from None


def _check_pairs(motifs_a, n_a: int, motifs_b) -> None:
    """``compare A`` pairs A's motifs with each other, never a motif with itself: one motif has no pair."""
    if motifs_b is None and n_a < 2:
        raise CompareError(f"{motifs_a}: holds {n_a} motif; compare A pairs A's motifs with each other (never a motif "
                           "with itself): give two or more, or a second collection B")


def _write_json(path: Path, obj) -> None:
    atomic_write_bytes(str(path), json.dumps(obj, indent=1).encode())


#: what compare keys by motif id (said when matrices of A or B share one)
COMPARE_KEYED = "compare's tables name motifs by id, so the rows of matrices sharing one cannot be told apart"


def _load_set(source: str, bg, pseudocount):
    from pipeline.scan.motif_set import MotifSet  # noqa: PLC0415

    return MotifSet.load(source, bg, pseudocount, keyed=COMPARE_KEYED)


def run_compare(motifs_a: str, motifs_b: str | None, out: str, client, settings: CompareSettings | None = None, *,
                device: str = "cpu", command: str | None = None, progress=None) -> dict:
    """Compare the motifs of ``motifs_a`` with each other (``motifs_b`` None) or with those of ``motifs_b``,
    as ``settings`` says; returns the summary (also written to ``OUT/_summary.json``).  ``progress(done,
    total)``: queries (tomtom) or pairs (occurrence) done."""
    st = settings or CompareSettings()
    st.check()
    if st.cluster is not None and motifs_b:
        raise CompareError("--cluster groups one collection: give only A")
    command = command or " ".join(shlex.quote(x) for x in sys.argv)
    run = _run_tomtom if st.method == "tomtom" else _run_occurrence
    return run(motifs_a, motifs_b, out, client, st, device, command, progress)


def _run_params(st: CompareSettings, sources: list, device: str, command: str) -> dict:
    """``_run.json`` of either method: the sources, their checksums, the settings the method reads."""
    from pipeline.motifs import motifs_checksum  # noqa: PLC0415

    own = (("top", "distance") if st.method == "tomtom" else
           ("pvalue", "cells", "threshold_method"))
    return {"format": 1, "method": st.method,
            "motifs_a": sources[0], "motifs_a_checksum": motifs_checksum(sources[0]),
            "motifs_b": sources[1], "motifs_b_checksum": motifs_checksum(sources[1]) if sources[1] else None,
            "background": [float(x) for x in st.bg()], "background_spec": st.background_spec,
            "pseudocount": st.pseudocount, "min_overlap": st.min_overlap, "cluster": st.cluster,
            **{k: getattr(st, k) for k in own}, "device": device, "motifgrid_version": __version__,
            "command": command}


def _run_tomtom(motifs_a, motifs_b, out, client, st: CompareSettings, device: str, command: str, progress) -> dict:
    """Tomtom identification of A against B (or A against itself, each motif's self-match left out); nothing is
    left in ``out`` when it fails."""
    from pipeline.compare.identify import check_motifs  # noqa: PLC0415
    from pipeline.motifs import read_motifs, warn_shared_ids  # noqa: PLC0415

    t0 = time.perf_counter()
    a = read_motifs(motifs_a)
    b = read_motifs(motifs_b) if motifs_b else a
    for source, motifs in ((motifs_a, a), (motifs_b, b)) if motifs_b else ((motifs_a, a),):
        warn_shared_ids(source, motifs, COMPARE_KEYED)
    check_motifs(a, "query")                              # bad input fails before anything is written
    check_motifs(b, "target")
    _check_pairs(motifs_a, len(a), motifs_b)
    params = _run_params(st, [str(motifs_a), str(motifs_b) if motifs_b else None], device, command)
    existed = os.path.isdir(out)
    _claim(out)
    out = os.path.abspath(out)
    try:
        return _tomtom_outputs(a, b, out, client, st, params, device, progress, t0)
    except BaseException:
        _unclaim(out, ("_summary.json", "clusters.tsv", "clusters.parquet", "best_matches.tsv",
                       "best_matches.parquet", "_run.json"), not existed)
        raise


def _unclaim(out: str, names: tuple, remove_folder: bool) -> None:
    """Remove what a failed run wrote (``names``, in that order: the summary first), and the folder it created."""
    for name in names:
        try:
            os.unlink(os.path.join(out, name))
        except FileNotFoundError:
            pass
    if remove_folder:
        try:
            os.rmdir(out)
        except OSError:
            pass


def _tomtom_outputs(a, b, out, client, st: CompareSettings, params: dict, device: str, progress, t0: float) -> dict:
    from pipeline.compare.identify import run_identify  # noqa: PLC0415

    _write_json(Path(out) / "_run.json", params)
    command = params["command"]
    within = b is a
    res = run_identify(a, b, client, top=st.top, device=device, exclude_self=within,
                       keep_pvalues=within and st.cluster is not None, progress=progress, distance=st.distance,
                       min_overlap=st.min_overlap, pseudocount=st.pseudocount, background=st.bg())
    meta = {**(res.table.schema.metadata or {}), b"motifgrid.version": __version__.encode(),
            b"motifgrid.command": command.encode(),
            b"motifgrid.compare": json.dumps({k: params[k] for k in ("motifs_a", "motifs_a_checksum", "motifs_b",
                                                                      "motifs_b_checksum")}).encode()}
    table = res.table.replace_schema_metadata(meta)
    write_parquet(table, os.path.join(out, "best_matches.parquet"))
    atomic_write_bytes(os.path.join(out, "best_matches.tsv"), table_tsv(table))
    n_workers = len(client.scheduler_info().get("workers", {})) if client is not None else 1
    summary = {"method": "tomtom", "queries": len(a), "targets": len(b),
               "pairs": len(a) * len(b) - (len(a) if within else 0), "rows": table.num_rows,
               "tasks": res.tasks, "workers": n_workers, "device": device, "seconds": None,
               "seconds_tasks_wall": res.seconds_tasks, "task_seconds_compute": res.task_seconds}
    if st.cluster is not None:
        from pipeline.compare.motif_clusters import cluster_pvalues, clusters_table, write_clusters  # noqa: PLC0415
        from pipeline.io.schema import CLUSTERS_TOMTOM_SCHEMA  # noqa: PLC0415

        t1 = time.perf_counter()
        labels, reps, to_rep = cluster_pvalues(res.pvalue, st.cluster)
        write_clusters(out, clusters_table([m.id for m in a], [m.name for m in a], labels, reps, to_rep,
                                           CLUSTERS_TOMTOM_SCHEMA))
        summary.update(clusters=int(reps.size), cluster_cutoff=float(st.cluster),
                       seconds_cluster=time.perf_counter() - t1)
    summary["seconds"] = time.perf_counter() - t0
    _write_json(Path(out) / "_summary.json", summary)
    return summary


def _run_occurrence(motifs_a, motifs_b, out, client, st: CompareSettings, device: str, command: str,
                    progress) -> dict:
    """All-pairs COMPARE (the seed's occurrence statistic)."""
    t0 = time.perf_counter()
    bg = st.bg()
    set_a = _load_set(motifs_a, bg, st.pseudocount)
    set_b = _load_set(motifs_b, bg, st.pseudocount) if motifs_b else set_a
    _check_pairs(motifs_a, len(set_a.ids), motifs_b)
    _claim(out, ("pairs",))
    out = os.path.abspath(out)
    params = _run_params(st, [set_a.source, set_b.source if motifs_b else None], device, command)
    _write_json(Path(out) / "_run.json", params)
    t1 = time.perf_counter()
    rows_a, rows_b = _thresholds_and_rows(set_a, set_b, out, client, st.pvalue, bg, st.cells, st.threshold_method)
    t_prep = time.perf_counter() - t1

    pairs = _all_pairs(len(set_a.ids), len(set_b.ids), set_b is set_a)
    n_workers = max(1, len(client.scheduler_info().get("workers", {})))
    per_task = st.pairs_per_task or int(min(20000, max(50, -(-len(pairs) // (8 * n_workers)))))
    chunks = [pairs[i:i + per_task] for i in range(0, len(pairs), per_task)]
    meta = {"motifgrid.version": __version__, "motifgrid.compare": json.dumps(
        {k: params[k] for k in ("method", "motifs_a", "motifs_b", "pvalue", "cells", "background")})}
    ctx = CompareContext(rows_a=rows_a, rows_b=rows_b, ids_a=set_a.ids, names_a=set_a.names, ids_b=set_b.ids,
                         names_b=set_b.names, out=out, min_overlap=st.min_overlap, device=device, metadata=meta)
    stats = {"pairs": 0, "combos": 0, "seconds_compute": 0.0, "seconds_io": 0.0}
    t2 = time.perf_counter()
    run = TaskRun(client, compare_task, ctx, list(enumerate(chunks)), name="compare", key=lambda k, c: k)
    for res in run.results(lambda exc: CompareError(f"a compare task failed: {type(exc).__name__}: {exc}")):
        for k in stats:
            stats[k] += res[k]
        if progress is not None:
            progress(stats["pairs"], len(pairs))
    t_tasks = time.perf_counter() - t2
    summary = {"method": "occurrence", "pairs": int(len(pairs)), "combos": int(stats["combos"]),
               "motifs_a": len(set_a.ids), "motifs_b": len(set_b.ids), "tasks": len(chunks), "workers": n_workers,
               "device": device, "seconds": None, "seconds_thresholds_and_lattices": t_prep,
               "seconds_tasks_wall": t_tasks, "task_seconds_compute": stats["seconds_compute"],
               "task_seconds_io": stats["seconds_io"],
               "unreachable_rows_a": int((rows_a.cut[:, 2] < 0).sum()),
               "unreachable_rows_b": int((rows_b.cut[:, 2] < 0).sum())}
    if st.cluster is not None:
        t3 = time.perf_counter()
        cl = leader_clusters(out, set_a.ids, set_a.names, float(st.cluster))
        summary["clusters"] = int(cl.column("cluster").to_numpy().max() + 1) if cl.num_rows else 0
        summary["cluster_cutoff"] = float(st.cluster)
        summary["seconds_cluster"] = time.perf_counter() - t3
    summary["seconds"] = time.perf_counter() - t0
    _write_json(Path(out) / "_summary.json", summary)
    return summary


def _thresholds_and_rows(set_a, set_b, out: str, client, pvalue: float, bg: np.ndarray, cells: int,
                         threshold_method: str):
    """Thresholds of every (motif, strand) row of both collections (fanned out on ``client``; written to
    ``OUT/thresholds.parquet``), then their COMPARE lattices: ``(rows_a, rows_b)``, the same object when B is A."""
    from pipeline.scan.motif_set import motif_thresholds_table, row_thresholds_many  # noqa: PLC0415
    from workers.compare import prepare_rows  # noqa: PLC0415

    thr_tables = []
    rows = []
    for s in ([set_a] if set_b is set_a else [set_a, set_b]):
        tabs = row_thresholds_many(s, [pvalue], client, method=threshold_method, table=False)[0]
        pwms, _, strands = s.rows()
        thr_tables.append(motif_thresholds_table(s, tabs, strands))
        rows.append(prepare_rows(pwms, tabs, bg, cells=cells))      # ScoreThresholds: exact ties counted
    thr = pa.concat_tables([t.append_column("collection", arrow.strings([k] * t.num_rows))
                            for k, t in zip("ab", thr_tables)])
    write_parquet(thr, os.path.join(out, "thresholds.parquet"))
    return rows[0], rows[-1]


def _all_pairs(na: int, nb: int, within: bool) -> np.ndarray:
    """``(n, 2)`` int64 motif index pairs: ``i < j`` within one collection, else every ``(i, j)`` of A × B."""
    if within:
        ii, jj = np.triu_indices(na, k=1)
    else:
        ii, jj = np.meshgrid(np.arange(na), np.arange(nb), indexing="ij")
    return np.stack([ii.ravel(), jj.ravel()], axis=1).astype(np.int64)


def read_pairs(out: str, columns=None) -> pa.Table:
    """The pairs dataset of a compare output folder."""
    import pyarrow.dataset as ds  # noqa: PLC0415

    return ds.dataset(os.path.join(out, "pairs"), format="parquet").to_table(columns=columns)


def leader_clusters(out: str, ids: list, names: list, cutoff: float) -> pa.Table:
    """Group redundant motifs of one collection on COMPARE's similarity: leader clustering at ``similarity >=
    cutoff``.

    The motif with the most neighbours at the cut-off (ties: the first in the file) becomes a
    representative and takes every unassigned neighbour; repeat.  Every member is at least ``cutoff``
    similar to its representative (no chaining).  Writes ``clusters.parquet`` and ``clusters.tsv``
    (``pipeline.io.schema.CLUSTERS_OCCURRENCE_SCHEMA``; clusters numbered in the order the leaders were taken).
    """
    from pipeline.compare.motif_clusters import clusters_table, write_clusters  # noqa: PLC0415
    from pipeline.io.schema import CLUSTERS_OCCURRENCE_SCHEMA  # noqa: PLC0415

    t = read_pairs(out, ["motif_a", "motif_b", "similarity"])
    index = {m: i for i, m in enumerate(ids)}
    n = len(ids)
    sim = t.column("similarity").to_numpy()
    keep = sim >= cutoff
    a = np.array([index[x] for x in t.column("motif_a").to_pylist()], np.int64)[keep]
    b = np.array([index[x] for x in t.column("motif_b").to_pylist()], np.int64)[keep]
    s = sim[keep]
    nbrs: list[dict] = [dict() for _ in range(n)]
    for x, y, v in zip(a.tolist(), b.tolist(), s.tolist()):
        nbrs[x][y] = v
        nbrs[y][x] = v
    order = sorted(range(n), key=lambda i: (-len(nbrs[i]), i))
    cluster = np.full(n, -1, np.int64)
    to_rep = np.zeros(n)
    reps = []
    for i in order:
        if cluster[i] >= 0:
            continue
        cluster[i], to_rep[i] = len(reps), 1.0
        for j, v in nbrs[i].items():
            if cluster[j] < 0:
                cluster[j], to_rep[j] = len(reps), v
        reps.append(i)
    table = clusters_table(ids, names, cluster, np.asarray(reps, np.int64), to_rep, CLUSTERS_OCCURRENCE_SCHEMA)
    write_clusters(out, table)
    return table
