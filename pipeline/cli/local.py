"""The local-cluster choice of a command: ``get_client`` arguments (scheduler, TLS, device), GPU workers or
threads of this process, a cluster started beside the planning (``EarlyCluster``), thresholds on this process's
threads, ``--device auto``'s cost model, the line that says what the job runs on."""
from __future__ import annotations

import os
import threading

import dask.config

from pipeline.cli.args import UserError


def _security(a):
    """``distributed.Security`` from ``--tls-ca/--tls-cert/--tls-key`` (files checked here), or None."""
    flags = {"--tls-ca": a.tls_ca, "--tls-cert": a.tls_cert, "--tls-key": a.tls_key}
    if not any(flags.values()):
        return None
    if not (a.scheduler or a.scheduler_file):
        raise UserError("--tls-ca/--tls-cert/--tls-key are for a running scheduler (--scheduler or "
                        "--scheduler-file); local clusters listen on 127.0.0.1 only")
    if not (a.tls_ca and a.tls_cert):
        raise UserError("TLS needs --tls-ca and --tls-cert (and --tls-key unless the key is in the certificate file)")
    for flag, path in flags.items():
        if path and not os.path.isfile(path):
            raise UserError(f"{path}: no such file ({flag})")
    from distributed.security import Security  # noqa: PLC0415

    return Security(tls_ca_file=a.tls_ca, tls_client_cert=a.tls_cert, tls_client_key=a.tls_key,
                    require_encryption=True)


def client_kwargs(a):
    """``get_client`` arguments; the scheduler file and TLS files are checked here, before any work starts."""
    from pipeline.engine.cluster import check_local_device, scheduler_address  # noqa: PLC0415

    dev = None if a.device == "auto" else a.device
    scheduler = scheduler_address(a.scheduler, a.scheduler_file)
    if scheduler is None:
        check_local_device(dev)
    return dict(scheduler=scheduler, n_workers=a.workers, device=dev,
                threads_per_worker=a.threads, processes=a.processes, security=_security(a))


def local_gpu(client_kw: dict) -> bool:
    """A local cluster for these arguments would be GPU workers: ``--device gpu``, or ``--device auto`` where a GPU
    answers (the probe is cached)."""
    from workers.backend import gpu_available  # noqa: PLC0415

    return client_kw["device"] == "gpu" or (client_kw["device"] is None and gpu_available())


def prestart(client_kw: dict, gpu_in_process: bool = False) -> None:
    """A local cluster of worker processes (GPU workers, ``--processes``): start their forkserver now
    (:func:`pipeline.engine.cluster.prestart_workers`), so that it imports and loads kernels while the command reads its
    inputs.  Under ``--device auto`` it is started where a GPU answers (the probe is cached: ``--device auto``
    asks it anyway), and stays idle if the cost model then picks the in-process CPU cluster."""
    from pipeline.engine.cluster import gpu_in_this_process, prestart_workers, warm_this_process  # noqa: PLC0415

    if client_kw["scheduler"] is not None:
        return
    gpu = local_gpu(client_kw)
    if gpu and not client_kw["processes"] and gpu_in_this_process(client_kw["n_workers"], command=gpu_in_process):
        warm_this_process("gpu")          # the cluster's one worker will be this process: CUDA context, kernels
    elif gpu or client_kw["processes"]:
        prestart_workers(gpu=gpu)


def estimated_positions(path: str | None) -> int | None:
    """A scan's window starts guessed before its planning, to choose where it runs before the inputs are read: a
    genome store's length; a FASTA file's size (× 4 gzipped: DNA gzips 3.9-4.5×); None for a URL or what cannot be
    read (the planning then says what is wrong)."""
    from pipeline.io import storage  # noqa: PLC0415

    if path is None or storage.is_url(path):
        return None
    if os.path.isdir(path):
        try:
            from pipeline.io.genome import GenomeStore  # noqa: PLC0415

            return int(GenomeStore(path).total_length)
        except Exception:      # noqa: BLE001 - not a store of ours: the planning reports it
            return None
    try:
        size = os.path.getsize(path)
    except OSError:
        return None
    return size * 4 if path.endswith((".gz", ".bgz", ".bgzf", ".bgzip")) else size


def gpu_on_threads(client_kw: dict, path: str | None) -> bool:
    """A local GPU scan (``--device gpu``, or auto where a GPU answers) that will run on this process's threads
    (:func:`on_threads`): no ``--scheduler`` nor ``--processes``, and at most ``motifgrid.scan.threads-max-positions``
    positions guessed from its input (:func:`estimated_positions`).  Such a scan opens the CUDA context and loads its
    kernels in this process beside the planning, instead of starting GPU worker processes: on one H200 those cost a
    200 kb scan ~2 s of its 4.4 (start, scatter, close; docs/benchmarks.md, issue 49)."""
    if client_kw["scheduler"] is not None or client_kw["processes"] or not local_gpu(client_kw):
        return False
    n = estimated_positions(path)
    if n is None:
        return False
    if n <= int(dask.config.get("motifgrid.scan.threads-max-positions", default=0)):
        return True
    from pipeline.engine.cluster import gpu_in_this_process  # noqa: PLC0415

    # one GPU: any size (a 3.1 Gb scan on one H200 12.9 s cold at 1e-4, against 14.3 on an in-process cluster and
    # 16.3 on four worker processes; docs/benchmarks.md, issue 49); the dashboard needs --processes
    return n <= float(dask.config.get("motifgrid.scan.gpu-threads-max-positions", default=0)) and \
        gpu_in_this_process(client_kw["n_workers"], command=True)


def cpu_on_threads(client_kw: dict, path: str | None) -> bool:
    """A local CPU scan that will run on this process's threads (:func:`on_threads`), guessed before planning as
    :func:`gpu_on_threads` does: its kernels then load beside the planning instead of in its first tasks."""
    if client_kw["scheduler"] is not None or client_kw["processes"] or local_gpu(client_kw):
        return False
    n = estimated_positions(path)
    limit = min(int(dask.config.get("motifgrid.scan.threads-max-positions", default=0)),
                int(dask.config.get("motifgrid.scan.dashboard-min-positions", default=0)) - 1)
    return n is not None and n <= limit


def threshold_threads_for(client_kw: dict, gpu_threads: bool = False) -> int:
    """Threads of this process for the thresholds beside the planning (``pipeline.scan.plan.plan_scan``): every core when
    the scan's cluster will be threads of this process (CPU, no ``--processes``), which would compute them on the
    same cores after its start anyway (``gpu_threads``: a GPU scan on this process's threads, :func:`gpu_on_threads`);
    else 0: worker processes start on those cores meanwhile (16 threshold threads beside the start of one H100's four
    GPU workers made the whole scan 0.4-0.5 s slower; docs/benchmarks.md)."""
    from pipeline.engine.cluster import cpu_count  # noqa: PLC0415

    if gpu_threads:
        return cpu_count()
    if client_kw["scheduler"] is not None or client_kw["processes"] or local_gpu(client_kw):
        return 0
    return cpu_count()


def load_in_background(fn) -> threading.Thread:
    """``fn()`` on a daemon thread (loading ahead of need: a failure is left for the step that needs it to report)."""
    def run():
        try:
            fn()
        except Exception:  # noqa: BLE001, S110
            pass
    t = threading.Thread(target=run, name=f"motifgrid-{getattr(fn, '__name__', 'load')}", daemon=True)
    t.start()
    return t


class EarlyCluster:
    """``get_client(**kw)`` entered on a thread at once, so that a local GPU cluster starts while the command
    plans (reading the motifs and the store: 1.4 s on a 16-core H200 host, beside a 4-6 s start); ``get()`` waits
    for it; leaving the ``with`` block waits for the start to finish, then closes it (a planning error included)."""

    def __init__(self, **kw):
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        from pipeline.engine.cluster import get_client  # noqa: PLC0415

        self._cm = get_client(**kw)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cluster-start")
        self._entered = self._pool.submit(self._cm.__enter__)

    def get(self):
        return self._entered.result()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._pool.shutdown(wait=True)
        if self._entered.exception() is None:     # started: close it (a failed start closed what it had)
            self._cm.__exit__(*exc)
        return False


def early_cluster(kw: dict, processes: bool, paths: list, motifs: str, gpu_in_process: bool = False):
    """The command's local cluster of worker processes (``processes``: the command's arguments ask for one) started now
    on a thread (:class:`EarlyCluster`), beside the command's reading of its inputs; None for an in-process cluster,
    a scheduler given, or an input plainly missing (its error then comes at once, not after a start)."""
    if kw["scheduler"] is None and processes and _inputs_present(paths, motifs):
        return EarlyCluster(**kw, quiet=True, dashboard=True, gpu_in_process=gpu_in_process)
    return None


def _inputs_present(paths: list, motifs: str) -> bool:
    """The input files (``paths``; None for one not given) and the motif file exist: URLs and JASPAR release names are
    taken as given.  A command starts its cluster beside the planning only then, so a plainly missing input is
    reported at once instead of after the start."""
    from pipeline.io import storage  # noqa: PLC0415
    from pipeline.motifs.releases import parse_release  # noqa: PLC0415

    given = [p for p in paths if p is not None] + ([] if parse_release(motifs) is not None else [motifs])
    return all(storage.is_url(p) or os.path.exists(p) for p in given)


def on_threads(small: bool, positions: int) -> bool:
    """A job without the dashboard (``small``) and of at most ``motifgrid.scan.threads-max-positions`` positions runs
    on the command's threads where its cluster would be local CPU threads (:func:`pipeline.engine.cluster.get_client`)."""
    return small and positions <= int(dask.config.get("motifgrid.scan.threads-max-positions", default=0))


def runs_on(client, device: str) -> str:
    """``2 CPU thread(s), no cluster`` (:class:`pipeline.engine.thread_client.ThreadClient`) or ``4 GPU worker(s)``."""
    if getattr(client, "threads_only", False):
        n = sum(client.nthreads().values())
        return f"the GPU from {n} thread(s), no cluster" if device == "gpu" else f"{n} CPU thread(s), no cluster"
    return f"{len(client.scheduler_info()['workers'])} {device.upper()} worker(s)"


def cluster_line(client, device: str, small: bool) -> str:
    """What the scan runs on: the workers and the dashboard, or this process's threads (a small local CPU job)."""
    from pipeline.engine.cluster import dashboard_link  # noqa: PLC0415

    if getattr(client, "threads_only", False):
        why = "a small job; dashboard off" if small else "one GPU: this process; --processes for the dashboard"
        return f"[bold]motifgrid scan[/] on {runs_on(client, device)} ({why})"
    addr = client.scheduler.address or ""
    follow = "" if addr.startswith("inproc://") else f"; scheduler: {addr}"   # for notebooks/dashboard.ipynb
    return (f"[bold]motifgrid scan[/] on {runs_on(client, device)}; "
            f"dashboard: {'off (a small job)' if small else dashboard_link(client)}{follow}")


def auto_device(job, pvalue: float, threads: bool = False):
    """The cost model's device for a local scan on a machine with GPUs (:mod:`pipeline.engine.cost`; ``threads``: it
    would run on this process's threads, :func:`on_threads`); None without one."""
    from workers.backend import gpu_available  # noqa: PLC0415

    if not gpu_available():
        return None
    import cupy  # noqa: PLC0415

    from pipeline.engine.cluster import cpu_count  # noqa: PLC0415
    from pipeline.engine.cost import estimate  # noqa: PLC0415

    strands = len(job.mset.strand_rows)
    columns = strands * sum(int(w.shape[0]) for w in job.mset.pwms)
    return estimate(job.positions, columns, strands * len(job.mset.pwms), pvalue, cpu_count(),
                    cupy.cuda.runtime.getDeviceCount(), threads=threads)
