"""Which device a scan should use (``--device auto`` on a machine with GPUs): a cost model from measured rates.

A scan's time is start-up, the scoring of every window by every (motif, strand) row, and the host's work per
hit (p-values, Arrow tables, Parquet), which is the same on either path and shared by the machine's cores::

    cpu:  start_cpu + column_scores / (cpu_rate * cores)            + hits * host_per_hit / cores
    gpu:  start_gpu + column_scores / (gpu_rate * gpus) + overhead  + hits * host_per_hit / cores

``column_scores`` = window starts × the motifs' columns × strands; ``hits`` is estimated from the p-value
(``hit_factor`` × p × windows × rows: real sequence gives more hits than the background model).  The rates are
``motifgrid.cost.*`` (``pipeline/motifgrid.yaml``), measured on the machines named there (docs/benchmarks.md):
a GPU pays a start-up (CUDA context, kernels) that only enough scoring work earns back, so small jobs go to the
CPU and a GPU node is never slower than its own cores.
"""
from __future__ import annotations

from dataclasses import dataclass

_KEYS = ("start-cpu", "start-gpu", "cpu-rate", "gpu-rate", "host-per-hit", "hit-factor", "start-gpu-threads")


@dataclass(frozen=True)
class Rates:
    start_cpu: float          # seconds: a local CPU cluster and the kernels loaded
    start_gpu: float          # seconds: CUDA context, GPU workers and kernels
    cpu_rate: float           # column scores per second per core (Slices kernel)
    gpu_rate: float           # column scores per second per GPU (tensor cores, rescoring included)
    host_per_hit: float       # thread-seconds of host work per hit
    hit_factor: float         # hits / (p × windows × rows) on real sequence
    start_gpu_threads: float = 1.0    # seconds: the CUDA context and kernels in this process (a scan on its threads)

    @classmethod
    def from_config(cls) -> "Rates":
        import dask.config  # noqa: PLC0415

        cfg = dask.config.get("motifgrid.cost")
        return cls(*(float(cfg[k]) for k in _KEYS if k in cfg))


@dataclass(frozen=True)
class Choice:
    device: str
    seconds_cpu: float
    seconds_gpu: float

    def line(self) -> str:
        return (f"--device auto: {self.device.upper()} (estimated {self.seconds_cpu:.1f} s on the CPU, "
                f"{self.seconds_gpu:.1f} s on the GPU; motifgrid.cost)")


def estimate(positions: int, columns: int, rows: int, pvalue: float, cores: int, gpus: int,
             rates: Rates | None = None, threads: bool = False) -> Choice:
    """The device with the shorter estimated scan.

    Parameters
    ----------
    positions : int
        Window starts to scan.
    columns : int
        Summed length of the scanned (motif, strand) rows.
    rows : int
        (motif, strand) rows.
    pvalue : float
    cores, gpus : int
        The machine's CPU cores and GPUs (``gpus`` 0: the CPU).
    rates : Rates, optional
        Default: ``motifgrid.cost``.
    threads : bool
        The scan would run on this process's threads (``start_gpu_threads``: no GPU worker processes to start).
    """
    r = rates or Rates.from_config()
    cores = max(1, int(cores))
    host = r.hit_factor * pvalue * positions * rows * r.host_per_hit / cores
    cpu = r.start_cpu + positions * columns / (r.cpu_rate * cores) + host
    gpu = (r.start_gpu_threads if threads else r.start_gpu) + positions * columns / (r.gpu_rate * max(1, gpus)) + host if gpus else float("inf")
    return Choice("gpu" if gpu < cpu else "cpu", cpu, gpu)
