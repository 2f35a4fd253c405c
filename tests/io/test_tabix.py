"""Tabix (.tbi) and CSI (.csi) region queries on bgzipped VCFs, checked line for line against htslib's ``tabix``.

Real data (the shared chr22 VCF of VariantAnnotation, re-bgzipped and indexed three ways: .tbi, .csi, .csi with
``-m 10``) and a written VCF of two contigs with deletions and ``INFO/END`` spans crossing 16 kb windows and
positions past 2**29 (CSI only: a .tbi cannot hold them).  Bad indexes are refused naming the file.
"""
from __future__ import annotations

import gzip
import os
import random
import shutil
import subprocess

import pytest
from Bio import bgzf

from pipeline.io.tabix import (Region, fetch_lines, find_index, header_lines, parse_region, read_index, record_span,
                               reg2bins)
from tests.conftest import SHARED, needs_shared

TABIX = shutil.which("tabix")
BGZIP = shutil.which("bgzip")
needs_htslib = pytest.mark.skipif(TABIX is None or BGZIP is None, reason="htslib's tabix and bgzip are not installed")
CHR22 = "variants/vcf/chr22_VariantAnnotation.vcf.gz"


def tabix(vcf, region) -> list[str]:
    """What ``tabix VCF REGION`` prints, as lines (it picks the index beside the VCF: one per copy here)."""
    run = subprocess.run([TABIX, str(vcf), region], capture_output=True, text=True, check=True)
    return run.stdout.splitlines()


def bgzip_and_index(plain, dest, *index_args):
    """``bgzip -c plain > dest`` then ``tabix -p vcf [index_args] dest``; the index's path."""
    with open(dest, "wb") as out:
        subprocess.run([BGZIP, "-c", str(plain)], stdout=out, check=True)
    subprocess.run([TABIX, "-f", "-p", "vcf", *index_args, str(dest)], check=True, capture_output=True)
    return find_index(dest)


def mismatches(vcf, index, regions) -> list:
    """``(region, tabix's line count, ours)`` wherever the two differ."""
    out = []
    for r in regions:
        want, got = tabix(vcf, r), list(fetch_lines(vcf, r, index))
        if want != got:
            out.append((r, len(want), len(got)))
    return out


def record_lines(plain) -> list[str]:
    with open(plain) as f:
        return [line.rstrip("\r\n") for line in f if not line.startswith("#")]


# ---------------------------------------------------------------------------------------------------- real data

INDEXINGS = {"tbi": (), "csi": ("--csi",), "csi-m10": ("--csi", "-m", "10")}


@pytest.fixture(scope="module")
def chr22(tmp_path_factory):
    """The plain chr22 VCF, and per indexing its own bgzipped copy (so tabix reads that index, not another)."""
    if SHARED is None or not (SHARED / CHR22).is_file():
        pytest.skip(f"{CHR22} is not in the shared data")
    if TABIX is None or BGZIP is None:
        pytest.skip("htslib's tabix and bgzip are not installed")
    d = tmp_path_factory.mktemp("chr22")
    plain = d / "chr22.vcf"
    with gzip.open(SHARED / CHR22, "rb") as src, open(plain, "wb") as dst:
        shutil.copyfileobj(src, dst)
    copies = {}
    for name, args in INDEXINGS.items():
        vcf = d / f"chr22.{name}.vcf.gz"
        copies[name] = (vcf, bgzip_and_index(plain, vcf, *args))
    return plain, copies


def chr22_regions(plain) -> list[str]:
    """About 30 regions: the edges (before the first record, after the last, at a POS, on and past the last base of
    the longest deletion's REF), the whole chromosome, absent names, and random spans of 1 bp to 300 kb."""
    recs = [line.split("\t", 5) for line in record_lines(plain)]
    first, last = int(recs[0][1]), int(recs[-1][1])
    dele = max(recs, key=lambda r: len(r[3]))
    d_pos, d_end = int(dele[1]), int(dele[1]) + len(dele[3]) - 1
    at = int(recs[len(recs) // 3][1])
    regions = ["22", "22:", f"22:1-{first - 1}", f"22:{first}-{first}", f"22:{first}", f"22:-{first}",
               f"22:{last}-{last}", f"22:{last + 1}-{last + 1000}", f"22:{last + 1}", f"22:{at}-{at}",
               f"22:{at + 1}-{at + 1}", f"22:{d_pos - 1}-{d_pos - 1}", f"22:{d_end}-{d_end}",
               f"22:{d_end + 1}-{d_end + 5}", f"22:{(d_pos + d_end) // 2}-{(d_pos + d_end) // 2}",
               f"22:{d_pos + 10}-{d_end + 20_000}", f"22:{first:,}-{first + 20_000:,}", "chr22", "X", "22:1-10"]
    rng = random.Random(22)
    for width in (1, 1, 10, 100, 1_000, 16_384, 20_000, 100_000, 300_000, 1_000_000):
        start = rng.randint(first - 1_000, last)
        regions.append(f"22:{start}-{start + width - 1}")
    return regions


@needs_shared
@needs_htslib
@pytest.mark.parametrize("indexing", list(INDEXINGS))
def test_chr22_regions_match_tabix_line_for_line(chr22, indexing):
    plain, copies = chr22
    vcf, idx_path = copies[indexing]
    index = read_index(idx_path)
    assert (index.kind, index.min_shift) == {"tbi": ("tbi", 14), "csi": ("csi", 14),
                                             "csi-m10": ("csi", 10)}[indexing]
    assert index.names == ["22"] and index.format == 2 and index.meta == "#"
    regions = chr22_regions(plain)
    assert len(regions) >= 30
    assert mismatches(vcf, index, regions) == []
    # each record once, in file order: the whole chromosome is the file's records
    assert list(fetch_lines(vcf, "22")) == record_lines(plain)


@needs_shared
@needs_htslib
@pytest.mark.parametrize("indexing", list(INDEXINGS))
def test_chr22_a_small_region_reads_a_small_part_of_the_file(chr22, indexing):
    """The linear index (.tbi) or the bins' loffset (.csi) drop the chunks of records ending before the region."""
    plain, copies = chr22
    vcf, idx_path = copies[indexing]
    recs = record_lines(plain)
    pos = int(recs[-100].split("\t")[1])
    chunks = read_index(idx_path).chunks("22", pos - 1, pos)
    assert chunks and all(a < b for a, b in chunks)
    assert all(b1 < a2 for (_, b1), (a2, _) in zip(chunks, chunks[1:]))
    span = sum((b >> 16) - (a >> 16) for a, b in chunks)
    assert chunks[0][0] >> 16 > os.path.getsize(vcf) // 2 and span < os.path.getsize(vcf) // 10


@needs_shared
@needs_htslib
def test_chr22_header_and_index_lookup(chr22):
    plain, copies = chr22
    vcf, idx = copies["tbi"]
    with open(plain) as f:
        want = [line.rstrip("\n") for line in f if line.startswith("#")]
    assert header_lines(vcf) == want == header_lines(plain)
    assert want[-1].startswith("#CHROM")
    assert idx == find_index(vcf) and idx.name.endswith(".tbi")
    assert find_index(copies["csi"][0]).name.endswith(".csi")
    assert find_index(plain) is None


# ---------------------------------------------------------------------------------------------------- written VCF

def dna(rng, n):
    return "".join(rng.choice("ACGT") for _ in range(n))


def synthetic_records(rng) -> list[tuple[str, int, str, str]]:
    """Two contigs; deletions of 16-40 kb (crossing 16 kb windows), INFO/END spans longer and shorter than REF and
    before POS (ignored), hex END; chrA dense around 1e5 and across 2**29, sparse up to 7e8 (past a .tbi's reach)."""
    out = []
    layout = {"chrA": [(1, 700_000_000, 150), (10_000, 200_000, 120), (536_800_000, 536_990_000, 120)],
              "chrB": [(1, 3_000_000, 150)]}
    for chrom, spans in layout.items():
        positions = sorted({p for lo, hi, n in spans for p in rng.sample(range(lo, hi), n)})
        for pos in positions:
            ref, info, kind = "A", f"DP={pos % 97}", rng.random()
            if kind < 0.12:
                ref = dna(rng, rng.randint(16_000, 40_000))
            elif kind < 0.25:
                ref = dna(rng, rng.randint(2, 60))
            elif kind < 0.32:
                info = f"SVTYPE=DEL;END={pos + rng.randint(0, 60_000)};SVLEN=-1"
            elif kind < 0.36:
                info = f"CIEND=-5,5;END={pos - rng.randint(1, 100)}"
            elif kind < 0.40:
                ref, info = dna(rng, 30), f"END={pos + 3}"
            elif kind < 0.42:
                info = f"SVEND=7;END={hex(pos + 20_000)}"
            out.append((chrom, pos, ref, info))
    return out


def write_vcf(path, records, eol="\n"):
    head = ["##fileformat=VCFv4.2", "##contig=<ID=chrA,length=800000000>", "##contig=<ID=chrB,length=5000000>",
            '##INFO=<ID=END,Number=1,Type=Integer,Description="End">',
            "#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\tFORMAT\ts1"]
    body = [f"{c}\t{p}\tv{i}\t{r}\tT\t50\tPASS\t{info}\tGT\t0|1" for i, (c, p, r, info) in enumerate(records)]
    path.write_bytes(eol.join(head + body).encode() + eol.encode())
    return path


def synthetic_regions(rng, records) -> list[str]:
    regions = ["chrA", "chrB", "chrC", "chrA:536870912-536870913", "chrA:536870913", "chrA:600000000-700000000",
               "chrB:1-16384", "chrB:16385-16385", "chrA:1-10000"]
    for _ in range(70):
        chrom, pos, ref, _ = rng.choice(records)
        if rng.random() < 0.3:  # at a 16 kb window boundary near a record
            w = (pos + rng.randint(0, 40_000)) // 16_384 * 16_384
            start, width = w + rng.choice([-1, 0, 1]), rng.choice([1, 2, 100])
        else:
            start, width = max(1, pos + rng.randint(-20_000, 45_000)), rng.choice([1, 10, 1_000, 20_000, 300_000])
        regions.append(f"{chrom}:{start}-{start + width - 1}")
    return regions


@needs_htslib
@pytest.mark.parametrize("eol", ["\n", "\r\n"], ids=["lf", "crlf"])
def test_two_contigs_long_spans_and_positions_past_2_29_match_tabix_on_csi(tmp_path, eol):
    rng = random.Random(29)
    records = synthetic_records(rng)
    plain = write_vcf(tmp_path / "two.vcf", records, eol)
    # a .tbi cannot index positions of 2**29 and beyond: htslib refuses, hence CSI here
    vcf = tmp_path / "two.vcf.gz"
    with open(vcf, "wb") as out:
        subprocess.run([BGZIP, "-c", str(plain)], stdout=out, check=True)
    assert subprocess.run([TABIX, "-f", "-p", "vcf", str(vcf)], capture_output=True).returncode != 0
    regions = synthetic_regions(rng, records)
    for args, min_shift in ((("--csi",), 14), (("--csi", "-m", "12"), 12)):
        for stale in vcf.parent.glob("two.vcf.gz.*"):
            stale.unlink()
        index = read_index(bgzip_and_index(plain, vcf, *args))
        assert (index.kind, index.min_shift, index.names) == ("csi", min_shift, ["chrA", "chrB"])
        assert mismatches(vcf, index, regions) == []
        assert list(fetch_lines(vcf, "chrB")) == [line for line in record_lines(plain) if line.startswith("chrB")]
        assert list(fetch_lines(vcf, Region("chrA", 536_870_911, 536_990_000), index)) == \
            tabix(vcf, "chrA:536870912-536990000")


@needs_htslib
def test_info_end_semantics_match_tabix(tmp_path):
    """tabix -p vcf spans a record by INFO/END when END >= POS, even below POS + len(REF) - 1; END < POS is
    ignored (REF length then), and END is read as C's strtol does (``0x600`` is 1536)."""
    records = [("chrA", 100, "A", "."), ("chrA", 200, "ACGTACGTAC", "."), ("chrA", 300, "A", "END=350"),
               ("chrA", 400, "ACGTACGTAC", "END=402"), ("chrA", 500, "A", "END=450"),
               ("chrA", 600, "A", "CIEND=-5,5;END=700"), ("chrA", 800, "A", "CIEND=-5,900"),
               ("chrA", 1000, "A", "END=1000"), ("chrA", 1100, "AC", "END=1099"), ("chrA", 1300, "A", "END=0x600")]
    vcf = tmp_path / "end.vcf.gz"
    index = bgzip_and_index(write_vcf(tmp_path / "end.vcf", records), vcf)
    probes = [f"chrA:{p}-{p}" for p in (100, 101, 209, 210, 350, 351, 402, 403, 450, 499, 500, 501, 650, 700, 701,
                                        801, 1000, 1001, 1100, 1101, 1102, 1536, 1537)]
    assert mismatches(vcf, index, probes) == []
    spans = [record_span(line)[1:] for line in record_lines(tmp_path / "end.vcf")]
    assert spans == [(99, 100), (199, 209), (299, 350), (399, 402), (499, 500), (599, 700), (799, 800),
                     (999, 1000), (1099, 1101), (1299, 1536)]


# ---------------------------------------------------------------------------------------------------- no htslib

def test_record_span_edges():
    assert record_span("c\t0\t.\tAC\tT") == ("c", 0, 2)         # POS 0: tabix clamps beg to 0
    assert record_span("c\t300\t.\t\tT") == ("c", 299, 300)     # empty REF: one base
    assert record_span("c\t200") == ("c", 199, 200)             # no REF column
    assert record_span("c\t10\t.\tA\tT\t.\t.\tXEND=50;END=20")[2] == 20
    assert record_span("c\t10\t.\tA\tT\t.\t.\tEND=.")[2] == 10
    with pytest.raises(ValueError, match="POS"):
        record_span("c\tabc\t.\tA")


def test_parse_region_forms_and_errors():
    assert parse_region("chr1") == Region("chr1", 0, None)
    assert parse_region("chr1:100") == Region("chr1", 99, None)
    assert parse_region("chr1:100-") == Region("chr1", 99, None)
    assert parse_region(" chr1:1,000-2,000 ") == Region("chr1", 999, 2000)
    assert parse_region("chr1:-50") == Region("chr1", 0, 50)
    assert parse_region("chr1:7-7") == Region("chr1", 6, 7)
    assert parse_region("chr1:") == Region("chr1", 0, None)
    assert parse_region("HLA-A*01:01", names=["HLA-A*01:01"]) == Region("HLA-A*01:01", 0, None)
    assert parse_region("{HLA-A*01:01}:5-6") == Region("HLA-A*01:01", 4, 6)
    assert str(parse_region("chr1:1,000-2,000")) == "chr1:1000-2000" and str(Region("x")) == "x"
    for text, problem in [("", "empty"), ("chr1:abc", "cannot read 'abc'"), ("chr1:0-5", "1-based"),
                          ("chr1:5-0", "1-based"), ("chr1:10-5", "after end"), ("chr1:1-2-3", "cannot read"),
                          (":5-6", "no sequence name"), ("{chr1:5", "closing"), ("{chr1}x", "expected ':'"),
                          ("chr1:1k", "cannot read")]:
        with pytest.raises(ValueError, match=problem):
            parse_region(text)


def spec_reg2bin(beg, end, min_shift=14, depth=5):
    """The smallest bin holding [beg, end) (SAM spec §5.3 / CSIv1 ``reg2bin``)."""
    end -= 1
    s, t = min_shift, ((1 << depth * 3) - 1) // 7
    for level in range(depth, 0, -1):
        if beg >> s == end >> s:
            return t + (beg >> s)
        s += 3
        t -= 1 << (level - 1) * 3
    return 0


def test_reg2bins_follows_the_spec():
    assert reg2bins(0, 1) == [0, 1, 9, 73, 585, 4681]
    assert reg2bins(0, 1 << 29)[-1] == 4681 + (1 << 15) - 1
    assert reg2bins(5, 5) == [] and reg2bins(1 << 29, (1 << 29) + 5) == []
    rng = random.Random(5)
    for min_shift, depth in ((14, 5), (14, 6), (10, 7)):
        for _ in range(200):
            beg = rng.randrange(1 << (min_shift + 3 * depth - 1))
            end = beg + rng.choice([1, 2, 1 << min_shift, rng.randrange(1, 1 << (min_shift + 4))])
            bins = reg2bins(beg, end, min_shift, depth)
            assert spec_reg2bin(beg, end, min_shift, depth) in bins
            assert len(bins) == len(set(bins)) and bins == sorted(bins)


# ---------------------------------------------------------------------------------------------------- bad indexes

@pytest.fixture
def small(tmp_path):
    """A small bgzipped VCF with its .tbi (tabix-made)."""
    if TABIX is None or BGZIP is None:
        pytest.skip("htslib's tabix and bgzip are not installed")
    records = [("chrA", p, "A", ".") for p in range(100, 5_000, 37)] + [("chrB", 10, "A", ".")]
    vcf = tmp_path / "s.vcf.gz"
    return vcf, bgzip_and_index(write_vcf(tmp_path / "s.vcf", records), vcf)


def index_bytes(path) -> bytes:
    with bgzf.BgzfReader(str(path), "rb") as f:
        return f.read(1 << 24)


def write_bgzf(path, data: bytes):
    with bgzf.BgzfWriter(str(path), "wb") as f:
        f.write(data)
    return path


def test_a_truncated_index_is_refused_naming_the_file(small, tmp_path):
    _, tbi = small
    data = index_bytes(tbi)
    for cut in (6, 40, len(data) // 2, len(data) - 9):
        bad = write_bgzf(tmp_path / f"cut{cut}.tbi", data[:cut])
        with pytest.raises(ValueError, match=rf"cut{cut}\.tbi.*truncated"):
            read_index(bad)
    raw = tmp_path / "raw-cut.tbi"
    raw.write_bytes(tbi.read_bytes()[:len(tbi.read_bytes()) // 2])
    with pytest.raises(ValueError, match=r"raw-cut\.tbi"):
        read_index(raw)


def test_a_wrong_magic_or_empty_index_is_refused_naming_the_file(small, tmp_path):
    _, tbi = small
    bad = write_bgzf(tmp_path / "magic.tbi", b"BAI\x01" + index_bytes(tbi)[4:])
    with pytest.raises(ValueError, match=r"magic\.tbi: not a tabix or CSI index.*BAI"):
        read_index(bad)
    (tmp_path / "empty.csi").write_bytes(b"")
    with pytest.raises(ValueError, match=r"empty\.csi"):
        read_index(tmp_path / "empty.csi")
    (tmp_path / "text.tbi").write_text("not an index at all\n")
    with pytest.raises(ValueError, match=r"text\.tbi"):
        read_index(tmp_path / "text.tbi")


def test_an_uncompressed_index_reads_like_the_bgzf_one(small, tmp_path):
    vcf, tbi = small
    (tmp_path / "plain.tbi").write_bytes(index_bytes(tbi))
    assert list(fetch_lines(vcf, "chrA:500-700", tmp_path / "plain.tbi")) == tabix(vcf, "chrA:500-700")


def test_missing_stale_and_foreign_indexes(small, tmp_path):
    vcf, tbi = small
    assert list(fetch_lines(vcf, "chrZ:1-100")) == [] == tabix(vcf, "chrZ:1-100")
    t = os.stat(tbi).st_mtime
    os.utime(vcf, (t + 10, t + 10))
    with pytest.warns(UserWarning, match=r"older than the data file: .*s\.vcf\.gz\.tbi"):
        assert list(fetch_lines(vcf, "chrB")) == tabix(vcf, "chrB")
    os.utime(vcf, (t, t))
    tbi.unlink()
    with pytest.raises(FileNotFoundError, match="tabix -p vcf"):
        fetch_lines(vcf, "chrA")
    bed = tmp_path / "r.bed.gz"
    write_bgzf(bed, b"chrA\t10\t20\n")
    subprocess.run([TABIX, "-p", "bed", str(bed)], check=True)
    with pytest.raises(ValueError, match="not VCF"):
        fetch_lines(vcf, "chrA", f"{bed}.tbi")
