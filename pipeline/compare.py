"""``motifgrid compare``: all pairs of motifs within one collection or between two, on Dask, to Parquet.

Graph: thresholds of every (motif, strand) row (``pipeline.thresholds``, fanned out), then the COMPARE
lattices of every row (``workers.compare.prepare_rows``, here: milliseconds per matrix), scattered once
to every worker; the pairs are cut into tasks of ``pairs_per_task``; each task runs
``workers.compare.compare_pairs`` (CPU numba or GPU kernel) and writes its own Parquet part atomically.
The client only counts.  ``--cluster`` then reads the similarity column back and groups the motifs.

Output folder::

    OUT/pairs/part-000000.parquet ...   one row per pair (schema ``pipeline.schema.PAIRS_SCHEMA``)
    OUT/thresholds.parquet              the thresholds used (one row per motif and strand, per collection)
    OUT/clusters.parquet, clusters.tsv  with --cluster
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

from pipeline import MotifgridError, __version__, arrow
from pipeline.dataset import TaskRun, atomic_write_bytes, table_tsv
from pipeline.storage import write_parquet


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
    from pipeline.schema import PAIRS_SCHEMA  # noqa: PLC0415

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


def _claim(out: str) -> None:
    p = Path(out)
    if p.exists() and (not p.is_dir() or any(p.iterdir())):
        raise CompareError(f"{out}: exists and is not an empty folder; choose another output")
    try:
        (p / "pairs").mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CompareError(f"{out}: cannot create the output folder ({e.strerror})") from None


def _write_json(path: Path, obj) -> None:
    atomic_write_bytes(str(path), json.dumps(obj, indent=1).encode())


def _load_set(source: str, bg, pseudocount):
    from pipeline.scan import MotifSet  # noqa: PLC0415

    return MotifSet.load(source, bg, pseudocount)


def run_compare(motifs_a: str, motifs_b: str | None, out: str, client, *, pvalue: float = 1e-4,
                background=None, background_spec: str = "uniform", pseudocount: float = 0.1, cells: int = 64,
                min_overlap: int = 1, pairs_per_task: int | None = None, device: str = "cpu",
                cluster: float | None = None, threshold_method: str = "auto", command: str | None = None,
                progress=None) -> dict:
    """All-pairs COMPARE; returns the summary (also written to ``OUT/_summary.json``)."""
    t0 = time.perf_counter()
    bg = np.full(4, 0.25) if background is None else np.asarray(background, float)
    set_a = _load_set(motifs_a, bg, pseudocount)
    set_b = _load_set(motifs_b, bg, pseudocount) if motifs_b else set_a
    if cells < 4 or cells > 110:
        raise CompareError(f"--cells must be in 4..110 (the GPU grid holds 128 cells a side), got {cells}")
    _claim(out)
    out = os.path.abspath(out)
    params = {
        "format": 1, "motifs_a": set_a.source, "motifs_a_checksum": set_a.checksum,
        "motifs_b": set_b.source if motifs_b else None,
        "motifs_b_checksum": set_b.checksum if motifs_b else None,
        "pvalue": pvalue, "background": [float(x) for x in bg], "background_spec": background_spec,
        "pseudocount": pseudocount, "cells": cells, "min_overlap": min_overlap, "device": device,
        "threshold_method": threshold_method, "motifgrid_version": __version__,
        "command": command or " ".join(shlex.quote(x) for x in sys.argv),
    }
    _write_json(Path(out) / "_run.json", params)
    t1 = time.perf_counter()
    rows_a, rows_b = _thresholds_and_rows(set_a, set_b, out, client, pvalue, bg, cells, threshold_method)
    t_prep = time.perf_counter() - t1

    pairs = _all_pairs(len(set_a.ids), len(set_b.ids), set_b is set_a)
    n_workers = max(1, len(client.scheduler_info().get("workers", {})))
    if pairs_per_task is None:
        pairs_per_task = int(min(20000, max(50, -(-len(pairs) // (8 * n_workers)))))
    chunks = [pairs[i:i + pairs_per_task] for i in range(0, len(pairs), pairs_per_task)]
    meta = {"motifgrid.version": __version__, "motifgrid.compare": json.dumps(
        {k: params[k] for k in ("motifs_a", "motifs_b", "pvalue", "cells", "background")})}
    ctx = CompareContext(rows_a=rows_a, rows_b=rows_b, ids_a=set_a.ids, names_a=set_a.names, ids_b=set_b.ids,
                         names_b=set_b.names, out=out, min_overlap=min_overlap, device=device, metadata=meta)
    stats = {"pairs": 0, "combos": 0, "seconds_compute": 0.0, "seconds_io": 0.0}
    t2 = time.perf_counter()
    run = TaskRun(client, compare_task, ctx, list(enumerate(chunks)), name="compare", key=lambda k, c: k)
    for res in run.results(lambda exc: CompareError(f"a compare task failed: {type(exc).__name__}: {exc}")):
        for k in stats:
            stats[k] += res[k]
        if progress is not None:
            progress(stats["pairs"], len(pairs))
    t_tasks = time.perf_counter() - t2
    summary = {"pairs": int(len(pairs)), "combos": int(stats["combos"]), "motifs_a": len(set_a.ids),
               "motifs_b": len(set_b.ids), "tasks": len(chunks), "workers": n_workers, "device": device,
               "seconds": None, "seconds_thresholds_and_lattices": t_prep, "seconds_tasks_wall": t_tasks,
               "task_seconds_compute": stats["seconds_compute"], "task_seconds_io": stats["seconds_io"],
               "unreachable_rows_a": int((rows_a.cut[:, 2] < 0).sum()),
               "unreachable_rows_b": int((rows_b.cut[:, 2] < 0).sum())}
    if cluster is not None:
        t3 = time.perf_counter()
        cl = cluster_motifs(out, set_a.ids if set_b is set_a else None, float(cluster))
        summary["clusters"] = int(cl.column("cluster").to_numpy().max() + 1) if cl.num_rows else 0
        summary["cluster_cutoff"] = float(cluster)
        summary["seconds_cluster"] = time.perf_counter() - t3
    summary["seconds"] = time.perf_counter() - t0
    _write_json(Path(out) / "_summary.json", summary)
    return summary


def _thresholds_and_rows(set_a, set_b, out: str, client, pvalue: float, bg: np.ndarray, cells: int,
                         threshold_method: str):
    """Thresholds of every (motif, strand) row of both collections (fanned out on ``client``; written to
    ``OUT/thresholds.parquet``), then their COMPARE lattices: ``(rows_a, rows_b)``, the same object when B is A."""
    from pipeline.scan import motif_thresholds_table, row_thresholds_many  # noqa: PLC0415
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


def cluster_motifs(out: str, ids: list | None, cutoff: float) -> pa.Table:
    """Group redundant motifs of one collection: leader clustering at ``similarity >= cutoff``.

    The motif with the most neighbours at the cut-off (ties: the first in the file) becomes a
    representative and takes every unassigned neighbour; repeat.  Every member is at least ``cutoff``
    similar to its representative (no chaining).  Writes ``clusters.parquet`` and ``clusters.tsv``.
    """
    if ids is None:
        raise CompareError("--cluster needs one collection (compare A --cluster S)")
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
    rep = np.full(n, -1, np.int64)
    to_rep = np.zeros(n)
    k = 0
    for i in order:
        if cluster[i] >= 0:
            continue
        cluster[i], rep[i], to_rep[i] = k, i, 1.0
        for j, v in nbrs[i].items():
            if cluster[j] < 0:
                cluster[j], rep[j], to_rep[j] = k, i, v
        k += 1
    size = np.bincount(cluster, minlength=k)
    table = arrow.table({
        "motif_id": arrow.strings(ids),
        "cluster": arrow.column(cluster, pa.int32()),
        "representative": arrow.strings([ids[r] for r in rep]),
        "similarity_to_representative": arrow.column(to_rep, pa.float64()),
        "cluster_size": arrow.column(size[cluster], pa.int32()),
    })
    order_rows = np.lexsort((np.arange(n), cluster))
    table = table.take(arrow.column(order_rows))
    write_parquet(table, os.path.join(out, "clusters.parquet"))
    atomic_write_bytes(os.path.join(out, "clusters.tsv"), table_tsv(table))
    return table
