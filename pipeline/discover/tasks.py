"""What discovery's tasks run on a worker: a batch of PROJECTION trials or Gibbs chains on the round's scattered
context (``RoundContext``), each sending back its best few distinct models, and the merge task that polishes their
union by EM and ranks it (``FoundMotif``)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from pipeline.discover.inputs import DiscoverError, DiscoverSettings


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
