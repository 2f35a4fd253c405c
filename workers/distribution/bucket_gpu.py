"""GPU kernel of BUCKETSCOREDISTRIBUTION (CuPy; CUDA source in ``workers/distribution/bucket.cu``)."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from workers.backend import SHARED_MEMORY_LIMIT, cuda_kernels

SOURCE = Path(__file__).parent / "bucket.cu"
THREADS = 256


def slice_hist_gpu(sc: np.ndarray, pr: np.ndarray, lo: float, delta: float, ncell: int):
    """The bucketed distribution of one slice's words on the GPU (twin of
    :func:`workers.distribution.bucket_numba.slice_hist`).

    Parameters
    ----------
    sc, pr : ndarray, shape (l, 4), float64
        Scores and background probabilities of the slice's columns (0 where a letter cannot occur).
    lo : float
        Score of cell 0.
    delta : float
        Cell width.
    ncell : int

    Returns
    -------
    cupy.ndarray, shape (ncell,), float64
        Probability mass per cell (cell of a word: ``floor((score - lo) / delta)``, clamped).
    """
    import cupy as cp  # noqa: PLC0415

    l = int(sc.shape[0])
    mu = max(0, min(5, l - 9))
    ns = 1 << (2 * mu)
    n_outer = 1 << (2 * (l - mu))
    need = (2 * ns + ncell) * 8
    use_shared = need <= SHARED_MEMORY_LIMIT
    smem = need if use_shared else 2 * ns * 8
    k = cuda_kernels(SOURCE, ("bucket_slice_hist",))["bucket_slice_hist"]
    if smem > 48 * 1024:
        k.max_dynamic_shared_size_bytes = smem
    out = cp.zeros(ncell, dtype=cp.float64)
    sm = cp.cuda.Device().attributes["MultiProcessorCount"]
    blocks = int(max(1, min(-(-n_outer // THREADS), sm * 8)))
    k((blocks,), (THREADS,), (cp.asarray(sc, cp.float64).ravel(), cp.asarray(pr, cp.float64).ravel(),
                               np.int32(l), np.int32(mu), np.float64(lo), np.float64(1.0 / delta),
                               np.int32(ncell), np.int64(n_outer), np.int32(use_shared), out),
      shared_mem=smem)
    return out
