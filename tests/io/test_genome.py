"""FASTA → Zarr genome store: layout, codes, attributes, bounded memory, bad input."""
from __future__ import annotations

import gzip
import json
import os
import tracemalloc

import numpy as np
import pytest

from pipeline.io.genome import GenomeError, GenomeStore, decode, encode, file_checksum, ingest
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


def packed_reference(g, seqs) -> np.ndarray:
    """The packed sequence the store should hold: every record's codes at its offset, 4 elsewhere."""
    rec = g.records
    out = np.full(g.packed_length, 4, np.uint8)
    for name, seq in seqs:
        i = rec.index[name]
        out[rec.offsets[i]:rec.offsets[i] + len(seq)] = encode(seq)
    return out


def check_rows(g, seqs, fetch=None) -> None:
    """Every block row = packed positions [b*B, b*B+B+H), padded with 4; every record reads back (``fetch``: the
    numbers of the records read back through ``GenomeStore.fetch``, all by default)."""
    packed = packed_reference(g, seqs)
    W = g.block_size + g.halo
    for blk in g.blocks(skip_all_n=False):
        want = np.full(W, 4, np.uint8)
        part = packed[blk.start:blk.start + W]
        want[:part.size] = part
        assert (g.read_block(blk) == want).all(), blk
    for name, seq in (seqs if fetch is None else [seqs[i] for i in fetch]):
        assert decode(g.fetch(name, 0, len(seq))) == decode(encode(seq)), name


def test_codes():
    assert encode("ACGTacgtNnRYKM-*").tolist() == [0, 1, 2, 3, 0, 1, 2, 3] + [4] * 8
    assert decode(encode("ACGTNacgtR")) == "ACGTNACGTN"


@pytest.mark.parametrize("mode", ["plain", "gzip", "bgzip"])
def test_packed_layout(tmp_path, chrx_slice, mode):
    seqs = [("chrA", chrx_slice[:25_000]), ("tiny", "acgtNNRY"), ("empty", ""), ("chrB", chrx_slice[30_000:40_001]),
            ("p1", chrx_slice[50_000:50_300]), ("p2", chrx_slice[60_000:60_150])]
    fa = write(tmp_path / ("g.fa" + (".gz" if mode != "plain" else "")), fasta(seqs), mode)
    g = ingest(fa, tmp_path / "g.zarr", block_size=4096, halo=50)
    rec = g.records
    assert rec.names == [n for n, _ in seqs] and rec.lengths.tolist() == [len(s) for _, s in seqs]
    # records in file order, one code 4 between two; a record longer than half a block ends its block
    assert rec.offsets.tolist() == [0, 28_672, 28_681, 28_682, 40_960, 41_261]
    assert g.packed_length == 41_411 and g.n_blocks == 11 and len(g.blocks(skip_all_n=False)) == 11
    check_rows(g, seqs)
    a = g.attrs
    assert a["block_size"] == 4096 and a["halo"] == 50 and a["format_version"] == 2 and a["records"] == 6
    assert a["source_checksum"] == file_checksum(fa)
    acgt = encode("".join(s for _, s in seqs))
    counts = np.bincount(acgt, minlength=5)
    assert a["base_counts"] == dict(zip("ACGTN", counts.tolist())) and a["total_length"] == acgt.size
    assert np.allclose(g.background, counts[:4] / counts[:4].sum())


def test_records_located_and_windows_never_span_two(tmp_path, chrx_slice):
    """Packed positions map back to (record, position); between two records there is always a code 4."""
    seqs = [(f"r{i}", chrx_slice[i * 500:i * 500 + n]) for i, n in enumerate([1, 7, 0, 4096, 4095, 4097, 8192, 3, 60])]
    g = ingest(write(tmp_path / "r.fa", fasta(seqs)), tmp_path / "r.zarr", block_size=4096, halo=30)
    check_rows(g, seqs)
    rec = g.records
    packed = packed_reference(g, seqs)
    for i, (name, seq) in enumerate(seqs):
        off = rec.offsets[i]
        if len(seq):
            pos = off + np.arange(len(seq))
            assert (rec.locate(pos) == i).all()
        if i + 1 < len(seqs):
            assert rec.offsets[i + 1] >= off + len(seq) + 1 and packed[off + len(seq)] == 4
    i0, i1 = rec.overlapping(4096, 8192)
    assert [rec.names[i] for i in range(i0, i1)] == [n for (n, s), o in zip(seqs, rec.offsets)
                                                      if len(s) and o < 8192 and o + len(s) > 4096]


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


@pytest.mark.parametrize("chunk,mode", [(7, "plain"), (100, "gzip"), (1 << 20, "plain"), (1 << 20, "bgzip")])
def test_cr_only_line_ends_read_as_lf(tmp_path, monkeypatch, chrx_slice, chunk, mode):
    """Old Mac OS text (lines ending in CR alone, no LF anywhere) gives the records an LF file gives, wherever
    the reader's chunks are cut (it used to read as one record with no sequence). Composition's test reader too."""
    from pipeline.io import fasta as fasta_module
    from pipeline.composition.run import read_tests

    monkeypatch.setattr(fasta_module, "_CHUNK", chunk)
    recs = [(f"r{i}", chrx_slice[i * 500:i * 500 + n]) for i, n in enumerate([0, 1, 61, 250, 0, 1000, 7])]
    fa = write(tmp_path / f"cr.fa{'.gz' if mode != 'plain' else ''}", fasta(recs, width=60, eol="\r"), mode)
    g = ingest(fa, tmp_path / "cr.zarr", block_size=1024, halo=10)
    assert list(g.records.names) == [r for r, _ in recs]
    check_rows(g, recs)
    full = [(r, s) for r, s in recs if s and "N" not in s]
    tests = read_tests(write(tmp_path / "t.fa", fasta(full, eol="\r")))
    assert list(tests.ids) == [r for r, _ in full] and tests.lengths.tolist() == [len(s) for _, s in full]


def test_ragged_lines_and_blank_lines_are_read(tmp_path, chrx_slice):
    """Any line layout: a sequential reader needs no fixed line length (an index-based one does)."""
    seq = chrx_slice[:5000]
    text = ">a\n" + seq[:70] + "\n" + seq[70:100] + "\n\n" + seq[100:4000] + "\n   \n" + seq[4000:] + "\n>b\n\nACGT\n"
    g = ingest(write(tmp_path / "rag.fa", text), tmp_path / "rag.zarr", block_size=1000, halo=5)
    check_rows(g, [("a", seq), ("b", "ACGT")])


@pytest.mark.parametrize("chunk", [7, 100, 1 << 20])
def test_any_layout_cut_anywhere_reads_back(tmp_path, monkeypatch, chrx_slice, chunk):
    """Records of every size (empty ones too) with random line widths, CR LF and blank lines, the reader's
    chunks cut after any line: the vectorised chunk parse gives every record's name and bases, and the store
    lays them out as one ``add`` per record would (the packed reference)."""
    from pipeline.io import fasta as fasta_module

    monkeypatch.setattr(fasta_module, "_CHUNK", chunk)
    rng = np.random.default_rng(chunk)
    recs, text, at = [], [], 0
    for i in range(150):
        n = int(rng.choice([0, 1, 5, 40, 300, 2500]))
        seq, at = chrx_slice[at:at + n], at + n
        recs.append((f"r{i}", seq))
        eol = "\r\n" if rng.random() < 0.3 else "\n"
        width = int(rng.integers(1, 90))
        text.append(f">r{i} {'desc ' * int(rng.integers(0, 3))}{eol}")
        text += [seq[k:k + width] + eol + ("\n" if rng.random() < 0.05 else "") for k in range(0, n, width)]
    fa = write(tmp_path / "layout.fa", "".join(text).rstrip("\n"))
    g = ingest(fa, tmp_path / "l.zarr", block_size=2048, halo=20)
    assert list(g.records.names) == [r for r, _ in recs]
    check_rows(g, recs)


@pytest.mark.parametrize("chunk", [7, 100, 1 << 20])
def test_reader_equals_a_line_by_line_parse(tmp_path, monkeypatch, chrx_slice, chunk):
    """``FastaReader.batches`` (one compiled pass a chunk) against a plain line-by-line parse: the same records,
    names and codes, on lower case, IUPAC letters, gaps, spaces inside lines, CR LF, blank lines, empty records and
    chunks cut after any line."""
    from pipeline.io import fasta as fasta_module
    from pipeline.io.fasta import FastaReader
    from tests.reference import fasta_records

    monkeypatch.setattr(fasta_module, "_CHUNK", chunk)
    rng = np.random.default_rng(chunk + 1)
    letters = np.frombuffer(b"acgtNRYKMSWBDHVnX-.U", np.uint8)
    text = []
    for i in range(120):
        n = int(rng.choice([0, 1, 9, 70, 700]))
        seq = bytes(np.where(rng.random(n) < 0.2, rng.choice(letters, n), np.frombuffer(
            chrx_slice[:n].encode(), np.uint8))).decode()
        eol = "\r\n" if rng.random() < 0.3 else "\n"
        width = int(rng.integers(1, 80))
        text.append(f">s{i}{' desc' * int(rng.integers(0, 2))}{eol}")
        text += [seq[k:k + width] + (" " if rng.random() < 0.05 else "") + eol + ("\n" if rng.random() < 0.05 else "")
                 for k in range(0, n, width)]
    fa = write(tmp_path / "mixed.fa", "".join(text))
    names, codes, starts = [], [], []
    for nm, st, c in FastaReader(fa).batches():
        starts += [sum(x.size for x in codes) + s for s in st]
        names += nm
        codes.append(c.copy())
    codes = np.concatenate(codes)
    bounds = starts + [codes.size]
    expected = fasta_records(fa)
    assert names == [name for name, _ in expected]
    for k, (_, ref) in enumerate(expected):
        assert np.array_equal(codes[bounds[k]:bounds[k + 1]], ref)


@pytest.mark.parametrize("chunk", [7, 1 << 20])
def test_bad_byte_named_in_a_record_that_spans_chunks(tmp_path, monkeypatch, chunk):
    """The first byte that is no nucleotide code is named by record and position (1-based), wherever the reader's
    chunks were cut."""
    from pipeline.io import fasta as fasta_module

    monkeypatch.setattr(fasta_module, "_CHUNK", chunk)
    fa = write(tmp_path / "bad.fa", ">a\nACGT\n>b two\nAC\nGTACGTAC\nGGEA\nAAA\n>c\nA*\n")
    with pytest.raises(GenomeError, match=r"record 'b' position 13: 'E' is not a nucleotide code"):
        ingest(fa, tmp_path / "bad.zarr")


def test_many_small_records_share_blocks(tmp_path, chrx_slice):
    recs = [(f"p{i}", chrx_slice[i * 37:i * 37 + 20 + i % 50]) for i in range(3000)]
    g = ingest(write(tmp_path / "many.fa", fasta(recs)), tmp_path / "m.zarr", block_size=4096, halo=20)
    assert len(g.records) == 3000
    packed = sum(len(s) for _, s in recs) + 2999
    assert g.packed_length == packed and g.n_blocks == -(-packed // 4096)
    # every record's name, length and bases at its offset (the block rows); read back one by one (a store read
    # each, 2 ms: 6 s for all 3,000): every record across a block border, the first, the last and every 25th
    rec = g.records
    assert list(rec.names) == [n for n, _ in recs] and rec.lengths.tolist() == [len(s) for _, s in recs]
    ends = rec.offsets + rec.lengths - 1
    across = np.flatnonzero(rec.offsets // 4096 != ends // 4096)
    assert across.size >= 20
    check_rows(g, recs, fetch=sorted({*across.tolist(), *range(0, 3000, 25), 2999}))
    files = sum(len(f) for _, _, f in os.walk(tmp_path / "m.zarr"))
    assert files < 20, f"{files} files for 3000 records"      # files grow with the bases, not the records


def test_bounded_memory(tmp_path, chrx_slice):
    """A 20 Mb record ingested with 1 Mb blocks never holds the record in memory (it is 20 MB as text)."""
    ingest(write(tmp_path / "warm.fa", ">w\nACGT\n"), tmp_path / "warm.zarr")     # imports out of the way
    seq = (chrx_slice * 70)[:20_000_000]
    fa = write(tmp_path / "big.fa", fasta([("big", seq)], width=80))
    del seq
    tracemalloc.start()
    ingest(fa, tmp_path / "big.zarr", block_size=1 << 20, halo=127)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < 32 * (1 << 20), f"peak traced memory {peak / 2**20:.1f} MiB for a 20 Mb record"


def test_bounded_memory_many_records(tmp_path):
    """200,000 records: memory grows with the record table (names, offsets), not with the sequence."""
    ingest(write(tmp_path / "warm.fa", ">w\nACGT\n"), tmp_path / "warm.zarr")
    rng = np.random.default_rng(3)
    seqs = decode(rng.integers(0, 4, 200_000 * 150, dtype=np.uint8))      # one call: 200,000 calls took 5 s
    with open(tmp_path / "many.fa", "w") as f:
        f.write("".join(f">peak{i}\n{seqs[150 * i:150 * (i + 1)]}\n" for i in range(200_000)))
    del seqs
    tracemalloc.start()
    g = ingest(tmp_path / "many.fa", tmp_path / "many.zarr")
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(g.records) == 200_000 and g.total_length == 30_000_000
    assert peak < 120 * (1 << 20), f"peak traced memory {peak / 2**20:.1f} MiB"


def test_stale_index_beside_the_input_is_never_read(tmp_path, chrx_slice):
    """A .fai/.gzi beside the FASTA that describes an older version of it changes nothing, and none is written."""
    fa = write(tmp_path / "s.fa", fasta([("a", chrx_slice[:1000]), ("b", chrx_slice[2000:2500])]))
    (tmp_path / "s.fa.fai").write_text("a\t1000\t3\t60\t61\n")            # an index of an older file: one record
    g = ingest(fa, tmp_path / "s.zarr", block_size=1000, halo=5)
    assert g.records.names == ["a", "b"]
    check_rows(g, [("a", chrx_slice[:1000]), ("b", chrx_slice[2000:2500])])
    assert sorted(os.listdir(tmp_path)) == ["s.fa", "s.fa.fai", "s.zarr"]


@pytest.mark.parametrize("content,msg", [
    (b"", "empty file"),
    (b"ACGTACGT\nACGT\n", "not a FASTA file"),
    (b"\x00\x01\x02binary\xff", "binary data"),
    (b">a\nACGT\n>b\nAAAA\n>a\nCCCC\n", r"duplicate record name 'a' \(records 1 and 3\)"),
    (b">a\nACGT\n>b\nAA\n>b\nCCCC\n", r"duplicate record name 'b' \(records 2 and 3\)"),
    (b">a\nACGT\n>b\nAAJA\n", "record 'b' position 3: 'J' is not a nucleotide code"),
    (">a\nACGTÅCGT\n".encode(), "record 'a' position 5: byte 0xc3 is not a nucleotide code"),   # UTF-8 Å
    (b">a\n\n>b\n", "no sequence in any of its 2 record"),
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


def test_format_1_store_refused(tmp_path):
    (tmp_path / "old.zarr").mkdir()
    (tmp_path / "old.zarr" / "zarr.json").write_text(json.dumps(
        {"zarr_format": 3, "node_type": "group", "attributes": {"format": "motifgrid-genome", "format_version": 1}}))
    with pytest.raises(GenomeError, match="format version 1 .* re-ingest the FASTA"):
        GenomeStore(tmp_path / "old.zarr")


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
    assert g.records.lengths.tolist() == [1_531_933] and g.n_blocks == 3


def test_synthesize_layout_and_composition(tmp_path):
    from pipeline.io.genome import synthesize

    g = synthesize(tmp_path / "s.zarr", [("a", 100_000), ("b", 2_500)], [0.3, 0.2, 0.2, 0.3], block_size=40_000, halo=12)
    assert g.records.offsets.tolist() == [0, 120_000] and g.n_blocks == 4 and g.attrs["source"].startswith("synthetic:")
    blocks = g.blocks()
    for x, y in zip(blocks[:2], blocks[1:3]):               # each halo is the next block's first H codes
        assert (g.read_block(x)[40_000:] == g.read_block(y)[:12]).all()
    assert (g.read_block(blocks[3])[2_500:] == 4).all()      # padded past the record end
    assert np.allclose(g.background, [0.3, 0.2, 0.2, 0.3], atol=0.01)
    assert sum(g.attrs["base_counts"].values()) == 102_500


def test_store_read_through_zarr(tmp_path, chrx_slice):
    """The store is plain zarr: its arrays open with zarr's API and hold what the reader returns; short rows are
    sharded (few files)."""
    import zarr

    seqs = [("a", chrx_slice[:9000]), ("allN", "N" * 5000 + chrx_slice[:100]), ("short", chrx_slice[20_000:20_700])]
    g = ingest(write(tmp_path / "g.fa", fasta(seqs)), tmp_path / "g.zarr", block_size=4096, halo=40)
    root = zarr.open_group(str(tmp_path / "g.zarr"), mode="r")
    blocks = root["blocks"]
    assert blocks.shape == (g.n_blocks, 4096 + 40) and blocks.chunks == (1, 4096 + 40) and blocks.fill_value == 4
    for blk in g.blocks(skip_all_n=False):
        assert np.array_equal(np.asarray(blocks[blk.index]), g.read_block(blk))
    assert root["records/name"][:].tolist() == ["a", "allN", "short"]
    assert root["n_fraction"][:].tolist() == pytest.approx(g.n_fraction.tolist())


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
    assert list(zip(g.records.names, g.records.lengths.tolist())) == [(n, len(s)) for n, s in recs]
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
    assert list(zip(g.records.names, g.records.lengths.tolist())) == [("x", 333), ("y", 2100)]
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
        assert len(g.records) == k and g.total_length == 30 * k
        assert decode(g.fetch(f"s{k - 1}", 0, 30)) == seqs[k - 1]


def test_store_from_codes_equals_ingest_of_the_same_records(tmp_path, chrx_slice):
    """Records held in memory (enrichment's targets and controls) laid out exactly as ingest lays out a FASTA of
    them: the same blocks, record table and base counts; an empty record keeps its place."""
    from pipeline.io.genome import store_from_codes

    recs = {"a": chrx_slice[:700], "b": "", "c": "ACGTNNNNacgt", "d": chrx_slice[5000:9000], "e": chrx_slice[:499],
            "f": chrx_slice[700:1200], "g": chrx_slice[9000:9501], **{f"p{i}": chrx_slice[i * 31:i * 31 + i % 97]
                                                                      for i in range(300)}, "z": chrx_slice[:3]}
    fa = tmp_path / "r.fa"
    fa.write_text("".join(f">{k}\n{v}\n" for k, v in recs.items()))
    want = ingest(fa, tmp_path / "fa.zarr", block_size=1000, halo=30)
    codes = np.concatenate([encode(v) for v in recs.values()])
    offsets = np.concatenate([[0], np.cumsum([len(v) for v in recs.values()])])
    got = store_from_codes(tmp_path / "mem.zarr", list(recs), codes, offsets, "memory", "sha256:x",
                           block_size=1000, halo=30)
    assert got.records.names == want.records.names
    assert (got.records.offsets == want.records.offsets).all() and (got.records.lengths == want.records.lengths).all()
    assert got.attrs["base_counts"] == want.attrs["base_counts"] and got.checksum == "sha256:x"
    for b in range(want.n_blocks):
        assert (got.read_block(got.block(b)) == want.read_block(want.block(b))).all()
    for k, v in recs.items():
        assert decode(got.fetch(k, 0, len(v))) == v.upper()
    raw = store_from_codes(tmp_path / "raw.zarr", list(recs), codes, offsets, "memory", "sha256:x",
                           block_size=1000, halo=30, compress=False)        # enrichment's scratch store
    for b in range(want.n_blocks):
        assert (raw.read_block(raw.block(b)) == want.read_block(want.block(b))).all()
