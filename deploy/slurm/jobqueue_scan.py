#!/usr/bin/env python3
"""A motifgrid scan on SLURM through dask-jobqueue: worker jobs (CPU, or GPU with ``--gpus-per-job``) as configured in
``jobqueue.yaml``, the scheduler in this process (a login or head node), then ``motifgrid scan --scheduler-file``.

    python deploy/slurm/jobqueue_scan.py --jobs 2 --cores 16 --memory 64GB STORE MOTIFS OUT [-- motifgrid scan options]
    python deploy/slurm/jobqueue_scan.py --jobs 2 --gpus-per-job 4 --cores 16 --memory 240GB STORE MOTIFS OUT

The worker job is checked with ``sbatch --test-only`` first: a request SLURM refuses (a partition, GPUs or memory
the site does not have) ends here in one line.  The scan waits ``--wait`` seconds for the first worker (queued jobs
may take a while); worker jobs that all end before any worker joined end the run at once, naming their logs.
``--tls`` makes the scheduler and workers speak TLS only, with a certificate made for this run (written, readable
by you only, to the run folder, which must be on a file system the nodes share).
"""
from __future__ import annotations

import argparse
import logging
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
CONFIG = HERE / "jobqueue.yaml"


def load_config(path: str | os.PathLike = CONFIG) -> dict:
    """The ``jobqueue.slurm`` settings of ``path`` as ``SLURMCluster`` keyword arguments (unset ones left out,
    so dask-jobqueue's defaults and the user's dask config still apply to them)."""
    with open(path) as f:
        cfg = yaml.safe_load(f)["jobqueue"]["slurm"]
    kw = {k.replace("-", "_"): v for k, v in cfg.items() if v is not None}
    if "name" in kw:                     # the config's `name` is the job name; `name=` would name a worker
        kw["job_name"] = kw.pop("name")
    return kw


def _bytes(text: str) -> int:
    from dask.utils import parse_bytes

    return parse_bytes(text)


def job_settings(config: dict, cores: int | None = None, memory: str | None = None, gpus: int = 0,
                 queue: str | None = None, walltime: str | None = None, account: str | None = None) -> dict:
    """``SLURMCluster`` keyword arguments for one worker job: ``config``'s with the options given.  With ``gpus``, the
    job asks for ``--gres=gpu:N`` and runs ``dask cuda worker`` (one worker process per GPU), each with the job's cores
    and memory divided by N."""
    kw = dict(config)
    for k, v in (("cores", cores), ("memory", memory), ("queue", queue), ("walltime", walltime),
                 ("account", account)):
        if v is not None:
            kw[k] = v
    if gpus:
        total_cores, total_mem = int(kw["cores"]), _bytes(str(kw["memory"]))
        kw.update(worker_command="dask_cuda.cli", job_cpu=total_cores, job_mem=f"{total_mem // 2**20}M",
                  cores=max(1, total_cores // gpus), memory=f"{total_mem // gpus // 2**20}MiB", processes=1)
        kw["job_extra_directives"] = [*kw.get("job_extra_directives", []), f"--gres=gpu:{gpus}"]
    return kw


def make_cluster(config: str | os.PathLike = CONFIG, **kwargs):
    """``SLURMCluster`` configured by ``config`` (keyword arguments override it)."""
    from dask_jobqueue import SLURMCluster

    return SLURMCluster(**{**load_config(config), **kwargs})


def write_pems(sec, run_dir: Path) -> dict:
    """A ``Security.temporary()``'s certificate and key as files (mode 600) for the CLI and the workers."""
    out = {}
    for name, text in (("ca", sec.tls_ca_file), ("cert", sec.tls_client_cert), ("key", sec.tls_client_key)):
        p = run_dir / f"tls-{name}.pem"
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.fchmod(fd, 0o600)             # (an existing file keeps its mode through O_CREAT)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        out[name] = str(p)
    return out


def security_from(pem: dict):
    """One certificate for the scheduler, the workers and this client, TLS required."""
    from distributed.security import Security

    return Security(tls_ca_file=pem["ca"], tls_scheduler_cert=pem["cert"], tls_scheduler_key=pem["key"],
                    tls_worker_cert=pem["cert"], tls_worker_key=pem["key"], tls_client_cert=pem["cert"],
                    tls_client_key=pem["key"], require_encryption=True)


class LaunchError(RuntimeError):
    """One line for the user."""


def check_submission(script: str) -> None:
    """``sbatch --test-only`` of the worker job: LaunchError with SLURM's reason when it would be refused."""
    with tempfile.NamedTemporaryFile("w", suffix=".sh", delete=False) as f:
        f.write(script)
    try:
        r = subprocess.run(["sbatch", "--test-only", f.name], capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise LaunchError("sbatch: command not found (run this on a SLURM login node)") from None
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        why = next((ln for ln in r.stderr.splitlines() if "error" in ln.lower()), r.stderr.strip() or "no reason")
        raise LaunchError(f"SLURM refuses the worker job ({why.strip()}); see the sbatch options "
                          "(--cores, --memory, --gpus-per-job, --queue, --account, --walltime)")


def _job_states(job_ids: list) -> set:
    r = subprocess.run(["squeue", "-h", "-o", "%T", "-j", ",".join(job_ids)], capture_output=True, text=True)
    return set(r.stdout.split()) if r.returncode == 0 else {"UNKNOWN"}


def supervise(scan: subprocess.Popen, cluster, client, log_dir: str, poll: float = 2.0) -> int:
    """The scan's exit status; the scan stopped (exit 1) when every worker job has ended and no worker is connected."""
    while True:
        try:
            return scan.wait(timeout=poll)
        except subprocess.TimeoutExpired:
            pass
        ids = [j.job_id for j in cluster.workers.values() if getattr(j, "job_id", None)]
        if not ids or client.scheduler_info().get("workers"):
            continue
        if not _job_states(ids) & {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "UNKNOWN", "SUSPENDED"}:
            scan.terminate()
            scan.wait()
            raise LaunchError(f"the worker job(s) {', '.join(ids)} ended and no worker is connected; "
                              f"see {log_dir}/*.err")


def parse_args(argv=None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1, help="SLURM jobs (nodes' shares) of workers (default 1)")
    ap.add_argument("--gpus-per-job", type=int, default=0, metavar="N",
                    help="GPU worker jobs: --gres=gpu:N, `dask cuda worker` (default 0: CPU workers)")
    ap.add_argument("--cores", type=int, help="cores a job (default: jobqueue.yaml's)")
    ap.add_argument("--memory", help="memory a job, e.g. 64GB (default: jobqueue.yaml's)")
    ap.add_argument("--queue", help="partition (default: the site's)")
    ap.add_argument("--account")
    ap.add_argument("--walltime", help="e.g. 02:00:00")
    ap.add_argument("--wait", type=float, default=600, metavar="SECONDS",
                    help="how long the scan waits for the first worker (queued jobs; default 600)")
    ap.add_argument("--config", default=str(CONFIG))
    ap.add_argument("--run-dir", default="motifgrid-jobqueue", help="scheduler file, certificates (shared)")
    ap.add_argument("--tls", action="store_true", help="TLS between scheduler, workers and the scan")
    ap.add_argument("--motifgrid", default="motifgrid", help="the motifgrid command (default motifgrid)")
    ap.add_argument("store")
    ap.add_argument("motifs")
    ap.add_argument("out")
    ap.add_argument("scan_args", nargs=argparse.REMAINDER)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    a = parse_args(argv)
    # dask-jobqueue logs a refused submission as a traceback, and distributed the cluster's comings and goings:
    # this launcher says what matters in one line
    for name in ("distributed", "distributed.client", "distributed.deploy", "tornado", "tornado.application",
                 "dask_jobqueue", "asyncio"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    try:
        return _launch(a)
    except LaunchError as e:
        print(f"jobqueue_scan: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("jobqueue_scan: interrupted; the worker jobs are cancelled (rerun with --resume)", file=sys.stderr)
        return 130


def _launch(a) -> int:
    import signal

    signal.signal(signal.SIGTERM, signal.default_int_handler)      # scancel of this job, kill: as Ctrl-C
    run_dir = Path(a.run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    kw = job_settings(load_config(a.config), a.cores, a.memory, a.gpus_per_job, a.queue, a.walltime, a.account)
    tls_args = []
    if a.tls:
        from distributed.security import Security

        pem = write_pems(Security.temporary(), run_dir)
        kw["security"] = security_from(pem)
        kw["protocol"] = "tls://"
        tls_args = ["--tls-ca", pem["ca"], "--tls-cert", pem["cert"], "--tls-key", pem["key"]]
    from dask_jobqueue import SLURMCluster
    from distributed import Client

    with SLURMCluster(**kw) as cluster, Client(cluster) as client:
        check_submission(cluster.job_script())
        cluster.scale(jobs=a.jobs)
        sched_file = run_dir / "scheduler.json"
        client.write_scheduler_file(str(sched_file))
        extra = a.scan_args[1:] if a.scan_args[:1] == ["--"] else a.scan_args
        cmd = [*a.motifgrid.split(), "scan", a.store, a.motifs, "--out", a.out, "--scheduler-file", str(sched_file),
               *tls_args, *extra]
        env = {**os.environ, "DASK_MOTIFGRID__CLUSTER__WAIT_FOR_WORKERS": str(a.wait)}
        scan = subprocess.Popen(cmd, env=env)
        try:
            return supervise(scan, cluster, client, str(Path(kw.get("log_directory", ".")).resolve()))
        except BaseException:
            if scan.poll() is None:
                scan.send_signal(signal.SIGINT)
                scan.wait()
            raise


if __name__ == "__main__":
    sys.exit(main())
