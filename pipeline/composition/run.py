"""The composition graph: short test sequences × reference windows with a similar nucleotide histogram.

For each test T and every reference window W of length |T|: S = 1 − D/|T| with D the L1 distance of
the A, C, G, T counts; a match is S ≥ ``min_similarity`` (Breland et al., seed 004).  The reference is a
genome store (a FASTA is ingested first into ``OUT/_reference.zarr``); one Dask task per block (small
blocks batched into one task), each comparing every window that *starts* in its block cores with every
test (the block halo must hold the longest test − 1, so no window is lost or counted twice at a border; the
code 4 between two records of the store keeps windows from spanning two).
The kernels are in :mod:`workers.composition`.

Output layout (the scan's; see :mod:`pipeline.engine.dataset`)::

    OUT/_run.json                      parameters (checked on --resume)
    OUT/_reference.zarr/               the ingested reference, when REFERENCE was a FASTA
    OUT/_manifest/<task>.json          one per finished task, after its data; <task>.counts.npy = matches per row
    OUT/chrom/<record>/part-<task>.parquet   test_id, chrom, start, end, strand, similarity (a task of one
    OUT/packed/part-<task>.parquet           record's blocks / of blocks shared by records; not with --counts-only)
    OUT/_test_summary.parquet          matches per test and strand
    OUT/_summary.json                  totals; its presence marks a finished run

Loose thresholds match almost everywhere (a random window is within S ≥ 0.9 of a 100-nt test a few per
cent of the time), so before a run writes hits the matches are *counted* on a sample of tasks and the run
is refused when the estimate exceeds ``max_hits``.
"""
from __future__ import annotations

import gzip
import io
import json
import os
import shlex
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa

from pipeline import MotifgridError, __version__
from pipeline.engine.dataset import (Progress, TaskRun, atomic_write_bytes, check_inputs_outside, check_output,
                                     check_writable, discard_replaced, lock_output, open_run, read_manifest,
                                     release_output, restore_replaced, write_manifest_entry, write_part)
from pipeline.io import arrow
from pipeline.io.genome import GenomeError, GenomeStore, file_checksum
from pipeline.io.schema import COMPOSITION_FORMAT_VERSION, COMPOSITION_SCHEMA, TEST_SUMMARY_SCHEMA
from workers.composition import CompositionPlan, Segments, compare_block, histograms, make_plan, similarity

REFERENCE_STORE = "_reference.zarr"
_STRANDS = arrow.strings(["+", "-"])
_DICT_COLUMNS = ["test_id", "chrom", "strand"]
_STATS_COLUMNS = ["start", "end", "similarity"]


class CompositionError(MotifgridError, RuntimeError):
    """A composition run that cannot start or go on; ``str(e)`` is one line for the user."""


# ------------------------------------------------------------------------------------ tests
@dataclass
class SequenceSet:
    source: str
    checksum: str
    ids: list
    codes: np.ndarray          # all tests, concatenated (A=0 C=1 G=2 T=3)
    offsets: np.ndarray        # (n + 1,) int64

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets).astype(np.int32)


_TEST_CODE = np.full(256, 255, dtype=np.uint8)
for _i, _c in enumerate(b"ACGT"):
    _TEST_CODE[_c] = _TEST_CODE[_c + 32] = _i
_TEST_CODE[ord("U")] = _TEST_CODE[ord("u")] = 3


def read_tests(path: str) -> SequenceSet:
    """Test sequences from a FASTA file (plain or gzip): A, C, G, T (or U) only, unique names."""
    from pipeline.io.fasta import sniff_fasta_layout  # noqa: PLC0415

    p = Path(path)
    kind, cr = sniff_fasta_layout(p, error=CompositionError)
    opener = gzip.open if kind != "plain" else open
    ids, seqs, seen = [], [], {}
    name, start_line, chunks = None, 0, []

    def close():
        if name is None:
            return
        raw = b"".join(chunks)
        if not raw:
            raise CompositionError(f"{path}: record {name!r} (line {start_line}) has no sequence")
        codes = _TEST_CODE[np.frombuffer(raw, np.uint8)]
        bad = np.flatnonzero(codes == 255)
        if bad.size:
            ch = chr(raw[bad[0]])
            raise CompositionError(f"{path}: record {name!r} (line {start_line}): {ch!r} at position {bad[0] + 1} "
                                   "is not A, C, G, T or U (test sequences must be plain nucleotides)")
        ids.append(name)
        seqs.append(codes)

    try:
        with opener(p, "rb") as f:
            # old Mac OS line ends (CR alone): test sets are small, read whole
            for ln, line in enumerate(io.BytesIO(f.read().replace(b"\r", b"\n")) if cr else f, 1):
                line = line.rstrip(b"\r\n")
                if line.startswith(b">"):
                    close()
                    head = line[1:].decode("utf-8", "replace").split()
                    name = head[0] if head else ""
                    if not name:
                        raise CompositionError(f"{path}: line {ln}: record without a name")
                    if name in seen:
                        raise CompositionError(f"{path}: duplicate test name {name!r} (lines {seen[name]} and {ln})")
                    seen[name] = ln
                    start_line, chunks = ln, []
                elif name is not None:
                    chunks.append(line.strip())
            close()
    except (OSError, EOFError) as e:
        raise CompositionError(f"{path}: cannot read ({e})") from None
    if not ids:
        raise CompositionError(f"{path}: no test sequences")
    offsets = np.zeros(len(seqs) + 1, np.int64)
    offsets[1:] = np.cumsum([s.size for s in seqs])
    return SequenceSet(source=str(path), checksum=file_checksum(p), ids=ids, codes=np.concatenate(seqs),
                   offsets=offsets)


# ------------------------------------------------------------------------------------ tasks
@dataclass
class CompositionContext:
    """What every task needs; scattered to each worker once."""
    store: GenomeStore
    plan: CompositionPlan
    test_ids: list
    out: str
    counts_only: bool
    metadata: dict
    device: str = "cpu"


def assemble(store: GenomeStore, blocks: list):
    """The task's sequence: each block's row (core + halo, cut at the packed end) followed by a code 4."""
    parts, starts, ns = [], [], []
    off = 0
    sep = np.full(1, 4, np.uint8)
    for b in blocks:
        row = store.read_block(b)
        valid = min(row.size, store.packed_length - b.start)
        # a copy of the valid part only: a view would keep the whole row (B + H bytes, ~1 MB) alive until the
        # concatenation
        parts += [row[:valid].copy() if valid < row.size else row, sep]
        starts.append(off)
        ns.append(b.core_end - b.start)
        off += valid + 1
    codes = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    return codes, Segments(np.asarray(starts, np.int64), np.asarray(ns, np.int64))


def _hits_table(ctx: CompositionContext, blocks: list, segments: Segments, found) -> pa.Table:
    """The task's matches as one table, in (block, start, row) order, positions mapped to their records."""
    plan = ctx.plan
    bi = np.searchsorted(segments.start, found.pos, side="right") - 1
    starts = np.asarray([b.start for b in blocks], np.int64)
    packed = found.pos - segments.start[bi] + starts[bi]
    rec = ctx.store.records
    r = rec.locate(packed)
    recs, r_local = np.unique(r, return_inverse=True)
    rows = found.row
    length = plan.row_length[rows]
    start = packed - rec.offsets[r]
    return arrow.table({
        "test_id": arrow.dictionary(plan.row_test[rows].astype(np.int32), arrow.strings(ctx.test_ids)),
        "chrom": arrow.dictionary(r_local.astype(np.int32), arrow.strings([rec.names[i] for i in recs.tolist()])),
        "start": start,
        "end": start + length,
        "strand": arrow.dictionary(plan.row_strand[rows].astype(np.int32), _STRANDS),
        "similarity": similarity(found.distance, length),
    }, schema=COMPOSITION_SCHEMA)


def _bases(store: GenomeStore, blocks: list) -> int:
    """Window starts on record bases in the blocks' cores (the padding and gaps between records not counted)."""
    return sum(store.records.bases(b.start, b.core_end) for b in blocks)


def _task_folder(store: GenomeStore, blocks: list) -> str | None:
    """The record a task's file is filed under (all its blocks hold only that record), else None (packed/)."""
    from pipeline.scan.task import block_folder  # noqa: PLC0415

    names = {block_folder(store, b.index) for b in blocks}
    return names.pop() if len(names) == 1 else None


def composition_task(ctx: CompositionContext, blocks: list) -> dict:
    """Compare the windows of ``blocks`` with every test; write the matches (one file per task), the counts
    per row and the manifest entry.  Returns small statistics."""
    t0 = time.perf_counter()
    codes, segments = assemble(ctx.store, blocks)
    t1 = time.perf_counter()
    counts, found = compare_block(codes, segments, ctx.plan, device=ctx.device, hits=not ctx.counts_only)
    t2 = time.perf_counter()
    task_id = blocks[0].block_id
    files = []
    n_hits = int(counts.sum())
    if found is not None and len(found):
        meta = dict(ctx.metadata)
        meta["block"] = json.dumps([{"index": b.index, "start": b.start, "end": b.core_end} for b in blocks])
        files.append(write_part(ctx.out, _task_folder(ctx.store, blocks), task_id, _hits_table(ctx, blocks, segments,
                                                                                               found),
                                meta, _DICT_COLUMNS, _STATS_COLUMNS))
    counts_file = os.path.join(ctx.out, "_manifest", f"{task_id}.counts.npy")
    buf = io.BytesIO()
    np.save(buf, counts.astype(np.int64))
    atomic_write_bytes(counts_file, buf.getvalue())
    entry = {"task": task_id, "blocks": [b.block_id for b in blocks], "hits": n_hits, "files": files,
             "counts": os.path.basename(counts_file), "positions": _bases(ctx.store, blocks)}
    write_manifest_entry(ctx.out, task_id, entry)
    t3 = time.perf_counter()
    return {"blocks": len(blocks), "hits": n_hits, "positions": entry["positions"],
            "seconds_compare": t2 - t1, "seconds_io": (t1 - t0) + (t3 - t2)}


def count_task(ctx: CompositionContext, blocks: list) -> tuple:
    """Matches of ``blocks`` (counted, nothing written): (window starts, matches)."""
    codes, segments = assemble(ctx.store, blocks)
    counts, _ = compare_block(codes, segments, ctx.plan, device=ctx.device, hits=False)
    return _bases(ctx.store, blocks), int(counts.sum())


def task_groups(store: GenomeStore, min_positions: int) -> list:
    """Blocks of the whole store in tasks (deterministic, so a resumed run finds the same tasks): one per block,
    consecutive blocks with few window starts batched up to ``min_positions``, largest tasks first."""
    from pipeline.io.regions import Piece  # noqa: PLC0415
    from pipeline.scan.task import group_units  # noqa: PLC0415

    blocks = store.blocks()
    units = [(b.index, [Piece(b.index, b.start, b.core_end, store.packed_length)]) for b in blocks]
    by_index = {b.index: b for b in blocks}
    return [[by_index[i] for i, _ in g] for g in group_units(units, min_positions)]


# ------------------------------------------------------------------------------------ run
@dataclass
class CompositionJob:
    """A validated run, ready to start: tests read, reference open, output checked (claimed for FASTA)."""
    store: GenomeStore
    tests: SequenceSet
    plan: CompositionPlan
    out: str
    params: dict
    resume: bool
    claimed: bool
    done: set
    ingest_seconds: float
    t_start: float
    overwrite: bool = False


@dataclass
class CompositionResult:
    out: str
    tasks: int
    tasks_skipped: int
    blocks: int
    hits: int
    positions: int
    pairs: int                 # window-test comparisons in the seed's terms (window starts × test rows)
    seconds: float
    device: str
    workers: int
    estimate: dict | None


def _cfg(name: str):
    import dask.config  # noqa: PLC0415

    return dask.config.get(f"motifgrid.composition.{name}")


def _is_store(path: str) -> bool:
    return Path(path, "zarr.json").exists()


def plan_composition(tests: str, reference: str, out: str, min_similarity: float = 0.9,
                     both_strands: bool = False, counts_only: bool = False, resume: bool = False,
                     block_size: int | None = None, console=None, overwrite: bool = False) -> CompositionJob:
    """Read and check every input before any cluster is started; ingest a FASTA reference.  ``overwrite``
    replaces the composition dataset in ``out`` when the run is about to write.  The folder is this run's to write
    from here to the end of :func:`execute_composition` (:func:`pipeline.engine.dataset.lock_output`)."""
    lock_output(out, CompositionError)
    try:
        return _plan_composition(tests, reference, out, min_similarity, both_strands, counts_only, resume,
                                 block_size, console, overwrite)
    except BaseException:
        release_output(out)
        raise


def _plan_composition(tests, reference, out, min_similarity, both_strands, counts_only, resume, block_size, console,
                      overwrite) -> CompositionJob:

    from pipeline.io.fasta import sniff_fasta  # noqa: PLC0415
    from pipeline.io.genome import ingest  # noqa: PLC0415

    t_start = time.perf_counter()
    if not (0.0 < min_similarity <= 1.0):
        raise CompositionError(f"--min-similarity must be in (0, 1], got {min_similarity}")
    ts = read_tests(tests)
    check_output(out, resume, "composition run", CompositionError, "composition dataset", overwrite)
    check_writable(out, CompositionError)          # before any cluster starts
    if overwrite:
        check_inputs_outside(out, [tests, reference], CompositionError)
    max_len = int(ts.lengths.max())
    task_positions = int(_cfg("min-task-positions"))
    ingest_seconds = 0.0
    if _is_store(reference):
        store = GenomeStore(reference)
        if max_len - 1 > store.halo:
            raise CompositionError(f"{reference}: halo {store.halo} is shorter than the longest test ({max_len}) - 1; "
                                   f"re-ingest with --halo {max_len - 1} or more")
        genome_checksum, B, H = store.checksum, store.block_size, store.halo
        claimed, store_path = False, reference
    else:
        sniff_fasta(Path(reference), error=CompositionError)
        genome_checksum = file_checksum(reference)
        B, H = int(block_size or _cfg("block-size")), max_len - 1
        claimed, store_path = True, os.path.join(out, REFERENCE_STORE)
    params = {
        "composition_format": COMPOSITION_FORMAT_VERSION,
        "tests_source": ts.source, "tests_checksum": ts.checksum, "tests": len(ts.ids),
        "min_similarity": float(min_similarity), "both_strands": bool(both_strands), "counts_only": bool(counts_only),
        "genome_checksum": genome_checksum, "block_size": B, "halo": H, "task_positions": task_positions,
    }
    done: set = set()
    if claimed:
        existed = Path(out, "_run.json").exists()
        done = open_run(out, params, resume, kind="composition run", error=CompositionError, key="task",
                        dataset="composition dataset", overwrite=overwrite)
        if Path(store_path, "zarr.json").exists():
            store = GenomeStore(store_path)
            if store.checksum != genome_checksum:
                raise CompositionError(f"{store_path}: was ingested from another file than {reference}")
        else:
            if console is not None:
                console.print(f"ingesting {reference} → {store_path} (block size {B:,}, halo {H})")
            t0 = time.perf_counter()
            try:
                store = ingest(reference, store_path, block_size=B, halo=H)
            except GenomeError:
                if not existed:
                    import shutil  # noqa: PLC0415

                    shutil.rmtree(out, ignore_errors=True)      # claimed by this call only: leave nothing
                restore_replaced(out)                           # what --overwrite set aside, back
                raise
            ingest_seconds = time.perf_counter() - t0
    plan = make_plan(histograms(ts.codes, ts.offsets), ts.lengths, min_similarity, both_strands)
    return CompositionJob(store=store, tests=ts, plan=plan, out=out, params=params, resume=resume, claimed=claimed,
                          done=done, ingest_seconds=ingest_seconds, t_start=t_start, overwrite=overwrite)


def _metadata(job: CompositionJob, device: str, command: str | None) -> dict:
    store, ts = job.store, job.tests
    return {
        "motifgrid.version": __version__,
        "motifgrid.composition_format": str(COMPOSITION_FORMAT_VERSION),
        "motifgrid.command": command or " ".join(shlex.quote(a) for a in sys.argv),
        "genome.path": os.path.abspath(store.path),
        "genome.source": str(store.attrs.get("source", "")),
        "genome.checksum": store.checksum,
        "genome.block_size": str(store.block_size),
        "genome.halo": str(store.halo),
        "tests.source": ts.source,
        "tests.checksum": ts.checksum,
        "tests.count": str(len(ts.ids)),
        "min_similarity": repr(job.plan.min_similarity),
        "both_strands": str(job.plan.both_strands).lower(),
        "device": device,
    }


def estimate_hits(ctx: CompositionContext, groups: list, client, n_sample: int) -> dict:
    """Count the matches of ``n_sample`` tasks spread over the reference; extrapolate by window starts."""
    total = sum(_bases(ctx.store, g) for g in groups)
    if not groups:
        return {"hits": 0, "sampled_tasks": 0, "sampled_positions": 0, "sampled_hits": 0, "positions": 0,
                "exact": True}
    k = min(len(groups), max(1, n_sample))
    pick = sorted({int(round(i * (len(groups) - 1) / max(k - 1, 1))) for i in range(k)})
    ctx_f = client.scatter(ctx, broadcast=True, hash=False)
    futs = [client.submit(count_task, ctx_f, groups[i], pure=False, key=f"count-{groups[i][0].block_id}-{uuid.uuid4().hex[:6]}")
            for i in pick]
    res = client.gather(futs)
    pos = sum(r[0] for r in res)
    hits = sum(r[1] for r in res)
    est = int(round(hits * total / pos)) if pos else 0
    return {"hits": est, "sampled_tasks": len(pick), "sampled_positions": pos, "sampled_hits": hits,
            "positions": total, "exact": len(pick) == len(groups)}


def execute_composition(job: CompositionJob, client, device: str = "cpu", progress: bool = True,
                        command: str | None = None, console=None, max_hits: int | None = None) -> CompositionResult:
    """Estimate (unless counting only), then one task per block group on ``client``; summaries at the end."""
    try:
        return _execute_composition(job, client, device, progress, command, console, max_hits)
    finally:
        release_output(job.out)


def _execute_composition(job: CompositionJob, client, device, progress, command, console,
                         max_hits) -> CompositionResult:
    max_hits = int(_cfg("max-hits") if max_hits is None else max_hits)
    out = job.out
    discard_replaced(out)                       # under way, on a live cluster: what --overwrite replaces goes
    counts_only = job.params["counts_only"]
    ctx = CompositionContext(store=job.store, plan=job.plan, test_ids=job.tests.ids, out=os.path.abspath(out),
                             counts_only=counts_only, metadata=_metadata(job, device, command), device=device)
    groups = task_groups(job.store, job.params["task_positions"])
    estimate = None
    todo = [g for g in groups if g[0].block_id not in job.done]
    if not counts_only and todo:
        t0 = time.perf_counter()
        estimate = estimate_hits(ctx, groups, client, int(_cfg("sample-tasks")))
        estimate["seconds"] = time.perf_counter() - t0
        if estimate["hits"] > max_hits:
            how = ("counted exactly" if estimate["exact"] else
                   f"{estimate['sampled_hits']:,} in a sample of {estimate['sampled_positions']:,} of "
                   f"{estimate['positions']:,} window starts")
            kept = "; the ingested reference is kept: rerun with --resume" if job.claimed else ""
            raise CompositionError(f"about {estimate['hits']:,} matches expected at S >= {job.plan.min_similarity:g} "
                                   f"({how}), above --max-hits {max_hits:,}; raise --max-hits or --min-similarity, "
                                   f"or use --counts-only for matches per test{kept}")
    done = job.done
    if not job.claimed:
        done = open_run(out, job.params, job.resume, kind="composition run", error=CompositionError,
                        key="task", dataset="composition dataset", overwrite=job.overwrite)
        discard_replaced(out)                   # (set aside just now, on a live cluster)
        todo = [g for g in groups if g[0].block_id not in done]
    stats = {"blocks": 0, "hits": 0, "positions": 0, "seconds_compare": 0.0, "seconds_io": 0.0}
    t_tasks0 = time.perf_counter()
    run = TaskRun(client, composition_task, ctx, [(g,) for g in todo], name="composition",
                  key=lambda g: g[0].block_id)
    with Progress(console, sum(len(g) for g in todo), progress and len(run) > 0, label="composition") as bar:
        for res in run.results(lambda exc: CompositionError(f"a task failed: {type(exc).__name__}: {exc} "
                                                            f"(finished tasks are kept; rerun with --resume)"), out):
            for k in stats:
                stats[k] += res[k]
            bar.update(res["blocks"], stats["hits"])
    t_tasks = time.perf_counter() - t_tasks0
    counts, total_hits = _totals_from_manifest(out, job.plan.n_rows)
    positions = sum(_bases(job.store, g) for g in groups)
    summary = {
        "tests": len(job.tests.ids), "rows": job.plan.n_rows, "lengths": int(job.plan.lengths.size),
        "min_similarity": job.plan.min_similarity, "both_strands": job.plan.both_strands, "counts_only": counts_only,
        "blocks": sum(len(g) for g in groups), "tasks": len(groups), "tasks_this_run": len(todo),
        "positions": positions, "pairs": _pairs(job.plan, positions), "matches": int(total_hits),
        "tests_with_matches": int(np.count_nonzero(_per_test(job.plan, counts).sum(1))),
        "seconds": time.perf_counter() - job.t_start, "seconds_ingest": job.ingest_seconds,
        "seconds_tasks_wall": t_tasks, "task_seconds_compare": stats["seconds_compare"],
        "task_seconds_io": stats["seconds_io"], "estimate": estimate, "device": device,
        "cells": job.plan.cells,
        # the provenance a run without match files (--counts-only, no match) has nowhere else (motifgrid summary)
        "command": ctx.metadata["motifgrid.command"], "genome": ctx.metadata["genome.path"],
    }
    _write_summaries(out, job, counts, summary)
    return CompositionResult(out=out, tasks=len(groups), tasks_skipped=len(groups) - len(todo),
                             blocks=summary["blocks"], hits=int(total_hits), positions=positions,
                             pairs=summary["pairs"], seconds=summary["seconds"], device=device,
                             workers=len(client.scheduler_info().get("workers", {})), estimate=estimate)


def _pairs(plan: CompositionPlan, positions: int) -> int:
    return int(positions) * plan.n_rows


def _totals_from_manifest(out: str, n_rows: int):
    counts = np.zeros(n_rows, np.int64)
    total = 0
    for e in read_manifest(out):
        total += e["hits"]
        counts += np.load(os.path.join(out, "_manifest", e["counts"]), allow_pickle=False)
    return counts, total


def _per_test(plan: CompositionPlan, counts: np.ndarray) -> np.ndarray:
    """(n_tests, 2) matches on "+" and "-"."""
    per = np.zeros((plan.n_tests, 2), np.int64)
    np.add.at(per, (plan.row_test, plan.row_strand.astype(np.int64)), counts)
    return per


def _write_summaries(out: str, job: CompositionJob, counts: np.ndarray, summary: dict) -> None:
    import pyarrow.parquet as pq  # noqa: PLC0415

    per = _per_test(job.plan, counts)
    t = arrow.table({"test_id": job.tests.ids, "length": job.tests.lengths, "matches_plus": per[:, 0],
                  "matches_minus": per[:, 1], "matches": per.sum(1)}, schema=TEST_SUMMARY_SCHEMA)
    tmp = os.path.join(out, f"._test_summary.parquet.tmp-{uuid.uuid4().hex}")
    pq.write_table(t, tmp)
    os.replace(tmp, os.path.join(out, "_test_summary.parquet"))
    atomic_write_bytes(os.path.join(out, "_summary.json"), json.dumps(summary, indent=1).encode())


def run_composition(tests: str, reference: str, out: str, min_similarity: float = 0.9, both_strands: bool = False,
                    counts_only: bool = False, client=None, device: str = "cpu", resume: bool = False,
                    progress: bool = True, command: str | None = None, console=None,
                    max_hits: int | None = None, block_size: int | None = None,
                    overwrite: bool = False) -> CompositionResult:
    """A whole composition run on ``client`` (a ``distributed.Client``)."""
    job = plan_composition(tests, reference, out, min_similarity, both_strands, counts_only, resume, block_size,
                           overwrite=overwrite)
    return execute_composition(job, client, device=device, progress=progress, command=command, console=console,
                               max_hits=max_hits)


def read_matches(out: str, columns=None, filter=None) -> pa.Table:
    """Read a composition dataset (small ones)."""
    import pyarrow.dataset as ds  # noqa: PLC0415

    d = ds.dataset(out, format="parquet", schema=COMPOSITION_SCHEMA)
    return d.to_table(columns=columns, filter=filter)
