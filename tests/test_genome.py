"""FASTA → Zarr genome store: layout, codes, attributes, bounded memory, bad input."""
from __future__ import annotations

import gzip
import json
import os
import tracemalloc

import numpy as np
import pytest

from pipeline.genome import GenomeError, GenomeStore, decode, encode, ingest
from tests.conftest import SHARED, needs_shared


def write(path, text, mode="plain"):
    data = text.encode()
    if mode == "gzip":
        with gzip.open(path, "wb") as f:
            f.write(data)
    elif mode == "bgzip":
        from Bio import bgzf

        with bgzf.BgzfWriter(str(path), "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


def fasta(records, width=60, eol="\n"):
    out = []
    for name, seq in records:
        out.append(f">{name} some description{eol}")
        out += [seq[i:i + width] + eol for i in range(0, len(seq), width)]
    return "".join(out)


def test_codes():
    assert encode("ACGTacgtNnRYKM-*").tolist() == [0, 1, 2, 3, 0, 1, 2, 3] + [4] * 8
    assert decode(encode("ACGTNacgtR")) == "ACGTNACGTN"


@pytest.mark.parametrize("mode", ["plain", "gzip", "bgzip"])
def test_layout_blocks_and_halo(tmp_path, chrx_slice, mode):
    seqs = [("chrA", chrx_slice[:25_000]), ("tiny", "acgtNNRY"), ("empty", ""), ("chrB", chrx_slice[30_000:40_001])]
    fa = write(tmp_path / ("g.fa" + (".gz" if mode != "plain" else "")), fasta(seqs), mode)
    g = ingest(fa, tmp_path / "g.zarr", block_size=4096, halo=50)
    assert [c["name"] for c in g.contigs] == ["chrA", "tiny", "empty", "chrB"]
    assert [c["length"] for c in g.contigs] == [25_000, 8, 0, 10_001]
    assert [c["n_blocks"] for c in g.contigs] == [7, 1, 0, 3]
    # every block row = positions [b*B, b*B+B+H) of the contig, padded with 4
    for name, seq in seqs:
        codes = encode(seq)
        for blk in [b for b in g.blocks(skip_all_n=False) if b.chrom == name]:
            row = g.read_block(blk)
            assert row.shape == (4096 + 50,)
            want = np.full(4096 + 50, 4, np.uint8)
            part = codes[blk.start:blk.start + 4096 + 50]
            want[:part.size] = part
            assert (row == want).all()
        assert decode(g.fetch(name, 0, len(seq))) == decode(codes)
    # attributes
    a = g.attrs
    assert a["block_size"] == 4096 and a["halo"] == 50 and a["format_version"] == 1
    assert a["source_checksum"].startswith("sha256:")
    acgt = encode(seqs[0][1] + seqs[1][1] + seqs[3][1])
    counts = np.bincount(acgt, minlength=5)
    assert a["base_counts"] == dict(zip("ACGTN", counts.tolist()))
    assert np.allclose(g.background, counts[:4] / counts[:4].sum())
    tiny = g.contigs[1]
    assert tiny["n_fraction"] == [pytest.approx((4096 + 50 - 4) / (4096 + 50))]


def test_all_n_blocks_skipped(tmp_path):
    fa = write(tmp_path / "n.fa", fasta([("c", "N" * 5000 + "ACGT" * 100 + "N" * 9000)]))
    g = ingest(fa, tmp_path / "n.zarr", block_size=2000, halo=10)
    kept = [b.index for b in g.blocks()]
    assert kept == [2] and len(g.blocks(skip_all_n=False)) == 8


def test_crlf_and_lowercase(tmp_path, chrx_slice):
    seq = chrx_slice[:3000].lower()
    fa = write(tmp_path / "crlf.fa", fasta([("x", seq), ("y", seq[::-1])], eol="\r\n"))
    g = ingest(fa, tmp_path / "c.zarr", block_size=1000, halo=5)
    assert decode(g.fetch("x", 0, 3000)) == seq.upper()
    assert decode(g.fetch("y", 0, 3000)) == seq[::-1].upper()


def test_many_small_contigs(tmp_path, chrx_slice):
    recs = [(f"p{i}", chrx_slice[i * 37:i * 37 + 20 + i % 50]) for i in range(300)]
    g = ingest(write(tmp_path / "many.fa", fasta(recs)), tmp_path / "m.zarr", block_size=1000, halo=20)
    assert len(g.contigs) == 300
    for name, s in recs[::37]:
        assert decode(g.fetch(name, 0, len(s))) == s.upper()


def test_bounded_memory(tmp_path, chrx_slice):
    """A 20 Mb contig ingested with 1 Mb blocks never holds the contig in memory (it is 20 MB as text)."""
    ingest(write(tmp_path / "warm.fa", ">w\nACGT\n"), tmp_path / "warm.zarr")     # imports out of the way
    seq = (chrx_slice * 70)[:20_000_000]
    fa = write(tmp_path / "big.fa", fasta([("big", seq)], width=80))
    del seq
    tracemalloc.start()
    ingest(fa, tmp_path / "big.zarr", block_size=1 << 20, halo=127)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 16 * (1 << 20), f"peak traced memory {peak / 2**20:.1f} MiB for a 20 Mb contig"


@pytest.mark.parametrize("content,msg", [
    (b"", "empty file"),
    (b"ACGTACGT\nACGT\n", "not a FASTA file"),
    (b"\x00\x01\x02binary\xff", "binary data"),
    (b">a\nACGT\n>b\nAAAA\n>a\nCCCC\n", "duplicate contig name 'a'"),
])
def test_bad_fasta(tmp_path, content, msg):
    p = tmp_path / "bad.fa"
    p.write_bytes(content)
    with pytest.raises(GenomeError, match=msg) as e:
        ingest(p, tmp_path / "bad.zarr")
    assert "bad.fa" in str(e.value)
    assert not (tmp_path / "bad.zarr").exists()
    assert not [x for x in os.listdir(tmp_path) if x.startswith(".bad.zarr")]   # no partial store left


def test_truncated_gzip_and_missing(tmp_path, chrx_slice):
    p = write(tmp_path / "t.fa.gz", fasta([("a", chrx_slice[:200_000])]), "gzip")
    p.write_bytes(p.read_bytes()[:20_000])
    with pytest.raises(GenomeError, match="t.fa.gz"):
        ingest(p, tmp_path / "t.zarr")
    assert not (tmp_path / "t.zarr").exists()
    with pytest.raises(GenomeError, match="no such file"):
        ingest(tmp_path / "missing.fa", tmp_path / "x.zarr")
    with pytest.raises(GenomeError, match="not a motifgrid genome store"):
        GenomeStore(tmp_path)


def test_existing_store_refused(tmp_path):
    fa = write(tmp_path / "a.fa", ">a\nACGT\n")
    ingest(fa, tmp_path / "a.zarr")
    with pytest.raises(GenomeError, match="already exists"):
        ingest(fa, tmp_path / "a.zarr")


@needs_shared
def test_real_bgzip_genome(tmp_path):
    src = SHARED / "genomes" / "sacCer3_chrIV.fa.gz"
    if not src.exists():                  # a partial copy of shared/ (e.g. the one carried to the GPU machine)
        pytest.skip(f"{src} not present")
    g = ingest(src, tmp_path / "y.zarr", block_size=1 << 19, halo=63)
    assert g.contigs[0]["length"] == 1_531_933
    with open(tmp_path / "y.zarr" / "zarr.json") as f:
        assert json.load(f)["attributes"]["contigs"][0]["n_blocks"] == 3


def test_synthesize_layout_and_composition(tmp_path):
    from pipeline.genome import synthesize

    g = synthesize(tmp_path / "s.zarr", [("a", 100_000), ("b", 2_500)], [0.3, 0.2, 0.2, 0.3], block_size=40_000, halo=12)
    assert [c["n_blocks"] for c in g.contigs] == [3, 1] and g.attrs["source"].startswith("synthetic:")
    blocks = g.blocks()
    for x, y in zip(blocks[:2], blocks[1:3]):               # each halo is the next block's first H codes
        assert (g.read_block(x)[40_000:] == g.read_block(y)[:12]).all()
    assert (g.read_block(blocks[3])[2_500:] == 4).all()      # padded past the contig end
    assert np.allclose(g.background, [0.3, 0.2, 0.2, 0.3], atol=0.01)
    assert sum(g.attrs["base_counts"].values()) == 102_500


def test_direct_chunk_files_read_back_through_zarr(tmp_path, chrx_slice):
    """Ingest writes the chunk files (zstd of each row, zarr's layout) and the metadata of every array after the
    first (zarr's own, templated) itself: zarr reads them as its own, the all-N block is left to the fill value as
    zarr would, and the reader's direct path agrees."""
    import zarr

    seqs = [("a", chrx_slice[:9000]), ("allN", "N" * 5000 + chrx_slice[:100]), ("short", chrx_slice[20_000:20_700])]
    fa = write(tmp_path / "g.fa", fasta(seqs), "plain")
    g = ingest(fa, tmp_path / "g.zarr", block_size=4096, halo=40)
    for blk in g.blocks(skip_all_n=False):
        via_zarr = np.asarray(zarr.open_array(str(tmp_path / "g.zarr" / blk.key), mode="r")[blk.index, :])
        assert np.array_equal(via_zarr, g.read_block(blk))
        assert g._direct_chunks(blk.key)
    root = zarr.open_group(str(tmp_path / "g.zarr"), mode="r")     # arrays after the first: zarr's metadata, templated
    arrays = dict(root.arrays())
    assert sorted(arrays) == ["c000000", "c000001", "c000002"]
    for (name, seq), key in zip(seqs, sorted(arrays)):
        a = arrays[key]
        assert a.shape == (-(-len(seq) // 4096), 4096 + 40) and dict(a.attrs) == {"name": name, "length": len(seq)}
        assert a.fill_value == 4 and a.chunks == (1, 4096 + 40)
    assert not (tmp_path / "g.zarr" / "c000001" / "c" / "0" / "0").exists()      # all N: not written
    assert (tmp_path / "g.zarr" / "c000001" / "c" / "1" / "0").exists()


# ------------------------------------------------------------------ an index beside the input is never trusted
def _index_beside(fa, mode):
    """The index another tool left beside ``fa`` (pyfaidx, as samtools faidx would): ``.fai`` (+ ``.gzi``)."""
    import pyfaidx

    pyfaidx.Faidx(str(fa)).close()
    return [p for p in (fa.with_name(fa.name + ".fai"), fa.with_name(fa.name + ".gzi")) if p.exists()]


def _age(paths, seconds):
    for p in paths:
        st = p.stat()
        os.utime(p, (st.st_atime + seconds, st.st_mtime + seconds))


@pytest.mark.parametrize("index_age", [-100, 100], ids=["index-older", "index-newer"])
@pytest.mark.parametrize("mode", ["plain", "bgzip"])
def test_stale_index_appended_record(tmp_path, chrx_slice, mode, index_age):
    """A record appended after an index was made beside the FASTA: all three records are ingested (pyfaidx
    reused the stale .fai and ingest reported 2 contigs), and nothing is written beside the input."""
    name = "g.fa" + (".gz" if mode == "bgzip" else "")
    recs = [("a", chrx_slice[:900]), ("b", chrx_slice[1000:1500])]
    (tmp_path / "in").mkdir()
    fa = write(tmp_path / "in" / name, fasta(recs), mode)
    index = _index_beside(fa, mode)
    assert index
    recs.append(("c", chrx_slice[2000:2777]))
    write(fa, fasta(recs), mode)
    _age(index, index_age)                          # older: pyfaidx warned only; newer (a copy, cp -p): silent
    before = sorted(os.listdir(fa.parent))
    g = ingest(fa, tmp_path / "g.zarr", block_size=512, halo=10)
    assert [(c["name"], c["length"]) for c in g.contigs] == [(n, len(s)) for n, s in recs]
    for n, s in recs:
        assert decode(g.fetch(n, 0, len(s))) == s.upper()
    assert sorted(os.listdir(fa.parent)) == before      # no index written or refreshed beside the input


@pytest.mark.parametrize("index_age", [-100, 100], ids=["index-older", "index-newer"])
def test_stale_index_rewritten_file(tmp_path, chrx_slice, index_age):
    """A FASTA rewritten with other records (fewer, renamed, other lengths) after its .fai was made: ingest reads
    the new file (it failed on records no longer in the file, or read the wrong bytes)."""
    fa = write(tmp_path / "r.fa", fasta([(f"old{i}", chrx_slice[i * 300:i * 300 + 250]) for i in range(6)]))
    index = _index_beside(fa, "plain")
    new = [("x", chrx_slice[5000:5333].lower()), ("y", chrx_slice[7000:9100])]
    write(fa, fasta(new, width=70))
    _age(index, index_age)
    g = ingest(fa, tmp_path / "r.zarr", block_size=1000, halo=10)
    assert [(c["name"], c["length"]) for c in g.contigs] == [("x", 333), ("y", 2100)]
    for n, s in new:
        assert decode(g.fetch(n, 0, len(s))) == s.upper()


@pytest.mark.parametrize("mode", ["plain", "gzip", "bgzip"])
def test_many_records_counted(tmp_path, mode):
    """4,000 and 8,000 records after an index of 2,000 was made: each ingested whole (both were read as 2,000)."""
    rng = np.random.default_rng(5)
    seqs = ["".join("ACGT"[i] for i in rng.integers(0, 4, 30)) for _ in range(8000)]
    fa = write(tmp_path / ("n.fa" + ("" if mode == "plain" else ".gz")), fasta([(f"s{i}", s) for i, s in
                                                                                  enumerate(seqs[:2000])]), mode)
    if mode != "gzip":
        _age(_index_beside(fa, mode), 100)
    for k in (4000, 8000):
        write(fa, fasta([(f"s{i}", s) for i, s in enumerate(seqs[:k])]), mode)
        g = ingest(fa, tmp_path / f"n{k}.zarr", block_size=4096, halo=10)
        assert len(g.contigs) == k and g.total_length == 30 * k
        assert decode(g.fetch(f"s{k - 1}", 0, 30)) == seqs[k - 1]


def test_fasta_changed_during_ingest(tmp_path, chrx_slice, monkeypatch):
    """A FASTA that changes between the pass that counts it and the index pyfaidx builds: a clear error, no store."""
    import pipeline.genome as genome

    fa = write(tmp_path / "m.fa", fasta([("a", chrx_slice[:500])]))
    real = genome._read_pass

    def read_then_append(path, kind, copy):
        out = real(path, kind, copy)
        with open(path, "a") as f:                  # another process appends a record meanwhile
            f.write(fasta([("late", chrx_slice[600:700])]))
        return out

    monkeypatch.setattr(genome, "_read_pass", read_then_append)
    with pytest.raises(GenomeError, match=r"m\.fa: the file holds 1 records and 500 bases but its index says "
                                          r"2 records and 600 bases"):
        ingest(fa, tmp_path / "m.zarr", block_size=1000, halo=10)
    assert sorted(os.listdir(tmp_path)) == ["m.fa"]      # no store, no temporary folder
