"""deploy/slurm/ on a real SLURM: ``scan.sbatch`` and ``jobqueue_scan.py`` submitted to a one-node cluster
(``deploy/slurm/dev-cluster.sh``, which ``.ci/run`` starts before the tests), on a CPU node, their rows compared
with a local run's.  Marked ``slurm``: skipped where no SLURM answers, except in CI (``CI`` set), where that is a
failure: these tests must run there."""
from __future__ import annotations

import gzip
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline.io.genome import ingest
from pipeline.scan.read import read_hits
from tests.conftest import DATA, ROOT, subprocess_env
from tests.scan.test_scan_pipeline import table_rows

pytestmark = pytest.mark.slurm
SLURM = ROOT / "deploy" / "slurm"
MOTIFS = str(DATA / "jaspar2024_subset.jaspar")
SCAN = ["--pvalue", "1e-3", "--no-progress"]


def _slurm_answers() -> str | None:
    """None when sinfo lists an idle or usable node, else why not."""
    if shutil.which("sinfo") is None:
        return "no sinfo here"
    r = subprocess.run(["sinfo", "-h", "-o", "%T"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        return (r.stderr.strip().splitlines() or ["sinfo failed"])[-1]
    if not set(r.stdout.split()) & {"idle", "mixed", "allocated", "completing"}:
        return f"no usable node (sinfo: {' '.join(r.stdout.split()) or 'none'})"
    return None


@pytest.fixture(scope="module")
def slurm():
    why = _slurm_answers()
    if why is not None:
        msg = f"SLURM is not running here ({why}): start it with `bash deploy/slurm/dev-cluster.sh`"
        if os.environ.get("CI"):
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)


@pytest.fixture(scope="module")
def env():
    """The job's environment (sbatch passes the submitter's on): this Python's motifgrid and dask first on PATH, small
    tasks so that a scan of a few hundred kb has blocks to cancel."""
    return subprocess_env(PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}",
                          DASK_MOTIFGRID__SCAN__MIN_TASK_POSITIONS="1",
                          DASK_MOTIFGRID__CLUSTER__WAIT_FOR_WORKERS="60")


@pytest.fixture(scope="module")
def store(tmp_path_factory, chrx_2mb):
    d = tmp_path_factory.mktemp("slurm-genome")
    fa = d / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        for name, (lo, hi) in (("chrS", (0, 600_000)), ("chrT", (700_000, 800_000))):
            s = chrx_2mb[lo:hi]
            f.write(f">{name}\n" + "\n".join(s[i:i + 80] for i in range(0, len(s), 80)) + "\n")
    return ingest(fa, d / "g.zarr", block_size=8_192, halo=40)


@pytest.fixture(scope="module")
def reference(store, tmp_path_factory):
    from pipeline.cli.command import main

    out = tmp_path_factory.mktemp("slurm-ref") / "hits"
    assert main(["scan", store.path, MOTIFS, "--out", str(out), *SCAN]) == 0
    return table_rows(read_hits(str(out)))


def _sbatch(args: list, env: dict, log: Path, wait: bool = True) -> subprocess.CompletedProcess:
    cmd = ["sbatch", "--parsable", f"--output={log}", *(["--wait"] if wait else []), *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def _job_gone(job: str, timeout: float = 120) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = subprocess.run(["squeue", "-h", "-j", job], capture_output=True, text=True)
        if r.returncode != 0 or not r.stdout.strip():
            return
        time.sleep(0.5)
    raise AssertionError(f"job {job} still in the queue after {timeout} s")


@pytest.fixture
def port_8786_taken():
    """Another process holds Dask's default scheduler port (or it is already taken: either way not free)."""
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", 8786))
        s.listen()
    except OSError:
        pass
    yield
    s.close()


def test_sbatch_on_a_cpu_node_with_port_8786_taken(slurm, env, store, reference, tmp_path, port_8786_taken):
    """`sbatch --nodes=1 --cpus-per-task=2 --mem=8G scan.sbatch STORE MOTIFS OUT` as documented, unedited, on a CPU
    node whose port 8786 another process holds: the local run's rows.  (It asked for GPUs, two nodes and 16 cores, and
    started `dask cuda worker` only.)"""
    out, log = tmp_path / "hits", tmp_path / "job.log"
    r = _sbatch(["--nodes=1", "--cpus-per-task=2", "--mem=8G", str(SLURM / "scan.sbatch"), store.path, MOTIFS,
                 str(out), *SCAN], {**env, "MOTIFGRID_RUN_DIR": str(tmp_path / "run")}, log)
    text = log.read_text() if log.exists() else ""
    assert r.returncode == 0, r.stderr + text + (tmp_path / "run" / "workers.log").read_text()
    assert "1 CPU worker(s)" in text and "(a small job)" not in text
    assert ": cpu worker: " in (tmp_path / "run" / "workers.log").read_text()
    assert table_rows(read_hits(str(out))) == reference


def test_sbatch_scancel_then_resume(slurm, env, store, reference, tmp_path):
    """`scancel` mid-scan: the job's log ends with the scan's one "interrupted" line (no traceback), the finished
    blocks are kept, and the same sbatch with `--resume` completes the rows of a local run."""
    out, log = tmp_path / "hits", tmp_path / "job.log"
    args = ["--nodes=1", "--cpus-per-task=2", "--mem=8G", str(SLURM / "scan.sbatch"), store.path, MOTIFS, str(out),
            *SCAN]
    job_env = {**env, "MOTIFGRID_RUN_DIR": str(tmp_path / "run")}
    r = _sbatch(args, job_env, log, wait=False)
    assert r.returncode == 0, r.stderr
    job = r.stdout.strip().split(";")[0]
    deadline = time.time() + 180
    while time.time() < deadline and len(list((out / "_manifest").glob("*.json")) if out.is_dir() else []) < 3:
        time.sleep(0.05)
    subprocess.run(["scancel", job], check=True)
    _job_gone(job)
    text = log.read_text()
    assert "Traceback" not in text and "Error" not in text, text
    ours = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("slurmstepd")]
    assert ours[-1] == "motifgrid scan: interrupted; finished blocks are kept (rerun with --resume)", text
    assert not (out / "_summary.json").exists() and list((out / "_manifest").glob("*.json"))
    r = _sbatch([*args, "--resume"], job_env, tmp_path / "resume.log")
    assert r.returncode == 0, r.stderr + (tmp_path / "resume.log").read_text()
    assert re.search(r"\(\d+ already finished\)", (tmp_path / "resume.log").read_text())
    assert table_rows(read_hits(str(out))) == reference


def test_sbatch_worker_step_failure_ends_the_job(slurm, env, store, tmp_path):
    """A worker step that cannot start (GPU workers asked for where dask-cuda is not installed): the job ends at once
    with one line naming the workers' log, not after the scan's 60-120 s wait for workers."""
    if subprocess.run([sys.executable, "-c", "import dask_cuda"], capture_output=True).returncode == 0:
        pytest.skip("dask-cuda is installed here: `dask cuda worker` would start")
    log = tmp_path / "job.log"
    t0 = time.time()
    r = _sbatch(["--nodes=1", "--cpus-per-task=2", "--mem=4G", str(SLURM / "scan.sbatch"), store.path, MOTIFS,
                 str(tmp_path / "hits"), *SCAN], {**env, "MOTIFGRID_RUN_DIR": str(tmp_path / "run"),
                                                  "MOTIFGRID_WORKER": "gpu"}, log)
    took = time.time() - t0
    text = log.read_text()
    assert r.returncode != 0
    assert text.splitlines()[-1] == (f"motifgrid-scan: the worker step ended (exit 2) while the scan ran; "
                                     f"see {tmp_path / 'run' / 'workers.log'}"), text
    assert "No such command 'cuda'" in text and "Traceback" not in text
    assert took < 50, took


# ------------------------------------------------------------------------------------------ dask-jobqueue
def _jobqueue(args: list, env: dict, tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SLURM / "jobqueue_scan.py"), "--run-dir", str(tmp_path / "run"), *args],
                          env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


def test_jobqueue_scan_on_cpu_workers(slurm, env, store, reference, tmp_path):
    """jobqueue_scan.py: a CPU worker job through dask-jobqueue, the scan on it: the local run's rows."""
    pytest.importorskip("dask_jobqueue")
    out = tmp_path / "hits"
    r = _jobqueue(["--cores", "2", "--memory", "4GB", "--wait", "120", store.path, MOTIFS, str(out), "--", *SCAN],
                  env, tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "1 CPU worker(s)" in r.stdout + r.stderr
    assert table_rows(read_hits(str(out))) == reference


@pytest.mark.parametrize("how", ["gpus", "cores"])
def test_jobqueue_refused_job_in_one_line(slurm, env, store, tmp_path, how):
    """A worker job SLURM would refuse (GPUs this site lacks, more cores than a node has): one line, exit 2, at once.
    (It was a tornado traceback, then the scan's 120 s wait.)"""
    pytest.importorskip("dask_jobqueue")
    extra = ["--gpus-per-job", "1", "--cores", "2"] if how == "gpus" else ["--cores", "4096"]
    r = _jobqueue([*extra, "--memory", "1GB", store.path, MOTIFS, str(tmp_path / "hits")], env, tmp_path, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    line, = r.stderr.strip().splitlines()
    assert line.startswith("jobqueue_scan: error: SLURM refuses the worker job (")
    assert ("gres" if how == "gpus" else "not available") in line


def test_jobqueue_worker_jobs_that_die_end_the_run(slurm, env, store, tmp_path):
    """Worker jobs that end without a worker ever joining (a broken environment on the nodes): the run ends as soon
    as SLURM says they are gone, naming their logs, not after the scan's wait."""
    pytest.importorskip("dask_jobqueue")
    import yaml

    cfg = yaml.safe_load((SLURM / "jobqueue.yaml").read_text())
    cfg["jobqueue"]["slurm"]["python"] = "/bin/false"
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump(cfg))
    t0 = time.time()
    r = _jobqueue(["--config", str(tmp_path / "broken.yaml"), "--cores", "1", "--memory", "1GB", "--wait", "300",
                   store.path, MOTIFS, str(tmp_path / "hits"), "--", *SCAN], env, tmp_path)
    assert r.returncode == 2, r.stderr
    assert "ended and no worker is connected; see " in r.stderr.strip().splitlines()[-1], r.stderr
    assert time.time() - t0 < 120
