"""The worker warm-up as a Dask worker plugin: registered by :func:`pipeline.engine.cluster.get_client` on every
cluster it yields, it runs :func:`workers.warmup.start` on each worker as the worker joins."""
from __future__ import annotations

import os

from distributed.diagnostics.plugin import WorkerPlugin


class WarmupPlugin(WorkerPlugin):
    """Loads a worker's kernels in a background thread as it joins, with the client's GIL switch interval,
    garbage-collector thresholds, malloc settings and GPU wait policy (a worker process may not have motifgrid's configuration
    defaults loaded); a worker process of its own also skips numba's BLAS probe."""

    name = "motifgrid-warmup"

    def __init__(self, device: str = "cpu", switch_interval: float | None = None, gc_threshold=None,
                 retain_memory: bool = False, load_kernels: bool = True, gpu_sync: str | None = None):
        self.client_pid = os.getpid()          # a worker in another process is one of ours to tune (numba's probe)
        self.device = device
        self.switch_interval = switch_interval
        self.gc_threshold = gc_threshold
        self.retain_memory = retain_memory
        self.load_kernels = load_kernels
        self.gpu_sync = gpu_sync

    def setup(self, worker) -> None:
        from workers.warmup import start  # noqa: PLC0415 - the kernels' modules load on the worker only

        start(self.device, self.switch_interval, self.gc_threshold, self.retain_memory, self.load_kernels,
              skip_blas_probe=os.getpid() != self.client_pid, gpu_sync=self.gpu_sync)
