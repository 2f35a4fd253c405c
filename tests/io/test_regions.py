"""Peaks, promoters and regions: FASTA in, packed store, BED regions, the peaks × motifs table.

Every hit set is checked against the float64 naive scorer on each record's (or region's) own sequence, so
the packing (records laid end to end, one code 4 between them, blocks shared) and the region cuts change
nothing a user sees.
"""
from __future__ import annotations

import gzip
import json
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.io.genome import ingest
from pipeline.motifs import pwm_from_motif, read_motifs, reverse_complement
from pipeline.io.regions import RegionError, read_bed
from pipeline.scan.graph import run_scan
from pipeline.scan.motif_set import ScanError
from pipeline.scan.read import read_hits
from tests.conftest import DATA
from tests.reference import naive_scan




@pytest.fixture(scope="module")
def client():
    from pipeline.engine.cluster import get_client

    with get_client(n_workers=2, device="cpu", quiet=True) as (c, _):
        yield c


@pytest.fixture(scope="module")
def motif_file(tmp_path_factory):
    """Six JASPAR 2024 matrices of lengths 6..20 (the scan's tiles differ by length)."""
    from pipeline.motifs import format_jaspar

    src = read_motifs("JASPAR2024:CORE:vertebrates")
    by_len = {}
    for m in src:
        by_len.setdefault(m.length, m)
    pick = [by_len[k] for k in sorted(by_len) if k in (6, 8, 10, 12, 15, 20)]
    p = tmp_path_factory.mktemp("motifs") / "six.jaspar"
    p.write_text(format_jaspar(pick))
    return str(p)


def reference(records: dict, motif_file: str, thresholds: dict, regions=None) -> set:
    """(chrom, start, strand, motif_id, score) of every window the naive scorer passes, per record (or only the
    windows lying wholly inside ``regions``: (chrom, start, end) list)."""
    motifs = read_motifs(motif_file)
    bg = np.full(4, 0.25)
    pwms, rows = [], []
    for m in motifs:
        w = pwm_from_motif(m, bg, 0.1)
        pwms += [w, reverse_complement(w)]
        rows += [(m.id, "+"), (m.id, "-")]
    thr = [thresholds[r] for r in rows]
    out = set()
    spans = regions if regions is not None else [(n, 0, len(s)) for n, s in records.items()]
    for chrom, lo, hi in spans:
        for pos, r, score in naive_scan(records[chrom][lo:hi], pwms, thr):
            out.add((chrom, lo + pos, rows[r][1], rows[r][0], round(score, 9)))
    return out


def got(out: str) -> set:
    t = read_hits(out)
    return set(zip(t["chrom"].to_pylist(), t["start"].to_pylist(), t["strand"].to_pylist(), t["motif_id"].to_pylist(),
                   (round(x, 9) for x in t["score"].to_pylist())))


def thresholds_of(out: str) -> dict:
    t = pq.read_table(os.path.join(out, "_thresholds.parquet")).to_pylist()
    return {(r["motif_id"], r["strand"]): (r["threshold"] if r["reachable"] else np.inf) for r in t}


def write_fasta(path, records: dict, gz=False):
    text = "".join(f">{n} a description\n" + "".join(s[i:i + 60] + "\n" for i in range(0, len(s), 60))
                   for n, s in records.items())
    if gz:
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)
    return str(path)


def peak_records(chrx: str, n: int, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(n):
        L = int(rng.integers(0, 400))
        s = int(rng.integers(0, len(chrx) - L))
        out[f"peak{i}"] = chrx[s:s + L]
    out["exactly_a_block"] = chrx[5000:5000 + 4096]
    out["shorter_than_motifs"] = "ACGTA"
    out["empty"] = ""
    out["n_runs_at_ends"] = "NNNN" + chrx[900:1200] + "NNRYNN"
    return out


def test_fasta_scan_equals_naive_and_ingest_plus_scan(tmp_path, chrx_2mb, motif_file, client, monkeypatch):
    monkeypatch.setenv("DASK_MOTIFGRID__SCAN__MIN_TASK_POSITIONS", "1")
    recs = peak_records(chrx_2mb, 600)
    fa = write_fasta(tmp_path / "peaks.fa.gz", recs, gz=True)
    run_scan(fa, motif_file, str(tmp_path / "direct"), pvalue=1e-3, client=client, progress=False)
    store = ingest(fa, tmp_path / "g.zarr", block_size=4096, halo=40)
    run_scan(store.path, motif_file, str(tmp_path / "via_store"), pvalue=1e-3, client=client, progress=False)
    a, b = got(str(tmp_path / "direct")), got(str(tmp_path / "via_store"))
    assert a == b and len(a) > 500
    assert a == reference(recs, motif_file, thresholds_of(str(tmp_path / "direct")))
    kept = tmp_path / "direct" / "_genome.zarr"
    assert (kept / "zarr.json").exists()                         # the FASTA's store stays with the hits
    blocks = store.n_blocks
    assert len(list((tmp_path / "via_store" / "packed").iterdir())) <= blocks      # files grow with blocks


def test_genome_keeps_per_chromosome_folders(tmp_path, chrx_2mb, motif_file, client):
    recs = {"chrA": chrx_2mb[:300_000], "chrB": chrx_2mb[400_000:520_000], "scaffold1": chrx_2mb[600_000:600_900],
            "scaffold2": chrx_2mb[700_000:700_500]}
    store = ingest(write_fasta(tmp_path / "g.fa", recs), tmp_path / "g.zarr", block_size=65_536, halo=40)
    out = str(tmp_path / "hits")
    run_scan(store.path, motif_file, out, pvalue=1e-4, client=client, progress=False)
    assert sorted(os.listdir(tmp_path / "hits" / "chrom")) == ["chrA", "chrB"]
    assert len(os.listdir(tmp_path / "hits" / "packed")) == 1           # the two scaffolds share a block
    assert got(out) == reference(recs, motif_file, thresholds_of(out))


def test_regions_equal_naive_on_the_region_sequences(tmp_path, chrx_2mb, motif_file, client):
    recs = {"chrA": chrx_2mb[:200_000].replace("ACGTA", "ACNTA"), "chrB": chrx_2mb[300_000:340_000]}
    store = ingest(write_fasta(tmp_path / "g.fa", recs), tmp_path / "g.zarr", block_size=8192, halo=40)
    bed = tmp_path / "r.bed"
    bed.write_text("track name=test\n# a comment\n"
                   "chrA\t100\t900\tp1\t0\t+\n"
                   "chrA\t100\t900\tp1again\n"        # the same interval twice
                   "chrA\t300\t700\tinner\n"          # nested in p1
                   "chrA\t800\t1500\tp2\n"            # overlaps p1
                   "chrA\t1500\t1600\tp3\n"           # adjacent to p2
                   "chrA\t8000\t8500\n"               # across a block border (8192), no name
                   "chrA\t20000\t20010\tshort\n"      # shorter than most motifs
                   "chrB\t0\t40000\twhole\n")
    out = str(tmp_path / "hits")
    run_scan(store.path, motif_file, out, pvalue=1e-3, client=client, progress=False, regions=str(bed))
    merged = [("chrA", 100, 1600), ("chrA", 8000, 8500), ("chrA", 20000, 20010), ("chrB", 0, 40000)]
    want = reference(recs, motif_file, thresholds_of(out), regions=merged)
    assert got(out) == want and len(want) > 100
    t = read_hits(out)
    names = dict(((c, s, st, m), r) for c, s, st, m, r in zip(t["chrom"].to_pylist(), t["start"].to_pylist(),
                                                               t["strand"].to_pylist(), t["motif_id"].to_pylist(),
                                                               t["region"].to_pylist()))
    bedrows = [("p1", 100, 900), ("p1again", 100, 900), ("inner", 300, 700), ("p2", 800, 1500), ("p3", 1500, 1600),
               ("chrA:8000-8500", 8000, 8500)]
    for (c, s, st, m), r in names.items():
        if c == "chrA" and s < 9000:
            e = t.filter(t["start"].to_numpy() == s)["end"].to_pylist()[0]
            region = dict((n, (lo, hi)) for n, lo, hi in bedrows)[r]
            contains = [n for n, lo, hi in bedrows if lo <= s and e <= hi]
            assert (r in contains) if contains else region[0] <= s < region[1]
    rc = pq.read_table(os.path.join(out, "_region_counts.parquet"))
    # the peaks x motifs table: every region counts each hit lying wholly inside it (overlapping, nested and
    # repeated regions alike); a hit inside none of them (across p2 and p3) counts for the region it is named by
    every = bedrows + [("short", 20000, 20010), ("whole", 0, 40000)]
    direct = {}
    for c, s, e, m, r, sc, p in zip(*(t[k].to_pylist() for k in ("chrom", "start", "end", "motif_id", "region",
                                                                   "score", "pvalue"))):
        inside = [n for n, lo, hi in every if (c == "chrB") == (n == "whole") and lo <= s and e <= hi] or [r]
        for n in inside:
            h, bs, bp = direct.get((n, m), (0, -np.inf, 1.0))
            direct[(n, m)] = (h + 1, max(bs, sc), min(bp, p))
    assert {(x["region"], x["motif_id"]): (x["hits"], x["best_score"], x["best_pvalue"]) for x in rc.to_pylist()} \
        == direct
    assert {n for n, _ in direct} >= {"p1", "p1again", "inner", "p2"}
    whole = rc.filter(rc["region"].to_numpy(zero_copy_only=False) == "whole")
    assert sum(whole["hits"].to_pylist()) == sum(1 for x in want if x[0] == "chrB")
    summary = json.load(open(os.path.join(out, "_summary.json")))
    assert summary["positions"] == 1500 + 500 + 10 + 40000


def test_region_counts_table(tmp_path, chrx_2mb, motif_file, client):
    recs = peak_records(chrx_2mb, 200, seed=4)
    out = str(tmp_path / "hits")
    run_scan(write_fasta(tmp_path / "p.fa", recs), motif_file, out, pvalue=1e-3, client=client, progress=False)
    t = read_hits(out)
    direct = {}
    for c, m, s, p in zip(t["chrom"].to_pylist(), t["motif_id"].to_pylist(), t["score"].to_pylist(),
                          t["pvalue"].to_pylist()):
        h, bs, bp = direct.get((c, m), (0, -np.inf, 1.0))
        direct[(c, m)] = (h + 1, max(bs, s), min(bp, p))
    rc = pq.read_table(os.path.join(out, "_region_counts.parquet")).to_pylist()
    assert {(r["region"], r["motif_id"]): (r["hits"], r["best_score"], r["best_pvalue"]) for r in rc} == direct
    assert all(r["chrom"] == r["region"] and r["start"] == 0 and r["end"] == len(recs[r["chrom"]]) for r in rc)


def test_resume_on_packed_store_is_identical(tmp_path, chrx_2mb, motif_file, client, monkeypatch):
    monkeypatch.setenv("DASK_MOTIFGRID__SCAN__MIN_TASK_POSITIONS", "1")
    recs = peak_records(chrx_2mb, 300, seed=7)
    store = ingest(write_fasta(tmp_path / "p.fa", recs), tmp_path / "g.zarr", block_size=4096, halo=40)
    full = str(tmp_path / "full")
    run_scan(store.path, motif_file, full, pvalue=1e-3, client=client, progress=False)
    part = str(tmp_path / "part")
    run_scan(store.path, motif_file, part, pvalue=1e-3, client=client, progress=False)
    entries = sorted(os.listdir(os.path.join(part, "_manifest")))
    for e in entries[::2]:                            # half the blocks "never finished"
        d = json.load(open(os.path.join(part, "_manifest", e)))
        os.unlink(os.path.join(part, "_manifest", e))
        if d.get("file"):
            os.unlink(os.path.join(part, d["file"]))
    os.unlink(os.path.join(part, "_summary.json"))
    run_scan(store.path, motif_file, part, pvalue=1e-3, client=client, progress=False, resume=True)
    assert got(part) == got(full)
    a = pq.read_table(os.path.join(part, "_region_counts.parquet"))
    b = pq.read_table(os.path.join(full, "_region_counts.parquet"))
    assert a.to_pylist() == b.to_pylist()


def test_fasta_scan_resume_reuses_its_store_and_refuses_a_changed_fasta(tmp_path, chrx_2mb, motif_file, client):
    recs = peak_records(chrx_2mb, 50, seed=9)
    fa = write_fasta(tmp_path / "p.fa", recs)
    out = str(tmp_path / "hits")
    run_scan(fa, motif_file, out, pvalue=1e-3, client=client, progress=False)
    os.unlink(os.path.join(out, "_summary.json"))
    run_scan(fa, motif_file, out, pvalue=1e-3, client=client, progress=False, resume=True)
    recs["peak0"] = "ACGT" * 20
    write_fasta(tmp_path / "p.fa", recs)
    os.unlink(os.path.join(out, "_summary.json"))
    with pytest.raises(ScanError, match="changed since the scan"):
        run_scan(fa, motif_file, out, pvalue=1e-3, client=client, progress=False, resume=True)


@pytest.mark.parametrize("line,msg", [
    ("chrZ\t0\t10\n", "line 1: unknown contig 'chrZ'"),
    ("chrA\t0\n", "line 1: a BED line needs chrom, start and end"),
    ("chrA\tx\t10\n", "line 1: start and end must be integers"),
    ("chrA\t50\t10\n", "line 1: bad interval 50-10"),
    ("chrA\t0\t999999\n", "line 1: region chrA:0-999999 runs past the end of 'chrA'"),
    ("# only a comment\n", "no regions"),
])
def test_bad_bed(tmp_path, chrx_2mb, line, msg):
    store = ingest(write_fasta(tmp_path / "g.fa", {"chrA": chrx_2mb[:5000]}), tmp_path / "g.zarr", block_size=4096,
                   halo=20)
    bed = tmp_path / "bad.bed"
    bed.write_text(line)
    with pytest.raises(RegionError, match=msg) as e:
        read_bed(bed, store.records)
    assert "bad.bed" in str(e.value)


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("reduce", ["count", "sort"])
def test_region_counts_merge_equals_a_direct_reduction(tmp_path, monkeypatch, interleaved, reduce):
    """Blocks' counts (numba's counting sort, or NumPy's sort where keys span too wide a range) merged (a key
    spanning two blocks, and keys of two blocks interleaving as overlapping regions make them) and regrouped into
    row groups equal one reduction of all the hits."""
    from pipeline.scan import region_counts
    from pipeline.io.genome import Records
    from pipeline.scan.region_counts import block_counts, write_block_counts, write_region_counts

    if reduce == "sort":
        monkeypatch.setattr(region_counts, "_COUNT_SORT_SPAN", -1)
    monkeypatch.setattr(region_counts, "_ROW_GROUP", 40)

    rng = np.random.default_rng(3)
    n_motifs, hits = 5, []
    for b in range(4):
        lo = 10 * b - (5 if interleaved and b else 0)             # keys of a block overlap the previous block's
        row = np.sort(rng.integers(0, 2 * n_motifs, 300))          # hits in (row, position) order:
        key = np.concatenate([np.sort(rng.integers(lo, lo + 12, int((row == r).sum()))) for r in range(2 * n_motifs)])
        motif = np.array([3, 0, 4, 2, 1])[row // 2]                # keys ascend within a row; rows not in
                                                                   # motif order (plans order rows by length)
        score, p = rng.normal(10, 2, 300), rng.uniform(1e-6, 1e-4, 300)
        write_block_counts(str(tmp_path), f"b{b:07d}", block_counts(key, motif, row, score, p, n_motifs))
        hits += list(zip(key.tolist(), motif.tolist(), score.tolist(), p.tolist()))
    recs = Records([f"r{i}" for i in range(50)], np.arange(50) * 100, np.full(50, 90))
    write_region_counts(str(tmp_path), recs, None, [f"M{i}" for i in range(n_motifs)], [f"N{i}" for i in range(n_motifs)])
    want = {}
    for k, m, s, p in hits:
        h, bs, bp = want.get((f"r{k}", f"M{m}"), (0, -np.inf, 1.0))
        want[(f"r{k}", f"M{m}")] = (h + 1, max(bs, s), min(bp, p))
    got = pq.read_table(tmp_path / "_region_counts.parquet").to_pylist()
    assert {(r["region"], r["motif_id"]): (r["hits"], r["best_score"], r["best_pvalue"]) for r in got} == want
    assert len(got) == len(want) and all(r["end"] == 90 and r["chrom"] == r["region"] for r in got)
    assert pq.ParquetFile(tmp_path / "_region_counts.parquet").metadata.num_row_groups > 1


def test_streamed_region_counts_equal_the_end_of_run_merge(tmp_path, monkeypatch):
    """The region counts merged while blocks finish (out of order; one finished in an earlier run; one without
    hits, so without a counts file; a record across each block border) are the file the end-of-run merge writes, byte for
    byte; a cancelled stream leaves no file and no temporary."""
    from pipeline.scan import region_counts
    from pipeline.io.genome import Records
    from pipeline.scan.region_counts import StreamingRegionCounts, block_counts, write_block_counts, write_region_counts

    monkeypatch.setattr(region_counts, "_ROW_GROUP", 40)
    rng = np.random.default_rng(5)
    n_motifs, ids = 5, [f"b{b:07d}" for b in range(6)]
    for b in range(6):
        if b == 2:
            continue                                                 # no hits: no counts file
        row = np.sort(rng.integers(0, 2 * n_motifs, 300))
        key = np.concatenate([np.sort(rng.integers(10 * b, 10 * b + 11, int((row == r).sum())))
                              for r in range(2 * n_motifs)])
        motif = np.array([3, 0, 4, 2, 1])[row // 2]
        write_block_counts(str(tmp_path), ids[b], block_counts(key, motif, row, rng.normal(10, 2, 300),
                                                               rng.uniform(1e-6, 1e-4, 300), n_motifs))
    recs = Records([f"r{i}" for i in range(80)], np.arange(80) * 100, np.full(80, 90))
    names = ([f"M{i}" for i in range(n_motifs)], [f"N{i}" for i in range(n_motifs)])
    write_region_counts(str(tmp_path), recs, None, *names)
    want = (tmp_path / "_region_counts.parquet").read_bytes()
    (tmp_path / "_region_counts.parquet").unlink()

    stream = StreamingRegionCounts(str(tmp_path), ids[::-1], [ids[1]], recs, *names)
    for b in (3, 0, 5, 2, 4):
        stream.finished([ids[b]])
    stream.close()
    assert (tmp_path / "_region_counts.parquet").read_bytes() == want

    (tmp_path / "_region_counts.parquet").unlink()
    stream = StreamingRegionCounts(str(tmp_path), ids, [], recs, *names)
    stream.finished(ids[:3])
    stream.cancel()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["_counts"]


@pytest.mark.parametrize("cells", [None, 1])
def test_block_presence_is_the_distinct_pairs(monkeypatch, cells):
    """A block's distinct (key, motif) pairs, sorted, by the table of marks and by the sort it falls back to."""
    from pipeline.scan import region_counts

    if cells is not None:
        monkeypatch.setattr(region_counts, "_PRESENCE_CELLS", cells)
    rng = np.random.default_rng(4)
    key, motif = rng.integers(40, 90, 5000), rng.integers(0, 7, 5000)
    t = region_counts.block_presence(key, motif, 7)
    want = sorted(set(zip(key.tolist(), motif.tolist())))
    assert list(zip(t.column("key").to_pylist(), t.column("motif").to_pylist())) == want
    assert t.column("key").type == pa.int64() and region_counts.block_presence(key[:0], motif[:0], 7).num_rows == 0
    # with groups: the keys of this block alone counted per (group, motif), the split keys' pairs listed
    groups, split = rng.integers(0, 3, 100), rng.random(100) < 0.2
    g = region_counts.block_presence(key, motif, 7, groups, split)
    counted = {}
    for k, m in want:
        if not split[k]:
            counted[(-1 - groups[k], m)] = counted.get((-1 - groups[k], m), 0) + 1
    rows = list(zip(g.column("key").to_pylist(), g.column("motif").to_pylist(), g.column("records").to_pylist()))
    assert rows == sorted((k, m, c) for (k, m), c in counted.items()) + [(k, m, 1) for k, m in want if split[k]]
    assert region_counts.block_presence(key[:0], motif[:0], 7, groups, split).num_rows == 0
