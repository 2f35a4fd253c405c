"""COMPARE on the GPU: one CUDA block per (row of A, row of B, shift) (CUDA source ``compare.cu`` beside this
module); see :mod:`workers.compare.pairs`."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from workers.backend import SHARED_MEMORY_LIMIT, cuda_kernels, on_device

SOURCE = Path(__file__).parent / "compare.cu"
THREADS = 256


def _upload(rows) -> tuple:
    """A ``CompareRows``' arrays on the current device, in the kernel's argument order."""
    import cupy as cp  # noqa: PLC0415

    return (cp.asarray(rows.m, cp.int32), cp.asarray(rows.off, cp.int64), cp.asarray(rows.kdef, cp.int32),
            cp.asarray(rows.prob, cp.float32), cp.asarray(rows.cut, cp.int32))


def joint_tp_gpu(rows_a, rows_b, ra: np.ndarray, rb: np.ndarray, shift: np.ndarray,
                 chunk: int = 1 << 20) -> np.ndarray:
    """The joint tails of many cases on the GPU, one CUDA block each (twin of
    :func:`workers.compare.cpu.joint_tp_cpu`).

    Parameters
    ----------
    rows_a, rows_b : CompareRows
        Uploaded once per device (:func:`workers.backend.on_device`).
    ra, rb, shift : ndarray, shape (n,), int
        Row of A, row of B and shift of each case.
    chunk : int
        Cases per launch.

    Returns
    -------
    ndarray, shape (n, 3), float64
        ``[TP_low, TP_est, TP_high]`` per case.
    """
    import cupy as cp  # noqa: PLC0415

    n = int(np.asarray(ra).size)
    out = np.zeros((n, 3))
    if n == 0:
        return out
    na = rows_a.cut[:, 2].max(initial=-1) + 1
    nb = rows_b.cut[:, 2].max(initial=-1) + 1
    smem = int(2 * max(na, 1) * max(nb, 1) * 4)
    if smem > SHARED_MEMORY_LIMIT:
        raise ValueError(f"COMPARE grid {na}x{nb} does not fit in shared memory; lower cells")
    k = cuda_kernels(SOURCE, ("compare_joint",))["compare_joint"]
    if smem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = smem
    A = on_device(rows_a, _upload)
    B = on_device(rows_b, _upload)
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
