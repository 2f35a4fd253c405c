"""`motifgrid summary PATH` and the per-motif TSV: every kind of output (scan, composition, compare, discover),
finished and unfinished, against counts taken from the data files themselves."""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter

import pyarrow.parquet as pq
import pytest

from pipeline.io.genome import ingest
from pipeline.motifs import read_motifs
from pipeline.scan.graph import run_scan
from pipeline.scan.read import read_hits
from pipeline.cli.summary import SummaryError, kind_of, summarize, summary_lines
from tests.conftest import DATA, ROOT, subprocess_env
from tests.planted import planted_instance

MOTIFS = str(DATA / "jaspar2024_subset.jaspar")


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cl, \
            Client(cl) as c:
        yield c


@pytest.fixture(scope="module")
def genome(tmp_path_factory, chrx_slice):
    """Three real contigs of different lengths, small blocks (many of them)."""
    d = tmp_path_factory.mktemp("sg")
    seqs = {"chrA": chrx_slice[:90_000], "chrB": chrx_slice[100_000:140_000], "chrC": chrx_slice[150_000:160_000]}
    fa = d / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        for k, s in seqs.items():
            f.write(f">{k}\n" + "\n".join(s[i:i + 80] for i in range(0, len(s), 80)) + "\n")
    return ingest(fa, d / "g.zarr", block_size=16_384, halo=40)


SCAN_CMD = "motifgrid scan g.zarr jaspar2024_subset.jaspar --pvalue 1e-3 --out hits"


@pytest.fixture(scope="module")
def scanned(genome, client, tmp_path_factory):
    out = tmp_path_factory.mktemp("ss") / "hits"
    run_scan(genome.path, MOTIFS, str(out), pvalue=1e-3, client=client, progress=False, command=SCAN_CMD)
    return out


def _counted(out):
    """Hits per motif, per (motif, strand) and per contig, counted from the Parquet files."""
    t = read_hits(str(out), columns=["chrom", "motif_id", "strand"]).to_pylist()
    return (Counter(r["motif_id"] for r in t), Counter((r["motif_id"], r["strand"]) for r in t),
            Counter(r["chrom"] for r in t), len(t))


def test_motif_summary_tsv_is_every_motif_by_hits(scanned):
    per_motif, per_strand, _, _ = _counted(scanned)
    lines = (scanned / "_motif_summary.tsv").read_text().splitlines()
    assert lines[0].split("\t") == ["motif_id", "motif_name", "hits_plus", "hits_minus", "hits", "reachable",
                                    "windows", "tests"]
    rows = [ln.split("\t") for ln in lines[1:]]
    order = [m.id for m in read_motifs(MOTIFS)]
    assert sorted(r[0] for r in rows) == sorted(order)                         # every motif, once
    hits = [int(r[4]) for r in rows]
    assert hits == sorted(hits, reverse=True)
    for mid, _name, plus, minus, h, _reach, _windows, _tests in rows:
        assert (int(plus), int(minus), int(h)) == (per_strand[(mid, "+")], per_strand[(mid, "-")], per_motif[mid])
    ties = [r[0] for r in rows if int(r[4]) == hits[-1]]
    assert ties == [m for m in order if m in ties]                           # ties keep the file's order


def test_scan_summary(scanned, genome):
    per_motif, _, per_chrom, n = _counted(scanned)
    s = summarize(str(scanned), top=3, contigs=2)
    assert s["kind"] == "scan" and s["finished"] and s["next"] is None and s["path"] == str(scanned)
    p = s["parameters"]
    assert p["genome"] == os.path.abspath(genome.path) and p["motifs"] == MOTIFS and p["motif_count"] == 12
    assert p["pvalue"] == 1e-3 and p["background"] == "uniform" and s["command"] == SCAN_CMD
    assert s["progress"] == {"unit": "blocks", "done": len(genome.blocks()), "total": len(genome.blocks())}
    assert s["totals"]["hits"] == n and s["totals"]["contigs_with_hits"] == 3
    assert [m["hits"] for m in s["top_motifs"]] == sorted(per_motif.values(), reverse=True)[:3]
    assert all(per_motif[m["motif_id"]] == m["hits"] for m in s["top_motifs"])
    assert s["contigs"] == [{"chrom": c, "hits": h} for c, h in sorted(per_chrom.items(), key=lambda x: -x[1])[:2]]
    thr = pq.read_table(scanned / "_thresholds.parquet").to_pylist()
    unreach = sorted({r["motif_id"] for r in thr if not r["reachable"]})
    assert s["thresholds"]["rows"] == len(thr) == 24 and sorted(s["thresholds"]["unreachable_motifs"]) == unreach
    json.dumps(s)                                     # plain JSON


def test_unfinished_scan_then_resume(scanned, genome, client, tmp_path):
    """An interrupted run's state: some blocks' manifest entries and files, no _summary.json."""
    out = tmp_path / "hits"
    shutil.copytree(scanned, out)
    (out / "_summary.json").unlink()
    (out / "_motif_summary.parquet").unlink()
    entries = sorted((out / "_manifest").glob("*.json"))
    gone = entries[::2]
    for e in gone:
        rec = json.loads(e.read_text())
        if rec["file"]:
            (out / rec["file"]).unlink()
        e.unlink()
    kept = [json.loads(e.read_text()) for e in entries[1::2]]
    s = summarize(str(out))
    assert not s["finished"] and s["kind"] == "scan"
    orphan = out / kept[0]["file"]                      # a killed writer's file: no manifest entry, not counted
    orphan = orphan.with_name("part-b9999999.parquet")
    shutil.copyfile(out / kept[0]["file"], orphan)
    assert summarize(str(out))["contigs"] == s["contigs"]
    orphan.unlink()
    assert s["progress"] == {"unit": "blocks", "done": len(kept), "total": len(genome.blocks())}
    assert s["totals"]["hits"] == sum(e["hits"] for e in kept) == len(read_hits(str(out), columns=["start"]))
    assert s["next"] == f"unfinished; complete it with: {SCAN_CMD} --resume"
    assert s["top_motifs"] == [] and s["thresholds"] is None
    r = _cli("summary", out)
    assert r.returncode == 0 and "UNFINISHED" in r.stdout and f"blocks done: {len(kept)} of {len(genome.blocks())}" \
        in r.stdout and "--resume" in r.stdout, r.stdout + r.stderr
    run_scan(genome.path, MOTIFS, str(out), pvalue=1e-3, client=client, progress=False, resume=True, command=SCAN_CMD)
    again, first = summarize(str(out)), summarize(str(scanned))
    for k in ("finished", "progress", "totals", "top_motifs", "contigs", "thresholds", "parameters"):
        assert again[k] == first[k], k


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "pipeline.cli", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, timeout=180, env=subprocess_env())


def test_cli_summary_text_json_and_errors(scanned, tmp_path):
    per_motif, _, _, n = _counted(scanned)
    r = _cli("summary", scanned, "--top", "2")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert text.startswith(f"scan: {scanned} (finished)") and f"{n:,} hits" in text and SCAN_CMD in text
    best = max(per_motif.values())
    assert f"{best:,} hits" in text and str(scanned / "_motif_summary.tsv") in text
    j = json.loads(_cli("summary", scanned, "--json").stdout)
    assert j["totals"]["hits"] == n and j["kind"] == "scan"
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "x.txt").write_text("x")
    for path, msg in ((tmp_path / "plain", "not a motifgrid output"), (tmp_path / "nope", "no such file"),
                      (tmp_path / "plain" / "x.txt", "is a file")):
        r = _cli("summary", path)
        assert r.returncode == 2 and msg in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
    with pytest.raises(SummaryError):
        kind_of(str(tmp_path / "plain"))


def test_scan_prints_top_motifs(genome, tmp_path):
    """The end of `motifgrid scan` lists the motifs with the most hits (what the demo showed alone before)."""
    out = tmp_path / "h"
    r = _cli("scan", genome.path, MOTIFS, "--pvalue", "1e-3", "--out", out, "--no-progress", "--workers", "1")
    assert r.returncode == 0, r.stderr
    per_motif, _, _, _ = _counted(out)
    order = {m.id: i for i, m in enumerate(read_motifs(MOTIFS))}
    top = sorted(per_motif.items(), key=lambda kv: (-kv[1], order[kv[0]]))[:5]
    listed = re.findall(r"^  (\S+) \((\S+)\) +([\d,]+) hits", r.stderr[r.stderr.index("motifs with the most hits"):],
                        re.M)
    assert [(mid, int(h.replace(",", ""))) for _, mid, h in listed] == top, r.stderr
    assert "_motif_summary.tsv" in r.stderr and (out / "_motif_summary.tsv").exists()


def test_composition_summary(genome, client, tmp_path, chrx_slice):
    from pipeline.composition.run import read_matches, run_composition

    tfa = tmp_path / "t.fa"
    tfa.write_text("".join(f">t{i}\n{chrx_slice[1000 + 997 * i:1000 + 997 * i + 20 + i]}\n" for i in range(6)))
    out = tmp_path / "comp"
    import dask.config

    with dask.config.set({"motifgrid.composition.min-task-positions": 20_000}):     # several tasks
        run_composition(str(tfa), genome.path, str(out), min_similarity=0.9, client=client, progress=False,
                        command="motifgrid composition t.fa g.zarr --out comp")
    s = summarize(str(out), top=3)
    m = read_matches(str(out), columns=["chrom", "test_id"]).to_pylist()
    assert s["kind"] == "composition" and s["finished"] and s["totals"]["matches"] == len(m)
    per_test, per_chrom = Counter(r["test_id"] for r in m), Counter(r["chrom"] for r in m)
    assert [t["matches"] for t in s["top_tests"]] == sorted(per_test.values(), reverse=True)[:3]
    assert {c["chrom"]: c["hits"] for c in s["contigs"]} == dict(per_chrom.most_common(5))
    assert s["progress"]["done"] == s["progress"]["total"] >= 1
    assert s["parameters"]["tests"] == str(tfa) and s["parameters"]["min_similarity"] == 0.9
    # interrupted: one task's entry, counts and files gone, no _summary.json
    part = tmp_path / "part"
    shutil.copytree(out, part)
    (part / "_summary.json").unlink()
    entry = max((part / "_manifest").glob("*.json"), key=lambda p: json.loads(p.read_text())["hits"])
    e = json.loads(entry.read_text())
    for f in e["files"]:
        (part / f).unlink()
    (part / "_manifest" / e["counts"]).unlink()
    entry.unlink()
    u = summarize(str(part))
    total = s["progress"]["total"]
    assert total >= 3 and not u["finished"] and u["progress"] == {"unit": "tasks", "done": total - 1, "total": total}
    assert u["totals"]["matches"] == s["totals"]["matches"] - e["hits"] and e["hits"] > 0
    assert u["next"] == "unfinished; complete it with: motifgrid composition t.fa g.zarr --out comp --resume"


def test_counts_only_composition_summary_names_its_genome_and_command(genome, client, tmp_path, chrx_slice):
    """A --counts-only run writes no match file to carry the provenance: summary takes the genome and the command
    from its _summary.json (both were missing)."""
    from pipeline.composition.run import run_composition

    tfa = tmp_path / "t.fa"
    tfa.write_text("".join(f">t{i}\n{chrx_slice[2000 + 501 * i:2000 + 501 * i + 24]}\n" for i in range(3)))
    out = tmp_path / "counts"
    cmd = "motifgrid composition t.fa g.zarr --counts-only --out counts"
    run_composition(str(tfa), genome.path, str(out), min_similarity=0.9, client=client, progress=False,
                    command=cmd, counts_only=True)
    s = summarize(str(out))
    assert s["command"] == cmd and s["parameters"]["genome"] == os.path.abspath(genome.path)
    assert not list(out.rglob("part-*.parquet"))


def test_scan_summary_says_the_qvalues_and_max_qvalue(genome, client, tmp_path):
    """A scan with --max-qvalue: summary gives the hits at the level, the tests, the strands and the setting, and
    says in its text that reads and exports keep those hits (its hit count and export's disagreed unexplained)."""
    out = tmp_path / "q"
    run_scan(genome.path, MOTIFS, str(out), pvalue=1e-3, client=client, progress=False, max_qvalue=0.5,
             strands="-")
    q = pq.read_table(out / "_qvalues.parquet")
    kept = read_hits(str(out), columns=["qvalue"]).num_rows
    total = read_hits(str(out), columns=["qvalue"], max_qvalue=1.0).num_rows
    s = summarize(str(out))
    assert s["parameters"]["strands"] == "-" and s["parameters"]["max_qvalue"] == 0.5
    assert s["qvalues"]["hits_at_level"] == kept < total == s["totals"]["hits"] and s["qvalues"]["level"] == 0.5
    assert q.num_rows > 0 and s["qvalues"]["tests"] > 0
    text = "\n".join(summary_lines(s))
    assert (f"  q-values: {kept:,} of {total:,} hits have q <= 0.5 (Benjamini-Hochberg per motif over "
            f"{s['qvalues']['tests']:,} tests); --max-qvalue 0.5: reads and exports keep those {kept:,}") in text


@pytest.mark.filterwarnings("ignore:12 target motifs")
def test_compare_summary(client, tmp_path):
    import pyarrow.parquet as pq

    from pipeline.compare.run import CompareSettings, read_pairs, run_compare

    tom = tmp_path / "tom"
    run_compare(MOTIFS, None, str(tom), client, command="motifgrid compare jaspar2024_subset.jaspar --out tom")
    s = summarize(str(tom), top=3)
    best = [r for r in pq.read_table(tom / "best_matches.parquet").to_pylist() if r["rank"] == 1]
    assert s["kind"] == "compare" and s["finished"] and s["parameters"]["method"] == "tomtom"
    assert s["totals"] == {"queries": 12, "targets": 12, "pairs": 132, "clusters": None}
    assert [r["pvalue"] for r in s["top_matches"]] == sorted(r["pvalue"] for r in best)[:3]
    out = tmp_path / "cmp"
    run_compare(MOTIFS, None, str(out), client, CompareSettings(method="occurrence"),
                command="motifgrid compare jaspar2024_subset.jaspar --out cmp")
    s = summarize(str(out), top=2)
    pairs = read_pairs(str(out)).to_pylist()
    assert s["kind"] == "compare" and s["finished"] and s["totals"]["pairs"] == len(pairs) == 66
    best = sorted(pairs, key=lambda r: -r["similarity"])[:2]
    assert [r["similarity"] for r in s["top_pairs"]] == [r["similarity"] for r in best]
    assert s["command"] == "motifgrid compare jaspar2024_subset.jaspar --out cmp"
    (out / "_summary.json").unlink()                  # as if interrupted: compare does not resume
    u = summarize(str(out))
    assert not u["finished"] and "does not resume" in u["next"]


def test_discover_summary(client, tmp_path):
    from pipeline.discover.run import run_discover
    from pipeline.discover.inputs import DiscoverSettings

    fa = planted_instance(10, 1, t=10, n=120, seed=2).write(tmp_path / "p.fa")
    out = tmp_path / "found"
    res = run_discover(fa, str(out), DiscoverSettings(width=10, mutations=1, algorithm="projection", seed=0),
                       client, command="motifgrid discover p.fa --width 10 --out found")
    s = summarize(str(out))
    assert s["kind"] == "discover" and s["finished"] and s["totals"]["motifs"] == 1
    assert s["motifs"][0]["consensus"] == res.motifs[0]["consensus"] and s["seconds"] == res.seconds
    assert s["parameters"]["width"] == 10 and s["parameters"]["n_sequences"] == 10
    (out / "summary.json").unlink()
    u = summarize(str(out))
    assert not u["finished"] and "does not resume" in u["next"] and "motifs.meme" in u["files"]


def test_region_scan_summary_counts_each_hit_once(genome, client, tmp_path):
    """A scan of overlapping BED regions: its region counts count a hit in every region holding it, its summary's
    hits per contig each hit once; an unfinished one's total is the blocks holding a region's window."""
    bed = tmp_path / "r.bed"
    bed.write_text("chrA\t1000\t9000\ta\nchrA\t2000\t5000\tb\nchrA\t2000\t5000\tc\nchrB\t0\t40000\td\n")
    out = tmp_path / "hits"
    run_scan(genome.path, MOTIFS, str(out), pvalue=1e-3, client=client, progress=False, regions=str(bed))
    s = summarize(str(out))
    per_chrom = Counter(read_hits(str(out), columns=["chrom"]).column("chrom").to_pylist())
    assert {c["chrom"]: c["hits"] for c in s["contigs"]} == dict(per_chrom)
    assert s["totals"]["hits"] == sum(per_chrom.values())
    (out / "_summary.json").unlink()
    assert summarize(str(out))["progress"]["total"] == s["progress"]["total"] < len(genome.blocks())
