"""The one place that yields a ``distributed.Client``.

An existing scheduler (``--scheduler ADDRESS`` or ``--scheduler-file``) is used as it is; otherwise a
``LocalCUDACluster`` (one worker per GPU) when GPUs are present and wanted, else a ``LocalCluster``.

The local CPU cluster is by default one worker with one thread per core, in this process: the scan
kernels (numba, ``nogil``), Zarr decoding and Parquet writing release the GIL, so threads scale, and
nothing is pickled to another process (faster, and half the memory of two worker processes on 2 cores:
docs/benchmarks.md, the CPU scan table).  ``processes=True`` gives single-threaded worker processes instead
(BLAS pinned to one thread each), for isolation.  Local clusters listen on 127.0.0.1 only (scheduler, workers
and dashboards; ``motifgrid.cluster.host`` / ``dashboard-address`` in dask.config say otherwise).  Local worker
processes are forked from a server that imported their modules and loaded numba's kernels once
(:func:`start_method`, ``motifgrid.cluster.start-method``), which the commands start first (:func:`prestart_workers`).

An existing scheduler on a shared network should use TLS: ``security`` is a ``distributed.Security``
(the CLI builds it from ``--tls-ca/--tls-cert/--tls-key``); a ``tls://`` scheduler is refused without one.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os

import dask.config

from pipeline import MotifgridError
from workers.backend import cpu_count, gpu_available


def gpu_processes(n_gpus: int = 1) -> int:
    """Local worker processes per GPU: ``motifgrid.cluster.gpu-processes``, or with ``auto`` about four in all:
    ``4 // n_gpus``, at most one per 4 of a GPU's share of the cores, at least 1.  A process's threads share one
    GIL, and the host work of a block (p-values, Arrow tables, Parquet encoding) queues on it: one GPU with 16
    cores scanned the 3.1 Gb genome at p = 1e-4 in 14.0-15.6 s with 4 processes of 4 threads against 16.9-20.6 s
    with one of 16 (H200); but 16 processes on 4 GPUs were slower than 4 (their start and the end-of-run
    reduction grow with the processes; docs/benchmarks.md, issue 18, session 10)."""
    n = dask.config.get("motifgrid.cluster.gpu-processes", default="auto")
    if n is None or n == "auto":
        n_gpus = max(1, int(n_gpus))
        return max(1, min(4 // n_gpus, cpu_count() // n_gpus // 4))
    try:
        n = int(n)
    except (TypeError, ValueError):
        raise ClusterError(f"motifgrid.cluster.gpu-processes must be a whole number or auto, not {n!r}") from None
    if n < 1:
        raise ClusterError(f"motifgrid.cluster.gpu-processes must be at least 1, not {n}")
    return n


def gpu_worker_slots(devices: list, per_gpu: int) -> list:
    """Names of the local GPU worker processes, in the order a cluster starts them: each device's first process
    (named by the device, as dask-cuda names them), then each device's second (``"<device>-1"``), and so on, so
    that the first workers cover every GPU.  ``devices``: the visible devices (ints or UUID strings)."""
    return [(d if k == 0 else f"{d}-{k}", d) for k in range(per_gpu) for d in devices]


def gpu_worker_threads(n_gpu_workers: int) -> int:
    """Threads of each local GPU worker process: ``motifgrid.cluster.gpu-threads`` when set, else the cores
    shared among the GPU worker processes (at least 2).  A worker's threads each take one block at a time (read, GPU scan,
    p-values and Parquet encoding of its hits), so the host work of one block overlaps the GPU work of
    the others; at p = 1e-4 the host work per block is several times the GPU's, hence many threads."""
    cfg = dask.config.get("motifgrid.cluster.gpu-threads", default=None)
    if cfg:
        return int(cfg)
    return max(2, cpu_count() // max(1, int(n_gpu_workers)))


class ClusterError(MotifgridError, RuntimeError):
    """No usable cluster; one line for the user."""


def _cuda_cluster(n_gpus: int, per_gpu: int, **kw):
    """A ``LocalCUDACluster`` of ``per_gpu`` worker processes on each of the first ``n_gpus`` visible GPUs.
    dask-cuda starts one per device and refuses a device listed twice, so each further process takes the spec
    dask-cuda builds for its device (``CUDA_VISIBLE_DEVICES``, CPU affinity, plugins) under the name
    ``gpu_worker_slots`` gives it; the host memory is shared among all the processes."""
    from dask_cuda import LocalCUDACluster  # noqa: PLC0415

    if per_gpu == 1:
        return LocalCUDACluster(n_workers=n_gpus, **kw)

    class SharedGPUCluster(LocalCUDACluster):
        def new_worker_spec(self):
            devices = self.cuda_visible_devices[:n_gpus]
            for name, dev in gpu_worker_slots(devices, per_gpu):
                if name in self.worker_spec:
                    continue
                # dask-cuda's spec for ``dev``: it takes the first device no worker is named after
                held, self.worker_spec = self.worker_spec, {d: None for d in self.cuda_visible_devices if d != dev}
                try:
                    (_, spec), = super().new_worker_spec().items()
                finally:
                    self.worker_spec = held
                return {name: spec}
            raise ValueError(f"no more than {per_gpu} worker processes per GPU on {len(devices)} GPU(s)")

    from distributed.system import MEMORY_LIMIT  # noqa: PLC0415

    n = n_gpus * per_gpu
    return SharedGPUCluster(n_workers=n, memory_limit=int(MEMORY_LIMIT / n), **kw)


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


def connect_scheduler(address: str, security):
    """A client of the scheduler at ``address``; refusals (TLS, certificates, unreachable) as ClusterError."""
    from distributed import Client  # noqa: PLC0415

    if address.startswith("tls://") and security is None:
        raise ClusterError(f"the scheduler at {address} requires TLS: pass --tls-ca, --tls-cert and --tls-key")
    _handshake(address, security)
    try:
        return Client(address=address, **({"security": security} if security is not None else {}))
    except (OSError, ValueError, RuntimeError) as e:   # ssl.SSLError and comm timeouts are OSErrors
        raise _cannot_connect(address, e, security) from None


def _cannot_connect(address: str, e: BaseException, security) -> ClusterError:
    why = (str(e).strip().splitlines() or [type(e).__name__])[0]
    hint = " (check --tls-ca/--tls-cert/--tls-key)" if security is not None else ""
    return ClusterError(f"cannot connect to the scheduler at {address}: {why}{hint}")


def _handshake(address: str, security) -> None:
    """Refuse, in one line and within ``motifgrid.cluster.handshake-timeout`` seconds, an address where no Dask
    scheduler answers.  distributed's ``Client`` waits for the other end's handshake without a time limit (a
    dashboard's HTTP port: no answer, ever), reads any bytes that do come as a frame (an SSH banner: an allocation
    of exbibytes), and retries a refused connection or an unknown host until its connect timeout, saying only that
    it timed out.  This exchanges the handshake alone, on a thread of its own (a notebook's event loop may be
    running in this one)."""
    import asyncio  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    limit = float(dask.config.get("motifgrid.cluster.handshake-timeout", default=10))
    args = security.get_connection_args("client") if security is not None else {}
    with ThreadPoolExecutor(1, thread_name_prefix="scheduler-handshake") as pool:
        try:
            pool.submit(asyncio.run, _probe(address, args, limit)).result()
        except (asyncio.TimeoutError, TimeoutError):
            raise ClusterError(f"no Dask scheduler answered at {address} within {limit:g}s (a scheduler listens on "
                               "8786 unless told otherwise, its dashboard on 8787; "
                               "motifgrid.cluster.handshake-timeout sets the wait)") from None
        except (OSError, ValueError) as e:    # refused, TLS refused, a malformed address, an unknown host
            raise _cannot_connect(address, e, security) from None
        except Exception as e:    # noqa: BLE001 - the other end's bytes are not a Dask message (MemoryError...)
            raise ClusterError(f"{address} answered, but not as a Dask scheduler ({type(e).__name__}); "
                               "check the address and port (a scheduler listens on 8786 unless told otherwise)") from None


async def _probe(address: str, args: dict, limit: float) -> None:
    """distributed's connect and handshake to ``address`` within ``limit`` s.  Where they take over half a second, a
    plain TCP connection tells a refusal at once (distributed retries it until its timeout); a scheduler answers
    well within that, so it does not see (nor log) a connection closed before its handshake."""
    import asyncio  # noqa: PLC0415

    from distributed.comm import connect  # noqa: PLC0415

    host = _tcp_host(address)
    task = asyncio.ensure_future(connect(address, timeout=limit, **args))
    done, _ = await asyncio.wait({task}, timeout=min(0.5, limit))
    if not done and host is not None:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(*host), limit)
            writer.close()
        except ConnectionRefusedError:
            task.cancel()
            raise OSError("connection refused (nothing listens there)") from None
        except (OSError, asyncio.TimeoutError):
            pass
    comm = await asyncio.wait_for(task, limit)
    await comm.close()


def _tcp_host(address: str):
    """(host, port) of a ``tcp://`` or ``tls://`` address (None for other transports); OSError for a host name
    that does not resolve here."""
    import socket  # noqa: PLC0415

    from distributed.comm.addressing import parse_address, parse_host_port  # noqa: PLC0415

    scheme, loc = parse_address(address)
    if scheme not in ("tcp", "tls"):
        return None
    host, port = parse_host_port(loc)
    try:
        socket.getaddrinfo(host, port)
    except socket.gaierror:
        raise OSError(f"the host name {host!r} is not known here") from None
    return host, port


def dashboard_link(client) -> str:
    """The dashboard URL as this machine can open it (local clusters bind it to 127.0.0.1)."""
    port = client.scheduler_info().get("services", {}).get("dashboard")
    addr = client.scheduler.address or ""
    if not port:
        return "none (the scheduler serves none)"
    if addr.startswith("inproc://") or "127.0.0.1" in addr:
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


def on_for_device(setting: str, device: str) -> bool:
    """A ``true | false | auto`` setting of ``dask.config`` for workers of ``device``: ``auto`` is GPU workers only
    (``motifgrid.qvalues.keep-pairs``, ``motifgrid.cluster.retain-freed-memory``)."""
    mode = str(dask.config.get(setting, default="auto")).lower()
    return mode in ("true", "1", "yes") or (mode == "auto" and device == "gpu")


#: imported by the forkserver of ``start-method: forkserver`` (what a worker process imports, and the kernels)
_FORKSERVER_PRELOAD = ("distributed", "numpy", "numba", "workers.preload")
_GPU_PRELOAD = ("cupy", "dask_cuda")


def _start_method() -> str:
    """``motifgrid.cluster.start-method``: ``auto`` is forkserver where the platform has it (Linux), else spawn."""
    import multiprocessing  # noqa: PLC0415

    method = str(dask.config.get("motifgrid.cluster.start-method", default="auto")).lower()
    if method not in ("auto", "spawn", "forkserver"):
        raise ClusterError(f"motifgrid.cluster.start-method must be auto, spawn or forkserver, not {method!r}")
    if method == "auto":
        method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    return method


def _forkserver(gpu: bool):
    """The forkserver context with motifgrid's preload (``_FORKSERVER_PRELOAD``, and CuPy and dask-cuda for GPU
    workers) added to what is set, without importing distributed here: the console scripts start the server before
    they import it (2 s on a GPU host's core).  distributed's ``get_mp_context`` would import its packages in this
    process (pandas among them) and replace the list: once it is loaded, its flag says the list is set."""
    import multiprocessing  # noqa: PLC0415
    import multiprocessing.forkserver as forkserver  # noqa: PLC0415
    import sys  # noqa: PLC0415

    ctx = multiprocessing.get_context("forkserver")
    have = list(getattr(forkserver._forkserver, "_preload_modules", None) or [])
    extra = [m for m in _FORKSERVER_PRELOAD + (_GPU_PRELOAD if gpu else ()) if m not in have]
    if extra:
        ctx.set_forkserver_preload(have + extra)
    utils = sys.modules.get("distributed.utils")
    if utils is not None and hasattr(utils, "_forkserver_preload_set"):
        utils._forkserver_preload_set = True
    return ctx


def prestart_workers(gpu: bool) -> None:
    """Start the forkserver now (``start-method: forkserver``; nothing otherwise), so that its imports and kernel
    loading run in their own process while the caller reads its inputs; the cluster's workers fork from it later."""
    if _start_method() != "forkserver":
        return
    import multiprocessing.forkserver as forkserver  # noqa: PLC0415

    _forkserver(gpu)
    # the environment a Nanny sets before it starts a worker (malloc, BLAS threads), which a worker forked from the
    # server inherits from it: as a spawned worker would have it
    env = dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {}
    os.environ.update({k: str(v) for k, v in env.items()})
    forkserver.ensure_running()           # returns at once: the server imports its preload on its own


@contextlib.contextmanager
def start_method(gpu: bool):
    """Worker processes of a local cluster started as ``motifgrid.cluster.start-method`` says: ``spawn`` (Dask's
    default: each process imports distributed, numpy, numba, CuPy and loads the kernels on its own) or
    ``forkserver``: forked from one server process that has imported them and loaded numba's kernels
    (:mod:`workers.preload`; :func:`prestart_workers` starts it early) — a worker then starts without those
    imports and its first threshold tasks without numba's start.  The server never opens a CUDA context (forked
    children could not use it)."""
    if _start_method() == "spawn":
        yield
        return
    import distributed.utils  # noqa: PLC0415, F401 - so that _forkserver marks its preload as set

    _forkserver(gpu)
    with dask.config.set({"distributed.worker.multiprocessing-method": "forkserver"}):
        yield


@contextlib.contextmanager
def _quick_switches():
    """This process's GIL handed between threads every ``motifgrid.cluster.start-switch-interval`` seconds while a
    local cluster starts.  Its scheduler and nannies run on an event loop thread here, in many short steps; beside a
    thread that holds the GIL (an enrichment's controls and store, a scan's planning) each step waited up to Python's
    5 ms switch interval: a local cluster of two worker processes took 3.6-5.5 s to start beside a busy thread at 5
    ms, 2.2-2.3 s at 0.5 ms (1.6 s alone; the VM, docs/benchmarks.md)."""
    import sys  # noqa: PLC0415

    value = dask.config.get("motifgrid.cluster.start-switch-interval", default=None)
    if not value:
        yield
        return
    old = sys.getswitchinterval()
    sys.setswitchinterval(min(old, float(value)))
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def _register_warmup(client, device: str, gc_threshold=None) -> None:
    """Each worker loads its kernels in the background as it joins (``workers.warmup``; ``motifgrid.cluster.warm-up:
    false`` skips it), and takes this process's ``motifgrid.cluster.switch-interval``, ``gc_threshold`` (parsed
    ``motifgrid.cluster.gc-threshold``), ``motifgrid.cluster.gpu-sync`` and
    ``motifgrid.cluster.retain-freed-memory`` (``auto``: GPU workers; on the
    2-core VM's in-process CPU cluster it saved nothing and raised the peak memory by 7-20 %)."""
    from pipeline.engine.warmup import WarmupPlugin  # noqa: PLC0415 - imports distributed, which the cluster has loaded

    try:
        client.register_plugin(WarmupPlugin(*_warmup_settings(device, gc_threshold)))
    except Exception:          # noqa: BLE001 - an optimisation only: never refuse a cluster over it
        pass


def _warmup_settings(device: str, gc_threshold=None) -> tuple:
    """``(device, switch_interval, gc_threshold, retain_memory, load_kernels, gpu_sync)``: the arguments of
    :func:`workers.warmup.start` (and of the plugin that calls it) from this process's configuration."""
    return (device, dask.config.get("motifgrid.cluster.switch-interval", default=None), gc_threshold,
            on_for_device("motifgrid.cluster.retain-freed-memory", device),
            bool(dask.config.get("motifgrid.cluster.warm-up", default=True)),
            dask.config.get("motifgrid.cluster.gpu-sync", default=None))


class _AbandonedGather(logging.Filter):
    """Drops asyncio's "Task exception was never retrieved" for a gather that Ctrl-C abandoned (``AllExit``): a
    traceback printed above the command's one "interrupted" line (seen in the q-value step)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (exc is not None and type(exc).__name__ == "AllExit"
                    and str(record.msg).startswith("Task exception was never retrieved"))


def _quiet_abandoned_gathers() -> None:
    log = logging.getLogger("asyncio")
    if not any(isinstance(f, _AbandonedGather) for f in log.filters):
        log.addFilter(_AbandonedGather())


@contextlib.contextmanager
def get_client(scheduler: str | None = None, scheduler_file: str | None = None, n_workers: int | None = None,
               device: str | None = None, threads_per_worker: int | None = None, processes: bool = False,
               security=None, quiet: bool = False, dashboard: bool = True, threads_only: bool = False,
               gpu_in_process: bool = False):
    """Yield ``(client, device)`` where device is what the workers will compute on.  ``quiet``: local clusters
    log nothing below CRITICAL, nor does tornado in this process (the caller reports failed tasks itself, in
    one line).  ``dashboard=False``: a local cluster without the Dask dashboard (bokeh's import and server
    are most of a local cluster's start-up: ~0.4 s, for a job over in a second).  ``threads_only``: no cluster
    but this process's threads (:class:`pipeline.engine.thread_client.ThreadClient`; a small local scan), where no
    scheduler nor worker processes are asked for: on the GPU too (this process opens the CUDA context), which spares a
    small GPU job the start of four worker processes, the context's scatter to them and their close (~2 s of a
    200 kb scan's 4.4 s on one H200; docs/benchmarks.md, issue 49).  ``gpu_in_process``: the command's wish for an
    in-process local cluster on a one-GPU machine (:func:`gpu_in_this_process`)."""
    from workers.backend import gc_threshold_setting  # noqa: PLC0415

    try:
        gc = gc_threshold_setting()   # the workers' setting (the warm-up plugin applies it), checked before any start
    except ValueError as e:
        raise ClusterError(str(e)) from None
    if threads_only and not (scheduler or scheduler_file or processes):
        check_local_device(device)
        dev = "gpu" if _local_gpu(device) else "cpu"
        # (--workers counts GPUs on a GPU machine: one here; the threads are the cores')
        client = _thread_client(threads_per_worker or (n_workers if dev == "cpu" else None) or cpu_count(), gc, dev)
        try:
            yield client, dev
        finally:
            client.close()
        return
    if quiet:
        # a failed scan cancels its futures and closes the client while as_completed still gathers results in the
        # background; tornado would log those gathers' CommClosedError as a traceback after our one-line error.
        # distributed sets this logger's level when it is first imported: import it first, or the level is undone
        import distributed  # noqa: F401, PLC0415

        logging.getLogger("tornado.application").setLevel(logging.CRITICAL)
        _quiet_abandoned_gathers()
    if scheduler or scheduler_file:
        client = connect_scheduler(scheduler_address(scheduler, scheduler_file), security)
        # quiet as a local cluster's silence_logs makes it: a failed scan cancels its futures and closes the client
        # with gathers in flight, which distributed logs ("Couldn't gather ...", a closed comm's traceback) around
        # the caller's one-line error (seen once in tests/engine/test_faults.py::test_disk_full)
        # (distributed.client has a level of its own in dask's logging config: "Couldn't gather ... rescheduling"
        # when workers leave, which the run handles itself)
        dlogs = [logging.getLogger(n) for n in ("distributed", "distributed.client")]
        levels = [d.level for d in dlogs]
        if quiet:
            for d in dlogs:
                d.setLevel(logging.CRITICAL)
        try:
            wait = float(dask.config.get("motifgrid.cluster.wait-for-workers", default=120))
            try:
                client.wait_for_workers(1, timeout=wait)
            except TimeoutError:
                raise ClusterError(f"no worker joined the scheduler at {scheduler or scheduler_file} "
                                   f"within {wait:g}s") from None
            check_workers(client)
            dev = device or worker_device(client)
            _register_warmup(client, dev, gc)
            yield client, dev
        finally:
            client.close()
            for d, level in zip(dlogs, levels):
                d.setLevel(level)
        return
    with _quick_switches():
        cluster, client, dev = _local_cluster(device, n_workers, threads_per_worker, processes, quiet, dashboard, gc,
                                              gpu_in_process)
    try:
        yield client, dev
    finally:
        client.close()
        cluster.close()


#: what every worker of an existing scheduler needs (README, "Running on a cluster")
WORKER_NEEDS = ("every worker needs motifgrid installed in its Python (the same version as here), and the genome "
                "store and output folder at the same paths (a shared file system) or URLs")


def check_workers(client) -> None:
    """ClusterError naming the first worker that cannot import motifgrid (a scan failed with a raw
    ``ModuleNotFoundError("No module named 'pipeline'")`` from its first task), and what workers need; a warning for
    workers of another motifgrid version.  Asked through standard-library functions, which any worker can run."""
    import importlib.metadata  # noqa: PLC0415
    import importlib.util  # noqa: PLC0415
    import warnings  # noqa: PLC0415

    for module in ("pipeline.scan", "workers.scan"):
        for worker, spec in sorted(client.run(importlib.util.find_spec, module, on_error="return").items()):
            if spec is None or isinstance(spec, BaseException):
                raise ClusterError(f"worker {worker} cannot import motifgrid ({module}: "
                                   f"{spec if spec is not None else 'not found'}): {WORKER_NEEDS}")
    try:
        ours = importlib.metadata.version("motifgrid")
    except importlib.metadata.PackageNotFoundError:
        return
    for worker, theirs in sorted(client.run(importlib.metadata.version, "motifgrid", on_error="return").items()):
        if isinstance(theirs, str) and theirs != ours:
            warnings.warn(f"worker {worker} runs motifgrid {theirs}, this command {ours}: results may differ",
                          stacklevel=2)


class WorkerLeft(RuntimeError):
    """A worker that tasks were placed on left the scheduler before they finished."""


def gather_placed(client, futures: list, workers, poll: float = 1.0) -> list:
    """``client.gather(futures)``, or :class:`WorkerLeft` as soon as one of ``workers`` (addresses the tasks were
    placed on) has left the scheduler while they run.

    distributed does not run a task placed on workers that have all left, even with ``allow_other_workers``, once
    it has been in ``no-worker`` (every worker gone at once: a nanny restarting them, preemption): a worker joining
    later is offered only the tasks whose restrictions name it (``bulk_schedule_unrunnable_after_adding_worker``).
    Such a task waited forever; the caller submits the work again without a placement instead."""
    workers = set(workers or ())
    if not workers or getattr(client, "threads_only", False):
        return client.gather(futures)
    from distributed import wait  # noqa: PLC0415

    while True:
        try:
            wait(futures, timeout=poll)
        except TimeoutError:
            gone = workers - set(client.scheduler_info().get("workers", {}))
            if gone:
                raise WorkerLeft(f"worker {sorted(gone)[0]} left the scheduler") from None
            continue
        return client.gather(futures)


def _thread_client(threads: int, gc_threshold, device: str = "cpu"):
    """A :class:`~pipeline.engine.thread_client.ThreadClient` of ``threads`` threads, this process warmed up as an
    in-process cluster's worker would be (:func:`warm_this_process`); its memory limit is the machine's, as an
    in-process ``LocalCluster``'s one worker reports."""
    from pipeline.engine.thread_client import ThreadClient  # noqa: PLC0415

    warm_this_process(device, gc_threshold)
    return ThreadClient(threads, machine_memory())


def warm_this_process(device: str, gc_threshold=None) -> None:
    """This process set up and its kernels loading in the background as a worker's would be
    (:func:`workers.warmup.start`, with the workers' settings; for ``"gpu"`` the CUDA context too).  Called again, the
    settings are applied again and the loading is not repeated."""
    from workers.backend import gc_threshold_setting  # noqa: PLC0415
    from workers.warmup import start  # noqa: PLC0415

    *settings, gpu_sync = _warmup_settings(device, gc_threshold if gc_threshold is not None else gc_threshold_setting())
    start(*settings, gpu_sync=gpu_sync)      # (this process is the user's: numba's BLAS probe is not skipped)


def machine_memory() -> int:
    """Bytes of memory this process may use: the machine's, or less where a cgroup (a container, a Slurm job)
    limits it — what ``distributed`` gives an in-process cluster's worker as its limit; 0 if unknown."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):     # (not POSIX) unknown: no limit
        memory = 0
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                limit = f.read().strip()
        except OSError:
            continue
        if limit.isdigit() and int(limit) > 0:
            memory = min(memory, int(limit)) if memory else int(limit)
    return memory


def _local_gpu(device: str | None) -> bool:
    """A local cluster for ``device`` would be GPU workers: ``"gpu"``, or auto (None) where a GPU answers (the probe
    is cached)."""
    return device == "gpu" or (device in (None, "auto") and gpu_available())


def check_local_device(device: str | None) -> None:
    """Refuse ``--device gpu`` for a local cluster where no GPU answers (CuPy missing, no CUDA device, or
    ``MOTIFGRID_NO_GPU``), in one line and before any output is claimed."""
    if device == "gpu" and not gpu_available():
        raise ClusterError("--device gpu: no GPU answers here (CuPy and a CUDA device are needed: "
                           "pip install -e \".[gpu]\"); --device cpu or auto scans on the CPU")


@contextlib.contextmanager
def _no_port_warning():
    """Without distributed's four-line warning when the dashboard's port is taken (another run, a notebook's
    cluster): it then listens on another port, which the command prints (:func:`dashboard_link`)."""
    import warnings  # noqa: PLC0415

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Port \d+ is already in use", category=UserWarning)
        yield


def _host_worker(host: str):
    """An in-process ``distributed.Worker`` class whose HTTP routes (metrics, health) listen on ``host``: given no
    address, a worker of the in-process transport listens on every interface, and ``LocalCluster`` gives it one
    only with the worker's dashboard (bokeh's import, ~0.5 s)."""
    from distributed import Worker  # noqa: PLC0415

    class HostWorker(Worker):
        def __init__(self, *args, dashboard_address=None, **kwargs):
            super().__init__(*args, dashboard_address=dashboard_address or f"{host}:0", **kwargs)

    return HostWorker


def gpu_in_this_process(n_workers: int | None = None, visible: int | None = None, command: bool = False) -> bool:
    """A local GPU cluster (no ``--processes``) of ``n_workers`` GPUs (None: every visible one) is this process's
    threads on the one GPU (:func:`_in_process_cluster`): ``motifgrid.cluster.gpu-in-process`` true, or ``auto`` and
    the command asks for it (``command``: ``scan`` and ``enrich``, whose whole commands were measured faster so on one
    H200; ``variants``, whose host work spreads over four processes' GILs, and the others were not, and keep worker
    processes)."""
    mode = str(dask.config.get("motifgrid.cluster.gpu-in-process", default="auto")).lower()
    if mode in ("false", "0", "no") or (mode == "auto" and not command):
        return False
    if dask.config.get("motifgrid.cluster.gpu-processes", default="auto") not in (None, "auto"):
        return False                 # worker processes asked for by number
    if visible is None:
        import cupy  # noqa: PLC0415

        visible = cupy.cuda.runtime.getDeviceCount()
    return (n_workers or visible) == 1


def _in_process_cluster(threads: int, host: str, dash, worker_dash, quiet: bool, dashboard: bool):
    """A ``LocalCluster`` whose one worker is this process's ``threads`` threads, on the in-process transport (the
    scheduler listens on no network address, its HTTP routes on ``host``).  On a one-GPU machine the GPU scan's worker
    too (``motifgrid.cluster.gpu-in-process``): four worker processes' start, the context's scatter to them and their
    close cost a 3.1 Gb scan ~2 s of 10-16 on one H200, and their tasks ran no faster (docs/benchmarks.md, issue 49)."""
    from distributed import LocalCluster  # noqa: PLC0415

    with _no_port_warning():
        return LocalCluster(dashboard_address=dash, worker_dashboard_address=worker_dash,
                            silence_logs=logging.CRITICAL if quiet else logging.WARNING, n_workers=1,
                            threads_per_worker=threads, processes=False, worker_class=_host_worker(host),
                            scheduler_kwargs=None if dashboard else {"dashboard": False,
                                                                     "dashboard_address": f"{host}:0"})


def _local_cluster(device, n_workers, threads_per_worker, processes, quiet, dashboard, gc, gpu_in_process=False):
    """:func:`get_client`'s local cluster, its client (warm-up plugin registered) and device."""
    from distributed import Client, LocalCluster  # noqa: PLC0415

    host = dask.config.get("motifgrid.cluster.host")
    dash = dask.config.get("motifgrid.cluster.dashboard-address") if dashboard else None
    worker_dash = f"{host}:0" if dashboard else None
    check_local_device(device)
    if _local_gpu(device):
        import cupy  # noqa: PLC0415

        kw = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")} if os.environ.get("CUDA_VISIBLE_DEVICES") else {}
        visible = cupy.cuda.runtime.getDeviceCount()
        if n_workers:
            if n_workers > visible:
                raise ClusterError(f"--workers {n_workers} asks for more GPU workers than the {visible} GPU(s) visible "
                                   "(one worker per GPU; --device cpu for CPU threads)")
        n_gpus = n_workers or visible
        if not processes and gpu_in_this_process(n_workers, visible, gpu_in_process):
            cluster = _in_process_cluster(threads_per_worker or cpu_count(), host, dash, worker_dash, quiet,
                                          dashboard)
            client = Client(cluster)
            _register_warmup(client, "gpu", gc)
            return cluster, client, "gpu"
        per_gpu = gpu_processes(n_gpus)
        threads = threads_per_worker or gpu_worker_threads(n_gpus * per_gpu)
        with start_method(gpu=True):
            cluster = _cuda_cluster(n_gpus, per_gpu, host=host, dashboard_address=dash, threads_per_worker=threads,
                                    worker_dashboard_address=worker_dash,
                                    silence_logs=logging.CRITICAL if quiet else logging.WARNING, **kw)
        dev = "gpu"
    else:
        n = n_workers or cpu_count()
        if processes:
            with start_method(gpu=False), _no_port_warning():
                cluster = LocalCluster(dashboard_address=dash, worker_dashboard_address=worker_dash,
                                       silence_logs=logging.CRITICAL if quiet else logging.WARNING, n_workers=n,
                                       threads_per_worker=threads_per_worker or 1, processes=True, host=host)
        else:
            cluster = _in_process_cluster(threads_per_worker or n, host, dash, worker_dash, quiet, dashboard)
        dev = "cpu"
    client = Client(cluster)
    _register_warmup(client, dev, gc)
    return cluster, client, dev
