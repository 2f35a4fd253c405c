"""Staging's fast reader (``read_columns``: Arrow, a batch of records at a time) against the Python one
(``read_vcf``, ``stage.FAST = False``): the same chunks (every ``_alleles/part-*.parquet`` table), the same
``_staged.json`` and warnings, and the same error, on real VCFs (1000 Genomes chr22, samtools) staged against a
random genome (their REFs mostly mismatch), on a VCF of the test genome of test_variants.py (multi-allelic records,
symbolic ALTs, breakends, lower case, CRLF line ends, gzip and bgzip, REF mismatches, a contig the genome lacks), on
the bad-input corpus, and on files the fast reader must give up on (a blank line, a bad POS, records out of order...):
there the Python reader reads the file from its first line and says what it says."""
from __future__ import annotations

import gzip

import pyarrow.parquet as pq
import pytest
from Bio import bgzf

import pipeline.variants.stage as staging
from pipeline.io import storage
from pipeline.io.genome import GenomeStore, ingest, synthesize
from pipeline.variants import vcf as vcf_module
from tests.conftest import DATA, NO_SHARED, SHARED
from tests.variants.test_variants import _alleles, genome  # noqa: F401  (genome: the fixture)

HEADER = ["##fileformat=VCFv4.2", "##contig=<ID=r1>", "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO"]
SMALL = {"batch": 37, "block": 4000}        # batches and Arrow blocks (bytes) that end mid-file


def _stage(vcf, store, out, fast: bool, monkeypatch, chunk: int, most: float) -> tuple:
    """``(outcome, tables, _staged.json text, whether the Python reader read it)`` of one staging."""
    monkeypatch.setattr(staging, "FAST", fast)
    python = []
    real = staging._stage_python

    def spy(*args, **kwargs):
        python.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr(staging, "_stage_python", spy)
    warned = []
    try:
        st = staging.stage(str(vcf), store, str(out), chunk, most, warn=warned.append)
        outcome = ("staged", st.as_dict(), warned)
    except Exception as e:  # noqa: BLE001
        outcome = ("refused", type(e).__name__, str(e))
    folder = out / "_alleles"
    tables = {p.name: pq.read_table(p) for p in sorted(folder.glob("part-*.parquet"))}
    staged = (folder / "_staged.json").read_text() if (folder / "_staged.json").exists() else None
    return outcome, tables, staged, bool(python)


def _same(vcf, store, tmp_path, monkeypatch, chunk: int = 25, most: float = 0.05, gives_up: bool = False,
          small: bool = False) -> tuple:
    """Stage ``vcf`` both ways; everything equal; the fast reader read it to the end (or gave up: ``gives_up``).
    ``small``: batches of a few dozen alleles and Arrow blocks of a few records.  The Python reader's outcome."""
    if small:
        monkeypatch.setattr(staging, "BATCH", SMALL["batch"])
        monkeypatch.setattr(vcf_module, "_BLOCK", SMALL["block"])
    fast = _stage(vcf, store, tmp_path / "fast", True, monkeypatch, chunk, most)
    slow = _stage(vcf, store, tmp_path / "python", False, monkeypatch, chunk, most)
    assert fast[3] == gives_up
    _equal(fast, slow)
    return slow[0]


def _equal(fast: tuple, slow: tuple) -> None:
    assert fast[0] == slow[0]
    assert fast[2] == slow[2]
    assert list(fast[1]) == list(slow[1])
    for name, table in slow[1].items():
        assert fast[1][name].equals(table, check_metadata=True), name


# ------------------------------------------------------------------------------------------------ real VCFs
@pytest.fixture(scope="module")
def random_genome(tmp_path_factory) -> GenomeStore:
    """Random sequence named as the real VCFs' contigs (but chr1, absent): their REFs mostly mismatch."""
    return synthesize(tmp_path_factory.mktemp("random") / "g.zarr", [("22", 51_400_000), ("chrX", 3_000_000)],
                      [0.3, 0.2, 0.2, 0.3])


@pytest.mark.skipif(SHARED is None, reason=NO_SHARED)
@pytest.mark.parametrize("small", [False, True], ids=["batches", "small-batches"])
@pytest.mark.parametrize("most", [1.0, 0.05])
@pytest.mark.parametrize("name", ["chr22_VariantAnnotation.vcf.gz", "samtools_pyvcf.vcf"])
def test_real_vcfs_stage_the_same(name, most, small, random_genome, tmp_path, monkeypatch):
    out = _same(SHARED / "variants" / "vcf" / name, random_genome, tmp_path, monkeypatch, chunk=300, most=most,
                small=small)
    if most == 1.0:
        assert out[0] == "staged" and out[1]["ref_mismatches"] > 0
    else:
        assert out[0] == "refused" and "is the VCF on another genome build?" in out[2]


# ------------------------------------------------------------------------------------- the test genome's VCF
@pytest.fixture(scope="module")
def store(genome, tmp_path_factory) -> GenomeStore:
    return ingest(genome[0], tmp_path_factory.mktemp("staging") / "genome.zarr")


def _records(seqs: dict, lower: bool = False) -> list:
    """VCF lines of test_variants' alleles with every kind of ALT that is skipped, some mismatching REFs, lower case
    (``lower``) and a contig the genome lacks."""
    lines = []
    for i, (chrom, pos, ref, alts) in enumerate(_alleles(seqs)):
        alts = list(alts)
        if i % 7 == 3:
            alts.append("<DEL>")
        if i % 11 == 5:
            alts.insert(0, "*")
        if i % 13 == 6:
            alts.append(f"{ref[0]}[r2:100[")
        if i % 17 == 8:
            alts = ["."]
        if i % 19 == 9:                                     # a REF that is not the genome's
            ref = "".join("C" if b == "A" else "A" for b in ref)
        if lower and i % 3 == 1:
            ref, alts = ref.lower(), [a.lower() if not a.startswith("<") else a for a in alts]
        lines.append(f"{chrom}\t{pos}\t{'.' if i % 4 else f'v{i}'}\t{ref}\t{','.join(alts)}\t50\tPASS\tDP={i}")
    lines += [f"r9\t{p}\t.\tA\tC,G\t.\t.\t." for p in (5, 9, 9)]
    return lines


def _write(path, lines: list, how: str = "plain", end: str = "\n"):
    text = end.join(HEADER + lines) + end
    if how == "gzip":
        with gzip.open(path, "wt", newline="") as f:
            f.write(text)
    elif how == "bgzip":
        with bgzf.BgzfWriter(str(path), "wb") as f:
            f.write(text.encode())
    else:
        path.write_bytes(text.encode())
    return path


@pytest.mark.parametrize("small", [False, True], ids=["batches", "small-batches"])
@pytest.mark.parametrize("how,end,lower", [("plain", "\n", False), ("plain", "\n", True), ("plain", "\r\n", True),
                                           ("gzip", "\n", True), ("bgzip", "\r\n", True)],
                         ids=["plain", "lower-case", "crlf", "gzip", "bgzip-crlf"])
def test_a_vcf_of_the_test_genome_stages_the_same(how, end, lower, small, genome, store, tmp_path, monkeypatch):
    vcf = _write(tmp_path / f"v.vcf{'.gz' if how != 'plain' else ''}", _records(genome[1], lower), how, end)
    out = _same(vcf, store, tmp_path, monkeypatch, most=0.2, small=small)
    assert out[0] == "staged"
    assert out[1]["skipped"]["symbolic"] and out[1]["skipped"]["breakend"] and out[1]["skipped"]["spanning"]
    assert out[1]["skipped"]["no_alt"] and out[1]["ref_mismatches"] and out[1]["absent_contigs"] == {"r9": 6}
    assert out[2], "the skipped ALTs, the absent contig and the mismatches are warned of"


def test_a_contig_named_with_chr_is_refused_the_same(genome, store, tmp_path, monkeypatch):
    lines = _records(genome[1])
    lines = [("chr" + line) if line.startswith("r2") else line for line in lines if not line.startswith("r9")]
    out = _same(_write(tmp_path / "v.vcf", lines), store, tmp_path, monkeypatch, most=0.2)
    assert out[0] == "refused" and "contig 'chrr2' is 'r2' in the genome" in out[2]


def _irregular(lines: list, what: str) -> list:
    """``lines`` with one thing the fast reader gives up on, some way into the file."""
    k = len(lines) // 2
    fields = lines[k].split("\t")
    edits = {
        "blank-line": lambda: lines[:k] + [""] + lines[k:],
        "spaces-line": lambda: lines[:k] + ["  "] + lines[k:],
        "bad-pos": lambda: lines[:k] + ["\t".join([fields[0], "12a"] + fields[2:])] + lines[k + 1:],
        "pos-with-sign": lambda: lines[:k] + ["\t".join([fields[0], "+" + fields[1]] + fields[2:])] + lines[k + 1:],
        "pos-zero": lambda: lines[:k] + ["\t".join([fields[0], "0"] + fields[2:])] + lines[k + 1:],
        "bad-ref": lambda: lines[:k] + ["\t".join(fields[:3] + ["A1"] + fields[4:])] + lines[k + 1:],
        "bad-alt": lambda: lines[:k] + ["\t".join(fields[:4] + ["A,X?"] + fields[5:])] + lines[k + 1:],
        "empty-alt": lambda: lines[:k] + ["\t".join(fields[:4] + ["A,"] + fields[5:])] + lines[k + 1:],
        "unsorted": lambda: lines[:k] + [lines[k + 1], lines[k]] + lines[k + 2:],
        "contig-comes-back": lambda: lines + [lines[0]],
        "comment-line": lambda: lines[:k] + ["##a comment"] + lines[k:],
        "second-header": lambda: lines[:k] + [HEADER[-1]] + lines[k:],
        "other-hash-line": lambda: lines[:k] + ["#x"] + lines[k:],
        "four-columns": lambda: lines[:k] + ["\t".join(fields[:4])] + lines[k:],
        "more-columns": lambda: lines[:k] + [lines[k] + "\tGT\t0|1"] + lines[k + 1:],
        "not-utf8": lambda: lines[:k] + ["\t".join(fields[:2] + ["v\udcff"] + fields[3:])] + lines[k + 1:],
        "lone-cr": lambda: lines[:k] + [lines[k] + "\r" + lines[k + 1]] + lines[k + 2:],
    }
    return edits[what]()


@pytest.mark.parametrize("small", [False, True], ids=["batches", "small-batches"])
@pytest.mark.parametrize("what", ["blank-line", "spaces-line", "bad-pos", "pos-with-sign", "pos-zero", "bad-ref",
                                  "bad-alt", "empty-alt", "unsorted", "contig-comes-back", "comment-line",
                                  "second-header", "other-hash-line", "four-columns", "more-columns", "not-utf8",
                                  "lone-cr"])
def test_what_the_fast_reader_gives_up_on_is_read_by_the_python_reader(what, small, genome, store, tmp_path,
                                                                         monkeypatch):
    lines = _irregular(_records(genome[1]), what)
    vcf = tmp_path / "v.vcf"
    vcf.write_bytes(("\n".join(HEADER + lines) + "\n").encode("utf-8", "surrogateescape"))
    out = _same(vcf, store, tmp_path, monkeypatch, most=0.2, gives_up=what != "lone-cr", small=small)
    valid = {"blank-line", "spaces-line", "pos-with-sign", "comment-line", "second-header", "more-columns",
             "not-utf8", "lone-cr"}
    assert out[0] == ("staged" if what in valid else "refused"), out
    if what in ("bad-pos", "unsorted"):
        assert {"bad-pos": "POS '12a' is not a positive integer",
                "unsorted": "the VCF is not sorted"}[what] in out[2]


@pytest.mark.parametrize("small", [False, True], ids=["batches", "small-batches"])
def test_a_header_the_fast_reader_gives_up_on(small, genome, store, tmp_path, monkeypatch):
    """A blank line in the header, a line before it that is no ``##`` line, a truncated bgzip file."""
    lines = _records(genome[1])
    blank = tmp_path / "blank.vcf"
    blank.write_text("\n".join(HEADER[:1] + [""] + HEADER[1:] + lines) + "\n")
    _same(blank, store, tmp_path / "blank", monkeypatch, most=0.2, gives_up=True, small=small)
    stray = tmp_path / "stray.vcf"
    stray.write_text("\n".join(["x"] + HEADER + lines) + "\n")
    assert "a record before the #CHROM header" in _same(stray, store, tmp_path / "stray", monkeypatch, most=0.2,
                                                        gives_up=True, small=small)[2]
    whole = _write(tmp_path / "whole.vcf.gz", lines, "bgzip").read_bytes()
    cut = tmp_path / "cut.vcf.gz"
    cut.write_bytes(whole[:len(whole) * 2 // 3])
    assert "truncated or corrupt compressed file" in _same(cut, store, tmp_path / "cut", monkeypatch, most=0.2,
                                                           gives_up=True, small=small)[2]


def test_an_error_comes_where_the_python_reader_meets_it(genome, store, tmp_path, monkeypatch):
    """REFs of another build in the first batches, a bad POS further on: the REF check refuses the file first; the
    bad POS first where the first batches match."""
    r1 = genome[1]["r1"]
    for wrong, expect in ((1500, "is the VCF on another genome build?"), (0, "POS '12a' is not a positive")):
        body = [f"r1\t{p}\t.\t{'A' if p <= wrong else r1[p - 1]}\t{'T' if r1[p - 1] != 'T' else 'G'}"
                for p in range(1, len(r1) + 1) if r1[p - 1] in "ACGT"]
        body += ["r2\t5\t.\tA\tC", "r2\t12a\t.\tA\tC", "r2\t50\t.\tA\tC"]
        out = _same(_write(tmp_path / f"{wrong}.vcf", body), store, tmp_path / str(wrong), monkeypatch, most=0.05,
                    gives_up=not wrong, small=True)
        assert out[0] == "refused" and expect in out[2]


def test_a_failing_write_is_the_error_though_a_later_batch_fails_too(genome, store, tmp_path, monkeypatch):
    """The chunks written by a thread: a write's error comes as if written in turn, before the bad POS of a later
    batch (the fast reader's give-up), and no chunk after it is written."""
    lines = _irregular(_records(genome[1]), "bad-pos")
    vcf = _write(tmp_path / "v.vcf", lines)
    real = storage.write_parquet

    def failing(table, path, **kwargs):
        if str(path).endswith("part-000001.parquet"):
            raise OSError(28, "No space left on device")
        return real(table, path, **kwargs)

    monkeypatch.setattr(storage, "write_parquet", failing)
    out = _same(vcf, store, tmp_path, monkeypatch, chunk=10, most=0.05, small=True)
    assert out[:2] == ("refused", "OSError")


# ------------------------------------------------------------------------------------- the bad-input corpus
@pytest.fixture(scope="module")
def corpus_store(tmp_path_factory, chrx_slice) -> GenomeStore:
    """The corpus cases' genome (tests/cli/test_bad_inputs.py): chrA, the first 6,000 bp of the chrX slice."""
    d = tmp_path_factory.mktemp("corpus")
    fa = d / "good.fa"
    fa.write_text(">chrA\n" + "\n".join(chrx_slice[i:i + 60] for i in range(0, 6000, 60)) + "\n")
    return ingest(fa, d / "good.zarr", block_size=2000, halo=40)


@pytest.mark.parametrize("name", sorted(p.name for p in (DATA / "bad" / "vcf").iterdir()))
def test_the_bad_input_corpus_says_the_same(name, corpus_store, tmp_path, monkeypatch):
    _equal(_stage(DATA / "bad" / "vcf" / name, corpus_store, tmp_path / "fast", True, monkeypatch, 2000, 0.05),
           _stage(DATA / "bad" / "vcf" / name, corpus_store, tmp_path / "python", False, monkeypatch, 2000, 0.05))
