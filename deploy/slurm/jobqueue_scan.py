#!/usr/bin/env python3
"""A motifgrid scan on SLURM through dask-jobqueue: GPU worker jobs as configured in ``jobqueue.yaml``,
the scheduler in this process (a login or head node), then ``motifgrid scan --scheduler-file``.

    python deploy/slurm/jobqueue_scan.py --jobs 2 STORE MOTIFS OUT [-- more motifgrid scan options]

``--tls`` makes the scheduler and workers speak TLS only, with a certificate made for this run (written,
readable by you only, to the run folder, which must be on a file system the nodes share).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
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


def make_cluster(config: str | os.PathLike = CONFIG, **kwargs):
    """``SLURMCluster`` configured by ``config`` (keyword arguments override it)."""
    from dask_jobqueue import SLURMCluster

    return SLURMCluster(**{**load_config(config), **kwargs})


def write_pems(sec, run_dir: Path) -> dict:
    """A ``Security.temporary()``'s certificate and key as files (mode 600) for the CLI and the workers."""
    out = {}
    for name, text in (("ca", sec.tls_ca_file), ("cert", sec.tls_client_cert), ("key", sec.tls_client_key)):
        p = run_dir / f"tls-{name}.pem"
        p.touch(mode=0o600)
        p.write_text(text)
        out[name] = str(p)
    return out


def security_from(pem: dict):
    """One certificate for the scheduler, the workers and this client, TLS required."""
    from distributed.security import Security

    return Security(tls_ca_file=pem["ca"], tls_scheduler_cert=pem["cert"], tls_scheduler_key=pem["key"],
                    tls_worker_cert=pem["cert"], tls_worker_key=pem["key"], tls_client_cert=pem["cert"],
                    tls_client_key=pem["key"], require_encryption=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1, help="SLURM jobs (nodes) of GPU workers")
    ap.add_argument("--config", default=str(CONFIG))
    ap.add_argument("--run-dir", default="motifgrid-jobqueue", help="scheduler file, certificates (shared)")
    ap.add_argument("--tls", action="store_true", help="TLS between scheduler, workers and the scan")
    ap.add_argument("store")
    ap.add_argument("motifs")
    ap.add_argument("out")
    ap.add_argument("scan_args", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    run_dir = Path(a.run_dir).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    kw, tls_args = {}, []
    if a.tls:
        from distributed.security import Security

        pem = write_pems(Security.temporary(), run_dir)
        kw["security"] = security_from(pem)
        kw["protocol"] = "tls://"
        tls_args = ["--tls-ca", pem["ca"], "--tls-cert", pem["cert"], "--tls-key", pem["key"]]
    from distributed import Client

    with make_cluster(a.config, **kw) as cluster, Client(cluster) as client:
        cluster.scale(jobs=a.jobs)
        sched_file = run_dir / "scheduler.json"
        client.write_scheduler_file(str(sched_file))
        extra = a.scan_args[1:] if a.scan_args[:1] == ["--"] else a.scan_args
        cmd = ["motifgrid", "scan", a.store, a.motifs, "--out", a.out, "--scheduler-file", str(sched_file),
               *tls_args, *extra]
        return subprocess.call(cmd)


if __name__ == "__main__":
    sys.exit(main())
