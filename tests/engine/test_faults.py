"""Faults, for real: worker processes and scan clients killed with SIGKILL mid-run, an output folder
that becomes unwritable, a disk that fills up.  Every run ends with a dataset identical to an
undisturbed run (sorted Parquet content, one manifest entry per block, nothing left half-written).

The cluster is a real multi-process local cluster (scheduler + 2 worker processes under nannies, on
loopback); scans run as ``motifgrid scan --scheduler ADDRESS`` subprocesses.
"""
from __future__ import annotations

import contextlib
import gzip
import json
import logging
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dask.config
import numpy as np
import pytest

from pipeline.io.genome import ingest
from pipeline.scan.graph import run_scan
from pipeline.scan.read import read_hits
from tests.conftest import DATA, ROOT, subprocess_env
from tests.scan.test_scan_pipeline import table_rows

MOTIFS = str(DATA / "jaspar2024_subset.jaspar")
PVALUE = "1e-3"
ENV = subprocess_env(DASK_MOTIFGRID__SCAN__MIN_TASK_POSITIONS="1", DASK_MOTIFGRID__CLUSTER__WAIT_FOR_WORKERS="60")


@pytest.fixture(scope="module")
def genome(tmp_path_factory, chrx_2mb):
    """1.2 Mb of real human chrX as two contigs, 16 kb blocks: 74 tasks of one block each."""
    d = tmp_path_factory.mktemp("faults-genome")
    fa = d / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        for name, s in (("chrX_a", chrx_2mb[:900_000]), ("chrX_b", chrx_2mb[1_000_000:1_300_000])):
            f.write(f">{name}\n" + "\n".join(s[i:i + 80] for i in range(0, len(s), 80)) + "\n")
    return ingest(fa, d / "g.zarr", block_size=16_384, halo=40)


@pytest.fixture(scope="module")
def cluster():
    """Scheduler + 2 single-threaded worker processes (nannies restart a killed worker), loopback only."""
    import dask.config
    from distributed import Client, LocalCluster

    # a killed worker's process is started again by its nanny; LocalCluster closes that nanny for good when no
    # worker of its name has registered within lost-worker-timeout (15 s), which a fresh process on a loaded
    # machine (the suite runs on two processes) can miss
    with dask.config.set({"distributed.scheduler.worker-ttl": "30s", "distributed.deploy.lost-worker-timeout": "120s"}), \
            LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL) as cl, Client(cl) as c:
        yield cl.scheduler_address, c


@pytest.fixture(scope="module")
def reference(genome, cluster, tmp_path_factory):
    """The undisturbed run: its sorted rows, blocks and hit count."""
    _, client = cluster
    out = tmp_path_factory.mktemp("faults-ref") / "hits"
    run_scan(genome.path, MOTIFS, str(out), pvalue=float(PVALUE), client=client, progress=False)
    return {"rows": table_rows(read_hits(str(out))), "blocks": _manifest_blocks(out), "out": out,
            "hits": json.loads((out / "_summary.json").read_text())["hits"]}


def _manifest_blocks(out: Path) -> list:
    return sorted(json.loads(p.read_text())["block"] for p in (out / "_manifest").glob("*.json"))


def _assert_identical(out: Path, ref: dict) -> None:
    """Same rows (sorted), every block once in the manifest, one file per block, no temporaries."""
    assert (out / "_summary.json").exists()
    assert _manifest_blocks(out) == ref["blocks"]                       # no block lost
    parts = sorted(p.name for p in out.glob("*/**/part-*.parquet"))
    assert len(parts) == len(set(parts)) == len(list(ref["out"].glob("*/**/part-*.parquet"))) > 0
    assert table_rows(read_hits(str(out))) == ref["rows"]                 # none written twice, nothing changed
    assert json.loads((out / "_summary.json").read_text())["hits"] == ref["hits"]
    assert not [p for p in out.rglob("*") if ".tmp-" in p.name]


def _assert_partial_usable(out: Path, ref: dict) -> int:
    """After a fault: no finished marker; the finished blocks read back as a subset of the reference."""
    assert not (out / "_summary.json").exists()
    done = _manifest_blocks(out)
    assert set(done) < set(ref["blocks"])
    rows = table_rows(read_hits(str(out)))
    assert len(rows) == len(set(rows)) and set(rows) <= set(ref["rows"])
    return len(done)


def _scan(genome, out: Path, scheduler: str | None, *extra, preexec_fn=None, env=None) -> subprocess.Popen:
    """``motifgrid scan`` in its own process group, output to a temporary log."""
    args = [sys.executable, "-m", "pipeline.cli", "scan", genome.path, MOTIFS, "--pvalue", PVALUE,
            "--out", str(out), "--no-progress", *extra]
    if scheduler:
        args += ["--scheduler", scheduler]
    log = tempfile.TemporaryFile("w+")
    p = subprocess.Popen(args, env={**ENV, **(env or {})}, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                         preexec_fn=preexec_fn, cwd=ROOT)
    p.log = log
    return p


def _finish(p: subprocess.Popen, timeout: float = 120) -> tuple[int, str]:
    rc = p.wait(timeout=timeout)
    p.log.seek(0)
    text = p.log.read()
    p.log.close()
    return rc, text


def _wait_blocks(out: Path, n: int, p: subprocess.Popen, timeout: float = 60) -> int:
    deadline = time.time() + timeout
    while time.time() < deadline:
        k = len(list((out / "_manifest").glob("*.json"))) if (out / "_manifest").is_dir() else 0
        if k >= n:
            return k
        assert p.poll() is None, f"the scan ended before {n} blocks were done: {_finish(p)[1]}"
        time.sleep(0.005)
    raise AssertionError(f"fewer than {n} blocks done after {timeout} s")


def _resume(genome, out: Path, client, n_done: int) -> None:
    """``--resume`` (the same code as the CLI's, on the test's client): only the missing blocks are scanned.  A resume
    that takes over 60 s prints the scheduler's view to the real stderr (once in several CI runs it stalled for
    minutes, then finished: session 33's note)."""
    import threading

    stall = threading.Timer(60, _print_scheduler_state, args=(client,))
    stall.daemon = True
    stall.start()
    try:
        res = run_scan(genome.path, MOTIFS, str(out), pvalue=float(PVALUE), client=client, progress=False, resume=True)
    finally:
        stall.cancel()
    assert res.blocks_skipped >= n_done and res.blocks == len(_manifest_blocks(out))


def _print_scheduler_state(client) -> None:
    """The scheduler's tasks by state, the workers' status, processing and memory (a stalled resume's diagnosis)."""
    def view(dask_scheduler):
        import collections

        states = collections.Counter(ts.state for ts in dask_scheduler.tasks.values())
        waiting = [(ts.key, ts.state, [d.key for d in ts.waiting_on or ()][:3], [w.address for w in ts.who_has or ()])
                   for ts in dask_scheduler.tasks.values() if ts.state not in ("memory", "released", "forgotten")][:20]
        workers = {w.address: (w.status.name, len(w.processing), w.memory.process, w.last_seen)
                   for w in dask_scheduler.workers.values()}
        return {"states": dict(states), "waiting": waiting, "workers": workers}
    try:
        print("motifgrid test_faults: a resume past 60 s:", client.run_on_scheduler(view), file=sys.__stderr__,
              flush=True)
        print("  call stacks:", {w: list(v)[:3] for w, v in client.call_stack().items()}, file=sys.__stderr__,
              flush=True)
    except Exception as e:  # noqa: BLE001 - a diagnosis only
        print("motifgrid test_faults: no scheduler view:", e, file=sys.__stderr__, flush=True)


def _one_line(text: str) -> str:
    """The error: one line, the last one (after the start-up banner, if the cluster was reached)."""
    lines = [x for x in text.splitlines() if x.strip()]
    errors = [x for x in lines if "error" in x.lower()]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in text, text
    assert errors[0].startswith("motifgrid scan: error: "), text
    return errors[0]


# ------------------------------------------------------------------------------------ killed processes
@pytest.mark.parametrize("rep", range(3))
def test_worker_killed_mid_run(genome, cluster, reference, tmp_path, rep):
    """SIGKILL of a worker process that is running a block: the scheduler reruns its tasks elsewhere and
    the dataset is identical to an undisturbed run.  Rep 1 keeps the hits' (motif, p-value) pairs in the workers
    (as GPU workers do): the dead worker's pairs are gone, and the q-values come from the files."""
    addr, client = cluster
    client.wait_for_workers(2, timeout=60)
    pids = client.run(os.getpid)
    out = tmp_path / "hits"
    p = _scan(genome, out, addr, env={"DASK_MOTIFGRID__QVALUES__KEEP_PAIRS": "true"} if rep == 1 else None)
    _wait_blocks(out, 3 + 5 * rep, p)
    victim = None
    while victim is None:
        busy = {w: [k for k in keys if str(k).startswith("scan-")] for w, keys in client.processing().items()}
        victim = next((w for w, keys in busy.items() if keys and w in pids), None)
        assert p.poll() is None, "the scan ended before a worker could be killed"
        time.sleep(0.002)
    os.kill(pids[victim], signal.SIGKILL)
    rc, log = _finish(p)
    assert rc == 0, log
    _assert_identical(out, reference)
    cut = client.run_on_scheduler(_removed_while_processing, worker=victim)
    assert any(k.startswith("scan-") for k in cut), cut          # the worker died with a block in progress


def _removed_while_processing(worker, dask_scheduler=None) -> list:
    """Keys a worker was processing when the scheduler removed it (from the scheduler's event log)."""
    keys = []
    for _, e in dask_scheduler.get_events(worker):
        if isinstance(e, dict) and e.get("action") == "remove-worker":
            keys += [str(k) for k in e.get("processing-tasks", ())]
    return keys


@pytest.mark.parametrize("rep", range(3))
def test_client_killed_mid_run_resumes(genome, cluster, reference, tmp_path, rep):
    """SIGKILL of the `motifgrid scan` process: the progress shows the scan abandoned, the finished blocks
    are kept, and `--resume` completes it identically."""
    from pipeline.engine.progress import read_progress

    addr, client = cluster
    client.wait_for_workers(2, timeout=60)
    out = tmp_path / "hits"
    p = _scan(genome, out, addr)
    _wait_blocks(out, 2 + 8 * rep, p)
    # the workers may write blocks before the loaded client has published "running" (it submits first): wait for it
    deadline = time.time() + 20
    while read_progress(client)["state"] != "running" and time.time() < deadline and p.poll() is None:
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGKILL)
    _finish(p)
    n_done = _assert_partial_usable(out, reference)
    assert n_done >= 2
    deadline = time.time() + 10
    while not (st := read_progress(client))["abandoned"] and time.time() < deadline:
        time.sleep(0.05)
    assert st["state"] == "running" and st["abandoned"] and st["out"] == str(out)
    _resume(genome, out, client, n_done)
    _assert_identical(out, reference)
    st = read_progress(client)         # the resumed run's progress counts the blocks of the killed one
    assert st["state"] == "finished" and st["blocks_skipped"] >= n_done
    assert st["blocks_done"] == st["blocks_total"] == len(reference["blocks"]) and st["hits"] == reference["hits"]


# ------------------------------------------------------------------------------------ a standalone cluster
@pytest.fixture(scope="module")
def standalone(tmp_path_factory):
    """A real standalone cluster as a user starts one: ``dask scheduler --scheduler-file`` and two ``dask worker``
    processes (one thread each, under nannies that start a killed worker again at a new address), loopback only.
    The scheduler imports :mod:`tests.cluster_faults` (the plugin that kills the workers at a chosen stage)."""
    from distributed import Client

    d = tmp_path_factory.mktemp("standalone")
    sched_file = d / "scheduler.json"
    dask_cli = _dask_cli()
    env = {**ENV, "PYTHONPATH": str(ROOT), "DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL": "30s"}
    procs = [subprocess.Popen([dask_cli, "scheduler", "--host", "127.0.0.1", "--port", "0", "--scheduler-file",
                               str(sched_file), "--dashboard-address", "127.0.0.1:0"], env=env, cwd=d,
                              stdout=subprocess.DEVNULL, stderr=open(d / "scheduler.log", "w"))]
    deadline = time.time() + 60
    while not sched_file.exists() and time.time() < deadline:
        time.sleep(0.05)
    for k in range(2):
        procs.append(subprocess.Popen([dask_cli, "worker", "--scheduler-file", str(sched_file), "--nthreads", "1",
                                       "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0",
                                       "--local-directory", str(d), "--name", f"w{k}"], env=env, cwd=d,
                                      stdout=subprocess.DEVNULL, stderr=open(d / f"worker{k}.log", "w")))
    try:
        with Client(scheduler_file=str(sched_file), timeout=60) as client:
            client.wait_for_workers(2, timeout=60)
            yield sched_file, client
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def _qvalue_rows(out: Path) -> list:
    import pyarrow.parquet as pq

    t = pq.read_table(out / "_qvalues.parquet")
    return sorted(zip(*(t.column(c).to_pylist() for c in ("motif_id", "pvalue", "qvalue", "hits"))))


# (task key prefix, the state that triggers the kill, after the last such task only, keep the pairs in the workers)
STAGES = {
    "thresholds": ("_threshold_batch-", "processing", False, False),
    "first-block": ("scan-", "memory", False, False),
    "last-block": ("scan-", "memory", True, False),
    "last-block-kept-pairs": ("scan-", "memory", True, True),
    "qvalues-collect": ("qvalues-collect-", "processing", False, False),
    "qvalues-reduce": ("qvalues-reduce-", "processing", False, False),
    "qvalues-kept-collect": ("qvalues-kept-", "processing", False, True),
    "qvalues-kept-pick": ("qvalues-pick-", "processing", False, True),
    "qvalues-kept-reduce": ("qvalues-reduce-", "processing", False, True),
}


@pytest.mark.parametrize("stage", sorted(STAGES))
def test_every_worker_killed_at_the_end_of_a_run(genome, standalone, reference, tmp_path, stage):
    """Every worker process of a standalone cluster SIGKILLed at a stage of a run — the thresholds, the first block,
    the last block, each task of the q-value reduction — (their nannies start them again at new addresses, as SLURM
    preemption, a time limit or the OOM killer with a restart would): the scan finishes by itself with the local
    run's rows and ``_qvalues.parquet``.  (The scattered context of the block tasks left with the workers, and the
    reduction's tasks were pinned to one worker address and waited for it forever, issue 45.)"""
    from tests.cluster_faults import KillWorkersAt, killed

    sched_file, client = standalone
    prefix, finish, last, keep = STAGES[stage]
    client.wait_for_workers(2, timeout=60)
    client.register_plugin(KillWorkersAt(prefix, finish, last), name=KillWorkersAt.name)
    try:
        out = tmp_path / "hits"
        p = _scan(genome, out, None, "--scheduler-file", str(sched_file),
                  env={"DASK_MOTIFGRID__QVALUES__KEEP_PAIRS": str(keep).lower(),    # thresholds computed, not cached
                       "DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR": str(tmp_path / "cache")})
        try:
            rc, log = _finish(p, timeout=150)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            raise AssertionError(f"the scan hung after the workers were killed ({stage}): {_finish(p)[1]}") from None
        victims = client.run_on_scheduler(killed)
    finally:
        client.unregister_scheduler_plugin(KillWorkersAt.name)
    assert len(victims) == 2 and all(k.startswith(prefix) for _, _, k in victims), victims
    assert rc == 0, log
    _assert_identical(out, reference)
    assert _qvalue_rows(out) == _qvalue_rows(reference["out"])


def _dask_cli() -> str:
    return shutil.which("dask", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")


@contextlib.contextmanager
def _one_worker_cluster(d: Path, worker: list, env: dict | None = None):
    """A ``dask scheduler`` process (scheduler file ``d/s.json``) and one worker started by ``worker`` (its
    arguments before ``--scheduler-file``); yields (scheduler process, scheduler file); both stopped after."""
    sched = subprocess.Popen([_dask_cli(), "scheduler", "--host", "127.0.0.1", "--port", "0", "--scheduler-file",
                              str(d / "s.json"), "--dashboard-address", "127.0.0.1:0"], env=ENV, cwd=d,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 60
    while not (d / "s.json").exists() and time.time() < deadline:
        time.sleep(0.05)
    proc = subprocess.Popen([*worker, "--scheduler-file", str(d / "s.json"), "--nthreads", "1", "--host",
                             "127.0.0.1"], env={**ENV, **(env or {})}, cwd=d, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        yield sched, d / "s.json"
    finally:
        proc.terminate()
        sched.kill()
        proc.wait()
        sched.wait()


def test_a_worker_without_motifgrid_is_named(genome, tmp_path):
    """A standalone worker whose Python cannot import motifgrid: one line naming the worker and what every worker
    needs, before any block is sent (it was a raw ModuleNotFoundError("No module named 'pipeline'"))."""
    bare = [sys.executable, str(ROOT / "tests" / "bare_worker.py")]
    with _one_worker_cluster(tmp_path, bare, {"HIDE_ROOT": str(ROOT)}) as (_, sched_file):
        rc, log = _finish(_scan(genome, tmp_path / "hits", None, "--scheduler-file", str(sched_file)))
    assert rc == 2
    line = _one_line(log)
    assert re.search(r"worker tcp://127\.0\.0\.1:\d+ cannot import motifgrid \(pipeline\.scan: No module named "
                     r"'pipeline'\): every worker needs motifgrid installed", line), line
    assert "the same paths (a shared file system) or URLs" in line
    assert not list((tmp_path / "hits").glob("_manifest/*.json"))


def test_a_scheduler_killed_mid_scan_is_named(genome, tmp_path):
    """SIGKILL of a standalone scheduler mid-scan: one line saying the connection to the scheduler was lost (it
    asked "did every worker leave the scheduler?"); the finished blocks are kept."""
    out = tmp_path / "hits"
    with _one_worker_cluster(tmp_path, [_dask_cli(), "worker"]) as (sched, sched_file):
        p = _scan(genome, out, None, "--scheduler-file", str(sched_file))
        _wait_blocks(out, 3, p)
        sched.kill()
        rc, log = _finish(p)
    assert rc == 2
    line = _one_line(log)
    assert "the connection to the scheduler at tcp://127.0.0.1:" in line and "was lost" in line, line
    assert "rerun with --resume" in line and "every worker" not in line
    assert "dashboard: http://127.0.0.1:" in log and "(a small job)" not in log   # the scheduler's own dashboard


# ------------------------------------------------------------------------------------ unwritable output
def test_local_cluster_killed_with_its_client_resumes(genome, reference, tmp_path):
    """SIGKILL of `motifgrid scan` together with the local cluster it started (one process group):
    `motifgrid scan --resume` on a new local cluster completes the dataset identically."""
    out = tmp_path / "hits"
    p = _scan(genome, out, None, "--workers", "1")
    _wait_blocks(out, 2, p, timeout=120)
    os.killpg(p.pid, signal.SIGKILL)
    _finish(p)
    assert _assert_partial_usable(out, reference) >= 2
    p = _scan(genome, out, None, "--workers", "1", "--resume")
    rc, log = _finish(p, timeout=300)
    assert rc == 0, log
    _assert_identical(out, reference)


def _can_chattr(d: Path) -> bool:
    probe = d / "probe"
    probe.mkdir()
    try:
        if subprocess.run(["chattr", "+i", str(probe)], capture_output=True).returncode != 0:
            return False
        try:
            (probe / "x").write_text("x")
            return False
        except OSError:
            return True
        finally:
            subprocess.run(["chattr", "-i", str(probe)], capture_output=True)
    except FileNotFoundError:
        return False
    finally:
        shutil.rmtree(probe, ignore_errors=True)


@contextlib.contextmanager
def unwritable(d: Path, tmp: Path):
    """Make folder ``d`` and every folder below it unwritable, even for root (immutable attribute);
    for other users, permissions.  Restored on exit."""
    dirs = [d, *[p for p in d.rglob("*") if p.is_dir()]]
    if os.geteuid() != 0:
        for x in dirs:
            x.chmod(0o555)
        try:
            yield
        finally:
            for x in dirs:
                x.chmod(0o755)
        return
    if not _can_chattr(tmp):
        pytest.skip("running as root on a file system without the immutable attribute (chattr +i): "
                    "no way to make a folder unwritable here")
    subprocess.run(["chattr", "+i", *map(str, dirs)], check=True)
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", *map(str, dirs)], check=True)


@pytest.mark.parametrize("rep", range(2))
def test_unwritable_output_folder(genome, cluster, reference, tmp_path, rep):
    """An output folder that cannot be written: one line, exit 2, nothing created; the same command
    works once the folder is writable."""
    addr, _ = cluster
    out = tmp_path / "hits"
    out.mkdir()
    with unwritable(out, tmp_path):
        rc, log = _finish(_scan(genome, out, addr))
    assert rc == 2
    line = _one_line(log)
    assert f"{out}: cannot create the output folder" in line
    assert not list(out.iterdir())


@pytest.mark.parametrize("rep", range(2))
def test_output_becomes_unwritable_mid_run(genome, cluster, reference, tmp_path, rep):
    """The output folder turns unwritable while blocks are being written: one line naming the folder and
    the cause, exit 2; the finished blocks stay readable and `--resume` completes identically."""
    addr, client = cluster
    out = tmp_path / "hits"
    p = _scan(genome, out, addr)
    _wait_blocks(out, 5 + 15 * rep, p)
    with unwritable(out, tmp_path):
        rc, log = _finish(p)
        assert rc == 2, log
        line = _one_line(log)
        assert f"{out}: cannot write the hits:" in line and "rerun with --resume" in line, line
        n_done = _assert_partial_usable(out, reference)
    _resume(genome, out, client, n_done)
    _assert_identical(out, reference)


# ------------------------------------------------------------------------------------ full disk
def _mount_tmpfs(d: Path, size: int) -> bool:
    """A tmpfs of ``size`` bytes at ``d`` (root with CAP_SYS_ADMIN only; MOTIFGRID_TEST_NO_MOUNT=1 forces the
    fallback)."""
    d.mkdir(parents=True, exist_ok=True)
    if os.geteuid() != 0 or os.environ.get("MOTIFGRID_TEST_NO_MOUNT"):
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(d)], capture_output=True)
    return r.returncode == 0


def _footprint(out: Path) -> int:
    """Bytes the blocks' files take on a tmpfs (hits files, their counts and manifest entries; whole pages per file
    and folder): a fraction of it fills up while blocks are still being written."""
    page = 4096
    files = [*out.glob("*/**/part-*.parquet"), *out.glob("_counts/*"), *out.glob("_manifest/*")]
    return sum(-(-p.stat().st_size // page) * page + page for p in files)


@pytest.mark.parametrize("rep", range(2))
def test_disk_full(genome, cluster, reference, tmp_path, rep):
    """The disk fills up mid-run (a small tmpfs; where mounting is not allowed, a file-size limit on the
    scan process): one line, exit 2, finished blocks readable; after space is freed `--resume` completes
    identically."""
    addr, client = cluster
    mnt = tmp_path / "small"
    size = int(_footprint(reference["out"]) * (0.35 + 0.25 * rep)) // 4096 * 4096
    mounted = _mount_tmpfs(mnt, size)
    out = mnt / "hits"
    try:
        if mounted:
            rc, log = _finish(_scan(genome, out, addr))
            cause = "No space left on device"
        else:     # no mount here: a per-file size limit on the scan process and its in-process workers
            big = sorted(p.stat().st_size for p in reference["out"].glob("*/**/part-*.parquet"))
            limit = big[len(big) // 3]

            def limit_files():
                resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
            rc, log = _finish(_scan(genome, out, None, "--workers", "2", preexec_fn=limit_files))
            cause = "File too large"
        assert rc == 2, log
        line = _one_line(log)
        assert f"cannot write the hits: {cause}" in line and "rerun with --resume" in line, line
        n_done = _assert_partial_usable(out, reference)
        if mounted:
            subprocess.run(["mount", "-o", "remount,size=256m", str(mnt)], check=True)    # space freed
        _resume(genome, out, client, n_done)
        _assert_identical(out, reference)
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_a_scan_whose_scheduler_cannot_be_reached_leaves_the_output_as_it_was(tmp_path, capfd, genome):
    """No ``_run.json`` left behind by a run that never started (a plain rerun would have been told to --resume):
    a new folder is removed, an empty one stays empty; the same command then runs on a local cluster."""
    import socket

    from pipeline.cli.command import main

    s = socket.socket()
    s.bind(("127.0.0.1", 0))                     # bound, not listening: the connection is refused
    addr = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    given = tmp_path / "given"
    given.mkdir()
    for out in (tmp_path / "new", given):
        with dask.config.set({"motifgrid.cluster.handshake-timeout": 1}):
            assert main(["scan", genome.path, MOTIFS, "--out", str(out), "--scheduler", addr,
                         "--no-progress"]) == 2
        assert "connection refused" in capfd.readouterr().err
    s.close()
    assert not (tmp_path / "new").exists() and list(given.iterdir()) == []
    assert main(["scan", genome.path, MOTIFS, "--out", str(given), "--no-progress"]) == 0
    assert (given / "_summary.json").exists()


def test_sigterm_stops_a_fasta_scan_as_ctrl_c_does(tmp_path, chrx_2mb):
    """SIGTERM (scancel, a time limit, kill) during a FASTA scan's ingest: exit 130 with the one "interrupted" line
    and no temporary genome store left beside the output (it was left, 13-15 MB a time, with no message)."""
    rng = np.random.default_rng(5)
    starts = rng.integers(0, len(chrx_2mb) - 60, 200_000)
    fa = tmp_path / "many.fa"
    fa.write_text("".join(f">r{i}\n{chrx_2mb[s:s + 60]}\n" for i, s in enumerate(starts.tolist())))
    out = tmp_path / "h"
    p = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "scan", str(fa), MOTIFS, "--out", str(out),
                          "--no-progress"], cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    deadline = time.time() + 60
    while time.time() < deadline and not list(tmp_path.glob(".motifgrid-scan-genome-*")):
        time.sleep(0.02)                         # the ingest has begun
    assert p.poll() is None, p.communicate()
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err, err
    assert not list(tmp_path.glob(".motifgrid-*")), list(tmp_path.iterdir())


def test_a_folder_another_run_is_writing_is_refused(tmp_path, capfd, genome):
    """A second scan or composition into a folder that a live run writes (a new run, --resume — the first's own
    advice — or --overwrite) is refused in one line naming the writer; once that run has ended, the same command
    runs.  (Both used to go on: each removed the other's temporary files and the first ended with a misleading
    error.)"""
    from pipeline.cli.command import main

    out = tmp_path / "h"
    tests = tmp_path / "t.fa"
    tests.write_text(">t1\nACGTACGTACGTACGTACGT\n>t2\nAAAACCCCGGGGTTTTACGT\n")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\nfrom pipeline.engine.dataset import lock_output\n"
                               f"lock_output({str(out)!r})\nprint('held', flush=True)\ntime.sleep(60)\n"],
                              cwd=ROOT, env=ENV, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        for extra in ([], ["--resume"], ["--overwrite"]):
            assert main(["scan", genome.path, MOTIFS, "--out", str(out), "--no-progress", *extra]) == 2
            err = capfd.readouterr().err
            assert f"another motifgrid run is writing it (pid {holder.pid} on " in err and len(err.splitlines()) == 1
        assert main(["composition", str(tests), genome.path, "--out", str(out), "--no-progress"]) == 2
        assert f"another motifgrid run is writing it (pid {holder.pid} on " in capfd.readouterr().err
        assert not out.exists()
    finally:
        holder.kill()
        holder.wait()
    assert main(["scan", genome.path, MOTIFS, "--out", str(out), "--no-progress"]) == 0
    assert main(["scan", genome.path, MOTIFS, "--out", str(out), "--no-progress", "--overwrite"]) == 0
    assert main(["composition", str(tests), genome.path, "--out", str(tmp_path / "c"), "--no-progress"]) == 0


def test_a_store_left_by_a_killed_fasta_scan_is_removed_by_the_next(tmp_path, chrx_slice):
    """SIGKILL during a FASTA scan's ingest leaves its temporary store beside the output (nothing can run then);
    the next FASTA scan there removes such stores of this host whose process is gone, and leaves a live one's."""
    from pipeline.scan.plan import plan_scan
    from pipeline.scan.source import _STAGE_PREFIX, _host_tag

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"{_STAGE_PREFIX}{_host_tag()}-{dead.pid}-abc123"
    live = tmp_path / f"{_STAGE_PREFIX}{_host_tag()}-{os.getpid()}-def456"
    other = tmp_path / f"{_STAGE_PREFIX}otherhost-{dead.pid}-ghi789"
    for d in (stale, live, other):
        (d / "_genome.zarr").mkdir(parents=True)
    fa = tmp_path / "p.fa"
    fa.write_text(f">p\n{chrx_slice[:5000]}\n")
    job = plan_scan(str(fa), MOTIFS, str(tmp_path / "h"), pvalue=1e-3)
    from pipeline.engine.dataset import restore_replaced

    restore_replaced(job.out)
    assert not stale.exists() and live.exists() and other.exists()


def test_composition_into_an_unwritable_folder_starts_no_cluster(genome, tmp_path):
    """composition with an output it cannot create: one line, exit 2, before any cluster is started (it started one
    and then found the folder unwritable)."""
    tests = tmp_path / "t.fa"
    tests.write_text(">t1\nACGTACGTACGTACGTACGT\n")
    d = tmp_path / "ro"
    d.mkdir()
    with unwritable(d, tmp_path):
        r = subprocess.run([sys.executable, "-m", "pipeline.cli", "composition", str(tests), genome.path, "--out",
                            str(d / "c"), "--no-progress"], env=ENV, cwd=ROOT, capture_output=True, text=True,
                           timeout=120)
    assert r.returncode == 2, r.stderr
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"motifgrid composition: error: {d / 'c'}: cannot create the output folder ("), r.stderr
    assert "worker(s)" not in r.stdout + r.stderr and not (d / "c").exists()


# ------------------------------------------------------------------------------------ variants on a standalone cluster
@pytest.fixture(scope="module")
def variants_reference(genome, chrx_2mb, tmp_path_factory):
    """SNVs and indels on both contigs (the genome's REF), 40 alleles a chunk, and a local run's rows."""
    from pipeline.engine.cluster import get_client
    from pipeline.variants import VariantsSettings, read_variants, run_variants

    d = tmp_path_factory.mktemp("variants-ref")
    rng = np.random.default_rng(5)
    lines = ["##fileformat=VCFv4.2", "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
    for name, s in (("chrX_a", chrx_2mb[:900_000]), ("chrX_b", chrx_2mb[1_000_000:1_300_000])):
        for i, p in enumerate(sorted(rng.choice(np.arange(100, len(s) - 100), 300, replace=False).tolist())):
            r = s[p - 1]
            alt = (r + "A") if i % 7 == 0 else "ACGT"[("ACGT".index(r) + 1) % 4] if r in "ACGT" else None
            if alt:
                lines.append(f"{name}\t{p}\t.\t{r}\t{alt}\t.\t.\t.")
    vcf = d / "v.vcf"
    vcf.write_text("\n".join(lines) + "\n")
    with get_client(n_workers=2, device="cpu", quiet=True) as (c, _):
        run_variants(str(vcf), genome.path, MOTIFS, str(d / "ref"), c, VariantsSettings(pvalue=1e-3, chunk=40))
    return vcf, read_variants(str(d / "ref"))


@pytest.mark.parametrize("stage", ["thresholds", "first-chunk", "last-chunk"])
def test_variants_go_on_when_every_worker_is_killed(stage, standalone, genome, variants_reference, tmp_path):
    """Both workers SIGKILLed at one stage of ``motifgrid variants`` (the nannies start them again): the run finishes
    by itself with the local run's rows."""
    from pipeline.variants import read_variants
    from tests.cluster_faults import KillWorkersAt, killed

    sched_file, client = standalone
    prefix, finish, last = {"thresholds": ("_threshold_batch-", "processing", False),
                            "first-chunk": ("variants-", "memory", False),
                            "last-chunk": ("variants-", "memory", True)}[stage]
    vcf, reference = variants_reference
    client.wait_for_workers(2, timeout=60)
    client.register_plugin(KillWorkersAt(prefix, finish, last), name=KillWorkersAt.name)
    try:
        out = tmp_path / "v"
        args = [sys.executable, "-m", "pipeline.cli", "variants", str(vcf), "--genome", genome.path, "--motifs",
                MOTIFS, "--pvalue", "1e-3", "--out", str(out), "--no-progress", "--scheduler-file", str(sched_file)]
        r = subprocess.run(args, env={**ENV, "DASK_MOTIFGRID__VARIANTS__CHUNK": "40",
                                      "DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR": str(tmp_path / "cache")},
                           capture_output=True, text=True, timeout=240, cwd=ROOT)
        victims = client.run_on_scheduler(killed)
    finally:
        client.unregister_scheduler_plugin(KillWorkersAt.name)
    assert len(victims) == 2 and all(k.startswith(prefix) for _, _, k in victims), victims
    assert r.returncode == 0, r.stderr
    assert read_variants(str(out)).equals(reference)
