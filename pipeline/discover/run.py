"""Motif discovery graph: Gibbs chains and PROJECTION trials fanned out on Dask, merged, refined, ranked.

For each motif asked for (``--motifs K``; mask and repeat):

1. the sequence context (codes with the sites of earlier motifs masked) is scattered to every worker once;
2. PROJECTION trials in batches of ``trials_per_task`` and Gibbs chains in batches of ``chains_per_task``
   become tasks; each task builds the windows on its device (:mod:`workers.discover.windows`), runs its trials
   (bucketing + batched EM, :mod:`workers.discover.projection`) or chains (:mod:`workers.discover.gibbs`) and sends back its
   best few distinct models;
3. one merge task polishes the union by EM and ranks it with the objective that fits the problem: for an
   (l, d) problem (``--mutations d``) the number of sequences with an ``l``-mer within ``d`` mismatches of the
   consensus after a local search from several phase shifts (:mod:`workers.discover.refine`), else the OOPS/ZOOPS
   likelihood;
4. the winner's sites are masked (set to N) and the next round starts.

Every random choice comes from ``numpy.random.SeedSequence(seed, spawn_key=(round, algorithm, batch))``, so
a run is determined by its seed and settings, not by the number of workers or the task order.

Output folder: ``motifs.meme``, ``motifs.jaspar``, ``sites.parquet``, ``summary.tsv`` and ``summary.json``
(written last; its presence marks a finished run).  Files are written atomically.
"""
from __future__ import annotations

import json
import os
import shlex
import sys
import time
from concurrent.futures import CancelledError
from dataclasses import dataclass

import numpy as np

from pipeline.discover.inputs import DiscoverError, DiscoverSettings, SequenceSet, read_sequences
from pipeline.discover.outputs import create_output, write_outputs
from pipeline.discover.tasks import RoundContext, gibbs_task, merge_task, projection_parameters, projection_task








# ------------------------------------------------------------------------------------ driver
@dataclass
class DiscoverResult:
    out: str
    motifs: list
    seconds: float
    device: str
    stats: dict


def default_chains(settings: DiscoverSettings, T: int, device: str) -> int:
    """Chains when --chains is not given: 4096 on CPU, 1,048,576 on GPU for up to 20 sequences, fewer for more
    (a sweep costs T steps, and with many sequences a random start already aligns several true sites):
    ``base * 20 / T``, at least 256, rounded up to whole 1024-chain start blocks where above 1024."""
    base = settings.device_chains.get(device, 4096)
    n = max(256, int(base * min(1.0, 20 / max(T, 1))))
    return n if n <= 1024 else -(-n // 1024) * 1024


class DiscoverWarning(UserWarning):
    """Something about a discovery run its user should know; the CLI prints it as one line."""
    one_line = True


def _projection_cannot_separate(settings: DiscoverSettings, params) -> bool:
    """Whether PROJECTION is left out of an ``--algorithm both`` round: Buhler & Tompa's trial count for its
    ``k``, bucket threshold ``s`` and ``t_hat`` (the sequences expected to hold the motif) reaches the cap
    (:data:`workers.discover.projection.MAX_TRIALS`): the planted bucket is out of reach (e.g. ``s`` over ``t_hat``:
    random buckets that full; 20 peaks of 3 kb at width 10), and the trials would take hours.  Given ``--trials``,
    or with ``--algorithm projection``, it runs as asked, with a warning."""
    from workers.discover.projection import MAX_TRIALS  # noqa: PLC0415

    if params.m < MAX_TRIALS or settings.trials is not None:
        return False
    import warnings  # noqa: PLC0415

    skip = settings.algorithm == "both"
    warnings.warn(DiscoverWarning(
        f"PROJECTION would need {MAX_TRIALS:,} trials or more here (projection size k = {params.k}, bucket threshold "
        f"s = {params.s}, {params.t_hat} sequences expected to hold the motif): it cannot single the motif out, "
        + ("so this round runs the Gibbs sampler alone" if skip else
           "and its trials may take hours; give --trials or --bucket-threshold, or use --algorithm gibbs")),
        stacklevel=4)
    return skip


def _plan_tasks(settings: DiscoverSettings, codes: np.ndarray, device: str, n_workers: int = 1):
    """Task list.  CPU: batches of 32 trials and 2048 chains (many small tasks keep the threads busy).  GPU:
    each kernel launch does a whole batch, so the trials and the chains are each split evenly over the
    workers (one GPU each), chains in whole blocks of 1024."""
    tasks = []
    params = None
    gpu = device == "gpu"
    n_workers = max(1, int(n_workers))
    if settings.algorithm in ("projection", "both"):
        params = projection_parameters(settings, codes)
        if _projection_cannot_separate(settings, params):
            params = None                  # --algorithm both: Gibbs alone this round (said in a warning)
    if params is not None:
        m = params.m
        per = settings.trials_per_task or (-(-m // n_workers) if gpu else 32)
        for b, a in enumerate(range(0, m, per)):
            tasks.append(("projection", b, a, min(per, m - a)))
    n_chains = 0
    if settings.algorithm in ("gibbs", "both"):
        n_chains = settings.chains or default_chains(settings, codes.shape[0], device)
        per = settings.chains_per_task or ((-(-n_chains // (1024 * n_workers)) * 1024) if gpu else 2048)
        for b, a in enumerate(range(0, n_chains, per)):
            tasks.append(("gibbs", b, a, min(per, n_chains - a)))
    return tasks, params, n_chains


def discover(seqs: SequenceSet, settings: DiscoverSettings, client, device: str = "cpu",
             progress=None) -> tuple[list, dict]:
    """Run every round on ``client``; returns the motifs found and run statistics."""
    from workers.discover.windows import background  # noqa: PLC0415

    settings.check(seqs)
    codes = seqs.codes.copy()
    bg = background(seqs.codes, settings.both_strands)
    found, stats = [], {"rounds": []}
    for rnd in range(settings.motifs):
        t0 = time.perf_counter()
        if int(((codes < 4).sum(axis=1) >= settings.width).sum()) < 2:
            break           # masked out: nothing left to search
        ctx = RoundContext(codes=codes.copy(), settings=settings, background=bg, device=device, round=rnd)
        n_workers = len(client.scheduler_info().get("workers", {})) or 1
        tasks, params, n_chains = _plan_tasks(settings, codes, device, n_workers)
        ctx_f = client.scatter(ctx, broadcast=True, hash=False)
        futs = []
        for kind, b, a, n in tasks:
            if kind == "projection":
                futs.append(client.submit(projection_task, ctx_f, b, a, n, params.k, params.s, pure=False,
                                          key=f"discover-projection-{rnd}-{b}-{os.urandom(3).hex()}"))
            else:
                futs.append(client.submit(gibbs_task, ctx_f, b, a, n, 1024, pure=False,
                                          key=f"discover-gibbs-{rnd}-{b}-{os.urandom(3).hex()}"))
        try:
            results = client.gather(futs)
            for (kind, *_), r in zip(tasks, results):
                r["origin"] = kind
            t1 = time.perf_counter()
            motif = client.submit(merge_task, ctx_f, results, pure=False,
                                  key=f"discover-merge-{rnd}-{os.urandom(3).hex()}").result()
        except CancelledError as e:      # the scheduler dropped the round's tasks: its workers all left
            raise DiscoverError(f"a discovery task was cancelled by the cluster (did every worker leave the "
                                f"scheduler?): {e}") from None
        t2 = time.perf_counter()
        found.append(motif)
        for i, p0, _s, *_ in motif.sites:
            codes[i, p0:p0 + settings.width] = 4          # mask and repeat
        stats["rounds"].append({
            "round": rnd, "tasks": len(tasks), "seconds_tasks": t1 - t0, "seconds_merge": t2 - t1,
            "projection": None if params is None else {"k": params.k, "s": params.s, "m": params.m,
                                                       "p_hat": params.p_hat, "t_hat": params.t_hat,
                                                       "seeds": int(sum(r.get("seeds", 0) for r in results))},
            "task_seconds": {k: float(sum(r["seconds"] for (kind, *_), r in zip(tasks, results) if kind == k))
                             for k in ("projection", "gibbs")},
            "gibbs_chains": n_chains,
            "gibbs_steps": int(sum(r.get("steps", 0) for r in results)),
            "task_phases": _phases(tasks, results),
            "climbed_starts": int(sum(r["climbed"].starts for r in results if r.get("climbed") is not None)),
            "climbed": {k: sorted({"".join("ACGT"[x] for x in c) for (kind, *_), r in zip(tasks, results)
                                   if kind == k and r.get("climbed") is not None for c in r["climbed"].cons})
                        for k in ("projection", "gibbs")},
        })
        if progress:
            progress(rnd, motif, t2 - t0)
    stats["background"] = [float(x) for x in bg]
    return found, stats


def _phases(tasks, results) -> dict:
    out: dict = {}
    for (kind, *_), r in zip(tasks, results):
        for k, v in (r.get("phases") or {}).items():
            out.setdefault(kind, {})[k] = out.get(kind, {}).get(k, 0.0) + float(v)
    return out




def run_discover(fasta: str, out: str, settings: DiscoverSettings, client, device: str = "cpu",
                 compare_to: str | None = None, command: str | None = None, progress=None,
                 started: float | None = None) -> DiscoverResult:
    """Read, check, discover on ``client`` and write ``out``; nothing is left in ``out`` on failure.

    ``started``: the ``time.perf_counter()`` the run's time counts from (the CLI passes the start of the
    command, so the cluster's start-up is in it); by default the call of this function.  The result's
    ``seconds`` and ``summary.json``'s are the same number: from ``started`` to every output written;
    ``summary.json``'s ``seconds_by_phase`` splits it (``setup``: reading, checks and what came before the
    call; ``search``: the discovery rounds; ``compare_to``; ``write``: the files)."""
    t0 = time.perf_counter() if started is None else started
    seqs = read_sequences(fasta)
    settings.check(seqs)
    if compare_to:
        from pipeline.motifs import read_motifs  # noqa: PLC0415

        read_motifs(compare_to)                      # a bad database fails before any work
    outp = create_output(out)
    created = []
    try:
        t_search = time.perf_counter()
        found, stats = discover(seqs, settings, client, device=device, progress=progress)
        stats["seconds"] = {"setup": t_search - t0, "search": time.perf_counter() - t_search}
        summary = write_outputs(outp, seqs, settings, found, stats, t0, device, compare_to=compare_to,
                                command=command or " ".join(shlex.quote(a) for a in sys.argv), client=client)
        created = summary["files"]
    except BaseException:
        for name in ("summary.json", "summary.tsv", "sites.parquet", "motifs.jaspar", "motifs.meme"):
            f = outp / name
            if f.exists():
                f.unlink()
        if not any(outp.iterdir()):
            outp.rmdir()
        raise
    return DiscoverResult(out=str(outp), motifs=summary["motifs"], seconds=summary["seconds"],
                          device=device, stats=stats | {"files": created, "seconds": summary["seconds_by_phase"]})
