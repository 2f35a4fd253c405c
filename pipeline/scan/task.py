"""What one scan task does on a worker: read its blocks, scan their pieces, write each block's hits.

A *piece* (:class:`pipeline.io.regions.Piece`) is a stretch of window starts of one block core: the whole core
for a scan of the store, the part of a BED region inside the core for ``--regions``.  A task scans all its
pieces in one call (:func:`workers.scan.scan_blocks`: the pieces' codes laid end to end, on the CPU or the
GPU), maps the hits from packed positions back to their records (``chrom``, record coordinates), and writes,
per block, one Parquet file (``chrom/<record>/`` when the block holds one record, ``packed/`` when it holds
several), its per-(record or region, motif) counts and its manifest entry.
"""
from __future__ import annotations

import functools
import json
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pipeline.engine.dataset import write_manifest_entry, write_part
from pipeline.io import arrow
from pipeline.io.genome import GenomeStore
from pipeline.io.regions import Piece, Regions
from pipeline.io.schema import HITS_SCHEMA, REGION_HITS_SCHEMA
from pipeline.scan.region_counts import block_counts, block_presence, split_keys, write_block_counts
from workers.scan import ScanPlan, scan_blocks, valid_windows
from workers.trace import mark


@dataclass
class ScanContext:
    """What every task needs; scattered to each worker once."""
    store: GenomeStore
    plan: ScanPlan                 # with plan.pvalues, the rows' score -> p-value tables
    motif_ids: list
    motif_names: list
    out: str
    metadata: dict = field(default_factory=dict)
    device: str = "cpu"
    compression: str = "zstd"      # Parquet codec of the hits files (motifgrid.scan.compression)
    lattice: tuple | None = None   # --like fimo: (scale, m*offset) per plan row, to put scores on FIMO's lattice
    window_lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))   # every motif length,
                                   # sorted: valid windows are counted per length (the q-values' tests)
    regions: Regions | None = None  # --regions: the BED regions (hits carry the name of one holding them)
    write_hits: bool = True        # False: only the blocks' (record, motif) pairs with hits and manifest entries
                                   # (enrich's counting scan)
    presence_groups: np.ndarray | None = None   # (K,) group of each record: without hits files, the blocks count
                                   # their own records with hits per (group, motif) (region_counts.block_presence)
    pairs_run: str | None = None   # keep each block file's (family, p-value) pairs in the worker under this run key
                                   # for the q-values (workers.scan.kept_pairs); None: they are read back from files
    row_family: np.ndarray | None = None   # (R,) int32 q-value family (motif id) of each plan row
    pairs_budget: int = 0          # bytes of pairs a worker may keep

    @functools.cached_property
    def split_records(self) -> np.ndarray:
        """(K,) bool: the records whose windows start in more than one block core (built on first use, per worker)."""
        rec = self.store.records
        return split_keys(rec.offsets, rec.ends, self.store.block_size)

    @functools.cached_property
    def columns(self) -> dict:
        """Per-row lookups and the Arrow dictionaries of the hits tables (built on first use, per worker)."""
        plan = self.plan
        names, name_index = np.unique(np.asarray(self.motif_names, dtype=object), return_inverse=True)
        return dict(
            ids=arrow.strings(self.motif_ids),
            names=arrow.strings(names),                             # each distinct name once
            row_motif=plan.row_motif.astype(np.int32),
            row_name=name_index.astype(np.int32)[plan.row_motif],
            row_strand=plan.row_strand.astype(np.int32),
            lengths=plan.lengths.astype(np.int64),
        )


@dataclass
class BlockHits:
    """A block's hits in packed coordinates, grouped by plan row, by position inside (hits format 2 order)."""
    pos: np.ndarray      # (n,) int64 packed window starts
    row: np.ndarray      # (n,) plan rows
    score: np.ndarray    # (n,) float64
    pvalue: np.ndarray | None    # (n,) float64 where the scan computed them (GPU)
    pairs: tuple | None = None   # the distinct (row, score, pvalue, count) of workers.scan.BlockHits.pairs, or None
    device_pairs: tuple | None = None   # workers.scan.BlockHits.device_pairs (one piece's block only)

    def __len__(self) -> int:
        return self.pos.size


_STRANDS = arrow.strings(["+", "-"])
#: ("pinned": allocating page-locked buffers for a GPU block's hits, inside the scan; "pvalues": the p-value
#: lookup, inside "table")
_STAGES = ("read", "windows", "table", "pvalues", "parquet", "counts", "pairs", "manifest", "pinned")
_DICT_COLUMNS = ["chrom", "strand", "motif_id", "motif_name", "region"]   # dictionary pages where values repeat
_STATS_COLUMNS = ["start", "end", "score", "pvalue"]     # row-group statistics for range / p-value filters
#: coordinates ascend within each motif row's run (hits format 2): delta encoding stores them in a few bits and
#: encodes ~20 % faster than plain + compression (measured on 931 k real chrX hits, zstd and lz4)
_ENCODINGS = {"start": "DELTA_BINARY_PACKED", "end": "DELTA_BINARY_PACKED"}


def piece_codes(row: np.ndarray, block_start: int, piece: Piece, keep: int) -> np.ndarray:
    """The codes a piece's windows read: ``[lo, hi + keep)`` of the block row, code 4 from the piece's ``end``
    on (no window crosses a region's end).  Shape (hi - lo + keep,) uint8."""
    a = piece.lo - block_start
    codes = row[a:a + piece.hi - piece.lo + keep]
    cut = piece.end - piece.lo
    if cut < codes.size:
        codes = codes.copy()
        codes[max(cut, 0):] = 4
    return codes


def scan_task(ctx: ScanContext, units: list) -> dict:
    """Scan ``units`` — ``(block index, [pieces])`` — and write each block's hits, counts and manifest entry.
    Returns small statistics: hits per block and per plan row (the live progress), windows tested per motif
    length and the files written (the q-values)."""
    from workers.backend import limit_blas_threads  # noqa: PLC0415

    t_task = time.perf_counter()
    mark("task-first-start", once=True)
    faults0 = _thread_faults()
    limit_blas_threads(1)
    stats = {"blocks": 0, "hits": 0, "positions": 0, "seconds_scan": 0.0, "seconds_io": 0.0,
             "block_hits": [], "row_hits": None,
             "windows": np.zeros(len(ctx.window_lengths), np.int64), "files": [],
             "stages": dict.fromkeys(_STAGES, 0.0)}     # thread-seconds by step (docs/benchmarks.md)
    longest = max(ctx.plan.max_length, int(ctx.window_lengths.max(initial=0)))     # windows counted read as far
    keep = longest - 1 if longest else 0
    B = ctx.store.block_size
    t0 = time.perf_counter()
    codes, ns, owner = [], [], []
    windows = {}
    for b, pieces in units:
        tr = time.perf_counter()
        row = ctx.store.read_block(ctx.store.block(b))
        stats["stages"]["read"] += time.perf_counter() - tr
        w = np.zeros(len(ctx.window_lengths), np.int64)
        clean = ctx.store.n_fraction[b] == 0            # no N anywhere in the row: every window start is a test
        for p in pieces:
            c = piece_codes(row, b * B, p, keep)
            tw = time.perf_counter()
            if clean and p.end >= p.hi + keep:
                w += p.hi - p.lo
            else:
                w += valid_windows(c, p.hi - p.lo, ctx.window_lengths)     # tests per motif length (q-values)
            stats["stages"]["windows"] += time.perf_counter() - tw
            codes.append(c)
            ns.append(p.hi - p.lo)
            owner.append((b, p.lo))
        windows[b] = w
        del row
    t1 = time.perf_counter()
    found = scan_blocks(codes, ns, ctx.plan, device=ctx.device)      # one call for all pieces (CPU or GPU)
    del codes
    if ctx.device == "gpu":
        from workers.scan.gpu import take_pinned_seconds  # noqa: PLC0415

        stats["stages"]["pinned"] += take_pinned_seconds()
    stats["seconds_scan"] += time.perf_counter() - t1
    stats["seconds_io"] += t1 - t0
    per_block: dict = {}
    for (b, lo), hits in zip(owner, found):
        per_block.setdefault(b, []).append((lo, hits))
    for b, pieces in units:
        t2 = time.perf_counter()
        n = sum(ctx.store.records.bases(p.lo, p.hi) for p in pieces)     # window starts on record bases
        _write_block(ctx, b, n, _merge(per_block[b]), stats, windows[b])
        stats["seconds_io"] += time.perf_counter() - t2
    stats["seconds_task"] = time.perf_counter() - t_task
    stats["faults"] = _thread_faults() - faults0
    stats["worker"] = _worker_address()
    stats["block_ids"] = [ctx.store.block(b).block_id for b, _ in units]     # finished: their counts may be merged
    mark("task-first-end", once=True)
    return stats


def _thread_faults() -> int:
    """Minor page faults of this thread so far (Linux; 0 elsewhere): a fresh worker's first blocks map their columns'
    pages anew (docs/benchmarks.md, issue 18)."""
    try:
        import resource  # noqa: PLC0415

        return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    except (ImportError, AttributeError, OSError):
        return 0


def _worker_address() -> str:
    """The address of the Dask worker running this task (where its kept pairs are); outside one, this process's
    :class:`pipeline.engine.thread_client.ThreadClient` address (its threads keep the pairs in this process)."""
    if "distributed" in sys.modules:
        try:
            from distributed import get_worker  # noqa: PLC0415

            return get_worker().address
        except (ImportError, ValueError):
            pass
    from pipeline.engine.thread_client import address  # noqa: PLC0415

    return address()


def _positions(units) -> list:
    """Window starts of each unit's pieces (with padding and gaps: the tasks' sizes)."""
    return [sum(p.hi - p.lo for p in pieces) for _, pieces in units]


def _merge(parts: list) -> BlockHits:
    """The hits of a block's pieces as one set in packed coordinates, grouped by plan row, position inside."""
    if len(parts) == 1:
        lo, h = parts[0]
        return BlockHits(np.add(h.pos, lo, dtype=np.int64), h.row, h.score, h.pvalue, h.pairs, h.device_pairs)
    pos = np.concatenate([h.pos.astype(np.int64) + lo for lo, h in parts])
    row = np.concatenate([h.row for _, h in parts])
    score = np.concatenate([h.score for _, h in parts])
    pv = None if parts[0][1].pvalue is None else np.concatenate([h.pvalue for _, h in parts])
    o = np.lexsort((pos, row))
    return BlockHits(pos[o], row[o], score[o], None if pv is None else pv[o])     # (pairs: a pair a hit)


def hits_table(ctx: ScanContext, block: int, hits: BlockHits, steps: dict | None = None) -> tuple[pa.Table, np.ndarray]:
    """Arrow table of one block's hits (strings dictionary-encoded) and each hit's key for the counts table
    (record number, or region number with ``--regions``), shape (n,) int64.  ``steps``: its p-value lookup's
    seconds are added to ``steps["pvalues"]``."""
    from workers.scan.table_numba import row_columns  # noqa: PLC0415

    c = ctx.columns
    rec = ctx.store.records
    one = ctx.store.block_records(block)
    r, start = record_positions(ctx.store, block, hits.pos)
    end, strand, motif, name = row_columns(hits.row, start, c["lengths"], c["row_strand"], c["row_motif"],
                                           c["row_name"])
    tp = time.perf_counter()
    score, pvals = _scores(ctx, hits)
    if steps is not None:
        steps["pvalues"] += time.perf_counter() - tp
    recs, r_local = (np.array([one[0]]), np.zeros(r.size, np.int32)) if one[1] - one[0] == 1 else _present(r)
    cols = {
        "chrom": arrow.dictionary(r_local.astype(np.int32, copy=False),
                                  arrow.strings([rec.names[i] for i in recs.tolist()])),
        "start": start,
        "end": end,
        "strand": arrow.dictionary(strand, _STRANDS),
        "motif_id": arrow.dictionary(motif, c["ids"]),
        "motif_name": arrow.dictionary(name, c["names"]),
        "score": score,
        "pvalue": pvals,
    }
    key = r if ctx.regions is None else _region_keys(ctx, hits)
    if ctx.regions is not None:
        keys, k_local = _present(key)
        cols["region"] = arrow.dictionary(k_local.astype(np.int32),
                                          arrow.strings([ctx.regions.names[i] for i in keys.tolist()]))
    return arrow.table(cols, schema=REGION_HITS_SCHEMA if ctx.regions is not None else HITS_SCHEMA), key


def _scores(ctx: ScanContext, hits: BlockHits) -> tuple[np.ndarray, np.ndarray]:
    """The hits' scores (on FIMO's lattice with ``--like fimo``) and p-values, (n,) float64 each."""
    pvals = hits.pvalue if hits.pvalue is not None else ctx.plan.pvalues.lookup(hits.row, hits.score)
    if ctx.lattice is None:
        return hits.score, pvals
    from workers.distribution.fimo_lattice import snap_scores  # noqa: PLC0415

    return snap_scores(hits.score, ctx.lattice[0][hits.row], ctx.lattice[1][hits.row]), pvals


def _region_keys(ctx: ScanContext, hits: BlockHits) -> np.ndarray:
    """The number of a ``--regions`` region holding each hit, (n,) int64."""
    return ctx.regions.name_of(hits.pos, hits.pos + ctx.columns["lengths"][hits.row])


def _counted_keys(ctx: ScanContext, hits: BlockHits, key: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray]:
    """(hit index, key) of every count a block's hits make: a hit counts for its record (``key``, each hit's
    record number); with ``--regions`` for every region containing it whole (:meth:`pipeline.io.regions.Regions.
    containing`: overlapping and nested regions each count it, as motifmatchr's peaks do; ``key`` unused).  Index
    None: each hit once."""
    if ctx.regions is None:
        return None, key
    return ctx.regions.containing(hits.pos, hits.pos + ctx.columns["lengths"][hits.row])


def record_positions(store: GenomeStore, block: int, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each hit's record number and start in it, from packed window starts ``pos`` of block ``block``; (n,) int64
    each."""
    rec = store.records
    one = store.block_records(block)
    if one[1] - one[0] == 1:                     # a block of one record (a chromosome's): no search per hit
        return np.full(pos.size, one[0], np.int64), pos - rec.offsets[one[0]]
    r = rec.locate(pos)
    return r, pos - rec.offsets[r]


def _present(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(values, return_inverse=True)`` for values in a small range (a block's records or regions),
    without a sort: a count per value of the range (2.6 M hits a block made the sort a cost)."""
    lo = int(values.min()) if values.size else 0
    present = np.bincount(values - lo) > 0 if values.size else np.zeros(0, bool)
    index = np.cumsum(present) - 1
    return lo + np.flatnonzero(present), index[values - lo] if values.size else values


def block_folder(store: GenomeStore, index: int) -> str | None:
    """The record a block's file is filed under (its core holds only that record), or None (``packed/``)."""
    i0, i1 = store.block_records(index)
    return store.records.names[i0] if i1 - i0 == 1 else None


def _write_block(ctx: ScanContext, index: int, n: int, hits: BlockHits, stats: dict, windows: np.ndarray) -> None:
    """One block's hits file and counts (if it has hits) and manifest entry; its counts into ``stats``."""
    blk = ctx.store.block(index)
    rel = counts_rel = None
    row_hits = []
    st = stats["stages"]
    if len(hits) and not ctx.write_hits:          # no hits file: the distinct (record, motif) pairs only
        t0 = t1 = t2 = time.perf_counter()
        records = record_positions(ctx.store, index, hits.pos)[0] if ctx.regions is None else None
        at, key = _counted_keys(ctx, hits, records)
        motif = ctx.columns["row_motif"][hits.row if at is None else hits.row[at]]
        grouped = ctx.presence_groups is not None
        counts_rel = write_block_counts(ctx.out, blk.block_id, block_presence(
            key, motif, len(ctx.motif_ids), ctx.presence_groups, ctx.split_records if grouped else None))
        t3 = time.perf_counter()
    elif len(hits):
        t0 = time.perf_counter()
        table, key = hits_table(ctx, index, hits, st)
        meta = dict(ctx.metadata)
        meta["block"] = json.dumps({"index": index, "start": blk.start, "end": blk.core_end})
        t1 = time.perf_counter()
        rel = write_part(ctx.out, block_folder(ctx.store, index), blk.block_id, table, meta, _DICT_COLUMNS,
                         _STATS_COLUMNS, compression=ctx.compression, column_encoding=_ENCODINGS)
        t2 = time.perf_counter()
        counts_rel = _write_counts(ctx, blk.block_id, *_counted_keys(ctx, hits, key),
                                   arrow.to_numpy(table.column("motif_id").chunk(0).indices), hits.row, table)
        t3 = time.perf_counter()
        if ctx.pairs_run is not None:
            stats["kept"] = _keep_pairs(ctx, rel, hits, table) and stats.get("kept", True)
        st["pairs"] += time.perf_counter() - t3
    if len(hits):
        st["table"] += t1 - t0
        st["parquet"] += t2 - t1
        st["counts"] += t3 - t2
        counts = np.bincount(hits.row, minlength=ctx.plan.n_rows)
        stats["row_hits"] = counts if stats["row_hits"] is None else stats["row_hits"] + counts
        nz = np.flatnonzero(counts)
        row_hits = np.column_stack((nz, counts[nz])).tolist()       # Python ints, in C (5x the comprehension)
        if rel is not None:
            stats["files"].append([rel, len(hits)])
    tm = time.perf_counter()
    entry = {"block": blk.block_id, "index": index, "start": blk.start, "end": blk.core_end, "positions": n,
             "hits": len(hits), "file": rel, "counts": counts_rel, "row_hits": row_hits,
             "windows": np.column_stack((ctx.window_lengths, windows)).tolist()}
    write_manifest_entry(ctx.out, blk.block_id, entry)
    st["manifest"] += time.perf_counter() - tm
    stats["windows"] += windows
    stats["blocks"] += 1
    stats["hits"] += len(hits)
    stats["positions"] += n
    stats["block_hits"].append([blk.block_id, len(hits)])


def _keep_pairs(ctx: ScanContext, rel: str, hits: BlockHits, table: pa.Table) -> bool:
    """The block file's (family, p-value) pairs kept in this worker for the run's q-values; False once they no
    longer fit (:mod:`workers.scan.kept_pairs`).  From the block's distinct (row, score) and their counts where the
    scan counted them (``ScanPlan.count_scores``: one p-value each, as the hits' own are computed), else a pair a
    hit."""
    from workers.scan import kept_pairs  # noqa: PLC0415

    if hits.pairs is None and hits.device_pairs is not None:        # made on the GPU, kept there
        return kept_pairs.keep(ctx.pairs_run, rel, *hits.device_pairs, ctx.pairs_budget)
    if hits.pairs is None:
        return kept_pairs.keep(ctx.pairs_run, rel, ctx.row_family[hits.row], arrow.to_numpy(table.column("pvalue")),
                               ctx.pairs_budget)
    row, score, pv, count = hits.pairs
    return kept_pairs.keep(ctx.pairs_run, rel, ctx.row_family[row],
                           pv if pv is not None else ctx.plan.pvalues.lookup(row, score), ctx.pairs_budget, count=count)


def _write_counts(ctx: ScanContext, block_id: str, at: np.ndarray | None, key: np.ndarray, motif: np.ndarray,
                  row: np.ndarray, table: pa.Table) -> str:
    """The block's hits per (record or region, motif) (:mod:`pipeline.scan.region_counts`); ``at, key`` as
    :func:`_counted_keys` gives them."""
    score = arrow.to_numpy(table.column("score"))        # (ChunkedArray.to_numpy would import pandas)
    pvalue = arrow.to_numpy(table.column("pvalue"))
    if at is not None:
        motif, row, score, pvalue = motif[at], row[at], score[at], pvalue[at]
    return write_block_counts(ctx.out, block_id, block_counts(key, motif, row, score, pvalue, len(ctx.motif_ids)))


def group_units(units: list, min_positions: int) -> list:
    """Tasks: one per block, blocks with few window starts (a store's last block, sparse regions) batched up to
    ``min_positions``.  Largest tasks first (stable): submitted in this order, the small ones fill the threads at
    the end instead of leaving a full block to finish alone (longest-processing-time-first scheduling)."""
    groups, cur, size = [], [], 0
    for u, n in zip(units, _positions(units)):
        if n >= min_positions:
            groups.append([u])
            continue
        cur.append(u)
        size += n
        if size >= min_positions:
            groups.append(cur)
            cur, size = [], 0
    if cur:
        groups.append(cur)
    return sorted(groups, key=lambda g: -sum(_positions(g)))
