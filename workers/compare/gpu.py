"""COMPARE on the GPU: one CUDA block per (row of A, row of B, shift) (CUDA source ``compare.cu`` beside this
module); see :mod:`workers.compare.pairs`."""
from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from workers.distribution.bucket_gpu import SHARED_LIMIT, THREADS

_SRC = (Path(__file__).parent / "compare.cu").read_text()
_LOCK = threading.Lock()
_KERNELS: dict = {}


def _kernel(name: str):
    import cupy as cp  # noqa: PLC0415

    key = (cp.cuda.Device().id, name)
    with _LOCK:
        k = _KERNELS.get(key)
        if k is None:
            k = _KERNELS[key] = cp.RawKernel(_SRC, name, options=("-std=c++17",))
    return k


def _device_rows(rows, cp):
    cache = getattr(rows, "_gpu", None)
    dev = cp.cuda.Device().id
    if cache is None or cache[0] != dev:
        arrs = (cp.asarray(rows.m, cp.int32), cp.asarray(rows.off, cp.int64),
                cp.asarray(rows.kdef, cp.int32), cp.asarray(rows.prob, cp.float32),
                cp.asarray(rows.cut, cp.int32))
        cache = (dev, arrs)
        rows._gpu = cache
    return cache[1]


def joint_tp_gpu(rows_a, rows_b, ra: np.ndarray, rb: np.ndarray, shift: np.ndarray,
                 chunk: int = 1 << 20) -> np.ndarray:
    """``[TP_low, TP_est, TP_high]`` for each case (arrays of row indices and shifts), shape (n, 3)."""
    import cupy as cp  # noqa: PLC0415

    n = int(np.asarray(ra).size)
    out = np.zeros((n, 3))
    if n == 0:
        return out
    na = rows_a.cut[:, 2].max(initial=-1) + 1
    nb = rows_b.cut[:, 2].max(initial=-1) + 1
    smem = int(2 * max(na, 1) * max(nb, 1) * 4)
    if smem > SHARED_LIMIT:
        raise ValueError(f"COMPARE grid {na}x{nb} does not fit in shared memory; lower cells")
    k = _kernel("compare_joint")
    if smem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = smem
    A = _device_rows(rows_a, cp)
    B = _device_rows(rows_b, cp)
    bg = [np.float32(x) for x in rows_a.background]
    for s in range(0, n, chunk):
        e = min(n, s + chunk)
        d_ra = cp.asarray(np.asarray(ra[s:e], np.int32))
        d_rb = cp.asarray(np.asarray(rb[s:e], np.int32))
        d_sh = cp.asarray(np.asarray(shift[s:e], np.int32))
        d_out = cp.zeros((e - s) * 3, cp.float64)
        k((e - s,), (THREADS,), (d_ra, d_rb, d_sh, np.int32(e - s), *A, *B, *bg, d_out), shared_mem=smem)
        out[s:e] = d_out.get().reshape(-1, 3)
    return out
