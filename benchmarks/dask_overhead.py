"""What the distributed machinery costs: the demo genome on a 2-worker local cluster vs one process, and
Dask's overhead per block.

    python benchmarks/dask_overhead.py [--repeats 3] [--motifs JASPAR2024:CORE:vertebrates] [--pvalue 1e-4]
                                       [--block-sizes 262144,1048576] [--noop-tasks 200]

Data: the bundled demo genome (2 Mb of human chrX, pipeline/data/hs37_chrX_20-22Mb.fa.gz) × 879 JASPAR 2024
CORE vertebrates, both strands, p = 1e-4, ingested at the demo's block size (256 Ki) and the default (1 Mi).

1. End to end, through the CLI (start-up, cluster, thresholds from a warm cache, tasks, Parquet):
   ``--workers 1`` (one process, one worker thread), ``--workers 2`` (the default: one process, 2 threads),
   ``--processes --workers 2`` (a 2-worker local cluster of processes).
2. Dask's overhead per block, two ways:
   a. scan tasks run on a cluster, task durations from the scheduler's task stream (``compute`` spans:
      what ``scan_task`` itself took) vs the wall time of the task phase × threads:
      ``overhead per block = (wall × threads − Σ compute) / blocks`` — scheduling, transfers, result
      gathering, the client's loop and any idle thread (load imbalance at the end is counted against us);
   b. a no-op graph of the same shape: the same scattered context, one task per block group returning a
      result of the same size, repeated to ``--noop-tasks`` tasks; its wall time per task × threads is the
      pure per-task cost of the machinery.
   Both are related to the mean compute of one block at that block size (goal: < 5 %).
Prints JSON lines and markdown rows for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEMO = ROOT / "pipeline" / "data" / "hs37_chrX_20-22Mb.fa.gz"


def cli_scan(store: str, motifs: str, pvalue: float, out: str, *flags) -> dict:
    """``motifgrid scan`` end to end: wall, and from its summary the task phase and the thresholds."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pipeline.cli", "scan", store, motifs, "--pvalue", str(pvalue),
                        "--out", out, "--no-progress", *flags], env=env, capture_output=True, text=True)
    dt = time.perf_counter() - t
    if r.returncode:
        raise SystemExit(r.stderr)
    s = json.loads(Path(out, "_summary.json").read_text())
    return {"wall": round(dt, 3), "tasks": round(s["seconds_tasks_wall"], 3), "thresholds": round(s["seconds_thresholds"], 3)}


def noop_task(ctx, blocks, like: dict) -> dict:
    """Same arguments and a result of the same size as ``scan_task``, no work."""
    return dict(like)


def scan_on(client, store: str, motifs: str, pvalue: float, out: str) -> dict:
    """One scan on ``client``; task-phase wall time and Σ compute of its tasks from the task stream."""
    from distributed import get_task_stream

    from pipeline.scan.graph import run_scan

    with get_task_stream(client) as ts:
        res = run_scan(store, motifs, out, pvalue=pvalue, client=client, progress=False)
    summ = json.loads(Path(out, "_summary.json").read_text())
    comp = [sum(s["stop"] - s["start"] for s in t["startstops"] if s["action"] == "compute")
            for t in ts.data if str(t["key"]).startswith("scan-")]
    return {"blocks": res.blocks, "tasks": len(comp), "hits": res.hits, "wall_tasks": summ["seconds_tasks_wall"],
            "compute_sum": sum(comp), "compute_mean": sum(comp) / max(len(comp), 1), "seconds": res.seconds}


def noop_on(client, store: str, motifs: str, pvalue: float, out: str, n_tasks: int) -> float:
    """Wall time per task of a no-op graph shaped like the scan's (scattered context, block groups)."""
    import dask.config
    from distributed import as_completed

    from pipeline.scan.plan import plan_scan
    from pipeline.scan.motif_set import row_thresholds
    from pipeline.scan.task import ScanContext, group_units
    from workers.distribution.pvalue_table import PvalueTable
    from workers.scan import make_plan
    import numpy as np

    job = plan_scan(store, motifs, out, pvalue=pvalue)
    tables = row_thresholds(job.mset, pvalue, client=client)
    pwms, row_motif, row_strand = job.mset.rows()
    thr = np.array([t.threshold if t.reachable else np.inf for t in tables])
    keep = np.flatnonzero(np.isfinite(thr))
    plan = make_plan(pwms, thr, row_motif, row_strand)
    plan.pvalues = PvalueTable.from_thresholds([tables[i] for i in keep])
    ctx = ScanContext(store=job.store, plan=plan, motif_ids=job.mset.ids, motif_names=job.mset.names, out=out)
    groups = group_units(job.units(), int(dask.config.get("motifgrid.scan.min-task-positions")))
    like = {"blocks": 1, "hits": 0, "positions": 0, "seconds_scan": 0.0, "seconds_io": 0.0,
            "block_hits": [["b0000000", 1]], "row_hits": np.ones(len(keep), np.int64)}
    ctx_f = client.scatter(ctx, broadcast=True, hash=False)
    t = time.perf_counter()
    futs = [client.submit(noop_task, ctx_f, groups[i % len(groups)], like, pure=False) for i in range(n_tasks)]
    for f, _ in as_completed(futs, with_results=True):
        f.release()
    return (time.perf_counter() - t) / n_tasks


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--motifs", default="JASPAR2024:CORE:vertebrates")
    ap.add_argument("--pvalue", type=float, default=1e-4)
    ap.add_argument("--block-sizes", default="1048576", help="comma-separated (default: the default block size)")
    ap.add_argument("--fasta", default=str(DEMO), help="genome (default: the bundled demo slice)")
    ap.add_argument("--noop-tasks", type=int, default=200)
    a = ap.parse_args(argv)
    from distributed import Client, LocalCluster

    from pipeline.io.genome import ingest

    tmp = Path(tempfile.mkdtemp(prefix="motifgrid-overhead-"))
    machine = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"
    print(json.dumps({"machine": machine, "data": Path(a.fasta).name, "motifs": a.motifs, "pvalue": a.pvalue}))
    rows = []
    for bs in [int(x) for x in a.block_sizes.split(",")]:
        store = str(tmp / f"g{bs}.zarr")
        ingest(a.fasta, store, block_size=bs)
        cli_scan(store, a.motifs, a.pvalue, str(tmp / f"warm{bs}"), "--workers", "2")     # thresholds cache warm
        # 1. end to end through the CLI
        e2e = {}
        for name, flags in (("one process, 1 thread", ["--workers", "1"]),
                            ("one process, 2 threads (default)", ["--workers", "2"]),
                            ("2-worker local cluster (processes)", ["--processes", "--workers", "2"])):
            e2e[name] = [cli_scan(store, a.motifs, a.pvalue, str(tmp / f"e2e{bs}-{len(e2e)}-{r}"), *flags)
                         for r in range(a.repeats)]
            print(json.dumps({"block_size": bs, "cli": name, "seconds": e2e[name]}), flush=True)
        # 2. overhead per block: task stream vs wall, and a no-op graph of the same shape
        for name, kw, threads in (("1 worker × 1 thread, in-process", dict(n_workers=1, threads_per_worker=1,
                                                                            processes=False), 1),
                                  ("2 worker processes × 1 thread", dict(n_workers=2, threads_per_worker=1,
                                                                         processes=True, host="127.0.0.1"), 2)):
            with LocalCluster(dashboard_address=":0", silence_logs=logging.ERROR, **kw) as cl, Client(cl) as c:
                scan_on(c, store, a.motifs, a.pvalue, str(tmp / f"ovwarm{bs}-{threads}"))   # imports, numba caches
                runs = [scan_on(c, store, a.motifs, a.pvalue, str(tmp / f"ov{bs}-{threads}-{r}"))
                        for r in range(a.repeats)]
                noop = [noop_on(c, store, a.motifs, a.pvalue, str(tmp / f"noop{bs}-{threads}-{r}"), a.noop_tasks)
                        for r in range(a.repeats)]
            per_block = [(r["wall_tasks"] * threads - r["compute_sum"]) / r["tasks"] for r in runs]
            comp = statistics.median(r["compute_mean"] for r in runs)
            res = {"block_size": bs, "cluster": name, "tasks": runs[0]["tasks"], "hits": runs[0]["hits"],
                   "wall_tasks": [round(r["wall_tasks"], 3) for r in runs],
                   "compute_per_block": [round(r["compute_mean"], 4) for r in runs],
                   "overhead_per_block_s": [round(x, 4) for x in per_block],
                   "noop_per_task_s": [round(x * threads, 5) for x in noop]}
            res["overhead_pct_best"] = round(100 * min(per_block) / comp, 2)
            res["noop_pct_best"] = round(100 * min(noop) * threads / comp, 3)
            print(json.dumps(res), flush=True)
            rows.append(res)
        for name, t in e2e.items():
            w = [x["wall"] for x in t]
            best = min(t, key=lambda x: x["wall"])
            print(f"| 2026-11-26 | {Path(a.fasta).name}, block {bs:,} | {name} | {min(w):.2f} s (best of {len(w)}; "
                  f"{min(w):.2f}–{max(w):.2f}) | tasks {best['tasks']:.2f} s, thresholds {best['thresholds']:.2f} s |")
    for r in rows:
        print(f"| 2026-11-26 | block {r['block_size']:,}, {r['tasks']} tasks | {r['cluster']} | compute/block "
              f"{statistics.median(r['compute_per_block']):.3f} s | overhead/block {min(r['overhead_per_block_s']) * 1e3:.1f} ms "
              f"(best; {min(r['overhead_per_block_s']) * 1e3:.1f}–{max(r['overhead_per_block_s']) * 1e3:.1f}) = "
              f"{r['overhead_pct_best']} % | no-op task {min(r['noop_per_task_s']) * 1e3:.2f} ms = {r['noop_pct_best']} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
