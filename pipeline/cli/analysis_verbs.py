"""The analyses' verbs: ``composition``, ``compare``, ``discover`` and ``enrich``."""
from __future__ import annotations

import os
import shlex
import sys
import time

import dask.config

from pipeline.cli.args import UserError
from pipeline.cli.local import (client_kwargs, early_cluster, load_in_background, local_gpu, on_threads, prestart,
                                runs_on, threshold_threads_for)
from pipeline.cli.outputs import check_local_out, make_console


def cmd_composition(a) -> int:
    check_local_out(a)
    from pipeline.engine.cluster import dashboard_link, get_client  # noqa: PLC0415
    from pipeline.composition.run import execute_composition, plan_composition  # noqa: PLC0415

    console = make_console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    client_kw = client_kwargs(a)                     # (a device or scheduler refused before the output is claimed)
    job = plan_composition(a.tests, a.reference, a.out, min_similarity=a.min_similarity, both_strands=a.both_strands,
                           counts_only=a.counts_only, resume=a.resume, block_size=a.block_size, console=console,
                           overwrite=a.overwrite)
    p = job.plan
    console.print(f"{len(job.tests.ids):,} tests ({p.lengths.size} lengths, {int(p.lengths.min())}-{p.max_length} nt"
                  f"{', both strands' if p.both_strands else ''}) × {job.store.total_length:,} bp in "
                  f"{len(job.store.records):,} records, S >= {p.min_similarity:g}")
    try:
        with get_client(**client_kw, quiet=True) as (client, device):
            console.print(f"[bold]motifgrid composition[/] on {len(client.scheduler_info()['workers'])} "
                          f"{device.upper()} worker(s); dashboard: {dashboard_link(client)}")
            res = execute_composition(job, client, device=device, progress=not a.no_progress, command=command,
                                      console=console, max_hits=a.max_hits)
    except BaseException:
        from pipeline.engine.dataset import restore_replaced  # noqa: PLC0415

        restore_replaced(job.out)           # stopped before the run began: what --overwrite set aside, back
        raise
    rate = res.pairs / res.seconds if res.seconds else 0.0
    est = res.estimate
    if est:
        console.print(f"estimated {est['hits']:,} matches from {est['sampled_tasks']} task(s) "
                      f"({est['sampled_positions']:,} window starts) in {est['seconds']:.1f}s")
    console.print(f"done: {res.tasks} tasks ({res.tasks_skipped} already finished), {res.hits:,} matches, "
                  f"{res.seconds:.1f}s, {rate:.3g} window-test pairs/s on {res.device}")
    console.print(f"per test: {res.out}/_test_summary.parquet"
                  + ("" if a.counts_only else f"  · matches: {res.out}/{{chrom/*,packed}}/part-*.parquet"))
    return 0


def _compare_settings(a):
    """``CompareSettings`` from the arguments (``pipeline.compare.run.settings_for``)."""
    from pipeline.compare.run import METHOD_OPTIONS, settings_for  # noqa: PLC0415
    from pipeline.motifs import read_background  # noqa: PLC0415

    if a.cluster is not None and a.motifs_b:
        raise UserError("--cluster groups one collection: give only A")
    given = {k: getattr(a, k) for opts in METHOD_OPTIONS.values() for k in opts}
    return settings_for(a.method, given, cluster=None if a.cluster == -1.0 else a.cluster,
                        default_cluster=a.cluster == -1.0, min_overlap=a.min_overlap, pseudocount=a.pseudocount,
                        background=tuple(read_background(a.background)), background_spec=a.background)


def cmd_compare(a) -> int:
    check_local_out(a)
    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.compare.run import best_match_lines, run_compare, summary_line  # noqa: PLC0415

    settings = _compare_settings(a)
    kw = client_kwargs(a)
    console = make_console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    with get_client(**kw, quiet=True) as (client, device):
        res = run_compare(a.motifs_a, a.motifs_b, a.out, client, settings, device=device, command=command)
    if settings.method == "tomtom":                      # each query's best match: data, on standard output
        try:
            print("\n".join(best_match_lines(a.out)), flush=True)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    console.print(summary_line(res, settings, a.out), markup=False, highlight=False, soft_wrap=True)
    return 0


def cmd_discover(a) -> int:
    started = time.perf_counter()        # the time printed and summary.json's span the whole command
    check_local_out(a)
    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.discover.run import run_discover  # noqa: PLC0415
    from pipeline.discover.inputs import DiscoverSettings, read_sequences  # noqa: PLC0415

    console = make_console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    settings = DiscoverSettings(width=a.width, algorithm=a.algorithm, mutations=a.mutations, model=a.model,
                                both_strands=a.both_strands, motifs=a.motifs, seed=a.seed, trials=a.trials,
                                projection_k=a.projection_k, bucket_threshold=a.bucket_threshold,
                                chains=a.chains, update=a.update)
    settings.check(read_sequences(a.sequences))          # bad input fails before a cluster starts
    if a.compare_to:
        from pipeline.motifs import read_motifs  # noqa: PLC0415

        read_motifs(a.compare_to)

    def progress(rnd, m, secs):
        extra = f", {m.ld_count} sequences within d" if m.ld_count is not None else ""
        console.print(f"motif {rnd + 1}: {m.consensus} ({len(m.sites)} sites, {m.information_content:.1f} bits"
                      f"{extra}, by {m.origin}) in {secs:.1f}s")

    with get_client(**client_kwargs(a), quiet=True) as (client, device):
        res = run_discover(a.sequences, a.out, settings, client, device=device, compare_to=a.compare_to,
                           command=command, progress=progress, started=started)
    for m in res.motifs:
        bm = m["best_match"]
        if bm:
            console.print(f"{m['id']} {m['consensus']}: best match {bm['id']} {bm['name']} (p={bm['pvalue']:.2g}, "
                          f"E={bm['evalue']:.2g}, offset {bm['offset']}, strand {bm['strand']}, {bm['overlap']} "
                          "columns)", markup=False, highlight=False, soft_wrap=True)
    ph = res.stats["seconds"]
    console.print(f"done in {res.seconds:.1f}s on {device} (start-up {ph['setup']:.1f}s, search {ph['search']:.1f}s"
                  + (f", --compare-to {ph['compare_to']:.1f}s" if a.compare_to else "") + f", writing {ph['write']:.1f}s"
                  f"; as summary.json): {res.out}/motifs.meme, motifs.jaspar, sites.parquet, summary.json")
    return 0


def _control_draws(a, option: str, default: int) -> int:
    """``--shuffles`` / ``--seed`` of ``enrich``, with a warning where the control is the user's file (they shape
    only the shuffled and genomic controls: they were ignored without a word)."""
    value = getattr(a, option)
    if value is None:
        return default
    from pipeline.enrich.inputs import control_kind  # noqa: PLC0415

    if control_kind(a.control) == "file":
        import warnings  # noqa: PLC0415

        from pipeline.enrich.stats import EnrichWarning  # noqa: PLC0415

        warnings.warn(EnrichWarning(f"--{option} shapes the shuffled and genomic controls only; the control file "
                                    f"{a.control} is used as it is"), stacklevel=2)
    return value


def cmd_enrich(a) -> int:
    check_local_out(a)
    import contextlib  # noqa: PLC0415

    from pipeline.enrich.run import EnrichSettings, read_inputs, result_lines  # noqa: PLC0415
    from pipeline.enrich.inputs import load_kernels  # noqa: PLC0415

    console = make_console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    kw = client_kwargs(a)
    prestart(kw, gpu_in_process=True)    # the workers' forkserver imports (or this process's GPU) beside the inputs
    st = EnrichSettings(pvalue=a.pvalue, control=a.control, genome=a.genome, shuffles=_control_draws(a, "shuffles", 1),
                        seed=_control_draws(a, "seed", 0), cluster=None if a.no_cluster else a.cluster,
                        centrality=a.centrality, background=a.background, pseudocount=a.pseudocount, top=a.top,
                        select=a.motif_select, motif_format=a.motif_format, overwrite=a.overwrite)
    load_in_background(load_kernels)             # numba and the controls' kernels beside reading the inputs
    # GPU workers (CPU ones with --processes) start at once, beside reading the inputs: on one H100 the cluster was
    # ready ~0.9 s after the controls and the store when started only after the targets (docs/benchmarks.md, issue 19)
    early = early_cluster(kw, local_gpu(kw) or kw["processes"], [a.sequences, a.genome], a.motifs, gpu_in_process=True)
    with early or contextlib.nullcontext():
        inputs = read_inputs(a.sequences, a.motifs, a.out, st, command=command)
        small = early is None and inputs.positions() < int(dask.config.get("motifgrid.scan.dashboard-min-positions",
                                                                           default=0))
        res, job = _run_enrich(inputs, kw, early, small, console, a, command)
    for line in result_lines(job, res):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


def _run_enrich(inputs, kw, early, small, console, a, command):
    """:func:`cmd_enrich` once its inputs are read: the controls and the store made while the cluster starts (3 s of
    a GPU cluster's start, 1 s of a CPU one's), then the scan, statistics and report; ``(result, job)``."""
    import contextlib  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.enrich.run import abandon, execute_enrich, prepare_enrich  # noqa: PLC0415

    with ThreadPoolExecutor(1, thread_name_prefix="enrich-prepare") as pool:
        # an in-process cluster: the scan's thresholds start on this machine's cores once the scan is planned
        planned, job = pool.submit(prepare_enrich, inputs, threshold_threads_for(kw)), None
        try:
            with (contextlib.nullcontext(early.get()) if early else
                  get_client(**kw, quiet=True, dashboard=not small, gpu_in_process=True,
                             threads_only=on_threads(small, inputs.positions()))) as (client, device):
                job = planned.result()
                console.print(f"[bold]motifgrid enrich[/] on {runs_on(client, device)}: {len(job.targets):,} "
                              f"targets, {len(job.controls):,} controls ({job.control_info['kind']}), "
                              f"{len(job.motifs):,} motifs")
                res = execute_enrich(job, client, device=device, progress=not a.no_progress, command=command,
                                     console=console)
        except BaseException:
            job = job or _prepared(planned)
            if job is not None:
                abandon(job)
            raise
    return res, job


def _prepared(planned):
    """The job a preparation made, once it is over (None when it failed: it removed what it wrote)."""
    try:
        return planned.result()
    except BaseException:
        return None


def cmd_variants(a) -> int:
    check_local_out(a)
    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.variants.run import VariantsSettings, execute_variants, plan_variants  # noqa: PLC0415

    console = make_console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    kw = client_kwargs(a)
    st = VariantsSettings(pvalue=a.pvalue, background=a.background or "uniform", pseudocount=a.pseudocount,
                          select=a.motif_select, motif_format=a.motif_format, report_all=a.report == "all",
                          max_ref_mismatch=a.max_ref_mismatch, samples=a.samples, haplotypes=a.haplotypes,
                          region=a.region, atsnp=a.atsnp, markov=a.markov)
    job = plan_variants(a.vcf, a.genome, a.motifs, a.out, st, resume=a.resume, overwrite=a.overwrite,
                        warn=lambda line: console.print(f"motifgrid variants: warning: {line}", markup=False,
                                                        highlight=False, soft_wrap=True))
    console.print(f"{job.staged.alleles:,} alleles × {len(job.mset.ids):,} motifs, p <= {st.pvalue:g}, "
                  f"{len(job.staged.chunks)} chunk(s)")
    with get_client(**kw, quiet=True) as (client, device):
        console.print(f"[bold]motifgrid variants[/] on {runs_on(client, device)}")
        s = execute_variants(job, client, device=device, progress=not a.no_progress, command=command,
                             console=console)
    c = s["calls"]
    console.print(f"done: {s['rows']:,} rows (gain {c['gain']:,}, loss {c['loss']:,}, both {c['both']:,}"
                  + (f", none {c['none']:,}" if c["none"] else "") + f") of {s['tests']:,} allele × motif tests in "
                  f"{s['seconds']:.1f}s on {device}; {s['vcf_records_annotated']:,} VCF records annotated → "
                  f"{a.out}/variants.tsv, variants.vcf", markup=False, highlight=False, soft_wrap=True)
    return 0
