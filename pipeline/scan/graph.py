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
import pyarrow as pa

from pipeline import MotifgridError, __version__
from pipeline.engine.dataset import Progress, TaskRun, atomic_write_bytes as _atomic_write_bytes
from pipeline.engine.dataset import abspath as _abspath, iter_manifest, table_tsv
from pipeline.engine.dataset import (check_inputs_outside, discard_replaced, lock_output, open_run, release_output,
                              remove_temporaries, restore_replaced, scheduler_lost)
from pipeline.engine.dataset import write_part
from pipeline.io import arrow, storage
from pipeline.io.genome import GenomeStore
from pipeline.io.regions import Piece, Regions
from pipeline.scan.region_counts import StreamingRegionCounts, write_region_counts
from pipeline.scan.task import ScanContext, group_units, scan_task
from pipeline.io.schema import HITS_FORMAT_VERSION, HITS_SCHEMA, MOTIF_SUMMARY_SCHEMA, REGION_HITS_SCHEMA
from workers.distribution import PvalueTable
from workers.scan import make_plan


class ScanError(MotifgridError, RuntimeError):
    """A scan that cannot start or go on; ``str(e)`` is one line for the user."""


# ------------------------------------------------------------------------------------ motif set
_STRAND_ROWS = {"both": (0, 1), "+": (0,), "-": (1,)}


#: what a scan keys by motif id (said when matrices share one): the hits, and so the q-value families
SCAN_KEYED = ("hits carry the id only, so matrices sharing one share their q-values (one Benjamini-Hochberg "
              "family)")


@dataclass
class MotifSet:
    """Motifs read from a source, their PWMs under a background, the strands scanned.

    ``like="fimo"``: the matrices are FIMO's integer-scaled PSSMs (``lattices``, one per motif, forward
    strand) and ``pwms`` their ``q/scale + offset``; ``background`` is the one FIMO uses (:mod:`pipeline.distribution.fimo`).
    """
    source: str
    checksum: str
    ids: list
    names: list
    pwms: list                 # forward (m, 4) float64
    background: np.ndarray
    pseudocount: float
    strands: str = "both"      # "both", "+" or "-"
    like: str | None = None    # None (motifgrid's exact scores) or "fimo"
    lattices: list | None = None   # like="fimo": workers.distribution.fimo_lattice.LatticeMatrix per motif (forward)
    logodds: list | None = None    # motifs given as log-odds only (MEME): scored as written, - strand reversed
    select: list | None = None     # ids/names chosen from the source (--motif), recorded in the provenance

    @classmethod
    def load(cls, source: str, background: np.ndarray, pseudocount: float, select=None,
             format: str | None = None, *, like: str | None = None, strands: str = "both",
             keyed: str = SCAN_KEYED) -> "MotifSet":
        """Read ``source`` (``format`` when neither its name nor content tells it), keep the motifs ``select``
        chooses by id or name (:func:`pipeline.motifs.select_motifs`), and build their PWMs.  ``keyed``: what
        the command keys by motif id, said in a warning when matrices share one."""
        from pipeline.motifs import (motifs_checksum, pwm_from_motif, read_motifs, warn_logodds_only,  # noqa: PLC0415
                                     warn_shared_ids)

        if strands not in _STRAND_ROWS:
            raise ValueError(f"strands must be one of {', '.join(_STRAND_ROWS)}, not {strands!r}")
        if like == "fimo" and strands == "-":
            raise ValueError("FIMO scans both strands or the forward one (--norc): --like fimo takes --strand both or +")
        select = list(select) if select else None
        motifs = read_motifs(source, format=format, select=select)
        warn_shared_ids(source, motifs, keyed)
        lattices = None
        if like == "fimo":
            from pipeline.distribution.fimo import fimo_background, fimo_matrix  # noqa: PLC0415

            background = fimo_background(background, both_strands=strands == "both")
            lattices = [fimo_matrix(m, background, pseudocount) for m in motifs]
            pwms = [lat.pwm for lat in lattices]
        elif like is None:
            pwms = [pwm_from_motif(m, background, pseudocount) for m in motifs]
        else:
            raise ValueError(f"like must be None or 'fimo', not {like!r}")
        warn_logodds_only(source, motifs)
        logodds = [m.kind == "logodds" for m in motifs]
        return cls(source=str(source), checksum=motifs_checksum(source), ids=[m.id for m in motifs],
                   names=[m.name for m in motifs], pwms=pwms, background=np.asarray(background, float),
                   pseudocount=float(pseudocount), strands=strands, like=like, lattices=lattices, select=select,
                   logodds=logodds if any(logodds) else None)

    @property
    def strand_rows(self) -> tuple:
        """The strands scanned: (0, 1), (0,) or (1,) (0 the motif, 1 its reverse complement)."""
        return _STRAND_ROWS[self.strands]

    @property
    def max_length(self) -> int:
        return max((p.shape[0] for p in self.pwms), default=0)

    def subset(self, pick: list) -> "MotifSet":
        """The motifs ``pick`` (indices) of this set, in that order, everything else kept."""
        import dataclasses  # noqa: PLC0415

        def take(values):
            return None if values is None else [values[i] for i in pick]

        return dataclasses.replace(self, ids=take(self.ids), names=take(self.names), pwms=take(self.pwms),
                                   lattices=take(self.lattices), logodds=take(self.logodds),
                                   select=take(self.ids))

    def minus(self, i: int) -> np.ndarray:
        """The ``-`` strand's matrix of motif ``i`` (:func:`pipeline.motifs.minus_strand_pwm`; a log-odds-only
        motif's reverse complement; FIMO's own reverse complement with ``like="fimo"``, whose background is
        strand-symmetric when both strands are scanned)."""
        from pipeline.motifs import minus_strand_pwm, reverse_complement  # noqa: PLC0415

        if self.lattices is not None:
            return self.lattices[i].reverse_complement().pwm
        if self.logodds is not None and self.logodds[i]:
            return reverse_complement(self.pwms[i])
        return minus_strand_pwm(self.pwms[i], self.background)

    def rows(self):
        """(pwms, motif index, strand) for every (motif, strand) row scanned: '+' then '-' per motif
        (one of them with ``strands`` "+" or "-")."""
        pwms, mi, st = [], [], []
        for i, w in enumerate(self.pwms):
            for s in _STRAND_ROWS[self.strands]:
                pwms.append(w if s == 0 else self.minus(i))
                mi.append(i)
                st.append(s)
        return pwms, np.asarray(mi, np.int32), np.asarray(st, np.int8)

    def row_lattices(self) -> list | None:
        """``like="fimo"``: the LatticeMatrix of every row, in ``rows()`` order; else None."""
        if self.lattices is None:
            return None
        return [lat if s == 0 else lat.reverse_complement()
                for lat in self.lattices for s in _STRAND_ROWS[self.strands]]


def threshold_plan(mset: MotifSet, pvalue: float, client=None, store_later: bool = False, early=None,
                   table: bool = True):
    """``(plan, tables, kept rows, unreachable motif ids)``: the scan plan of ``mset``'s rows at their thresholds
    for ``pvalue`` (rows that cannot reach it left out), with the kept rows' score -> p-value tables
    (``plan.pvalues``); ``tables`` the ScoreThreshold of every row (:func:`row_thresholds`, or ``early.result()``
    of the same, started beforehand).  ``table=False``: the thresholds alone and ``plan.pvalues`` None, for a scan
    that looks no p-value up (no hits files)."""
    tables = (early.result() if early is not None else
              row_thresholds(mset, pvalue, client=client, store_later=store_later, table=table))
    pwms, row_motif, row_strand = mset.rows()
    thr = np.array([t.threshold if t.reachable else np.inf for t in tables])
    plan = make_plan(pwms, thr, row_motif, row_strand)
    keep = np.flatnonzero(np.isfinite(thr))
    unreachable = sorted({mset.ids[row_motif[i]] for i in range(len(thr)) if not np.isfinite(thr[i])})
    plan.pvalues = PvalueTable.from_thresholds([tables[i] for i in keep]) if table else None
    return plan, tables, keep, unreachable


def row_thresholds(mset: MotifSet, pvalue: float, client=None, store_later: bool = False, table: bool = True):
    """Per-row ScoreThreshold: forward matrices, and the reverse-complement ones under the same background
    (the complemented background for the motif); computed once when the background is strand-symmetric.
    ``store_later``: new threshold-cache entries are written in the background
    (``pipeline.distribution.thresholds.wait_for_cache_writes``).  ``table=False``: without the score -> p-value tables (the
    same thresholds; the tables were 60 % of the time of JASPAR's 879 vertebrate matrices: docs/benchmarks.md)."""
    return row_thresholds_many(mset, [pvalue], client, store_later=store_later, table=table)[0]


def row_thresholds_many(mset: MotifSet, pvalues, client=None, *, method: str = "exact",
                        table: bool = True, rel_tol: float = 1e-3, device: str = "cpu",
                        store_later: bool = False):
    """``row_thresholds`` at several p-values: ``result[i_pvalue]`` is the per-row list (``rows()`` order).
    ``like="fimo"`` sets: FIMO's lattice tables (:func:`workers.distribution.fimo_lattice.lattice_thresholds`;
    ``method``, ``rel_tol`` and ``table`` do not apply), computed here: one small integer DP per matrix."""
    from pipeline.distribution.thresholds import compute_thresholds_many  # noqa: PLC0415

    bg = mset.background
    if mset.lattices is not None:
        from workers.distribution.fimo_lattice import lattice_thresholds  # noqa: PLC0415

        def compute(mats):
            per = [lattice_thresholds(lat, bg, pvalues) for lat in mats]                  # [matrix][p]
            return [[t[j] for t in per] for j in range(len(pvalues))]

        mats = mset.lattices
    else:
        def compute(mats):
            return compute_thresholds_many(mats, bg, pvalues, client=client, method=method, table=table,
                                           rel_tol=rel_tol, device=device, store_later=store_later)

        mats = mset.pwms
    fwd = compute(mats) if mset.strands != "-" else None
    if mset.strands == "+":
        rev = None
    elif fwd is not None and np.allclose(bg, bg[::-1], rtol=0, atol=1e-15):
        rev = fwd               # a strand-symmetric background: the reverse-complement matrix scores alike
    else:
        rev = compute([lat.reverse_complement() for lat in mats] if mset.lattices is not None else
                      [mset.minus(i) for i in range(len(mats))])
    out = []
    for j in range(len(pvalues)):
        rows = []
        for i in range(len(mset.pwms)):
            rows += [(fwd if s == 0 else rev)[j][i] for s in _STRAND_ROWS[mset.strands]]
        out.append(rows)
    return out


# ------------------------------------------------------------------------------------ settings
_CODECS = ("zstd", "lz4", "snappy", "gzip", "brotli", "none")


def _compression(device: str = "cpu") -> str:
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


# ------------------------------------------------------------------------------------ run
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


def motif_thresholds_table(mset: MotifSet, tables, strands) -> pa.Table:
    """One row per (motif, strand) row of ``mset`` with its ``tables[r]`` (ScoreThreshold at one p-value): what a
    scan's ``_thresholds.parquet``, compare's ``thresholds.parquet`` and ``motifgrid thresholds`` write."""
    from pipeline.distribution.thresholds import thresholds_table  # noqa: PLC0415

    _, mi, _ = mset.rows()
    return thresholds_table([mset.ids[i] for i in mi], [mset.names[i] for i in mi], strands, tables,
                            lengths=[mset.pwms[i].shape[0] for i in mi])


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


def default_background(like: str | None) -> str:
    """The background when none is asked for: FIMO's (MEME's NRDB) with ``like="fimo"``, else
    ``motifgrid.scan.background`` (uniform)."""
    import dask.config  # noqa: PLC0415

    return "nrdb" if like == "fimo" else str(dask.config.get("motifgrid.scan.background", default="uniform"))


def check_like(like: str | None, strands: str) -> None:
    """Refuse a ``like``/``strands`` combination that has no meaning (one line, ScanError)."""
    if strands not in _STRAND_ROWS:
        raise ScanError(f"--strand must be one of {', '.join(_STRAND_ROWS)}, not {strands!r}")
    if like not in (None, "fimo"):
        raise ScanError(f"--like must be fimo, not {like!r}")
    if like == "fimo" and strands == "-":
        raise ScanError("--like fimo scans both strands or, as FIMO's --norc, the forward one: --strand both or +")


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
        store, staged = _open_source(source, out, resume, overwrite, None if mset is None else mset.max_length - 1)
        try:
            groups = _checked_groups(presence_groups, store)
            bed = None if regions is None else _read_regions(regions, store)
            if mset is None:
                mset = _motif_set(store, motifs, background, pseudocount, select, motif_format, like, strands)
            _check_halo(store, mset, motifs, source)
            params = _run_params(store, mset, pvalue, background, bed)
            if parse_genomic_coord:          # (in _run.json only when asked: earlier runs resume as they were)
                params["parse_genomic_coord"] = _coord_convention(store, source)
            done = open_run(out, params, resume, kind="scan", error=ScanError, overwrite=overwrite)
            if staged is not None:
                store = _place_store(staged, out)
        finally:
            if staged is not None:
                _remove_tree(staged.parent)
    except BaseException:
        if early is not None:
            early.cancel()
        restore_replaced(out)                # a dataset --overwrite set aside: back in place
        raise
    return ScanJob(store, mset, out, pvalue, background, done, t_start, qvalues=qvalues, max_qvalue=max_qvalue,
                   regions=bed, ingested=_is_fasta(source), region_counts=region_counts, hits=hits,
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
    _compression()                  # a bad setting is refused before anything is claimed


def _motif_set(store, motifs, background, pseudocount, select, motif_format, like, strands) -> MotifSet:
    """The motif set under ``background`` (``store``'s composition for "genome"; ``store`` None otherwise)."""
    from pipeline.motifs import read_background  # noqa: PLC0415

    bg = read_background(background, genome_background=None if store is None else store.background)
    return MotifSet.load(motifs, bg, pseudocount, select=select, format=motif_format, like=like, strands=strands)


def _check_halo(store, mset: MotifSet, motifs, source) -> None:
    if mset.max_length - 1 > store.halo:
        longest = mset.ids[int(np.argmax([p.shape[0] for p in mset.pwms]))]
        again = (f"motifgrid ingest {source} STORE --halo {mset.max_length - 1}, then scan STORE" if _is_fasta(source)
                 else f"re-ingest with --halo {mset.max_length - 1} or more")
        raise ScanError(f"{source}: halo {store.halo} is shorter than the longest motif ({longest!r} of {motifs}, "
                        f"{mset.max_length} columns) - 1; {again}")


GENOME_IN_HITS = "_genome.zarr"      # where a scan keeps the store of a FASTA it was given


def _is_fasta(source) -> bool:
    return not storage.is_url(source) and os.path.isfile(source)


def _open_source(source: str, out: str, resume: bool, overwrite: bool, halo: int | None = None):
    """(store, staged): a genome store as given; a FASTA ingested into a temporary store beside ``out`` (moved into
    ``out`` by :func:`_place_store` once the output is claimed), or on ``--resume`` the one ``out`` already holds.
    ``halo``: the longest motif's length - 1 where the motifs are known, for a FASTA's store to hold it (its halo is
    the larger of it and the default)."""
    if not _is_fasta(source):
        return GenomeStore(source), None
    from pipeline.engine.dataset import check_output  # noqa: PLC0415
    from pipeline.io.fasta import sniff_fasta  # noqa: PLC0415
    from pipeline.io.genome import DEFAULT_HALO, file_checksum, ingest  # noqa: PLC0415

    try:
        sniff_fasta(source, error=ScanError)
    except ScanError as e:
        raise ScanError(f"{source}: neither a genome store nor a FASTA file ({str(e).split(': ', 1)[-1]})") from None
    check_output(out, resume, "scan", ScanError, overwrite=overwrite)          # refused before any ingest
    kept = storage.join(out, GENOME_IN_HITS)
    if resume and storage.exists(storage.join(kept, "zarr.json")):
        store = GenomeStore(kept)
        if store.checksum != file_checksum(source):
            raise ScanError(f"{source}: changed since the scan in {out} ingested it ({kept}); "
                            "--overwrite to scan it anew")
        return store, None
    import tempfile  # noqa: PLC0415

    parent = os.path.dirname(os.path.abspath(out)) if not storage.is_url(out) else None
    try:
        if parent:
            os.makedirs(parent, exist_ok=True)
            _remove_stale_stores(parent)
        tmp = tempfile.mkdtemp(prefix=f"{_STAGE_PREFIX}{_host_tag()}-{os.getpid()}-", dir=parent)
    except OSError as e:                # named by the user's path, not the staging folder's (/proc/.motifgrid-...)
        raise ScanError(f"--out {out}: cannot write beside it, in {parent or 'the current folder'} "
                        f"({os.strerror(e.errno) if e.errno else e})") from None
    try:
        staged = ingest(source, os.path.join(tmp, GENOME_IN_HITS), block_size=_auto_block_size(source),
                        halo=max(DEFAULT_HALO, halo or 0))
    except OSError as e:
        _remove_tree(tmp)
        if isinstance(e, (FileNotFoundError, PermissionError)) and e.filename and os.path.abspath(
                str(e.filename)) == os.path.abspath(str(source)):
            raise
        raise ScanError(f"--out {out}: cannot write the FASTA's genome store beside it, in {parent} "
                        f"({os.strerror(e.errno) if e.errno else e})") from None
    except BaseException:               # a bad FASTA, or Ctrl-C during the ingest: no temporary store left behind
        _remove_tree(tmp)
        raise
    from pathlib import Path  # noqa: PLC0415

    return staged, Path(staged.path)


_STAGE_PREFIX = ".motifgrid-scan-genome-"


def _remove_tree(path) -> None:
    """``path`` removed, again while it reappears: an ingest interrupted by Ctrl-C or SIGTERM may still have a chunk
    write in flight on zarr's I/O thread, which recreates a folder the first removal emptied (a loaded CI machine
    once kept a temporary store so)."""
    import shutil  # noqa: PLC0415

    for _ in range(40):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            return
        time.sleep(0.05)


def _host_tag() -> str:
    import re  # noqa: PLC0415
    import socket  # noqa: PLC0415

    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:40] or "host"


def _remove_stale_stores(parent: str) -> None:
    """Remove the stores of FASTAs being ingested beside an output (``.motifgrid-scan-genome-HOST-PID-*``) whose
    process on this host is gone: a scan killed with SIGKILL (or a power cut) during its ingest left one, 13-15 MB
    for a million peaks, that nothing else removes.  Other hosts' (a shared file system) are left alone."""
    import shutil  # noqa: PLC0415

    mine = f"{_STAGE_PREFIX}{_host_tag()}-"
    try:
        names = [n for n in os.listdir(parent) if n.startswith(mine)]
    except OSError:
        return
    for name in names:
        pid = name[len(mine):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)            # no error: alive, its ingest may be running
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except OSError:
            pass                            # alive, not ours to signal


def _place_store(staged, out: str) -> GenomeStore:
    """Move (or upload) the store of a FASTA into the claimed output folder."""
    from pipeline.io.genome import upload_store  # noqa: PLC0415

    dest = storage.join(out, GENOME_IN_HITS)
    if storage.is_url(out):
        upload_store(staged, dest)
    else:
        os.replace(staged, dest)
    return GenomeStore(dest)


def _auto_block_size(fasta: str) -> int:
    """Block size for a FASTA scanned directly (:func:`block_size_for` its estimated bases)."""
    return block_size_for(os.path.getsize(fasta) * (4 if open(fasta, "rb").read(2) == b"\x1f\x8b" else 1))


def block_size_for(bases: int) -> int:
    """Block size of a store made to be scanned at once: the default for genomes; for small inputs (a few hundred
    peaks) blocks small enough that every core gets work, at least 64 Ki positions (a block has a fixed cost)."""
    from pipeline.io.genome import DEFAULT_BLOCK_SIZE  # noqa: PLC0415

    per_core = int(bases) // (2 * (os.cpu_count() or 1))
    size = 1 << 16
    while size < per_core and size < DEFAULT_BLOCK_SIZE:
        size <<= 1
    return size


def _read_regions(path: str, store: GenomeStore) -> Regions:
    from pipeline.io.genome import file_checksum  # noqa: PLC0415
    from pipeline.io.regions import read_bed  # noqa: PLC0415

    bed = read_bed(path, store.records)
    bed.checksum = file_checksum(path)
    return bed


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
    import dask.config  # noqa: PLC0415

    store, mset, out, pvalue, done, t_start = job.store, job.mset, job.out, job.pvalue, job.done, job.t_start
    t_thr0 = time.perf_counter()
    all_units = job.units()
    todo = [u for u in all_units if store.block(u[0]).block_id not in done]
    groups = group_units(todo, _min_task_positions(client, todo))
    reserving = _reserve_pinned(client, device, pvalue, len(mset.pwms) * len(mset.strand_rows), groups)  # beside the thresholds
    plan, tables, keep, unreachable = threshold_plan(mset, pvalue, client, store_later=True,  # cache: written later
                                                     early=job.thresholds, table=job.hits)
    t_plan = time.perf_counter()
    row_strand = mset.rows()[2]
    lats = mset.row_lattices()
    lattice = None if lats is None else (np.array([lats[i].scale for i in keep], np.float64),
                                         np.array([lats[i].base for i in keep], np.float64))
    lengths = np.array([w.shape[0] for w in mset.pwms], dtype=np.int64)
    ctx = ScanContext(store=store, plan=plan, motif_ids=mset.ids,
                      motif_names=mset.names, out=_abspath(out), metadata=_hits_metadata(job, command, device),
                      device=device, compression=_compression(device), lattice=lattice, window_lengths=np.unique(lengths),
                      regions=job.regions, write_hits=job.hits, presence_groups=job.presence_groups,
                      **_kept_pairs_settings(job, client, plan, pub.scan_id, device))
    plan.count_scores = _count_scores(ctx, device)
    plan.pair_families = ctx.row_family if device == "gpu" and ctx.pairs_run is not None and bool(
        dask.config.get("motifgrid.qvalues.pairs-on-device", default=True)) else None

    total_rows = plan.n_rows
    col_per_pos = int(plan.lengths.sum())

    t_thresholds = time.perf_counter() - t_thr0
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
    tally = _Tally(plan.n_rows, len(ctx.window_lengths), keeps_pairs=ctx.pairs_run is not None)
    stats, stages = tally.stats, tally.stages
    t_first = None
    # blocks keyed by record are merged into _region_counts.parquet as they finish; regions (which may overlap) at
    # the end
    streaming = StreamingRegionCounts(out, [store.block(b).block_id for b, _ in all_units], done, store.records,
                                      mset.ids, mset.names) if job.region_counts and job.regions is None else None
    try:
        with Progress(console, len(todo), progress and len(run) > 0) as bar:
            # the temporaries of killed writers are swept at the end of the run, not by the task runner: the
            # streamed region counts keep a temporary file open until then
            for res in run.results(lambda exc: ScanError(_failure_message(exc, out)), None):
                t_first = t_first or time.perf_counter()
                tally.add(res)
                if streaming is not None:
                    streaming.finished(res["block_ids"])
                bar.update(res["blocks"], stats["hits"])
                pub.task_done(res)
    except BaseException:
        _drop_kept_pairs(client, ctx.pairs_run)     # the pairs of a failed run: freed now
        if streaming is not None:
            streaming.cancel()
        raise
    del reserving
    from pipeline.distribution.thresholds import wait_for_cache_writes  # noqa: PLC0415

    wait_for_cache_writes()
    t_tasks_wall = time.perf_counter() - t_tasks0
    # totals over every finished block: this run's from its tasks, earlier runs' from their manifest entries
    # (reading every entry back cost ~2 s for 26,454 promoter blocks)
    total_hits, row_hits_all = _totals(earlier, tally.row_hits, stats["hits"])
    windows = _motif_windows(earlier, ctx.window_lengths, tally.windows, lengths)
    tests = windows * len(_STRAND_ROWS[mset.strands])        # each strand scanned tests every window
    # the two end-of-run reductions side by side: the q-values as tasks, the region counts here (Parquet
    # reading and writing, mostly without the GIL)
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    with ThreadPoolExecutor(1, thread_name_prefix="region-counts") as pool:
        counted = pool.submit(_region_counts_step, job, out, store, mset, streaming) if job.region_counts else None
        try:
            qsum = _qvalue_step(job, client, earlier, tally.files, tests, plan, row_hits_all, device,
                                tally.kept, ctx.pairs_run, tally.kept_lost)
        finally:
            _drop_kept_pairs(client, ctx.pairs_run)
        t_region_counts = counted.result() if counted is not None else 0.0
    t_reduced = time.perf_counter()
    if job.hits and total_hits == 0:
        _write_empty_hits(ctx)
    remove_temporaries(out)
    seconds = time.perf_counter() - t_start
    positions = sum(bases.values())
    summary = {
        "blocks": len(all_units), "blocks_this_run": stats["blocks"], "hits": int(total_hits),
        "seconds": seconds, "positions": positions, "unreachable_motifs": unreachable,
        "scores": positions * total_rows, "column_scores": positions * col_per_pos, "device": device,
        "seconds_thresholds": t_thresholds, "seconds_tasks_wall": t_tasks_wall,
        "task_seconds_scan": stats["seconds_scan"], "task_seconds_io": stats["seconds_io"],
        "task_seconds_total": stats["seconds_task"], "task_seconds_by_step": stages,
        "seconds_region_counts": t_region_counts,
        "scan_id": pub.scan_id, "tests": int(tests.sum()), "qvalues": qsum, "first_tasks": tally.first,
        # wall-clock seconds from the thresholds' start: where a run's critical path goes (docs/benchmarks.md)
        "phases": {k: round(v - t_thr0, 4) for k, v in (("plan", t_plan), ("thresholds", t_tasks0),
                                                         ("scattered", run.t_scattered), ("submitted", t_submitted),
                                                         ("first_result", t_first or t_submitted),
                                                         ("tasks", t_tasks0 + t_tasks_wall), ("reduced", t_reduced))},
    }
    try:
        _write_summaries(out, mset, tables, row_strand, plan, row_hits_all, summary, windows)
    except OSError as e:
        raise ScanError(_failure_message(e, out)) from None
    pub.finished(summary)
    return ScanResult(out=out, blocks=len(all_units), blocks_skipped=len(all_units) - len(todo), hits=int(total_hits),
                      seconds=seconds, positions=stats["positions"], scores=stats["positions"] * total_rows,
                      column_scores=stats["positions"] * col_per_pos, unreachable=unreachable, device=device,
                      workers=len(client.scheduler_info().get("workers", {})), qvalues=qsum,
                      hits_this_run=stats["hits"])


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
    return [client.submit(_reserve_pinned_task, per_thread, pure=False, workers=[w], allow_other_workers=False,
                          key=f"reserve-pinned-{uuid.uuid4().hex[:8]}") for w in where]


def reserve_workers(nthreads: dict, mode) -> list:
    """The workers (of ``{address: threads}``) that make their pinned buffers ahead under ``reserve-pinned: mode``
    (true, false or auto)."""
    mode = str(mode).lower()
    if mode not in ("true", "1", "yes", "auto"):
        return []
    least = RESERVE_MIN_THREADS if mode == "auto" else 0
    return [w for w, n in nthreads.items() if n >= least]


def _reserve_pinned_task(sizes: list) -> float:
    from distributed import get_worker  # noqa: PLC0415

    from workers.scan.gpu import reserve_pinned  # noqa: PLC0415

    try:
        return reserve_pinned(sizes, get_worker().state.nthreads)
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
                             "windows": windows, "tests": windows * len(_STRAND_ROWS[mset.strands])},
                            schema=MOTIF_SUMMARY_SCHEMA)
    storage.write_parquet(per_motif, storage.join(out, "_motif_summary.parquet"))
    _atomic_write_bytes(storage.join(out, "_motif_summary.tsv"), motif_summary_tsv(per_motif))
    _atomic_write_bytes(storage.join(out, "_summary.json"), json.dumps(summary, indent=1).encode())


def rank_motifs(table: pa.Table) -> pa.Table:
    """The per-motif table (``_motif_summary.parquet``) by hits, most first; ties keep the motif file's order.
    Reordered in Python (a row per motif): ``Table.take`` imports ``pyarrow.compute``, 0.09 s of a 300-peak scan."""
    order = np.argsort(-arrow.to_numpy(table.column("hits")).astype(np.int64), kind="stable").tolist()
    columns = {}
    for name in table.column_names:
        values = table.column(name).to_pylist()
        columns[name] = [values[i] for i in order]
    return arrow.table(columns, schema=table.schema)


def motif_summary_tsv(table: pa.Table) -> bytes:
    """``HITS/_motif_summary.tsv``: every motif (id, name, hits on each strand, reachable, windows, tests), most
    hits first."""
    return table_tsv(rank_motifs(table))


def run_file(out: str) -> dict:
    """The dataset's ``_run.json`` ({} where it has none or cannot be read as JSON)."""
    try:
        return json.loads(storage.read_bytes(storage.join(out, "_run.json")))
    except (FileNotFoundError, ValueError):
        return {}


def hits_schema(out: str, params: dict | None = None) -> pa.Schema:
    """The schema of a hits dataset's files (with ``region`` when it is a scan of BED regions); ``params``: its
    ``_run.json`` where already read."""
    return REGION_HITS_SCHEMA if (run_file(out) if params is None else params).get("regions") else HITS_SCHEMA


def genomic_convention(out: str) -> str | None:
    """The record names' convention when the scan of ``out`` ran with ``--parse-genomic-coord``
    (:mod:`pipeline.scan.genomic_coords`), else None."""
    return run_file(out).get("parse_genomic_coord")


def read_hits(out: str, columns=None, filter=None, max_qvalue: float | None = None) -> pa.Table:
    """Read a hits dataset (small ones; large ones are streamed file by file, as :mod:`pipeline.scan.export` does).

    ``columns``: of :data:`pipeline.io.schema.HITS_READ_SCHEMA` (default all; ``region`` too for a scan of BED
    regions): the files' columns and ``qvalue``,
    joined per (motif_id, p-value) from ``HITS/_qvalues.parquet`` (null when the dataset has none: scanned
    with ``--no-qvalue`` or unfinished).  ``filter``: a pyarrow expression on the files' columns.
    ``max_qvalue``: only hits with q <= it; by default the scan's ``--max-qvalue`` when it was given
    (``max_qvalue=1`` reads every hit).  A scan with ``--parse-genomic-coord`` reads in genome coordinates, the
    record's name in ``record`` after ``chrom`` (:func:`pipeline.scan.genomic_coords.to_genome`)."""
    params = run_file(out)
    schema = hits_schema(out, params)
    want = list(schema.names) + ["qvalue"] if columns is None else list(columns)
    convention = params.get("parse_genomic_coord")
    if convention is None:
        return _read_files(out, schema, want, filter, max_qvalue)
    from pipeline.scan.genomic_coords import to_genome  # noqa: PLC0415

    if columns is None:
        want.insert(want.index("chrom") + 1, "record")
    files_cols = [c for c in dict.fromkeys(want + ["chrom", "start", "end", "strand"]) if c != "record"]
    return to_genome(_read_files(out, schema, files_cols, filter, max_qvalue), convention).select(want)


def _read_files(out: str, schema: pa.Schema, want: list, filter, max_qvalue) -> pa.Table:
    """:func:`read_hits`' columns ``want`` of the files (and the joined ``qvalue``), in record coordinates."""
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.dataset as ds  # noqa: PLC0415

    from pipeline.scan.qvalues import add_qvalues, map_and_limit  # noqa: PLC0415

    fs, path = storage.arrow_source(out)
    d = ds.dataset(path, filesystem=fs, format="parquet", schema=schema)
    try:
        qmap, limit = map_and_limit(out, max_qvalue)      # the map is small: one row per q-value step
    except ValueError as e:
        raise ScanError(str(e)) from None
    if "qvalue" not in want and limit is None:
        return d.to_table(columns=want, filter=filter)
    if limit is not None:                    # q <= Q is p <= the motif's cutoff: never above the largest cutoff
        top = float(qmap.cutoffs(limit).max(initial=-1.0))
        cut = pc.field("pvalue") <= top
        filter = cut if filter is None else (filter & cut)
    base = [c for c in want if c != "qvalue"]
    t = d.to_table(columns=list(dict.fromkeys(base + ["motif_id", "pvalue"])), filter=filter)
    t = add_qvalues(t, qmap, limit)
    return t.select(want)
