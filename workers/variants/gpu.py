"""The variants kernels on the GPU (CuPy; CUDA source in ``workers/variants/variants.cu``): the twins of
:func:`workers.variants.score.reaching`'s filter and :func:`workers.variants.score.best_of`, the same sums in the
same order (the filter's float32 sums keep the same margin; the exact ones are float64 in column order).  The rows'
matrices are uploaded once per device (:func:`workers.backend.on_device`)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from workers.backend import cuda_kernels, on_device

SOURCE = Path(__file__).parent / "variants.cu"
KERNELS = ("var_reaching", "var_best")
THREADS = 128


class _DeviceRows:
    def __init__(self, rows):
        import cupy as cp  # noqa: PLC0415

        self.width = int(rows.stack.shape[1])
        self.stack32 = cp.asarray(np.ascontiguousarray(rows.stack32, np.float32))
        self.stack64 = cp.asarray(np.ascontiguousarray(rows.stack, np.float64))
        self.lengths = cp.asarray(rows.lengths.astype(np.int32))
        self.order = cp.asarray(rows.order.astype(np.int32))
        self.rest32 = cp.asarray(rows.rest32.astype(np.float32))
        alpha = np.where(np.isfinite(rows.alpha), rows.alpha, np.inf) if rows.alpha is not None else None
        self.alpha = None if alpha is None else cp.asarray(alpha.astype(np.float32))


def _contexts(codes, starts, e0, e1):
    import cupy as cp  # noqa: PLC0415

    return (cp.asarray(np.ascontiguousarray(codes, np.uint8)), cp.asarray(np.ascontiguousarray(starts, np.int64)),
            cp.asarray(np.ascontiguousarray(e0, np.int64)), cp.asarray(np.ascontiguousarray(e1, np.int64)))


def reaching_gpu(merged, starts, e0, e1, snv, rows, margin: float) -> np.ndarray:
    """:func:`workers.variants.score.reaching` once its SNV contexts are merged: ``(n, n_rows)`` bool."""
    import cupy as cp  # noqa: PLC0415

    d = on_device(rows, _DeviceRows)
    k = cuda_kernels(SOURCE, KERNELS)
    c, s, a, b = _contexts(merged, starts, e0, e1)
    n, R = snv.size, int(rows.lengths.size)
    out = cp.zeros((n, R), cp.uint8)
    if n and R:
        shared = d.width * (11 + 1) * 4 + d.width * 4
        k["var_reaching"](((n + THREADS - 1) // THREADS, R), (THREADS,),
                          (c, s, a, b, cp.asarray(snv.astype(np.uint8)), np.int32(n), d.stack32, d.lengths, d.order,
                           d.rest32, d.alpha, np.int32(d.width), np.float32(margin), out, np.int32(R)),
                          shared_mem=shared)
    return cp.asnumpy(out).astype(bool)


def best_of_gpu(codes, starts, e0, e1, rows, ctx: np.ndarray, row: np.ndarray):
    """:func:`workers.variants.score.best_of` on the GPU."""
    import cupy as cp  # noqa: PLC0415

    d = on_device(rows, _DeviceRows)
    k = cuda_kernels(SOURCE, KERNELS)
    c, s, a, b = _contexts(codes, starts, e0, e1)
    n = int(ctx.size)
    best = cp.empty(n, cp.float64)
    where = cp.empty(n, cp.int64)
    if n:
        k["var_best"](((n + THREADS - 1) // THREADS,), (THREADS,),
                      (c, s, a, b, d.stack64, d.lengths, np.int32(d.width), cp.asarray(ctx.astype(np.int64)),
                       cp.asarray(row.astype(np.int64)), np.int64(n), best, where))
    return cp.asnumpy(best), cp.asnumpy(where)
