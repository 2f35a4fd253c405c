"""Q-values (Benjamini-Hochberg per motif over every window tested), their map, filters, FIMO's export order.

References: FIMO 5.4.1's own q-value column (tests/data/fimo_reference), scipy's BH over every test of a scan
(the hits' p-values plus one p-value of 1 for every window that is not a hit), windows counted by brute force.
"""
from __future__ import annotations

import gzip
import json
import math
import shutil
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.io.genome import ingest
from pipeline.scan.qvalues import QvalueMap, bh_qvalues, steps
from pipeline.scan.graph import run_scan
from pipeline.scan.motif_set import ScanError
from pipeline.scan.read import read_hits
from tests.conftest import DATA, ROOT, subprocess_env

MOTIFS = str(DATA / "jaspar2024_subset.jaspar")
FIMO = DATA / "fimo_reference"


def _fasta(path) -> dict:
    seqs, name = {}, None
    for line in open(path):
        line = line.strip()
        if line.startswith(">"):
            name = line[1:].split()[0]
            seqs[name] = []
        elif name is not None:
            seqs[name].append(line.upper())
    return {k: "".join(v) for k, v in seqs.items()}


def _windows(seqs: dict, m: int) -> int:
    """Window starts of length m with A/C/G/T only: brute force."""
    return sum(all(c in "ACGT" for c in s[i:i + m]) for s in seqs.values() for i in range(len(s) - m + 1))


def _fimo_rows(name: str):
    lines = (FIMO / name).read_text().splitlines()
    head = lines[0].split("\t")
    return [dict(zip(head, x.split("\t"))) for x in lines[1:] if x and not x.startswith("#")]


def _half_unit(x: float) -> float:
    """Half a unit in the last of 3 significant digits (FIMO prints %.3g)."""
    return 0.5 * 10 ** (math.floor(math.log10(x)) - 2)


@pytest.mark.parametrize("name, strands", [("results.tsv", 2), ("results-norc.tsv", 1)])
def test_bh_reproduces_fimo_qvalues(name, strands):
    """FIMO's q-values from its own p-values and our window count: FIMO 5.4.1 computes the same BH but
    multiplies by a π0 (Storey's estimate from a random sample of 10,000 window p-values, <= 1; the q-values
    here use π0 = 1).  So every printed q < 1 must be π0 × ours for one common π0 close to 1, within the
    rounding of FIMO's 3 printed digits of p and q, and the q = 1 rows must be 1 here too.  A wrong test count
    (one strand instead of two, N-holding windows counted) or a wrong rank moves the π0 intervals apart."""
    rows = _fimo_rows(name)
    seqs = _fasta(FIMO / "mibig-genes.fna")
    tests = strands * _windows(seqs, 15)
    assert tests == strands * 56_086              # 40 records, 56,646 bp, 15-column motif
    p = np.array([float(r["p-value"]) for r in rows])
    qf = np.array([float(r["q-value"]) for r in rows])
    uniq, counts = np.unique(p, return_counts=True)
    ours = bh_qvalues(uniq, counts, tests)[np.searchsorted(uniq, p)]
    lo, hi = 0.0, 1.0
    for pi, q, o in zip(p, qf, ours):
        if q == 1.0:
            assert o == 1.0
            continue
        rel_p = _half_unit(pi) / pi                  # p rounded to 3 digits: ours is off by as much
        lo = max(lo, (q - _half_unit(q)) / (o * (1 + rel_p)))
        hi = min(hi, (q + _half_unit(q)) / (o * (1 - rel_p)))
    assert 0.99 <= lo <= hi <= 1.0, (lo, hi)


@pytest.mark.parametrize("strand", ["both", "+"])
def test_like_fimo_export_is_fimos_file(tmp_path, strand):
    """``scan --like fimo`` then ``export --format fimo`` on FIMO's reference: FIMO's lines in FIMO's order, every
    column but the q-value equal as printed, and FIMO's q-values = ours × one π0 in [0.99, 1] (FIMO's Storey
    estimate; the printed digits allowing); the tests counted on the strands scanned (--norc: one)."""
    from pipeline.cli.command import main

    shutil.copy(FIMO / "mibig-genes.fna", tmp_path)           # pyfaidx writes its .fai beside the FASTA
    store = ingest(tmp_path / "mibig-genes.fna", tmp_path / "g.zarr", halo=20)
    out = tmp_path / "hits"
    assert main(["scan", store.path, str(FIMO / "prodoric_mx000001_meme.txt"), "--out", str(out), "--no-progress",
                 "--device", "cpu", "--like", "fimo", "--strand", strand]) == 0
    assert pq.read_table(out / "_motif_summary.parquet").column("tests").to_pylist() == [
        (2 if strand == "both" else 1) * 56_086]
    assert main(["export", str(out), "--format", "fimo", "-o", str(tmp_path / "h.tsv")]) == 0
    got = [x.split("\t") for x in (tmp_path / "h.tsv").read_text().splitlines()[1:]]
    want = _fimo_rows("results.tsv" if strand == "both" else "results-norc.tsv")
    assert [g[:8] + g[9:] for g in got] == [[v for k, v in w.items() if k != "q-value"] for w in want]
    lo, hi = 0.0, 1.0
    for g, w in zip(got, want):
        q, o = float(w["q-value"]), float(g[8])                # both printed to 3 digits (%.3g)
        if q == 1.0:
            assert o == 1.0
            continue
        rel = _half_unit(o) / o
        lo = max(lo, (q - _half_unit(q)) / (o * (1 + rel)))
        hi = min(hi, (q + _half_unit(q)) / (o * (1 - rel)))
    assert 0.99 <= lo <= hi <= 1.0, (lo, hi)


def test_bh_against_scipy_and_steps():
    """bh_qvalues over distinct p-values with counts = scipy's BH over all tests (non-hits: p = 1)."""
    from scipy.stats import false_discovery_control

    rng = np.random.default_rng(7)
    p = np.sort(rng.choice(np.r_[rng.uniform(1e-9, 1e-4, 300), 10 ** rng.uniform(-12, -6, 50)], 400))
    tests = 200_000
    want = false_discovery_control(np.r_[p, np.ones(tests - p.size)], method="bh")[:p.size]
    uniq, counts = np.unique(p, return_counts=True)
    got = bh_qvalues(uniq, counts, tests)[np.searchsorted(uniq, p)]
    np.testing.assert_allclose(got, want, rtol=1e-12)
    sp, sq, sh = steps(uniq, counts, tests)
    assert sp.size < uniq.size and np.all(np.diff(sq) > 0) and sh[-1] == p.size
    # the steps reproduce every hit's q: the first step at or after its p-value
    np.testing.assert_array_equal(sq[np.searchsorted(sp, p)], got)
    with pytest.raises(ValueError, match="tests"):
        bh_qvalues(uniq, counts, p.size - 1)


def test_steps_of_all_families_in_one_call_equal_steps():
    """The reduce task's compiled steps over many families at once are bit-for-bit the NumPy ``steps`` of each
    (families with one p-value, ties of q across p-values, a family hitting q = 1), and refuse more hits than tests."""
    from pipeline.scan.qvalues import _PIECE, _steps_of

    rng = np.random.default_rng(11)
    tests = np.array([10**6, 50, 10**9, 7, 10**4], np.int64)
    rows, want = [], {k: [] for k in ("family", "pvalue", "qvalue", "hits")}
    for f, t in enumerate(tests.tolist()):
        if f == 3:
            continue                                             # a family without hits
        n = 1 if f == 1 else 300
        p = np.unique(10 ** rng.uniform(-9, -0.5 if f == 4 else -4, n))
        c = rng.integers(1, 2 if f == 1 else 4, p.size)
        sp, sq, sh = steps(p, c, t)
        for k, v in zip(("family", "pvalue", "qvalue", "hits"), (np.full(sp.size, f), sp, sq, sh)):
            want[k].append(v)
        d = np.empty(p.size, _PIECE)
        d["family"], d["pvalue"], d["count"] = f, p, c
        rows.append(d)
    got = _steps_of(np.concatenate(rows), tests)
    for k, v in want.items():
        np.testing.assert_array_equal(got[k], np.concatenate(v), err_msg=k)
    assert (got["qvalue"][got["family"] == 4] == 1.0).any()
    bad = np.concatenate(rows)
    bad["count"][bad["family"] == 1] = 51
    with pytest.raises(ValueError, match="51 hits but only 50 tests"):
        _steps_of(bad, tests)


# ------------------------------------------------------------------------------------ scans
@pytest.fixture(scope="module")
def genome(tmp_path_factory, chrx_slice):
    """Two real contigs with N runs and IUPAC codes, small blocks (many block borders and files)."""
    d = tmp_path_factory.mktemp("qgenome")
    a = list(chrx_slice[:90_000])
    a[30_000:30_500] = "N" * 500
    a[59_990:60_010] = "N" * 20
    for i in range(5, 90_000, 7919):
        a[i] = "R"
    seqs = {"chrX_a": "".join(a), "contig_b": chrx_slice[150_000:171_234]}
    fa = d / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        for k, s in seqs.items():
            f.write(f">{k}\n" + "\n".join(s[i:i + 70] for i in range(0, len(s), 70)) + "\n")
    return ingest(fa, d / "g.zarr", block_size=8_192, halo=40), seqs


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as cl, Client(cl) as c:
        yield c


@pytest.fixture(scope="module")
def finished(genome, client, tmp_path_factory):
    store, _ = genome
    out = tmp_path_factory.mktemp("qrun") / "hits"
    res = run_scan(store.path, MOTIFS, str(out), pvalue=1e-3, client=client, progress=False)
    return out, res


@pytest.mark.parametrize("sorted_families", [True, False])
def test_distinct_pieces_against_counting(sorted_families):
    """distinct_pairs' (family, p-value, count) of raw hits, of merged pieces (sorted again, or merged by
    merge_distinct) = counting every pair in a dict."""
    from collections import Counter

    from pipeline.scan.qvalues import _as_piece
    from workers.scan.distinct import distinct_pairs

    def _distinct(*a):
        return _as_piece(*distinct_pairs(*a))

    rng = np.random.default_rng(3)
    fam = np.repeat(rng.permutation(40) if not sorted_families else np.arange(40), rng.integers(0, 300, 40))
    p = rng.choice(10 ** rng.uniform(-9, -4, 500), fam.size)          # many ties, as a motif's discrete scores
    want = Counter(zip(fam.tolist(), p.tolist()))
    got = _distinct(fam.astype(np.int64), p)
    assert [(int(f), float(q)) for f, q in got[["family", "pvalue"]].tolist()] == sorted(want)
    assert got["count"].tolist() == [want[k] for k in sorted(want)]
    halves = [_distinct(fam[s].astype(np.int64), p[s]) for s in (slice(0, fam.size // 2), slice(fam.size // 2, None))]
    cat = np.concatenate(halves)
    merged = _distinct(cat["family"].astype(np.int64), cat["pvalue"], cat["count"])
    assert np.array_equal(merged, got)
    from workers.scan.distinct import merge_distinct           # the reduce tasks' merge of sorted pieces

    for k in (1, 2, 3, 7):                                       # random cuts of the hits (some pieces empty)
        cuts = np.sort(rng.integers(0, fam.size + 1, k - 1))
        order = rng.permutation(fam.size)
        pieces = [_distinct(fam[o].astype(np.int64), p[o]) for o in np.split(order, cuts)]
        m = merge_distinct([(x["family"], x["pvalue"], x["count"]) for x in pieces])
        assert all(np.array_equal(a, got[c]) for a, c in zip(m, ("family", "pvalue", "count"))), k


def test_scan_qvalues_equal_direct_bh(genome, finished):
    """Every hit's q-value (read_hits) = scipy's BH over the motif's tests: its hits' p-values and p = 1 for each
    other window without N on either strand (windows counted here by brute force)."""
    from scipy.stats import false_discovery_control

    from pipeline.motifs import read_motifs

    _, seqs = genome
    out, res = finished
    t = read_hits(str(out), columns=["motif_id", "pvalue", "qvalue"])
    ms = pq.read_table(out / "_motif_summary.parquet").to_pylist()
    lengths = {m.id: m.length for m in read_motifs(MOTIFS)}
    ids = np.array(t.column("motif_id").to_pylist())
    p = t.column("pvalue").to_numpy()
    q = t.column("qvalue").to_numpy()
    checked = 0
    for row in ms:
        tests = 2 * _windows(seqs, lengths[row["motif_id"]])
        assert row["windows"] * 2 == row["tests"] == tests
        sel = ids == row["motif_id"]
        assert sel.sum() == row["hits"]
        if not sel.any():
            continue
        want = false_discovery_control(np.r_[p[sel], np.ones(tests - sel.sum())], method="bh")[:sel.sum()]
        np.testing.assert_allclose(q[sel], want, rtol=1e-12, atol=0)
        checked += 1
    assert checked >= 5 and np.all(np.isfinite(q)) and (q < 1).any()
    summary = json.loads((out / "_summary.json").read_text())
    assert summary["tests"] == sum(r["tests"] for r in ms)
    assert res.qvalues["hits_at_level"] == int((q <= 0.05).sum()) == summary["qvalues"]["hits_at_level"]
    qm = pq.read_table(out / "_qvalues.parquet")
    assert qm.num_rows < t.num_rows and qm.schema.names == ["motif_id", "pvalue", "qvalue", "hits"]


@pytest.mark.parametrize("pieces", ["files", "memory"])
def test_many_reduction_tasks_same_map(genome, finished, client, tmp_path, monkeypatch, pieces):
    """Reduction tasks of a few hits each (collect tasks over block files, reduce tasks over motif groups; the
    pieces as part files on disk between the two worker processes, or in the memory of the one worker that runs
    every task of the reduction) write the same map as the single task, and leave no parts behind."""
    import dask.config
    from distributed import get_task_stream

    import pipeline.scan.qvalues

    store, _ = genome
    out, res = finished
    assert pipeline.scan.qvalues._pieces_worker(client, 1000) in client.nthreads()
    if pieces == "files":
        monkeypatch.setattr(pipeline.scan.qvalues, "_pieces_worker", lambda client, hits: None)
    with dask.config.set({"motifgrid.qvalues.task-hits": 150, "motifgrid.qvalues.keep-pairs": False}), \
            get_task_stream(client) as ts:
        small = run_scan(store.path, MOTIFS, str(tmp_path / "h"), pvalue=1e-3, client=client, progress=False)
    assert small.qvalues["tasks"] > 4 and not small.qvalues["kept_pairs"]
    assert pq.read_table(tmp_path / "h" / "_qvalues.parquet").equals(pq.read_table(out / "_qvalues.parquet"))
    assert not (tmp_path / "h" / "_qvalues.parts").exists()
    where = {t["worker"] for t in ts.data if t["key"].startswith("qvalues-")}
    assert len(where) == 1 or pieces == "files"


@pytest.mark.parametrize("fraction, counted", [(0.1, False), (0.1, True), (1e-12, True)])
def test_pairs_kept_by_the_scan_tasks_give_the_same_map(genome, finished, client, tmp_path, fraction, counted):
    """The hits' (family, p-value) pairs kept in the two worker processes that scanned them (one collect task on
    each, nothing read back; ``keep-pairs: true``, as GPU workers do by default), a pair a hit or each block's
    distinct (row, score) counted (``count-pairs: true``, as GPU workers do by default), give the map of the files
    read back, the pieces of several groups of motifs merged; past the memory budget the workers drop them and the
    files are read; no worker holds any pairs after the run."""
    import dask.config
    from distributed import get_task_stream

    from workers.scan import kept_pairs

    store, _ = genome
    out, res = finished
    with dask.config.set({"motifgrid.qvalues.keep-pairs": False}):
        read = run_scan(store.path, MOTIFS, str(tmp_path / "read"), pvalue=1e-3, client=client, progress=False)
    with dask.config.set({"motifgrid.qvalues.keep-pairs": True, "motifgrid.qvalues.keep-pairs-memory-fraction": fraction,
                          "motifgrid.qvalues.count-pairs": counted,
                          "motifgrid.qvalues.task-hits": 500,          # several groups of motifs, and a task a
                          "motifgrid.scan.min-task-positions": 1}):      # block: pairs kept in both workers
        with get_task_stream(client) as ts:
            kept = run_scan(store.path, MOTIFS, str(tmp_path / "kept"), pvalue=1e-3, client=client, progress=False)
        with dask.config.set({"motifgrid.qvalues.spread-reduce": False}):
            one = run_scan(store.path, MOTIFS, str(tmp_path / "one"), pvalue=1e-3, client=client, progress=False)
    assert not read.qvalues["kept_pairs"] and not res.qvalues["kept_pairs"]      # auto: GPU workers only
    assert kept.qvalues["kept_pairs"] == one.qvalues["kept_pairs"] == (fraction > 1e-6)
    assert kept.qvalues["kept_pairs_fallback"] == (None if fraction > 1e-6 else
                                                   "a worker dropped its pairs (over its budget)")
    assert read.qvalues["kept_pairs_fallback"] is None               # no pairs kept: nothing to fall back from
    if fraction > 1e-6:
        assert kept.qvalues["tasks"] >= 2 + 3                 # a collect task a worker, 3 groups of motifs or more
        # spread: the groups reduced in both workers that hold pieces (one worker gathers them all without it)
        assert len({t["worker"] for t in ts.data if t["key"].startswith("qvalues-reduce")}) == 2
    want = pq.read_table(tmp_path / "read" / "_qvalues.parquet")
    assert want.num_rows > 100 and pq.read_table(tmp_path / "kept" / "_qvalues.parquet").equals(want)
    assert pq.read_table(tmp_path / "one" / "_qvalues.parquet").equals(want)
    assert pq.read_table(out / "_qvalues.parquet").equals(want)
    assert set(client.run(lambda: len(kept_pairs._runs)).values()) == {0}


def test_kept_pairs_bookkeeping():
    """A worker's kept pairs: a block file kept again replaces its pairs; collect answers only for exactly the
    files held (then frees them), with the distinct counted pairs of all of them; past the budget nothing is
    kept; drop frees a run."""
    from collections import Counter

    from workers.scan import kept_pairs

    rng = np.random.default_rng(5)
    files = {f"b{i}": (rng.integers(0, 6, 400), rng.choice([1e-5, 2e-5, 3e-5, 1e-4], 400)) for i in range(3)}
    for rel, (f, p) in files.items():
        assert kept_pairs.keep("r1", rel, f, p, 10**6)
    assert kept_pairs.keep("r1", "b0", *files["b0"], 10**6)            # a task run again
    assert kept_pairs.held("r1") == (3, False)
    assert kept_pairs.collect("r1", ["b0", "b1"], "cpu") is None              # not what it holds: files are read
    for rel, (f, p) in files.items():
        kept_pairs.keep("r1", rel, f, p, 10**6)
    fam, pv, cnt = kept_pairs.collect("r1", sorted(files), "cpu")
    want = Counter((int(a), float(b)) for f, p in files.values() for a, b in zip(f, p))
    assert list(zip(fam.tolist(), pv.tolist())) == sorted(want) and cnt.tolist() == [want[k] for k in sorted(want)]
    assert kept_pairs.held("r1") == (0, False)
    assert kept_pairs.keep("r2", "b0", *files["b0"], 400 * 12 + 100)
    assert not kept_pairs.keep("r2", "b1", *files["b1"], 400 * 12 + 100)   # over the budget
    assert kept_pairs.held("r2") == (0, True) and kept_pairs.collect("r2", ["b0"], "cpu") is None
    kept_pairs.keep("r3", "b0", *files["b0"], 10**6)
    kept_pairs.drop("r3")
    assert kept_pairs.held("r3") == (0, False) and not kept_pairs._runs
    # a block's pairs counted (its distinct pairs and their hits), beside one kept a pair a hit
    f, p = files["b1"]
    d = Counter(zip(f.tolist(), p.tolist()))
    assert kept_pairs.keep("r4", "b1", np.array([k[0] for k in d]), np.array([k[1] for k in d]), 10**6,
                           count=np.array(list(d.values())))
    assert kept_pairs.keep("r4", "b0", *files["b0"], 10**6)
    fam, pv, cnt = kept_pairs.collect("r4", ["b0", "b1"], "cpu")
    want = Counter((int(a), float(b)) for f, p in (files["b0"], files["b1"]) for a, b in zip(f, p))
    assert list(zip(fam.tolist(), pv.tolist())) == sorted(want) and cnt.tolist() == [want[k] for k in sorted(want)]


def test_score_runs_count_each_distinct_row_and_score():
    """workers.scan.distinct.score_runs: a block's distinct (row, score) sorted by row then score, their hits counted
    and each one's p-value, against a Counter."""
    from collections import Counter

    from workers.scan.distinct import score_runs

    rng = np.random.default_rng(11)
    row = rng.integers(0, 7, 5000).astype(np.int32)
    score = rng.choice([-1.5, 0.0, 2.25, 7.125, 7.125 + 1e-12], 5000)
    pv = row * 10.0 + np.searchsorted([0.0, 5.0], score)     # a function of (row, score)
    r, s, g, c = score_runs(row, score, pv)
    want = Counter(zip(row.tolist(), score.tolist()))
    assert list(zip(r.tolist(), s.tolist())) == sorted(want) and c.tolist() == [want[k] for k in sorted(want)]
    assert g.tolist() == [k[0] * 10.0 + np.searchsorted([0.0, 5.0], k[1]) for k in sorted(want)]
    e = score_runs(row[:0], score[:0])
    assert e[0].size == e[1].size == e[3].size == 0 and e[2] is None


def test_pieces_kept_in_memory_on_the_worker_with_room():
    """The reduction's pieces skip the part files where one worker's memory limit holds 4x them: that worker."""
    from pipeline.scan.qvalues import _pieces_worker

    class Client:
        def __init__(self, *limits):
            self.info = {"workers": {f"w{i}": {"memory_limit": m} for i, m in enumerate(limits)}}

        def scheduler_info(self):
            return self.info

    assert _pieces_worker(Client(8e9), 100_000_000) == "w0" and _pieces_worker(Client(8e9), 100_000_001) is None
    assert _pieces_worker(Client(2e9, 8e9, None), 100_000_000) == "w1"
    assert _pieces_worker(Client(4e9, 4e9), 100_000_000) is None
    assert _pieces_worker(Client(None), 10) is None and _pieces_worker(Client(), 10) is None


def test_resume_gives_the_same_qvalues(genome, finished, client, tmp_path):
    store, _ = genome
    out, _ = finished
    part = tmp_path / "partial"
    shutil.copytree(out, part)
    entries = sorted((part / "_manifest").glob("*.json"))[1::2]
    for e in entries:
        info = json.loads(e.read_text())
        if info["file"]:
            (part / info["file"]).unlink()
        e.unlink()
    for f in ("_summary.json", "_qvalues.parquet", "_motif_summary.parquet"):
        (part / f).unlink()
    res = run_scan(store.path, MOTIFS, str(part), pvalue=1e-3, client=client, progress=False, resume=True)
    assert 0 < res.blocks_skipped < res.blocks
    assert pq.read_table(part / "_qvalues.parquet").equals(pq.read_table(out / "_qvalues.parquet"))
    assert pq.read_table(part / "_motif_summary.parquet").equals(pq.read_table(out / "_motif_summary.parquet"))


def test_max_qvalue_filters_where_hits_are_read(genome, finished, client, tmp_path):
    """--max-qvalue Q is q <= Q, applied by read_hits and export (explicitly, or as the scan recorded it);
    the files keep every hit.  --no-qvalue writes no map (q null) and refuses a q-value filter."""
    from pipeline.scan.export import ExportError, export, parse_export

    store, _ = genome
    out, _ = finished
    every = read_hits(str(out), columns=["chrom", "start", "strand", "motif_id", "pvalue", "qvalue"])
    q = every.column("qvalue").to_numpy()
    level = float(np.quantile(q, 0.3))
    keep = read_hits(str(out), max_qvalue=level)
    assert every.num_rows > keep.num_rows == int((q <= level).sum()) > 0
    assert keep.column("qvalue").to_numpy().max() <= level
    assert QvalueMap.read(str(out)).hits_at(level) == keep.num_rows
    n = export(str(out), "bed", str(tmp_path / "k.bed"), max_qvalue=level)
    assert n == keep.num_rows == len(parse_export(str(tmp_path / "k.bed"), "bed"))

    rec = tmp_path / "rec"
    res = run_scan(store.path, MOTIFS, str(rec), pvalue=1e-3, client=client, progress=False, max_qvalue=level)
    assert res.hits == every.num_rows and res.qvalues["hits_at_level"] == keep.num_rows
    assert read_hits(str(rec)).num_rows == keep.num_rows               # the recorded Q, by default
    assert read_hits(str(rec), max_qvalue=1).num_rows == every.num_rows
    assert export(str(rec), "gff3", str(tmp_path / "r.gff3")) == keep.num_rows

    none = tmp_path / "none"
    run_scan(store.path, MOTIFS, str(none), pvalue=1e-3, client=client, progress=False, qvalues=False)
    assert not (none / "_qvalues.parquet").exists()
    t = read_hits(str(none))
    assert t.num_rows == every.num_rows and t.column("qvalue").null_count == t.num_rows
    with pytest.raises(ScanError, match="no q-values"):
        read_hits(str(none), max_qvalue=0.5)
    with pytest.raises(ExportError, match="no q-values"):
        export(str(none), "fimo", str(tmp_path / "n.tsv"), max_qvalue=0.5)
    with pytest.raises(ScanError, match="cannot be combined with --no-qvalue"):
        run_scan(store.path, MOTIFS, str(tmp_path / "x"), pvalue=1e-3, client=client, progress=False,
                 qvalues=False, max_qvalue=0.1)
    assert not (tmp_path / "x").exists()


def _fimo_key(line: str, order: dict):
    f = line.split("\t")
    start = int(f[4]) if f[5] == "-" else int(f[3])
    return float(f[7]), -order[f[0]], start


def test_fimo_export_sorted_as_fimo_with_qvalues(finished, tmp_path, monkeypatch):
    """FIMO TSV: by p-value, later motif first on ties, then FIMO's start; q-values filled (3 digits, as FIMO);
    the same bytes when the rows are sorted in many runs on disk and merged.  GFF3 carries qvalue=."""
    import dask.config

    from pipeline.scan.export import export

    out, _ = finished
    import tempfile

    export(str(out), "fimo", str(tmp_path / "a.tsv"))
    runs = tmp_path / "tmpdir"
    runs.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(runs))            # TMPDIR: where the sorted runs go
    with dask.config.set({"motifgrid.export.sort-rows": 97}):
        export(str(out), "fimo", str(tmp_path / "b.tsv"))
    text = (tmp_path / "a.tsv").read_text()
    assert (tmp_path / "b.tsv").read_text() == text
    assert not list(runs.iterdir())                                # runs removed
    lines = text.splitlines()[1:]
    order = {m: i for i, m in enumerate(pq.read_table(out / "_motif_summary.parquet").column("motif_id").to_pylist())}
    # printed p-values are rounded: compare the exact ones, matched back to each line
    t = read_hits(str(out), columns=["chrom", "start", "end", "strand", "motif_id", "pvalue", "qvalue"])
    exact = {(c, s + 1, e, st, m): (p, q) for c, s, e, st, m, p, q in zip(*(t.column(k).to_pylist() for k in t.column_names))}
    keys = []
    for line in lines:
        f = line.split("\t")
        p, q = exact[(f[2], int(f[3]), int(f[4]), f[5], f[0])]
        assert f[8] == f"{q:.3g}" and f[7] == f"{p:.3g}"
        start = int(f[4]) if f[5] == "-" else int(f[3])
        keys.append((p, -order[f[0]], start))
    assert len(lines) == t.num_rows and keys == sorted(keys)
    export(str(out), "gff3", str(tmp_path / "h.gff3"))
    attrs = [dict(kv.split("=", 1) for kv in x.split("\t")[8].split(";"))
             for x in (tmp_path / "h.gff3").read_text().splitlines()[1:]]
    assert all(0 < float(a["qvalue"]) <= 1 for a in attrs) and len(attrs) == t.num_rows


def test_qvalue_map_lookup_and_cutoffs():
    """Lookups by (motif id, p-value) in the step map, and q <= Q as p <= cutoff, against brute force."""
    rng = np.random.default_rng(3)
    ids, pv, qv, hv = [], [], [], []
    truth = {}
    for m in ("A", "B", "C"):
        p = np.unique(10 ** rng.uniform(-9, -4, 200))
        c = rng.integers(1, 4, p.size)
        q = bh_qvalues(p, c, 10**6)
        truth[m] = (p, q)
        sp, sq, sh = steps(p, c, 10**6)
        ids += [m] * sp.size
        pv.append(sp)
        qv.append(sq)
        hv.append(sh)
    qmap = QvalueMap(ids=["A", "B", "C"], offsets=np.r_[0, np.cumsum([len(x) for x in pv])], pvalue=np.concatenate(pv),
                     qvalue=np.concatenate(qv), hits=np.concatenate(hv), max_qvalue=None, info={})
    pick = [(m, i) for m in ("C", "A", "B") for i in rng.integers(0, truth[m][0].size, 50)]
    col = pa.array([m for m, _ in pick] + ["Z"]).dictionary_encode()
    p = np.array([truth[m][0][i] for m, i in pick] + [1e-5])
    got = qmap.lookup(col, p)
    np.testing.assert_array_equal(got[:-1], [truth[m][1][i] for m, i in pick])
    assert np.isnan(got[-1])                                  # an id the map does not know
    for level in (0.01, 0.2, 0.9, 1.0):
        cut = qmap.cutoffs(level)
        for f, m in enumerate(("A", "B", "C")):
            pt, qt = truth[m]
            assert cut[f] == (pt[qt <= level].max() if (qt <= level).any() else -1.0)


def test_cli_scan_prints_qvalues_and_export_filters(genome, tmp_path):
    store, _ = genome
    env = subprocess_env()
    run = lambda *a: subprocess.run([sys.executable, "-m", "pipeline.cli", *a], capture_output=True, text=True,  # noqa: E731
                                    env=env, cwd=ROOT, timeout=240)
    r = run("scan", store.path, MOTIFS, "--pvalue", "1e-3", "--out", str(tmp_path / "h"), "--workers", "1",
            "--no-progress", "--max-qvalue", "0.5")
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stderr.splitlines() if x.startswith("q-values: "))     # one line (soft wrap)
    assert "hits have q <= 0.5" in line and line.endswith(f"{tmp_path / 'h'}/_qvalues.parquet")
    n = read_hits(str(tmp_path / "h")).num_rows
    r = run("export", str(tmp_path / "h"), "--format", "fimo", "-o", str(tmp_path / "h.tsv"))
    assert r.returncode == 0 and f"wrote {n:,} hits" in r.stdout, r.stderr
    r = run("scan", store.path, MOTIFS, "--out", str(tmp_path / "x"), "--no-qvalue", "--max-qvalue", "0.1")
    assert r.returncode == 2 and "cannot be combined with --no-qvalue" in r.stderr
    assert len([x for x in r.stderr.splitlines() if x.strip()]) == 1


@pytest.mark.parametrize("max_rows", [1, 7, 1_000, 10**9])
def test_external_sort_equals_stable_sort(tmp_path, max_rows):
    """Runs on disk merged = one stable in-memory sort (ties in input order), however many runs."""
    import io

    from pipeline.io.extsort import ExternalSort

    rng = np.random.default_rng(max_rows)
    n = 400 if max_rows == 1 else 20_000
    k1 = rng.integers(0, 40, n) / 7.0          # many ties
    k2 = rng.integers(0, 3, n)
    lines = [f"row{i}" for i in range(n)]
    s = ExternalSort(str(tmp_path), max_rows)
    for lo in range(0, n, 333):
        s.add((k1[lo:lo + 333], k2[lo:lo + 333]), lines[lo:lo + 333])
    f = io.BytesIO()
    s.write(f)
    assert f.getvalue().decode().splitlines() == [lines[i] for i in np.lexsort((np.arange(n), k2, k1))]
    assert (len(s.runs) > 1) == (max_rows < n) and not list(tmp_path.iterdir())


def test_motifs_sharing_an_id_are_one_family(genome, client, tmp_path):
    """Two motifs with one id (read_motifs keeps both; the hits files cannot tell them apart): one BH family
    whose tests are both motifs' tests, i.e. scipy's BH over the pooled hits and windows."""
    from scipy.stats import false_discovery_control

    from pipeline.motifs import read_motifs

    store, seqs = genome
    recs = open(MOTIFS).read().split(">")[1:]
    pick = [r for r in recs if r.split()[0] in ("MA0007.4", "MA0079.5")]
    assert len(pick) == 2
    src = tmp_path / "dup.jaspar"
    src.write_text("".join(">DUP\t" + r.split("\t", 1)[1] for r in pick))
    lengths = [m.length for m in read_motifs(str(src))]
    assert len(set(lengths)) == 2
    out = tmp_path / "h"
    run_scan(store.path, str(src), str(out), pvalue=1e-3, client=client, progress=False)
    ms = pq.read_table(out / "_motif_summary.parquet").to_pylist()
    assert [r["motif_id"] for r in ms] == ["DUP", "DUP"]
    tests = sum(2 * _windows(seqs, m) for m in lengths)
    assert sum(r["tests"] for r in ms) == tests
    t = read_hits(str(out), columns=["pvalue", "qvalue"])
    p, q = t.column("pvalue").to_numpy(), t.column("qvalue").to_numpy()
    want = false_discovery_control(np.r_[p, np.ones(tests - p.size)], method="bh")[:p.size]
    np.testing.assert_allclose(q, want, rtol=1e-12)
    assert set(pq.read_table(out / "_qvalues.parquet").column("motif_id").to_pylist()) == {"DUP"}


def test_valid_windows_brute_force():
    """Window starts without a code 4 per length, against a direct check of every window (short rows: one
    broadcast; long rows with many N runs: per length)."""
    from workers.scan import valid_windows

    rng = np.random.default_rng(11)
    for _ in range(200):
        r = int(rng.integers(0, 60))
        codes = rng.integers(0, 5, r).astype(np.uint8)
        n = int(rng.integers(0, r + 3))
        lengths = np.unique(rng.integers(1, 12, 3))
        want = [sum(p + m <= r and bool((codes[p:p + m] < 4).all()) for p in range(n)) for m in lengths]
        assert valid_windows(codes, n, lengths).tolist() == want
    codes = rng.integers(0, 5, 30_000).astype(np.uint8)          # ~6,000 runs × 29 lengths: the loop
    good = np.r_[0, np.cumsum(codes >= 4)]
    lengths = np.arange(1, 30)
    want = [int(np.sum(good[m:29_000 + m] == good[:29_000])) for m in lengths]
    assert valid_windows(codes, 29_000, lengths).tolist() == want


def test_reduction_tasks_sized_to_the_workers_memory():
    """A task holds ~50 bytes a p-value: two tasks a thread within a quarter of a thread's share of its worker's
    memory limit (a helper's run at p = 0.5 peaked at 2.67 GB with 20 M-hit tasks whatever the node had); workers
    without a limit keep motifgrid.qvalues.task-hits."""
    import dask.config

    from pipeline.scan.qvalues import _task_hits

    class Info:
        def __init__(self, *workers):
            self.workers = {f"w{i}": {"memory_limit": m, "nthreads": t} for i, (m, t) in enumerate(workers)}

        def scheduler_info(self):
            return {"workers": self.workers}

    with dask.config.set({"motifgrid.qvalues.task-hits": 20_000_000}):
        assert _task_hits(Info((0, 16))) == 20_000_000                        # no limit
        assert _task_hits(Info((4 * 2 ** 30, 16))) == 4 * 2 ** 30 // (16 * 4 * 50)    # 1.34 M a task
        assert _task_hits(Info((512 * 2 ** 30, 2))) == 20_000_000            # the setting caps it
        assert _task_hits(Info((512 * 2 ** 30, 2), (2 * 2 ** 30, 8))) == 2 * 2 ** 30 // (8 * 4 * 50)
