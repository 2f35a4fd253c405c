"""Genome stores and hit datasets on an S3-compatible object store (moto's real HTTP server on loopback)."""
from __future__ import annotations

import gzip
import os

import numpy as np
import pytest

pytest.importorskip("s3fs")
moto_server = pytest.importorskip("moto.server")


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on 127.0.0.1 (a separate thread speaking HTTP; boto/s3fs/pyarrow talk to it as to AWS)."""
    srv = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    srv.start()
    host, port = srv.get_host_and_port()
    env = {"AWS_ACCESS_KEY_ID": "motifgrid", "AWS_SECRET_ACCESS_KEY": "motifgrid", "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ENDPOINT_URL": f"http://{host}:{port}"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    import s3fs

    s3fs.S3FileSystem.clear_instance_cache()
    fs = s3fs.S3FileSystem()
    fs.mkdir("motifgrid-test")
    try:
        yield fs, env
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        s3fs.S3FileSystem.clear_instance_cache()
        srv.stop()


@pytest.fixture(scope="module")
def fasta(tmp_path_factory, chrx_slice):
    d = tmp_path_factory.mktemp("fa")
    seqs = {"chrA": chrx_slice[:70_000], "chrB": "N" * 100 + chrx_slice[80_000:95_000].lower()}
    fa = d / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        for k, s in seqs.items():
            f.write(f">{k}\n" + "\n".join(s[i:i + 60] for i in range(0, len(s), 60)) + "\n")
    return fa


def test_ingest_to_s3_reads_like_local(s3, fasta, tmp_path):
    from pipeline.io.genome import GenomeError, GenomeStore, ingest

    fs, _ = s3
    local = ingest(fasta, tmp_path / "g.zarr", block_size=8192, halo=30)
    remote = ingest(fasta, "s3://motifgrid-test/genomes/g.zarr", block_size=8192, halo=30)
    assert fs.exists("motifgrid-test/genomes/g.zarr/zarr.json")
    again = GenomeStore("s3://motifgrid-test/genomes/g.zarr")
    assert again.attrs == local.attrs
    for b_local, b_remote in zip(local.blocks(), again.blocks()):
        assert b_local == b_remote
        np.testing.assert_array_equal(local.read_block(b_local), again.read_block(b_remote))
    assert remote.checksum == local.checksum
    # refuses to overwrite; a prefix without the root zarr.json (an interrupted upload) is not a store
    with pytest.raises(GenomeError, match="already exists"):
        ingest(fasta, "s3://motifgrid-test/genomes/g.zarr")
    fs.pipe_file("motifgrid-test/partial.zarr/c000000/zarr.json", b"{}")
    with pytest.raises(GenomeError, match="not a motifgrid genome store"):
        GenomeStore("s3://motifgrid-test/partial.zarr")


def test_scan_store_and_hits_on_s3(s3, fasta, tmp_path):
    """Worker processes read the genome store from S3 and write their Parquet parts and manifest there; the
    dataset equals the one of a local scan, resumes, exports and refuses to be overwritten."""
    from distributed import Client, LocalCluster

    from pipeline.scan.export import export
    from pipeline.io.genome import ingest
    from pipeline.scan.graph import run_scan
    from pipeline.scan.motif_set import ScanError
    from pipeline.scan.read import read_hits
    from tests.conftest import DATA
    from tests.scan.test_scan_pipeline import table_rows

    fs, _ = s3
    motifs = str(DATA / "jaspar2024_subset.jaspar")
    local = ingest(fasta, tmp_path / "g.zarr", block_size=16384, halo=40)
    url = "s3://motifgrid-test/scan/g.zarr"
    ingest(fasta, url, block_size=16384, halo=40)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as cl, Client(cl) as client:
        res_l = run_scan(local.path, motifs, str(tmp_path / "hits"), pvalue=1e-3, client=client, progress=False)
        res_r = run_scan(url, motifs, "s3://motifgrid-test/scan/hits", pvalue=1e-3, client=client, progress=False)
        assert res_r.hits == res_l.hits > 0
        assert table_rows(read_hits("s3://motifgrid-test/scan/hits")) == table_rows(read_hits(str(tmp_path / "hits")))
        names = fs.ls("motifgrid-test/scan/hits", detail=False)
        assert {n.rsplit("/", 1)[1] for n in names} >= {"_run.json", "_summary.json", "_manifest",
                                                         "_thresholds.parquet", "_motif_summary.parquet"}
        with pytest.raises(ScanError, match="holds a finished scan"):
            run_scan(url, motifs, "s3://motifgrid-test/scan/hits", pvalue=1e-3, client=client, progress=False)
        again = run_scan(url, motifs, "s3://motifgrid-test/scan/hits", pvalue=1e-3, client=client, progress=False,
                         resume=True)
        assert again.blocks_skipped == again.blocks and again.hits == res_l.hits
    n = export("s3://motifgrid-test/scan/hits", "bed", str(tmp_path / "r.bed"))
    assert n == res_l.hits
    assert export(str(tmp_path / "hits"), "bed", str(tmp_path / "l.bed")) == n
    assert (tmp_path / "r.bed").read_text() == (tmp_path / "l.bed").read_text()


def test_cli_ingest_scan_export_with_urls(s3, fasta, tmp_path):
    import subprocess
    import sys

    from tests.conftest import DATA, ROOT

    fs, env = s3
    run_env = dict(os.environ, **env)
    motifs = str(DATA / "jaspar2024_subset.jaspar")

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True,
                              env=run_env, cwd=ROOT, timeout=300)

    r = cli("ingest", str(fasta), "s3://motifgrid-test/cli/g.zarr", "--block-size", "32768", "--halo", "40")
    assert r.returncode == 0, r.stderr
    r = cli("scan", "s3://motifgrid-test/cli/g.zarr", motifs, "--pvalue", "1e-3", "--out",
            "s3://motifgrid-test/cli/hits", "--workers", "1", "--device", "cpu", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert fs.exists("motifgrid-test/cli/hits/_summary.json")
    r = cli("export", "s3://motifgrid-test/cli/hits", "--format", "bed", "-o", str(tmp_path / "h.bed"))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "h.bed").read_text().count("\n") > 0
    # a missing store on S3: one line, exit 2
    r = cli("scan", "s3://motifgrid-test/cli/none.zarr", motifs, "--out", "s3://motifgrid-test/cli/h2", "--no-progress")
    assert r.returncode == 2 and "not a motifgrid genome store" in r.stderr and "Traceback" not in r.stderr
    assert not fs.exists("motifgrid-test/cli/h2")


def test_commands_without_url_output_refuse_urls(tmp_path, capsys):
    from pipeline.cli.command import main
    from tests.conftest import DATA

    for cmd in (["compare", str(DATA / "jaspar2024_subset.jaspar")],
                ["discover", str(tmp_path / "x.fa"), "--width", "8"],
                ["composition", str(tmp_path / "t.fa"), str(tmp_path / "g.zarr")]):
        assert main([*cmd, "--out", "s3://bucket/out"]) == 2
        err = capsys.readouterr().err
        assert "object-store URLs are taken by ingest, scan and export" in err and "Traceback" not in err
    assert not any(p.name.startswith("s3") for p in tmp_path.iterdir())
