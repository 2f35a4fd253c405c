"""A scan planned before any cluster starts: every input read and checked, the output folder claimed, the
motifs' thresholds started early (``plan_scan`` → ``ScanJob``); the run's parameters recorded in ``_run.json``."""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from pipeline.engine.dataset import abspath as _abspath
from pipeline.engine.dataset import check_inputs_outside, lock_output, open_run, restore_replaced
from pipeline.io.genome import GenomeStore
from pipeline.io.regions import Piece, Regions
from pipeline.io.schema import HITS_FORMAT_VERSION
from pipeline.scan.motif_set import MotifSet, ScanError, check_like, default_background, row_thresholds
from pipeline.scan.source import is_fasta, open_source, place_store, read_regions, remove_tree


_CODECS = ("zstd", "lz4", "snappy", "gzip", "brotli", "none")


def hits_compression(device: str = "cpu") -> str:
    """The hits files' Parquet codec (``motifgrid.scan.compression``).  ``auto``: snappy on GPU workers, whose
    tasks are bound by the host's Parquet encoding (a human-sized scan at p = 1e-4 on one H100: tasks 15.6-20 s
    with zstd, 12.9 s with lz4, for 20 % more bytes, session 8; snappy, session 12 on an H200: Parquet 43-45 → 36-42
    thread-s and 2 % fewer bytes than lz4, its float columns 25 % faster; docs/benchmarks.md), zstd (the smallest
    files) on CPU workers, whose tasks are bound by the scan itself."""
    import dask.config  # noqa: PLC0415

    c = str(dask.config.get("motifgrid.scan.compression", default="auto")).lower()
    if c == "auto":
        return "snappy" if device == "gpu" else "zstd"
    if c not in _CODECS:
        raise ScanError(f"motifgrid.scan.compression: unknown Parquet codec {c!r}; choose auto or one of "
                        f"{', '.join(_CODECS)}")
    return c


def _run_params(store: GenomeStore, mset: MotifSet, pvalue: float, bg_spec: str, regions: Regions | None) -> dict:
    return {
        "regions": None if regions is None else _abspath(regions.source),
        "regions_checksum": None if regions is None else regions.checksum,
        "hits_format": HITS_FORMAT_VERSION,
        "genome_checksum": store.checksum,
        "block_size": store.block_size,
        "halo": store.halo,
        "motifs_source": mset.source,
        "motifs_checksum": mset.checksum,
        "motifs_select": mset.select,
        "motifs": len(mset.ids),
        "pvalue": pvalue,
        "background": [float(x) for x in mset.background],
        "background_spec": bg_spec,
        "pseudocount": mset.pseudocount,
        "strands": mset.strands,
        "like": mset.like,
    }


def _coord_convention(store: GenomeStore, source: str) -> str:
    """``--parse-genomic-coord``: the convention of the records' ``chrom:start-end`` names
    (:func:`pipeline.scan.genomic_coords.check_names`), checked before anything is scanned."""
    from pipeline.scan.genomic_coords import CoordError, check_names  # noqa: PLC0415

    try:
        return check_names(store.records, source)
    except CoordError as e:
        raise ScanError(str(e)) from None


@dataclass
class ScanJob:
    """A validated scan, ready to run: inputs read and checked, output folder claimed."""
    store: GenomeStore
    mset: MotifSet
    out: str
    pvalue: float
    background_spec: str
    done: set
    t_start: float
    qvalues: bool = True                 # the end-of-run q-value reduction (FIMO's --no-qvalue turns it off)
    max_qvalue: float | None = None      # recorded in _qvalues.parquet; read_hits and export apply it
    regions: Regions | None = None       # --regions: only windows wholly inside these are scanned
    ingested: bool = False               # the store was ingested from a FASTA into HITS/_genome.zarr
    region_counts: bool = True           # _region_counts.parquet at the end (enrich reduces _counts/ itself)
    hits: bool = True                    # False: no hits files, only the blocks' (record, motif) pairs in _counts/
    on_tasks: object = None              # called once the block tasks are submitted (enrich loads its outputs' modules)
    thresholds: object = None            # pipeline.distribution.thresholds.Early: the rows' thresholds started by plan_scan
    presence_groups: np.ndarray | None = None   # (K,) group of each record (hits=False: counts per group, motif)

    @property
    def positions(self) -> int:
        """Window starts the whole run scans (all blocks, finished or not)."""
        if self.regions is None:
            return self.store.packed_length
        s, e = self.regions.merged()
        return int((e - s).sum())

    def units(self) -> list:
        """``(block index, [pieces])`` of every block with windows to scan: whole block cores, or with regions the
        parts of the merged regions inside each core."""
        store = self.store
        if self.regions is None:
            end = store.packed_length
            return [(b.index, [Piece(b.index, b.start, b.core_end, end)]) for b in store.blocks()]
        by_block: dict = {}
        for p in self.regions.pieces(store.block_size):
            by_block.setdefault(p.block, []).append(p)
        return sorted(by_block.items())


def plan_scan(source: str, motifs: str, out: str, pvalue: float = 1e-4, background: str | None = None,
              pseudocount: float = 0.1, resume: bool = False, *, like: str | None = None,
              strands: str = "both", overwrite: bool = False, select=None, motif_format: str | None = None,
              qvalues: bool = True, max_qvalue: float | None = None, regions: str | None = None,
              region_counts: bool = True, hits: bool = True, threshold_threads: int = 0,
              presence_groups: np.ndarray | None = None, parse_genomic_coord: bool = False) -> ScanJob:
    """Read and check every input and claim the output folder, before any cluster is started.

    ``source``: a genome store, or a FASTA file (plain, gzip, bgzip), ingested into ``OUT/_genome.zarr`` (kept
    with the hits: exports read the matched sequences from it, ``--resume`` reuses it).  ``regions``: a BED file
    of regions of the store; only windows lying wholly inside them are scored.  ``background`` None:
    :func:`default_background`.  ``like="fimo"``: FIMO 5.4.1's scores, p-values and hits (:mod:`pipeline.distribution.fimo`);
    ``strands``: "both", "+" or "-".  ``select``: motif ids or names to keep (:func:`pipeline.motifs.select_motifs`);
    ``overwrite`` replaces the hits dataset in ``out``, once everything else is checked.  ``qvalues``: the
    end-of-run q-value reduction (:mod:`pipeline.scan.qvalues`); ``max_qvalue``: recorded, applied where the hits are
    read.  ``region_counts=False``: no ``_region_counts.parquet`` (a caller that reads the blocks' ``_counts/``).
    ``hits=False``: no hits files, only each block's distinct (record, motif) pairs with hits in ``_counts/``
    (:func:`pipeline.scan.region_counts.block_presence`; needs ``qvalues=False`` and ``region_counts=False``).
    ``presence_groups``: with ``hits=False`` and no ``regions``, the group of every record, (K,) int: each block
    writes the count of its own records with hits per (group, motif) instead of their pairs.
    ``threshold_threads``: the motifs' thresholds computed on that many threads of this process, started as soon
    as the motifs are read (before a FASTA's ingest, unless the background is the genome's), while the caller
    goes on to start its cluster (:func:`threshold_plan` takes them from the job); 0: computed by
    :func:`execute_scan` on the cluster."""
    t_start = time.perf_counter()
    _check_settings(pvalue, like, strands, qvalues, max_qvalue)
    if overwrite:
        check_inputs_outside(out, [source, motifs, regions], ScanError)
    if not hits and (qvalues or region_counts):
        raise ScanError("a scan without hits files has no q-values and no region counts: pass qvalues=False, "
                        "region_counts=False")
    if presence_groups is not None and (hits or regions is not None):
        raise ScanError("presence groups count the records of a scan without hits files or regions")
    if background is None:
        background = default_background(like)
    mset = early = None
    if background != "genome":      # the motifs need no store: read first, their thresholds start beside the ingest
        mset = _motif_set(None, motifs, background, pseudocount, select, motif_format, like, strands)
    lock_output(out, ScanError)     # another run writing the folder: refused before anything is claimed
    if mset is not None:
        early = _early_thresholds(mset, pvalue, threshold_threads, table=hits)   # no hits files: no p-values
    try:
        store, staged = open_source(source, out, resume, overwrite, None if mset is None else mset.max_length - 1)
        try:
            groups = _checked_groups(presence_groups, store)
            bed = None if regions is None else read_regions(regions, store)
            if mset is None:
                mset = _motif_set(store, motifs, background, pseudocount, select, motif_format, like, strands)
            _check_halo(store, mset, motifs, source)
            params = _run_params(store, mset, pvalue, background, bed)
            if parse_genomic_coord:          # (in _run.json only when asked: earlier runs resume as they were)
                params["parse_genomic_coord"] = _coord_convention(store, source)
            done = open_run(out, params, resume, kind="scan", error=ScanError, overwrite=overwrite)
            if staged is not None:
                store = place_store(staged, out)
        finally:
            if staged is not None:
                remove_tree(staged.parent)
    except BaseException:
        if early is not None:
            early.cancel()
        restore_replaced(out)                # a dataset --overwrite set aside: back in place
        raise
    return ScanJob(store, mset, out, pvalue, background, done, t_start, qvalues=qvalues, max_qvalue=max_qvalue,
                   regions=bed, ingested=is_fasta(source), region_counts=region_counts, hits=hits,
                   thresholds=early, presence_groups=groups)


def _checked_groups(groups, store: GenomeStore):
    if groups is None:
        return None
    groups = np.asarray(groups)
    if groups.shape != (len(store.records),) or not np.issubdtype(groups.dtype, np.integer) or (groups < 0).any():
        raise ScanError(f"presence groups: one non-negative integer per record of {store.path} "
                        f"({len(store.records)}), not {groups.shape} {groups.dtype}")
    return groups.astype(np.int64)          # the blocks' kernel's type: converted once, not per block


def _early_thresholds(mset: MotifSet, pvalue: float, threads: int, table: bool = True):
    """The rows' thresholds (:func:`row_thresholds`) started on ``threads`` threads of this process, one of them
    left to the caller until it asks for them (:class:`pipeline.distribution.thresholds.Early`); None for ``threads`` 0."""
    if not threads:
        return None
    from pipeline.distribution.thresholds import Early  # noqa: PLC0415

    return Early(lambda pool: row_thresholds(mset, pvalue, client=pool, store_later=True, table=table), threads,
                 beside=1)


def _check_settings(pvalue, like, strands, qvalues, max_qvalue) -> None:
    from pipeline.scan.qvalues import check_max_qvalue  # noqa: PLC0415

    if not (0 < pvalue < 1):
        raise ScanError(f"--pvalue must be in (0, 1), got {pvalue}")
    check_like(like, strands)
    try:
        check_max_qvalue(max_qvalue)
    except ValueError as e:
        raise ScanError(str(e)) from None
    if max_qvalue is not None and not qvalues:
        raise ScanError("--max-qvalue needs the q-values: it cannot be combined with --no-qvalue")
    hits_compression()                  # a bad setting is refused before anything is claimed


def _motif_set(store, motifs, background, pseudocount, select, motif_format, like, strands) -> MotifSet:
    """The motif set under ``background`` (``store``'s composition for "genome"; ``store`` None otherwise)."""
    from pipeline.motifs import read_background  # noqa: PLC0415

    bg = read_background(background, genome_background=None if store is None else store.background)
    return MotifSet.load(motifs, bg, pseudocount, select=select, format=motif_format, like=like, strands=strands)


def _check_halo(store, mset: MotifSet, motifs, source) -> None:
    if mset.max_length - 1 > store.halo:
        longest = mset.ids[int(np.argmax([p.shape[0] for p in mset.pwms]))]
        again = (f"motifgrid ingest {source} STORE --halo {mset.max_length - 1}, then scan STORE" if is_fasta(source)
                 else f"re-ingest with --halo {mset.max_length - 1} or more")
        raise ScanError(f"{source}: halo {store.halo} is shorter than the longest motif ({longest!r} of {motifs}, "
                        f"{mset.max_length} columns) - 1; {again}")
