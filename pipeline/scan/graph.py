"""The scan graph: genome store (or FASTA, or BED regions of a store) × motif set → Parquet hits, a file per block.

One task per block (blocks with few windows to scan batched), each run by a worker that reads its block
from the Zarr store, scans it on its device and writes the block's hits itself, atomically, with the
provenance as key-value metadata (:mod:`pipeline.scan.task`).  A manifest entry per finished block
(``HITS/_manifest/``) lets an interrupted run resume without redoing anything; the scan context (matrices,
thresholds, p-value tables, regions) is scattered to each worker once.

Output layout::

    HITS/_run.json                  parameters of the run (checked on --resume)
    HITS/_manifest/<block>.json     one entry per finished block
    HITS/chrom/<record>/part-<block>.parquet    blocks that hold one record (a chromosome's)
    HITS/packed/part-<block>.parquet            blocks shared by several records (peaks, promoters)
    HITS/_counts/<block>.parquet    per block: hits per (record or region, motif), reduced into
    HITS/_region_counts.parquet     hits, best score, best p-value per (record or region, motif)
    HITS/_thresholds.parquet        per motif and strand: threshold and its exact p-value
    HITS/_qvalues.parquet           per motif: q-value (Benjamini-Hochberg) as a step function of the p-value
    HITS/_motif_summary.parquet     hits and tests (windows without N x strands) per motif (and .tsv, most hits first)
    HITS/_genome.zarr               the store of a FASTA given to ``scan`` (kept for exports and --resume)
    HITS/_summary.json              totals; its presence marks a finished run
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import time
import uuid
from dataclasses import dataclass

import numpy as np

from pipeline import __version__
from pipeline.engine.dataset import (Progress, TaskRun, discard_replaced, iter_manifest, release_output,
                                     remove_temporaries, scheduler_lost, write_part)
from pipeline.engine.dataset import abspath as _abspath
from pipeline.engine.dataset import atomic_write_bytes as _atomic_write_bytes
from pipeline.io import arrow, storage
from pipeline.io.genome import GenomeStore
from pipeline.io.schema import HITS_FORMAT_VERSION, HITS_SCHEMA, MOTIF_SUMMARY_SCHEMA, REGION_HITS_SCHEMA
from pipeline.scan.motif_set import STRAND_ROWS, MotifSet, ScanError, motif_thresholds_table, threshold_plan
from pipeline.scan.plan import ScanJob, hits_compression, plan_scan
from pipeline.scan.read import motif_summary_tsv
from pipeline.scan.region_counts import StreamingRegionCounts, write_region_counts
from pipeline.scan.task import ScanContext, group_units, scan_task
from workers import trace


@dataclass
class ScanResult:
    """What a scan reports.  ``blocks`` and ``hits`` describe the whole dataset in ``out`` (blocks finished by
    earlier runs included, as ``_summary.json``); ``blocks_skipped`` were finished before this run, and the
    ``*_this_run`` counts, ``positions``, ``scores``, ``column_scores`` and ``seconds`` are this run's work
    (rates divide them)."""
    out: str
    blocks: int
    blocks_skipped: int
    hits: int                # every hit of the dataset
    seconds: float
    positions: int           # window starts scanned by this run
    scores: int              # window scores computed by this run: positions × (motif, strand) rows
    column_scores: int       # positions × motif columns × strands
    unreachable: list
    device: str
    workers: int
    qvalues: dict | None = None     # pipeline.scan.qvalues.compute_qvalues's summary; None with --no-qvalue
    hits_this_run: int = 0          # hits of the blocks this run scanned


def _region_counts_step(job: ScanJob, out: str, store: GenomeStore, mset: MotifSet, streaming=None) -> float:
    """``_region_counts.parquet`` of the finished blocks (the rest of ``streaming``'s merge, when it runs); the
    seconds it took after the tasks."""
    t = time.perf_counter()
    try:
        if streaming is not None:
            streaming.close()
        else:
            write_region_counts(out, store.records, job.regions, mset.ids, mset.names)
    except OSError as e:
        raise ScanError(_failure_message(e, out)) from None
    return time.perf_counter() - t


def run_scan(source: str, motifs: str, out: str, pvalue: float = 1e-4, background: str | None = None,
             pseudocount: float = 0.1, client=None, device: str = "cpu", resume: bool = False,
             progress: bool = True, command: str | None = None, console=None, *, like: str | None = None,
             strands: str = "both", overwrite: bool = False, select=None, motif_format: str | None = None,
             qvalues: bool = True, max_qvalue: float | None = None, regions: str | None = None) -> ScanResult:
    """Run a whole scan on ``client`` (a ``distributed.Client``) and return its summary."""
    job = plan_scan(source, motifs, out, pvalue, background, pseudocount, resume, like=like, strands=strands,
                    overwrite=overwrite, select=select, motif_format=motif_format, qvalues=qvalues,
                    max_qvalue=max_qvalue, regions=regions)
    return execute_scan(job, client, device=device, progress=progress, command=command, console=console)


def execute_scan(job: ScanJob, client, device: str = "cpu", progress: bool = True, command: str | None = None,
                 console=None) -> ScanResult:
    """Thresholds, then one task per block on ``client``; summaries at the end.  The progress is
    published on the scheduler as it goes (:mod:`pipeline.engine.progress`), for any client to follow."""
    from pipeline.engine.progress import ScanProgress  # noqa: PLC0415

    command = command or " ".join(shlex.quote(a) for a in sys.argv)
    discard_replaced(job.out)                   # under way, on a live cluster: what --overwrite replaces goes
    pub = ScanProgress(client, job, device=device, command=command)
    try:
        res = _execute_scan(job, client, device, progress, command, console, pub)
    except BaseException as e:
        pub.failed(e)
        raise
    finally:
        release_output(job.out)
    return res


def _execute_scan(job: ScanJob, client, device, progress, command, console, pub) -> ScanResult:
    store, mset, out, pvalue, done = job.store, job.mset, job.out, job.pvalue, job.done
    t_thr0 = time.perf_counter()
    all_units = job.units()
    todo = [u for u in all_units if store.block(u[0]).block_id not in done]
    groups = group_units(todo, _min_task_positions(client, todo))
    reserving = _reserve_pinned(client, device, pvalue, len(mset.pwms) * len(mset.strand_rows), groups)  # beside
    plan, tables, keep, unreachable = threshold_plan(mset, pvalue, client, store_later=True,  # cache: written later
                                                     early=job.thresholds, table=job.hits)
    t_plan = time.perf_counter()
    ctx = _scan_context(job, client, device, command, pub, plan, keep)
    t_tasks0 = time.perf_counter()
    run = TaskRun(client, scan_task, ctx, [(g,) for g in groups], name="scan",
                  key=lambda g: store.block(g[0][0]).block_id)
    t_submitted = time.perf_counter()              # context scattered to the workers, tasks submitted
    if job.on_tasks is not None:
        job.on_tasks()
    # published after the tasks are submitted: whoever sees "running" finds them on the scheduler
    # the blocks this run skips are those of ``done``: a task of an interrupted client may still finish a block
    # (its manifest entry appears now) that this run has just resubmitted and will count itself
    earlier = [e for e in iter_manifest(out, "block") if e["block"] in done] if done else []
    bases = {store.block(b).block_id: sum(store.records.bases(p.lo, p.hi) for p in pieces) for b, pieces in all_units}
    pub.running(plan, [store.block(b) for b, _ in all_units], [store.block(b) for b, _ in todo], earlier, bases)
    tally, streaming = _run_tasks(job, client, run, ctx, [store.block(b).block_id for b, _ in all_units], todo,
                                  progress and len(run) > 0, console, pub)
    del reserving
    from pipeline.distribution.thresholds import wait_for_cache_writes  # noqa: PLC0415

    wait_for_cache_writes()
    t_tasks_wall = time.perf_counter() - t_tasks0
    # totals over every finished block: this run's from its tasks, earlier runs' from their manifest entries
    # (reading every entry back cost ~2 s for 26,454 promoter blocks)
    total_hits, row_hits_all = _totals(earlier, tally.row_hits, tally.stats["hits"])
    lengths = np.array([w.shape[0] for w in mset.pwms], dtype=np.int64)
    windows = _motif_windows(earlier, ctx.window_lengths, tally.windows, lengths)
    tests = windows * len(STRAND_ROWS[mset.strands])        # each strand scanned tests every window
    qsum, t_region_counts = _reductions(job, client, ctx, tally, earlier, tests, row_hits_all, device, streaming)
    t_reduced = time.perf_counter()
    if job.hits and total_hits == 0:
        _write_empty_hits(ctx)
    remove_temporaries(out)
    marks = (("plan", t_plan), ("thresholds", t_tasks0), ("scattered", run.t_scattered), ("submitted", t_submitted),
             ("first_result", tally.t_first or t_submitted), ("tasks", t_tasks0 + t_tasks_wall), ("reduced", t_reduced))
    for k, v in marks:
        trace.mark_perf(k, v)
    positions = sum(bases.values())
    summary = {
        "blocks": len(all_units), "blocks_this_run": tally.stats["blocks"], "hits": int(total_hits),
        "seconds": time.perf_counter() - job.t_start, "positions": positions, "unreachable_motifs": unreachable,
        "scores": positions * plan.n_rows, "column_scores": positions * int(plan.lengths.sum()), "device": device,
        "seconds_thresholds": t_tasks0 - t_thr0, "seconds_tasks_wall": t_tasks_wall,
        "task_seconds_scan": tally.stats["seconds_scan"], "task_seconds_io": tally.stats["seconds_io"],
        "task_seconds_total": tally.stats["seconds_task"], "task_seconds_by_step": tally.stages,
        "seconds_region_counts": t_region_counts,
        "scan_id": pub.scan_id, "tests": int(tests.sum()), "qvalues": qsum, "first_tasks": tally.first,
        # wall-clock seconds from the thresholds' start: where a run's critical path goes (docs/benchmarks.md)
        "phases": {k: round(v - t_thr0, 4) for k, v in marks},
    }
    try:
        _write_summaries(out, mset, tables, mset.rows()[2], plan, row_hits_all, summary, windows)
    except OSError as e:
        raise ScanError(_failure_message(e, out)) from None
    pub.finished(summary)
    stats = tally.stats
    return ScanResult(out=out, blocks=len(all_units), blocks_skipped=len(all_units) - len(todo), hits=int(total_hits),
                      seconds=summary["seconds"], positions=stats["positions"],
                      scores=stats["positions"] * plan.n_rows, column_scores=stats["positions"] * int(plan.lengths.sum()),
                      unreachable=unreachable, device=device, workers=len(client.scheduler_info().get("workers", {})),
                      qvalues=qsum, hits_this_run=stats["hits"])


def _scan_context(job: ScanJob, client, device, command, pub, plan, keep) -> ScanContext:
    """What every scan task is given (scattered to each worker once): the store, the plan at its thresholds, the
    output and its provenance, and where the q-values' pairs are kept."""
    import dask.config  # noqa: PLC0415

    mset = job.mset
    lats = mset.row_lattices()
    lattice = None if lats is None else (np.array([lats[i].scale for i in keep], np.float64),
                                         np.array([lats[i].base for i in keep], np.float64))
    lengths = np.array([w.shape[0] for w in mset.pwms], dtype=np.int64)
    ctx = ScanContext(store=job.store, plan=plan, motif_ids=mset.ids, motif_names=mset.names, out=_abspath(job.out),
                      metadata=_hits_metadata(job, command, device), device=device,
                      compression=hits_compression(device), lattice=lattice, window_lengths=np.unique(lengths),
                      regions=job.regions, write_hits=job.hits, presence_groups=job.presence_groups,
                      **_kept_pairs_settings(job, client, plan, pub.scan_id, device))
    plan.count_scores = _count_scores(ctx, device)
    plan.pair_families = ctx.row_family if device == "gpu" and ctx.pairs_run is not None and bool(
        dask.config.get("motifgrid.qvalues.pairs-on-device", default=True)) else None
    return ctx


def _run_tasks(job: ScanJob, client, run, ctx, block_ids, todo, show, console, pub):
    """``(tally, streaming)``: the block tasks' results as they come, counted; blocks keyed by record merged into
    ``_region_counts.parquet`` as they finish (``streaming``; regions, which may overlap, at the end)."""
    out, mset = job.out, job.mset
    tally = _Tally(ctx.plan.n_rows, len(ctx.window_lengths), keeps_pairs=ctx.pairs_run is not None)
    streaming = StreamingRegionCounts(out, block_ids, job.done, job.store.records, mset.ids,
                                      mset.names) if job.region_counts and job.regions is None else None
    try:
        with Progress(console, len(todo), show) as bar:
            # the temporaries of killed writers are swept at the end of the run, not by the task runner: the
            # streamed region counts keep a temporary file open until then
            for res in run.results(lambda exc: ScanError(_failure_message(exc, out)), None):
                tally.t_first = tally.t_first or time.perf_counter()
                tally.add(res)
                if streaming is not None:
                    streaming.finished(res["block_ids"])
                bar.update(res["blocks"], tally.stats["hits"])
                pub.task_done(res)
    except BaseException:
        _drop_kept_pairs(client, ctx.pairs_run)     # the pairs of a failed run: freed now
        if streaming is not None:
            streaming.cancel()
        raise
    return tally, streaming


def _reductions(job: ScanJob, client, ctx, tally, earlier, tests, row_hits_all, device, streaming):
    """``(q-value summary, region counts' seconds)``: the two end-of-run reductions side by side, the q-values as
    tasks, the region counts here (Parquet reading and writing, mostly without the GIL)."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    with ThreadPoolExecutor(1, thread_name_prefix="region-counts") as pool:
        counted = (pool.submit(_region_counts_step, job, job.out, job.store, job.mset, streaming)
                   if job.region_counts else None)
        try:
            qsum = _qvalue_step(job, client, earlier, tally.files, tests, ctx.plan, row_hits_all, device,
                                tally.kept, ctx.pairs_run, tally.kept_lost)
        finally:
            _drop_kept_pairs(client, ctx.pairs_run)
        return qsum, (counted.result() if counted is not None else 0.0)


def _min_task_positions(client, units: list) -> int:
    """``motifgrid.scan.min-task-positions``, or less for a scan of fewer positions than that a worker thread: its
    blocks then make a task each for the threads to share, instead of one task for one thread (a few hundred peaks)."""
    import dask.config  # noqa: PLC0415

    least = int(dask.config.get("motifgrid.scan.min-task-positions"))
    threads = max(1, sum(client.nthreads().values()))
    return max(1, min(least, sum(p.hi - p.lo for _, pieces in units for p in pieces) // threads))


#: ``reserve-pinned: auto``: GPU worker processes of at least this many threads make their buffers ahead
RESERVE_MIN_THREADS = 8


def _reserve_pinned(client, device: str, pvalue: float, rows: int, groups: list) -> list:
    """On a GPU cluster, per ``motifgrid.scan.reserve-pinned``, a task on each worker that makes the pinned host
    buffers its threads' first blocks will copy their hits into (:func:`workers.scan.gpu.reserve_pinned`), run
    while the thresholds are computed; the futures, to be held until the scan's tasks are done.  ``auto``: on the
    workers of :data:`RESERVE_MIN_THREADS` threads or more.  Page-locking holds up the process's other threads: on
    one H200 with 4 processes × 4 threads the threshold tasks beside it took twice the thread-s (the phase 0.3-0.4 s
    longer) while the first blocks allocating their own lost less; one process × 16 threads a GPU (4 GPUs) lost
    more in its first blocks (16 threads page-locking at once) than in its thresholds (docs/benchmarks.md)."""
    import dask.config  # noqa: PLC0415

    where = reserve_workers(client.nthreads(), dask.config.get("motifgrid.scan.reserve-pinned", default="auto"))
    if device != "gpu" or not groups or not where:
        return []
    from workers.scan.gpu import pinned_sizes  # noqa: PLC0415

    positions = sorted(sum(p.hi - p.lo for _, pieces in g for p in pieces) for g in groups)     # a task's
    per_thread = pinned_sizes(pvalue * rows * positions[len(positions) // 2])    # ~p hits a window and row
    if not per_thread:
        return []
    threads = client.nthreads()
    return [client.submit(_reserve_pinned_task, per_thread, threads[w], pure=False, workers=[w],
                          allow_other_workers=False, key=f"reserve-pinned-{uuid.uuid4().hex[:8]}") for w in where]


def reserve_workers(nthreads: dict, mode) -> list:
    """The workers (of ``{address: threads}``) that make their pinned buffers ahead under ``reserve-pinned: mode``
    (true, false or auto)."""
    mode = str(mode).lower()
    if mode not in ("true", "1", "yes", "auto"):
        return []
    least = RESERVE_MIN_THREADS if mode == "auto" else 0
    return [w for w, n in nthreads.items() if n >= least]


def _reserve_pinned_task(sizes: list, threads: int) -> float:
    from workers.scan.gpu import reserve_pinned  # noqa: PLC0415

    try:
        return reserve_pinned(sizes, threads)
    except Exception:      # noqa: BLE001 - buffers made ahead are an optimisation (a locked-memory limit, say): the
        return 0.0         # blocks make their own, and say so if they cannot


def _hits_metadata(job: ScanJob, command: str, device: str) -> dict:
    """The provenance every hits file carries in its key-value metadata."""
    store, mset = job.store, job.mset
    return {
        "motifgrid.version": __version__,
        "motifgrid.hits_format": str(HITS_FORMAT_VERSION),
        "motifgrid.command": command,
        "genome.path": _abspath(store.path),
        "genome.checksum": store.checksum,
        "genome.block_size": str(store.block_size),
        "genome.halo": str(store.halo),
        # absolute where it is a file: a notebook opened in another folder reads the motifs back from here
        "motifs.source": os.path.abspath(mset.source) if os.path.isfile(mset.source) else mset.source,
        "motifs.checksum": mset.checksum,
        "motifs.select": json.dumps(mset.select),
        "motifs.count": str(len(mset.ids)),
        "background": json.dumps([float(x) for x in mset.background]),
        "pseudocount": repr(mset.pseudocount),
        "pvalue": repr(job.pvalue),
        "strands": mset.strands,
        "like": mset.like or "",
        "device": device,
    }


def _failure_message(exc: BaseException, out: str) -> str:
    """One line for a scan that stops: what failed, and that the finished blocks stay usable."""
    keep = "finished blocks are kept; rerun with --resume"
    if isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] in ("pipeline", "workers"):
        from pipeline.engine.cluster import WORKER_NEEDS  # noqa: PLC0415

        return f"a worker cannot import motifgrid ({exc}): {WORKER_NEEDS} ({keep})"
    if isinstance(exc, OSError) and exc.errno:
        where = f" ({exc.filename})" if exc.filename else ""
        return f"{out}: cannot write the hits: {os.strerror(exc.errno)}{where}; {keep} once it is fixed"
    return f"a block task failed: {type(exc).__name__}: {exc} ({keep})"


def _totals(entries: list, row_hits: np.ndarray, hits: int):
    """Total hits and per-row counts: ``hits`` / ``row_hits`` (this run's; added to in place) plus the manifest
    ``entries`` of blocks finished by earlier runs."""
    for e in entries:
        hits += e["hits"]
        for r, c in e.get("row_hits", []):
            row_hits[r] += c
    return hits, row_hits


def _motif_windows(entries: list, lengths: np.ndarray, windows: np.ndarray, motif_lengths: np.ndarray) -> np.ndarray:
    """Windows without N per motif: this run's per-length counts ``windows`` (of ``lengths``) plus those of the
    manifest ``entries`` of earlier runs."""
    total = dict(zip(lengths.tolist(), windows.tolist()))
    for e in entries:
        for m, c in e["windows"]:
            total[m] = total.get(m, 0) + c
    return np.array([total.get(m, 0) for m in motif_lengths.tolist()], dtype=np.int64)


class _Tally:
    """The scan tasks' results summed on the client as they come: counts and thread-seconds, hits per plan row,
    windows per motif length and the block files (the q-values' inputs), and which worker kept which files' pairs."""

    _SUMMED = ("blocks", "hits", "positions", "seconds_scan", "seconds_io", "seconds_task")

    def __init__(self, n_rows: int, n_lengths: int, keeps_pairs: bool):
        self.stats = dict.fromkeys(self._SUMMED, 0)
        self.stages: dict = {}
        self.row_hits = np.zeros(n_rows, np.int64)
        self.windows = np.zeros(n_lengths, np.int64)
        self.files: list = []
        self.kept: dict | None = {} if keeps_pairs else None     # worker -> block files whose pairs it kept
        self.kept_lost: str | None = None      # why ``kept`` became None: the q-values read the files back
        self.first: list = []      # the first tasks' thread-seconds by step: what a fresh worker pays once
        self.t_first: float | None = None       # when the first result came

    def add(self, res: dict) -> None:
        if len(self.first) < 16:
            self.first.append({"task": round(res["seconds_task"], 3), "scan": round(res["seconds_scan"], 3),
                               "faults": res.get("faults", 0),
                               **{k: round(v, 3) for k, v in res["stages"].items() if v >= 0.001}})
        for k in self._SUMMED:
            self.stats[k] += res[k]
        for k, v in res["stages"].items():
            self.stages[k] = self.stages.get(k, 0.0) + v
        if res["row_hits"] is not None:
            self.row_hits += res["row_hits"]
        self.windows += res["windows"]
        self.files += res["files"]
        if self.kept is not None:
            if res.get("kept", True) and res.get("worker") is not None:
                if res["files"]:                        # (a worker whose blocks had no hits holds nothing)
                    self.kept.setdefault(res["worker"], []).extend(rel for rel, _ in res["files"])
            elif self.kept is not None:                 # a worker dropped its pairs: the files are read
                self.kept = None
                self.kept_lost = ("a worker dropped its pairs (over its budget)" if not res.get("kept", True)
                                  else "a task's result named no worker")


def _kept_pairs_settings(job: ScanJob, client, plan, run: str, device: str) -> dict:
    """ScanContext settings for keeping the hits' (family, p-value) pairs in the workers for the q-values
    (:mod:`workers.scan.kept_pairs`): when the run computes q-values over its own blocks only (not a ``--resume``)
    and ``motifgrid.qvalues.keep-pairs`` says so — ``auto``: on GPU workers only (on one H200 the reduction of a
    genome's 516 M hits 5.2 -> 3.7 s; on the 2-core VM it saved 0.3 thread-s of reading for 100,000 peaks and
    pushed the command's peak memory past 1 GB) — at most ``keep-pairs-memory-fraction`` of the smallest worker
    memory limit each."""
    import dask.config  # noqa: PLC0415

    from pipeline.engine.cluster import on_for_device  # noqa: PLC0415
    from pipeline.scan.qvalues import families  # noqa: PLC0415

    wanted = on_for_device("motifgrid.qvalues.keep-pairs", device)
    if not (wanted and job.qvalues and job.hits and not job.done):
        return {}
    limits = [w.get("memory_limit") or 0 for w in client.scheduler_info().get("workers", {}).values()]
    fraction = float(dask.config.get("motifgrid.qvalues.keep-pairs-memory-fraction", default=0.1))
    return {"pairs_run": f"{run}-{uuid.uuid4().hex[:8]}", "pairs_budget": int(min(limits, default=0) * fraction),
            "row_family": families(job.mset.ids)[1][plan.row_motif].astype(np.int32)}


def _count_scores(ctx: ScanContext, device: str) -> bool:
    """Whether the scan tasks count each block's distinct (row, score) for the kept pairs (``ScanPlan.count_scores``):
    where pairs are kept and ``motifgrid.qvalues.count-pairs`` says so (default off: on one H100 the device's sorts
    added ~0.7 s to a genome's scan tasks at 1e-4 and saved the reduction 0.15-0.2 s; ``auto``: GPU workers)."""
    from pipeline.engine.cluster import on_for_device  # noqa: PLC0415

    return ctx.pairs_run is not None and on_for_device("motifgrid.qvalues.count-pairs", device)


def _drop_kept_pairs(client, run: str | None) -> None:
    """Free a run's kept pairs on every worker (those the reduction did not take: a fallback, a failure)."""
    if run is None or scheduler_lost(client):       # (a client that lost its scheduler: the workers free it as they go)
        return
    from workers.scan.kept_pairs import drop  # noqa: PLC0415

    try:
        client.run(drop, run)
    except Exception:  # noqa: BLE001 - best effort: a worker gone frees its memory with it
        pass


def _qvalue_step(job: ScanJob, client, earlier: list, files_run: list, tests: np.ndarray, plan, row_hits,
                 device: str = "cpu", kept: dict | None = None, run: str | None = None, kept_lost: str | None = None):
    """The end-of-run q-value reduction over every finished block file (:mod:`pipeline.scan.qvalues`; its sorts on
    ``device``, the scan's); its summary, or None with ``--no-qvalue`` (an older map is removed then).  ``kept``,
    ``run``, ``kept_lost``: the pairs the workers kept (:func:`pipeline.scan.qvalues.compute_qvalues`)."""
    from pipeline.scan.qvalues import QVALUES_FILE, compute_qvalues  # noqa: PLC0415

    if not job.qvalues:
        storage.remove(storage.join(job.out, QVALUES_FILE))
        return None
    files = [[e["file"], e["hits"]] for e in earlier if e.get("file")] + files_run
    hits = np.zeros(len(job.mset.ids), np.int64)
    np.add.at(hits, plan.row_motif, row_hits)
    try:
        return compute_qvalues(client, job.out, files, job.mset.ids, tests, hits, max_qvalue=job.max_qvalue,
                               device=device, kept=kept, run=run, kept_lost=kept_lost)
    except OSError as e:
        raise ScanError(_failure_message(e, job.out)) from None
    except Exception as e:  # noqa: BLE001 - a task's error, re-raised on the client
        raise ScanError(f"the q-value reduction failed: {type(e).__name__}: {e} (finished blocks are kept; "
                        "rerun with --resume)") from None


def _write_empty_hits(ctx: ScanContext) -> None:
    """``packed/part-empty.parquet``: a scan that found no hit at all still leaves one data file, with no rows.
    Parquet readers take a dataset's columns from its files, so a folder without any read as a table with no
    columns (pandas' ``filters=`` then failed); the file also carries the provenance (``motifgrid summary``)."""
    from pipeline.io.schema import HITS_SCHEMA, REGION_HITS_SCHEMA  # noqa: PLC0415

    schema = REGION_HITS_SCHEMA if ctx.regions is not None else HITS_SCHEMA
    write_part(ctx.out, None, "empty", schema.empty_table(), dict(ctx.metadata), [], [])


def _write_summaries(out, mset, tables, row_strand, plan, row_hits, summary, windows):
    storage.write_parquet(motif_thresholds_table(mset, tables, row_strand), storage.join(out, "_thresholds.parquet"))
    n = len(mset.ids)
    plus = np.zeros(n, np.int64)
    minus = np.zeros(n, np.int64)
    np.add.at(plus, plan.row_motif[plan.row_strand == 0], row_hits[plan.row_strand == 0])
    np.add.at(minus, plan.row_motif[plan.row_strand == 1], row_hits[plan.row_strand == 1])
    reach = np.zeros(n, bool)
    reach[plan.row_motif] = True
    per_motif = arrow.table({"motif_id": mset.ids, "motif_name": mset.names, "hits_plus": plus,
                             "hits_minus": minus, "hits": plus + minus, "reachable": reach,
                             "windows": windows, "tests": windows * len(STRAND_ROWS[mset.strands])},
                            schema=MOTIF_SUMMARY_SCHEMA)
    storage.write_parquet(per_motif, storage.join(out, "_motif_summary.parquet"))
    _atomic_write_bytes(storage.join(out, "_motif_summary.tsv"), motif_summary_tsv(per_motif))
    _atomic_write_bytes(storage.join(out, "_summary.json"), json.dumps(summary, indent=1).encode())


