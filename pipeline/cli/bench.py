"""``motifgrid bench``: scan throughput on this machine, GPU and CPU side by side, counted work.

Parts (``--parts kernel,baseline,cpu,e2e``):

kernel    the scan worker on one block of real sequence × a motif set (default: 8 Mi positions of the
          bundled human chrX slice or ``--fasta``, × JASPAR 2024 CORE vertebrates, both strands): the
          candidate pass alone (GPU: tensor-core kernel, CUDA events) and the whole ``scan_block`` (with
          float64 rescoring and the copy of the hits to the host), in column scores per second
          (positions × motif columns × strands) and as a fraction of the fp16 tensor-core limit.
baseline  the naive CuPy pipeline on the same block: fp16 cuBLAS GEMM of strided one-hot windows,
          then threshold and ``nonzero`` (the full score matrix goes through GPU memory).
cpu       the CPU worker on the same motifs (one thread), on the first ``--cpu-positions`` positions.
e2e       end to end on a human-genome-sized store (``--genome-size``, default 3.1 Gb, hg38 chromosome
          lengths) generated here from the base composition of real human sequence: scan to Parquet
          through the local cluster (``--device``), at each ``--pvalues``.  Reports time and hits.

Prints JSON lines; ``--json FILE`` also writes them to a file.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

HG38 = [248956422, 242193529, 198295559, 190214555, 181538259, 170805979, 159345973, 145138636, 138394717,
        133797422, 135086622, 133275309, 114364328, 107043718, 101991189, 90338345, 83257441, 80373285,
        58617616, 64444167, 46709983, 50818468, 156040895, 57227415]
HG38_NAMES = [f"chr{i}" for i in range(1, 23)] + ["chrX", "chrY"]
FP16_TC_LIMIT = 5e12      # column scores / s: the figure for the fp16 tensor-core limit of one H100


def _emit(rec: dict, sink: list) -> None:
    sink.append(rec)
    print(json.dumps(rec), flush=True)


def _plan(motifs: str, pvalue: float, background=None):
    from pipeline.scan.motif_set import MotifSet, row_thresholds
    from workers.scan import make_plan

    bg = np.full(4, 0.25) if background is None else background
    mset = MotifSet.load(motifs, bg, 0.1)
    t0 = time.perf_counter()
    tables = row_thresholds(mset, pvalue)
    t_thr = time.perf_counter() - t0
    pwms, mi, st = mset.rows()
    thr = np.array([t.threshold if t.reachable else np.inf for t in tables])
    return mset, make_plan(pwms, thr, mi, st), t_thr


def _sequence(fasta: str | None, n: int) -> np.ndarray:
    import gzip

    from pipeline.io.genome import encode

    if fasta:
        import pyfaidx

        fa = pyfaidx.Fasta(fasta, as_raw=True)
        name = next(iter(fa.keys()))
        seq = fa[name][0:n]
    else:
        with gzip.open(Path(__file__).parents[1] / "data" / "hs37_chrX_20-22Mb.fa.gz", "rt") as f:
            f.readline()
            seq = "".join(line.strip() for line in f)
    codes = encode(seq)
    if codes.size < n:                              # tile the real sequence up to n
        codes = np.resize(codes, n)
    return codes[:n]


def part_kernel(codes, plan, sink, reps=5):
    from workers.backend import gpu_available

    n = codes.size - plan.max_length
    col = int(plan.lengths.sum())
    if not gpu_available():
        return None
    import cupy as cp

    from workers.scan.gpu import candidates, device_tables, scan_gpu

    codes_d = cp.asarray(codes)
    candidates(codes_d, n, plan)              # compile + upload
    scan_gpu(codes, n, plan)
    cp.cuda.Device().synchronize()
    start, end = cp.cuda.Event(), cp.cuda.Event()
    with device_tables(plan).state().stream:      # the events on the stream the candidate pass runs on
        start.record()
        for _ in range(reps):
            pos, _ = candidates(codes_d, n, plan)
        end.record()
    end.synchronize()
    t = cp.cuda.get_elapsed_time(start, end) / 1e3 / reps
    t0 = time.perf_counter()
    for _ in range(reps):
        h = scan_gpu(codes, n, plan)
    t_full = (time.perf_counter() - t0) / reps
    dev = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"].decode()
    rec = {"part": "kernel", "device": dev, "positions": n, "rows": plan.n_rows, "columns": col,
           "candidates": int(pos.size), "hits": len(h), "seconds_candidate_pass": t, "seconds_scan_block": t_full,
           "column_scores_per_s": n * col / t, "column_scores_per_s_full": n * col / t_full,
           "fraction_of_fp16_tc_limit": n * col / t / FP16_TC_LIMIT}
    _emit(rec, sink)
    return h


def part_baseline(codes, plan, sink, chunk=1 << 20):
    """Naive CuPy: GEMM of strided fp16 one-hot windows × P, then threshold and nonzero, per tile."""
    import cupy as cp
    from cupy.lib.stride_tricks import as_strided

    n = codes.size - plan.max_length
    onehot = cp.zeros((codes.size + 64, 4), dtype=cp.float16)
    cd = cp.asarray(codes)
    ok = cd < 4
    onehot[cp.flatnonzero(ok), cd[ok].astype(cp.int64)] = 1
    flat = onehot.reshape(-1)
    Ps = [cp.asarray(t.P.astype(np.float16)) for t in plan.tiles]
    total = 0

    def run():
        nonlocal total
        total = 0
        for t, P in zip(plan.tiles, Ps):
            L = t.length
            for c0 in range(0, n, chunk):
                m = min(chunk, n - c0)
                # windows c0..c0+m-1, row stride 4 halves: cuBLAS needs a copy for such overlap
                S = as_strided(flat[4 * c0:], shape=(m, 4 * L), strides=(8, 2))
                R = cp.ascontiguousarray(S) @ P
                total += int(cp.count_nonzero(R >= -0.05))
    run()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    run()
    cp.cuda.Device().synchronize()
    t = time.perf_counter() - t0
    col = int(plan.lengths.sum())
    _emit({"part": "baseline (CuPy GEMM then threshold)", "positions": n, "seconds": t, "candidates": total,
           "column_scores_per_s": n * col / t}, sink)


def part_cpu(codes, plan, sink, positions, method=None):
    from workers.backend import limit_blas_threads
    from workers.scan import scan_block

    limit_blas_threads(1)
    n = min(positions, codes.size - plan.max_length)
    buf = codes[: n + plan.max_length]
    t0 = time.perf_counter()
    h = scan_block(buf, n, plan, device="cpu", method=method)
    t = time.perf_counter() - t0
    col = int(plan.lengths.sum())
    _emit({"part": "cpu (1 thread, " + (method or "default") + ")", "positions": n, "seconds": t, "hits": len(h),
           "column_scores_per_s": n * col / t, "window_scores_per_s": n * plan.n_rows / t}, sink)
    return h


def synthesize_store(path: str, size: float, background, block_size: int, halo: int, seed: int = 1):
    """A genome store of hg38-like chromosome lengths scaled to ``size`` bp, iid with ``background``."""
    from pipeline.io.genome import synthesize

    scale = size / sum(HG38)
    lengths = [max(1, int(round(x * scale))) for x in HG38]
    return synthesize(path, list(zip(HG38_NAMES, lengths)), background, block_size=block_size, halo=halo, seed=seed)


def task_timeline(records, t0: float, threads: int) -> dict:
    """Where the scan tasks' wall time went, from the task stream (``distributed.get_task_stream``).

    ``first_task_s``: from ``t0`` (job start, wall clock) to the first scan task; ``busy_thread_s``: summed
    compute time of the scan tasks; ``utilisation``: busy / (threads × span of the scan tasks); ``tail_s``:
    from the median thread's last task end to the last task end (threads idle at the end)."""
    spans, per_thread = [], {}
    for r in records:
        if not str(r.get("key", "")).startswith("scan-"):
            continue
        for ss in r.get("startstops", []):
            if ss.get("action") == "compute":
                spans.append((ss["start"], ss["stop"]))
                k = (r.get("worker"), r.get("thread"))
                per_thread[k] = max(per_thread.get(k, 0.0), ss["stop"])
    if not spans:
        return {}
    first, last = min(s for s, _ in spans), max(e for _, e in spans)
    busy = sum(e - s for s, e in spans)
    return {"first_task_s": round(first - t0, 3), "tasks_span_s": round(last - first, 3),
            "busy_thread_s": round(busy, 2), "utilisation": round(busy / (threads * (last - first)), 3),
            "tail_s": round(last - float(np.median(list(per_thread.values()))), 3)}


def _task_group(key: str) -> str:
    """A task stream key's group: its name up to the token (``_threshold_batch``, ``scan``, ``qvalues-reduce``...)."""
    parts = key.strip("()'\"").split("-")
    return "-".join(parts[:2]) if parts[0] in ("qvalues", "reserve") else parts[0]


def task_groups(records, t0: float) -> dict:
    """Per group of tasks (:func:`_task_group`), from the task stream: [first start, last stop] in seconds from
    ``t0`` (wall clock), summed compute thread-seconds, tasks and the longest task: where the thresholds, the pinned
    buffers' reservation and the q-values' tasks sat on a run's timeline."""
    out: dict = {}
    for r in records:
        g = _task_group(str(r.get("key", "")))
        for ss in r.get("startstops", []):
            if ss.get("action") != "compute":
                continue
            a, b = ss["start"] - t0, ss["stop"] - t0
            o = out.setdefault(g, [a, b, 0.0, 0, 0.0])
            o[0], o[1], o[2], o[3], o[4] = min(o[0], a), max(o[1], b), o[2] + b - a, o[3] + 1, max(o[4], b - a)
    return {g: [round(o[0], 3), round(o[1], 3), round(o[2], 2), o[3], round(o[4], 3)] for g, o in out.items()}


def _warm_done(device: str):
    """This worker's warm-up end (epoch seconds), or None while it runs (``workers.warmup.done_at``)."""
    import workers.warmup as wu  # noqa: PLC0415

    return wu.done_at.get(device)


def _first_visible_gpu() -> str:
    """The GPU a worker process computes on (dask-cuda puts it first in ``CUDA_VISIBLE_DEVICES``)."""
    import os  # noqa: PLC0415

    return os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0]


def part_e2e(args, sink):
    from distributed import get_task_stream

    from pipeline.engine.cluster import get_client
    from pipeline.io.genome import GenomeStore
    from pipeline.scan.graph import execute_scan
    from pipeline.scan.plan import plan_scan

    work = Path(args.work or tempfile.mkdtemp(prefix="motifgrid-e2e-"))
    work.mkdir(parents=True, exist_ok=True)
    store = work / "genome.zarr"
    human_bg = np.array([0.2952, 0.2048, 0.2048, 0.2952])      # real human base composition (GRCh37 chrX slice)
    if not store.exists():
        t0 = time.perf_counter()
        synthesize_store(str(store), args.genome_size, human_bg, args.block_size, 127)
        _emit({"part": "e2e-store", "bp": GenomeStore(str(store)).total_length,
               "seconds_generate": time.perf_counter() - t0}, sink)
    dev = None if args.device == "auto" else args.device
    import dask.config

    cache = work / "threshold-cache"
    shutil.rmtree(cache, ignore_errors=True)           # the first run of each p-value is cold
    with get_client(device=dev, n_workers=args.workers, threads_per_worker=args.threads, quiet=True) as (client, device), \
            dask.config.set({"motifgrid.thresholds.cache-dir": str(cache)}):
        for p, mode in [(p, m) for p in args.pvalues for m in (["cold", "warm"] if args.warm else ["cold"])]:
            out = work / f"hits-{p:g}"
            shutil.rmtree(out, ignore_errors=True)
            job = plan_scan(str(store), args.motifs, str(out), pvalue=p)
            w0 = time.time()
            t0 = time.perf_counter()
            with get_task_stream(client) as ts:
                res = execute_scan(job, client, device=device, progress=False, command="motifgrid bench e2e")
            t = time.perf_counter() - t0
            summ = json.loads((out / "_summary.json").read_text())
            threads = sum(client.nthreads().values())
            _emit({"part": "e2e", "thresholds": mode, "device": device, "workers": res.workers,
                   "gpus": len(set(client.run(_first_visible_gpu).values())) if device == "gpu" else 0,
                   "threads": threads, "pvalue": p, **task_timeline(ts.data, w0, threads),
                   "bp": res.positions, "seconds": t, "hits": res.hits, "column_scores_per_s": res.column_scores / t,
                   "blocks": res.blocks, "bytes_written": sum(f.stat().st_size for f in out.rglob("*.parquet")),
                   **{k: summ[k] for k in ("seconds_thresholds", "seconds_tasks_wall", "task_seconds_scan",
                                           "task_seconds_io", "task_seconds_total", "task_seconds_by_step",
                                           "seconds_region_counts")},
                   "seconds_qvalues": (summ.get("qvalues") or {}).get("seconds"),
                   "qvalues_task_seconds_by_step": (summ.get("qvalues") or {}).get("task_seconds_by_step"),
                   "qvalues_tasks": (summ.get("qvalues") or {}).get("tasks"),
                   "qvalues_fallback": (summ.get("qvalues") or {}).get("kept_pairs_fallback"),
                   # distinct (family, p-value) pairs: the kept pieces' rows (summed over workers), the map's steps
                   "qvalues_rows": [(summ.get("qvalues") or {}).get(k) for k in ("piece_rows", "steps")],
                   "qvalues_phases": (summ.get("qvalues") or {}).get("phases"), "phases": summ.get("phases"),
                   "first_tasks": summ.get("first_tasks"),
                   # [start, stop, thread-s, tasks, longest] by task group, and each worker's warm-up end, from w0
                   "task_groups": task_groups(ts.data, w0),
                   "warm_done_s": [round(v - w0, 3) if v else None
                                   for v in client.run(_warm_done, device).values()]}, sink)
            if not args.keep:
                shutil.rmtree(out, ignore_errors=True)
    if not args.keep and not args.work:
        shutil.rmtree(work, ignore_errors=True)


def main(argv=None, formatter_class=argparse.HelpFormatter) -> int:
    """``motifgrid bench``; the CLI passes its ``formatter_class`` (every option's default in ``-h``)."""
    ap = argparse.ArgumentParser(prog="motifgrid bench", description=__doc__.splitlines()[0],
                                 formatter_class=formatter_class)
    ap.add_argument("--parts", default="kernel,baseline,cpu", help="comma-separated: kernel, baseline, cpu, e2e")
    ap.add_argument("--fasta", help="sequence for the kernel parts (default: the bundled human slice)")
    ap.add_argument("--motifs", default="JASPAR2024:CORE:vertebrates", help="motif file or JASPAR release")
    ap.add_argument("--pvalue", type=float, default=1e-4, help="p-value of the kernel parts")
    ap.add_argument("--positions", type=int, default=8 << 20, help="positions of the kernel and baseline parts")
    ap.add_argument("--cpu-positions", type=int, default=1 << 20, help="positions scanned by the CPU part")
    ap.add_argument("--genome-size", type=float, default=3.1e9, help="e2e: bases of the synthetic genome")
    ap.add_argument("--block-size", type=int, default=1 << 24, help="e2e: block size of its store")
    ap.add_argument("--pvalues", type=float, nargs="+", default=[1e-4, 1e-5], help="e2e: one scan per p-value")
    ap.add_argument("--device", default="auto", choices=["auto", "cpu", "gpu"], help="e2e: where the workers compute")
    ap.add_argument("--workers", type=int, help="e2e: workers (default: as motifgrid scan)")
    ap.add_argument("--threads", type=int, help="threads per worker (default: motifgrid scan's; I/O overlaps the GPU)")
    ap.add_argument("--work", help="folder for the e2e store and hits (kept)")
    ap.add_argument("--keep", action="store_true", help="keep the e2e hits")
    ap.add_argument("--warm", action="store_true", help="e2e: also rerun each p-value with the threshold cache filled")
    ap.add_argument("--json", help="also write the records here")
    a = ap.parse_args(argv)
    parts = set(a.parts.split(","))
    sink: list = []
    if parts & {"kernel", "baseline", "cpu"}:
        mset, plan, t_thr = _plan(a.motifs, a.pvalue)
        _emit({"part": "setup", "motifs": len(mset.ids), "rows": plan.n_rows, "columns": int(plan.lengths.sum()),
               "tiles": [(t.length, len(t.rows)) for t in plan.tiles], "threshold_seconds": t_thr}, sink)
        codes = _sequence(a.fasta, a.positions + plan.max_length)
        hg = part_kernel(codes, plan, sink) if "kernel" in parts else None
        if "baseline" in parts:
            from workers.backend import gpu_available

            if gpu_available():
                part_baseline(codes, plan, sink)
        if "cpu" in parts:
            hc = part_cpu(codes, plan, sink, a.cpu_positions)
            if hg is not None:
                m = hg.pos < a.cpu_positions
                same = (np.array_equal(hg.pos[m], hc.pos) and np.array_equal(hg.row[m], hc.row)
                        and np.array_equal(hg.score[m], hc.score))
                _emit({"part": "gpu==cpu", "positions": a.cpu_positions, "identical": bool(same)}, sink)
    if "e2e" in parts:
        part_e2e(a, sink)
    if a.json:
        Path(a.json).write_text("\n".join(json.dumps(r) for r in sink) + "\n")
    return 0
