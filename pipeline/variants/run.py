"""``motifgrid variants``: which variants make or break a binding site.

Planned before any cluster starts (:func:`plan_variants`: motifs read, genome opened or a FASTA ingested, output
claimed, the VCF staged in checked chunks), then run (:func:`execute_variants`): each motif row's thresholds at
``--pvalue`` and its tail table down to ``motifgrid.variants.table-pvalue``, one task per chunk (``task``), the
q-values, ``variants.tsv``, the annotated VCF and ``_summary.json`` (``outputs``).

Output layout::

    DIR/_run.json, _manifest/        parameters (checked on --resume), one entry per finished chunk
    DIR/_alleles/                    the VCF's alleles, staged in chunks (checked against the genome)
    DIR/chrom/<record>/part-<chunk>.parquet   rows: (allele, motif) where either allele reaches --pvalue
    DIR/_qvalues.parquet             q-value (Benjamini-Hochberg over every allele × motif tested) by p-value
    DIR/variants.tsv                 every row, file order, with its q-value
    DIR/variants.vcf                 the input VCF, INFO MOTIFGRID=motif|call|log10ratio,... on the records it concerns
    DIR/_summary.json                totals; its presence marks a finished run
"""
from __future__ import annotations

import os
import shlex
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from pipeline import __version__
from pipeline.engine.dataset import (Progress, TaskRun, abspath, discard_replaced, lock_output, open_run,
                                     release_output, restore_replaced)
from pipeline.io.genome import file_checksum
from pipeline.variants.stage import VariantsError, load_staged, stage
from pipeline.variants.task import VariantsContext, variants_task


def _config(key: str):
    import dask.config  # noqa: PLC0415

    return dask.config.get(f"motifgrid.variants.{key}")


@dataclass
class VariantsSettings:
    pvalue: float = 1e-4
    background: str = "uniform"
    pseudocount: float = 0.1
    select: list | None = None
    motif_format: str | None = None
    report_all: bool = False
    samples: list | None = None         # only the alleles these samples carry (their haplotypes with `haplotypes`)
    haplotypes: bool = False            # also nearby variants of one phased haplotype together
    region: str | None = None           # only the records overlapping chr:start-end (a bgzipped, indexed VCF)
    atsnp: bool = False                 # atSNP's p-values of SNVs too (a Markov background: the genome's or `markov`)
    markov: str | None = None
    atsnp_samples: int = field(default_factory=lambda: int(_config("atsnp-samples")))
    # motifgrid.yaml's (motifgrid.variants) unless given: alleles per task, REF mismatches allowed
    chunk: int = field(default_factory=lambda: int(_config("chunk")))
    max_ref_mismatch: float = field(default_factory=lambda: float(_config("max-ref-mismatch")))

    def check(self) -> None:
        if not 0 < self.pvalue < 1:
            raise VariantsError(f"--pvalue must be in (0, 1), got {self.pvalue}")
        if not 0 <= self.max_ref_mismatch <= 1:
            raise VariantsError(f"--max-ref-mismatch must be in [0, 1], got {self.max_ref_mismatch}")
        if self.chunk < 1:
            raise VariantsError(f"chunk must be positive, got {self.chunk}")
        if self.markov is not None and not self.atsnp:
            raise VariantsError("--markov is the background of --atsnp's statistics: give --atsnp too")
        if self.atsnp_samples < 1000:
            raise VariantsError(f"atsnp-samples must be at least 1000, got {self.atsnp_samples}")


@dataclass
class VariantsJob:
    vcf: str
    out: str
    settings: VariantsSettings
    store: object
    mset: object
    staged: object
    done: set
    t_start: float


def plan_variants(vcf: str, genome: str, motifs: str, out: str, settings: VariantsSettings, resume: bool = False,
                  overwrite: bool = False, warn=None) -> VariantsJob:
    """Every input read and checked, the output claimed and the VCF staged, before any cluster starts."""
    from pipeline.motifs import read_background  # noqa: PLC0415
    from pipeline.scan.source import open_source, place_store, remove_tree  # noqa: PLC0415

    t0 = time.perf_counter()
    settings.check()
    if not os.path.isfile(vcf):
        raise VariantsError(f"{vcf}: no such file")
    lock_output(out, VariantsError)
    try:
        bg = None if settings.background == "genome" else read_background(settings.background)
        mset = None if bg is None else _motif_set(motifs, bg, settings)
        store, staged_store = open_source(genome, out, resume, overwrite, None if mset is None else mset.max_length - 1,
                                          kind="variants run", dataset="variants dataset", error=VariantsError)
        try:
            if mset is None:
                mset = _motif_set(motifs, read_background("genome", genome_background=store.background), settings)
            params = {"vcf": abspath(vcf), "vcf_checksum": file_checksum(vcf), "genome_checksum": store.checksum,
                      "motifs_source": mset.source, "motifs_checksum": mset.checksum, "motifs_select": mset.select,
                      "pvalue": settings.pvalue, "background": [float(x) for x in mset.background],
                      "pseudocount": settings.pseudocount, "report_all": settings.report_all,
                      "samples": settings.samples, "haplotypes": settings.haplotypes, "region": settings.region,
                      "atsnp": settings.atsnp, "markov": settings.markov and abspath(settings.markov),
                      "atsnp_samples": settings.atsnp_samples,
                      "chunk": settings.chunk, "max_ref_mismatch": settings.max_ref_mismatch}
            done = open_run(out, params, resume, kind="variants run", error=VariantsError, key="chunk",
                            dataset="variants dataset", overwrite=overwrite)
            if staged_store is not None:
                store = place_store(staged_store, out)
        finally:
            if staged_store is not None:
                remove_tree(staged_store.parent)
        staged = (load_staged(out) if resume else None) or stage(
            vcf, store, out, settings.chunk, settings.max_ref_mismatch, warn, samples=settings.samples,
            haplotypes=settings.haplotypes, flank=mset.max_length - 1, region=settings.region)
    except BaseException:
        if not resume:                          # a staging that failed: nothing of it left (the claim taken back)
            remove_tree(os.path.join(out, "_alleles"))
        restore_replaced(out)
        raise
    return VariantsJob(vcf, out, settings, store, mset, staged, done, t0)


def _motif_set(motifs, bg, settings: VariantsSettings):
    from pipeline.scan.motif_set import MotifSet  # noqa: PLC0415

    return MotifSet.load(motifs, bg, settings.pseudocount, select=settings.select, format=settings.motif_format,
                         keyed="rows carry the id only, so matrices sharing one cannot be told apart")


def table_pvalue(pvalue: float) -> float:
    """The p-value down to which each row's tail table reaches (``motifgrid.variants.table-pvalue``, at least
    ``pvalue``): an allele's best window scoring below it has its p-value computed exactly, one by one."""
    return max(float(_config("table-pvalue")), pvalue)


def execute_variants(job: VariantsJob, client, device: str = "cpu", progress: bool = True, command: str | None = None,
                     console=None) -> dict:
    """Thresholds, one task per chunk on ``client``, then q-values and the outputs; the summary."""
    from pipeline.scan.motif_set import row_thresholds_many  # noqa: PLC0415
    from pipeline.variants.outputs import finish  # noqa: PLC0415
    from workers.distribution import PvalueTable  # noqa: PLC0415
    from workers.variants import Rows  # noqa: PLC0415

    command = command or " ".join(shlex.quote(a) for a in sys.argv)
    discard_replaced(job.out)
    try:
        mset, st = job.mset, job.settings
        t_thr = time.perf_counter()
        at_p, at_table = row_thresholds_many(mset, [st.pvalue, table_pvalue(st.pvalue)], client)
        pwms, row_motif, row_strand = mset.rows()
        alpha = np.array([t.threshold if t.reachable else np.inf for t in at_p])
        ctx = VariantsContext(
            store=job.store, out=abspath(job.out), pwms=pwms, rows=Rows(pwms, alpha), row_motif=row_motif,
            row_strand=row_strand,
            pvalues=PvalueTable.from_thresholds(at_table), background=mset.background, motif_ids=mset.ids,
            motif_names=mset.names, flank=mset.max_length - 1, report_all=st.report_all,
            metadata={"motifgrid.version": __version__, "motifgrid.command": command}, device=device)
        t_atsnp = time.perf_counter()
        if st.atsnp:
            ctx.atsnp, ctx.markov = _atsnp_tails(job, ctx, client, device)
        t_tasks = time.perf_counter()
        todo = [c for c in job.staged.chunks if c[0] not in job.done]
        run = TaskRun(client, variants_task, ctx, todo, name="variants", key=lambda c, r: c)
        rows = 0
        with Progress(console, len(todo), progress and len(run) > 0, label="variants", unit="chunks") as bar:
            for res in run.results(lambda exc: VariantsError(f"a task failed: {type(exc).__name__}: {exc} "
                                                             "(finished chunks are kept; rerun with --resume)"),
                                   job.out):
                rows += res["rows"]
                bar.update(1, rows)
        seconds = {"thresholds": t_atsnp - t_thr, "atsnp_tails": t_tasks - t_atsnp,
                   "tasks": time.perf_counter() - t_tasks}
        return finish(job, ctx, seconds, device)
    finally:
        release_output(job.out)


def _atsnp_tails(job: VariantsJob, ctx: VariantsContext, client, device: str):
    """The Markov background (``--markov``, else the genome's, written to ``DIR/_markov.tsv``) and every motif's
    atSNP tails."""
    from pipeline.io import storage  # noqa: PLC0415
    from pipeline.variants.atsnp import markov_of_genome, markov_text, motif_tails_all, read_markov  # noqa: PLC0415
    from pipeline.variants.task import motif_rows  # noqa: PLC0415

    st = job.settings
    prior, trans = read_markov(st.markov) if st.markov else markov_of_genome(job.store)
    storage.atomic_write_bytes(storage.join(job.out, "_markov.tsv"), markov_text(prior, trans).encode())
    by = motif_rows(ctx.row_motif, ctx.row_strand, len(ctx.motif_ids))
    tails = motif_tails_all(ctx.pwms, by, prior, trans, st.atsnp_samples, client, device)
    return tails, {"prior": prior.tolist(), "transition": trans.tolist()}


def run_variants(vcf: str, genome: str, motifs: str, out: str, client, settings: VariantsSettings | None = None,
                 device: str = "cpu", resume: bool = False, overwrite: bool = False, progress: bool = False) -> dict:
    """Plan and execute on ``client``; the summary."""
    job = plan_variants(vcf, genome, motifs, out, settings or VariantsSettings(), resume, overwrite)
    return execute_variants(job, client, device=device, progress=progress)
