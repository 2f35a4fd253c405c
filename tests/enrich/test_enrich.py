"""motifgrid enrich end to end: counts against an independent scorer, statistics against scipy, real peak sets,
shuffled and genomic controls, seeds, the output folder, the summary."""
from __future__ import annotations

import csv
import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.enrich.run import EnrichRunError, EnrichSettings, run_enrich
from tests.conftest import DATA, SHARED, needs_shared
from tests.reference import has_site, naive_scan

MOTIFS = str(DATA / "jaspar2024_subset.jaspar")


@pytest.fixture(scope="module")
def client():
    from pipeline.engine.cluster import get_client

    with get_client(device="cpu", quiet=True, dashboard=False) as (c, _):
        yield c


def _fasta_records(path) -> dict:
    opener = gzip.open if str(path).endswith(".gz") else open
    recs, name = {}, None
    with opener(path, "rt") as f:
        for line in f:
            line = line.strip()
            if line.startswith(">"):
                name = line[1:].split()[0]
                recs[name] = []
            elif name is not None:
                recs[name].append(line.upper())
    return {k: "".join(v) for k, v in recs.items()}


def _write_fasta(path, recs: dict) -> str:
    Path(path).write_text("".join(f">{k}\n{v}\n" for k, v in recs.items()))
    return str(path)


def _ctcf(n: int) -> dict:
    recs = _fasta_records(DATA / "ctcf_gm12878_top500.fa.gz")
    return dict(list(recs.items())[:n])


def _dinucleotides(seq: str) -> dict:
    s = "".join(c if c in "ACGT" else "N" for c in seq)
    out: dict = {}
    for a, b in zip(s, s[1:]):
        out[a + b] = out.get(a + b, 0) + 1
    return out


def _table(out) -> list:
    return pq.read_table(Path(out) / "enrichment.parquet").to_pylist()


# ------------------------------------------------------------------------------------ counts and statistics
def test_counts_equal_an_independent_scorer(tmp_path, client):
    """pos_seqs / neg_seqs of every motif = the targets / controls (control.fa) with a window at or above the
    motif's threshold on either strand, by a plain float64 scorer; every sequence counts in the totals, also an
    empty one, one shorter than the motifs and one of N only; the shuffles keep each record's doublets."""
    from pipeline.motifs import pwm_from_motif, read_motifs, reverse_complement
    from pipeline.scan.motif_set import MotifSet, row_thresholds

    import dask.config

    recs = _ctcf(120)
    recs.update({"short": "ACGT", "empty": "", "ns": "N" * 40, "gap": "ACGTTGCA" * 10 + "N" * 30 + "GGCCAATT" * 10})
    fa = _write_fasta(tmp_path / "t.fa", recs)
    out = tmp_path / "out"
    with dask.config.set({"motifgrid.enrich.block-size": 4096}):        # ~24 blocks: many records straddle two
        res = run_enrich(fa, MOTIFS, str(out), client, EnrichSettings(pvalue=1e-3, shuffles=3, seed=3, cluster=None))
    controls = _fasta_records(out / "control.fa")
    assert list(controls) == [f"{k}|shuf{j}" for k in recs for j in (1, 2, 3)]
    for name, seq in controls.items():
        orig = recs[name.rsplit("|", 1)[0]]
        assert len(seq) == len(orig) and _dinucleotides(seq) == _dinucleotides(orig)
        assert seq[:1] == orig[:1] and seq[-1:] == orig[-1:]
    motifs = read_motifs(MOTIFS)
    bg = np.full(4, 0.25)
    thr = row_thresholds(MotifSet.load(MOTIFS, bg, 0.1), 1e-3)
    rows = {r["motif_id"]: r for r in _table(out)}
    for k, m in enumerate(motifs):
        w = pwm_from_motif(m, bg, 0.1)
        tp, tm = thr[2 * k], thr[2 * k + 1]

        def site(seq):
            return (tp.reachable and has_site(seq, w, tp.threshold)) or \
                (tm.reachable and has_site(seq, reverse_complement(w), tm.threshold))

        r = rows[m.id]
        assert (r["pos_total"], r["neg_total"]) == (len(recs), 3 * len(recs))
        assert r["pos_seqs"] == sum(site(s) for s in recs.values()), m.id
        assert r["neg_seqs"] == sum(site(s) for s in controls.values()), m.id
    assert rows["MA0139.2"]["pos_seqs"] > 80
    assert res["targets"] == len(recs) and res["controls"] == 3 * len(recs)
    # the best motif's sites (the second scan, of the top motifs only): every target window at its thresholds
    best = next(r for r in rows.values() if r["rank"] == 1)
    k = next(i for i, m in enumerate(motifs) if m.id == best["motif_id"])
    w = pwm_from_motif(motifs[k], bg, 0.1)
    want = sorted((name, pos, "+-"[row], round(score, 6)) for name, seq in recs.items()
                  for pos, row, score in naive_scan(seq, [w, reverse_complement(w)],
                                                    [thr[2 * k].threshold, thr[2 * k + 1].threshold]))
    got = sorted((s["sequence"], s["start"], s["strand"], round(s["score"], 6))
                 for s in pq.read_table(out / "sites.parquet").to_pylist() if s["rank"] == 1)
    assert len(want) > 80 and got == want
    assert not (out / "_sites_hits").exists() and not (out / "_hits").exists()


def test_unreachable_motifs_are_reported_and_never_counted_as_enriched(tmp_path, client):
    """A motif that cannot reach ``--pvalue`` (Arnt's 6 columns at 1e-9) has no site: the command's lines name it as
    scan's do, and its row (0 of 25 targets, p = 1, E = 1 in a run of one motif) is counted enriched neither at
    q <= 0.05 nor at E <= 1."""
    from pipeline.enrich.run import execute_enrich, plan_enrich, result_lines

    fa = _write_fasta(tmp_path / "t.fa", _ctcf(25))
    job = plan_enrich(fa, MOTIFS, str(tmp_path / "o"), EnrichSettings(pvalue=1e-9, select=["MA0004.1"], cluster=None,
                                                                      top=1))
    res = execute_enrich(job, client, progress=False)
    row = _table(tmp_path / "o")[0]
    assert (row["pos_seqs"], row["neg_seqs"], row["pvalue"], row["evalue"]) == (0, 0, 1.0, 1.0)
    assert res["unreachable_motifs"] == ["MA0004.1"] and res["significant"] == {"qvalue_0.05": 0, "evalue_1": 0}
    lines = result_lines(job, res)
    assert lines[0].startswith("1 motifs: 0 enriched at q <= 0.05, 0 at E <= 1")
    assert lines[1] == ("1 of 1 motif(s) cannot reach the p-value (1e-09) on some strand and have no sites there: "
                        "MA0004.1")


def _check_statistics(table: list, n_tests: int) -> None:
    """p-values, odds ratios, E and q of every row against scipy on the reported counts."""
    from scipy.stats import false_discovery_control, fisher_exact

    p_ref, lp = [], []
    for r in table:
        a, n1, c, n2 = r["pos_seqs"], r["pos_total"], r["neg_seqs"], r["neg_total"]
        res = fisher_exact([[a, n1 - a], [c, n2 - c]], alternative="greater")
        p_ref.append(res.pvalue)
        lp.append(r["log10_pvalue"])
        if res.pvalue > 1e-290:
            assert abs(r["log10_pvalue"] - np.log10(res.pvalue)) < 1e-8, r
        else:
            assert r["log10_pvalue"] < -285
        b, d = n1 - a, n2 - c
        h = 0.5 if 0 in (a, b, c, d) else 0.0
        assert r["odds_ratio"] == pytest.approx((a + h) * (d + h) / ((b + h) * (c + h)), rel=1e-12)
        assert r["evalue"] == pytest.approx(min(r["pvalue"] * n_tests, n_tests), rel=1e-9)
    assert lp == sorted(lp)                                               # best first
    q = false_discovery_control(np.maximum(p_ref, 1e-300))
    got = np.array([r["qvalue"] for r in table])
    big = np.array(p_ref) > 1e-290
    np.testing.assert_allclose(got[big], q[big], rtol=1e-8)
    assert [r["rank"] for r in table] == list(range(1, len(table) + 1))


@pytest.mark.parametrize("grouped", [False, True])
def test_sequences_with_hits_counts_each_record_once(tmp_path, grouped):
    """Per motif, the targets and controls with a hit from the blocks' (record, motif) rows = the distinct pairs
    over all blocks, where records crossing one or two block borders have rows in two or three blocks; the same
    from blocks that count their own records per (group, motif) and list only the records they share."""
    from types import SimpleNamespace

    import pyarrow as pa

    from pipeline.enrich.run import sequences_with_hits
    from pipeline.scan.region_counts import block_presence, split_keys

    rng = np.random.default_rng(6)
    B, T, M = 1000, 40, 9                                    # block size, targets, motifs; 40 controls after them
    lengths = rng.integers(50, 400, 2 * T)
    lengths[[5, 47]] = 2300                                  # across two block borders
    offsets = np.r_[0, np.cumsum(lengths + 10)[:-1]]
    ends = offsets + lengths
    groups, split = np.repeat([0, 1], [T, T]), split_keys(offsets, ends, B)
    (tmp_path / "_counts").mkdir()
    pairs = set()
    for b in range(int(ends[-1] // B) + 1):
        rows = []
        for r in np.flatnonzero((offsets < (b + 1) * B) & (ends > b * B)).tolist():
            for m in np.flatnonzero(rng.random(M) < 0.4).tolist():
                rows.append((r, m))
                pairs.add((r, m))
        rows.sort()
        key, motif = np.array([r for r, _ in rows], np.int64), np.array([m for _, m in rows], np.int32)
        table = (block_presence(key, motif, M, groups, split) if grouped else
                 pa.table({"key": pa.array(key, pa.int64()), "motif": pa.array(motif, pa.int32())}))
        pq.write_table(table, tmp_path / "_counts" / f"b{b:04d}.parquet")
    store = SimpleNamespace(records=SimpleNamespace(offsets=offsets, ends=ends), block_size=B)
    pos, neg = sequences_with_hits(str(tmp_path), store, T, M, grouped=grouped)
    want_pos = np.bincount([m for r, m in pairs if r < T], minlength=M)
    want_neg = np.bincount([m for r, m in pairs if r >= T], minlength=M)
    assert np.array_equal(pos, want_pos) and np.array_equal(neg, want_neg)
    assert pos.sum() + neg.sum() == len(pairs)


def test_site_order_equals_lexsort():
    """The sites' packed-key order = the four-key lexsort (rank, record, start, strand), also where the key would
    not fit in 63 bits (then it is the lexsort)."""
    from pipeline.enrich.outputs import _site_order

    rng = np.random.default_rng(2)
    n = 20_000
    for big in (False, True):
        rank = rng.integers(1, 21, n).astype(np.int32)
        rec = rng.integers(0, 10**5, n)
        start = rng.integers(0, 2**45 if big else 600, n)
        minus = rng.integers(0, 2, n).astype(np.int8)
        key = np.unique(np.stack([rank, rec, start, minus]), axis=1)       # sites are distinct
        rank, rec, start, minus = key[0].astype(np.int32), key[1], key[2], key[3].astype(np.int8)
        p = rng.permutation(rank.size)
        rank, rec, start, minus = rank[p], rec[p], start[p], minus[p]
        assert np.array_equal(_site_order(rank, rec, start, minus), np.lexsort((minus, start, rec, rank)))
    assert _site_order(*(np.zeros(0, np.int64),) * 4).size == 0


@needs_shared
def test_ctcf_peaks_give_ctcf_first(tmp_path, capfd):
    """CTCF's 500 strongest GM12878 summits against their shuffles, the 879 JASPAR 2024 vertebrate matrices,
    through the CLI: a CTCF matrix first, its family in the first cluster, centrally enriched; Fisher against
    scipy; ``motifgrid summary`` reads the folder."""
    from pipeline.cli.command import main
    from pipeline.cli.summary import summarize

    motifs = SHARED / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar"
    out = tmp_path / "ctcf"
    assert main(["enrich", str(DATA / "ctcf_gm12878_top500.fa.gz"), "--motifs", str(motifs), "--out", str(out),
                 "--centrality", "--top", "5", "--no-progress", "--seed", "1"]) == 0
    err = capfd.readouterr().err
    assert "1. CTCF (MA0139.2)" in err
    table = _table(out)
    _check_statistics(table, 879)
    top = table[0]
    assert top["motif_name"] == "CTCF" and top["motif_id"].startswith("MA0139")
    assert top["pos_seqs"] > 450 and top["neg_seqs"] < 100 and top["log10_pvalue"] < -150
    ctcf_family = {r["motif_id"]: r for r in table if r["motif_name"] in ("CTCF", "CTCFL")}
    assert all(r["cluster"] == 0 and r["representative"] == top["motif_id"] for r in ctcf_family.values())
    assert top["centrality_log10_pvalue"] < -20 and top["centrality_total"] == top["pos_seqs"]
    clusters = (out / "enrichment_clusters.tsv").read_text().splitlines()
    assert len({ln.split("\t")[3] for ln in clusters[1:]}) == len(clusters) - 1      # one row per cluster
    sites = pq.read_table(out / "sites.parquet").to_pylist()
    assert {s["rank"] for s in sites} == {1, 2, 3, 4, 5}
    assert len({s["sequence"] for s in sites if s["rank"] == 1}) == top["pos_seqs"]
    assert (out / "enrichment.png").read_bytes()[:4] == b"\x89PNG"
    assert "MA0139.2" in (out / "enrichment.html").read_text()
    assert not (out / "_hits").exists() and not (out / "_sequences.zarr").exists()
    s = summarize(str(out), top=3)
    assert s["kind"] == "enrich" and s["finished"] and s["top_enriched"][0]["motif_id"] == top["motif_id"]
    assert main(["summary", str(out), "--top", "2"]) == 0
    assert "1. CTCF (MA0139.2)" in capfd.readouterr().out


def test_centrality_of_mixed_lengths_says_which_targets_it_used(tmp_path, client):
    """``--centrality`` with targets of two lengths tests those of the most common one (CentriMo's test needs one
    length) and says so: a warning naming how many of the targets, and ``_summary.json``'s ``centrality``."""
    from pipeline.enrich.stats import EnrichWarning

    recs = {k: (v[20:-20] if i % 3 == 0 else v) for i, (k, v) in enumerate(_ctcf(30).items())}
    fa = _write_fasta(tmp_path / "mixed.fa", recs)
    out = tmp_path / "c"
    with pytest.warns(EnrichWarning, match=r"^--centrality used 20 of the 30 targets: .* most common one \(200 bp\)"):
        run_enrich(fa, MOTIFS, str(out), client, EnrichSettings(centrality=True, select=["MA0139.2"], cluster=None,
                                                                top=1))
    assert json.loads((out / "_summary.json").read_text())["centrality"] == {"length": 200, "sequences": 20,
                                                                             "targets": 30}
    assert _table(out)[0]["centrality_total"] <= 20


def _insects(tmp_path) -> str:
    """JASPAR 2024 CORE insect matrices (286), from the all-taxa export and its metadata."""
    meta = SHARED / "motifs" / "JASPAR2024_CORE_non-redundant.metadata.tsv"
    ids = {r["matrix_id"] for r in csv.DictReader(meta.open(), delimiter="\t") if r["tax_group"] == "insects"}
    text = (SHARED / "motifs" / "JASPAR2024_CORE_non-redundant.jaspar").read_text()
    keep = [">" + r for r in text.split(">")[1:] if r.split()[0] in ids]
    path = tmp_path / "insects.jaspar"
    path.write_text("".join(keep))
    return str(path)


@needs_shared
def test_fly_sets_find_their_factors(tmp_path, client):
    """Tinman's 20 ChIP-chip regions (2-6 kb): tin (NK-2 homeobox, MA0247.3) among the top 5 rows at p = 1e-5
    (at 1e-4 a 4 kb region holds a site of nearly any matrix).  The eve stripe 2 enhancer is one sequence (one
    target: p >= 1/(K+1)), so it is tiled into 100-bp windows (step 25): the first cluster holds bcd, the top rows
    being the K50 homeodomains (oc, Gsc, dve) that share Bicoid's TAATCC."""
    motifs = _insects(tmp_path)
    chip = SHARED / "benchmarks" / "chipseq_peaks"
    out = tmp_path / "tin"
    run_enrich(str(chip / "tinman-early-top20.fa"), motifs, str(out), client,
               EnrichSettings(pvalue=1e-5, shuffles=10, seed=0, cluster=None, top=3))
    names = [r["motif_name"] for r in _table(out)]
    assert "tin" in names[:5], names[:10]
    seq = next(iter(_fasta_records(chip / "stripe2.fa").values()))
    tiles = _write_fasta(tmp_path / "s2.fa", {f"s{i}": seq[i:i + 100] for i in range(0, len(seq) - 99, 25)})
    out = tmp_path / "s2"
    run_enrich(tiles, motifs, str(out), client, EnrichSettings(pvalue=1e-3, shuffles=20, seed=0, top=3))
    table = _table(out)
    bcd = next(r for r in table if r["motif_name"] == "bcd")
    assert bcd["cluster"] == 0 and bcd["rank"] <= 10, [(r["motif_name"], r["cluster"]) for r in table[:12]]
    _check_statistics(table, len(table))


# ------------------------------------------------------------------------------------ seeds, controls
def test_seeded_runs_are_reproducible(tmp_path, client):
    fa = _write_fasta(tmp_path / "t.fa", _ctcf(80))

    def run(name, seed):
        out = tmp_path / name
        run_enrich(fa, MOTIFS, str(out), client, EnrichSettings(seed=seed, shuffles=2, top=2, cluster=None))
        return (out / "control.fa").read_bytes(), pq.read_table(out / "enrichment.parquet")

    c1, t1 = run("a", 7)
    c2, t2 = run("b", 7)
    c3, _ = run("c", 8)
    assert c1 == c2 and t1.equals(t2) and c1 != c3


@pytest.fixture(scope="module")
def genome(tmp_path_factory, chrx_2mb):
    """The bundled 2 Mb of chrX as a store, and 150 GC-rich target regions of 150-400 bp on it (a BED).  The store has
    the default 1 Mb blocks: each 1 Mb chunk the genomic controls are drawn from spans the block border (256 kb
    blocks made the ~400 chunks read ~2,000 blocks, 4-8 s of the test)."""
    from pipeline.io.genome import ingest

    d = tmp_path_factory.mktemp("genome")
    fa = _write_fasta(d / "x.fa", {"chrX": chrx_2mb})
    store = ingest(fa, d / "x.zarr", block_size=1 << 20)
    rng = np.random.default_rng(5)
    starts = rng.integers(0, len(chrx_2mb) - 500, 3000)
    lengths = rng.integers(150, 401, 3000)
    gc = np.array([sum(c in "GC" for c in chrx_2mb[s:s + n]) / n for s, n in zip(starts, lengths)])
    pick = rng.choice(3000, 150, replace=False, p=np.exp(12 * gc) / np.exp(12 * gc).sum())
    bed = d / "targets.bed"
    bed.write_text("".join(f"chrX\t{starts[i]}\t{starts[i] + lengths[i]}\tpeak{i}\n" for i in sorted(pick)))
    return store, str(bed), chrx_2mb


def test_block_cache_reads_what_the_store_reads(tmp_path, chrx_2mb):
    """The enrichment's cached genome access (a few block rows kept) returns the store's own codes for regions in
    random order, across block borders, at and past a record's end, with more blocks than it keeps."""
    from pipeline.enrich.inputs import _BlockCache
    from pipeline.io.genome import ingest

    fa = _write_fasta(tmp_path / "x.fa", {"a": chrx_2mb[:700_000], "b": chrx_2mb[900_000:1_000_000]})
    store = ingest(fa, tmp_path / "x.zarr", block_size=1 << 16)
    fetch = _BlockCache(store)
    rng = np.random.default_rng(2)
    for _ in range(120):
        r = int(rng.integers(0, 2))
        n = int(store.records.lengths[r])
        start = int(rng.integers(0, n))
        end = start + int(rng.integers(1, 150_000))
        assert np.array_equal(fetch(r, start, end), store.fetch(store.records.names[r], start, end)), (r, start, end)
    assert len(fetch.rows) == fetch.KEEP


def _gc(seq: str) -> float:
    return sum(c in "GC" for c in seq) / len(seq)


@pytest.mark.filterwarnings("ignore:16 of 300 genomic controls are from a wider GC bin")   # the KS test allows it
def test_genomic_controls_match_gc_and_avoid_targets(tmp_path, client, genome):
    """Genomic controls of BED targets: each target's K regions of its length, no N, overlapping neither a target
    nor each other, GC distributed as the targets' (two-sample KS); the same counts as the same sequences given
    as FASTA files (targets and controls)."""
    from scipy.stats import ks_2samp

    store, bed, seq = genome
    out = tmp_path / "gen"
    run_enrich(bed, MOTIFS, str(out), client, EnrichSettings(control="genomic", genome=store.path, shuffles=2,
                                                               seed=2, cluster=None, top=2))
    targets = [ln.split("\t") for ln in Path(bed).read_text().splitlines()]
    controls = [ln.split("\t") for ln in (out / "control.bed").read_text().splitlines()]
    assert len(controls) == 2 * len(targets)
    tlen = {t[3]: int(t[2]) - int(t[1]) for t in targets}
    cspans = sorted((int(c[1]), int(c[2])) for c in controls)
    assert all(a[1] <= b[0] for a, b in zip(cspans, cspans[1:])), "two controls overlap"
    covered = np.zeros(len(seq), bool)
    for t in targets:
        covered[int(t[1]):int(t[2])] = True
    assert not any(covered[s:e].any() for s, e in cspans), "a control overlaps a target"
    for c in controls:
        target, k = c[3].rsplit("|ctl", 1)
        assert c[0] == "chrX" and int(c[2]) - int(c[1]) == tlen[target] and k in ("1", "2")
        assert "N" not in seq[int(c[1]):int(c[2])].upper()
    gt = [_gc(seq[int(t[1]):int(t[2])].upper()) for t in targets]
    gcs = [_gc(seq[int(c[1]):int(c[2])].upper()) for c in controls]
    assert np.mean(gt) > np.mean([_gc(seq[i:i + 300].upper()) for i in range(0, len(seq) - 300, 9973)]) + 0.03
    assert ks_2samp(gt, gcs).pvalue > 0.01
    table = {r["motif_id"]: r for r in _table(out)}
    # the same sequences as FASTA targets and a FASTA control file
    tfa = _write_fasta(tmp_path / "t.fa", {t[3]: seq[int(t[1]):int(t[2])] for t in targets})
    cfa = _write_fasta(tmp_path / "c.fa", {c[3]: seq[int(c[1]):int(c[2])] for c in controls})
    out2 = tmp_path / "fa"
    run_enrich(tfa, MOTIFS, str(out2), client, EnrichSettings(control=cfa, cluster=None, top=2))
    for r in _table(out2):
        t = table[r["motif_id"]]
        assert (r["pos_seqs"], r["pos_total"], r["neg_seqs"], r["neg_total"]) == \
            (t["pos_seqs"], t["pos_total"], t["neg_seqs"], t["neg_total"])
    sites = pq.read_table(out / "sites.parquet").to_pylist()
    for s in sites[:50]:                              # BED targets: the sites on the genome too
        t = next(x for x in targets if x[3] == s["sequence"])
        assert s["chrom"] == "chrX" and s["chrom_start"] == int(t[1]) + s["start"]


def test_fasta_targets_warn_that_genomic_controls_may_overlap_them_and_control_names_may_repeat(tmp_path, client,
                                                                                                  genome):
    """FASTA targets have no place in the store: their genomic controls cannot be kept off them, and a warning says
    so (12 of 2,020 overlapped in a black-box run).  A control FASTA's names may repeat (SEA reads such files): the
    counts are those of the same controls named apart."""
    from pipeline.enrich.stats import EnrichWarning

    store, bed, seq = genome
    targets = [ln.split("\t") for ln in Path(bed).read_text().splitlines()][:20]
    tfa = _write_fasta(tmp_path / "t.fa", {t[3]: seq[int(t[1]):int(t[2])] for t in targets})
    st = dict(cluster=None, top=1, select=["MA0139.2", "MA0079.5"])
    with pytest.warns(EnrichWarning, match="FASTA targets have no place in .*genomic controls may overlap them"):
        run_enrich(tfa, MOTIFS, str(tmp_path / "g"), client, EnrichSettings(control="genomic", genome=store.path,
                                                                            seed=3, **st))
    controls = _fasta_records(tmp_path / "g" / "control.fa") if (tmp_path / "g" / "control.fa").exists() else {
        c[3]: seq[int(c[1]):int(c[2])] for c in (ln.split("\t") for ln in
                                                  (tmp_path / "g" / "control.bed").read_text().splitlines())}
    apart = _write_fasta(tmp_path / "apart.fa", controls)
    same = tmp_path / "same.fa"
    same.write_text("".join(f">ctl\n{s}\n" for s in controls.values()))
    run_enrich(tfa, MOTIFS, str(tmp_path / "a"), client, EnrichSettings(control=apart, **st))
    run_enrich(tfa, MOTIFS, str(tmp_path / "s"), client, EnrichSettings(control=str(same), **st))
    assert _table(tmp_path / "s") == _table(tmp_path / "a")


def test_repeated_bed_regions_count_once_with_a_warning(tmp_path, client, genome):
    """A BED of targets with three lines repeated (replicates' files concatenated) gives the table of the BED
    without the repeats, and one warning with their count and the first; a region overlapping another without
    being the same interval stays its own target."""
    from pipeline.enrich.stats import EnrichWarning

    store, bed, seq = genome
    lines = Path(bed).read_text().splitlines()
    first = lines[2].split("\t")
    shifted = "\t".join([first[0], str(int(first[1]) + 5), str(int(first[2]) + 5), "shifted"])
    plain = tmp_path / "plain.bed"
    plain.write_text("\n".join(lines + [shifted]) + "\n")
    repeated = tmp_path / "repeated.bed"
    repeated.write_text("\n".join([lines[7]] + lines + [shifted, lines[2], lines[7].replace(lines[7].split("\t")[3],
                                                                                               "again")]) + "\n")
    cfa = _write_fasta(tmp_path / "c.fa", {f"c{i}": seq[i:i + 250] for i in range(1_000_000, 1_300_000, 3_000)})
    tables = {}
    for path in (plain, repeated):
        out = tmp_path / path.stem
        with pytest.warns(EnrichWarning) if path is repeated else _no_enrich_warning() as caught:
            run_enrich(str(path), MOTIFS, str(out), client, EnrichSettings(control=cfa, genome=store.path,
                                                                         cluster=None, top=2))
        tables[path.stem] = {r["motif_id"]: (r["pos_seqs"], r["pos_total"], r["neg_seqs"], r["neg_total"])
                             for r in _table(out)}
    said = [str(w.message) for w in caught if w.category is EnrichWarning]
    c, s, e = lines[2].split("\t")[:3] if int(lines[2].split("\t")[1]) < int(lines[7].split("\t")[1]) else \
        lines[7].split("\t")[:3]
    assert said == [f"{repeated}: 3 region(s) repeat an earlier one with the same coordinates (first: {c}:{s}-{e}); "
                    "each region is counted once (targets)"]
    assert tables["repeated"] == tables["plain"]
    assert next(iter(tables["plain"].values()))[1] == len(lines) + 1


class _no_enrich_warning:
    """``pytest.warns``' shape for a run that must warn nothing (EnrichWarning raised as an error)."""

    def __enter__(self):
        import warnings

        from pipeline.enrich.stats import EnrichWarning

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("error", EnrichWarning)
        return []

    def __exit__(self, *exc):
        return self._ctx.__exit__(*exc)


def test_widened_genomic_controls_are_reported(tmp_path, client, genome):
    """The 20 most GC-rich 200-bp windows of the 2 Mb as BED targets: some of their genomic controls must come from a
    wider GC bin; the run says how many and the largest GC gap between a control and its target (one warning, and
    ``control`` in ``_run.json`` and ``_summary.json``)."""
    from pipeline.enrich.stats import EnrichWarning

    store, _, seq = genome
    starts = np.arange(0, len(seq) - 200, 200)
    gc = np.array([_gc(seq[s:s + 200].upper()) for s in starts])
    bed = tmp_path / "rich.bed"
    bed.write_text("".join(f"chrX\t{s}\t{s + 200}\tw{s}\n" for s in sorted(starts[np.argsort(-gc)[:20]])))
    out = tmp_path / "rich"
    with pytest.warns(EnrichWarning, match=r"of 20 genomic controls are from a wider GC bin") as caught:
        run_enrich(str(bed), MOTIFS, str(out), client, EnrichSettings(control="genomic", genome=store.path, seed=1,
                                                                      select=["MA0139.2"], cluster=None, top=1))
    ctl = json.loads((out / "_summary.json").read_text())["control"]
    assert ctl == json.loads((out / "_run.json").read_text())["control"]
    target_gc = {f"w{s}": _gc(seq[s:s + 200].upper()) for s in starts}
    gaps = [abs(_gc(seq[int(c[1]):int(c[2])].upper()) - target_gc[c[3].rsplit("|ctl", 1)[0]])
            for c in (ln.split("\t") for ln in (out / "control.bed").read_text().splitlines())]
    assert ctl["widened"] > 0 and ctl["largest_gc_gap"] == pytest.approx(max(gaps), abs=1e-4) and max(gaps) > 0.02
    message = str(next(w.message for w in caught if w.category is EnrichWarning))
    assert message.startswith(f"{ctl['widened']} of 20 ") and f"is {ctl['largest_gc_gap']:.3f}" in message


# ------------------------------------------------------------------------------------ output folder
def test_output_folder_rules(tmp_path, client, monkeypatch):
    """A finished enrichment is refused without --overwrite and replaced with it; a failed run leaves nothing."""
    fa = _write_fasta(tmp_path / "t.fa", _ctcf(30))
    out = tmp_path / "out"
    st = EnrichSettings(cluster=None, top=2)
    run_enrich(fa, MOTIFS, str(out), client, st)
    with pytest.raises(EnrichRunError, match="holds a finished enrichment; pass --overwrite"):
        run_enrich(fa, MOTIFS, str(out), client, st)
    (out / "notes.txt").write_text("mine")
    with pytest.raises(EnrichRunError, match=r"would remove files that are not part of the enrichment \(notes.txt\)"):
        run_enrich(fa, MOTIFS, str(out), client, EnrichSettings(cluster=None, top=2, overwrite=True))
    (out / "notes.txt").unlink()
    run_enrich(fa, MOTIFS, str(out), client, EnrichSettings(cluster=None, top=2, overwrite=True, seed=4))
    assert json.loads((out / "_run.json").read_text())["settings"]["seed"] == 4

    import pipeline.enrich.outputs as eo

    def broken(*a, **k):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(eo, "write_outputs", broken)
    new = tmp_path / "new"
    with pytest.raises(RuntimeError, match="disk on fire"):
        run_enrich(fa, MOTIFS, str(new), client, st)
    assert not new.exists()
    with pytest.raises(RuntimeError, match="disk on fire"):
        run_enrich(fa, MOTIFS, str(out), client, EnrichSettings(cluster=None, top=2, overwrite=True))
    assert out.is_dir() and not any(out.iterdir())


@pytest.mark.gpu
def test_gpu_run_equals_cpu_run(tmp_path, client):
    """The same enrichment on GPU workers: the same counts, statistics, clusters and sites."""
    from pipeline.engine.cluster import get_client

    fa = _write_fasta(tmp_path / "t.fa", _ctcf(150))
    st = EnrichSettings(shuffles=2, seed=5, top=3)
    run_enrich(fa, MOTIFS, str(tmp_path / "cpu"), client, st)
    with get_client(device="gpu", quiet=True, dashboard=False) as (gpu, device):
        run_enrich(fa, MOTIFS, str(tmp_path / "gpu"), gpu, EnrichSettings(shuffles=2, seed=5, top=3), device=device)
    for name in ("enrichment.parquet", "sites.parquet"):
        assert pq.read_table(tmp_path / "cpu" / name).equals(pq.read_table(tmp_path / "gpu" / name)), name


def test_clusters_on_the_workers_equal_those_made_here(client, tmp_path):
    """``motifgrid.enrich.cluster-on: workers`` (the identification tasks on the cluster) gives the table made
    with them on the command's threads."""
    import dask.config

    fa = _write_fasta(tmp_path / "t.fa", _ctcf(120))
    tables = {}
    for on in ("here", "workers"):
        with dask.config.set({"motifgrid.enrich.cluster-on": on}):
            run_enrich(fa, MOTIFS, str(tmp_path / on), client, EnrichSettings(seed=3))
        tables[on] = pq.read_table(tmp_path / on / "enrichment.parquet")
    assert tables["here"].column("cluster").null_count < tables["here"].num_rows
    assert tables["here"].equals(tables["workers"])


def test_cluster_on_auto_keeps_the_work_here_with_an_in_process_cluster(client):
    """``cluster-on: auto`` sends the identification tasks to the workers only when they are other processes: the
    in-process CPU cluster's worker is this process."""
    from pipeline.enrich.outputs import _other_processes

    assert _other_processes(client) is False


def test_small_cli_run_on_threads_equals_a_cluster_run(tmp_path, client, capfd):
    """A small local CPU enrichment runs on the command's own threads (no cluster) and writes the table of a run
    on the test's cluster, motif clusters included (made in this process, as for an in-process cluster)."""
    from pipeline.cli.command import main

    fa = _write_fasta(tmp_path / "t.fa", _ctcf(60))
    run_enrich(fa, MOTIFS, str(tmp_path / "ref"), client, EnrichSettings(shuffles=1, seed=3, top=2))
    assert main(["enrich", fa, "--motifs", MOTIFS, "--out", str(tmp_path / "cli"), "--device", "cpu",
                 "--shuffles", "1", "--seed", "3", "--top", "2", "--no-progress"]) == 0
    assert "CPU thread(s), no cluster" in capfd.readouterr().err
    for name in ("enrichment.parquet", "sites.parquet"):
        assert pq.read_table(tmp_path / "cli" / name).equals(pq.read_table(tmp_path / "ref" / name)), name


def test_cli_with_worker_processes_started_beside_the_inputs(tmp_path, client, capfd, monkeypatch):
    """``--device cpu --processes``: the cluster starts beside reading the inputs (as on a GPU node) and gives the
    in-process run's table; an input that is malformed inside still ends in one line, the early cluster closed;
    a missing input starts none."""
    import pipeline.cli.local as cli
    from pipeline.cli.command import main

    started = []

    class Early(cli.EarlyCluster):
        def __init__(self, **kw):
            started.append(kw)
            super().__init__(**kw)

    monkeypatch.setattr(cli, "EarlyCluster", Early)

    fa = _write_fasta(tmp_path / "t.fa", _ctcf(60))
    run_enrich(fa, MOTIFS, str(tmp_path / "ref"), client, EnrichSettings(shuffles=1, seed=3, cluster=None, top=2))
    assert main(["enrich", fa, "--motifs", MOTIFS, "--out", str(tmp_path / "cli"), "--device", "cpu", "--processes",
                 "--workers", "2", "--shuffles", "1", "--seed", "3", "--no-cluster", "--top", "2",
                 "--no-progress"]) == 0
    assert "2 CPU worker(s)" in capfd.readouterr().err and len(started) == 1 and started[0]["processes"]
    assert pq.read_table(tmp_path / "cli" / "enrichment.parquet").equals(
        pq.read_table(tmp_path / "ref" / "enrichment.parquet"))
    bad = tmp_path / "bad.fa"
    bad.write_text(">a\nACGTNNACGT\n>\nACGT\n")
    assert main(["enrich", str(bad), "--motifs", MOTIFS, "--out", str(tmp_path / "bad"), "--device", "cpu",
                 "--processes", "--workers", "2", "--no-progress"]) == 2
    err = capfd.readouterr().err.strip().splitlines()
    assert err[-1].startswith("motifgrid enrich: error: ") and str(bad) in err[-1], err
    assert len(started) == 2
    assert main(["enrich", str(tmp_path / "missing.fa"), "--motifs", MOTIFS, "--out", str(tmp_path / "m"),
                 "--device", "cpu", "--processes", "--no-progress"]) == 2
    assert len(started) == 2 and "missing.fa" in capfd.readouterr().err


def test_shuffles_and_seed_with_a_control_file_are_named_in_a_warning(tmp_path):
    """``--shuffles`` / ``--seed`` shape only generated controls: with the user's control file they are said to be
    unused (they were ignored silently); given nothing, no warning, and the defaults (1, 0) are used."""
    import warnings

    from pipeline.cli.command import main
    from pipeline.enrich.stats import EnrichWarning

    fa = _write_fasta(tmp_path / "t.fa", _ctcf(30))
    base = ["enrich", fa, "--motifs", MOTIFS, "--control", fa, "--no-cluster", "--top", "2", "--no-progress"]
    with pytest.warns(EnrichWarning) as seen:
        assert main([*base, "--out", str(tmp_path / "a"), "--shuffles", "3", "--seed", "7"]) == 0
    assert [str(w.message) for w in seen if w.category is EnrichWarning] == [
        f"--{o} shapes the shuffled and genomic controls only; the control file {fa} is used as it is"
        for o in ("shuffles", "seed")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", EnrichWarning)
        assert main([*base, "--out", str(tmp_path / "b")]) == 0
        assert main(["enrich", fa, "--motifs", MOTIFS, "--shuffles", "2", "--seed", "5", "--no-cluster", "--top", "2",
                     "--no-progress", "--out", str(tmp_path / "c")]) == 0
    assert json.loads((tmp_path / "c" / "_run.json").read_text())["control"] == {"kind": "shuffled", "copies": 2,
                                                                               "seed": 5}


def test_few_motifs_clustered_are_warned_about_in_enrichments_words():
    """The clustering's "few targets" warning named the motifs "targets", which in an enrichment are the sequences
    (a black-box user read it as "only 4 peaks"): it names the motifs clustered."""
    from pipeline.enrich.outputs import _clustered
    from pipeline.compare.identify import FewTargetsWarning
    from pipeline.motifs import read_motifs

    motifs = read_motifs(MOTIFS)[:4]
    with pytest.warns(FewTargetsWarning) as caught:
        labels = _clustered(motifs, 1.0, None)
    assert labels.shape == (4,)
    text = " ".join(str(w.message) for w in caught)
    assert "clustering 4 motifs" in text and "target motifs" not in text
