"""``motifgrid enrich``: which known motifs explain a set of sequences (peaks)?  SEA's question and statistic, on
the project's scan engine.

1. **Inputs** (:mod:`pipeline.enrich.inputs`): the targets (a FASTA, or a BED of regions of ``--genome``), the
   controls (dinucleotide shuffles, GC-matched genomic regions, or the user's FASTA / BED) and the motifs, all
   checked before the output folder is claimed; the controls made are written as ``control.fa`` /
   ``control.bed``.
2. **One scan** of targets and controls together: one genome store of both (``DIR/_sequences.zarr``, records
   ``t<i>`` then ``c<j>``) scanned by :func:`pipeline.scan.graph.execute_scan` into ``DIR/_hits`` on the command's one
   Dask cluster — thresholds fanned out per matrix and cached as for every scan, one task per block, on the GPU
   where the workers have one; no q-values (enrichment does not use them), and no hits files either (only the
   blocks' counts) unless ``--centrality`` needs every motif's sites.  The CLI makes the controls and the store
   while its cluster starts (:func:`read_inputs` first, then :func:`prepare_enrich`).
3. **Counts**: the scan's per-block counts (``_counts/``) have one row per (record, motif) with at least one hit,
   either strand, at the motif's threshold for ``--pvalue``; its distinct rows per motif, split into target and
   control records, are ``pos_seqs`` and ``neg_seqs`` (:func:`sequences_with_hits`).  The totals are every target and every
   control: like SEA, a sequence shorter than a motif, or whose windows all hold an N, counts as a sequence without a site.
4. **Table** (:mod:`pipeline.enrich.stats`): one-sided Fisher in log space, odds ratio, E (p × motifs), BH q; with
   ``--centrality`` CentriMo's columns (:mod:`pipeline.enrich.centrality`) from the best sites in the targets.
5. **Clusters** (on by default; ``cluster_motifs`` on Tomtom's identification statistic, in this process): the ``cluster_top``
   best-ranked motifs (``motifgrid.enrich.cluster-top``, 300) are grouped at E <= ``--cluster``; a cluster is
   numbered by and represented by its best-ranked member; motifs ranked lower are not clustered (null).
   Identifying all 2,346 JASPAR CORE matrices against each other costs ~10x the whole enrichment of 10,000 peaks
   on 2 cores, while the family structure matters only near the top.
6. **Sites** of the ``--top`` motifs in the targets (``sites.parquet``): from the scan's hits with
   ``--centrality``, else scanned in this process from the targets in memory with only those motifs (~1 % of the
   first scan's work; writing and reading every motif's hits cost half of an enrichment's time), beside the
   clustering; and the pictures (:mod:`pipeline.enrich.report`; skipped with a note without the ``report``
   extra).  The scan's store and hits are then removed; ``_summary.json`` is written last (its presence marks a
   finished run).

Output folder::

    DIR/enrichment.tsv, .parquet    one row per motif, best first (pipeline.enrich.stats.ENRICHMENT_SCHEMA)
    DIR/enrichment_clusters.tsv     the best row of each cluster
    DIR/sites.parquet               sites of the top motifs in the targets (pipeline.io.schema.ENRICH_SITES_SCHEMA)
    DIR/control.fa | control.bed    the controls made (shuffled | genomic)
    DIR/enrichment.png, .html       the top motifs: logos, -log10 p bars, target / control shares
    DIR/_run.json, _summary.json    parameters; counts and seconds per step

A failed or interrupted run removes what it wrote (and the folder when it made it).
"""
from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field

import dask.config
import numpy as np
import pyarrow as pa

from pipeline import MotifgridError, __version__
from pipeline.enrich.inputs import Sequences
from pipeline.io import arrow, storage

FORMAT = 1
RUN_FILE, SUMMARY_FILE = "_run.json", "_summary.json"
STORE_DIR, HITS_DIR = "_sequences.zarr", "_hits"
#: everything a run may write (``--overwrite`` removes these and refuses a folder holding anything else)
OUTPUTS = ("enrichment.tsv", "enrichment.parquet", "enrichment_clusters.tsv", "sites.parquet", "control.fa",
           "control.bed", "enrichment.png", "enrichment.html", STORE_DIR, HITS_DIR, RUN_FILE)


class EnrichRunError(MotifgridError, RuntimeError):
    """An enrichment that cannot start or go on; one line for the user."""


@dataclass
class EnrichSettings:
    """What ``motifgrid enrich`` is asked (its options)."""
    pvalue: float = 1e-4
    control: str = "shuffled"          # shuffled | genomic | a FASTA or BED file
    genome: str | None = None          # genome store of BED targets / controls, and of genomic controls
    shuffles: int = 1                  # control copies per target (shuffled or genomic)
    seed: int = 0
    cluster: float | None = 1.0        # E-value cut-off of the clusters; None: no clustering
    centrality: bool = False
    background: str | None = None      # as scan's --background (None: motifgrid.scan.background)
    pseudocount: float = 0.1
    top: int = 20                      # motifs drawn and whose sites are kept
    select: list | None = None         # --motif
    motif_format: str | None = None
    overwrite: bool = False
    cluster_top: int | None = None     # None: motifgrid.enrich.cluster-top

    def check(self) -> None:
        from pipeline.enrich.inputs import control_kind  # noqa: PLC0415

        if not 0 < self.pvalue < 1:
            raise EnrichRunError(f"--pvalue must be in (0, 1), got {self.pvalue}")
        if self.shuffles < 1:
            raise EnrichRunError(f"--shuffles must be >= 1, got {self.shuffles}")
        if self.cluster is not None and not self.cluster > 0:
            raise EnrichRunError(f"--cluster must be an E-value > 0, got {self.cluster}")
        if control_kind(self.control) == "genomic" and not self.genome:
            raise EnrichRunError("--control genomic samples regions of a genome store: give --genome STORE")
        if self.top < 1:
            raise EnrichRunError(f"--top must be >= 1, got {self.top}")


@dataclass
class EnrichJob:
    """A checked enrichment, ready to scan: inputs read, output claimed, controls and store written."""
    out: str
    settings: EnrichSettings
    targets: Sequences
    controls: Sequences
    control_info: dict
    motifs: list
    scan: object                       # pipeline.scan.plan.ScanJob of DIR/_sequences.zarr into DIR/_hits
    created: bool                      # the folder was made by this run (removed again if it fails)
    seconds: dict = field(default_factory=dict)
    t0: float = 0.0
    t_planned: float = 0.0
    report: str | None = None          # why the pictures were not drawn (None: drawn)
    centrality: dict | None = None     # --centrality: the target length tested and how many targets have it


# ------------------------------------------------------------------------------------ output folder
def _json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            d = json.load(f)
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) else None


def check_output(out: str, overwrite: bool) -> None:
    """Refuse an output that is a file, a non-empty folder other than an enrichment folder, or (without
    ``overwrite``) an enrichment folder; with ``overwrite``, one holding files a run does not write.  Reads only."""
    if os.path.exists(out) and not os.path.isdir(out):
        raise EnrichRunError(f"{out}: exists and is not a directory")
    names = os.listdir(out) if os.path.isdir(out) else []
    if not names:
        return
    run = _json(os.path.join(out, RUN_FILE))
    if run is None or "enrich_format" not in run:
        only = "; --overwrite replaces only a motifgrid enrichment folder" if overwrite else ""
        raise EnrichRunError(f"{out}: exists, is not empty and is not a motifgrid enrichment folder{only}")
    if not overwrite:
        state = "a finished" if os.path.exists(os.path.join(out, SUMMARY_FILE)) else "an unfinished (interrupted)"
        raise EnrichRunError(f"{out}: holds {state} enrichment; pass --overwrite to replace it, or choose "
                             "another output")
    other = [n for n in names if n not in OUTPUTS + (SUMMARY_FILE,) and not n.startswith(".")]
    if other:
        raise EnrichRunError(f"{out}: --overwrite would remove files that are not part of the enrichment "
                             f"({', '.join(sorted(other)[:3])}{' ...' if len(other) > 3 else ''}); move them out first")


def claim_output(out: str, overwrite: bool) -> bool:
    """:func:`check_output`, then empty an enrichment folder (``overwrite``) and create the folder.  Returns
    whether it was created."""
    check_output(out, overwrite)
    if os.path.isdir(out) and os.listdir(out):
        remove_outputs(out)
    created = not os.path.isdir(out)
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise EnrichRunError(f"{out}: cannot create the output folder ({e.strerror})") from None
    return created


def remove_outputs(out: str, folder: bool = False) -> None:
    """Remove what a run writes in ``out`` (the summary first, ``_run.json`` last, temporaries too), and with
    ``folder`` the folder itself when nothing else is left."""
    names = [SUMMARY_FILE] + [n for n in OUTPUTS if n != RUN_FILE] + [RUN_FILE]
    if os.path.isdir(out):
        names += [n for n in os.listdir(out) if n.startswith(".") and n not in names]
    for n in names:
        p = os.path.join(out, n)
        if os.path.isdir(p) and not os.path.islink(p):
            shutil.rmtree(p, ignore_errors=True)
        elif os.path.lexists(p):
            os.unlink(p)
    if folder:
        try:
            os.rmdir(out)
        except OSError:
            pass


# ------------------------------------------------------------------------------------ plan
@dataclass
class EnrichInputs:
    """What :func:`read_inputs` read and checked: the motifs, the targets, the genome store; nothing written."""
    sequences: str
    motifs_path: str
    out: str
    settings: EnrichSettings
    store: object                      # pipeline.io.genome.GenomeStore of --genome, or None
    motifs: list
    targets: Sequences
    command: str
    seconds: dict
    t0: float

    def positions(self) -> int:
        """The window starts the scan will have, about (controls of a file not yet read count as the targets)."""
        return int(self.targets.offsets[-1]) * (1 + self.settings.shuffles)


def read_inputs(sequences: str, motifs: str, out: str, settings: EnrichSettings, command: str = "") -> EnrichInputs:
    """Check the settings and the output folder, read the motifs, the targets (and ``--genome``): the inputs a
    user most often gets wrong, reported before any cluster starts.  Writes nothing."""
    from pipeline.enrich.inputs import read_sequences  # noqa: PLC0415

    st = settings
    st.check()
    t0 = time.perf_counter()
    check_output(out, st.overwrite)
    store = _genome(st.genome)
    motif_list = _read_motifs(motifs, st)
    seconds = {"motifs": time.perf_counter() - t0}
    t = time.perf_counter()
    targets = read_sequences(sequences, store, "targets")
    seconds["targets"] = time.perf_counter() - t
    return EnrichInputs(sequences, motifs, out, st, store, motif_list, targets, command, seconds, t0)


def prepare_enrich(inputs: EnrichInputs, threshold_threads: int = 0) -> EnrichJob:
    """Make (or read) the controls, claim the output folder, write the controls made and the store of targets and
    controls, and plan its scan.  The CLI runs this while its cluster starts.  ``threshold_threads``: the scan's
    thresholds start on that many threads of this process once it is planned (``pipeline.scan.plan.plan_scan``)."""
    from pipeline.enrich.inputs import make_controls  # noqa: PLC0415

    st, seconds = inputs.settings, inputs.seconds
    t = time.perf_counter()
    controls, info = make_controls(inputs.targets, st.control, st.shuffles, st.seed, inputs.store)
    seconds["controls"] = time.perf_counter() - t
    created = claim_output(inputs.out, st.overwrite)
    try:
        return _prepare(inputs.out, st, inputs.motifs_path, inputs.targets, controls, info, inputs.motifs,
                        inputs.store, created, inputs.command, seconds, inputs.t0, threshold_threads)
    except BaseException:
        remove_outputs(inputs.out, folder=created)
        raise


def plan_enrich(sequences: str, motifs: str, out: str, settings: EnrichSettings, command: str = "") -> EnrichJob:
    """Read and check every input (nothing is written before), claim ``out``, write the controls made and the
    store of targets and controls, and plan its scan: :func:`read_inputs` then :func:`prepare_enrich`."""
    return prepare_enrich(read_inputs(sequences, motifs, out, settings, command))


def _genome(path: str | None):
    if not path:
        return None
    from pipeline.io.genome import GenomeStore  # noqa: PLC0415

    return GenomeStore(path)


def _read_motifs(motifs: str, st: EnrichSettings) -> list:
    from pipeline.motifs import read_motifs  # noqa: PLC0415

    found = read_motifs(motifs, format=st.motif_format, select=st.select)
    seen: dict = {}
    for m in found:
        if m.id in seen:
            raise EnrichRunError(f"{motifs}: motif id {m.id!r} is used twice (records {seen[m.id]} and {m.record}); "
                                 "enrichment reports one row per id")
        seen[m.id] = m.record
    return found


def _prepare(out, st, motifs, targets, controls, info, motif_list, store, created, command, seconds, t0,
             threshold_threads: int = 0) -> EnrichJob:
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from pipeline.enrich.inputs import sequence_store, write_controls  # noqa: PLC0415
    from pipeline.scan.plan import plan_scan  # noqa: PLC0415
    from pipeline.scan.source import block_size_for  # noqa: PLC0415

    params = run_parameters(st, motifs, targets, controls, info, command)
    storage.atomic_write_bytes(os.path.join(out, RUN_FILE), json.dumps(params, indent=1).encode())
    t = time.perf_counter()
    bases = int(targets.offsets[-1] + controls.offsets[-1])
    halo = max(127, max(m.length for m in motif_list) - 1)
    block = dask.config.get("motifgrid.enrich.block-size", default=None) or block_size_for(bases)
    # control.fa (or .bed) written beside the scratch store: both are mostly compiled layout and file writes
    with ThreadPoolExecutor(1, thread_name_prefix="enrich-controls") as pool:
        written = pool.submit(write_controls, out, targets, controls, info, store)
        sequence_store(os.path.join(out, STORE_DIR), targets, controls, halo, int(block))
        written.result()
    seconds["store"] = time.perf_counter() - t
    t = time.perf_counter()
    scan = plan_scan(os.path.join(out, STORE_DIR), motifs, os.path.join(out, HITS_DIR), pvalue=st.pvalue,
                     background=st.background, pseudocount=st.pseudocount, select=st.select,
                     motif_format=st.motif_format, qvalues=False, region_counts=False, hits=st.centrality,
                     threshold_threads=threshold_threads,
                     presence_groups=None if st.centrality else np.repeat(np.int8([0, 1]), [len(targets), len(controls)]))
    seconds["scan_plan"] = time.perf_counter() - t
    return EnrichJob(os.path.abspath(out), st, targets, controls, info, motif_list, scan, created, seconds, t0,
                     t_planned=time.perf_counter())


def run_parameters(st: EnrichSettings, motifs, targets: Sequences, controls: Sequences, info: dict,
                   command: str) -> dict:
    """``_run.json``: the options, the inputs with their checksums, the sequence counts."""
    from pipeline.motifs import motifs_checksum  # noqa: PLC0415

    ctl = {k: v for k, v in info.items() if k != "controls"}
    return {"enrich_format": FORMAT, "motifgrid_version": __version__, "command": command,
            "sequences": targets.source, "sequences_checksum": targets.checksum, "targets": len(targets),
            "target_bases": int(targets.offsets[-1]), "controls": len(controls),
            "control_bases": int(controls.offsets[-1]), "control": ctl, "genome": st.genome and os.path.abspath(st.genome),
            "motifs": str(motifs), "motifs_checksum": motifs_checksum(motifs),
            "settings": {k: v for k, v in asdict(st).items() if k not in ("overwrite",)}}


# ------------------------------------------------------------------------------------ run
def execute_enrich(job: EnrichJob, client, device: str = "cpu", progress: bool = True, command: str | None = None,
                   console=None) -> dict:
    """Scan, count, test, cluster, write; the summary (also ``_summary.json``).  A failure removes what the run
    wrote."""
    try:
        return _execute(job, client, device, progress, command, console)
    except BaseException:
        remove_outputs(job.out, folder=job.created)
        raise


def _execute(job: EnrichJob, client, device, progress, command, console) -> dict:
    import threading  # noqa: PLC0415

    from pipeline.enrich.outputs import preload, write_outputs  # noqa: PLC0415
    from pipeline.scan.graph import execute_scan  # noqa: PLC0415

    sec = job.seconds
    t = time.perf_counter()
    sec["cluster_start"] = max(t - job.t_planned, 0.0)    # the wait for the cluster once the inputs were ready
    # the outputs' imports while the scan's tasks run (after its thresholds: reading ~5,000 cached tables holds the GIL)
    preloading = threading.Thread(target=preload, args=(job,), name="enrich-preload", daemon=True)
    job.scan.on_tasks = preloading.start
    res = execute_scan(job.scan, client, device=device, progress=progress, command=command, console=console)
    scan_summary = json.loads(storage.read_bytes(os.path.join(job.scan.out, "_summary.json")))
    sec["thresholds"] = scan_summary["seconds_thresholds"]
    sec["scan"] = scan_summary["seconds_tasks_wall"]
    sec["scan_summaries"] = time.perf_counter() - t - sec["thresholds"] - sec["scan"]   # region counts, files
    scan_steps = {k: round(v, 3) for k, v in scan_summary.get("task_seconds_by_step", {}).items()}
    t = time.perf_counter()
    pos, neg = sequences_with_hits(job.scan.out, job.scan.store, len(job.targets), len(job.motifs),
                                   grouped=job.scan.presence_groups is not None)
    sec["counts"] = time.perf_counter() - t
    t = time.perf_counter()
    if preloading.ident is not None:                      # started (a scan with no block to run never starts it)
        preloading.join()
    sec["preload_wait"] = time.perf_counter() - t
    table, clusters = write_outputs(job, pos, neg, client)
    t = time.perf_counter()
    for temporary in (HITS_DIR, STORE_DIR):
        shutil.rmtree(os.path.join(job.out, temporary), ignore_errors=True)
    sec["cleanup"] = time.perf_counter() - t
    summary = {"targets": len(job.targets), "controls": len(job.controls),
               "control": {k: v for k, v in job.control_info.items() if k != "controls"}, "motifs": len(job.motifs),
               "unreachable_motifs": res.unreachable, "hits": res.hits, "device": device,
               "workers": res.workers, "clusters": clusters, "significant": _significant(table),
               "centrality": job.centrality, "pictures": job.report or "drawn",
               "top": table.slice(0, 5).select(["rank", "motif_id", "motif_name", "pos_seqs", "pos_total", "neg_seqs",
                                                "neg_total", "log10_pvalue", "evalue", "log10_evalue",
                                                "log10_qvalue"]).to_pylist(),
               "seconds": time.perf_counter() - job.t0, "seconds_steps": sec,
               "scan_thread_seconds": {"scan": round(scan_summary.get("task_seconds_scan", 0.0), 3), **scan_steps}}
    storage.atomic_write_bytes(os.path.join(job.out, SUMMARY_FILE), json.dumps(summary, indent=1).encode())
    return summary


def _significant(table: pa.Table) -> dict:
    """Motifs at q <= 0.05 and at E <= 1, of those with a site in some target and p < 1: a motif without one (e.g.
    one that cannot reach ``--pvalue``) has p = 1, and E = p × motifs is then <= 1 in a run of one motif."""
    lq = arrow.to_numpy(table.column("log10_qvalue"))
    le = arrow.to_numpy(table.column("log10_evalue"))
    found = (arrow.to_numpy(table.column("pos_seqs")) > 0) & (arrow.to_numpy(table.column("log10_pvalue")) < 0)
    return {"qvalue_0.05": int((found & (lq <= np.log10(0.05))).sum()), "evalue_1": int((found & (le <= 0)).sum())}


def sequences_with_hits(hits: str, store, n_targets: int, n_motifs: int,
                        grouped: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Per motif: targets and controls with at least one hit, ``(M,)`` int64 each, from the blocks' counts
    (``_counts/<block>.parquet``: one row per (record, motif) with hits in the block, records ``t<i>`` then ``c<j>``
    being record numbers ``i`` and ``T + j``; or, from the scan's presence groups (targets 0, controls 1), the
    counts of the block's own records per (group, motif) and rows for the records it shares:
    :func:`pipeline.scan.region_counts.block_presence`; ``grouped``: the scan had them).  A record whose windows start in two block cores has a row in each
    block: those records' rows (at most one per block boundary) are made distinct, the others are counted as read.

    The scan's own reduction, ``_region_counts.parquet``, names every (record, motif) row with strings: 1.7 s of a
    10-s enrichment of 10⁴ peaks, ten times that for 10⁵; this reads two integer columns."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from pipeline.scan.region_counts import split_keys  # noqa: PLC0415

    folder = os.path.join(hits, "_counts")
    files = [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f.endswith(".parquet")
             and not f.startswith(".")] if os.path.isdir(folder) else []
    with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:      # Parquet decoding releases the GIL
        cols = ["key", "motif", "records"] if grouped else ["key", "motif"]
        parts = list(pool.map(lambda f: storage.read_parquet(f, columns=cols), files))
    split = split_keys(store.records.offsets, store.records.ends, store.block_size)
    pos, neg = np.zeros(n_motifs, np.int64), np.zeros(n_motifs, np.int64)
    dup_key, dup_motif = [], []
    # counted block by block (no concatenation of the ~3·10⁷ rows of 10⁵ peaks: 3.7-5.3 s on the VM before);
    # the rows of records in two block cores, a few per block, are set aside and made distinct after
    for t in parts:
        key, motif = arrow.to_numpy(t.column("key")), arrow.to_numpy(t.column("motif"))
        if "records" in t.column_names:              # a block's counts per (group, motif): key = -1 - group
            records, counted = arrow.to_numpy(t.column("records")), key < 0
            for group, total in ((0, pos), (1, neg)):
                mine = counted & (key == -1 - group)
                total += np.bincount(motif[mine], weights=records[mine], minlength=n_motifs).astype(np.int64)
            key, motif = key[~counted], motif[~counted]
        target = key < n_targets
        pos += np.bincount(motif[target], minlength=n_motifs)
        neg += np.bincount(motif[~target], minlength=n_motifs)
        dup = split[key]
        if dup.any():
            dup_key.append(key[dup].astype(np.int64))
            dup_motif.append(motif[dup].astype(np.int64))
    if dup_key:
        pair, seen = np.unique(np.concatenate(dup_key) * n_motifs + np.concatenate(dup_motif), return_counts=True)
        again = seen > 1                      # counted in each block holding the record: once is right
        k, m = pair[again] // n_motifs, pair[again] % n_motifs
        np.subtract.at(pos, m[k < n_targets], seen[again][k < n_targets] - 1)
        np.subtract.at(neg, m[k >= n_targets], seen[again][k >= n_targets] - 1)
    return pos, neg


def abandon(job: EnrichJob) -> None:
    """Remove what a planned run wrote (it will not be executed: the cluster did not start); drop the thresholds'
    batches not begun."""
    if job.scan.thresholds is not None:
        job.scan.thresholds.cancel()
    remove_outputs(job.out, folder=job.created)


def result_lines(job: EnrichJob, res: dict) -> list:
    """What the command prints at the end: the counts, the best motifs, where the outputs are, where the time went."""
    from pipeline.enrich.report import sci  # noqa: PLC0415

    sig = res["significant"]
    lines = [f"{res['motifs']:,} motifs: {sig['qvalue_0.05']:,} enriched at q <= 0.05, {sig['evalue_1']:,} at E <= 1"
             + (f", in {res['clusters']:,} cluster(s) of the best {min(cluster_top_of(job), res['motifs']):,}"
                if res["clusters"] else "")]
    un = res["unreachable_motifs"]
    if un:                                # as scan says it: these motifs have no sites (on that strand) at any p
        lines.append(f"{len(un):,} of {res['motifs']:,} motif(s) cannot reach the p-value ({job.settings.pvalue:g}) on "
                     "some strand and have no sites there: " + ", ".join(un[:10]) + (" …" if len(un) > 10 else ""))
    for r in res["top"]:
        name = r["motif_name"] if r["motif_name"] == r["motif_id"] else f"{r['motif_name']} ({r['motif_id']})"
        lines.append(f"  {r['rank']}. {name}: {r['pos_seqs']:,}/{r['pos_total']:,} "
                     f"targets, {r['neg_seqs']:,}/{r['neg_total']:,} controls, p = {sci(r['log10_pvalue'])}, "
                     f"E = {sci(r['log10_evalue'])}")
    if job.report:
        lines.append(job.report)
    out = job.out
    lines.append(f"all motifs: {out}/enrichment.tsv (.parquet)" + (f"  · per cluster: {out}/enrichment_clusters.tsv"
                 if res["clusters"] else "") + f"  · sites of the top {job.settings.top}: {out}/sites.parquet"
                 + ("" if job.report else f"  · pictures: {out}/enrichment.png, enrichment.html"))
    s = res["seconds_steps"]
    steps = ", ".join(f"{k} {v:.1f}" for k, v in s.items() if v >= 0.05)
    lines.append(f"done in {res['seconds']:.1f} s on {res['device']} ({steps} s)")
    return lines


def cluster_top_of(job: EnrichJob) -> int:
    from pipeline.enrich.outputs import cluster_top  # noqa: PLC0415

    return cluster_top(job.settings)


def run_enrich(sequences: str, motifs: str, out: str, client, settings: EnrichSettings | None = None, *,
               device: str = "cpu", progress: bool = False, command: str = "", console=None) -> dict:
    """Plan and execute an enrichment on ``client`` (Python callers and tests; the CLI starts the cluster between
    the two steps)."""
    job = plan_enrich(sequences, motifs, out, settings or EnrichSettings(), command=command)
    return execute_enrich(job, client, device=device, progress=progress, command=command, console=console)
