"""Nucleotide-histogram comparison: kernels and the whole run against a naive recount of every window."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.composition.run import CompositionError, read_matches, run_composition
from pipeline.io.genome import encode, ingest
from tests.conftest import ROOT
from tests.reference import naive_composition, naive_composition_arrays
from workers.composition import Segments, compare_block, make_plan, max_distance, histograms

def revcomp(s: str) -> str:
    return s.translate(str.maketrans("ACGT", "TGCA"))[::-1]


def draw_tests(seq: str, n: int, lengths: list, seed: int, mut: float = 0.08) -> list:
    """Test sequences cut from ``seq`` (N-free) with substitutions, a few reverse-complemented, some with U."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        L = int(rng.choice(lengths))
        p = int(rng.integers(0, len(seq) - L))
        w = list(seq[p:p + L].upper())
        if any(c not in "ACGT" for c in w):
            continue
        for j in np.flatnonzero(rng.random(L) < mut):
            w[j] = "ACGT"[rng.integers(4)]
        t = "".join(w)
        if len(out) % 5 == 1:
            t = revcomp(t)
        if len(out) % 7 == 3:
            t = t.replace("T", "U")
        out.append(t)
    return out


@pytest.fixture(scope="module")
def real(chrx_2mb):
    """Two real slices of human chrX: one with N runs and an IUPAC code, one lower-case."""
    a = list(chrx_2mb[400_000:440_000])
    a[7_000:7_300] = "N" * 300
    a[16_380:16_390] = "N" * 10               # right at a block border (block size 8,192 below)
    a[25_000] = "R"
    return {"chrA": "".join(a), "chrB": chrx_2mb[900_000:911_111].lower()}


@pytest.fixture(scope="module")
def tests_seqs(real):
    lengths = [15, 16, 23, 31, 40, 57, 64]
    return draw_tests(real["chrA"] + real["chrB"].upper(), 90, lengths, seed=5)


def _plan(tests, s, both):
    codes = [encode(t.replace("U", "T")) for t in tests]
    offs = np.concatenate([[0], np.cumsum([c.size for c in codes])])
    h = histograms(np.concatenate(codes), offs)
    return make_plan(h, np.diff(offs), s, both)


def test_max_distance_is_the_float64_boundary():
    for L in (1, 3, 7, 10, 15, 20, 49, 100, 169):
        for s in (0.1, 0.5, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 0.97, 1.0, 1 - 3 / L, 1 - 1 / 3):
            d = max_distance(L, s)
            ok = [D for D in range(2 * L + 1) if 1.0 - D / L >= s]
            assert d == (max(ok) if ok else -1), (L, s)


@pytest.mark.parametrize("s,both", [(0.8, True), (0.9, False), (1.0, True), (1 - 3 / 40, True)])
def test_worker_equals_naive(real, tests_seqs, device, s, both):
    """Kernel on one sequence with two segments (the second starts mid-sequence), N runs, several lengths."""
    seq = real["chrA"][:20_000]
    plan = _plan(tests_seqs, s, both)
    seg = Segments(np.array([0, 9_000]), np.array([6_000, 11_000]))
    counts, found = compare_block(encode(seq), seg, plan, device=device)
    want = [w for w in naive_composition(seq, tests_seqs, s, both)
            if 0 <= w[0] < 6_000 or 9_000 <= w[0] < 20_000]
    assert len(want) > 200
    got = [(int(p), int(plan.row_test[r]), "+-"[plan.row_strand[r]], 1.0 - d / plan.row_length[r])
           for p, r, d in zip(found.pos, found.row, found.distance)]
    key = found.pos * plan.n_rows + found.row
    assert np.all(np.diff(key) > 0)                                    # sorted by position, then row
    assert sorted(got) == want                                         # same windows, same similarity bits
    assert counts.sum() == len(want)
    per_row = np.bincount(found.row, minlength=plan.n_rows)
    assert np.array_equal(per_row, counts)


@pytest.mark.gpu
def test_gpu_equals_cpu_on_a_large_block(chrx_2mb):
    seq = chrx_2mb[:1_000_000]
    tests = draw_tests(seq, 3000, list(range(15, 170)), seed=11, mut=0.05)
    plan = _plan(tests, 0.93, True)
    codes = encode(seq)
    seg = Segments(np.array([0]), np.array([len(seq) - 300]))
    c_cpu, h_cpu = compare_block(codes, seg, plan, device="cpu")
    c_gpu, h_gpu = compare_block(codes, seg, plan, device="gpu")
    assert len(h_cpu) > 10_000
    assert np.array_equal(c_cpu, c_gpu)
    for f in ("row", "pos", "distance"):
        assert np.array_equal(getattr(h_cpu, f), getattr(h_gpu, f)), f
    c_only, none = compare_block(codes, seg, plan, device="gpu", hits=False)
    assert none is None and np.array_equal(c_only, c_cpu)


# ------------------------------------------------------------------------------------ pipeline
def write_fasta(path, records, width=60):
    with (gzip.open(path, "wt") if str(path).endswith(".gz") else open(path, "w")) as f:
        for name, s in records:
            f.write(f">{name} description\n" + "\n".join(s[i:i + width] for i in range(0, len(s), width)) + "\n")
    return path


@pytest.fixture(scope="module")
def inputs(real, tests_seqs, tmp_path_factory):
    d = tmp_path_factory.mktemp("comp")
    ref = write_fasta(d / "ref.fa.gz", [("chrA", real["chrA"]), ("contig/b|x=1", real["chrB"])])
    store = ingest(ref, d / "ref.zarr", block_size=8_192, halo=63)
    tfa = write_fasta(d / "tests.fa", [(f"t{i:03d}", t) for i, t in enumerate(tests_seqs)], width=50)
    return d, ref, store, tfa


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cl, \
            Client(cl) as c:
        yield c


@pytest.fixture(scope="module")
def small_tasks():
    import dask.config

    with dask.config.set({"motifgrid.composition.min-task-positions": 1, "motifgrid.composition.sample-tasks": 2}):
        yield


ROW_COLUMNS = ("chrom", "start", "end", "test_id", "strand", "similarity")
ROW_SCHEMA = pa.schema([("chrom", pa.string()), ("start", pa.int64()), ("end", pa.int64()), ("test_id", pa.string()),
                        ("strand", pa.string()), ("similarity", pa.float64())])


def _sorted_rows(t: pa.Table) -> pa.Table:
    """The rows in one canonical order (by every column): two tables are equal (``==``) when they hold the same rows
    (the same multiset; the comparison is exact, also for the similarity's float64 bits)."""
    return t.select(list(ROW_COLUMNS)).cast(ROW_SCHEMA).sort_by([(c, "ascending") for c in ROW_COLUMNS])


def rows_of(out) -> pa.Table:
    """A run's matches (chrom, start, end, test_id, strand, similarity), sorted; compared as Arrow tables (half a
    million rows: Python tuples took seconds per dataset)."""
    t = read_matches(str(out))
    return _sorted_rows(pa.table({c: t.column(c).cast(pa.string()) if c in ("chrom", "test_id", "strand")
                                  else t.column(c) for c in ROW_COLUMNS}))


def naive_rows(real, tests, s, both) -> pa.Table:
    """Every match by the naive recount (:func:`tests.reference.naive_composition`), as :func:`rows_of` lays them."""
    names = {"chrA": "chrA", "chrB": "contig/b|x=1"}
    length = np.array([len(t) for t in tests], np.int64)
    test_ids = pa.array([f"t{i:03d}" for i in range(len(tests))])
    parts = []
    for key, seq in real.items():
        p, i, strand, sim = naive_composition_arrays(seq, tests, s, both)
        parts.append(pa.table({"chrom": pa.array([names[key]]).take(np.zeros(p.size, np.int64)), "start": p,
                               "end": p + length[i], "test_id": test_ids.take(i), "strand": pa.array(strand),
                               "similarity": sim}))
    return _sorted_rows(pa.concat_tables(parts))


@pytest.fixture(scope="module")
def finished(inputs, client, small_tasks, tmp_path_factory):
    d, _, store, tfa = inputs
    out = tmp_path_factory.mktemp("run") / "m"
    res = run_composition(str(tfa), store.path, str(out), min_similarity=0.85, both_strands=True, client=client,
                          progress=False)
    return out, res


def test_matches_equal_naive_across_block_borders(real, tests_seqs, finished, inputs):
    out, res = finished
    want = naive_rows(real, tests_seqs, 0.85, True)
    got = rows_of(out)
    assert want.num_rows > 5_000
    assert got == want                              # every window once, across 6 block borders, exact S
    assert res.hits == want.num_rows and res.tasks == 7
    summ = pq.read_table(out / "_test_summary.parquet").to_pylist()
    per = {}
    for test_id, strand in zip(want.column("test_id").to_pylist(), want.column("strand").to_pylist()):
        per.setdefault(test_id, [0, 0])["+-".index(strand)] += 1
    assert [(r["test_id"], r["matches_plus"], r["matches_minus"]) for r in summ] == \
        [(f"t{i:03d}", *per.get(f"t{i:03d}", [0, 0])) for i in range(len(tests_seqs))]
    assert all(r["matches"] == r["matches_plus"] + r["matches_minus"] for r in summ)
    assert [r["length"] for r in summ] == [len(t) for t in tests_seqs]


@pytest.mark.gpu
def test_gpu_run_equals_cpu_run(finished, inputs, client, small_tasks, tmp_path):
    out, res = finished
    _, _, store, tfa = inputs
    g = run_composition(str(tfa), store.path, str(tmp_path / "gpu"), min_similarity=0.85, both_strands=True,
                        client=client, device="gpu", progress=False)
    assert g.hits == res.hits and rows_of(tmp_path / "gpu") == rows_of(out)
    assert pq.read_table(tmp_path / "gpu" / "_test_summary.parquet").equals(pq.read_table(out / "_test_summary.parquet"))


def test_finished_tasks_are_released_as_they_arrive(inputs, client, small_tasks, tmp_path, monkeypatch):
    """Each finished task is released when its result arrives (its output is on disk), so a worker lost later
    does not make the scheduler recompute it: when the k-th of n results is counted, the client holds the
    futures of n - k composition tasks."""
    import pipeline.composition.run as comp

    held = []

    def holding():
        return sum(1 for k in list(client.futures) if str(k).startswith("composition-"))

    class Recorder:                                 # made after the tasks are submitted, updated per result
        def __init__(self, *args, **kwargs):
            self.n = holding()

        def update(self, n, hits):
            want = self.n - len(held) - 1
            deadline = time.time() + 5             # a release reaches the client's event loop asynchronously
            while holding() > want and time.time() < deadline:
                time.sleep(0.01)
            held.append(holding())

        def close(self):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    monkeypatch.setattr(comp, "Progress", Recorder)
    _, _, store, tfa = inputs
    res = run_composition(str(tfa), store.path, str(tmp_path / "r"), min_similarity=0.85, client=client,
                          progress=False)
    assert res.tasks >= 3 and len(held) == res.tasks
    assert held == list(range(res.tasks - 1, -1, -1))


def test_layout_and_provenance(finished, inputs):
    out, res = finished
    _, _, store, tfa = inputs
    files = sorted(out.glob("*/**/part-*.parquet"))
    assert {p.parent.name for p in files} <= {"chrA", "contig%2Fb%7Cx%3D1", "packed"} and files
    f = pq.ParquetFile(files[0])
    assert f.schema_arrow.names == ["test_id", "chrom", "start", "end", "strand", "similarity"]
    md = {k.decode(): v.decode() for k, v in f.schema_arrow.metadata.items()}
    assert md["genome.checksum"] == store.checksum and md["tests.checksum"].startswith("sha256:")
    assert md["min_similarity"] == "0.85" and md["both_strands"] == "true"
    assert set(json.loads(md["block"])[0]) == {"index", "start", "end"}
    s = json.loads((out / "_summary.json").read_text())
    assert s["matches"] == res.hits and s["estimate"]["sampled_tasks"] == 2 and s["tests"] == 90
    assert s["positions"] == 40_000 + 11_111 and s["pairs"] == s["positions"] * 180
    assert not list(out.rglob(".*tmp*"))


def test_counts_only_and_fasta_reference(real, tests_seqs, finished, inputs, client, small_tasks, tmp_path):
    """A FASTA reference is ingested into OUT/_reference.zarr; --counts-only gives the same counts per test."""
    out, _ = finished
    d, ref, _, tfa = inputs
    o2 = tmp_path / "counts"
    res = run_composition(str(tfa), str(ref), str(o2), min_similarity=0.85, both_strands=True, counts_only=True,
                          client=client, progress=False, block_size=10_000)
    assert (o2 / "_reference.zarr" / "zarr.json").exists() and not list(o2.glob("*/**/part-*.parquet"))
    a = pq.read_table(out / "_test_summary.parquet")
    b = pq.read_table(o2 / "_test_summary.parquet")
    assert a.equals(b) and res.hits == sum(a.column("matches").to_pylist()) and res.estimate is None


def test_resume_and_refusals(finished, inputs, client, small_tasks, tmp_path):
    out, res = finished
    _, _, store, tfa = inputs
    with pytest.raises(CompositionError, match="holds a finished composition run; pass --overwrite to replace it"):
        run_composition(str(tfa), store.path, str(out), min_similarity=0.85, both_strands=True, client=client,
                        progress=False)
    with pytest.raises(CompositionError, match="different parameters"):
        run_composition(str(tfa), store.path, str(out), min_similarity=0.9, both_strands=True, client=client,
                        progress=False, resume=True)
    part = tmp_path / "partial"
    shutil.copytree(out, part)
    entries = sorted((part / "_manifest").glob("*.json"))[::2]
    for e in entries:
        info = json.loads(e.read_text())
        for f in info["files"]:
            (part / f).unlink()
        e.unlink()
    (part / "_summary.json").unlink()
    (part / "packed").mkdir(exist_ok=True)
    (part / "packed" / ".part-b0000001.parquet.tmp-dead").write_bytes(b"torn")
    again = run_composition(str(tfa), store.path, str(part), min_similarity=0.85, both_strands=True, client=client,
                            progress=False, resume=True)
    assert again.tasks_skipped == again.tasks - len(entries)
    assert rows_of(part) == rows_of(out) and again.hits == res.hits
    assert not list(part.rglob(".*tmp*"))


def test_overwrite_replaces_a_composition_dataset(real, tests_seqs, finished, inputs, client, small_tasks, tmp_path):
    """--overwrite: a finished run replaced by a new one at another threshold (equal to the naive count, nothing
    of the old run left); a hits dataset (another kind) is refused."""
    out, _ = finished
    _, _, store, tfa = inputs
    part = tmp_path / "again"
    shutil.copytree(out, part)
    res = run_composition(str(tfa), store.path, str(part), min_similarity=0.9, both_strands=False, client=client,
                          progress=False, overwrite=True)
    assert rows_of(part) == naive_rows(real, tests_seqs, 0.9, False) and res.tasks_skipped == 0
    assert json.loads((part / "_run.json").read_text())["min_similarity"] == 0.9
    import threading

    for t in threading.enumerate():
        if t.name == "motifgrid-replaced":
            t.join()
    assert not [n for n in tmp_path.iterdir() if "motifgrid-replaced" in n.name]      # the old run, set aside, gone
    hits = tmp_path / "hits"
    hits.mkdir()
    (hits / "_run.json").write_text(json.dumps({"hits_format": 1}))
    with pytest.raises(CompositionError, match="holds a motifgrid dataset of another kind, not a composition dataset"):
        run_composition(str(tfa), store.path, str(hits), client=client, progress=False, overwrite=True)


def test_estimate_refuses_large_outputs(inputs, client, small_tasks, tmp_path):
    _, _, store, tfa = inputs
    out = tmp_path / "big"
    with pytest.raises(CompositionError, match=r"about [\d,]+ matches expected at S >= 0.6 .* above --max-hits 1,000"):
        run_composition(str(tfa), store.path, str(out), min_similarity=0.6, client=client, progress=False,
                        max_hits=1000)
    assert not out.exists()                          # nothing claimed for a store reference


def _cli(*args, timeout=180):
    from tests.conftest import subprocess_env

    env = subprocess_env(DASK_MOTIFGRID__COMPOSITION__MIN_TASK_POSITIONS="1")
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=timeout)


def test_cli_runs(inputs, finished, tmp_path):
    out, _ = finished
    _, _, store, tfa = inputs
    r = _cli("composition", str(tfa), store.path, "--min-similarity", "0.85", "--both-strands", "--out",
             str(tmp_path / "cli"), "--workers", "2", "--device", "cpu", "--no-progress")
    assert r.returncode == 0, r.stderr
    assert "done:" in r.stderr and "matches" in r.stderr
    assert rows_of(tmp_path / "cli") == rows_of(out)


@pytest.mark.parametrize("tests,ref,extra,msg", [
    (">a\nACGTNACGTACGTAC\n", "{store}", [], "'N' at position 5 is not A, C, G, T or U"),
    (">a\nACGTACGTACGTACG\n>a\nACGTACGTACGTACG\n", "{store}", [], "duplicate test name 'a'"),
    (">a\n\n>b\nACGT\n", "{store}", [], "record 'a' (line 1) has no sequence"),
    ("", "{store}", [], "empty file"),
    (">a\n" + "ACGT" * 20 + "\n", "{store}", [], "re-ingest with --halo 79"),
    (">a\nACGTACGTACGTACG\n", "{tmp}/none.fa", [], "no such file"),
    (">a\nACGTACGTACGTACG\n", "{store}", ["--min-similarity", "0"], "similarity must be in (0, 1]"),
    (">a\nACGTACGTACGTACG\n", "{store}", ["--min-similarity", "0.5", "--max-hits", "10"], "above --max-hits 10"),
])
def test_bad_input_one_line_exit_2(inputs, tmp_path, tests, ref, extra, msg):
    _, _, store, _ = inputs
    t = tmp_path / "t.fa"
    t.write_text(tests)
    r = _cli("composition", str(t), ref.format(store=store.path, tmp=tmp_path), "--out", str(tmp_path / "o"),
             "--workers", "1", "--no-progress", *extra)
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert lines[-1].startswith("motifgrid composition: error: ") and msg in lines[-1], r.stderr
    if "--max-hits" not in extra:
        assert len(lines) == 1, r.stderr           # refused before anything started
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()
