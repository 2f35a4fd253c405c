"""BUCKETSCOREDISTRIBUTION (workers/distribution/bucket.py) against brute-force enumeration and the exact method."""
from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from tests.conftest import SHARED
from tests.reference import brute_force_pvalue
from workers.distribution.bucket import (
    bucket_distribution,
    choose_slices,
    pvalues_to_scores_bucket,
    split_slices,
)
from workers.distribution import pvalue_of_score, pvalue_to_score

UNIFORM = np.full(4, 0.25)
ATRICH = np.array([0.3, 0.2, 0.2, 0.3])


def _random_pwm(rng, m, sharp=1.0):
    counts = rng.dirichlet(np.full(4, sharp), size=m)
    return np.log2((counts * 0.97 + 0.01) / 0.25)


def _all_scores(pwm, bg):
    scores, probs = np.zeros(1), np.ones(1)
    for j in range(pwm.shape[0]):
        scores = (scores[:, None] + pwm[j][None, :]).ravel()
        probs = (probs[:, None] * bg[None, :]).ravel()
    return scores, probs


def test_split_and_choose():
    assert split_slices(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert split_slices(5, 5) == [(i, i + 1) for i in range(5)]
    with pytest.raises(ValueError):
        split_slices(4, 5)
    # long matrices are cut so that no slice is longer than the CPU limit
    n = choose_slices(40, 3600)
    assert all(b - a <= 12 for a, b in split_slices(40, n))


@pytest.mark.parametrize("m,n_slices,bg", [(8, 1, UNIFORM), (9, 2, ATRICH), (10, 3, UNIFORM), (11, 4, ATRICH)])
def test_distribution_matches_enumeration(m, n_slices, bg):
    """Every bracket of the bucketed distribution holds the brute-force p-value, and its mass is 1."""
    rng = np.random.default_rng(m * 7 + n_slices)
    pwm = _random_pwm(rng, m)
    d = bucket_distribution(pwm, bg, n_slices=n_slices, n_buckets=200)
    assert d.n_slices == n_slices and d.k0 == 0
    assert d.mass.sum() == pytest.approx(1.0, abs=1e-12)
    scores, probs = _all_scores(pwm, bg)
    order = np.argsort(scores)[::-1]
    tail = np.cumsum(probs[order])          # P(S >= scores[order[i]]) for distinct scores
    qs = np.quantile(scores, [0.5, 0.9, 0.99, 0.999, 0.9999])
    for s in list(qs) + [float(scores.max()), float(scores.min()) + 1e-3]:
        exact = brute_force_pvalue(pwm, bg, s)
        lo, hi = d.pvalue_bounds(s)
        assert lo <= exact * (1 + 1e-9) + 1e-15 and exact <= hi * (1 + 1e-9) + 1e-15, (s, lo, exact, hi)
    # the seed's inequality: Pv[s] <= Pv(s) <= Pv[s + ⌈1 + log N⌉ Δ_M] holds with the bracket inside it
    assert d.hi_err + d.lo_err <= d.seed_bound + d.delta_m * 1e-6 + 2 * d.tie + 1e-9
    assert len(tail) == scores.size


@pytest.mark.parametrize("m,bg", [(10, UNIFORM), (11, ATRICH), (9, ATRICH)])
@pytest.mark.parametrize("p", [1e-2, 1e-3, 1e-4, 1e-5])
def test_threshold_certified_and_near_minimal(m, bg, p):
    rng = np.random.default_rng(m * 101 + int(-math.log10(p)))
    pwm = _random_pwm(rng, m, sharp=0.5)
    for n_slices in (None, 2):
        t = pvalues_to_scores_bucket(pwm, bg, [p], n_slices=n_slices)[0]
        assert t.method == "bucket" and t.n_slices >= 1
        if not t.reachable:
            # then not even the best word set can be certified: the best score has Pv > p or sits in the bracket
            assert brute_force_pvalue(pwm, bg, pwm.max(axis=1).sum()) > p * 0.5
            continue
        exact = brute_force_pvalue(pwm, bg, t.threshold)
        assert exact <= p * (1 + 1e-12)
        assert t.pvalue_bounds[0] <= exact * (1 + 1e-9) and exact <= t.pvalue_bounds[1] * (1 + 1e-9)
        below = brute_force_pvalue(pwm, bg, t.threshold - t.score_error - 2e-9)
        assert below > p
        assert t.score_error <= t.seed_bound + t.eps + 4 * t.tie + 1e-9


def test_fixed_buckets_seed_mode_and_pruning():
    """Fixed B gives the seed's Δ_M; a cut keeps only the tail, with identical tail values."""
    rng = np.random.default_rng(5)
    pwm = _random_pwm(rng, 20)
    full = bucket_distribution(pwm, ATRICH, n_slices=4, n_buckets=3600)
    rngs = pwm.max(axis=1).sum() - pwm.min(axis=1).sum()
    assert full.delta_m == pytest.approx(rngs / 3600, rel=1e-9)
    assert full.seed_bound == pytest.approx(3 * rngs / 3600, rel=1e-9)      # ⌈1 + log2 4⌉ = 3
    cut = float(np.quantile([full.origin, full.max_score], 0.7))
    part = bucket_distribution(pwm, ATRICH, n_slices=4, n_buckets=3600, cut_score=cut)
    assert part.k0 > 0 and part.mass.size < full.mass.size
    ks = np.arange(part.k0, part.k0 + part.mass.size, 97)
    np.testing.assert_allclose(part.tail(ks), full.tail(ks), rtol=1e-9, atol=1e-15)


def test_long_matrix_agrees_with_exact():
    """m = 30, non-uniform background: bucket and exact thresholds bracket the same p-value."""
    rng = np.random.default_rng(30)
    pwm = _random_pwm(rng, 30, sharp=0.7)
    for p in (1e-4, 1e-6):
        b = pvalues_to_scores_bucket(pwm, ATRICH, [p])[0]
        e = pvalue_to_score(pwm, ATRICH, p, table=False)
        assert b.reachable and e.reachable
        # the exact p-value of the bucket threshold lies in the bucket bracket
        _, (lo, hi) = pvalue_of_score(pwm, ATRICH, b.threshold, rel_tol=1e-4)
        assert b.pvalue_bounds[0] <= hi and lo <= b.pvalue_bounds[1]
        assert b.pvalue_bounds[1] <= b.pvalue_bounds[0] * (1 + 1e-3)
        assert abs(b.threshold - e.threshold) <= b.score_error + e.score_error


def _jaspar_core():
    from pipeline.motifs import pwm_from_motif, read_motifs

    path = SHARED / "motifs" / "JASPAR2024_CORE_non-redundant.jaspar" if SHARED else None
    if path is None or not path.exists():
        pytest.skip("JASPAR 2024 CORE not found in ../shared/data (MOTIFGRID_SHARED_DATA selects it)")
    ms = read_motifs(path)
    assert len(ms) == 2346
    return [pwm_from_motif(m, UNIFORM) for m in ms]


def test_bound_holds_on_every_jaspar_core_matrix():
    """All 2,346 JASPAR 2024 CORE matrices at p = 1e-3..1e-6 (the seed's fixed B = 3600 mode, N chosen
    per matrix): the exact p-value of each bucket threshold lies in the bucket bracket, which lies within
    the seed's ``Pv[s] <= Pv(s) <= Pv[s + ⌈1 + log N⌉ Δ_M]``."""
    pwms = _jaspar_core()
    ps = [1e-3, 1e-4, 1e-5, 1e-6]

    def check(w):
        bad = []
        d = bucket_distribution(w, UNIFORM, n_buckets=3600)
        for p in ps:
            t = d.threshold(p)
            if not t.reachable:
                # the best attainable score cannot be certified at p: its exact p-value is above p or
                # within the top bucket's bracket
                _, (lo, _) = pvalue_of_score(w, UNIFORM, w.max(axis=1).sum() - 1e-9)
                hi_top = d.pvalue_bounds(d.max_score - d.hi_err - d.lo_err)[1]
                if not (lo > p or hi_top > p):
                    bad.append((p, "unreachable"))
                continue
            _, (lo, hi) = pvalue_of_score(w, UNIFORM, t.threshold)
            if not (t.pvalue_bounds[0] <= hi * (1 + 1e-9) and lo <= t.pvalue_bounds[1] * (1 + 1e-9)):
                bad.append((p, t.pvalue_bounds, (lo, hi)))
            if not (hi <= p * (1 + 1e-9)):
                bad.append((p, "above p", hi))
            if not t.score_error <= t.seed_bound + d.delta + 4 * t.tie + 1e-9:
                bad.append((p, "score error", t.score_error, t.seed_bound))
        return bad

    with ThreadPoolExecutor(2) as ex:
        bad = [b for r in ex.map(check, pwms) for b in r]
    assert not bad, bad[:5]


def test_threshold_method_auto_and_multi_pvalue():
    from pipeline.distribution.thresholds import compute_thresholds_many, method_for

    assert method_for(12, "auto") == "exact" and method_for(60, "auto") == "bucket"
    rng = np.random.default_rng(1)
    pwms = [_random_pwm(rng, 8), _random_pwm(rng, 45, sharp=0.7)]
    res = compute_thresholds_many(pwms, ATRICH, [1e-3, 1e-5], method="auto", cache=False)
    assert [t.method for t in res[0]] == ["exact", "bucket"]
    assert all(t.requested_pvalue == 1e-3 for t in res[0]) and all(t.requested_pvalue == 1e-5 for t in res[1])
    ex = compute_thresholds_many(pwms[1:], ATRICH, [1e-5], method="exact", table=False, cache=False)[0][0]
    b = res[1][1]
    assert abs(ex.threshold - b.threshold) <= ex.score_error + b.score_error
    with pytest.raises(ValueError):
        compute_thresholds_many(pwms, ATRICH, [1e-3], method="fast")


@pytest.mark.gpu
def test_gpu_slices_match_cpu():
    from workers.backend import gpu_available

    if not gpu_available():
        pytest.skip("no GPU")
    rng = np.random.default_rng(12)
    for m, n in ((12, 1), (20, 2), (26, 2)):
        pwm = _random_pwm(rng, m)
        c = bucket_distribution(pwm, ATRICH, n_slices=n, n_buckets=3600, device="cpu")
        g = bucket_distribution(pwm, ATRICH, n_slices=n, n_buckets=3600, device="gpu")
        assert g.mass.sum() == pytest.approx(1.0, abs=1e-9)
        ks = np.arange(c.k0, c.k0 + c.mass.size, 13)
        np.testing.assert_allclose(g.tail(ks), c.tail(ks), rtol=1e-9, atol=1e-13)
        for p in (1e-4, 1e-6):
            assert g.threshold(p).threshold == pytest.approx(c.threshold(p).threshold, abs=2 * c.delta)
    # a small shared-memory-overflowing table (global atomics path)
    pwm = _random_pwm(rng, 14)
    c = bucket_distribution(pwm, ATRICH, n_slices=1, n_buckets=40000, device="cpu")
    g = bucket_distribution(pwm, ATRICH, n_slices=1, n_buckets=40000, device="gpu")
    # words on a bucket edge (the best word is on one in the fixed-B mode) may fall one cell apart: the
    # summation orders differ; the bracket's float slack covers that
    gc, cc = g.tail(np.arange(c.mass.size + 2)), c.tail(np.arange(-1, c.mass.size + 3))
    assert np.all(gc <= cc[:-2] * (1 + 1e-9) + 1e-13) and np.all(gc >= cc[2:] * (1 - 1e-9) - 1e-13)
    assert abs(g.mass.sum() - c.mass.sum()) < 1e-12


def test_cli_thresholds_methods_on_long_matrices(tmp_path, capsys):
    """Real long matrices (IMAGE, m >= 41) on both strands under a non-uniform background: `auto` uses the
    bucket method there and the exact one on short matrices; bucket and exact thresholds agree within their
    certified score errors; the TSV reports the bounds."""
    import csv

    from pipeline.cli.command import main

    src = SHARED / "motifs" / "gimmemotifs_dbs" / "IMAGE.pfm" if SHARED else None
    if src is None or not src.exists():
        pytest.skip("IMAGE.pfm not found in ../shared/data (MOTIFGRID_SHARED_DATA selects it)")
    records, cur = [], None
    for line in src.read_text().splitlines():
        if line.startswith(">"):
            cur = [line]
            records.append(cur)
        elif cur is not None and line.strip() and not line.startswith("#"):
            cur.append(line)
    long_ = [r for r in records if len(r) - 1 >= 41][:2]
    short = [r for r in records if 8 <= len(r) - 1 <= 12][:2]
    f = tmp_path / "m.pfm"
    f.write_text("\n".join(line for r in long_ + short for line in r) + "\n")
    rows = {}
    for method in ("auto", "exact"):
        out = tmp_path / f"{method}.tsv"
        assert main(["thresholds", str(f), "--pvalue", "1e-4", "1e-6", "--method", method,
                     "--background", "0.35,0.15,0.2,0.3", "-o", str(out)]) == 0
        rows[method] = list(csv.DictReader(out.open(), delimiter="\t"))
    err = capsys.readouterr().err
    assert "largest score error" in err and "bucket+exact" in err
    auto, exact = rows["auto"], rows["exact"]
    assert len(auto) == len(exact) == 4 * 2 * 2          # motifs × strands × p-values
    for a, e in zip(auto, exact):
        assert (a["motif_id"], a["strand"], a["requested_pvalue"]) == (e["motif_id"], e["strand"], e["requested_pvalue"])
        assert a["method"] == ("bucket" if int(a["length"]) >= 41 else "exact")
        if a["method"] == "bucket":
            assert int(a["n_slices"]) >= 4 and int(a["n_buckets"]) > 0
            assert float(a["score_error"]) <= float(a["seed_bound"]) + 0.01
            assert abs(float(a["threshold"]) - float(e["threshold"])) <= float(a["score_error"]) + float(e["score_error"])
            assert float(a["pvalue_high"]) <= float(a["pvalue_low"]) * (1 + 1e-3)
            assert float(a["pvalue_high"]) <= float(a["requested_pvalue"])
        else:
            assert a["threshold"] == e["threshold"]
    # the two strands of a long matrix differ under a strand-asymmetric background, and both are computed
    s = [a for a in auto if a["motif_id"] == auto[0]["motif_id"] and a["requested_pvalue"] == "0.0001"]
    assert {x["strand"] for x in s} == {"+", "-"} and s[0]["threshold"] != s[1]["threshold"]
