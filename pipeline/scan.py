"""The scan graph: genome store (or FASTA, or BED regions of a store) × motif set → Parquet hits, a file per block.

One task per block (blocks with few windows to scan batched), each run by a worker that reads its block
from the Zarr store, scans it on its device and writes the block's hits itself, atomically, with the
provenance as key-value metadata (:mod:`pipeline.scan_task`).  A manifest entry per finished block
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
    HITS/_motif_summary.parquet     hits per motif (and .tsv, most hits first)
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
from pipeline.dataset import Progress as _progress, atomic_write_bytes as _atomic_write_bytes
from pipeline.dataset import abspath as _abspath, iter_manifest, remove_temporaries
from pipeline.dataset import prepare_output as _prepare_output
from pipeline import arrow, storage
from pipeline.genome import GenomeStore
from pipeline.regions import Piece, Regions
from pipeline.scan_task import ScanContext, group_units, scan_task
from pipeline.schema import HITS_FORMAT_VERSION, HITS_SCHEMA, MOTIF_SUMMARY_SCHEMA, REGION_HITS_SCHEMA
from workers.pvalue_table import PvalueTable
from workers.scan import make_plan


class ScanError(MotifgridError, RuntimeError):
    """A scan that cannot start or go on; ``str(e)`` is one line for the user."""


# ------------------------------------------------------------------------------------ motif set
_STRAND_ROWS = {"both": (0, 1), "+": (0,), "-": (1,)}


@dataclass
class MotifSet:
    """Motifs read from a source, their PWMs under a background, the strands scanned.

    ``like="fimo"``: the matrices are FIMO's integer-scaled PSSMs (``lattices``, one per motif, forward
    strand) and ``pwms`` their ``q/scale + offset``; ``background`` is the one FIMO uses (:mod:`pipeline.fimo`).
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
    lattices: list | None = None   # like="fimo": workers.fimo_lattice.LatticeMatrix per motif (forward)
    select: list | None = None     # ids/names chosen from the source (--motif), recorded in the provenance

    @classmethod
    def load(cls, source: str, background: np.ndarray, pseudocount: float, select=None,
             format: str | None = None, *, like: str | None = None, strands: str = "both") -> "MotifSet":
        """Read ``source`` (``format`` when neither its name nor content tells it), keep the motifs ``select``
        chooses by id or name (:func:`pipeline.motifs.select_motifs`), and build their PWMs."""
        from pipeline.motifs import motifs_checksum, pwm_from_motif, read_motifs  # noqa: PLC0415

        if strands not in _STRAND_ROWS:
            raise ValueError(f"strands must be one of {', '.join(_STRAND_ROWS)}, not {strands!r}")
        if like == "fimo" and strands == "-":
            raise ValueError("FIMO scans both strands or the forward one (--norc): --like fimo takes --strand both or +")
        select = list(select) if select else None
        motifs = read_motifs(source, format=format, select=select)
        lattices = None
        if like == "fimo":
            from pipeline.fimo import fimo_background, fimo_matrix  # noqa: PLC0415

            background = fimo_background(background, both_strands=strands == "both")
            lattices = [fimo_matrix(m, background, pseudocount) for m in motifs]
            pwms = [lat.pwm for lat in lattices]
        elif like is None:
            pwms = [pwm_from_motif(m, background, pseudocount) for m in motifs]
        else:
            raise ValueError(f"like must be None or 'fimo', not {like!r}")
        return cls(source=str(source), checksum=motifs_checksum(source), ids=[m.id for m in motifs],
                   names=[m.name for m in motifs], pwms=pwms, background=np.asarray(background, float),
                   pseudocount=float(pseudocount), strands=strands, like=like, lattices=lattices, select=select)

    @property
    def max_length(self) -> int:
        return max((p.shape[0] for p in self.pwms), default=0)

    def rows(self):
        """(pwms, motif index, strand) for every (motif, strand) row scanned: '+' then '-' per motif
        (one of them with ``strands`` "+" or "-")."""
        from pipeline.motifs import reverse_complement  # noqa: PLC0415

        pwms, mi, st = [], [], []
        for i, w in enumerate(self.pwms):
            for s in _STRAND_ROWS[self.strands]:
                pwms.append(w if s == 0 else reverse_complement(w))
                mi.append(i)
                st.append(s)
        return pwms, np.asarray(mi, np.int32), np.asarray(st, np.int8)

    def row_lattices(self) -> list | None:
        """``like="fimo"``: the LatticeMatrix of every row, in ``rows()`` order; else None."""
        if self.lattices is None:
            return None
        return [lat if s == 0 else lat.reverse_complement()
                for lat in self.lattices for s in _STRAND_ROWS[self.strands]]


def row_thresholds(mset: MotifSet, pvalue: float, client=None, store_later: bool = False):
    """Per-row ScoreThreshold: forward matrices, and the reverse-complement ones under the same background
    (the complemented background for the motif); computed once when the background is strand-symmetric.
    ``store_later``: new threshold-cache entries are written in the background
    (``pipeline.thresholds.wait_for_cache_writes``)."""
    return row_thresholds_many(mset, [pvalue], client, store_later=store_later)[0]


def row_thresholds_many(mset: MotifSet, pvalues, client=None, *, method: str = "exact",
                        table: bool = True, rel_tol: float = 1e-3, device: str = "cpu",
                        store_later: bool = False):
    """``row_thresholds`` at several p-values: ``result[i_pvalue]`` is the per-row list (``rows()`` order).
    ``like="fimo"`` sets: FIMO's lattice tables (:func:`workers.fimo_lattice.lattice_thresholds`; ``method``,
    ``rel_tol`` and ``table`` do not apply), computed here: one small integer DP per matrix."""
    from pipeline.motifs import reverse_complement  # noqa: PLC0415
    from pipeline.thresholds import compute_thresholds_many  # noqa: PLC0415

    bg = mset.background
    if mset.lattices is not None:
        from workers.fimo_lattice import lattice_thresholds  # noqa: PLC0415

        def compute(mats):
            per = [lattice_thresholds(lat, bg, pvalues) for lat in mats]                  # [matrix][p]
            return [[t[j] for t in per] for j in range(len(pvalues))]

        mats, rc = mset.lattices, (lambda lat: lat.reverse_complement())
    else:
        def compute(mats):
            return compute_thresholds_many(mats, bg, pvalues, client=client, method=method, table=table,
                                           rel_tol=rel_tol, device=device, store_later=store_later)

        mats, rc = mset.pwms, reverse_complement
    fwd = compute(mats) if mset.strands != "-" else None
    if mset.strands == "+":
        rev = None
    elif fwd is not None and np.allclose(bg, bg[::-1], rtol=0, atol=1e-15):
        rev = fwd               # a strand-symmetric background: the reverse-complement matrix scores alike
    else:
        rev = compute([rc(x) for x in mats])
    out = []
    for j in range(len(pvalues)):
        rows = []
        for i in range(len(mset.pwms)):
            rows += [(fwd if s == 0 else rev)[j][i] for s in _STRAND_ROWS[mset.strands]]
        out.append(rows)
    return out


# ------------------------------------------------------------------------------------ settings
_CODECS = ("zstd", "lz4", "snappy", "gzip", "brotli", "none")


def _compression() -> str:
    import dask.config  # noqa: PLC0415

    c = str(dask.config.get("motifgrid.scan.compression", default="zstd")).lower()
    if c not in _CODECS:
        raise ScanError(f"motifgrid.scan.compression: unknown Parquet codec {c!r}; choose one of {', '.join(_CODECS)}")
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


def prepare_output(out: str, params: dict, resume: bool, overwrite: bool = False) -> set:
    """Create or check the output folder (``overwrite``: replace the hits dataset there); return the ids of
    blocks already finished."""
    return _prepare_output(out, params, resume, kind="scan", error=ScanError, overwrite=overwrite)


def _thresholds_table(mset: MotifSet, tables, strands) -> pa.Table:
    from pipeline.thresholds import thresholds_table  # noqa: PLC0415

    _, mi, _ = mset.rows()
    return thresholds_table([mset.ids[i] for i in mi], [mset.names[i] for i in mi], strands, tables,
                            lengths=[mset.pwms[i].shape[0] for i in mi])


@dataclass
class ScanResult:
    out: str
    blocks: int
    blocks_skipped: int
    hits: int
    seconds: float
    positions: int
    scores: int              # window scores computed: positions × (motif, strand) rows
    column_scores: int       # positions × motif columns × strands
    unreachable: list
    device: str
    workers: int


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
    regions: Regions | None = None
    ingested: bool = False           # the store was ingested from a FASTA into HITS/_genome.zarr by this scan

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
              regions: str | None = None) -> ScanJob:
    """Read and check every input and claim the output folder, before any cluster is started.

    ``source``: a genome store, or a FASTA file (plain, gzip, bgzip), ingested into ``OUT/_genome.zarr`` (kept
    with the hits: exports read the matched sequences from it, ``--resume`` reuses it).  ``regions``: a BED file
    of regions of the store; only windows lying wholly inside them are scored.  ``background`` None:
    :func:`default_background`.  ``like="fimo"``: FIMO 5.4.1's scores, p-values and hits (:mod:`pipeline.fimo`);
    ``strands``: "both", "+" or "-".  ``select``: motif ids or names to keep (:func:`pipeline.motifs.select_motifs`);
    ``overwrite`` replaces the hits dataset in ``out``, once everything else is checked."""
    from pipeline.motifs import read_background  # noqa: PLC0415

    t_start = time.perf_counter()
    if not (0 < pvalue < 1):
        raise ScanError(f"--pvalue must be in (0, 1), got {pvalue}")
    check_like(like, strands)
    _compression()                  # a bad setting is refused before anything is claimed
    if background is None:
        background = default_background(like)
    store, staged = _open_source(source, out, resume, overwrite)
    try:
        bed = None if regions is None else _read_regions(regions, store)
        bg = read_background(background, genome_background=store.background)
        mset = MotifSet.load(motifs, bg, pseudocount, select=select, format=motif_format, like=like, strands=strands)
        if mset.max_length - 1 > store.halo:
            longest = mset.ids[int(np.argmax([p.shape[0] for p in mset.pwms]))]
            raise ScanError(f"{source}: halo {store.halo} is shorter than the longest motif ({longest!r} of {motifs}, "
                            f"{mset.max_length} columns) - 1; re-ingest with --halo {mset.max_length - 1} or more")
        params = _run_params(store, mset, pvalue, background, bed)
        done = prepare_output(out, params, resume, overwrite)
        if staged is not None:
            store = _place_store(staged, out)
    finally:
        if staged is not None:
            import shutil  # noqa: PLC0415

            shutil.rmtree(staged.parent, ignore_errors=True)
    return ScanJob(store, mset, out, pvalue, background, done, t_start, regions=bed, ingested=staged is not None
                   or _is_fasta(source))


GENOME_IN_HITS = "_genome.zarr"      # where a scan keeps the store of a FASTA it was given


def _is_fasta(source) -> bool:
    return not storage.is_url(source) and os.path.isfile(source)


def _open_source(source: str, out: str, resume: bool, overwrite: bool):
    """(store, staged): a genome store as given; a FASTA ingested into a temporary store beside ``out`` (moved into
    ``out`` by :func:`_place_store` once the output is claimed), or on ``--resume`` the one ``out`` already holds."""
    if not _is_fasta(source):
        return GenomeStore(source), None
    from pipeline.dataset import check_output  # noqa: PLC0415
    from pipeline.fasta import sniff_fasta  # noqa: PLC0415
    from pipeline.genome import GenomeError, file_checksum, ingest  # noqa: PLC0415

    sniff_fasta(source, error=ScanError)
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
    if parent:
        os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".motifgrid-scan-genome-", dir=parent)
    try:
        staged = ingest(source, os.path.join(tmp, GENOME_IN_HITS), block_size=_auto_block_size(source))
    except GenomeError:
        import shutil  # noqa: PLC0415

        shutil.rmtree(tmp, ignore_errors=True)
        raise
    from pathlib import Path  # noqa: PLC0415

    return staged, Path(staged.path)


def _place_store(staged, out: str) -> GenomeStore:
    """Move (or upload) the store of a FASTA into the claimed output folder."""
    from pipeline.genome import _upload_store  # noqa: PLC0415

    dest = storage.join(out, GENOME_IN_HITS)
    if storage.is_url(out):
        _upload_store(staged, dest)
    else:
        os.replace(staged, dest)
    return GenomeStore(dest)


def _auto_block_size(fasta: str) -> int:
    """Block size for a FASTA scanned directly: the default for genomes; for small inputs (a few hundred peaks)
    blocks small enough that every core gets work, at least 64 Ki positions (a block has a fixed cost)."""
    from pipeline.genome import DEFAULT_BLOCK_SIZE  # noqa: PLC0415

    est = os.path.getsize(fasta) * (4 if open(fasta, "rb").read(2) == b"\x1f\x8b" else 1)
    per_core = est // (2 * (os.cpu_count() or 1))
    size = 1 << 16
    while size < per_core and size < DEFAULT_BLOCK_SIZE:
        size <<= 1
    return size


def _read_regions(path: str, store: GenomeStore) -> Regions:
    from pipeline.genome import file_checksum  # noqa: PLC0415
    from pipeline.regions import read_bed  # noqa: PLC0415

    bed = read_bed(path, store.records)
    bed.checksum = file_checksum(path)
    return bed


def run_scan(source: str, motifs: str, out: str, pvalue: float = 1e-4, background: str | None = None,
             pseudocount: float = 0.1, client=None, device: str = "cpu", resume: bool = False,
             progress: bool = True, command: str | None = None, console=None, *, like: str | None = None,
             strands: str = "both", overwrite: bool = False, select=None, motif_format: str | None = None,
             regions: str | None = None) -> ScanResult:
    """Run a whole scan on ``client`` (a ``distributed.Client``) and return its summary."""
    job = plan_scan(source, motifs, out, pvalue, background, pseudocount, resume, like=like, strands=strands,
                    overwrite=overwrite, select=select, motif_format=motif_format, regions=regions)
    return execute_scan(job, client, device=device, progress=progress, command=command, console=console)


def execute_scan(job: ScanJob, client, device: str = "cpu", progress: bool = True, command: str | None = None,
                 console=None) -> ScanResult:
    """Thresholds, then one task per block on ``client``; summaries at the end.  The progress is
    published on the scheduler as it goes (:mod:`pipeline.progress`), for any client to follow."""
    from pipeline.progress import ScanProgress  # noqa: PLC0415

    command = command or " ".join(shlex.quote(a) for a in sys.argv)
    pub = ScanProgress(client, job, device=device, command=command)
    try:
        res = _execute_scan(job, client, device, progress, command, console, pub)
    except BaseException as e:
        pub.failed(e)
        raise
    return res


def _execute_scan(job: ScanJob, client, device, progress, command, console, pub) -> ScanResult:
    from distributed import as_completed  # noqa: PLC0415

    import dask.config  # noqa: PLC0415

    store, mset, out, pvalue, done, t_start = job.store, job.mset, job.out, job.pvalue, job.done, job.t_start
    bg, pseudocount = mset.background, mset.pseudocount
    t_thr0 = time.perf_counter()
    tables = row_thresholds(mset, pvalue, client=client, store_later=True)   # cache written while blocks scan
    pwms, row_motif, row_strand = mset.rows()
    thr = np.array([t.threshold if t.reachable else np.inf for t in tables])
    plan = make_plan(pwms, thr, row_motif, row_strand)
    keep = np.flatnonzero(np.isfinite(thr))
    unreachable = sorted({mset.ids[row_motif[i]] for i in range(len(thr)) if not np.isfinite(thr[i])})
    meta = {
        "motifgrid.version": __version__,
        "motifgrid.hits_format": str(HITS_FORMAT_VERSION),
        "motifgrid.command": command,
        "genome.path": _abspath(store.path),
        "genome.checksum": store.checksum,
        "genome.block_size": str(store.block_size),
        "genome.halo": str(store.halo),
        "motifs.source": mset.source,
        "motifs.checksum": mset.checksum,
        "motifs.select": json.dumps(mset.select),
        "motifs.count": str(len(mset.ids)),
        "background": json.dumps([float(x) for x in bg]),
        "pseudocount": repr(pseudocount),
        "pvalue": repr(pvalue),
        "strands": mset.strands,
        "like": mset.like or "",
        "device": device,
    }
    plan.pvalues = PvalueTable.from_thresholds([tables[i] for i in keep])
    lats = mset.row_lattices()
    lattice = None if lats is None else (np.array([lats[i].scale for i in keep], np.float64),
                                         np.array([lats[i].base for i in keep], np.float64))
    ctx = ScanContext(store=store, plan=plan, motif_ids=mset.ids,
                      motif_names=mset.names, out=_abspath(out), metadata=meta, device=device,
                      compression=_compression(), lattice=lattice, regions=job.regions)

    all_units = job.units()
    todo = [u for u in all_units if f"b{u[0]:07d}" not in done]
    min_pos = int(dask.config.get("motifgrid.scan.min-task-positions"))
    groups = group_units(todo, min_pos)
    total_rows = plan.n_rows
    col_per_pos = int(plan.lengths.sum())

    stats = {"blocks": 0, "hits": 0, "positions": 0, "seconds_scan": 0.0, "seconds_io": 0.0, "seconds_task": 0.0}
    t_thresholds = time.perf_counter() - t_thr0
    t_tasks0 = time.perf_counter()
    futures = {}
    if groups:
        ctx_f = client.scatter(ctx, broadcast=True, hash=False)
        for g in groups:
            f = client.submit(scan_task, ctx_f, g, pure=False, key=f"scan-b{g[0][0]:07d}-{uuid.uuid4().hex[:6]}")
            futures[f.key] = f
    # published after the tasks are submitted: whoever sees "running" finds them on the scheduler
    # the blocks this run skips are those of ``done``: a task of an interrupted client may still finish a block
    # (its manifest entry appears now) that this run has just resubmitted and will count itself
    earlier = [e for e in iter_manifest(out, "block") if e["block"] in done] if done else []
    pub.running(plan, [store.block(b) for b, _ in all_units], [store.block(b) for b, _ in todo], earlier)
    row_hits_run = np.zeros(plan.n_rows, np.int64)
    if futures:
        bar = _progress(console, len(todo), progress)
        try:
            for fut, res in as_completed(list(futures.values()), with_results=True, raise_errors=False):
                if fut.status == "error":
                    exc = fut.exception()
                    for f in futures.values():
                        f.cancel()
                    raise ScanError(_failure_message(exc, out)) from None
                # its blocks are on disk: let the scheduler forget the task, so that a worker lost later
                # does not make it recompute (and rewrite) finished blocks
                futures.pop(fut.key).release()
                for k in ("blocks", "hits", "positions", "seconds_scan", "seconds_io", "seconds_task"):
                    stats[k] += res[k]
                if res["row_hits"] is not None:
                    row_hits_run += res["row_hits"]
                bar.update(res["blocks"], stats["hits"])
                pub.task_done(res)
        finally:
            bar.close()
        remove_temporaries(out)       # left by a worker killed mid-write (its task ran again elsewhere)
    from pipeline.thresholds import wait_for_cache_writes  # noqa: PLC0415

    wait_for_cache_writes()
    # totals over every finished block: this run's from its tasks, earlier runs' from their manifest entries
    # (reading every entry back cost ~2 s for 26,454 promoter blocks)
    total_hits, row_hits_all = _totals(earlier, row_hits_run, stats["hits"])
    positions = sum(p.hi - p.lo for _, pieces in all_units for p in pieces)
    try:
        _write_region_counts(out, store, job.regions, mset)
    except OSError as e:
        raise ScanError(_failure_message(e, out)) from None
    seconds = time.perf_counter() - t_start
    summary = {
        "blocks": len(all_units), "blocks_this_run": stats["blocks"], "hits": int(total_hits),
        "seconds": seconds, "positions": positions, "unreachable_motifs": unreachable,
        "scores": positions * total_rows, "column_scores": positions * col_per_pos, "device": device,
        "seconds_thresholds": t_thresholds, "seconds_tasks_wall": time.perf_counter() - t_tasks0,
        "task_seconds_scan": stats["seconds_scan"], "task_seconds_io": stats["seconds_io"],
        "task_seconds_total": stats["seconds_task"],
        "scan_id": pub.scan_id,
    }
    try:
        _write_summaries(out, mset, tables, row_strand, plan, row_hits_all, summary)
    except OSError as e:
        raise ScanError(_failure_message(e, out)) from None
    pub.finished(summary)
    return ScanResult(out=out, blocks=len(all_units), blocks_skipped=len(all_units) - len(todo), hits=int(total_hits),
                      seconds=seconds, positions=stats["positions"], scores=stats["positions"] * total_rows,
                      column_scores=stats["positions"] * col_per_pos, unreachable=unreachable, device=device,
                      workers=len(client.scheduler_info().get("workers", {})))


def _failure_message(exc: BaseException, out: str) -> str:
    """One line for a scan that stops: what failed, and that the finished blocks stay usable."""
    keep = "finished blocks are kept; rerun with --resume"
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


def _write_summaries(out, mset, tables, row_strand, plan, row_hits, summary):
    storage.write_parquet(_thresholds_table(mset, tables, row_strand), storage.join(out, "_thresholds.parquet"))
    n = len(mset.ids)
    plus = np.zeros(n, np.int64)
    minus = np.zeros(n, np.int64)
    np.add.at(plus, plan.row_motif[plan.row_strand == 0], row_hits[plan.row_strand == 0])
    np.add.at(minus, plan.row_motif[plan.row_strand == 1], row_hits[plan.row_strand == 1])
    reach = np.zeros(n, bool)
    reach[plan.row_motif] = True
    per_motif = arrow.table({"motif_id": mset.ids, "motif_name": mset.names, "hits_plus": plus,
                             "hits_minus": minus, "hits": plus + minus, "reachable": reach}, schema=MOTIF_SUMMARY_SCHEMA)
    storage.write_parquet(per_motif, storage.join(out, "_motif_summary.parquet"))
    from pipeline.summary import motif_summary_tsv  # noqa: PLC0415

    _atomic_write_bytes(storage.join(out, "_motif_summary.tsv"), motif_summary_tsv(per_motif))
    _atomic_write_bytes(storage.join(out, "_summary.json"), json.dumps(summary, indent=1).encode())


def _write_region_counts(out: str, store: GenomeStore, regions: Regions | None, mset: MotifSet) -> None:
    """``_region_counts.parquet``: the blocks' counts (``_counts/``) reduced per (record or region, motif)."""
    import pyarrow.dataset as ds  # noqa: PLC0415

    from pipeline.schema import REGION_COUNTS_SCHEMA  # noqa: PLC0415

    fs, path = storage.arrow_source(storage.join(out, "_counts"))
    if storage.exists(storage.join(out, "_counts")):
        parts = ds.dataset(path, filesystem=fs, format="parquet").to_table()
        t = parts.group_by(["key", "motif"]).aggregate([("hits", "sum"), ("best_score", "max"),
                                                         ("best_pvalue", "min")])
        t = t.sort_by([("key", "ascending"), ("motif", "ascending")])
        key = t.column("key").to_numpy()
        motif = t.column("motif").to_numpy()
    else:
        t, key, motif = None, np.zeros(0, np.int64), np.zeros(0, np.int64)
    if regions is not None:
        names = [regions.names[i] for i in key.tolist()]
        chrom = [store.records.names[i] for i in regions.record[key].tolist()]
        start, end = regions.start[key], regions.end[key]
    else:
        names = chrom = [store.records.names[i] for i in key.tolist()]
        start, end = np.zeros(key.size, np.int64), store.records.lengths[key]
    cols = {"region": names, "chrom": chrom, "start": start, "end": end,
            "motif_id": [mset.ids[i] for i in motif.tolist()], "motif_name": [mset.names[i] for i in motif.tolist()]}
    for c in ("hits", "best_score", "best_pvalue"):
        cols[c] = t.column(f"{c}_{'sum' if c == 'hits' else 'max' if c == 'best_score' else 'min'}") if t else []
    storage.write_parquet(arrow.table(cols, schema=REGION_COUNTS_SCHEMA), storage.join(out, "_region_counts.parquet"))


def hits_schema(out: str) -> pa.Schema:
    """The schema of a hits dataset's files (with ``region`` when it is a scan of BED regions)."""
    try:
        params = json.loads(storage.read_bytes(storage.join(out, "_run.json")))
    except (FileNotFoundError, ValueError):
        params = {}
    return REGION_HITS_SCHEMA if params.get("regions") else HITS_SCHEMA


def read_hits(out: str, columns=None, filter=None) -> pa.Table:
    """Read a hits dataset (small ones; stream large ones file by file)."""
    import pyarrow.dataset as ds  # noqa: PLC0415

    fs, path = storage.arrow_source(out)
    d = ds.dataset(path, filesystem=fs, format="parquet", schema=hits_schema(out))
    return d.to_table(columns=columns, filter=filter)
