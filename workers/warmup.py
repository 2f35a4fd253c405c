"""Worker warm-up: what every worker process pays once, done when it joins the cluster.

A fresh worker process pays, on its first tasks: numba's start (its typing and lowering registries, then
each cached kernel), the BLAS thread limit (threadpoolctl walks every loaded library; with the other
threads busy that walk waits on the GIL), and on a GPU the CUDA context and the rescoring kernels (from
CuPy's disk cache).  :func:`start` runs a thread that does all of it on a tiny motif, so a scan's first
tasks find the kernels loaded; the worker serves tasks meanwhile (a task that needs a kernel still being
loaded waits for it, as it would have anyway).  ``pipeline.engine.cluster`` calls it from a Dask worker plugin on
every worker of the clusters it yields (docs/benchmarks.md has what it saves).
"""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import numpy as np

from workers.trace import mark
from workers.backend import (cpu_count, limit_blas_threads, retain_freed_memory, set_gc_threshold, set_gpu_sync,
                             skip_numba_blas_probe)
from workers.distribution import pvalue_to_score
from workers.distribution.exact_numba import extend_half
from workers.distribution.pvalue_table import PvalueTable
from workers.scan import make_plan, scan_block
from workers.scan.counts_numba import presence_counts, reduce_block
from workers.scan.distinct import distinct_pairs, merge_distinct
from workers.scan.distinct_numba import bh_steps, merge_two
from workers.scan.table_numba import row_columns

_done: dict = {}
#: when :func:`warm` finished, per device (epoch seconds; benchmarks/gpu_startup.py reads it)
done_at: dict = {}
_lock = threading.Lock()


def warm(device: str = "cpu") -> None:
    """Load what the scan and threshold tasks of this process will use (once per process and device).

    On a new machine (numba's disk cache without them) a second process compiles the scan's and the later steps'
    kernels into the cache while this one compiles the thresholds' (:func:`_compile_helper`), then loads them.

    Parameters
    ----------
    device : {"cpu", "gpu"}
        "gpu" also opens the CUDA context and loads the rescoring kernels.
    """
    with _lock:
        if _done.get(device):
            return
        limit_blas_threads(1)
        helper = _compile_helper()
        t = pvalue_to_score(_PWM, np.full(4, 0.25), 1e-3, table=True)    # numba: DP, classes, tail segments
        extend_half(np.zeros(1), np.ones(1), np.zeros(2), np.ones(2), 0.0, 0.0)   # the bracket's meet in the middle
        _wait(helper)
        plan, codes, h = scan_kernels(t.threshold)
        plan.pvalues = PvalueTable.from_thresholds([t, t])         # (a GPU scan then computes each hit's p-value)
        plan.pvalues.lookup(h.row, h.score)                           # the hits' p-values (search, evaluate)
        plan.pvalues.lookup(h.row, h.score, seg=np.zeros(len(h), np.int32))
        late_kernels()
        if device == "gpu":
            # CUDA context, the rescoring and p-value kernels; each tile width's scan kernel is loaded
            # by the first block that needs it (compiling all 16 widths ahead would hold the compile lock)
            scan_block(codes, 4096, plan, device="gpu")
            # the q-values' sort kernels: compiled on a fresh machine (~13 s, every thread of the reduction
            # waiting on them), from CuPy's disk cache afterwards
            z = np.zeros(2, np.int64)
            distinct_pairs(z, np.ones(2), device="gpu")
            distinct_pairs(z, np.ones(2), z + 1, device="gpu")
        _done[device] = True
        done_at[device] = time.time()
        mark("warm", done_at[device], device=device)


#: the warm-up's matrix (10 columns, a seeded draw)
_PWM = np.random.default_rng(0).normal(0.0, 1.0, (10, 4))


def scan_kernels(threshold: float):
    """The CPU scan's kernels (slices, float64 rescoring) on a few kb; returns ``(plan, codes, hits)``."""
    plan = make_plan([_PWM, _PWM[::-1, ::-1].copy()], np.array([threshold] * 2), np.zeros(2, np.int32),
                     np.array([0, 1], np.int8))
    codes = np.random.default_rng(1).integers(0, 4, 4096 + 16).astype(np.uint8)
    return plan, codes, scan_block(codes, 4096, plan, device="cpu")


def late_kernels() -> None:
    """The CPU kernels of a scan's later steps, called once on a few items: the q-values' sort, merge and
    Benjamini-Hochberg steps, the region counts' and enrich's block reductions, the hits tables' per-row columns."""
    z = np.zeros(2, np.int64)
    i32 = z.astype(np.int32)
    distinct_pairs(z, np.ones(2))                                 # the q-values' sort (numba)
    distinct_pairs(z, np.ones(2), z + 1)                          # a merge of pieces, sorted again
    merge_distinct([(z, np.ones(2), z + 1), (z, np.ones(2), z + 1)])  # the reduce tasks' merge of sorted pieces
    bh_steps(z, np.ones(2), z + 1, z + 5, np.empty(2), np.empty(2), np.empty(2, np.int64), np.empty(2, np.int64))
    reduce_block(z, i32, i32, np.ones(2), np.ones(2), 1)          # region counts
    presence_counts(z, i32, 0, 1, 1, z, np.zeros(2, np.bool_), 1)  # enrich's block counts
    row_columns(i32, z, z, i32, i32, i32)                         # the hits tables' per-row columns


def _compile_helper():
    """A process compiling :func:`scan_kernels` and :func:`late_kernels` into numba's disk cache (``python -m
    workers.warmup``), started when the cache lacks them — the probe, ``merge_two`` (through ``merge_distinct``),
    compiled by this call rather than loaded — and this process may use another core; None otherwise.  numba
    compiles one function at a time in a process (its compile lock): on a new machine the warm-up compiled for
    17-28 s on one of the VM's two cores, 11.9-13.7 s with the helper (docs/benchmarks.md)."""
    def compiled() -> int:            # (no stats where numba's JIT is disabled: no helper)
        stats = getattr(merge_two, "stats", None)
        return sum(stats.cache_misses.values()) if stats is not None else 0

    before = compiled()              # a forked worker inherits its server's loaded kernels, and their counts
    z = np.zeros(1, np.int64)
    merge_distinct([(z, np.ones(1), z), (z, np.ones(1), z)])
    if compiled() == before or cpu_count() < 2 or not sys.executable:
        return None
    try:
        return subprocess.Popen([sys.executable, "-m", "workers.warmup"], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError:
        return None


def _wait(helper) -> None:
    """Wait for the compile helper (its kernels then load from the cache; if it failed, they compile here)."""
    if helper is None:
        return
    try:
        helper.wait(timeout=300)
    except subprocess.TimeoutExpired:
        helper.kill()


def start(device: str = "cpu", switch_interval: float | None = None, gc_threshold=None,
          retain_memory: bool = False, load_kernels: bool = True, skip_blas_probe: bool = False,
          gpu_sync: str | None = None) -> None:
    """Set this worker process's GIL switch interval, GC thresholds and malloc settings, then :func:`warm` in a
    background thread.

    Parameters
    ----------
    device : {"cpu", "gpu"}
    switch_interval : float, optional
        ``sys.setswitchinterval`` (seconds).
    gc_threshold : tuple of int, optional
        As :func:`workers.backend.set_gc_threshold`.  Both are the client's settings: a worker process may not
        have motifgrid's configuration defaults loaded.
    retain_memory : bool
        :func:`workers.backend.retain_freed_memory` (the client's ``motifgrid.cluster.retain-freed-memory``).
    load_kernels : bool
        False: no warm-up thread (the client's ``motifgrid.cluster.warm-up``); the first tasks load what they use.
    skip_blas_probe : bool
        :func:`workers.backend.skip_numba_blas_probe` (a worker process of its own, not the user's process).
    gpu_sync : {"auto", "spin", "yield", "blocking"}, optional
        A GPU worker's :func:`workers.backend.set_gpu_sync` (the client's ``motifgrid.cluster.gpu-sync``), set
        before the warm-up opens the CUDA context.
    """
    # a worker's threads hand the GIL to each other between their nogil kernels (Arrow, numba, CUDA);
    # a thread returning from one waits up to the switch interval (default 5 ms) behind one running Python
    if switch_interval:
        sys.setswitchinterval(float(switch_interval))
    if gc_threshold:
        set_gc_threshold(gc_threshold)
    retain_freed_memory(retain_memory)
    if skip_blas_probe:
        skip_numba_blas_probe()
    sync = gpu_sync if device == "gpu" else None
    if not load_kernels:
        _sync_quietly(sync)
        return
    threading.Thread(target=_warm_quietly, args=(device, sync), name="motifgrid-warmup", daemon=True).start()


def _sync_quietly(policy: str | None) -> None:
    if policy:
        try:
            set_gpu_sync(policy)
        except Exception:      # noqa: BLE001 - how threads wait is an optimisation: never fail a worker over it
            pass


def _warm_quietly(device: str, gpu_sync: str | None = None) -> None:
    _sync_quietly(gpu_sync)              # (cuInit: off the worker's start, like the rest of the warm-up)
    try:
        warm(device)
        _warm_io()
        mark("warm-io")
    except Exception:          # noqa: BLE001 - a warm-up never fails a worker; the tasks will say what is wrong
        pass


def _warm_io() -> None:
    """Import and run once, on a few bytes, what a scan task's reading and writing use: zarr (its event loop and the
    store's zstd codec) and Arrow's Parquet writer (the hits files' dictionary pages, delta encoding, statistics and
    codecs; ~0.65 s of imports on the VM).  A fresh worker process's first tasks paid it, its other threads waiting
    on the import lock meanwhile (on one H100 the first 16 tasks of a genome scan took 1.7-2.6 s on a fresh
    cluster against 1.2-1.3 s once warm: docs/benchmarks.md, issue 18).  Not in :func:`warm`: the workers'
    forkserver runs that before it can fork, and this would delay every worker's start."""
    import pyarrow as pa  # noqa: PLC0415
    import pyarrow.parquet as pq  # noqa: PLC0415
    import zarr  # noqa: PLC0415
    from zarr.codecs import ZstdCodec  # noqa: PLC0415
    from zarr.storage import MemoryStore  # noqa: PLC0415

    a = zarr.create_array(MemoryStore(), shape=(1, 64), chunks=(1, 64), dtype="uint8", fill_value=4,
                          compressors=ZstdCodec(level=1, checksum=False))
    a[0] = np.arange(64, dtype=np.uint8) % 4
    np.asarray(a[0])
    # from buffers: pa.array / pa.table import pandas to check their input (pipeline.io.arrow's reason)
    i32 = pa.Array.from_buffers(pa.int32(), 2, [None, pa.py_buffer(np.zeros(2, np.int32))])
    names = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 1], np.int32)), pa.py_buffer(b"m")])
    i64 = pa.Array.from_buffers(pa.int64(), 2, [None, pa.py_buffer(np.array([1, 2], np.int64))])
    f64 = pa.Array.from_buffers(pa.float64(), 2, [None, pa.py_buffer(np.array([1e-5, 1e-4]))])
    schema = pa.schema([("motif_id", pa.dictionary(pa.int32(), pa.string())), ("start", pa.int64()),
                        ("pvalue", pa.float64())])
    t = pa.Table.from_arrays([pa.DictionaryArray.from_arrays(i32, names), i64, f64], schema=schema)
    for codec in ("snappy", "zstd"):
        pq.write_table(t, pa.BufferOutputStream(), compression=codec, use_dictionary=["motif_id"],
                       write_statistics=["start", "pvalue"], column_encoding={"start": "DELTA_BINARY_PACKED"})


if __name__ == "__main__":          # the compile helper of a new machine (_compile_helper)
    skip_numba_blas_probe()
    scan_kernels(0.0)
    late_kernels()
