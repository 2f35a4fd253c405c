"""Motif discovery: PROJECTION buckets, batched EM, Gibbs chains and (l, d) refinement against naive float64
references, then the whole `discover` graph on a real Dask cluster: planted (l, d) instances solved,
crp0's CRP motif, determinism, output round trips and bad input."""
from __future__ import annotations

import json
import math
import re
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.discover.run import discover, run_discover
from pipeline.discover.outputs import compare_motifs
from pipeline.discover.inputs import DiscoverError, DiscoverSettings, read_sequences
from pipeline.io.genome import encode
from pipeline.motifs import Motif, format_jaspar, format_meme, read_motifs
from tests.conftest import DATA, ROOT, SHARED, needs_shared
from tests.planted import performance_coefficient, planted_instance
from workers.discover.gibbs import profile_score, random_starts, run_chains
from workers.discover.projection import (binom_cdf_below, choose_parameters, em_refine, planted_bucket_probability,
                                projection_seeds)
from workers.discover.refine import ld_local_search, ld_score, shifted_consensus
from workers.discover.windows import make_windows


def codes_of(pi):
    return np.stack([encode(s) for s in pi.sequences])


# ------------------------------------------------------------------------------------ generator
def test_planted_generator_exact_d_and_seeded():
    a, b = planted_instance(13, 3, t=12, n=200, seed=5), planted_instance(13, 3, t=12, n=200, seed=5)
    assert a.sequences == b.sequences and a.motif == b.motif
    assert planted_instance(13, 3, t=12, n=200, seed=6).motif != a.motif
    for s, st, occ in zip(a.sequences, a.starts, a.occurrences):
        assert len(s) == 200 and s[st:st + 13] == occ
        assert sum(x != y for x, y in zip(occ, a.motif)) == 3
    z = planted_instance(15, 4, t=20, n=300, seed=1, sites=12)
    assert sum(st is not None for st in z.starts) == 12
    assert performance_coefficient(z, {i: st for i, st in enumerate(z.starts)}) == 1.0


# ------------------------------------------------------------------------------------ PROJECTION
def test_parameters_follow_buhler_tompa():
    p = choose_parameters(15, 4, 20, 600)
    assert p.k == 7                                   # smallest k with 4^k > t(n-l+1) = 11,720, and k < l-d
    assert p.p_hat == pytest.approx(math.comb(11, 7) / math.comb(15, 7))
    below = sum(math.comb(20, i) * p.p_hat ** i * (1 - p.p_hat) ** (20 - i) for i in range(p.s))
    assert binom_cdf_below(20, p.p_hat, p.s) == pytest.approx(below)
    assert p.m == math.ceil(math.log(0.05) / math.log(below))
    assert planted_bucket_probability(10, 4, 7) == 0.0
    assert choose_parameters(15, 4, 20, 600, k=8, s=4, m=7) .k == 8


def test_bucketing_matches_dictionary_reference():
    pi = planted_instance(11, 2, t=8, n=120, seed=3)
    codes = codes_of(pi)
    codes[2, 40:44] = 4                               # N: those windows never enter a bucket
    win = make_windows(codes, 11, both_strands=True)
    rng = np.random.default_rng(0)
    pos = np.sort(np.stack([rng.choice(11, 4, replace=False) for _ in range(3)]), axis=1)
    ppm, info = projection_seeds(win, 4, 3, pos, pseudocount=0.0)
    for t in range(3):
        buckets = {}
        for i in range(win.T):
            for p in range(win.P):
                if win.valid[i, p]:
                    key = tuple(win.codes[i, p, pos[t]])
                    buckets.setdefault(key, []).append(win.codes[i, p])
        ref = {sum(int(c) << (2 * j) for j, c in enumerate(k)): np.array(v) for k, v in buckets.items() if len(v) >= 3}
        got = info[info[:, 0] == t]
        assert sorted(got[:, 2].tolist()) == sorted(ref)
        for row, (_, size, key) in zip(ppm[info[:, 0] == t], got):
            members = ref[key]
            assert size == len(members)
            freq = np.stack([(members == a).mean(axis=0) for a in range(4)], axis=1)
            np.testing.assert_allclose(row, freq, atol=1e-6)


# ------------------------------------------------------------------------------------ EM
def naive_em_step(seqs_codes, l, ppm, bg, zoops, gamma, both):
    """One EM iteration by loops in float64: returns (loglik of ppm, new ppm before pseudocount, counts)."""
    counts = np.zeros((l, 4))
    ll = 0.0
    post_sum = 0.0
    for row in seqs_codes:
        wins = []
        for p in range(len(row) - l + 1):
            w = row[p:p + l]
            if (w < 4).all():
                wins.append(w)
                if both:
                    wins.append((3 - w)[::-1])
        if not wins:
            continue
        ratios = np.array([np.prod([ppm[j, w[j]] / bg[w[j]] for j in range(l)]) for w in wins])
        mean = ratios.mean()
        if zoops:
            tot = gamma * mean + (1 - gamma)
            ll += math.log(tot)
            q = gamma * mean / tot
        else:
            ll += math.log(mean)
            q = 1.0
        post_sum += q
        r = ratios / ratios.sum() * q
        for w, x in zip(wins, r):
            counts[np.arange(l), w] += x
    return ll, counts, post_sum


@pytest.mark.parametrize("model,both", [("oops", False), ("zoops", True)])
def test_em_iteration_matches_naive(model, both):
    pi = planted_instance(6, 1, t=5, n=30, seed=2)
    codes = codes_of(pi)
    codes[1, 3] = 4
    win = make_windows(codes, 6, both)
    rng = np.random.default_rng(1)
    ppm0 = rng.dirichlet(np.ones(4), size=(3, 6))
    bg = np.array([0.3, 0.2, 0.2, 0.3])
    res = em_refine(win, ppm0, bg, model, iters=1, gamma0=0.4, pseudocount=0.5)
    for c in range(3):
        k = int(np.flatnonzero(res.index == c)[0])
        ll0, counts, post = naive_em_step(codes, 6, ppm0[c], bg, model == "zoops", 0.4, both)
        p1 = (counts + 0.5 * bg) / (counts.sum(axis=1, keepdims=True) + 0.5)
        np.testing.assert_allclose(res.ppm[k], p1, rtol=2e-4, atol=1e-6)
        g1 = post / 5 if model == "zoops" else 1.0
        ll1, _, _ = naive_em_step(codes, 6, p1, bg, model == "zoops", g1, both)
        assert res.loglik[k] == pytest.approx(ll1, rel=1e-4, abs=1e-4)
        assert res.gamma[k] == pytest.approx(g1, rel=1e-4)


# ------------------------------------------------------------------------------------ Gibbs
@pytest.mark.parametrize("update", ["best", "sample"])
def test_gibbs_chains_scores_and_fixed_points(update):
    pi = planted_instance(8, 1, t=6, n=60, seed=4)
    win = make_windows(codes_of(pi), 8, False)
    bg = np.full(4, 0.25)
    starts = random_starts(win, 300, np.random.default_rng(0))
    res = run_chains(win, starts, bg, update=update, max_sweeps=8, seed=3)
    assert sorted(res.chain.tolist()) == list(range(300))            # checkpoints drop nothing
    counts = np.zeros((300, 32))
    for i in range(win.T):
        counts += win.onehot[i, res.positions[:, i]]
    # the incremental score (correcting values) equals a float64 recomputation of the final profile
    np.testing.assert_allclose(res.score, profile_score(counts.reshape(300, 8, 4), win.T, bg, 1.0), atol=1e-9)
    if update == "best":
        done = res.steps < 8 * win.T                                # converged chains are fixed points
        assert done.sum() > 250
        for c in np.flatnonzero(done)[:20]:
            for i in range(win.T):
                cnt = counts[c] - win.onehot[i, res.positions[c, i]]
                w = np.log((cnt + 0.25) / (win.T - 1 + 1.0) / 0.25)
                sc = win.onehot[i] @ w
                assert sc[res.positions[c, i]] >= sc.max() - 1e-5


# ------------------------------------------------------------------------------------ (l, d) refinement
def test_ld_local_search_against_brute_force():
    pi = planted_instance(7, 1, t=6, n=40, seed=8)
    win = make_windows(codes_of(pi), 7, False)

    def naive(cons):
        dmin = [min(sum(a != b for a, b in zip(s[p:p + 7], cons)) for p in range(len(s) - 6)) for s in pi.sequences]
        return sum(x <= 1 for x in dmin), sum(min(x, 7) for x in dmin)

    m = np.array(["ACGT".index(ch) for ch in pi.motif], np.uint8)
    assert ld_score(win, m, 1) == naive(pi.motif)
    start = m.copy()
    start[[1, 4]] = (start[[1, 4]] + 1) % 4
    cons, cnt, tot = ld_local_search(win, start, 1)
    word = "".join("ACGT"[x] for x in cons)
    assert (cnt, tot) == naive(word)
    for j, b in product_moves(7):                                     # a local optimum: no single move improves
        w2 = word[:j] + "ACGT"[b] + word[j + 1:]
        c2, t2 = naive(w2)
        assert (c2, -t2) <= (cnt, -tot)
    assert cnt == 6


def product_moves(l):
    return [(j, b) for j in range(l) for b in range(4)]


def test_shifted_consensus_recovers_phase():
    pi = planted_instance(9, 0, t=6, n=50, seed=9)
    win = make_windows(codes_of(pi), 9, False)
    best = np.array([st + 2 for st in pi.starts])                    # sites locked two positions late
    starts = shifted_consensus(win, best, np.ones(6, bool))
    assert any("".join("ACGT"[x] for x in c) == pi.motif for c in starts)


# ------------------------------------------------------------------------------------ whole graph
@pytest.fixture(scope="module")
def client():
    from pipeline.engine.cluster import get_client

    with get_client(n_workers=2, device="cpu", quiet=True) as (c, _):
        yield c


@pytest.mark.parametrize("l,d,algorithm,seed", [(11, 2, "projection", 0), (11, 2, "gibbs", 1),
                                                (13, 3, "both", 2)])
def test_small_planted_instances_solved(client, tmp_path, l, d, algorithm, seed):
    pi = planted_instance(l, d, t=20, n=300, seed=100 + seed)
    fa = pi.write(tmp_path / "p.fa")
    st = DiscoverSettings(width=l, mutations=d, model="oops", algorithm=algorithm, seed=seed, chains=1024)
    found, stats = discover(read_sequences(fa), st, client)
    m = found[0]
    assert m.consensus == pi.motif
    assert m.ld_count == 20
    assert performance_coefficient(pi, {i: p for i, p, *_ in m.sites}) > 0.75   # random l-mers may be closer


def test_zoops_two_motifs_mask_and_repeat(client, tmp_path):
    a = planted_instance(10, 1, t=16, n=200, seed=21, sites=12)
    b = planted_instance(10, 1, t=16, n=200, seed=22, sites=12)
    seqs = []
    for i, (s1, s2) in enumerate(zip(a.sequences, b.sequences)):
        s = list(s1)
        if b.starts[i] is not None:                     # put b's occurrence where it cannot overlap a's
            p = 0 if (a.starts[i] or 0) > 100 else 150
            s[p:p + 10] = b.occurrences[i]
        seqs.append("".join(s))
    fa = tmp_path / "two.fa"
    fa.write_text("".join(f">s{i}\n{s}\n" for i, s in enumerate(seqs)))
    st = DiscoverSettings(width=10, mutations=1, model="zoops", algorithm="projection", motifs=2, seed=1)
    found, _ = discover(read_sequences(fa), st, client)
    assert {found[0].consensus, found[1].consensus} == {a.motif, b.motif}
    for m in found:
        assert 11 <= len(m.sites) <= 14                 # ZOOPS: about the 12 planted, not all 16


def test_projection_left_out_where_its_trial_count_reaches_the_cap(client, tmp_path):
    """Two sequences at width 20: PROJECTION's planted bucket is out of reach (its bucket threshold exceeds the
    sequences expected to hold the motif; Buhler & Tompa's trial count hit the 100,000 cap: 110 s here, hours on
    20 peaks of 3 kb).  With ``--algorithm both`` the round runs the Gibbs sampler alone and says so in one
    warning; given ``--trials`` PROJECTION runs as asked, without it."""
    import warnings

    from pipeline.discover.run import DiscoverWarning
    from pipeline.discover.tasks import projection_parameters

    pi = planted_instance(20, 2, t=2, n=300, seed=5)
    seqs = read_sequences(pi.write(tmp_path / "two.fa"))
    st = DiscoverSettings(width=20, model="zoops", algorithm="both", seed=3, chains=512)
    params = projection_parameters(st, seqs.codes)
    assert params.s > params.t_hat and params.m == 100_000
    with pytest.warns(DiscoverWarning, match=rf"^PROJECTION would need 100,000 trials or more here \(projection size "
                                             rf"k = {params.k}, bucket threshold s = {params.s}, {params.t_hat} "
                                             r"sequences expected to hold the motif\): .* runs the Gibbs sampler "
                                             r"alone$"):
        found, stats = discover(seqs, st, client)
    assert stats["rounds"][0]["projection"] is None and found and found[0].sites
    st = DiscoverSettings(width=20, model="zoops", algorithm="both", seed=3, chains=512, trials=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DiscoverWarning)
        _, stats = discover(seqs, st, client)
    assert stats["rounds"][0]["projection"]["m"] == 4


def test_sequences_without_a_window_raise_no_numpy_warning(client, tmp_path):
    """Sequences shorter than the width or all N beside real ones: the ZOOPS posterior's log(0) stays inside
    (it printed numpy's RuntimeWarning with a source line)."""
    import warnings

    pi = planted_instance(10, 1, t=12, n=200, seed=9)
    seqs = list(pi.sequences) + ["ACGT", "N" * 300]
    fa = tmp_path / "edge.fa"
    fa.write_text("".join(f">s{i}\n{x}\n" for i, x in enumerate(seqs)))
    st = DiscoverSettings(width=10, mutations=1, model="zoops", algorithm="projection", seed=1, trials=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        found, _ = discover(read_sequences(fa), st, client)
    assert found and all(i < 12 for i, *_ in found[0].sites)


def test_determinism_for_a_seed(client, tmp_path):
    pi = planted_instance(12, 2, t=12, n=250, seed=7)
    fa = pi.write(tmp_path / "d.fa")
    runs = []
    for _ in range(2):
        st = DiscoverSettings(width=12, model="zoops", both_strands=True, algorithm="both", seed=11, chains=512)
        found, _ = discover(read_sequences(fa), st, client)
        runs.append([(m.consensus, m.sites, m.counts.tolist()) for m in found])
    assert runs[0] == runs[1]


@needs_shared
def test_crp0_gives_the_crp_consensus(client, tmp_path):
    out = tmp_path / "crp"
    res = run_discover(str(SHARED / "benchmarks/classic_sets/crp0.fa"), str(out),
                       DiscoverSettings(width=16, both_strands=True, seed=0, chains=1024), client)
    cons = res.motifs[0]["consensus"]
    rc = cons[::-1].translate(str.maketrans("ACGT", "TGCA"))
    assert re.fullmatch("TGTGA.{6}TCACA", cons) or re.fullmatch("TGTGA.{6}TCACA", rc), cons
    assert res.motifs[0]["sites"] >= 14
    # the files read back: MEME and JASPAR through pipeline.motifs, sites through pyarrow
    meme, jaspar = read_motifs(out / "motifs.meme"), read_motifs(out / "motifs.jaspar")
    assert meme[0].name == jaspar[0].name == cons
    np.testing.assert_allclose(meme[0].matrix, jaspar[0].matrix / jaspar[0].matrix.sum(axis=1, keepdims=True),
                               atol=1e-6)
    sites = pq.read_table(out / "sites.parquet").to_pandas()
    assert len(sites) == res.motifs[0]["sites"]
    seqs = read_sequences(SHARED / "benchmarks/classic_sets/crp0.fa")
    for r in sites.itertuples():
        fwd = "".join("ACGT"[c] for c in seqs.codes[r.sequence_index, r.start:r.end])
        site = fwd if r.strand == "+" else fwd[::-1].translate(str.maketrans("ACGT", "TGCA"))
        assert site == r.site and seqs.names[r.sequence_index] == r.sequence
    counts = np.stack([[s[j] == b for s in sites.site] for j in range(16) for b in "ACGT"]).sum(axis=1)
    np.testing.assert_array_equal(counts.reshape(16, 4), jaspar[0].matrix)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["motifs"][0]["consensus"] == cons and summary["files"][-1] == "summary.tsv"


# ------------------------------------------------------------------------------------ formats, compare
def test_writers_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 30, size=(9, 4)).astype(float)
    counts[:, 0] += 1
    probs = rng.dirichlet(np.ones(4), size=7)
    ms = [Motif("M1", "ACGTACGTA", counts, "counts", float(counts.sum(axis=1).max()), "x", 1),
          Motif("M2", "M2", probs, "probabilities", 12.0, "x", 2)]
    (tmp_path / "a.meme").write_text(format_meme(ms, [0.3, 0.2, 0.2, 0.3]))
    assert "E=" not in (tmp_path / "a.meme").read_text()          # no significance is computed: none claimed
    (tmp_path / "a.jaspar").write_text(format_jaspar(ms))
    meme, jas = read_motifs(tmp_path / "a.meme"), read_motifs(tmp_path / "a.jaspar")
    assert [m.id for m in meme] == [m.id for m in jas] == ["M1", "M2"]
    np.testing.assert_array_equal(jas[0].matrix, counts)
    np.testing.assert_allclose(jas[1].matrix, probs, atol=1e-6)
    np.testing.assert_allclose(meme[0].matrix, counts / counts.sum(axis=1, keepdims=True), atol=1e-6)
    np.testing.assert_allclose(meme[1].matrix, probs, atol=1e-6)
    assert meme[1].nsites == 12.0 and meme[0].name == "ACGTACGTA"


@pytest.mark.filterwarnings("ignore:12 target motifs")
def test_compare_to_is_motifgrid_compare(client, tmp_path):
    """--compare-to reports what `motifgrid compare MOTIFS DATABASE` computes: Tomtom's best alignment and its
    p-, E- and q-values; a database motif and its reverse complement find it (offset 0, strands + and -)."""
    import pyarrow.parquet as pq

    from pipeline.compare.run import run_compare

    db = str(DATA / "jaspar2024_subset.jaspar")
    ms = read_motifs(db)
    q = ms[3]
    rc = Motif("q_rc", "q_rc", q.matrix[::-1, ::-1].copy(), q.kind, q.nsites, "x", 2)
    mine = tmp_path / "mine.meme"
    mine.write_text(format_meme([q, rc], [0.25] * 4))
    best = compare_motifs(str(mine), db, client)
    for k, strand in enumerate("+-"):
        assert (best[k]["id"], best[k]["strand"], best[k]["offset"], best[k]["overlap"]) == (q.id, strand, 0, q.length)
        assert best[k]["similarity"] == pytest.approx(1.0, abs=1e-6) and best[k]["length"] == q.length
        assert best[k]["evalue"] == pytest.approx(best[k]["pvalue"] * len(ms))
        assert best[k]["runners_up"][0]["pvalue"] >= best[k]["pvalue"] and len(best[k]["runners_up"]) == 3
    run_compare(str(mine), db, str(tmp_path / "cmp"), client)
    t = pq.read_table(tmp_path / "cmp" / "best_matches.parquet").to_pylist()
    for k in range(2):
        rows = t[5 * k:5 * k + 5]
        assert rows[0]["target"] == best[k]["id"] and rows[0]["pvalue"] == best[k]["pvalue"]
        assert rows[1]["target"] == best[k]["runners_up"][0]["id"]
        assert rows[1]["evalue"] == best[k]["runners_up"][0]["evalue"]


def test_cli_time_agrees_with_summary_and_meme_has_no_fake_evalue(tmp_path):
    """The time `discover` prints is summary.json's, spanning the whole command up to its outputs (cluster
    start and --compare-to included: they were left out of summary.json before, 39.9 s there vs 111.8 s
    printed); motifs.meme claims no E-value (it said `E= 0`) and reads back in Biopython and here."""
    import time

    from Bio import motifs as bio_motifs

    fa = planted_instance(10, 1, t=10, n=150, seed=4).write(tmp_path / "p.fa")
    out = tmp_path / "found"
    t0 = time.perf_counter()
    r = run_cli(fa, "--width", 10, "--mutations", 1, "--algorithm", "projection", "--motifs", 2, "--out", out,
                "--compare-to", DATA / "jaspar2024_subset.jaspar", "--workers", 1)
    wall = time.perf_counter() - t0
    assert r.returncode == 0, r.stderr
    summary = json.loads((out / "summary.json").read_text())
    # the best matches: Tomtom's, in summary.json, summary.tsv and the printed lines (one per motif)
    tsv = (out / "summary.tsv").read_text().splitlines()
    assert tsv[0].split("\t")[-7:] == ["best_match_id", "best_match_name", "best_match_pvalue", "best_match_evalue",
                                       "best_match_offset", "best_match_strand", "best_match_overlap"]
    for mj, line in zip(summary["motifs"], tsv[1:]):
        bm = mj["best_match"]
        assert 0 < bm["pvalue"] <= 1 and bm["evalue"] == pytest.approx(12 * bm["pvalue"]) and bm["strand"] in "+-"
        assert line.split("\t")[-7:-5] == [bm["id"], bm["name"]]
        assert re.search(rf"{mj['id']} {mj['consensus']}: best match {re.escape(bm['id'])} {re.escape(bm['name'])} "
                         rf"\(p=[-+.e\d]+, E=[-+.e\d]+, offset -?\d+, strand [+-], \d+ columns\)", r.stderr), r.stderr
    assert "motifgrid discover: warning: 12 target motifs" in r.stderr and "FewTargetsWarning" not in r.stderr, r.stderr
    printed = re.search(r"done in ([\d.]+)s", r.stderr).group(1)
    assert printed == f"{summary['seconds']:.1f}", r.stderr
    ph = summary["seconds_by_phase"]
    assert set(ph) == {"setup", "search", "compare_to", "write", "total"} and ph["total"] == summary["seconds"]
    assert sum(v for k, v in ph.items() if k != "total") == pytest.approx(ph["total"], abs=1e-9)
    assert min(ph.values()) >= 0 and ph["compare_to"] > 0 and summary["seconds"] < wall
    assert ph["setup"] > 0.2                              # the local cluster's start-up is counted
    text = (out / "motifs.meme").read_text()
    assert "E=" not in text and text.count("letter-probability matrix: alength= 4 w= 10 nsites=") == 2
    ours = read_motifs(out / "motifs.meme")
    with open(out / "motifs.meme") as f:
        theirs = bio_motifs.parse(f, "minimal")
    assert [m.name for m in theirs] == [m.id for m in ours] == ["MOTIF_1", "MOTIF_2"]
    for a, b, mj in zip(theirs, ours, summary["motifs"]):
        ppm = np.array([[a.pwm[x][j] for x in "ACGT"] for j in range(10)])
        np.testing.assert_allclose(ppm, b.matrix, atol=1e-6)
        assert a.num_occurrences == b.nsites == mj["sites"]


# ------------------------------------------------------------------------------------ bad input
def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "pipeline.cli", "discover", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_bad_input_errors(tmp_path):
    ok = planted_instance(8, 1, t=4, n=40, seed=0).write(tmp_path / "ok.fa")
    cases = {
        "missing.fa": (None, "no such file"),
        "empty.fa": ("", "no FASTA records"),
        "text.fa": ("hello\n", "before the first '>'"),
        "digits.fa": (">a\nACGT1ACGT\n>b\nACGTACGT\n", "character '1'"),
        "norec.fa": (">a\n>b\nACGT\n", "record 'a' has no sequence"),
        "dup.fa": (">a\nACGTACGT\n>b\nACGTAC\n>a x\nTTGACA\n",
                   "dup.fa line 5: duplicate record name 'a' (records 1 and 3)"),
        "one.fa": (">a\nACGTACGTACGT\n", "at least 2 sequences"),
        "mostly_n.fa": (">a\nNNNNNNNNNNNN\n>b\nACGTNNACGRNN\n>c\nACNNTTNNGGNNAANN\n",
                        "fewer than 2 sequences have a --width 4 window without N or another non-ACGT letter (1 do; 1 "
                        "such windows in all)"),
    }
    for name, (text, msg) in cases.items():
        p = tmp_path / name
        if text is not None:
            p.write_text(text)
        with pytest.raises(DiscoverError, match=re.escape(msg)):
            DiscoverSettings(width=4).check(read_sequences(p))
    with pytest.raises(DiscoverError, match="at least --width 50"):
        DiscoverSettings(width=50).check(read_sequences(ok))
    with pytest.raises(DiscoverError, match="--mutations must be in"):
        DiscoverSettings(width=8, mutations=8).check(read_sequences(ok))
    # through the CLI: one line, exit 2, nothing left behind
    r = run_cli(tmp_path / "digits.fa", "--width", 4, "--out", tmp_path / "o1")
    assert r.returncode == 2 and "digits.fa line 2" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "o1").exists()
    (tmp_path / "all_n.fa").write_text(">a\n" + "N" * 30 + "\n>b\n" + "n" * 40 + "\n")     # was: exit 0, no motif
    r = run_cli(tmp_path / "all_n.fa", "--width", 8, "--out", tmp_path / "o3")
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        f"motifgrid discover: error: {tmp_path / 'all_n.fa'}: fewer than 2 sequences have a --width 8 window without "
        "N or another non-ACGT letter (0 do; 0 such windows in all)"] and not (tmp_path / "o3").exists()
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "x").write_text("x")
    r = run_cli(ok, "--width", 8, "--out", busy)
    assert r.returncode == 2 and "nothing is overwritten" in r.stderr
    r = run_cli(ok, "--width", 8, "--out", tmp_path / "o2", "--compare-to", tmp_path / "nope.jaspar")
    assert r.returncode == 2 and "nope.jaspar" in r.stderr and not (tmp_path / "o2").exists()


# ------------------------------------------------------------------------------------ GPU == CPU
@pytest.mark.gpu
def test_gpu_matches_cpu():
    import cupy

    pi = planted_instance(13, 3, t=20, n=300, seed=5)
    codes = codes_of(pi)
    wc, wg = make_windows(codes, 13, True), make_windows(codes, 13, True, xp=cupy)
    rng = np.random.default_rng(0)
    pos = np.sort(np.stack([rng.choice(13, 7, replace=False) for _ in range(6)]), axis=1)
    pc, ic = projection_seeds(wc, 7, 3, pos)
    pg, ig = projection_seeds(wg, 7, 3, pos)
    np.testing.assert_array_equal(ic, ig)
    np.testing.assert_allclose(pc, pg, atol=1e-6)
    bg = np.full(4, 0.25)
    rc = em_refine(wc, pc[:200], bg, "zoops", iters=3)
    rg = em_refine(wg, pc[:200], bg, "zoops", iters=3)
    np.testing.assert_allclose(rc.loglik, rg.loglik, rtol=1e-3, atol=1e-2)
    # Gibbs (CUDA kernel on the GPU): one step from the same states picks the same window except where two
    # windows tie in exact arithmetic (float32 summation order decides there); scores are exact.
    starts = random_starts(wc, 2048, np.random.default_rng(1))
    gc, gg = run_chains(wc, starts, bg, max_steps=1), run_chains(wg, starts, bg, max_steps=1)
    diff = np.flatnonzero(gc.positions[:, 0] != gg.positions[:, 0])
    bg4 = np.tile(bg, 13)
    for c in diff:
        cnt = sum(wc.onehot[s, starts[c, s]].astype(np.float64) for s in range(1, 20))
        sc = wc.onehot[0].astype(np.float64) @ (np.log((cnt + bg4) / 20.0) - np.log(bg4))
        assert abs(sc[gc.positions[c, 0]] - sc[gg.positions[c, 0]]) < 1e-5 and sc[gg.positions[c, 0]] >= sc.max() - 1e-5
    assert len(diff) < 0.05 * 2048
    gg = run_chains(wg, starts, bg)
    np.testing.assert_allclose(gg.score, profile_score(
        np.stack([np.stack([(wc.codes[np.arange(20), gg.positions[c]] == a).sum(axis=0) for a in range(4)], 1)
                  for c in range(2048)]), 20, bg, 1.0), atol=1e-9)
    # the (l, d) proxy ordering is integer arithmetic: identical
    from workers.discover.refine import ld_proxy_order
    np.testing.assert_array_equal(ld_proxy_order(wc, gg.ppm[:300], 3), ld_proxy_order(wg, gg.ppm[:300], 3))
