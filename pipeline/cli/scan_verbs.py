"""The scan's verbs: ``ingest``, ``scan``, ``thresholds``, ``export`` and ``summary``."""
from __future__ import annotations

import os
import shlex
import sys
import time

import dask.config

from pipeline.cli.args import UserError
from pipeline.cli.local import (auto_device, client_kwargs, cluster_line, cpu_on_threads, early_cluster, gpu_on_threads,
                                load_in_background, on_threads, prestart, threshold_threads_for)
from pipeline.cli.outputs import check_out_file, make_console, refuse_inside_output, warn_unfinished
from workers.trace import mark


def cmd_ingest(a) -> int:
    from pipeline.io.genome import ingest  # noqa: PLC0415

    t0 = time.perf_counter()
    g = ingest(a.fasta, a.store, block_size=a.block_size, halo=a.halo)
    bg = g.background
    print(f"ingested {a.fasta} → {a.store}: {len(g.records):,} records, {g.total_length:,} bp, {g.n_blocks} blocks "
          f"of {g.block_size:,} (+{g.halo} halo), background A={bg[0]:.3f} C={bg[1]:.3f} G={bg[2]:.3f} "
          f"T={bg[3]:.3f}, N={g.attrs['base_counts']['N']:,}, {time.perf_counter() - t0:.1f}s")
    return 0


def _plan_scan(a, console, threshold_threads: int = 0):
    """``plan_scan`` of the command's arguments; says where an ingested FASTA went.  ``threshold_threads``: the
    thresholds start on that many threads of this process as soon as the motifs are read (a local cluster)."""
    from pipeline.scan.plan import plan_scan  # noqa: PLC0415

    job = plan_scan(a.store, a.motifs, a.out, pvalue=a.pvalue, background=a.background,
                    pseudocount=a.pseudocount, resume=a.resume, like=getattr(a, "like", None),
                    strands=getattr(a, "strand", "both"), overwrite=getattr(a, "overwrite", False),
                    select=getattr(a, "motif_select", None), motif_format=getattr(a, "motif_format", None),
                    qvalues=not getattr(a, "no_qvalue", False), max_qvalue=getattr(a, "max_qvalue", None),
                    regions=getattr(a, "regions", None), threshold_threads=threshold_threads,
                    parse_genomic_coord=getattr(a, "parse_genomic_coord", False))
    if job.ingested:
        console.print(f"{a.store}: {len(job.store.records):,} records, {job.store.total_length:,} bp → "
                      f"{job.store.path} (kept with the hits: exports read the sequences from it; --resume reuses it)")
    return job


def _import_zarr() -> None:
    import zarr  # noqa: F401, PLC0415


def cmd_scan(a, console=None, before_scan=None) -> int:
    """``before_scan(job)``: called once the cluster is up, before the thresholds and blocks (the demo's notes)."""
    import contextlib  # noqa: PLC0415

    console = console or make_console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    client_kw = client_kwargs(a)
    gpu_threads = gpu_on_threads(client_kw, a.store)
    if gpu_threads or cpu_on_threads(client_kw, a.store):
        from pipeline.engine.cluster import warm_this_process  # noqa: PLC0415

        # the kernels (and the CUDA context) of this process's scan threads load beside the planning below
        warm_this_process("gpu" if gpu_threads else "cpu")
    else:
        prestart(client_kw, gpu_in_process=True)    # the workers' forkserver imports beside the planning below
    if os.path.isfile(a.store):           # a FASTA scanned directly: numba and its parser load beside the motifs' read
        from pipeline.io.fasta import load_parser  # noqa: PLC0415

        load_in_background(load_parser)
        load_in_background(_import_zarr)    # the store the FASTA is ingested into (0.45 s of imports on the VM)
    # worker processes asked for by name (--device gpu, --device cpu --processes) start beside the planning too;
    # --device auto decides after it, by the cost model
    early = None if gpu_threads else early_cluster(client_kw, client_kw["device"] == "gpu" or (
        client_kw["device"] == "cpu" and client_kw["processes"]), [a.store], a.motifs, gpu_in_process=True)
    with early or contextlib.nullcontext():
        job = _plan_scan(a, console, threshold_threads_for(client_kw, gpu_threads))
        mark("planned")
        try:
            res = _run_planned(job, a, client_kw, early, console, command, before_scan, gpu_threads)
        except BaseException:
            if job.thresholds is not None:
                job.thresholds.cancel()         # the cluster did not start: the batches not begun are dropped
            from pipeline.engine.dataset import restore_replaced  # noqa: PLC0415

            restore_replaced(job.out)           # stopped before the scan began: what --overwrite set aside, back
            raise
    mark("closed")                              # the local cluster closed
    _print_summary(res, console)
    mark("printed")
    return 0


def _run_planned(job, a, client_kw, early, console, command, before_scan, gpu_threads=False):
    """:func:`cmd_scan` once its inputs are planned: the cluster (``early``'s, or one started now), the scan;
    ``gpu_threads``: a GPU scan on this process's threads (:func:`pipeline.cli.local.gpu_on_threads`)."""
    import contextlib  # noqa: PLC0415

    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.scan.graph import execute_scan  # noqa: PLC0415

    # (a scheduler of its own serves its dashboard whatever the job's size)
    small = early is None and client_kw["scheduler"] is None and job.positions < int(
        dask.config.get("motifgrid.scan.dashboard-min-positions", default=0))
    threads = on_threads(small, job.positions)
    if client_kw["device"] is None and client_kw["scheduler"] is None:       # --device auto on this machine
        choice = auto_device(job, a.pvalue, threads=threads or gpu_threads)
        if choice is not None:
            client_kw["device"] = choice.device
            console.print(choice.line())
    threads = threads or (gpu_threads and early is None and client_kw["device"] != "cpu")
    with (contextlib.nullcontext(early.get()) if early else
          get_client(**client_kw, quiet=True, dashboard=not small, threads_only=threads,
                     gpu_in_process=True)) as (client, device):
        mark("cluster")                         # the cluster this scan runs on is up
        console.print(cluster_line(client, device, small))
        if before_scan is not None:
            before_scan(job)
        return execute_scan(job, client, device=device, progress=not a.no_progress, command=command, console=console)


def _print_summary(res, console) -> None:
    import json  # noqa: PLC0415

    from pipeline.io import storage  # noqa: PLC0415

    s = json.loads(storage.read_bytes(storage.join(res.out, "_summary.json")))
    rate = res.scores / res.seconds if res.seconds and res.scores else 0.0
    console.print(f"done: {s['blocks']} blocks ({res.blocks_skipped} already finished), {s['hits']:,} hits, "
                  f"{res.seconds:.1f}s, {rate:.3g} window scores/s "
                  f"({res.column_scores / res.seconds if res.seconds else 0:.3g} column scores/s) on {res.device}")
    if res.unreachable:
        console.print(f"{len(res.unreachable)} motif(s) cannot reach the p-value on some strand and report no hits there: "
                      + ", ".join(res.unreachable[:10]) + (" …" if len(res.unreachable) > 10 else ""))
    q = res.qvalues
    if q:
        kept = (" (kept when the hits are read: read_hits, motifgrid export)" if q["max_qvalue"] is not None
                else "")
        console.print(f"q-values: {q['hits_at_level']:,} of {s['hits']:,} hits have q <= {q['level']:g}{kept}; "
                      f"Benjamini-Hochberg per motif over {s['tests']:,} tests (windows without N x strands) "
                      f"→ {res.out}/_qvalues.parquet", soft_wrap=True)
    from pipeline.cli.summary import top_motif_lines, top_motifs  # noqa: PLC0415

    for line in top_motif_lines(top_motifs(res.out, 5), res.out):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"hits: {res.out} (Parquet: chrom/<record>/ and packed/)  · per motif: {res.out}/_motif_summary.tsv "
                  f"(.parquet)  · per record or region and motif: {res.out}/_region_counts.parquet  "
                  f"· motifgrid summary {res.out}", soft_wrap=True)


def cmd_thresholds(a) -> int:
    import numpy as np  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415

    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.io.genome import GenomeStore  # noqa: PLC0415
    from pipeline.motifs import read_background  # noqa: PLC0415
    from pipeline.scan.motif_set import (MotifSet, check_like, default_background,  # noqa: PLC0415
                                         motif_thresholds_table, row_thresholds_many)

    check_out_file(a.out or "-")
    check_like(a.like, a.strand)
    if a.background == "genome" and not a.store:
        raise UserError("--background genome is the composition of a genome store: give --store STORE")
    gbg = GenomeStore(a.store).background if a.store else None
    bg = read_background(a.background or default_background(a.like), genome_background=gbg)
    mset = MotifSet.load(a.motifs, bg, a.pseudocount, select=a.motif_select, format=a.motif_format, like=a.like,
                         strands=a.strand, keyed="the table names motifs by id, so the rows of matrices sharing one "
                         "cannot be told apart")
    kw = client_kwargs(a)
    device = kw["device"]
    kw["device"] = "cpu"
    with get_client(**kw, quiet=True, threads_only=True) as (client, _):    # a local run: this process's threads
        per_p = row_thresholds_many(mset, a.pvalue, client=client, method=a.method, table=False,
                                    rel_tol=a.rel_tol, device="gpu" if device == "gpu" else "cpu")
    _, _, strands = mset.rows()
    t = pa.concat_tables([motif_thresholds_table(mset, tables, strands) for tables in per_p])
    from pipeline.engine.dataset import table_tsv  # noqa: PLC0415
    from pipeline.io.storage import open_output  # noqa: PLC0415

    with open_output(a.out or "-", "wb") as f:
        f.write(table_tsv(t))
    reach = np.asarray(t.column("reachable").to_pylist())
    err = np.asarray(t.column("score_error").to_pylist(), dtype=float)[reach]
    lo = np.asarray(t.column("pvalue_low").to_pylist())[reach]
    hi = np.asarray(t.column("pvalue_high").to_pylist())[reach]
    width = np.where(lo > 0, hi / np.where(lo > 0, lo, 1) - 1, np.where(hi > 0, np.inf, 0.0))
    methods = sorted(set(t.column("method").to_pylist()))
    print(f"{len(mset.ids)} motifs × {len(a.pvalue)} p-value(s): {t.num_rows} rows, "
          f"{int((~reach).sum())} unreachable; method {'+'.join(methods)}; "
          f"largest p-value bracket {float(width.max(initial=0.0)):.2e} (relative), "
          f"largest score error {float(np.nanmax(err, initial=0.0)):.3g} bits", file=sys.stderr)
    return 0


def cmd_export(a) -> int:
    from pipeline.scan.export import export  # noqa: PLC0415

    from pipeline.io.storage import output_target  # noqa: PLC0415

    variants = _export_kind(a)
    if a.format == "matrix":
        return _export_matrix(a)
    check_out_file(a.out, overwrite=a.overwrite)
    if not variants:
        warn_unfinished(a.hits)
    to_stdout = output_target(a.out)[0] == "stdout"
    try:
        if variants:
            from pipeline.variants.export import export_variants  # noqa: PLC0415

            n = export_variants(a.hits, a.format, a.out, max_qvalue=a.max_qvalue, calls=a.calls)
        else:
            n = export(a.hits, a.format, a.out, max_qvalue=a.max_qvalue, sort=a.sort)
    except BrokenPipeError:          # `motifgrid export H -o - | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    what = ("BED lines" if a.format == "bed" else "rows") if variants else "hits"
    print(f"wrote {n:,} {what} to {'standard output' if to_stdout else a.out} ({a.format})",
          file=sys.stderr if to_stdout else sys.stdout)
    return 0


def _export_kind(a) -> bool:
    """Whether ``a.hits`` is a variants folder (its ``_run.json`` has ``vcf_checksum``: ``motifgrid summary``'s
    test), once the format and options asked of it are ones it has: a variants folder exports as bed or tsv, a
    scan's hits as bed, fimo, gff3 or matrix."""
    from pipeline.cli.summary import SummaryError, kind_of  # noqa: PLC0415

    try:
        variants = kind_of(a.hits) == "variants"
    except SummaryError:
        variants = False
    if variants and a.format not in ("bed", "tsv"):
        raise UserError(f"{a.hits}: a variants folder exports as --format bed or tsv; --format {a.format} is a "
                        "scan's (hits datasets)")
    if not variants and a.format == "tsv":
        raise UserError(f"{a.hits}: not a variants folder; --format tsv exports one (motifgrid variants --out), a "
                        "scan's hits export as bed, fimo, gff3 or matrix")
    if not variants and a.calls is not None:
        raise UserError(f"{a.hits}: not a variants folder; --calls keeps a variants run's rows by their call")
    return variants


def _export_matrix(a) -> int:
    """``export --format matrix -o DIR``: a new folder (or, with --overwrite, one holding only an earlier matrix),
    not inside a motifgrid output folder."""
    from pipeline.scan.export import export_matrix  # noqa: PLC0415

    out = os.path.abspath(a.out)
    if a.max_qvalue is not None:
        raise UserError("--max-qvalue does not apply to --format matrix: it counts every hit at the scan's p-value")
    refuse_inside_output(a.out, out if os.path.isdir(out) else os.path.dirname(out))
    if os.path.exists(out):
        ours = {"matrix.mtx", "rows.tsv", "cols.tsv"}
        if not os.path.isdir(out) or not a.overwrite or not set(os.listdir(out)) <= ours:
            raise UserError(f"{a.out}: exists; --overwrite replaces a folder holding only an earlier matrix")
    elif not os.path.isdir(os.path.dirname(out)):
        raise UserError(f"{a.out}: cannot write it, the folder {os.path.dirname(out)} does not exist")
    warn_unfinished(a.hits)
    rows, cols, nnz = export_matrix(a.hits, out, a.value)
    print(f"wrote {rows:,} x {cols:,} matrix ({nnz:,} non-zero, {a.value}) to {a.out}/matrix.mtx, rows.tsv, cols.tsv")
    return 0


def cmd_summary(a) -> int:
    import json  # noqa: PLC0415

    from pipeline.cli.summary import summarize, summary_lines  # noqa: PLC0415

    s = summarize(a.path, top=a.top)
    try:
        print(json.dumps(s, indent=1) if a.json else "\n".join(summary_lines(s)), flush=True)
    except BrokenPipeError:          # `motifgrid summary X --json | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0
