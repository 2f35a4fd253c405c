"""The whole scan on a real Dask cluster: Parquet layout, provenance, exactness, resume, exports, bad input."""
from __future__ import annotations

import gzip
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.io.genome import ingest
from pipeline.motifs import MotifError
from pipeline.scan.graph import run_scan
from pipeline.scan.motif_set import ScanError
from pipeline.scan.read import read_hits
from tests.conftest import DATA, ROOT, subprocess_env
from tests.reference import brute_force_pvalue, naive_scan

MOTIFS = str(DATA / "jaspar2024_subset.jaspar")


@pytest.fixture(scope="module")
def genome(tmp_path_factory, chrx_slice):
    """Two real contigs with N runs and IUPAC codes, small blocks so block borders are many."""
    d = tmp_path_factory.mktemp("genome")
    a = list(chrx_slice[:120_000])
    a[30_000:30_500] = "N" * 500
    a[59_990:60_010] = "N" * 20
    for i in range(5, 120_000, 9973):
        a[i] = "R"
    seqs = {"chrX_a": "".join(a), "contig/b|x=1": chrx_slice[150_000:161_234].lower()}
    fa = d / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        for k, s in seqs.items():
            f.write(f">{k}\n" + "\n".join(s[i:i + 70] for i in range(0, len(s), 70)) + "\n")
    store = ingest(fa, d / "g.zarr", block_size=16_384, halo=40)
    return store, seqs


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as cl, Client(cl) as c:
        yield c


def table_rows(t):
    import pyarrow as pa

    t = pa.table({c: (t.column(c).cast(pa.string()) if pa.types.is_dictionary(t.column(c).type) else t.column(c))
                  for c in t.column_names})
    t = t.sort_by([("chrom", "ascending"), ("start", "ascending"), ("motif_id", "ascending"), ("strand", "ascending")])
    return list(zip(*(t.column(c).to_pylist() for c in ("chrom", "start", "end", "strand", "motif_id", "score", "pvalue"))))


@pytest.fixture(scope="module")
def finished(genome, client, tmp_path_factory):
    store, _ = genome
    out = tmp_path_factory.mktemp("run") / "hits"
    res = run_scan(store.path, MOTIFS, str(out), pvalue=1e-3, client=client, progress=False)
    return out, res


def test_hits_equal_naive_reference(genome, finished):
    from pipeline.motifs import pwm_from_motif, read_motifs, reverse_complement

    store, seqs = genome
    out, res = finished
    thr = pq.read_table(out / "_thresholds.parquet").to_pylist()
    motifs = read_motifs(MOTIFS)
    pwms, thresholds, labels = [], [], []
    for m, (tp, tm) in zip(motifs, zip(thr[::2], thr[1::2])):
        w = pwm_from_motif(m, np.full(4, 0.25), 0.1)
        for strand, ww, t in (("+", w, tp), ("-", reverse_complement(w), tm)):
            assert t["motif_id"] == m.id and t["strand"] == strand
            if t["reachable"]:
                pwms.append(ww)
                thresholds.append(t["threshold"])
                labels.append((m.id, strand, ww.shape[0]))
    want = []
    for chrom, seq in seqs.items():
        for pos, r, score in naive_scan(seq, pwms, thresholds):
            mid, strand, m = labels[r]
            want.append((chrom, pos, pos + m, strand, mid, score))
    got = [r[:6] for r in table_rows(read_hits(str(out)))]
    assert len(want) > 1000
    assert sorted(got) == sorted(want)          # found once each, across every block border, scores bit-identical
    assert res.hits == len(want)


def test_pvalues_exact(genome, finished):
    from pipeline.motifs import pwm_from_motif, read_motifs, reverse_complement

    out, _ = finished
    t = read_hits(str(out))
    assert max(t.column("pvalue").to_pylist()) <= 1e-3
    motifs = {m.id: m for m in read_motifs(MOTIFS)}
    rows = table_rows(t)
    checked = 0
    for mid in ("MA0079.5", "MA0139.2"):            # lengths 11 and 15 ... brute force only for short ones
        m = motifs[mid]
        if m.matrix.shape[0] > 11:
            continue
        w = pwm_from_motif(m, np.full(4, 0.25), 0.1)
        for r in [r for r in rows if r[4] == mid][:25]:
            ww = w if r[3] == "+" else reverse_complement(w)
            exact = brute_force_pvalue(ww, np.full(4, 0.25), r[5])
            assert r[6] == pytest.approx(exact, rel=1.001e-3)
            assert r[6] >= exact * (1 - 1e-9)
            checked += 1
    assert checked >= 25


def test_layout_schema_and_provenance(genome, finished):
    store, _ = genome
    out, _ = finished
    parts = sorted(p.name for p in (out / "chrom").iterdir())
    assert parts == ["chrX_a", "contig%2Fb%7Cx%3D1"]      # a folder per record of its own blocks; never raw paths
    assert not (out / "packed").exists()          # a record longer than half a block ends its block: none shared
    files = sorted(out.glob("*/**/part-*.parquet"))
    f = pq.ParquetFile(files[0])
    assert f.schema_arrow.names == ["chrom", "start", "end", "strand", "motif_id", "motif_name", "score", "pvalue"]
    rg = f.metadata.row_group(0)
    assert all("DELTA_BINARY_PACKED" in rg.column(i).encodings for i in (1, 2))     # start, end
    md = {k.decode(): v.decode() for k, v in f.schema_arrow.metadata.items()}
    assert md["genome.checksum"] == store.checksum
    assert md["motifs.checksum"].startswith("sha256:") or len(md["motifs.checksum"]) == 64
    assert md["pvalue"] == "0.001" and json.loads(md["background"]) == [0.25] * 4
    assert set(json.loads(md["block"])) == {"index", "start", "end"}
    t = read_hits(str(out))
    assert set(t.column("chrom").to_pylist()) == {"chrX_a", "contig/b|x=1"}
    from pipeline.motifs import read_motifs

    name_of = {m.id: m.name for m in read_motifs(MOTIFS)}
    pairs = set(zip(t.column("motif_id").to_pylist(), t.column("motif_name").to_pylist()))
    assert len(pairs) > 5 and all(name_of[i] == n for i, n in pairs)
    for path in files:                           # hits format 2: grouped by motif/strand row, by start inside
        rows = pq.read_table(path, columns=["start", "motif_id", "strand"]).to_pydict()
        keys = list(zip(rows["motif_id"], rows["strand"]))
        runs = [k for i, k in enumerate(keys) if i == 0 or k != keys[i - 1]]
        assert len(runs) == len(set(runs)) > 1
        assert all(keys[i] != keys[i + 1] or rows["start"][i] < rows["start"][i + 1] for i in range(len(keys) - 1))
    summary = json.loads((out / "_summary.json").read_text())
    ms = pq.read_table(out / "_motif_summary.parquet")
    assert sum(ms.column("hits").to_pylist()) == summary["hits"] == t.num_rows
    steps = summary["task_seconds_by_step"]             # the p-value lookup is timed inside the table step
    assert 0 < steps["pvalues"] < steps["table"] and steps["pinned"] == 0        # (no GPU buffers on CPU workers)
    assert not list(out.rglob(".*tmp*"))


def test_small_scan_shares_its_blocks_among_the_threads(genome, finished, client):
    """A scan of fewer positions than motifgrid.scan.min-task-positions (1 Mi) a worker thread is not one task for
    one thread: its blocks go in tasks of about (positions / threads) each."""
    from pipeline.io.regions import Piece
    from pipeline.scan.graph import _min_task_positions

    store, _ = genome
    out, _ = finished
    summary = json.loads((out / "_summary.json").read_text())
    assert summary["blocks"] > 2 and len(summary["first_tasks"]) >= 2         # 2 worker threads
    units = [(b, [Piece(b, 0, n, n)]) for b, n in enumerate((10_000, 30_000))]
    assert _min_task_positions(client, units) == 20_000
    assert _min_task_positions(client, [(0, [Piece(0, 0, 1 << 26, 1 << 26)])]) == 1 << 20


def test_rerun_refused_and_resume_of_finished_does_nothing(genome, finished, client):
    store, _ = genome
    out, res = finished
    with pytest.raises(ScanError, match="holds a finished scan; pass --overwrite to replace it with a new one"):
        run_scan(store.path, MOTIFS, str(out), pvalue=1e-3, client=client, progress=False)
    before = {p: p.stat().st_mtime_ns for p in out.glob("*/**/part-*.parquet")}
    again = run_scan(store.path, MOTIFS, str(out), pvalue=1e-3, client=client, progress=False, resume=True)
    assert again.blocks_skipped == again.blocks and again.hits == res.hits
    assert before == {p: p.stat().st_mtime_ns for p in out.glob("*/**/part-*.parquet")}
    with pytest.raises(ScanError, match="different parameters"):
        run_scan(store.path, MOTIFS, str(out), pvalue=1e-4, client=client, progress=False, resume=True)


def test_resume_after_partial_run_is_identical(genome, finished, client, tmp_path):
    import shutil

    store, _ = genome
    out, _ = finished
    part = tmp_path / "partial"
    shutil.copytree(out, part)
    # make it look interrupted: half the blocks unfinished, a torn temporary file, no summary
    entries = sorted((part / "_manifest").glob("*.json"))[::2]
    for e in entries:
        info = json.loads(e.read_text())
        if info["file"]:
            (part / info["file"]).unlink()
        e.unlink()
    (part / "_summary.json").unlink()
    (part / "chrom" / "chrX_a" / ".part-b0000001.parquet.tmp-dead").write_bytes(b"torn")
    res = run_scan(store.path, MOTIFS, str(part), pvalue=1e-3, client=client, progress=False, resume=True)
    assert res.blocks_skipped == res.blocks - len(entries)
    assert table_rows(read_hits(str(part))) == table_rows(read_hits(str(out)))
    assert not list(part.rglob(".*tmp*"))


def test_result_says_what_this_run_did(genome, finished, client, tmp_path):
    """``hits`` counts the whole dataset; ``hits_this_run`` and ``positions`` count the blocks this run scanned."""
    import shutil

    store, _ = genome
    out, full = finished
    part = tmp_path / "partial"
    shutil.copytree(out, part)
    redo = [json.loads(e.read_text()) for e in sorted((part / "_manifest").glob("*.json"))[1::2]]
    for info in redo:
        if info["file"]:
            (part / info["file"]).unlink()
        (part / "_manifest" / f"{info['block']}.json").unlink()
    (part / "_summary.json").unlink()
    res = run_scan(store.path, MOTIFS, str(part), pvalue=1e-3, client=client, progress=False, resume=True)
    assert res.hits == full.hits and res.blocks_skipped == res.blocks - len(redo)
    assert res.hits_this_run == sum(i["hits"] for i in redo) < full.hits
    assert res.positions == sum(i["positions"] for i in redo) < full.positions
    assert full.hits_this_run == full.hits


def _cli(*args, **kw):
    env = subprocess_env(**kw.get("env", {}))
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *args], capture_output=True, text=True, env=env,
                          cwd=kw.get("cwd", ROOT), timeout=kw.get("timeout", 180))


@pytest.mark.parametrize("fmt", ["bed", "fimo", "gff3"])
def test_exports_round_trip(finished, tmp_path, fmt):
    from pipeline.scan.export import export, parse_export

    out, _ = finished
    dest = tmp_path / f"hits.{fmt}"
    n = export(str(out), fmt, str(dest))
    back = parse_export(str(dest), fmt)
    want = table_rows(read_hits(str(out)))          # chrom, start, end, strand, motif_id, score, pvalue
    assert n == len(want) == len(back)
    key = lambda r: (r[0], r[1], r[4], r[3])  # noqa: E731
    for a, b in zip(sorted(back, key=key), sorted(want, key=key)):
        assert a[:5] == b[:5] and a[5] == pytest.approx(b[5], abs=1e-4)
        if fmt == "bed":                         # BED6+3: column 5 = min(1000, round(-10 log10 p)), an integer
            assert a[6] == min(1000, math.floor(-10 * math.log10(b[6]) + 0.5)) and 0 <= a[6] <= 1000
            assert a[7] == pytest.approx(b[6], rel=1e-3)
    if fmt == "bed":
        assert all(r[6] >= 30 for r in back) and any(r[5] < 0 for r in back)   # p <= 1e-3; scores < 0 exist
        names = {r[4]: r[8] for r in back}
        assert names == {m: n for m, n in zip(*(read_hits(str(out), columns=["motif_id", "motif_name"]).column(c)
                                                .to_pylist() for c in ("motif_id", "motif_name")))}
    chroms = [r[0] for r in back]
    if fmt != "fimo":                            # FIMO's order (by p-value): tests/scan/test_qvalues.py
        for ch in set(chroms):                   # by contig, then start (files are grouped by motif)
            starts = [r[1] for r in back if r[0] == ch]
            assert starts == sorted(starts)
        assert chroms == sorted(chroms, key=chroms.index)
    if fmt == "fimo":
        line = dest.read_text().splitlines()[1].split("\t")
        start, stop, seq = int(line[3]), int(line[4]), line[9]
        assert len(seq) == stop - start + 1      # 1-based inclusive, matched sequence from the store


@pytest.mark.parametrize("args,msg", [
    (["scan", "{store}", MOTIFS, "--pvalue", "0", "--out", "{tmp}/o"], "p-value must be in (0, 1)"),
    (["scan", "{store}", MOTIFS, "--pvalue", "1.5", "--out", "{tmp}/o"], "p-value must be in (0, 1)"),
    (["scan", "{tmp}/nostore.zarr", MOTIFS, "--out", "{tmp}/o"], "not a motifgrid genome store"),
    (["scan", "{store}", "{tmp}/none.jaspar", "--out", "{tmp}/o"], "none.jaspar"),
    (["scan", "{small}", MOTIFS, "--out", "{tmp}/o"], "re-ingest with --halo 32"),
    (["ingest", "{tmp}/none.fa", "{tmp}/x.zarr"], "no such file"),
    (["export", "{tmp}", "--format", "bed", "-o", "{tmp}/x.bed"], "not a motifgrid hits dataset"),
])
def test_bad_input_one_line_exit_2(genome, tmp_path, args, msg):
    store, _ = genome
    small = tmp_path / "small.zarr"
    fa = tmp_path / "s.fa"
    fa.write_text(">s\nACGTACGTAC\n")
    ingest(fa, small, halo=10)
    args = [a.format(store=store.path, tmp=tmp_path, small=small) for a in args]
    r = _cli(*args)
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and msg in lines[0], r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "o" / "_summary.json").exists() and not (tmp_path / "x.zarr").exists()


def test_thresholds_command(tmp_path):
    """`motifgrid thresholds` writes one row per motif and strand, matching the scan's exact thresholds; a local run
    computes them on the command's threads (``distributed`` never imported: no cluster to start)."""
    from workers.distribution import pvalue_to_score
    from pipeline.motifs import pwm_from_motif, read_motifs

    out = tmp_path / "thr.tsv"
    code = ("import sys; from pipeline.cli.command import main; rc = main(sys.argv[1:]); "
            "print('distributed' in sys.modules); sys.exit(rc)")
    r = subprocess.run([sys.executable, "-c", code, "thresholds", MOTIFS, "--pvalue", "1e-4", "-o", str(out)],
                       capture_output=True, text=True, cwd=ROOT, timeout=180, env=subprocess_env())
    assert r.returncode == 0 and r.stdout.split() == ["False"], r.stderr
    lines = out.read_text().splitlines()
    head = lines[0].split("\t")
    rows = [dict(zip(head, x.split("\t"))) for x in lines[1:]]
    motifs = read_motifs(MOTIFS)
    assert len(rows) == 2 * len(motifs)
    for m, row in zip(motifs, rows[::2]):
        t = pvalue_to_score(pwm_from_motif(m, np.full(4, 0.25), 0.1), np.full(4, 0.25), 1e-4)
        assert row["motif_id"] == m.id and row["reachable"] == str(t.reachable)
        if t.reachable:
            assert float(row["threshold"]) == t.threshold
            assert 0 < float(row["pvalue"]) <= 1e-4


def test_demo_runs_and_resumes(tmp_path):
    """The demo on a new machine (an empty numba cache) says what its first seconds are for and where the time
    went; run again, it finds the kernels cached and the scan finished."""
    env = {"NUMBA_CACHE_DIR": str(tmp_path / "numba"), "COLUMNS": "300"}
    r = _cli("demo", "--dir", str(tmp_path / "demo"), "--motifs", MOTIFS, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert "strongest:" in r.stderr and "no cluster (a small job; dashboard off)" in r.stderr  # 2 Mb: threads
    assert "first run on this machine: compiling the scan and threshold kernels" in r.stderr
    assert "motifs with the most hits" in r.stderr                     # printed by the scan, once
    assert r.stderr.count("motifs with the most hits") == 1
    times = re.search(r"^time: [\d.]+ s in all — ingest [\d.]+ s, thresholds [\d.]+ s, scanning the blocks [\d.]+ s, "
                      r"the rest of the scan \(reading the motifs, starting the workers, q-values, summaries\) [\d.]+ s; "
                      r"numba's kernels compiled \(first run; cached now\) in the background, ready [\d.]+ s after "
                      r"the start$", r.stderr, re.M)
    assert times, r.stderr
    again = _cli("demo", "--dir", str(tmp_path / "demo"), "--motifs", MOTIFS, timeout=300, env=env)
    assert again.returncode == 0 and "already finished" in again.stderr
    assert "first run" not in again.stderr and "kernels loaded from numba's cache" in again.stderr, again.stderr


def test_small_scan_runs_on_threads_as_on_a_cluster(genome, finished, tmp_path):
    """A small local CPU scan runs on the command's own threads, no Dask cluster (``distributed`` is never imported),
    and writes what the 2-process cluster wrote: the hits, the q-value map and the peaks x motifs table.  With
    ``threads-max-positions`` 0 the same command starts its in-process cluster again, and a dashboard asked for
    (``dashboard-min-positions`` 0) gets one."""
    store, _ = genome
    out, _ = finished
    code = ("import sys; from pipeline.cli.command import main; rc = main(sys.argv[1:]); "
            "print('distributed' in sys.modules); sys.exit(rc)")
    runs = {}
    for name, env in (("threads", {}), ("cluster", {"DASK_MOTIFGRID__SCAN__THREADS_MAX_POSITIONS": "0"}),
                      ("dashboard", {"DASK_MOTIFGRID__SCAN__DASHBOARD_MIN_POSITIONS": "0"})):
        h = tmp_path / name
        r = subprocess.run([sys.executable, "-c", code, "scan", store.path, MOTIFS, "--pvalue", "1e-3", "--out",
                            str(h), "--device", "cpu", "--no-progress"], capture_output=True, text=True, cwd=ROOT,
                           timeout=180, env=subprocess_env(DASK_MOTIFGRID__SCAN__MIN_TASK_POSITIONS="16384", **env))
        assert r.returncode == 0, r.stderr
        runs[name] = (h, r)
    h, r = runs["threads"]
    assert re.search(r"on \d+ CPU thread\(s\), no cluster", r.stderr) and r.stdout.split() == ["False"], r.stderr
    assert json.loads((h / "_summary.json").read_text())["blocks"] > 2         # several tasks on the threads
    assert "1 CPU worker(s); dashboard: off" in runs["cluster"][1].stderr and runs["cluster"][1].stdout.split() == ["True"]
    assert re.search(r"1 CPU worker\(s\); dashboard: http://127\.0\.0\.1:\d+/status", runs["dashboard"][1].stderr)
    for h, _ in runs.values():
        assert table_rows(read_hits(str(h))) == table_rows(read_hits(str(out)))
        for name in ("_qvalues.parquet", "_region_counts.parquet"):
            assert pq.read_table(h / name).equals(pq.read_table(out / name)), name


def test_existing_scheduler(genome, finished, tmp_path):
    """`--scheduler ADDRESS`: a separately started `dask scheduler` + `dask worker` (loopback) runs the scan."""
    import socket

    store, _ = genome
    out, _ = finished
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    addr = f"tcp://127.0.0.1:{port}"
    env = subprocess_env()
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--dashboard-address", "127.0.0.1:0"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        deadline = time.time() + 60                   # the scheduler listens (a fixed 2 s sleep before)
        while time.time() < deadline and procs[0].poll() is None:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.05)
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", addr, "--nthreads", "2",
                                       "--host", "127.0.0.1", "--dashboard-address", "127.0.0.1:0"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        r = _cli("scan", store.path, MOTIFS, "--pvalue", "1e-3", "--out", str(tmp_path / "h"), "--scheduler", addr,
                 "--no-progress")
        assert r.returncode == 0, r.stderr
        assert "1 CPU worker(s)" in r.stderr
        assert table_rows(read_hits(str(tmp_path / "h"))) == table_rows(read_hits(str(out)))
    finally:
        for p in procs[::-1]:
            p.terminate()
            p.wait(timeout=30)


def test_compression_setting(genome, client, finished, tmp_path):
    """motifgrid.scan.compression picks the Parquet codec of the hits files (auto: zstd on CPU workers, snappy on
    GPU workers); the rows do not change."""
    import dask.config

    store, _ = genome
    out, _ = finished
    with dask.config.set({"motifgrid.scan.compression": "snappy"}):
        run_scan(store.path, MOTIFS, str(tmp_path / "snappy"), pvalue=1e-3, client=client, progress=False)
    f = next((tmp_path / "snappy").glob("*/**/part-*.parquet"))
    assert pq.ParquetFile(f).metadata.row_group(0).column(0).compression.upper() == "SNAPPY"
    assert table_rows(read_hits(str(tmp_path / "snappy"))) == table_rows(read_hits(str(out)))
    from pipeline.scan.plan import hits_compression

    assert dask.config.get("motifgrid.scan.compression") == "auto"
    assert (hits_compression("cpu"), hits_compression("gpu")) == ("zstd", "snappy")
    assert pq.ParquetFile(next(out.glob("*/**/part-*.parquet"))).metadata.row_group(0).column(0).compression == "ZSTD"
    with dask.config.set({"motifgrid.scan.compression": "rar"}), pytest.raises(ScanError, match="unknown Parquet codec"):
        run_scan(store.path, MOTIFS, str(tmp_path / "rar"), pvalue=1e-3, client=client, progress=False)
    assert not (tmp_path / "rar").exists()


def test_many_contigs_small_file_metadata_and_genome_order(chrx_slice, client, tmp_path):
    """A promoter-set-like FASTA (many short records, names not in alphabetical order): every hits file's
    key-value metadata stays small (the contig list is the store's, not copied into every file: it made each
    file of 26,454 promoters 2.4 MB), and export writes the contigs in FASTA order."""
    from pipeline.scan.export import export, parse_export

    names = [f"{'zyx'[i % 3]}NM_{(7 * i) % 150:03d}_up_2000_chr2L_{1000 * i}_f" for i in range(150)]
    fa = tmp_path / "promoters.fa"
    fa.write_text("".join(f">{n} some description\n{chrx_slice[i * 2000:(i + 1) * 2000]}\n" for i, n in enumerate(names)))
    store = ingest(fa, tmp_path / "p.zarr", block_size=4096, halo=40)
    out = tmp_path / "hits"
    res = run_scan(store.path, MOTIFS, str(out), pvalue=1e-3, client=client, progress=False)
    files = list(out.glob("*/**/part-*.parquet"))
    assert res.hits > 0 and 0 < len(files) <= store.n_blocks < 100      # files grow with blocks, not records
    for f in files:
        md = pq.ParquetFile(f).schema_arrow.metadata
        assert sum(len(k) + len(v) for k, v in md.items()) < 4096, f
    dest = tmp_path / "hits.bed"
    export(str(out), "bed", str(dest))
    chroms = list(dict.fromkeys(r[0] for r in parse_export(str(dest), "bed")))
    assert chroms == [n for n in names if n in set(chroms)] and len(chroms) > 100


def test_export_outputs_stdout_link_fifo(finished, tmp_path):
    """`export -o -` writes the records to standard output (it wrote a file named `-`) and its "wrote N hits" line
    to stderr; `-o /dev/stdout` the same without touching /dev/stdout; a symlinked output stays a link and its
    target gets the export; a FIFO is written straight into."""
    import threading

    out, _ = finished
    ref = tmp_path / "ref.bed"
    r = _cli("export", str(out), "--format", "bed", "-o", str(ref))
    assert r.returncode == 0 and r.stdout.startswith("wrote "), r.stderr
    want = ref.read_text()
    assert want.count("\n") > 10
    for dest in ("-", "/dev/stdout"):
        r = _cli("export", str(out), "--format", "bed", "-o", dest, cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout == want and "wrote " in r.stderr and "standard output" in r.stderr
    assert not (tmp_path / "-").exists()
    target = tmp_path / "results" / "hits.bed"
    target.parent.mkdir()
    target.write_text("old\n")
    link = tmp_path / "hits.bed"
    link.symlink_to(target)
    r = _cli("export", str(out), "--format", "bed", "-o", str(link))       # an existing file: --overwrite
    assert r.returncode == 2 and r.stderr.strip() == f"motifgrid export: error: {link}: exists; --overwrite to replace it"
    assert target.read_text() == "old\n"
    assert _cli("export", str(out), "--format", "bed", "-o", str(link), "--overwrite").returncode == 0
    assert link.is_symlink() and target.read_text() == want
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    r = _cli("export", str(out), "--format", "bed", "-o", str(fifo))
    reader.join(60)
    assert r.returncode == 0, r.stderr
    assert got == [want] and fifo.is_fifo()


def test_export_refuses_outputs_inside_an_output_folder(finished, tmp_path):
    """`export -o` into the hits folder it reads (or any motifgrid output folder, or below one) is refused in one line
    and the dataset stays readable (`-o H/hits.bed` left a dataset pandas and read_hits no longer read; `-o
    H/_run.json` overwrote the dataset's own file)."""
    import pyarrow.parquet as pq

    out, _ = finished
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    rows = table_rows(read_hits(str(out)))
    run = (out / "_run.json").read_bytes()
    for dest in (out / "hits.bed", out / "_run.json", out / "_manifest" / "x.bed",
                 next(out.glob("*/**/part-*.parquet"))):
        r = _cli("export", str(out), "--format", "bed", "-o", str(dest), "--overwrite")
        assert r.returncode == 2, r.stderr
        assert r.stderr.strip() == (f"motifgrid export: error: {dest}: inside the motifgrid output folder {out}; write "
                                    "it elsewhere (readers of that folder take every file in it as theirs)")
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before and (out / "_run.json").read_bytes() == run
    assert table_rows(read_hits(str(out))) == rows and pq.read_table(out).num_rows == len(rows)


def test_thresholds_outputs(tmp_path):
    """`thresholds -o` goes through the same writer: a symlinked output stays a link; `-o -` is standard output."""
    target = tmp_path / "t.tsv"
    link = tmp_path / "link.tsv"
    link.symlink_to(target)
    r = _cli("thresholds", MOTIFS, "-o", str(link))
    assert r.returncode == 0, r.stderr
    r2 = _cli("thresholds", MOTIFS, "-o", "-", cwd=tmp_path)
    assert r2.returncode == 0, r2.stderr
    assert link.is_symlink() and target.read_text() == r2.stdout and r2.stdout.startswith("motif_id\t")
    assert not (tmp_path / "-").exists()


def test_overwrite_replaces_only_a_hits_dataset(genome, finished, client, tmp_path):
    """--overwrite replaces a finished scan with a new one (same hits as a fresh scan at the new p-value, nothing of
    the old run left), only once the inputs are checked; any folder that is not a hits dataset, or that holds
    other files too, is refused and left as it was."""
    import shutil

    from pipeline.engine.dataset import open_run

    store, _ = genome
    out, _ = finished
    old = tmp_path / "old"
    shutil.copytree(out, old)
    (old / "chrom" / "gone").mkdir()                           # a record folder the new run will not write
    (old / "chrom" / "gone" / "part-b0000009.parquet").write_bytes(b"old")
    with pytest.raises(MotifError, match="none.jaspar: no such file"):         # bad input: the old run stays
        run_scan(store.path, str(tmp_path / "none.jaspar"), str(old), pvalue=1e-4, client=client, progress=False,
                 overwrite=True)
    assert (old / "_summary.json").exists() and (old / "chrom" / "gone").exists()
    res = run_scan(store.path, MOTIFS, str(old), pvalue=1e-4, client=client, progress=False, overwrite=True)
    fresh = run_scan(store.path, MOTIFS, str(tmp_path / "fresh"), pvalue=1e-4, client=client, progress=False)
    assert res.hits == fresh.hits and table_rows(read_hits(str(old))) == table_rows(read_hits(str(tmp_path / "fresh")))
    assert json.loads((old / "_run.json").read_text())["pvalue"] == 1e-4 and not (old / "chrom" / "gone").exists()

    other = tmp_path / "other"                                   # not a dataset: refused, untouched
    other.mkdir()
    (other / "notes.txt").write_text("mine\n")
    with pytest.raises(ScanError, match="is not a motifgrid hits dataset; --overwrite replaces only a motifgrid "
                                        "hits dataset"):
        open_run(str(other), {"hits_format": 1}, False, error=ScanError, overwrite=True)
    assert os.listdir(other) == ["notes.txt"]
    (old / "hits.bed").write_text("exported\n")                  # a dataset with a user's file in it
    with pytest.raises(ScanError, match=r"would remove files that are not part of the hits dataset \(hits.bed\)"):
        run_scan(store.path, MOTIFS, str(old), pvalue=1e-3, client=client, progress=False, overwrite=True)
    assert (old / "hits.bed").exists() and (old / "_summary.json").exists()
    comp = tmp_path / "comp"                                     # a dataset of another kind
    comp.mkdir()
    (comp / "_run.json").write_text(json.dumps({"composition_format": 1}))
    with pytest.raises(ScanError, match="holds a motifgrid dataset of another kind, not a hits dataset"):
        run_scan(store.path, MOTIFS, str(comp), pvalue=1e-3, client=client, progress=False, overwrite=True)
    with pytest.raises(ScanError, match="--resume completes the scan there, --overwrite replaces it"):
        run_scan(store.path, MOTIFS, str(old), pvalue=1e-3, client=client, progress=False, overwrite=True,
                 resume=True)


def test_scan_selected_motifs_and_provenance(genome, finished, client, tmp_path):
    """`--motif CTCF --motif MA0079` scans only those matrices: their hits are exactly the full scan's hits of
    those motifs, and the selection is recorded (_run.json, every file's metadata) beside the source."""
    store, _ = genome
    out, _ = finished
    sel = tmp_path / "sel"
    res = run_scan(store.path, MOTIFS, str(sel), pvalue=1e-3, client=client, progress=False,
                   select=["CTCF", "MA0079"])
    want = [r for r in table_rows(read_hits(str(out))) if r[4] in ("MA0139.2", "MA1930.2", "MA0079.5")]
    assert res.hits == len(want) > 0 and table_rows(read_hits(str(sel))) == want
    run = json.loads((sel / "_run.json").read_text())
    assert run["motifs_select"] == ["CTCF", "MA0079"] and run["motifs"] == 3 and run["motifs_source"] == MOTIFS
    md = pq.ParquetFile(next(sel.glob("*/**/part-*.parquet"))).schema_arrow.metadata
    assert json.loads(md[b"motifs.select"]) == ["CTCF", "MA0079"] and md[b"motifs.count"] == b"3"
    assert json.loads(pq.ParquetFile(next(out.glob("*/**/part-*.parquet"))).schema_arrow.metadata[b"motifs.select"]) is None
    with pytest.raises(ScanError, match="different parameters"):       # another selection is another run
        run_scan(store.path, MOTIFS, str(sel), pvalue=1e-3, client=client, progress=False, select=["CTCF"],
                 resume=True)


def test_thresholds_selected_motifs(tmp_path):
    """`thresholds --motif` gives the rows of those motifs only, equal to the full table's."""
    full = _cli("thresholds", MOTIFS, "--workers", "1")
    part = _cli("thresholds", MOTIFS, "--motif", "ctcf", "--motif", "SP1", "--workers", "1")
    assert full.returncode == 0 and part.returncode == 0, part.stderr
    keep = ("MA0079.5", "MA0139.2", "MA1930.2")
    rows = full.stdout.splitlines()
    assert part.stdout.splitlines() == [rows[0]] + [r for r in rows[1:] if r.split("\t")[0] in keep]


def test_plan_scan_starts_the_thresholds_beside_the_planning(genome, tmp_path):
    """``threshold_threads``: the thresholds start as the motifs are read and equal those computed afterwards; with
    the genome's background (read from the store) they wait for the execution; a refused output still raises."""
    from pipeline.scan.plan import plan_scan
    from pipeline.scan.motif_set import row_thresholds, threshold_plan

    store, _ = genome
    job = plan_scan(store.path, MOTIFS, str(tmp_path / "h"), pvalue=1e-3, threshold_threads=2)
    assert job.thresholds is not None
    plan, tables, keep, _ = threshold_plan(job.mset, 1e-3, early=job.thresholds)
    assert tables == row_thresholds(job.mset, 1e-3) and keep.size == len(tables)
    genome_bg = plan_scan(store.path, MOTIFS, str(tmp_path / "g"), pvalue=1e-3, background="genome",
                          threshold_threads=2)
    assert genome_bg.thresholds is None
    with pytest.raises(ScanError, match="holds an unfinished scan"):
        plan_scan(store.path, MOTIFS, str(tmp_path / "h"), pvalue=1e-3, threshold_threads=2)


def test_pinned_buffers_made_ahead_only_by_workers_of_many_threads():
    """``motifgrid.scan.reserve-pinned``: ``auto`` (the default) reserves on GPU worker processes of 8 threads or more
    (one process a GPU on a multi-GPU host), not on the 4 x 4 threads of one GPU, where page-locking beside the
    threshold tasks cost more than it saved (docs/benchmarks.md, issue 18); true and false as said (also from the
    environment's strings)."""
    import dask.config

    from pipeline.scan.graph import RESERVE_MIN_THREADS, reserve_workers

    assert dask.config.get("motifgrid.scan.reserve-pinned") == "auto" and RESERVE_MIN_THREADS == 8
    threads = {"tcp://a": 4, "tcp://b": 16, "tcp://c": 8}
    assert reserve_workers(threads, "auto") == ["tcp://b", "tcp://c"]
    assert reserve_workers({"tcp://a": 4, "tcp://d": 4}, "auto") == []
    assert reserve_workers(threads, True) == reserve_workers(threads, "true") == list(threads)
    assert reserve_workers(threads, False) == reserve_workers(threads, "false") == []


def test_overwrite_keeps_the_old_scan_until_the_new_one_is_under_way(tmp_path, chrx_slice):
    """``--overwrite`` sets the old dataset aside and removes it once the new run has a cluster: a run stopped
    before (no scheduler answering) puts it back, and an input inside the folder (the store a FASTA scan kept there)
    is refused; both had removed the old hits and left an unfinished folder."""
    import threading

    import dask.config

    from pipeline.cli.command import main

    fa = tmp_path / "peaks.fa"
    fa.write_text("".join(f">p{i}\n{chrx_slice[i * 500:(i + 1) * 500]}\n" for i in range(40)))
    out = tmp_path / "h"
    assert main(["scan", str(fa), MOTIFS, "--out", str(out), "--pvalue", "1e-3", "--no-progress"]) == 0
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def unchanged():
        now = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}
        assert now == before
        assert sorted(os.listdir(tmp_path)) == ["h", "peaks.fa"]        # nothing set aside left behind

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        assert main(["scan", str(fa), MOTIFS, "--out", str(out), "--overwrite", "--no-progress",
                     "--scheduler", "tcp://127.0.0.1:1"]) == 2
    unchanged()
    assert main(["scan", str(out / "_genome.zarr"), MOTIFS, "--out", str(out), "--overwrite", "--no-progress"]) == 2
    unchanged()
    assert main(["scan", str(fa), MOTIFS, "--out", str(out), "--overwrite", "--pvalue", "1e-4", "--no-progress"]) == 0
    for t in threading.enumerate():
        if t.name == "motifgrid-replaced":
            t.join()
    assert json.loads((out / "_run.json").read_text())["pvalue"] == 1e-4
    assert sorted(os.listdir(tmp_path)) == ["h", "peaks.fa"]


def test_export_of_an_unfinished_scan_warns_and_a_closed_pipe_is_quiet(finished, tmp_path):
    """An export of a scan that has not finished says so on stderr (it exported a part silently, q-values empty);
    a reader that stops early (`| head`) ends the export quietly (it was "error: Broken pipe", status 2)."""
    import shutil

    out, _ = finished
    part = tmp_path / "part"
    shutil.copytree(out, part)
    (part / "_summary.json").unlink()                        # what an interrupted run leaves: no summary
    r = _cli("export", str(part), "--format", "bed", "-o", str(tmp_path / "p.bed"))
    assert r.returncode == 0 and r.stderr.strip() == (
        f"motifgrid export: warning: {part} is an unfinished scan: only the hits of its finished blocks, without "
        "q-values (rerun its scan with --resume to complete it)"), r.stderr
    r = _cli("export", str(out), "--format", "bed", "-o", str(tmp_path / "f.bed"))
    assert r.returncode == 0 and "warning" not in r.stderr
    env = subprocess_env()
    p = subprocess.run(f"{sys.executable} -m pipeline.cli.command export {out} --format bed -o - | head -2", shell=True,
                       capture_output=True, text=True, env=env)
    assert p.stdout.count("\n") == 2 and "error" not in p.stderr, p.stderr


def test_fimo_export_refuses_sequences_from_another_genome(genome, client, tmp_path):
    """The FIMO export reads matched_sequence from the store the scan recorded: from a store re-ingested from
    another FASTA, or a removed one, it leaves the column empty and says why in one line (it printed the other
    genome's bases, or nothing, silently)."""
    import shutil

    store, seqs = genome
    copy = tmp_path / "g.zarr"
    shutil.copytree(store.path, copy)
    other = tmp_path / "other.fa"                  # the same records, the first 60 bases of each changed
    other.write_text("".join(f">{k}\n{'ACG' * 20}{s[60:]}\n" for k, s in seqs.items()))
    out = tmp_path / "h"
    run_scan(str(copy), MOTIFS, str(out), pvalue=1e-3, client=client, progress=False)
    r = _cli("export", str(out), "--format", "fimo", "-o", str(tmp_path / "ok.tsv"))
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    rows = (tmp_path / "ok.tsv").read_text().splitlines()[1:]
    assert rows and all(x.split("\t")[9] for x in rows)
    shutil.rmtree(copy)
    ingest(other, copy, block_size=16_384, halo=40)            # re-ingested from another FASTA
    for problem in ("holds another genome than the one scanned (its checksum differs)", "cannot be read"):
        r = _cli("export", str(out), "--format", "fimo", "-o", str(tmp_path / "x.tsv"), "--overwrite")
        assert r.returncode == 0 and r.stderr.startswith(
            f"motifgrid export: warning: matched_sequence left empty: the genome store the scan read, {copy}, "
            f"{problem}") and r.stderr.count("\n") == 1, r.stderr
        assert all(not x.split("\t")[9] for x in (tmp_path / "x.tsv").read_text().splitlines()[1:])
        shutil.rmtree(copy, ignore_errors=True)                 # then: the store removed


def test_interrupted_fasta_ingest_leaves_no_temporary_store(tmp_path, chrx_slice, monkeypatch):
    """Ctrl-C while a FASTA given to ``scan`` is ingested removes the temporary store beside the output (only a bad
    FASTA did; an interruption left an empty ``.motifgrid-scan-genome-*`` folder)."""
    import pipeline.io.genome
    from pipeline.scan.plan import plan_scan

    fa = tmp_path / "p.fa"
    fa.write_text(f">p\n{chrx_slice[:5000]}\n")

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline.io.genome, "ingest", interrupted)
    with pytest.raises(KeyboardInterrupt):
        plan_scan(str(fa), MOTIFS, str(tmp_path / "h"), pvalue=1e-3)
    assert sorted(os.listdir(tmp_path)) == ["p.fa"]


def test_matrices_sharing_an_id_are_named_in_one_warning_line(tmp_path, chrx_slice):
    """Two matrices with one id (HOMER files use the consensus as the id) are both scanned, and the scan says in one
    line that their q-values form one family (it pooled them silently)."""
    from pipeline.cli.command import main
    from pipeline.motifs import SharedIdWarning

    blocks = [">" + b for b in open(MOTIFS).read().split(">")[1:3]]
    first_id = blocks[0].split()[0][1:]
    shared = tmp_path / "shared.jaspar"
    shared.write_text(blocks[0] + blocks[1].replace(blocks[1].split()[0][1:], first_id, 1))
    fa = tmp_path / "p.fa"
    fa.write_text(f">p\n{chrx_slice[:20000]}\n")
    with pytest.warns(SharedIdWarning) as seen:
        assert main(["scan", str(fa), str(shared), "--out", str(tmp_path / "h"), "--pvalue", "1e-3",
                     "--no-progress"]) == 0
    assert [str(w.message) for w in seen if w.category is SharedIdWarning] == [
        f"{shared}: 1 motif id(s) name more than one matrix ({first_id} ×2); hits carry the id only, so matrices "
        "sharing one share their q-values (one Benjamini-Hochberg family); give them distinct ids to tell them apart"]
    assert SharedIdWarning.one_line                              # the CLI prints it as one line
    assert pq.read_table(tmp_path / "h" / "_thresholds.parquet").num_rows == 4       # both matrices, both strands


def test_a_scan_without_hits_reads_as_the_hits_columns(tmp_path):
    """A scan that finds no hit (a record of N, one shorter than every motif) leaves one empty data file: the
    folder reads with pandas as the documented columns, ``filters=`` work, and ``motifgrid summary`` names the
    genome and the command from its metadata (the folder read as a table without columns, and filtering raised)."""
    import pandas as pd

    from pipeline.cli.command import main
    from pipeline.io.schema import HITS_SCHEMA
    from pipeline.cli.summary import summarize

    fa = tmp_path / "none.fa"
    fa.write_text(">x\n" + "N" * 300 + "\n>y\nACGTAC\n")
    out = tmp_path / "h"
    assert main(["scan", str(fa), MOTIFS, "--out", str(out), "--no-progress"]) == 0
    df = pd.read_parquet(out, filters=[("pvalue", "<", 1e-6)])
    assert list(df.columns) == HITS_SCHEMA.names and len(df) == 0
    assert pq.read_table(out).schema.remove_metadata() == HITS_SCHEMA
    s = summarize(str(out))
    assert s["totals"]["hits"] == 0 and s["parameters"]["genome"] == str(out / "_genome.zarr")
    assert s["command"].split()[0] == "motifgrid"         # (in process: this pytest's arguments)


def test_minus_strand_scores_the_reverse_complement_motif_against_the_background(tmp_path, chrx_slice):
    """Under a background that is not strand-symmetric, a window's - strand score is its log-likelihood ratio for a
    site of the motif on the - strand: ``sum_k log2(p[m-1-k][comp(w_k)] / bg[w_k])`` with the motif's probabilities
    ``p`` (computed here from the counts as the docs say, not from the scan's matrices), and its p-value that
    score's tail under the background (all 4^m words); a palindromic matrix has one threshold on both strands.  The
    reverse-complemented log-odds matrix (MOODS) scores against the complemented background instead: a palindrome's
    thresholds were 3.27 and 7.17 bits here."""
    from pipeline.cli.command import main
    from pipeline.motifs import motif_probabilities, read_motifs
    from tests.reference import brute_force_pvalue

    bg = np.array([0.1, 0.2, 0.3, 0.4])
    (tmp_path / "m.jaspar").write_text(
        ">PAL1\tpalindrome\nA [ 80 10 5 5 75 10 ]\nC [ 5 10 85 10 5 5 ]\nG [ 5 5 10 85 10 5 ]\nT [ 10 75 5 5 10 80 ]\n"
        ">ASYM\tasym\nA [ 30 1 2 40 3 8 60 ]\nC [ 5 50 3 2 30 22 10 ]\nG [ 15 4 40 8 30 30 10 ]\nT [ 50 45 55 50 37 40 20 ]\n")
    spec = ",".join(map(str, bg))
    thr = tmp_path / "t.tsv"
    assert main(["thresholds", str(tmp_path / "m.jaspar"), "--pvalue", "1e-2", "--background", spec,
                 "--pseudocount", "0", "-o", str(thr)]) == 0
    rows = [ln.split("\t") for ln in thr.read_text().splitlines() if not ln.startswith(("#", "motif_id"))]
    pal = {r[2]: float(r[4]) for r in rows if r[0] == "PAL1"}
    assert pal["+"] == pytest.approx(pal["-"], abs=1e-9)
    fa = tmp_path / "s.fa"
    fa.write_text(f">s\n{chrx_slice[:60_000]}\n")
    out = tmp_path / "h"
    assert main(["scan", str(fa), str(tmp_path / "m.jaspar"), "--out", str(out), "--pvalue", "1e-3",
                 "--background", spec, "--pseudocount", "0.5", "--no-progress"]) == 0
    hits = read_hits(str(out)).to_pylist()
    motifs = {m.id: motif_probabilities(m, bg, 0.5) for m in read_motifs(tmp_path / "m.jaspar")}
    code = {c: i for i, c in enumerate("ACGT")}
    minus = [h for h in hits if h["strand"] == "-"]
    assert len(minus) > 20
    for h in minus[:200]:
        p = motifs[h["motif_id"]]
        w = [code[c] for c in chrx_slice[h["start"]:h["end"]].upper()]
        llr = sum(math.log2(p[len(w) - 1 - k][3 - x] / bg[x]) for k, x in enumerate(w))
        assert h["score"] == pytest.approx(llr, abs=1e-9)
    h = minus[0]
    p = motifs[h["motif_id"]]
    rc_llr = np.log2(p[::-1, ::-1] / bg)                       # the - strand matrix, from the probabilities
    assert brute_force_pvalue(rc_llr, bg, h["score"]) == pytest.approx(h["pvalue"], rel=1e-3)


def test_logodds_only_motifs_are_named_in_a_warning_and_reversed_on_the_minus_strand():
    """A MEME motif with a log-odds matrix only is scored as written (MEME's 100 x log2 odds): one warning names it
    (its scores are not bits; background and pseudocount do not change it), its - strand row is the matrix reversed
    and complemented whatever the background, and the probability motif beside it gets no warning of its own."""
    from pipeline.motifs import LogOddsWarning, motif_probabilities, read_motifs
    from pipeline.scan.motif_set import MotifSet

    src = DATA / "motifs" / "formats" / "logodds_only.meme"
    bg = np.array([0.1, 0.2, 0.3, 0.4])
    with pytest.warns(LogOddsWarning) as seen:
        mset = MotifSet.load(str(src), bg, 0.1)
    assert [str(w.message) for w in seen if w.category is LogOddsWarning] == [
        f"{src}: 1 motif(s) have a log-odds matrix only (LO): they are scored as written (MEME writes 100 x log2 odds, "
        "so their scores are not in bits like the others'), whatever the background and pseudocount; give their "
        "letter-probability matrices to score them in bits"]
    pwms, mi, st = mset.rows()
    assert mset.logodds == [True, False] and mi.tolist() == [0, 0, 1, 1] and st.tolist() == [0, 1, 0, 1]
    np.testing.assert_array_equal(pwms[1], np.array([[100, -100, -100, -100], [-100, 100, -100, -100]])[::-1, ::-1])
    p2 = motif_probabilities(read_motifs(src)[1], bg, 0.1)
    np.testing.assert_allclose(pwms[3], np.log2(p2[::-1, ::-1] / bg), rtol=0, atol=1e-12)
    assert mset.subset([1]).logodds == [False] and mset.subset([1]).ids == ["P2"]


def test_record_names_starting_with_a_hash_are_named_in_a_warning_on_bed_and_fimo_export(tmp_path, chrx_slice):
    """A record named ``#x`` begins its BED and FIMO TSV lines with '#', which comment-skipping readers drop: one
    warning per export says so (it was silent); GFF3 percent-encodes the name and says nothing."""
    import warnings

    from pipeline.cli.command import main
    from pipeline.scan.export import CommentNameWarning, export

    fa = tmp_path / "h.fa"
    fa.write_text(f">#x\n{chrx_slice[:30_000]}\n>y\n{chrx_slice[40_000:60_000]}\n")
    out = tmp_path / "h"
    assert main(["scan", str(fa), MOTIFS, "--out", str(out), "--pvalue", "1e-3", "--no-progress"]) == 0
    for fmt in ("bed", "fimo"):
        with pytest.warns(CommentNameWarning) as seen:
            n = export(str(out), fmt, str(tmp_path / f"o.{fmt}"))
        assert [str(w.message) for w in seen if w.category is CommentNameWarning] == [
            f"record '#x' (and any other named '#...') starts a line of the {fmt} output with '#': readers that skip "
            "comment lines (bedtools, pandas with comment='#') will drop its hits"]
        lines = (tmp_path / f"o.{fmt}").read_text().splitlines()
        assert n == len(lines) - (fmt == "fimo") and any(x.split("\t")[0 if fmt == "bed" else 2] == "#x" for x in lines)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CommentNameWarning)
        export(str(out), "gff3", str(tmp_path / "o.gff3"))
    assert "%23x\t" in (tmp_path / "o.gff3").read_text()


def test_hits_provenance_names_a_motif_file_by_its_absolute_path(tmp_path, chrx_slice, monkeypatch):
    """A motif file given by a relative path is recorded absolute in the hits files' provenance, which the
    notebooks read the motifs back from, wherever Jupyter runs (explore_hits.ipynb failed from another folder)."""
    import shutil

    from pipeline.cli.command import main

    shutil.copy(MOTIFS, tmp_path / "m.jaspar")
    (tmp_path / "s.fa").write_text(f">s\n{chrx_slice[:40_000]}\n")
    monkeypatch.chdir(tmp_path)
    assert main(["scan", "s.fa", "m.jaspar", "--out", "h", "--pvalue", "1e-3", "--no-progress"]) == 0
    part = next((tmp_path / "h").rglob("part-*.parquet"))
    md = {k.decode(): v.decode() for k, v in pq.read_schema(part).metadata.items()}
    assert md["motifs.source"] == str(tmp_path / "m.jaspar")


def test_fasta_scan_ingests_with_the_halo_its_longest_motif_needs(tmp_path, chrx_slice, client):
    """A FASTA given to ``scan`` with a motif longer than the default halo + 1 (128 columns) is ingested with the halo
    it needs (it was refused: "re-ingest with --halo 159", an option scan does not have): the hits of a 160-column
    matrix made from a window of the sequence are those of ingest(halo=159) + scan, the window itself among them."""
    seq = chrx_slice[:30_000]
    at = next(i for i in range(20_000, 29_000) if "N" not in seq[i:i + 160].upper())
    window = seq[at:at + 160].upper()
    rows = [" ".join("9" if b == x else "1" for b in window) for x in "ACGT"]
    motif = tmp_path / "long.jaspar"
    motif.write_text(">LONG1.1 long\n" + "".join(f"{x} [ {r} ]\n" for x, r in zip("ACGT", rows)))
    fa = tmp_path / "s.fa"
    fa.write_text(f">a\n{seq[:12_000]}\n>b\n{seq[12_000:]}\n")
    direct = run_scan(str(fa), str(motif), str(tmp_path / "h1"), pvalue=1e-4, client=client, progress=False)
    store = ingest(fa, tmp_path / "g.zarr", halo=159)
    run_scan(store.path, str(motif), str(tmp_path / "h2"), pvalue=1e-4, client=client, progress=False)
    cols = ["chrom", "start", "end", "strand", "motif_id", "score", "pvalue"]
    a, b = (read_hits(str(tmp_path / h)).select(cols).to_pylist() for h in ("h1", "h2"))
    key = lambda r: (str(r["chrom"]), r["start"], r["strand"])           # noqa: E731
    assert sorted(a, key=key) == sorted(b, key=key) and direct.hits == len(a) > 0
    assert any(r["chrom"] == "b" and r["start"] == at - 12_000 and r["strand"] == "+" for r in a)


def test_output_to_a_file_or_pipe_is_not_wrapped(genome, tmp_path):
    """Written to a pipe (a SLURM log, `2>&1 | grep`), the scan's lines are whole: rich wrapped them at 80 columns
    ("... 6.54e+09 window" / "scores/s ..." on the next line; a lone `p=6e-14`), which broke grep."""
    store, _ = genome
    out = tmp_path / "a-long-folder-name-so-that-the-lines-are-well-over-eighty-columns" / "hits"
    r = _cli("scan", store.path, MOTIFS, "--pvalue", "1e-3", "--out", str(out), "--no-progress")
    assert r.returncode == 0, r.stderr
    text = r.stdout + r.stderr
    done = next(ln for ln in text.splitlines() if ln.startswith("done: "))
    assert "window scores/s (" in done and done.endswith(" on cpu"), text
    assert any(ln.startswith("q-values: ") and ln.endswith("/_qvalues.parquet") for ln in text.splitlines()), text
    assert max(len(ln) for ln in text.splitlines()) > 100


@pytest.mark.parametrize("value", ["any", "count", "best-score"])
def test_matrix_export_equals_a_direct_count(tmp_path, chrx_slice, value):
    """`export --format matrix`: the peaks x motifs matrix (Matrix Market, rows.tsv, cols.tsv) as motifmatchr hands it
    to chromVAR — every record by every motif, those without a hit too — equal to a count made directly from the
    hits; and for a --regions scan, every BED region (overlapping ones too) by every motif, against hits counted
    inside each region."""
    import scipy.io

    rng = np.random.default_rng(46)
    fa = tmp_path / "peaks.fa"
    starts = rng.integers(0, len(chrx_slice) - 400, 60)
    lens = rng.integers(8, 400, 60)
    fa.write_text("".join(f">p{i}\n{chrx_slice[s:s + n]}\n" for i, (s, n) in enumerate(zip(starts, lens))))
    out = tmp_path / "hits"
    assert _cli("scan", str(fa), MOTIFS, "--pvalue", "1e-3", "--out", str(out), "--no-progress").returncode == 0
    hits = read_hits(str(out), max_qvalue=1)
    ids = pq.read_table(out / "_motif_summary.parquet").column("motif_id").to_pylist()

    def check(dest, rows_want, inside, least):
        r = _cli("export", str(out), "--format", "matrix", "-o", str(dest), "--value", value)
        assert r.returncode == 0, r.stderr
        m = scipy.io.mmread(dest / "matrix.mtx").toarray()
        rows = [ln.split("\t") for ln in (dest / "rows.tsv").read_text().splitlines()[1:]]
        cols = [ln.split("\t")[0] for ln in (dest / "cols.tsv").read_text().splitlines()[1:]]
        assert [(n, c, int(s), int(e)) for n, c, s, e in rows] == rows_want and cols == ids
        chrom, st, en = (np.array(hits.column(c).to_pylist()) for c in ("chrom", "start", "end"))
        mid, score = np.array(hits.column("motif_id").to_pylist()), np.array(hits.column("score").to_pylist())
        want = np.zeros((len(rows_want), len(ids)))
        for i, (_, c, s, e) in enumerate(rows_want):
            sel = inside(chrom, st, en, c, s, e)
            for j, mo in enumerate(ids):
                k = sel & (mid == mo)
                want[i, j] = (k.any() if value == "any" else k.sum() if value == "count"
                              else (score[k].max() if k.any() else 0))
        assert m.shape == want.shape and np.allclose(m, want, rtol=0, atol=1e-9) and (want > 0).sum() > least
        assert (want == 0).all(axis=1).any()                 # records without a hit are rows too

    names = [f"p{i}" for i in range(60)]
    check(tmp_path / "m1", [(n, n, 0, int(k)) for n, k in zip(names, lens)],
          lambda chrom, st, en, c, s, e: chrom == c, 20)
    bed = tmp_path / "r.bed"
    regions = [("p3", 0, 200, "a"), ("p3", 100, 300, "b"), ("p7", 10, 90, "c"), ("p9", 0, 5, "d")]
    bed.write_text("".join(f"{c}\t{s}\t{e}\t{n}\n" for c, s, e, n in regions))
    out2 = tmp_path / "hits2"
    assert _cli("scan", str(out / "_genome.zarr"), MOTIFS, "--pvalue", "1e-3", "--regions", str(bed), "--out",
                str(out2), "--no-progress").returncode == 0
    out, hits = out2, read_hits(str(out2), max_qvalue=1)
    check(tmp_path / "m2", [(n, c, s, min(e, int(lens[int(c[1:])]))) for c, s, e, n in regions],
          lambda chrom, st, en, c, s, e: (chrom == c) & (st >= s) & (en <= e), 5)


@pytest.mark.parametrize("convention", ["bed", "1-based"])
def test_parse_genomic_coord_equals_the_genome_scan_of_the_regions(tmp_path, chrx_slice, convention):
    """FIMO's --parse-genomic-coord: records named chrom:start-end (bedtools getfasta's BED coordinates, with (-) for
    a reverse complement; or samtools faidx's 1-based ones) give the hits that a scan of the genome store restricted
    to the same regions (--regions) gives — contig, positions, strand, motif, score, p-value — with the record's name
    kept; the FIMO export's matched sequences are the genome's."""
    from pipeline.scan.export import parse_export

    genome = tmp_path / "g.fa"
    genome.write_text(f">chrX\n{chrx_slice[:200_000]}\n>chrY\n{chrx_slice[200_000:260_000]}\n")
    regions = [("chrX", 1000, 1400, "+"), ("chrX", 5000, 5300, "+"), ("chrX", 90_000, 90_250, "-"),
               ("chrY", 1_500, 2_100, "+"), ("chrY", 30_000, 30_300, "-")]
    seqs = {"chrX": chrx_slice[:200_000], "chrY": chrx_slice[200_000:260_000]}
    comp = str.maketrans("ACGTNacgtn", "TGCANtgcan")
    shift = 0 if convention == "bed" else 1
    lines = []
    for c, a, b, st in regions:
        s = seqs[c][a:b]
        lines.append(f">{c}:{a + shift}-{b}{'(-)' if st == '-' else ''}\n"
                     f"{s.translate(comp)[::-1] if st == '-' else s}\n")
    peaks = tmp_path / "peaks.fa"
    peaks.write_text("".join(lines))
    (tmp_path / "r.bed").write_text("".join(f"{c}\t{a}\t{b}\n" for c, a, b, _ in regions))
    args = ["--pvalue", "1e-3", "--no-progress"]
    r = _cli("scan", str(peaks), MOTIFS, "--parse-genomic-coord", "--out", str(tmp_path / "p"), *args)
    assert r.returncode == 0, r.stderr
    assert _cli("scan", str(genome), MOTIFS, "--regions", str(tmp_path / "r.bed"), "--out", str(tmp_path / "g"),
                *args).returncode == 0
    cols = ("chrom", "start", "end", "strand", "motif_id")
    got_t, want_t = read_hits(str(tmp_path / "p")), read_hits(str(tmp_path / "g"))
    got = {tuple(r[:5]): r[5:] for r in zip(*(got_t.column(c).to_pylist() for c in (*cols, "score", "pvalue")))}
    want = {tuple(r[:5]): r[5:] for r in zip(*(want_t.column(c).to_pylist() for c in (*cols, "score", "pvalue")))}
    assert len(want) > 20 and set(got) == set(want)
    assert any(c == rc and a <= k[1] < b for k in got for rc, a, b, st in regions if st == "-" for c in [k[0]])
    for k in want:
        assert got[k][0] == pytest.approx(want[k][0], abs=1e-9) and got[k][1] == pytest.approx(want[k][1], rel=1e-9)
    names = {f"{c}:{a + shift}-{b}{'(-)' if st == '-' else ''}" for c, a, b, st in regions}
    assert set(got_t.column("record").to_pylist()) <= names and got_t.column_names.index("record") == 1
    assert _cli("export", str(tmp_path / "p"), "--format", "fimo", "-o", str(tmp_path / "p.tsv")).returncode == 0
    fimo = [ln.split("\t") for ln in (tmp_path / "p.tsv").read_text().splitlines()[1:]]
    assert sorted((c, s, e, st, m) for c, s, e, st, m, _ in parse_export(str(tmp_path / "p.tsv"), "fimo")) == sorted(
        got)
    for row in fimo:
        c, s, e, st, seq = row[2], int(row[3]) - 1, int(row[4]), row[5], row[9]
        text = seqs[c][s:e]
        assert seq.upper() == (text if st == "+" else text.translate(comp)[::-1]).upper()
    bad = tmp_path / "bad.fa"
    bad.write_text(">chrX:1000-1400\n" + seqs["chrX"][1000:1300] + "\n")
    r = _cli("scan", str(bad), MOTIFS, "--parse-genomic-coord", "--out", str(tmp_path / "b"), *args)
    assert r.returncode == 2 and "record 'chrX:1000-1400' holds 300 bases, but its name spans 400" in r.stderr


def test_exports_on_threads_equal_one_at_a_time_and_fimo_unsorted(finished, tmp_path):
    """Block files formatted side by side (motifgrid.export.threads) write the same bytes as one at a time, in every
    format; `--sort none` writes the FIMO TSV's lines in genome order (FIMO's --text), the same lines as FIMO's order."""
    out, _ = finished
    for fmt in ("bed", "gff3", "fimo"):
        a = _cli("export", str(out), "--format", fmt, "-o", str(tmp_path / f"a.{fmt}"),
                 env={"DASK_MOTIFGRID__EXPORT__THREADS": "1"})
        b = _cli("export", str(out), "--format", fmt, "-o", str(tmp_path / f"b.{fmt}"),
                 env={"DASK_MOTIFGRID__EXPORT__THREADS": "3", "DASK_MOTIFGRID__EXPORT__SORT_ROWS": "500"})
        assert a.returncode == b.returncode == 0, a.stderr + b.stderr
        assert (tmp_path / f"a.{fmt}").read_bytes() == (tmp_path / f"b.{fmt}").read_bytes()
        assert (tmp_path / f"a.{fmt}").read_text().count("\n") > 100
    r = _cli("export", str(out), "--format", "fimo", "--sort", "none", "-o", str(tmp_path / "n.tsv"))
    assert r.returncode == 0, r.stderr
    plain = (tmp_path / "n.tsv").read_text().splitlines()
    fimo = (tmp_path / "a.fimo").read_text().splitlines()
    assert plain[0] == fimo[0] and sorted(plain[1:]) == sorted(fimo[1:]) and plain != fimo
    store_order = {c: i for i, c in enumerate(["chrX_a", "contig/b|x=1"])}
    keys = [(store_order[x.split("\t")[2]], int(x.split("\t")[3])) for x in plain[1:]]
    assert keys == sorted(keys)
