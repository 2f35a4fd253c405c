"""Where the GPU time of `motifgrid discover` goes: the Gibbs array program (the first GPU version, one CuPy
operation per array step) against the one-launch chain kernel, the (l, d) kernels, and per-phase timers of
whole `discover()` calls.  Run on the GPU machine (benchmarks/device_discovery.sh, PROFILE=1).

    python benchmarks/profile_discovery.py --json out.jsonl
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.io.genome import encode  # noqa: E402
from tests.planted import planted_instance  # noqa: E402


def timed(fn, sync):
    sync()
    t = time.perf_counter()
    out = fn()
    sync()
    return out, time.perf_counter() - t


def kernels(args, emit):
    import cupy

    from workers.discover import gpu as dg
    from workers.discover.gibbs import random_starts, run_chains
    from workers.discover.windows import make_windows

    sync = cupy.cuda.Device().synchronize
    for spec in args.sets:
        l, d = (int(x) for x in spec.split(","))
        seed = 10_000 * l + 100 * d + 1
        pi = planted_instance(l, d, t=20, n=600, seed=seed)
        codes = np.stack([encode(s) for s in pi.sequences])
        win = make_windows(codes, l, False, xp=cupy)
        bg = np.full(4, 0.25)
        M = np.array(["ACGT".index(c) for c in pi.motif], np.uint8)
        dg.run_chains_device(win, bg, 1024, seed=1)          # compile + warm up
        sync()
        # the first GPU version: the array program, one CuPy operation per array step
        starts = random_starts(win, 16384, np.random.default_rng(0))
        res, dt = timed(lambda: run_chains(win, starts, bg, max_steps=args.array_steps, engine="arrays"), sync)
        emit({"what": "gibbs arrays", "set": spec, "chains": 16384, "steps": args.array_steps, "seconds": dt,
              "ms_per_step": 1e3 * dt / args.array_steps})
        res, dt = timed(lambda: run_chains(win, starts, bg, max_steps=args.array_steps), sync)
        emit({"what": "gibbs kernel, same chains and steps", "set": spec, "chains": 16384, "steps": args.array_steps,
              "seconds": dt, "same_positions": float((res.positions == run_chains(
                  win, starts, bg, max_steps=args.array_steps, engine="arrays").positions).all(axis=1).mean())})
        for C in args.chains:
            r, dt = timed(lambda: dg.run_chains_device(win, bg, C, seed=7), sync)
            steps = int(r["steps"].sum())
            emit({"what": "gibbs kernel", "set": spec, "chains": C, "seconds": dt, "steps": steps,
                  "mean_steps": steps / C, "window_scores_per_s": steps * win.P / dt,
                  "column_lookups_per_s": steps * win.P * l / dt})
            keys = dg.consensus_keys(cupy, r["counts"], l, bg, 1.0)
            uk = cupy.unique(keys)
            (cnt, tot), dt2 = timed(lambda: dg.ld_proxy_device(win, uk, d + 1), sync)
            emit({"what": "ld_proxy", "set": spec, "consensus": int(uk.size), "seconds": dt2,
                  "window_compares_per_s": int(uk.size) * win.T * win.P / dt2})
            if C > args.climb_max:
                continue
            cl, dt3 = timed(lambda: dg.climb_from_sites(win, r["pos"], d, keep=64), sync)
            hit = [bool((c == M).all()) for c in cl.cons]
            # how many chains climb to the planted motif (diagnostic): climb every start, count
            cons, ns = dg.shift_consensus_device(win, r["pos"])
            allc = cons[ns > 0]
            out, c2, t2, mv = dg.ld_climb_device(win, allc, d)
            n_hit = int((out == cupy.asarray(dg.pack_words(M[None]))[0]).sum())
            emit({"what": "climb", "set": spec, "chains": C, "starts_unique": cl.starts, "seconds": dt3,
                  "planted_rank": hit.index(True) if any(hit) else None, "starts_reaching_planted": n_hit,
                  "starts_total": int(allc.size), "mean_moves": float(mv.mean())})


def pipeline(args, emit):
    from benchmarks.discovery import shared_data
    from pipeline.engine.cluster import get_client
    from pipeline.discover.run import discover
    from pipeline.discover.inputs import DiscoverSettings, read_sequences
    import tempfile

    with get_client(device="gpu", quiet=True) as (client, device), tempfile.TemporaryDirectory() as tmp:
        for spec in args.pipeline_sets:
            zoops = spec.startswith("z")
            l, d = (int(x) for x in spec.lstrip("z").split(","))
            for k in range(args.instances):
                pi = planted_instance(l, d, t=20, n=600, seed=10_000 * l + 100 * d + k + (50 if zoops else 0),
                                      sites=15 if zoops else None)
                seqs = read_sequences(pi.write(Path(tmp) / f"{spec}-{k}.fa"))
                st = DiscoverSettings(width=l, mutations=d, model="zoops" if zoops else "oops", seed=k,
                                      chains=args.pipeline_chains)
                t = time.perf_counter()
                found, stats = discover(seqs, st, client, device=device)
                r = stats["rounds"][0]
                emit({"what": "discover", "set": spec, "instance": k, "seconds": time.perf_counter() - t,
                      "ok": found[0].consensus == pi.motif, "by": found[0].origin, "ld_count": found[0].ld_count,
                      "tasks_wall": r["seconds_tasks"], "merge": r["seconds_merge"], "phases": r["task_phases"],
                      "chains": r["gibbs_chains"], "climbed_starts": r["climbed_starts"],
                      "seeds": (r["projection"] or {}).get("seeds")})
        if args.ctcf:
            fa = shared_data() / "benchmarks/chipseq_peaks/Gm12878.CTCF.top500.w200.fa"
            st = DiscoverSettings(width=15, both_strands=True, model="zoops", seed=0)
            t = time.perf_counter()
            found, stats = discover(read_sequences(fa), st, client, device=device)
            r = stats["rounds"][0]
            emit({"what": "ctcf", "seconds": time.perf_counter() - t, "consensus": found[0].consensus,
                  "tasks_wall": r["seconds_tasks"], "merge": r["seconds_merge"], "phases": r["task_phases"],
                  "task_seconds": r["task_seconds"], "chains": r["gibbs_chains"], "steps": r["gibbs_steps"]})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sets", nargs="*", default=["16,5", "18,6"])
    ap.add_argument("--chains", type=int, nargs="*", default=[65536, 262144, 1048576])
    ap.add_argument("--array-steps", type=int, default=100)
    ap.add_argument("--climb-max", type=int, default=262144, help="climb diagnostics up to this many chains")
    ap.add_argument("--pipeline-sets", nargs="*", default=["15,4", "16,5", "18,6", "z15,4"])
    ap.add_argument("--pipeline-chains", type=int)
    ap.add_argument("--instances", type=int, default=2)
    ap.add_argument("--ctcf", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    f = open(args.json, "a") if args.json else None

    def emit(row):
        print(json.dumps(row), flush=True)
        if f:
            f.write(json.dumps(row) + "\n")
            f.flush()
    if args.sets:
        kernels(args, emit)
    if args.pipeline_sets or args.ctcf:
        pipeline(args, emit)


if __name__ == "__main__":
    main()
