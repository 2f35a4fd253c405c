"""``--atsnp``: atSNP's statistics by importance sampling against exact enumeration of every sequence (a 5-column
motif) and against a direct Monte Carlo written here; atSNP's example scores reproduced under its convention (the
natural-log sum of motif probabilities floored at 1e-10, no background: given to motifgrid as a log-odds matrix)."""
from __future__ import annotations

import csv
import itertools

import numpy as np
import pytest

from tests.conftest import SHARED
from tests.variants.test_variants import client  # noqa: F401

ATSNP = SHARED / "variants" / "atsnp"
PRIOR = np.array([0.287, 0.211, 0.213, 0.289])
TRANS = np.array([[0.323, 0.174, 0.249, 0.254], [0.345, 0.264, 0.052, 0.338],
                  [0.281, 0.214, 0.267, 0.238], [0.215, 0.207, 0.253, 0.325]])
TRANS = TRANS / TRANS.sum(axis=1, keepdims=True)


def _scores(x: np.ndarray, rows: list) -> np.ndarray:
    """``(N, 2, L)`` window scores of (2L-1)-mers ``x``, written out independently of workers.variants."""
    L = rows[0].shape[0]
    out = np.zeros((x.shape[0], 2, L))
    for r, w in enumerate(rows):
        for s in range(L):
            for j in range(L):
                out[:, r, s] += w[j, x[:, s + j]]
    return out


def _change_all(x, rows, G):
    """``(N, 3)`` ``|ln G(M(x)) - ln G(M(x^b))|`` over the three other centre bases."""
    L = rows[0].shape[0]
    M = _scores(x, rows).reshape(len(x), -1).max(axis=1)
    out = []
    for shift in (1, 2, 3):
        xb = x.copy()
        xb[:, L - 1] = (x[:, L - 1] + shift) % 4
        Mb = _scores(xb, rows).reshape(len(x), -1).max(axis=1)
        out.append(np.abs(np.log(G(M)) - np.log(G(Mb))))
    return np.stack(out, axis=1)


def _tail_fn(M, P):
    """``G(v) = P(M >= v)`` (ties within 1e-9) of values ``M`` with probabilities ``P``."""
    order = np.argsort(-M)
    m, cp = M[order], np.cumsum(P[order])
    return lambda v: cp[np.clip(np.searchsorted(-m, -(np.asarray(v) - 1e-9), side="right") - 1, 0, None)]


def test_tails_equal_exact_enumeration_of_every_sequence():
    """A 5-column motif: ``G`` and ``H`` at every threshold down to p 1e-4 within 5 standard errors of the sums over
    all 4^9 sequences of the chain."""
    from workers.variants.atsnp import motif_tails

    rng = np.random.default_rng(3)
    w = np.log2(rng.dirichlet(np.full(4, 0.4), 5) / 0.25 + 1e-3)
    rows = [w, w[::-1, ::-1].copy()]
    tails = motif_tails(rows[0], rows[1], PRIOR, TRANS, n=20_000, seed=2)
    x = np.array(list(itertools.product(range(4), repeat=9)))
    P = PRIOR[x[:, 0]] * np.prod(TRANS[x[:, :-1], x[:, 1:]], axis=1)
    M = _scores(x, rows).reshape(len(x), -1).max(axis=1)
    G = _tail_fn(M, P)
    checked = 0
    for t in np.unique(M):
        exact = float(G(t))
        if exact < 1e-4:
            continue
        lp, rse = tails.allele.at(np.array([t]))
        assert abs(np.exp(lp[0]) - exact) <= 5 * rse[0] * exact + 1e-12, (t, exact, np.exp(lp[0]), rse[0])
        checked += 1
    D = _change_all(x, rows, G)
    H = _tail_fn(D.ravel(), np.repeat(P / 3, 3))
    for r in np.linspace(0.1, float(D.max()) * 0.8, 25):
        exact = float(H(r))
        if exact < 1e-4:
            continue
        lp, rse = tails.change.at(np.array([r]))
        assert abs(np.exp(lp[0]) - exact) <= 5 * rse[0] * exact + 2e-3 * exact, (r, exact, np.exp(lp[0]), rse[0])
        checked += 1
    assert checked > 100 and np.all(tails.allele.rse[tails.allele.logp > np.log(1e-4)] < 0.1)


def _read(name):
    with open(ATSNP / name) as f:
        return list(csv.reader(f, delimiter="\t"))


@pytest.mark.skipif(not ATSNP.exists(), reason="../shared/data absent")
@pytest.mark.filterwarnings("ignore:.*log-odds matrix only")  # the peers' matrices, as intended
def test_atsnp_example_scores_and_pvalues_against_a_direct_monte_carlo(client, tmp_path):
    from pipeline.variants import VariantsSettings, read_variants, run_variants

    lib = _read("motif_library.tsv")[1:]
    mats = {}
    for name, _, *p in lib:
        mats.setdefault(name, []).append([float(v) for v in p])
    meme = ["MEME version 4", "", "ALPHABET= ACGT", "", "strands: + -", ""]
    for name, m in mats.items():
        meme += [f"MOTIF {name}", f"log-odds matrix: alength= 4 w= {len(m)}"]
        meme += [" ".join(f"{np.log(max(v, 1e-10)):.17g}" for v in row) for row in m] + [""]
    (tmp_path / "lib.meme").write_text("\n".join(meme))
    snps = _read("snps_with_61bp_flanks.tsv")[1:]
    (tmp_path / "g.fa").write_text("".join(f">{s[0]}\n{s[8]}\n" for s in snps))
    (tmp_path / "v.vcf").write_text("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n"
                                    + "".join(f"{s[0]}\t31\t{s[0]}\t{s[5]}\t{s[6]}\t.\t.\t.\n" for s in snps))
    prior = [float(v) for v in _read("background_prior.tsv")[1]]
    trans = [[float(v) for v in r[1:]] for r in _read("background_transition.tsv")[1:]]
    (tmp_path / "markov.tsv").write_text("\tA\tC\tG\tT\nprior\t" + "\t".join(map(str, prior)) + "\n"
                                         + "".join(f"{b}\t" + "\t".join(map(str, t)) + "\n" for b, t in zip("ACGT", trans)))
    s = run_variants(str(tmp_path / "v.vcf"), str(tmp_path / "g.fa"), str(tmp_path / "lib.meme"), str(tmp_path / "out"),
                     client, VariantsSettings(report_all=True, atsnp=True, markov=str(tmp_path / "markov.tsv")))
    got = {(r["id"], r["motif_id"]): r for r in read_variants(str(tmp_path / "out")).to_pylist()}
    ref = [r for r in _read("motif_scores_reference.tsv")[1:] if "1.7.6" in r[0]]
    assert len(ref) == 4 and s["atsnp"]["samples"] == 20_000
    prior, trans = np.array(prior), np.array(trans)
    for row in ref:
        r = got[(row[3], row[1])]
        assert r["ref_score"] == pytest.approx(float(row[4]), abs=1e-9)
        assert r["alt_score"] == pytest.approx(float(row[5]), abs=1e-9)
        w = np.log(np.maximum(np.array(mats[row[1]]), 1e-10))
        seqs = {s[0]: (s[8], s[9]) for s in snps}[row[3]]
        for side, k, seq in (("ref", 0, seqs[0]), ("alt", 1, seqs[1])):
            start, strand = int(float(row[15 + k])) - 1, row[19 + k]
            if r[f"{side}_start"] != start:        # a tie: atSNP's window (+0, -0, +1, ... order) scores the same
                m = w if strand == "+" else w[::-1, ::-1]
                theirs = sum(m[j, "ACGT".index(seq[start + j])] for j in range(len(w)))
                assert theirs == pytest.approx(r[f"{side}_score"], abs=1e-9), (row[1], row[3], side)
        _against_monte_carlo(r, [w, w[::-1, ::-1].copy()], prior, trans / trans.sum(axis=1, keepdims=True))


def _against_monte_carlo(r: dict, rows: list, prior, trans, n: int = 150_000) -> None:
    """The row's atSNP p-values within 4 combined standard errors of ``n`` sequences drawn here."""
    L = rows[0].shape[0]
    rng = np.random.default_rng(11)
    x = np.empty((n, 2 * L - 1), np.int64)
    x[:, 0] = rng.choice(4, n, p=prior)
    cum = np.cumsum(trans, axis=1)
    u = rng.random(x.shape)
    for i in range(1, x.shape[1]):
        x[:, i] = np.minimum((u[:, i:i + 1] > cum[x[:, i - 1]]).sum(axis=1), 3)
    M = _scores(x, rows).reshape(n, -1).max(axis=1)
    G = _tail_fn(M, np.full(n, 1 / n))
    g_ref, g_alt = float(G(r["ref_score"])), float(G(r["alt_score"]))
    H = _tail_fn(_change_all(x, rows, G).ravel(), np.full(3 * n, 1 / (3 * n)))
    h = float(H(abs(np.log(g_ref) - np.log(g_alt))))
    for mc, side in ((g_ref, "ref"), (g_alt, "alt"), (h, "change")):
        ours, rse = r[f"atsnp_{side}_pvalue"], r[f"atsnp_{side}_rse"]
        se = np.hypot(np.sqrt(mc * (1 - mc) / n), ours * rse)
        assert abs(ours - mc) <= 4 * se, (side, ours, mc, rse)


def test_markov_of_the_genome_and_a_bad_markov_file(tmp_path):
    from pipeline.io.genome import ingest
    from pipeline.variants.atsnp import markov_of_genome, read_markov
    from pipeline.variants.stage import VariantsError

    seq = "ACGTTGCAAN" * 50 + "GGGCCCATAT" * 30
    (tmp_path / "g.fa").write_text(f">a\n{seq}\n>b\nACGTACGT\n")
    prior, trans = markov_of_genome(ingest(str(tmp_path / "g.fa"), str(tmp_path / "g.zarr")))
    counts = np.ones((4, 4))
    for s in (seq, "ACGTACGT"):
        for a, b in zip(s, s[1:]):
            if a != "N" and b != "N":
                counts["ACGT".index(a), "ACGT".index(b)] += 1
    assert np.allclose(trans, counts / counts.sum(axis=1, keepdims=True))
    assert np.allclose(prior, counts.sum(axis=1) / counts.sum())
    (tmp_path / "bad.tsv").write_text("\tA\tC\tG\tT\nprior\t0.25\t0.25\t0.25\t0.25\nA\t1\t0\t0\t0\n")
    with pytest.raises(VariantsError, match=r"bad.tsv: rows C, G, T missing"):
        read_markov(str(tmp_path / "bad.tsv"))
    (tmp_path / "bad2.tsv").write_text("\tA\tC\tG\tT\nprior\t0.25\tx\t0.25\t0.25\n")
    with pytest.raises(VariantsError, match=r"bad2.tsv: line 2: four probabilities expected after 'prior'"):
        read_markov(str(tmp_path / "bad2.tsv"))


@pytest.mark.gpu
def test_gpu_tails_equal_the_cpu_ones():
    """The same samples (one host generator) give the same tails on CuPy as on NumPy."""
    import cupy

    from pipeline.motifs import minus_strand_pwm, pwm_from_motif, read_motifs
    from tests.conftest import DATA
    from workers.variants.atsnp import motif_tails

    m = read_motifs(str(DATA / "jaspar2024_subset.jaspar"))[2]
    w = pwm_from_motif(m, np.full(4, 0.25), 0.1)
    wm = minus_strand_pwm(w, np.full(4, 0.25))
    a = motif_tails(w, wm, PRIOR, TRANS, n=20_000, seed=4)
    b = motif_tails(w, wm, PRIOR, TRANS, n=20_000, seed=4, xp=cupy)
    for x, y in ((a.allele, b.allele), (a.change, b.change)):
        # the same samples, but sums rounding apart in the last bits may split a tie of scores differently, which
        # moves the estimate deep in the tail by a sample's weight: the functions agree within their own errors
        v = np.linspace(x.x[0], x.x[-1], 997)
        (lx, rx), (ly, ry) = x.at(v), y.at(v)
        close = np.abs(lx - ly) <= 2e-3
        assert close.mean() > 0.95 and np.all(np.abs(np.exp(lx) - np.exp(ly)) <= 3 * np.maximum(rx, 1e-3) * np.exp(lx))
