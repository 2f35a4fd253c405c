"""Imported by the forkserver that local worker processes fork from (``motifgrid.cluster.start-method:
forkserver``, :func:`pipeline.engine.cluster.start_method`): numba's start and the CPU kernels are paid once in that
server, and every worker forked from it finds them loaded instead of paying them on its first tasks.

Nothing here touches CUDA: a process that opened a CUDA context cannot fork children that use it, so the GPU
part of the warm-up stays in each worker (:mod:`workers.warmup`).
"""
from __future__ import annotations

import time

from workers.backend import skip_numba_blas_probe

skip_numba_blas_probe()      # this server is a worker process of ours, never the user's (workers.backend)

try:
    from workers.warmup import warm

    warm("cpu")
except Exception:            # noqa: BLE001 - the forkserver must start whatever happens; the workers load it later
    pass

#: when this server had imported and loaded everything (epoch seconds; its forked workers inherit it)
READY_AT = time.time()
