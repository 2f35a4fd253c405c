"""The one place that yields a ``distributed.Client``.

An existing scheduler (``--scheduler ADDRESS`` or ``--scheduler-file``) is used as it is; otherwise a
``LocalCUDACluster`` (one worker per GPU) when GPUs are present and wanted, else a ``LocalCluster``.

The local CPU cluster is by default one worker with one thread per core, in this process: the scan
kernels (numba, ``nogil``), Zarr decoding and Parquet writing release the GIL, so threads scale, and
nothing is pickled to another process (faster, and half the memory of two worker processes on 2 cores:
docs/benchmarks.md, the CPU scan table).  ``processes=True`` gives single-threaded worker processes instead
(BLAS pinned to one thread each), for isolation.  Local clusters listen on 127.0.0.1 only (scheduler, workers
and dashboards; ``motifgrid.cluster.host`` / ``dashboard-address`` in dask.config say otherwise).

An existing scheduler on a shared network should use TLS: ``security`` is a ``distributed.Security``
(the CLI builds it from ``--tls-ca/--tls-cert/--tls-key``); a ``tls://`` scheduler is refused without one.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os

import dask.config

from workers.backend import gpu_available

from pipeline import MotifgridError


def cpu_count() -> int:
    """The cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover
        return os.cpu_count() or 1


def gpu_worker_threads(n_gpu_workers: int) -> int:
    """Threads of each local GPU worker: ``motifgrid.cluster.gpu-threads`` when set, else the cores shared
    among the GPU workers (at least 2).  A worker's threads each take one block at a time (read, GPU scan,
    p-values and Parquet encoding of its hits), so the host work of one block overlaps the GPU work of
    the others; at p = 1e-4 the host work per block is several times the GPU's, hence many threads."""
    cfg = dask.config.get("motifgrid.cluster.gpu-threads", default=None)
    if cfg:
        return int(cfg)
    return max(2, cpu_count() // max(1, int(n_gpu_workers)))


class ClusterError(MotifgridError, RuntimeError):
    """No usable cluster; one line for the user."""


def scheduler_address(scheduler: str | None = None, scheduler_file: str | None = None) -> str | None:
    """The address of an existing scheduler: ``scheduler`` as given, else read from ``scheduler_file``
    (checked here: distributed waits forever for a missing file and fails without a message on a bad one)."""
    if scheduler or not scheduler_file:
        return scheduler
    try:
        with open(scheduler_file, encoding="utf-8") as f:
            info = json.load(f)
    except FileNotFoundError:
        raise ClusterError(f"{scheduler_file}: no such scheduler file (start the scheduler with "
                           f"`dask scheduler --scheduler-file {scheduler_file}` first)") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else "not JSON"
        raise ClusterError(f"{scheduler_file}: not a Dask scheduler file ({why})") from None
    addr = info.get("address") if isinstance(info, dict) else None
    if not isinstance(addr, str) or "://" not in addr:
        raise ClusterError(f"{scheduler_file}: not a Dask scheduler file (no scheduler address in it)")
    return addr


def _connect(address: str, security):
    """A client of the scheduler at ``address``; refusals (TLS, certificates, unreachable) as ClusterError."""
    from distributed import Client  # noqa: PLC0415

    if address.startswith("tls://") and security is None:
        raise ClusterError(f"the scheduler at {address} requires TLS: pass --tls-ca, --tls-cert and --tls-key")
    try:
        return Client(address=address, **({"security": security} if security is not None else {}))
    except (OSError, ValueError, RuntimeError) as e:   # ssl.SSLError and comm timeouts are OSErrors
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        hint = " (check --tls-ca/--tls-cert/--tls-key)" if security is not None else ""
        raise ClusterError(f"cannot connect to the scheduler at {address}: {why}{hint}") from None


def dashboard_link(client) -> str:
    """The dashboard URL as this machine can open it (local clusters bind it to 127.0.0.1)."""
    port = client.scheduler_info().get("services", {}).get("dashboard")
    addr = client.scheduler.address or ""
    if port and (addr.startswith("inproc://") or "127.0.0.1" in addr):
        return f"http://127.0.0.1:{port}/status"
    return client.dashboard_link


def worker_device(client) -> str:
    """'gpu' when every worker of the cluster reports a CUDA device (dask-cuda sets it), else 'cpu'."""
    def probe():
        from workers.backend import gpu_available as ga  # noqa: PLC0415
        return ga()
    try:
        res = client.run(probe)
    except Exception:
        return "cpu"
    return "gpu" if res and all(res.values()) else "cpu"


def _register_warmup(client, device: str, gc_threshold=None) -> None:
    """Each worker loads its kernels in the background as it joins (``workers.warmup``), and takes this process's
    ``motifgrid.cluster.switch-interval`` and ``gc_threshold`` (parsed ``motifgrid.cluster.gc-threshold``)."""
    from pipeline.warmup import WarmupPlugin  # noqa: PLC0415 - imports distributed, which the cluster has loaded

    try:
        client.register_plugin(WarmupPlugin(device, dask.config.get("motifgrid.cluster.switch-interval", default=None),
                                            gc_threshold))
    except Exception:          # noqa: BLE001 - an optimisation only: never refuse a cluster over it
        pass


@contextlib.contextmanager
def get_client(scheduler: str | None = None, scheduler_file: str | None = None, n_workers: int | None = None,
               device: str | None = None, threads_per_worker: int | None = None, processes: bool = False,
               security=None, quiet: bool = False, dashboard: bool = True):
    """Yield ``(client, device)`` where device is what the workers will compute on.  ``quiet``: local clusters
    log nothing below CRITICAL, nor does tornado in this process (the caller reports failed tasks itself, in
    one line).  ``dashboard=False``: a local cluster without the Dask dashboard (bokeh's import and server
    are most of a local cluster's start-up: ~0.4 s, for a job over in a second)."""
    from distributed import Client, LocalCluster  # noqa: PLC0415

    from workers.backend import gc_threshold_setting  # noqa: PLC0415

    try:
        gc = gc_threshold_setting()   # the workers' setting (the warm-up plugin applies it), checked before any start
    except ValueError as e:
        raise ClusterError(str(e)) from None
    if quiet:
        # a failed scan cancels its futures and closes the client while as_completed still gathers results in the
        # background; tornado would log those gathers' CommClosedError as a traceback after our one-line error
        logging.getLogger("tornado.application").setLevel(logging.CRITICAL)
    if scheduler or scheduler_file:
        client = _connect(scheduler_address(scheduler, scheduler_file), security)
        try:
            wait = float(dask.config.get("motifgrid.cluster.wait-for-workers", default=120))
            try:
                client.wait_for_workers(1, timeout=wait)
            except TimeoutError:
                raise ClusterError(f"no worker joined the scheduler at {scheduler or scheduler_file} "
                                   f"within {wait:g}s") from None
            dev = device or worker_device(client)
            _register_warmup(client, dev, gc)
            yield client, dev
        finally:
            client.close()
        return
    host = dask.config.get("motifgrid.cluster.host")
    dash = dask.config.get("motifgrid.cluster.dashboard-address") if dashboard else None
    worker_dash = f"{host}:0" if dashboard else None
    want_gpu = device == "gpu" or (device in (None, "auto") and gpu_available())
    if want_gpu:
        from dask_cuda import LocalCUDACluster  # noqa: PLC0415

        import cupy  # noqa: PLC0415

        kw = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")} if os.environ.get("CUDA_VISIBLE_DEVICES") else {}
        visible = cupy.cuda.runtime.getDeviceCount()
        if n_workers:
            if n_workers > visible:
                raise ClusterError(f"--workers {n_workers} asks for more GPU workers than the {visible} GPU(s) visible "
                                   "(one worker per GPU; --device cpu for CPU threads)")
            kw["n_workers"] = n_workers
        threads = threads_per_worker or gpu_worker_threads(n_workers or visible)
        cluster = LocalCUDACluster(host=host, dashboard_address=dash, threads_per_worker=threads,
                                   worker_dashboard_address=worker_dash,
                                   silence_logs=logging.CRITICAL if quiet else logging.WARNING, **kw)
        dev = "gpu"
    else:
        n = n_workers or cpu_count()
        if processes:
            kw = dict(n_workers=n, threads_per_worker=threads_per_worker or 1, processes=True, host=host)
        else:   # in-process transport: the scheduler listens on no network address at all
            kw = dict(n_workers=1, threads_per_worker=threads_per_worker or n, processes=False)
        cluster = LocalCluster(dashboard_address=dash, worker_dashboard_address=worker_dash,
                               silence_logs=logging.CRITICAL if quiet else logging.WARNING, **kw)
        dev = "cpu"
    client = Client(cluster)
    _register_warmup(client, dev, gc)
    try:
        yield client, dev
    finally:
        client.close()
        cluster.close()
