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

import gzip
import hashlib
import json
import math
import os
import shlex
import sys
import time
from concurrent.futures import CancelledError
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from pipeline import MotifgridError, __version__
from pipeline.io import arrow

ALGORITHMS = ("gibbs", "projection", "both")
MODELS = ("oops", "zoops")


class DiscoverError(MotifgridError, RuntimeError):
    """Bad discovery input or settings; ``str(e)`` is one line for the user."""


# ------------------------------------------------------------------------------------ input
@dataclass
class SequenceSet:
    """Sequences as codes ``(T, Lmax)`` uint8 padded with 4, their names and lengths."""
    source: str
    checksum: str
    names: list
    codes: np.ndarray
    lengths: np.ndarray

    @property
    def T(self) -> int:
        return len(self.names)


_ALLOWED = set(b"ACGTUNRYSWKMBDHVacgtunryswkmbdhv-.*")


def read_sequences(path: str | os.PathLike) -> SequenceSet:
    """Read a FASTA file (plain or gzip) of DNA sequences; strict, errors name the file, line and record.

    Letters other than A C G T (N, IUPAC codes, ``-``) become code 4 and no window holding one is used.
    """
    from pipeline.io.genome import encode  # noqa: PLC0415

    src = os.fspath(path)
    p = Path(src)
    if not p.exists():
        raise DiscoverError(f"{src}: no such file")
    if p.is_dir():
        raise DiscoverError(f"{src}: is a directory, not a FASTA file")
    data = p.read_bytes()
    checksum = "sha256:" + hashlib.sha256(data).hexdigest()
    if data[:2] == b"\x1f\x8b":
        if data[12:14] == b"BC":
            from pipeline.io.fasta import check_bgzf_end  # noqa: PLC0415

            check_bgzf_end(src, error=DiscoverError)
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise DiscoverError(f"{src}: corrupt gzip data ({e})") from None
    if b"\x00" in data[:65536]:
        raise DiscoverError(f"{src}: binary file, not FASTA")
    names, seqs, cur, header_line, seen = [], [], None, 0, {}
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    for ln, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        if s.startswith(b">"):
            if cur is not None and not cur:
                raise DiscoverError(f"{src} line {header_line}: record {names[-1]!r} has no sequence")
            words = s[1:].split()
            if not words:
                raise DiscoverError(f"{src} line {ln}: empty FASTA header")
            name = words[0].decode("utf-8", "replace")
            if name in seen:        # the sites name their sequence: two of one name could not be told apart
                raise DiscoverError(f"{src} line {ln}: duplicate record name {name!r} (records {seen[name]:,} and "
                                    f"{len(names) + 1:,}); give each sequence its own name")
            seen[name] = len(names) + 1
            names.append(name)
            cur = []
            seqs.append(cur)
            header_line = ln
            continue
        if s.startswith(b";"):
            continue
        if cur is None:
            raise DiscoverError(f"{src} line {ln}: sequence before the first '>' header (not FASTA)")
        bad = set(s) - _ALLOWED
        if bad:
            ch = chr(min(bad))
            raise DiscoverError(f"{src} line {ln}: record {names[-1]!r} has the character {ch!r}, "
                                "not a DNA letter")
        cur.append(s)
    if cur is not None and not cur:
        raise DiscoverError(f"{src} line {header_line}: record {names[-1]!r} has no sequence")
    if not names:
        raise DiscoverError(f"{src}: no FASTA records")
    joined = [b"".join(c) for c in seqs]
    lengths = np.array([len(c) for c in joined], np.int64)
    codes = np.full((len(joined), int(lengths.max())), 4, np.uint8)
    for i, c in enumerate(joined):
        codes[i, :len(c)] = encode(c)
    return SequenceSet(source=src, checksum=checksum, names=names, codes=codes, lengths=lengths)


def clean_windows(codes: np.ndarray, width: int, rows: int = 4096) -> np.ndarray:
    """Windows of ``width`` letters without code 4 (N, IUPAC, padding) in each sequence, the only ones discovery
    uses.

    Parameters
    ----------
    codes : numpy.ndarray, shape (T, Lmax), uint8
        Padded with code 4 (:class:`SequenceSet`).
    width : int
    rows : int
        Sequences counted at a time (bounds the prefix sums' memory).

    Returns
    -------
    numpy.ndarray, shape (T,), int64
    """
    T, L = codes.shape
    out = np.zeros(T, np.int64)
    if L < width:
        return out
    for a in range(0, T, rows):
        n = np.zeros((min(rows, T - a), L + 1), np.int32)
        np.cumsum(codes[a:a + rows] == 4, axis=1, out=n[:, 1:])
        out[a:a + rows] = (n[:, width:] == n[:, :-width]).sum(axis=1)
    return out


# ------------------------------------------------------------------------------------ settings
@dataclass
class DiscoverSettings:
    width: int
    algorithm: str = "both"
    mutations: int | None = None          # d of an (l, d) problem: (l, d) ranking and PROJECTION's k
    model: str = "zoops"
    both_strands: bool = False
    motifs: int = 1
    seed: int = 0
    trials: int | None = None             # PROJECTION trials m (default: Buhler & Tompa's formula)
    projection_k: int | None = None
    bucket_threshold: int | None = None
    chains: int | None = None             # Gibbs chains (default by device)
    update: str = "best"                  # Gibbs update: best (deterministic) | sample
    max_sweeps: int = 20
    trials_per_task: int | None = None    # default 32 on CPU; on GPUs all trials split evenly over the workers
    chains_per_task: int | None = None    # default 2048 on CPU; on GPUs all chains split evenly over the workers
    em_iters: int = 5
    em_keep: int | None = None            # models per PROJECTION task that go on after the screen (default
    em_keep_per_trial: int = 128          # 256 on CPU; on GPUs max(4096, em_keep_per_trial x trials of the task))
    screen_sequences: int = 64            # the screen looks at this many sequences of larger sets
    return_per_task: int = 16             # distinct models each task sends back
    refine_top: int = 32                  # models of the merge that get the (l, d) local search
    polish_iters: int = 20
    ld_rank: bool = True                  # False: rank (l, d) problems by likelihood too (the papers' way)
    max_buckets: int = 1000
    device_chains: dict = field(default_factory=lambda: {"cpu": 4096, "gpu": 1048576})

    def check(self, seqs: SequenceSet) -> None:
        if self.algorithm not in ALGORITHMS:
            raise DiscoverError(f"--algorithm must be one of {', '.join(ALGORITHMS)}, got {self.algorithm!r}")
        if self.model not in MODELS:
            raise DiscoverError(f"--model must be one of {', '.join(MODELS)}, got {self.model!r}")
        if self.update not in ("best", "sample"):
            raise DiscoverError(f"--update must be best or sample, got {self.update!r}")
        if self.width < 2:
            raise DiscoverError(f"--width must be >= 2, got {self.width}")
        if self.mutations is not None and not 0 <= self.mutations < self.width:
            raise DiscoverError(f"--mutations must be in [0, width), got {self.mutations} for width {self.width}")
        if self.projection_k is not None and not 1 <= self.projection_k <= min(self.width, 15):
            raise DiscoverError(f"--projection-k must be in [1, min(width, 15)], got {self.projection_k}")
        if seqs.T < 2:
            raise DiscoverError(f"{seqs.source}: motif discovery needs at least 2 sequences, got {seqs.T}")
        usable = int((seqs.lengths >= self.width).sum())
        if usable < 2:
            raise DiscoverError(f"{seqs.source}: fewer than 2 sequences are at least --width {self.width} long "
                                f"(longest {int(seqs.lengths.max())})")
        clean = clean_windows(seqs.codes, self.width)     # an all-N set would otherwise end with no motif, exit 0
        if int((clean > 0).sum()) < 2:
            raise DiscoverError(f"{seqs.source}: fewer than 2 sequences have a --width {self.width} window without N "
                                f"or another non-ACGT letter ({int((clean > 0).sum())} do; {int(clean.sum()):,} "
                                "such windows in all)")
        if self.motifs < 1:
            raise DiscoverError(f"--motifs must be >= 1, got {self.motifs}")

    @property
    def d_for_projection(self) -> int:
        """d used to choose PROJECTION's k (the given --mutations, else width/4 for real data)."""
        return self.mutations if self.mutations is not None else max(1, round(self.width / 4))


@dataclass
class RoundContext:
    """What every task of one round needs; scattered to each worker once."""
    codes: np.ndarray
    settings: DiscoverSettings
    background: np.ndarray
    device: str
    round: int

    def windows(self):
        from workers.backend import array_module, limit_blas_threads  # noqa: PLC0415

        if self.device == "cpu":
            limit_blas_threads(1)      # one BLAS thread per Dask thread (tasks run side by side)
        from workers.discover.windows import make_windows  # noqa: PLC0415

        return make_windows(self.codes, self.settings.width, self.settings.both_strands,
                            xp=array_module(self.device))


def _seed(settings: DiscoverSettings, rnd: int, algo: int, batch: int) -> np.random.SeedSequence:
    return np.random.SeedSequence(settings.seed, spawn_key=(rnd, algo, batch))


def projection_parameters(settings: DiscoverSettings, codes: np.ndarray):
    from workers.discover.projection import choose_parameters  # noqa: PLC0415

    T = codes.shape[0]
    n = int(np.median((codes < 4).sum(axis=1)))
    return choose_parameters(settings.width, settings.d_for_projection, T, n, both_strands=settings.both_strands,
                             model=settings.model, k=settings.projection_k, s=settings.bucket_threshold,
                             m=settings.trials)


# ------------------------------------------------------------------------------------ tasks
def _on_device(ctx: RoundContext) -> bool:
    """GPU tasks use the batched kernels of :mod:`workers.discover.gpu` (packed windows: widths up to 32)."""
    return ctx.device == "gpu" and ctx.settings.width <= 32


def _ld(st: DiscoverSettings) -> bool:
    return st.mutations is not None and st.ld_rank


def _timer():
    t = {"t": time.perf_counter()}

    def lap(out: dict, name: str, sync=None):
        if sync is not None:
            sync()
        now = time.perf_counter()
        out[name] = out.get(name, 0.0) + now - t["t"]
        t["t"] = now
    return lap


def _sync(win):
    return (lambda: win.xp.cuda.Device().synchronize()) if win.xp is not np else None


def projection_task(ctx: RoundContext, batch: int, first: int, n_trials: int, k: int, s: int) -> dict:
    """Trials ``first .. first + n_trials`` of PROJECTION: buckets, EM, the best distinct models back.

    On the GPU (l, d) problems also climb the (l, d) objective from every refined model's sites at the
    phase shifts (:func:`workers.discover.gpu.climb_from_sites`) and send back the best optima."""
    from workers.discover.projection import em_refine, projection_seeds, random_positions  # noqa: PLC0415

    st = ctx.settings
    t0 = time.perf_counter()
    phases: dict = {}
    lap = _timer()
    win = ctx.windows()
    sync = _sync(win)
    lap(phases, "windows", sync)
    rng = np.random.default_rng(_seed(st, ctx.round, 0, batch))
    pos = random_positions(rng, n_trials, st.width, k)
    # trials in chunks so the (trials, windows, k) gather stays small
    per = max(1, (1 << 24) // max(1, win.T * win.P * k))
    seeds = []
    for a in range(0, n_trials, per):
        ppm, _ = projection_seeds(win, k, s, pos[a:a + per], max_buckets=st.max_buckets, bg=ctx.background)
        seeds.append(ppm)
    ppm0 = np.concatenate(seeds) if seeds else np.zeros((0, st.width, 4))
    n_seeds = ppm0.shape[0]
    lap(phases, "buckets", sync)
    if n_seeds == 0:
        return {"ppm": np.zeros((0, st.width, 4)), "loglik": np.zeros(0), "seeds": 0,
                "seconds": time.perf_counter() - t0, "phases": phases}
    keep = st.em_keep or (max(4096, st.em_keep_per_trial * n_trials) if ctx.device == "gpu" else 256)
    res = em_refine(win, ppm0, ctx.background, st.model, iters=st.em_iters, screen_iters=0, keep=keep,
                    memory_budget=_budget(ctx.device), screen_sequences=st.screen_sequences)
    lap(phases, "em", sync)
    top = _task_best(win, st, res.ppm, res.loglik)
    lap(phases, "select", sync)
    out = {"ppm": res.ppm[top], "loglik": res.loglik[top], "seeds": n_seeds, "em_models": int(len(res.ppm))}
    if _on_device(ctx) and _ld(st):
        from workers.discover.gpu import best_windows_device, climb_from_sites  # noqa: PLC0415

        sites = best_windows_device(win, res.ppm, ctx.background, memory_budget=_budget(ctx.device))
        out["climbed"] = climb_from_sites(win, sites, st.mutations, keep=st.return_per_task)
        lap(phases, "climb", sync)
    return out | {"seconds": time.perf_counter() - t0, "phases": phases}


def _task_best(win, st: DiscoverSettings, ppm: np.ndarray, score: np.ndarray) -> np.ndarray:
    """The distinct models a task sends back: by score, or for (l, d) problems by the (l, d) proxy
    (:func:`workers.discover.refine.ld_proxy_order`)."""
    from workers.discover.gibbs import distinct_best  # noqa: PLC0415
    from workers.discover.refine import ld_proxy_order  # noqa: PLC0415

    if not _ld(st):
        return distinct_best(ppm, score, st.return_per_task)
    pool = distinct_best(ppm, score, len(ppm))
    order = pool[ld_proxy_order(win, ppm[pool], st.mutations)]
    rank = np.empty(len(ppm))
    rank[:] = np.inf
    rank[order] = -np.arange(len(order), 0, -1)            # best proxy first
    return distinct_best(ppm, -rank, st.return_per_task)


def _chain_windows(win):
    """Gibbs runs on the sequences that have a valid window (an all-N or too short sequence has no site)."""
    rows = np.flatnonzero(win.n_valid > 0)
    return win if rows.size == win.T else win.subset(rows)


def gibbs_task(ctx: RoundContext, batch: int, first: int, n_chains: int, block: int) -> dict:
    """Chains ``first .. first + n_chains`` (starts drawn per block of ``block`` chains, so the same chain
    gets the same start however chains are grouped into tasks)."""
    from workers.discover.gibbs import random_starts, run_chains  # noqa: PLC0415

    st = ctx.settings
    t0 = time.perf_counter()
    win = _chain_windows(ctx.windows())
    if win.T < 2:
        return {"ppm": np.zeros((0, st.width, 4)), "score": np.zeros(0), "chains": n_chains, "steps": 0,
                "seconds": time.perf_counter() - t0}
    if _on_device(ctx):
        return _gibbs_task_device(ctx, win, first, n_chains, t0)
    starts = []
    for b in range(first // block, (first + n_chains + block - 1) // block):
        rng = np.random.default_rng(_seed(st, ctx.round, 1, b))
        starts.append(random_starts(win, block, rng))
    starts = np.concatenate(starts)[first % block:first % block + n_chains]
    res = run_chains(win, starts, ctx.background, update=st.update, max_sweeps=st.max_sweeps,
                     seed=int(_seed(st, ctx.round, 2, batch).generate_state(1)[0]))
    top = _task_best(win, st, res.ppm, res.score)
    return {"ppm": res.ppm[top], "score": res.score[top], "chains": n_chains, "steps": int(res.steps.sum()),
            "seconds": time.perf_counter() - t0}


def _gibbs_task_device(ctx: RoundContext, win, first: int, n_chains: int, t0: float) -> dict:
    """GPU chains: one kernel launch runs them all (starts drawn in the kernel from the round's seed and the
    chain's global index); the best distinct chains by score — or for (l, d) problems by the (l, d) proxy,
    computed for every distinct chain consensus on the device — go back, and for (l, d) problems the
    (l, d) local search climbs from every chain's sites at the phase shifts."""
    from workers.discover.gpu import (climb_from_sites, consensus_keys, ld_proxy_device,  # noqa: PLC0415
                                      run_chains_device)

    st = ctx.settings
    xp, l, bg = win.xp, win.l, ctx.background
    phases: dict = {}
    lap = _timer()
    sync = _sync(win)
    seed = int(_seed(st, ctx.round, 1, 0).generate_state(1, np.uint64)[0])
    r = run_chains_device(win, bg, n_chains, first=first, seed=seed, update=st.update, max_sweeps=st.max_sweeps)
    lap(phases, "chains", sync)
    keys = _host(consensus_keys(xp, r["counts"], l, bg, 1.0))
    score = _host(r["score"])
    order = np.argsort(-score, kind="stable")
    _, fi = np.unique(keys[order], return_index=True)
    pool = order[np.sort(fi)]                       # distinct consensus, best score first
    if _ld(st):
        cnt, tot = ld_proxy_device(win, keys[pool], st.mutations + 1)
        pool = pool[np.lexsort((_host(tot), -_host(cnt)))]
    top = pool[:st.return_per_task]
    cnt_top = _host(r["counts"][xp.asarray(top)]).reshape(-1, l, 4).astype(np.float64)
    ppm = (cnt_top + bg) / (win.T + 1.0)
    lap(phases, "select", sync)
    out = {"ppm": ppm, "score": score[top], "chains": n_chains, "steps": int(_host(r["steps"]).sum()),
           "distinct": int(len(fi))}
    if _ld(st):
        out["climbed"] = climb_from_sites(win, r["pos"], st.mutations, keep=st.return_per_task)
        lap(phases, "climb", sync)
    return out | {"seconds": time.perf_counter() - t0, "phases": phases}


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _budget(device: str) -> int:
    return (1 << 26) if device == "gpu" else (1 << 23)


@dataclass
class FoundMotif:
    """One discovered motif: its counts, sites and scores (host objects only)."""
    index: int
    consensus: str
    counts: np.ndarray            # (l, 4) site counts
    sites: list                   # (seq index, start, strand, score bits, mismatches, site string)
    loglik: float                 # log-likelihood ratio (bits) of the polished model under the model asked for
    gamma: float
    information_content: float    # bits, from the site counts with pseudocount
    ld_count: int | None          # sequences with an l-mer within d of the consensus ((l, d) problems)
    ld_distance: int | None
    origin: str                   # which algorithm's model won


def merge_task(ctx: RoundContext, results: list) -> FoundMotif:
    """Polish the union of the tasks' models by EM and pick the motif (see the module docstring)."""
    from workers.discover.gibbs import distinct_best  # noqa: PLC0415
    from workers.discover.projection import em_refine, em_sites  # noqa: PLC0415
    from workers.discover.refine import ld_local_search, ld_sites, shifted_consensus  # noqa: PLC0415

    st = ctx.settings
    win = ctx.windows()
    bg = ctx.background
    ppms, origin = [], []
    for r in results:
        ppms.append(r["ppm"])
        origin += [r["origin"]] * len(r["ppm"])
    ppm = np.concatenate(ppms)
    origin = np.asarray(origin)
    if ppm.shape[0] == 0:
        raise DiscoverError("no candidate motif came back (no enriched bucket and no chain); "
                            "try more --trials or a smaller --bucket-threshold")
    res = em_refine(win, ppm, bg, st.model, iters=st.em_iters, memory_budget=_budget(ctx.device))
    d = st.mutations
    if d is not None and st.ld_rank:
        from workers.discover.refine import ld_proxy_order  # noqa: PLC0415

        order = ld_proxy_order(win, res.ppm, d)
        top = order[distinct_best(res.ppm[order], -np.arange(len(order), dtype=float), st.refine_top)]
    else:
        top = distinct_best(res.ppm, res.loglik, st.refine_top)
    l = st.width
    best = None
    if d is not None and st.ld_rank:
        for c in top:
            b, _, post = em_sites(win, res.ppm[c], bg, st.model, res.gamma[c])
            use = post > 0.5 if st.model == "zoops" else win.n_valid > 0
            if not use.any():
                use = win.n_valid > 0
            for start in shifted_consensus(win, b, use):
                cons, cnt, tot = ld_local_search(win, start, d)
                key = (cnt, -tot, float(res.loglik[c]))
                if best is None or key > best[0]:
                    best = (key, cons, str(origin[res.index[c]]))
        for key, cons, org in _climbed_candidates(win, st, bg, results):
            if best is None or key > best[0]:
                best = (key, cons, org)
        cons = best[1]
        arg, dist = ld_sites(win, cons)
        keep = (dist <= d) if st.model == "zoops" else (arg >= 0)
        idx = np.flatnonzero(keep)
        counts = _site_counts(win, idx, arg[idx])
        found_by = best[2]
        pol = em_refine(win, (counts + 0.5 * bg) / (counts.sum(axis=1, keepdims=True) + 0.5)[None],
                        bg, st.model, iters=0)
        loglik, gamma = float(pol.loglik[0]), float(pol.gamma[0])
        ld_count, ld_dist = best[0][0], -best[0][1]
    else:
        first = top[:max(1, min(len(top), 8))]
        pol = em_refine(win, res.ppm[first], bg, st.model, iters=st.polish_iters)
        c = first[pol.index[0]]
        found_by = str(origin[res.index[c]])
        b, _, post = em_sites(win, pol.ppm[0], bg, st.model, pol.gamma[0])
        keep = (post > 0.5) if st.model == "zoops" else (win.n_valid > 0)
        idx = np.flatnonzero(keep)
        counts = _site_counts(win, idx, b[idx])
        cons = np.argmax(counts, axis=1).astype(np.uint8)
        arg = b
        dist = (win.codes[np.arange(win.T), b] != cons[None, :]).sum(axis=1)
        loglik, gamma = float(pol.loglik[0]), float(pol.gamma[0])
        ld_count = ld_dist = None
    # sites, scored with the scan's PWM model (pseudocount 0.1, background of the sequences)
    from pipeline.motifs import Motif, pwm_from_motif  # noqa: PLC0415
    from workers.discover.windows import relative_entropy  # noqa: PLC0415

    pwm = pwm_from_motif(Motif("m", "m", counts, "counts", float(counts.sum(axis=1).max()), "", 1), bg)
    sites = []
    starts, strands = win.position(arg[idx])
    for i, w, p0, s0 in zip(idx, arg[idx], starts, strands):
        letters = win.codes[i, w]
        sites.append((int(i), int(p0), int(s0), float(pwm[np.arange(l), letters].sum()),
                      int(dist[i]), "".join("ACGT"[x] for x in letters)))
    ppm_ic = (counts + 0.1 * bg) / (counts.sum(axis=1, keepdims=True) + 0.1)
    return FoundMotif(index=ctx.round, consensus="".join("ACGT"[x] for x in cons), counts=counts, sites=sites,
                      loglik=loglik / math.log(2), gamma=gamma,
                      information_content=float(relative_entropy(ppm_ic, bg).sum()),
                      ld_count=ld_count, ld_distance=ld_dist, origin=found_by)


def _climbed_candidates(win, st: DiscoverSettings, bg: np.ndarray, results: list) -> list:
    """(key, consensus, origin) of the (l, d) optima the GPU tasks climbed to, keyed like the merge's own:
    (sequences within d, -summed distance, likelihood of the model of the consensus' closest sites)."""
    from workers.discover.projection import em_refine  # noqa: PLC0415
    from workers.discover.refine import ld_sites  # noqa: PLC0415

    rows = []
    for r in results:
        cl = r.get("climbed")
        if cl is None:
            continue
        for cons, cnt, tot in zip(cl.cons, cl.count, cl.total):
            rows.append((int(cnt), -int(tot), np.asarray(cons, np.uint8), r["origin"]))
    if not rows:
        return []
    ppm = []
    for *_, cons, _o in rows:
        arg, _ = ld_sites(win, cons)
        idx = np.flatnonzero(arg >= 0)
        counts = _site_counts(win, idx, arg[idx])
        ppm.append((counts + 0.5 * bg) / (counts.sum(axis=1, keepdims=True) + 0.5))
    ll = em_refine(win, np.stack(ppm), bg, st.model, iters=0)
    loglik = np.empty(len(rows))
    loglik[ll.index] = ll.loglik
    return [((cnt, mtot, float(loglik[k])), cons, org) for k, (cnt, mtot, cons, org) in enumerate(rows)]


def _site_counts(win, seqs: np.ndarray, wins: np.ndarray) -> np.ndarray:
    letters = win.codes[seqs, wins]                                     # (n, l)
    return np.stack([(letters == a).sum(axis=0) for a in range(4)], axis=1).astype(np.float64)


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


# ------------------------------------------------------------------------------------ outputs
def _motif_records(found: list, seqs: SequenceSet) -> list:
    from pipeline.motifs import Motif  # noqa: PLC0415

    out = []
    for m in found:
        counts = np.asarray(m.counts, np.float64)
        if counts.sum() == 0:
            counts = counts + 0.25
        mat = counts.copy()
        mat.setflags(write=False)
        out.append(Motif(f"MOTIF_{m.index + 1}", m.consensus, mat, "counts", float(len(m.sites)), "discover",
                         m.index + 1))
    return out


def compare_motifs(motifs, database: str, client=None, *, device: str = "cpu", keep: int = 4) -> list:
    """Best match of each motif in ``database`` by Tomtom's statistic — what ``motifgrid compare MOTIFS
    DATABASE`` reports with its defaults (:func:`pipeline.compare.identify.run_identify`: Euclidean column distance,
    complete scores, both strands, pseudocount 0.1).

    ``motifs``: :class:`pipeline.motifs.Motif` records or a motif file.  Returns, per motif, ``{id, name,
    pvalue, evalue, qvalue, similarity, offset, strand, overlap, length, runners_up}`` (``runners_up``: the
    next ``keep - 1`` targets with their p- and E-values).
    """
    from pipeline.compare.identify import run_identify  # noqa: PLC0415
    from pipeline.motifs import read_motifs  # noqa: PLC0415

    qs = read_motifs(motifs) if isinstance(motifs, (str, os.PathLike)) else list(motifs)
    db = read_motifs(database)
    res = run_identify(qs, db, client, top=keep, device=device)
    length = {m.id: m.length for m in db}
    rows = res.table.to_pylist()
    k = len(rows) // len(qs)                          # every query's ranks 1..k, queries in input order
    out = []
    for i in range(len(qs)):
        mine = rows[i * k:(i + 1) * k]
        best = mine[0]
        out.append({"id": best["target"], "name": best["target_name"]}
                   | {k: best[k] for k in ("pvalue", "evalue", "qvalue", "similarity", "offset", "strand", "overlap")}
                   | {"length": length[best["target"]],
                      "runners_up": [{"id": r["target"], "name": r["target_name"], "pvalue": r["pvalue"],
                                      "evalue": r["evalue"]} for r in mine[1:]]})
    return out


def create_output(out: str) -> Path:
    """A new, empty output folder (created); one that holds anything is refused (nothing is overwritten)."""
    p = Path(out)
    if p.exists() and not p.is_dir():
        raise DiscoverError(f"{out}: exists and is not a directory")
    if p.exists() and any(p.iterdir()):
        state = "a finished discovery" if (p / "summary.json").exists() else "files"
        raise DiscoverError(f"{out}: already holds {state}; choose another --out (nothing is overwritten)")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise DiscoverError(f"{out}: cannot create the output folder ({e.strerror})") from None
    return p


def write_outputs(out: Path, seqs: SequenceSet, settings: DiscoverSettings, found: list, stats: dict,
                  started: float, device: str, compare_to: str | None = None, command: str | None = None,
                  client=None) -> dict:
    """Write the output files, ``summary.json`` last.  ``started``: the ``time.perf_counter()`` the run's time
    counts from; ``summary["seconds"]`` spans from it to ``summary.json`` being written (every other file
    written, ``--compare-to`` included); ``stats["seconds"]`` may hold the earlier phases (``run_discover``)."""
    import pyarrow as pa  # noqa: PLC0415

    from pipeline.motifs import format_jaspar, format_meme  # noqa: PLC0415
    from pipeline.engine.dataset import atomic_write_bytes as _atomic_write_bytes  # noqa: PLC0415
    from pipeline.io.storage import write_parquet  # noqa: PLC0415
    from pipeline.io.schema import SITES_FORMAT_VERSION, SITES_SCHEMA  # noqa: PLC0415

    bg = np.asarray(stats["background"])
    recs = _motif_records(found, seqs)
    strands = "+ -" if settings.both_strands else "+"
    written = []
    _atomic_write_bytes(str(out / "motifs.meme"), format_meme(recs, bg, strands).encode())
    written.append("motifs.meme")
    # best matches as `motifgrid compare motifs.meme DATABASE` reports them
    t_compare = time.perf_counter()
    matches = (compare_motifs(recs, compare_to, client, device=device)
               if compare_to and recs else [None] * len(recs))
    t_compare = time.perf_counter() - t_compare
    _atomic_write_bytes(str(out / "motifs.jaspar"), format_jaspar(recs).encode())
    written.append("motifs.jaspar")
    rows = {k: [] for k in ("motif_id", "sequence", "sequence_index", "start", "end", "strand", "score",
                            "mismatches", "site")}
    for rec, m in zip(recs, found):
        for i, p0, s0, sc, mm, site in m.sites:
            rows["motif_id"].append(rec.id)
            rows["sequence"].append(seqs.names[i])
            rows["sequence_index"].append(i)
            rows["start"].append(p0)
            rows["end"].append(p0 + settings.width)
            rows["strand"].append("+-"[s0])
            rows["score"].append(sc)
            rows["mismatches"].append(mm)
            rows["site"].append(site)
    table = pa.table({k: arrow.column(v, SITES_SCHEMA.field(k).type.value_type
                                      if pa.types.is_dictionary(SITES_SCHEMA.field(k).type) else SITES_SCHEMA.field(k).type)
                      for k, v in rows.items()})
    table = pa.table([table[k].dictionary_encode() if pa.types.is_dictionary(SITES_SCHEMA.field(k).type)
                      else table[k] for k in SITES_SCHEMA.names], schema=SITES_SCHEMA)
    meta = {"motifgrid.version": __version__, "motifgrid.sites_format": str(SITES_FORMAT_VERSION),
            "motifgrid.command": command or "", "sequences.path": os.path.abspath(seqs.source),
            "sequences.checksum": seqs.checksum, "settings": json.dumps(_settings_json(settings))}
    table = table.replace_schema_metadata(meta)
    write_parquet(table, str(out / "sites.parquet"), compression="zstd")
    written.append("sites.parquet")
    motifs_json = []
    for rec, m, match in zip(recs, found, matches):
        motifs_json.append({
            "id": rec.id, "consensus": m.consensus, "width": settings.width, "sites": len(m.sites),
            "loglik_bits": m.loglik, "zoops_fraction": m.gamma, "information_content_bits": m.information_content,
            "ld_count": m.ld_count, "ld_distance_sum": m.ld_distance, "found_by": m.origin,
            "best_match": match,
        })
    match_cols = ["id", "name", "pvalue", "evalue", "offset", "strand", "overlap"]
    tsv = ["\t".join(["id", "consensus", "sites", "loglik_bits", "information_content_bits", "ld_count",
                      "found_by"] + [f"best_match_{c}" for c in match_cols])]
    for mj in motifs_json:
        bm = mj["best_match"] or {}
        tsv.append("\t".join(str(x) for x in [
            mj["id"], mj["consensus"], mj["sites"], f"{mj['loglik_bits']:.3f}", f"{mj['information_content_bits']:.3f}",
            "" if mj["ld_count"] is None else mj["ld_count"], mj["found_by"]]
            + [(f"{bm[c]:.3g}" if c in ("pvalue", "evalue") else bm[c]) if bm else "" for c in match_cols]))
    _atomic_write_bytes(str(out / "summary.tsv"), ("\n".join(tsv) + "\n").encode())
    written.append("summary.tsv")
    seconds = dict(stats.get("seconds", {}))
    seconds["compare_to"] = t_compare
    seconds["total"] = time.perf_counter() - started
    seconds["write"] = seconds["total"] - sum(v for k, v in seconds.items() if k != "total")
    summary = {
        "motifgrid_version": __version__, "command": command, "sequences": os.path.abspath(seqs.source),
        "sequences_checksum": seqs.checksum, "n_sequences": seqs.T, "total_length": int(seqs.lengths.sum()),
        "settings": _settings_json(settings), "device": device, "seconds": seconds["total"], "seconds_by_phase": seconds,
        "background": stats["background"], "compare_to": compare_to, "motifs": motifs_json,
        "rounds": stats["rounds"], "files": written,
    }
    _atomic_write_bytes(str(out / "summary.json"), json.dumps(summary, indent=1).encode())
    return summary


def _settings_json(settings: DiscoverSettings) -> dict:
    d = asdict(settings)
    d.pop("device_chains", None)
    return d


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
