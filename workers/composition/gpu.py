"""GPU composition comparison of one task (CuPy; CUDA source in ``workers/composition/composition.cu``).

Same algorithm and same result as :func:`workers.composition.cpu.compare_cpu`, all lengths at once:

1. prefix counts of A, C, G, N (``cupy.cumsum``: the seed's inclusive scans);
2. ``comp_hist``: one thread per (window start, length), warp-aggregated ``atomicAdd`` into the cells of
   every length's box (all boxes side by side, a few tens of MB for the seed-shaped workload);
3. exclusive offsets of the cells (``cupy.cumsum``); ``comp_rows``: one thread per test row sums its
   ball, one interval of contiguous cells per (Δa, Δc) row;
4. hit mode only: ``comp_scatter`` places each window at its cell's slot (counting sort), ``comp_emit``
   writes each row's matches (one warp per row) at the row's offset, and the matches are sorted by
   (position, row) on the device before they are copied to the host.

The plan's arrays are uploaded once per device (:func:`workers.backend.on_device`); the device section of a task
is serialised per device (its memory is sized by the task), other tasks read and write meanwhile.
"""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from workers.backend import cuda_kernels, on_device
from workers.composition.plan import CompositionHits, CompositionPlan, Segments

SOURCE = Path(__file__).parent / "composition.cu"
KERNELS = ("comp_hist", "comp_scatter", "comp_rows", "comp_emit")
THREADS = 256


def _cupy():
    import cupy  # noqa: PLC0415

    return cupy


class _DevicePlan:
    def __init__(self, plan: CompositionPlan):
        cp = _cupy()
        nl = plan.lengths.size
        self.lengths = cp.asarray(plan.lengths.astype(np.int32))
        self.dmax = cp.asarray(plan.dmax.astype(np.int32))
        self.box = cp.asarray(np.concatenate([plan.box_lo, plan.box_dim], axis=1).astype(np.int32).reshape(-1))
        self.box_off = cp.asarray(plan.box_off.astype(np.int64))
        row_li = np.repeat(np.arange(nl, dtype=np.int32), np.diff(plan.row_start).astype(np.int64))
        self.row_li = cp.asarray(row_li)
        self.row_hist = cp.asarray(np.ascontiguousarray(plan.row_hist, dtype=np.int32).reshape(-1))
        self.cells = int(plan.box_off[-1])
        self.lock = threading.Lock()



def compare_gpu(codes: np.ndarray, segments: Segments, plan: CompositionPlan, hits: bool = True):
    """The windows of one task against every test row on the GPU, all lengths at once: the twin of
    :func:`workers.composition.cpu.compare_cpu`.

    Parameters
    ----------
    codes, segments, plan, hits
        As :func:`workers.composition.cpu.compare_cpu` (``codes (V,)`` uint8, ``V < 2**31``).

    Returns
    -------
    counts, found
        As :func:`workers.composition.cpu.compare_cpu`: ``(R,)`` int64, matches sorted by (position, row).
    """
    if plan.lengths.size == 0 or codes.size == 0:
        return np.zeros(plan.n_rows, np.int64), (CompositionHits.empty() if hits else None)
    if codes.size >= 2**31 - 1:
        raise ValueError("a task's sequence must be shorter than 2**31 positions on the GPU path")
    T = on_device(plan, _DevicePlan)
    K = cuda_kernels(SOURCE, KERNELS)
    mask = segments.start_mask(codes.size)
    with T.lock:
        return _compare_locked(codes, mask, plan, T, K, hits)


def _compare_locked(codes, mask, plan, T, K, hits):
    cp = _cupy()
    V = int(codes.size)
    nl = int(plan.lengths.size)
    R = plan.n_rows
    c = cp.asarray(codes)
    onehot = cp.zeros((V + 1, 4), dtype=cp.int32)
    for x in range(3):
        onehot[1:, x] = c == x
    onehot[1:, 3] = c > 3
    pre = cp.cumsum(onehot, axis=0, dtype=cp.int32)
    del onehot
    mask_d = cp.asarray(mask)
    grid = ((V + THREADS - 1) // THREADS, nl)
    hist = cp.zeros(max(T.cells, 1), dtype=cp.uint32)
    K["comp_hist"](grid, (THREADS,), (pre, mask_d, np.int32(V), T.lengths, T.dmax, T.box, T.box_off, hist))
    off = cp.zeros(T.cells + 1, dtype=cp.int64)
    if T.cells:
        off[1:] = cp.cumsum(hist[:T.cells], dtype=cp.int64)
    del hist
    counts = cp.empty(R, dtype=cp.int64)
    K["comp_rows"](((R + 127) // 128,), (128,), (T.row_hist, T.row_li, np.int32(R), T.dmax, T.box, T.box_off,
                                                 off, counts))
    if not hits:
        return cp.asnumpy(counts), None
    row_out = cp.zeros(R + 1, dtype=cp.int64)
    row_out[1:] = cp.cumsum(counts)
    total = int(row_out[-1].get())
    counts_h = cp.asnumpy(counts)
    if total == 0:
        return counts_h, CompositionHits.empty()
    order = cp.empty(max(int(off[-1].get()), 1), dtype=cp.int32)
    cursor = off[:-1].astype(cp.uint64)
    K["comp_scatter"](grid, (THREADS,), (pre, mask_d, np.int32(V), T.lengths, T.dmax, T.box, T.box_off,
                                         cursor, order))
    del cursor
    out_row = cp.empty(total, dtype=cp.int32)
    out_pos = cp.empty(total, dtype=cp.int32)
    out_d = cp.empty(total, dtype=cp.int32)
    warps_per_block = THREADS // 32
    K["comp_emit"](((R + warps_per_block - 1) // warps_per_block,), (THREADS,),
                   (pre, T.row_hist, T.row_li, np.int32(R), T.lengths, T.dmax, T.box, T.box_off, off, order,
                    row_out, out_row, out_pos, out_d))
    del order
    key = out_pos.astype(cp.int64) * max(R, 1) + out_row
    o = cp.argsort(key)
    return counts_h, CompositionHits(cp.asnumpy(out_row[o]), cp.asnumpy(out_pos[o]).astype(np.int64),
                                     cp.asnumpy(out_d[o]))
