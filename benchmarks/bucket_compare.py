"""Benchmarks of issue 4: BUCKETSCOREDISTRIBUTION (GPU vs CPU), thresholds of a whole database, all-pairs COMPARE.

    python benchmarks/bucket_compare.py bucket [--device cpu,gpu] [--lengths 20,30,40] [--buckets 3600]
    python benchmarks/bucket_compare.py thresholds MOTIFS [--pvalues 1e-4,1e-5,1e-6] [--methods exact,auto,bucket]
    python benchmarks/bucket_compare.py compare MOTIFS [--device gpu] [--cells 64]

Each prints one JSON line per measurement (also appended to --json FILE).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time

import numpy as np

SLICES = {20: 2, 30: 2, 40: 3}      # fixed N per length: slices of 10, 15 and 13-14 columns


def _emit(rec, path):
    line = json.dumps(rec)
    print(line, flush=True)
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")


def bench_bucket(a):
    from workers.distribution.bucket import bucket_distribution, split_slices

    rng = np.random.default_rng(2011)
    bg = np.full(4, 0.25)
    for m in [int(x) for x in a.lengths.split(",")]:
        c = rng.dirichlet(np.full(4, 0.5), size=m)
        pwm = np.log2((c * 0.97 + 0.01) / bg)
        n = SLICES.get(m, max(2, -(-m // 14)))
        words = sum(4 ** (hi - lo) for lo, hi in split_slices(m, n))
        res = {}
        for dev in a.device.split(","):
            bucket_distribution(pwm[:8], bg, n_slices=1, n_buckets=a.buckets, device=dev)     # compile / warm up
            best = None
            for _ in range(a.repeat):
                t = time.perf_counter()
                d = bucket_distribution(pwm, bg, n_slices=n, n_buckets=a.buckets, device=dev)
                dt = time.perf_counter() - t
                best = dt if best is None else min(best, dt)
            res[dev] = (best, d)
            _emit({"bench": "bucket", "device": dev, "m": m, "N": n, "B": a.buckets, "words": words,
                   "seconds": best, "words_per_s": words / best,
                   "threshold_1e-6": d.threshold(1e-6).threshold, "seed_bound": d.seed_bound}, a.json)
        if "cpu" in res and "gpu" in res:
            _emit({"bench": "bucket-speedup", "m": m, "N": n, "speedup": res["cpu"][0] / res["gpu"][0]}, a.json)


def bench_thresholds(a):
    from distributed import Client, LocalCluster

    from pipeline.motifs import pwm_from_motif, read_motifs
    from pipeline.distribution.thresholds import compute_thresholds_many

    ms = read_motifs(a.motifs)
    bg = np.full(4, 0.25)
    pwms = [pwm_from_motif(m, bg) for m in ms]
    ps = [float(x) for x in a.pvalues.split(",")]
    threads = a.threads or os.cpu_count()
    with LocalCluster(n_workers=1, threads_per_worker=threads, processes=False, dashboard_address=None) as lc, \
            Client(lc) as client:
        for meth in a.methods.split(","):
            t = time.perf_counter()
            res = compute_thresholds_many(pwms, bg, ps, client=client, method=meth, table=False, cache=False,
                                          batch=a.batch)
            dt = time.perf_counter() - t
            width = max((x.pvalue_bounds[1] / x.pvalue_bounds[0] - 1) for r in res for x in r
                        if x.reachable and x.pvalue_bounds[0] > 0)
            _emit({"bench": "thresholds", "method": meth, "motifs": len(pwms), "pvalues": ps, "threads": threads,
                   "seconds": dt, "max_rel_bracket": width,
                   "methods_used": sorted({x.method for r in res for x in r})}, a.json)


def bench_compare(a):
    from pipeline.engine.cluster import get_client
    from pipeline.compare.run import CompareSettings, run_compare

    out = tempfile.mkdtemp(prefix="mg-compare-")
    shutil.rmtree(out)
    try:
        with get_client(device=a.device, n_workers=a.workers, quiet=True) as (client, device):
            t = time.perf_counter()
            s = run_compare(a.motifs, None, out, client, CompareSettings(method="occurrence", pvalue=a.pvalue,
                                                                        cells=a.cells, cluster=a.cluster),
                            device=device)
            dt = time.perf_counter() - t
        _emit({"bench": "compare", "device": device, "motifs": s["motifs_a"], "pairs": s["pairs"],
               "cases": s["combos"], "cells": a.cells, "seconds": dt, "cases_per_s": s["combos"] / dt,
               "clusters": s.get("clusters"), "summary": s}, a.json)
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main(argv=None):
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="what", required=True)
    b = sub.add_parser("bucket")
    b.add_argument("--device", default="cpu")
    b.add_argument("--lengths", default="20,30,40")
    b.add_argument("--buckets", type=int, default=3600)
    b.add_argument("--repeat", type=int, default=2)
    t = sub.add_parser("thresholds")
    t.add_argument("motifs")
    t.add_argument("--pvalues", default="1e-4,1e-5,1e-6")
    t.add_argument("--methods", default="exact,auto")
    t.add_argument("--threads", type=int)
    t.add_argument("--batch", type=int, default=64)
    c = sub.add_parser("compare")
    c.add_argument("motifs")
    c.add_argument("--device", default=None)
    c.add_argument("--workers", type=int)
    c.add_argument("--pvalue", type=float, default=1e-4)
    c.add_argument("--cells", type=int, default=64)
    c.add_argument("--cluster", type=float)
    for s in (b, t, c):
        s.add_argument("--json")
    a = p.parse_args(argv)
    {"bucket": bench_bucket, "thresholds": bench_thresholds, "compare": bench_compare}[a.what](a)


if __name__ == "__main__":
    main()
