"""Security: loopback-only local clusters, TLS to a real scheduler (certificates made here), nothing unpickled
from user files, names from input files never becoming paths."""
from __future__ import annotations

import gzip
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import dask.config
import distributed  # noqa: F401  (its config defaults exist before dask.config.set)
import pytest

from pipeline.io.genome import ingest
from pipeline.scan.read import read_hits
from tests.conftest import DATA, ROOT, subprocess_env

MOTIFS = str(DATA / "jaspar2024_subset.jaspar")


def _env(**extra):
    return subprocess_env(**extra)


def _cli(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *map(str, args)], capture_output=True, text=True,
                          env=env or _env(), timeout=timeout)


def _write_pems(sec, d: Path) -> dict:
    """The PEM texts of a ``Security.temporary()`` (a self-signed certificate for every role) as files."""
    d.mkdir(parents=True, exist_ok=True)
    files = {"ca": sec.tls_ca_file, "cert": sec.tls_client_cert, "key": sec.tls_client_key}
    out = {}
    for k, text in files.items():
        (d / f"{k}.pem").write_text(text)
        out[k] = str(d / f"{k}.pem")
    return out


def _wait_for(path: Path, seconds=60):
    t = time.time()
    while not (path.exists() and path.stat().st_size):
        if time.time() - t > seconds:
            raise TimeoutError(path)
        time.sleep(0.1)


@pytest.fixture(scope="module")
def small_store(tmp_path_factory, chrx_slice):
    d = tmp_path_factory.mktemp("tls-genome")
    fa = d / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        f.write(">chrT\n" + "\n".join(chrx_slice[i:i + 60] for i in range(0, 40_000, 60)) + "\n")
    return ingest(fa, d / "g.zarr", block_size=10_000, halo=40)


@pytest.fixture(scope="module")
def tls_cluster(tmp_path_factory):
    """A real `dask scheduler` + `dask worker`, TLS only (mutual: both sides present certificates of one CA)."""
    pytest.importorskip("cryptography")
    from distributed.security import Security

    d = tmp_path_factory.mktemp("tls")
    pem = _write_pems(Security.temporary(), d / "good")
    sfile = d / "scheduler.json"
    tls = ["--tls-ca-file", pem["ca"], "--tls-cert", pem["cert"], "--tls-key", pem["key"]]
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--protocol", "tls",
                               "--host", "127.0.0.1", "--port", "0", "--dashboard-address", "127.0.0.1:0",
                               "--scheduler-file", str(sfile), *tls], env=_env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        _wait_for(sfile)
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", "--scheduler-file",
                                       str(sfile), "--nthreads", "2", "--host", "127.0.0.1",
                                       "--dashboard-address", "127.0.0.1:0", *tls], env=_env(),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield sfile, pem, d
    finally:
        for p in procs[::-1]:
            p.terminate()
            p.wait(timeout=30)


def test_tls_scan_and_refusals(tls_cluster, small_store, tmp_path, capfd):
    from distributed.security import Security

    sfile, pem, d = tls_cluster
    assert '"address": "tls://127.0.0.1:' in sfile.read_text()
    ok = _cli("scan", small_store.path, MOTIFS, "--pvalue", "1e-3", "--out", tmp_path / "h", "--no-progress",
              "--scheduler-file", sfile, "--tls-ca", pem["ca"], "--tls-cert", pem["cert"], "--tls-key", pem["key"])
    assert ok.returncode == 0, ok.stderr
    assert "1 CPU worker(s)" in ok.stderr
    assert read_hits(str(tmp_path / "h")).num_rows > 0 and (tmp_path / "h" / "_summary.json").exists()

    # refusals, through the same entry point in this process (connection attempts cut to 1 s)
    from pipeline.cli.command import main

    def refused(*args):
        capfd.readouterr()
        with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
            rc = main(["scan", small_store.path, MOTIFS, *map(str, args)])
        err = capfd.readouterr().err
        assert rc == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        return err

    # no certificates: the client is told the scheduler requires TLS
    assert "requires TLS: pass --tls-ca, --tls-cert and --tls-key" in refused("--out", tmp_path / "n",
                                                                                "--scheduler-file", sfile)
    # certificates of another authority: the scheduler refuses the handshake
    bad = _write_pems(Security.temporary(), d / "other")
    assert "cannot connect to the scheduler at tls://" in refused(
        "--out", tmp_path / "o", "--scheduler-file", sfile, "--tls-ca", bad["ca"], "--tls-cert", bad["cert"],
        "--tls-key", bad["key"])
    # plain TCP to the TLS port: refused too
    addr = re.search(r'"address": "tls://([^"]+)"', sfile.read_text()).group(1)
    assert "cannot connect to the scheduler at tcp://" in refused("--out", tmp_path / "p", "--scheduler",
                                                                   f"tcp://{addr}")
    for o in "nop":
        assert not (tmp_path / o / "_summary.json").exists()


@pytest.mark.parametrize("args,msg", [
    (["--tls-ca", "{ca}"], "TLS needs --tls-ca and --tls-cert"),
    (["--tls-ca", "{ca}", "--tls-cert", "{tmp}/missing.pem"], "missing.pem: no such file (--tls-cert)"),
    (["--tls-ca", "{ca}", "--tls-cert", "{ca}", "--local"], "are for a running scheduler"),
])
def test_tls_flag_errors(tmp_path, args, msg, capfd):
    from pipeline.cli.command import main

    (tmp_path / "ca.pem").write_text("x")
    sched = [] if "--local" in args else ["--scheduler", "tls://127.0.0.1:1"]
    args = [a.format(ca=tmp_path / "ca.pem", tmp=tmp_path) for a in args if a != "--local"]
    assert main(["thresholds", MOTIFS, *sched, *args]) == 2
    err = capfd.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1, err


def test_local_cluster_listens_on_loopback():
    """Scheduler, workers and dashboard of a local process cluster bind 127.0.0.1 only."""
    from pipeline.engine.cluster import get_client

    with get_client(n_workers=1, processes=True, quiet=True) as (client, _):
        cluster = client.cluster
        assert cluster.scheduler_address.startswith("tcp://127.0.0.1:")
        assert all(w.startswith("tcp://127.0.0.1:") for w in client.scheduler_info()["workers"])
        http = cluster.scheduler.http_server
        hosts = {s.getsockname()[0] for s in http._sockets.values()}
        assert hosts == {"127.0.0.1"}, hosts


def _http_hosts(server) -> set:
    return {s.getsockname()[0] for s in server.http_server._sockets.values()}


@pytest.mark.parametrize("dashboard", [False, True])
def test_in_process_cluster_listens_on_loopback(dashboard, recwarn):
    """The in-process cluster (small scans, enrich) has no network transport, but its scheduler's and worker's HTTP
    routes listen: on 127.0.0.1 only, with or without the dashboard (they bound every interface), and without
    distributed's warning when the dashboard's port is taken (it moves to another one)."""
    import socket

    from pipeline.engine.cluster import get_client

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with dask.config.set({"motifgrid.cluster.dashboard-address": f"127.0.0.1:{port}"}), \
                get_client(n_workers=1, quiet=True, dashboard=dashboard) as (client, _):
            cluster = client.cluster
            assert cluster.scheduler_address.startswith("inproc://")
            assert _http_hosts(cluster.scheduler) == {"127.0.0.1"}
            assert all(_http_hosts(w) == {"127.0.0.1"} for w in cluster.workers.values())
    assert not [w for w in recwarn if "already in use" in str(w.message)]


def test_nothing_unpickled_from_user_files():
    """No module reads pickles: np.load only with allow_pickle=False, no pickle/marshal/yaml.load/eval."""
    bad = re.compile(r"\bpickle\.loads?\(|\bmarshal\.|\byaml\.load\(|\bunsafe_load\b|\beval\(|\bexec\(|"
                     r"allow_pickle\s*=\s*True|\bpd\.read_pickle\b|\bjoblib\.load\b|\bshelve\b")
    loads = re.compile(r"\bnp\.load\(")
    found = []
    for p in list((ROOT / "pipeline").rglob("*.py")) + list((ROOT / "workers").rglob("*.py")):
        for i, line in enumerate(p.read_text().splitlines(), 1):
            if bad.search(line) or (loads.search(line) and "allow_pickle=False" not in line):
                found.append(f"{p.relative_to(ROOT)}:{i}: {line.strip()}")
    assert not found, f"unpickling (or np.load without an explicit allow_pickle=False) in: {found}"


HOSTILE = ["../x", "/", "..", ".", "a/../../b", "%2F..%2Fy", "c:\\win\\x", "~root", "$(touch${IFS}pwned)", "`id`",
           "ünï🧬", "-rf", "x;rm", "*", "chrom=y"]       # names end at blanks in FASTA and motif headers


def test_hostile_names_stay_inside_output(tmp_path, chrx_slice):
    """Contig and motif names like `../x` or `/` never become paths: every output file stays in the output
    folder, names come back intact from the dataset and the exports."""
    from pipeline.cli.command import main
    from pipeline.scan.export import parse_export

    work = tmp_path / "w"
    work.mkdir()
    fa = work / "g.fa"
    contigs = HOSTILE
    with open(fa, "w") as f:
        for i, name in enumerate(contigs):
            f.write(f">{name}\n{chrx_slice[i * 3000:(i + 1) * 3000]}\n")
    motifs = work / "m.jaspar"
    src = (DATA / "motifs" / "formats" / "arnt.jaspar").read_text().split(">")[1:]
    with open(motifs, "w") as f:
        for i, name in enumerate(HOSTILE):
            body = src[i % len(src)].split("\n", 1)[1]
            f.write(f">ID{i}/{name}\t{name}\n{body}")
    before = set(os.listdir(tmp_path))
    cwd = os.getcwd()
    os.chdir(work)                       # relative names would land here
    try:
        assert main(["ingest", str(fa), "g.zarr", "--block-size", "2000", "--halo", "30"]) == 0
        assert main(["scan", "g.zarr", str(motifs), "--pvalue", "1e-2", "--out", "hits", "--no-progress"]) == 0
        for fmt in ("bed", "fimo", "gff3"):
            assert main(["export", "hits", "--format", fmt, "-o", f"hits.{fmt}"]) == 0
    finally:
        os.chdir(cwd)
    assert set(os.listdir(tmp_path)) == before                    # nothing written beside the work folder
    assert not Path("/x").exists() and not (tmp_path.parent / "x").exists()
    assert sorted(os.listdir(work)) == sorted(["g.fa", "m.jaspar", "g.zarr", "hits", "hits.bed", "hits.fimo",
                                               "hits.gff3"])
    for p in (work / "hits").rglob("*"):
        assert p.resolve().is_relative_to((work / "hits").resolve())
    parts = list((work / "hits" / "chrom").iterdir()) + [p for p in [work / "hits" / "packed"] if p.exists()]
    assert all(p.is_dir() and list(p.glob("part-*.parquet")) for p in parts)    # one folder level per record
    assert not [p for p in parts if p.name.startswith((".", "_"))]     # dataset readers would skip those
    t = read_hits(str(work / "hits"), columns=["chrom", "motif_id", "motif_name"])
    assert set(t.column("chrom").to_pylist()) == set(contigs)
    names = set(t.column("motif_name").to_pylist())
    assert names and names <= set(HOSTILE) and len(names) > 5
    for fmt in ("bed", "fimo", "gff3"):
        back = parse_export(str(work / f"hits.{fmt}"), fmt)
        assert len(back) == t.num_rows and {r[0] for r in back} == set(contigs)
        assert {r[4] for r in back} == set(t.column("motif_id").to_pylist())
