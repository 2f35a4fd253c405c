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
    from pipeline.genome import GenomeError, GenomeStore, ingest

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
