"""Exact score distributions, thresholds and p-values (workers/distribution/exact.py) against brute force.

References used here are independent of the module:
* full enumeration of the 4^m words (float64, summed in column order like the scan) for m <= 10;
* meet-in-the-middle enumeration (prefix x suffix, sorted suffix tails) for m <= 20;
* FIMO 5.4.1's own p-values (tests/data/fimo_reference) and an emulation of FIMO's rounded lattice.
"""
from __future__ import annotations

import math
import pickle
import re
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import SHARED
from workers.distribution import (
    ScoreThreshold,
    pvalue_of_score,
    pvalue_to_score,
    score_classes,
    score_distribution,
    score_to_pvalue,
)

DATA = Path(__file__).resolve().parents[1] / "data"
UNIFORM = np.full(4, 0.25)
ATRICH = np.array([0.3, 0.2, 0.2, 0.3])
REL = 1e-3
FP = 1e-9  # float64 summation noise between our sums and the brute-force sums
PVALUES = (1e-2, 1e-3, 1e-4, 1e-5)


# ------------------------------------------------------------------------------------------------
# helpers (deliberately independent of pipeline/motifs/)


def read_jaspar(path: Path) -> list[tuple[str, np.ndarray]]:
    """Minimal JASPAR reader: [(id, counts (m, 4))]."""
    out, rows, name = [], [], None
    for line in Path(path).read_text().splitlines():
        if line.startswith(">"):
            if name is not None:
                out.append((name, np.array(rows, dtype=float).T))
            name, rows = line[1:].split()[0], []
        elif line.strip():
            rows.append([float(x) for x in line.split("[")[1].split("]")[0].split()])
    if name is not None:
        out.append((name, np.array(rows, dtype=float).T))
    return out


def pwm_from_counts(counts: np.ndarray, pseudo: float = 0.1) -> np.ndarray:
    """FIMO-style: ppm = (counts + pseudo/4) / (colsum + pseudo), uniform background, log2."""
    ppm = (counts + pseudo * 0.25) / (counts.sum(axis=1, keepdims=True) + pseudo)
    return np.log2(ppm / 0.25)


class Brute:
    """All 4^m words: float64 scores summed in column order, probabilities, sorted tails."""

    def __init__(self, pwm: np.ndarray, bg: np.ndarray):
        s, p = np.zeros(1), np.ones(1)
        for j in range(pwm.shape[0]):
            s = (s[:, None] + pwm[j][None, :]).ravel()
            p = (p[:, None] * bg[None, :]).ravel()
        keep = (p > 0) & np.isfinite(s)
        s, p = s[keep], p[keep]
        o = np.argsort(s, kind="stable")
        self.s = s[o]
        self.p = p[o]
        self.tail = np.concatenate([np.cumsum(self.p[::-1])[::-1], [0.0]])

    def pv(self, x):
        """P(S >= x), vectorised."""
        return self.tail[np.searchsorted(self.s, np.asarray(x, dtype=float), side="left")]


class MITM:
    """Meet in the middle: P(prefix + suffix >= x) exactly, for m up to ~20."""

    def __init__(self, pwm: np.ndarray, bg: np.ndarray):
        h = pwm.shape[0] // 2
        self.a = Brute(pwm[:h], bg)
        self.b = Brute(pwm[h:], bg)

    def pv(self, x: float) -> float:
        i = np.searchsorted(self.b.s, x - self.a.s, side="left")
        return float((self.a.p * self.b.tail[i]).sum())

    def around(self, x: float) -> tuple[float, float]:
        """The highest attained score below ``x`` and the distance from ``x`` to the nearest attained score."""
        i = np.searchsorted(self.b.s, x - self.a.s, side="left")
        lower = np.where(i > 0, self.a.s + self.b.s[np.maximum(i - 1, 0)], -np.inf)
        upper = np.where(i < self.b.s.size, self.a.s + self.b.s[np.minimum(i, self.b.s.size - 1)], np.inf)
        return float(lower.max()), float(min((x - lower).min(), (upper - x).min()))


def word_scores(pwm: np.ndarray, words: np.ndarray) -> np.ndarray:
    s = np.zeros(words.shape[0])
    for j in range(pwm.shape[0]):
        s = s + pwm[j, words[:, j]]
    return s


def motif_words(pwm: np.ndarray, bg: np.ndarray, n: int, rng) -> np.ndarray:
    """Words drawn from the motif itself (prob ~ bg * 2^pwm): high scores, the hits' range."""
    w = bg[None, :] * np.exp2(np.where(np.isfinite(pwm), pwm, -np.inf))
    w /= w.sum(axis=1, keepdims=True)
    return np.stack([rng.choice(4, size=n, p=w[j]) for j in range(pwm.shape[0])], axis=1)


def jaspar_small() -> list[tuple[str, np.ndarray]]:
    mats = [(n, pwm_from_counts(c)) for n, c in read_jaspar(DATA / "jaspar2024_subset.jaspar")
            if c.shape[0] <= 10]
    if SHARED is not None:
        f = SHARED / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar"
        if f.exists():
            more = [(n, pwm_from_counts(c)) for n, c in read_jaspar(f) if 7 <= c.shape[0] <= 9]
            mats += more[::25]
    return mats


def check_threshold(t: ScoreThreshold, bf: Brute, p: float, *, need_exact: bool) -> None:
    """The certified threshold against the brute-force distribution."""
    top = float(bf.pv(bf.s[-1] - t.tie))          # the best tie class
    if not t.reachable:
        assert t.threshold == math.inf
        assert top > p, "called unreachable but the best score has Pv <= p"
        return
    assert top <= p * (1 + FP) or not need_exact
    lo, hi = t.pvalue_bounds
    true = float(bf.pv(t.threshold))
    assert t.pvalue == hi
    assert hi <= p * (1 + FP), "reported p-value above the requested one"
    assert lo <= hi <= lo * (1 + REL) + 1e-300, "bracket wider than 0.1 %"
    # the hit set {S >= alpha} has the probability the DP says (tie slack both ways)
    assert lo * (1 - FP) <= float(bf.pv(t.threshold + t.tie / 4))
    assert float(bf.pv(t.threshold - t.tie / 4)) <= hi * (1 + FP)
    assert true <= p * (1 + FP)
    if need_exact:
        assert t.exact_threshold
    if t.exact_threshold:
        # alpha sits in a gap: no attained score within tie/4 of it
        near = np.abs(bf.s - t.threshold) < t.tie / 4
        assert not near.any()
        # ... and it is the smallest: the next lower attained score has Pv > p
        i = int(np.searchsorted(bf.s, t.threshold, side="left"))
        if i > 0:
            assert float(bf.pv(bf.s[i - 1] - t.tie / 2)) > p
        assert lo == hi


def check_lookup(t: ScoreThreshold, bf: Brute, max_n: int = 20000) -> None:
    """score_to_pvalue on attained scores >= alpha: never below, at most 0.1 % above."""
    if not t.reachable:
        return
    sc = bf.s[np.searchsorted(bf.s, t.threshold):]
    if sc.size > max_n:
        spread = sc[np.linspace(0, sc.size - 1, max_n - 2000).astype(int)]
        sc = np.unique(np.concatenate([sc[-2000:], spread]))
    got = score_to_pvalue(t, sc)
    true = bf.pv(sc - t.tie / 2)
    assert np.all(got >= true * (1 - FP)), "lookup below the exact p-value"
    assert np.all(got <= true * (1 + REL)), f"lookup off by {np.max(got / true - 1):.2e}"
    assert np.all(got <= t.pvalue) and t.pvalue <= t.requested_pvalue, "a hit's p-value above the one asked for"
    # above the best score: 0
    assert score_to_pvalue(t, [bf.s[-1] + 1.0])[0] == 0.0


# ------------------------------------------------------------------------------------------------
# brute force, real JASPAR matrices


@pytest.mark.parametrize("name,pwm", jaspar_small(), ids=lambda x: x if isinstance(x, str) else "")
@pytest.mark.parametrize("bg", [UNIFORM, ATRICH], ids=["uniform", "AT0.3"])
def test_thresholds_jaspar_bruteforce(name, pwm, bg):
    bf = Brute(pwm, bg)
    for p in PVALUES:
        t = pvalue_to_score(pwm, bg, p)
        check_threshold(t, bf, p, need_exact=True)
        check_lookup(t, bf)
        # the certified lattice path alone (no exact classes at the threshold)
        t2 = pvalue_to_score(pwm, bg, p, exact=False)
        check_threshold(t2, bf, p, need_exact=False)
        check_lookup(t2, bf)


def _random_pwms():
    rng = np.random.default_rng(20240611)
    out = []
    for m in (3, 5, 7, 9):
        out.append((f"gauss{m}", rng.normal(0, 1.5, (m, 4))))
    base = rng.normal(0, 1.2, (3, 4))
    # repeated and letter-permuted columns: many exact ties across orders of summation
    out.append(("repeated", np.vstack([base, base, base[:, ::-1]])))
    # few distinct values: huge atoms everywhere
    out.append(("integer", rng.integers(-3, 3, (8, 4)).astype(float)))
    halves = [np.array([1.0, -2.0, -2.0, 1.0])] * 5 + [np.array([2.0, -3.0, -1.0, -3.0])] * 4
    out.append(("halves", np.vstack(halves)))
    # near ties at the 1e-7 level
    near = np.round(rng.normal(0, 1, (8, 4)), 3)
    near[::2] += 1e-7
    out.append(("near_ties", near))
    # letters that never match (log 0)
    ninf = rng.normal(0, 1, (6, 4))
    ninf[1, 2] = ninf[4, 0] = -np.inf
    out.append(("minus_inf", ninf))
    return out


@pytest.mark.parametrize("name,pwm", _random_pwms(), ids=lambda x: x if isinstance(x, str) else "")
@pytest.mark.parametrize("bg", [UNIFORM, ATRICH], ids=["uniform", "AT0.3"])
def test_thresholds_random_bruteforce(name, pwm, bg):
    bf = Brute(pwm, bg)
    for p in PVALUES + (0.3,):
        t = pvalue_to_score(pwm, bg, p)
        # p = 0.3: the exact classes may cost more than the lattice, which is then used
        check_threshold(t, bf, p, need_exact=p <= 1e-2)
        check_lookup(t, bf)
        t2 = pvalue_to_score(pwm, bg, p, exact=False)
        check_threshold(t2, bf, p, need_exact=False)
        check_lookup(t2, bf)


def test_ties_split_by_float_order_stay_together():
    """a+b+c and a+c+b differ in the last bit; the threshold never separates such words."""
    a, b, c = 0.1, 0.2, 0.6
    pwm = np.array([[a, -5, -5, -5], [b, c, -5, -5], [c, b, -5, -5]])
    bf = Brute(pwm, UNIFORM)
    assert (a + b) + c != (a + c) + b          # AAA and ACC: equal real scores, different floats
    p = 3.0 / 64                               # the best word (ACA) and the tied pair
    t = pvalue_to_score(pwm, UNIFORM, p)
    check_threshold(t, bf, p, need_exact=True)
    assert t.pvalue == pytest.approx(3 / 64, rel=1e-12)
    assert (a + b) + c >= t.threshold and (a + c) + b >= t.threshold
    t = pvalue_to_score(pwm, UNIFORM, 2.5 / 64)  # the pair cannot be split: only ACA
    assert t.pvalue == pytest.approx(1 / 64, rel=1e-12) and (a + c) + b < t.threshold


def test_background_with_a_zero():
    pwm = np.random.default_rng(3).normal(0, 1, (7, 4))
    bg = np.array([0.5, 0.0, 0.3, 0.2])
    bf = Brute(pwm, bg)
    for p in (1e-2, 1e-3):
        t = pvalue_to_score(pwm, bg, p)
        check_threshold(t, bf, p, need_exact=True)
        check_lookup(t, bf)


def test_unreachable():
    pwm = pwm_from_counts(read_jaspar(DATA / "jaspar2024_subset.jaspar")[1][1])  # MA0006.2, m = 5
    assert pwm.shape[0] == 5
    t = pvalue_to_score(pwm, UNIFORM, 1e-12)
    assert not t.reachable and t.threshold == math.inf and t.pvalue == 0.0
    # one word of probability 4^-5 ~ 9.8e-4 is the best: p just below is unreachable, just above is not
    bf = Brute(pwm, UNIFORM)
    top = float(bf.pv(bf.s[-1] - 1e-9))
    assert not pvalue_to_score(pwm, UNIFORM, top * 0.999).reachable
    t = pvalue_to_score(pwm, UNIFORM, top * 1.001)
    assert t.reachable and t.pvalue == pytest.approx(top, rel=1e-12)
    assert np.isnan(score_to_pvalue(pvalue_to_score(pwm, UNIFORM, 1e-12), [1.0])).all()


def test_pvalue_of_score_bruteforce():
    rng = np.random.default_rng(7)
    for name, pwm in jaspar_small()[:4] + _random_pwms()[:3]:
        for bg in (UNIFORM, ATRICH):
            bf = Brute(pwm, bg)
            picks = bf.s[rng.integers(bf.s.size // 2, bf.s.size, 15)]
            for s in np.concatenate([picks, picks + 1e-3, [bf.s[-1], bf.s[-1] + 1, bf.s[0] - 1]]):
                pv, (lo, hi) = pvalue_of_score(pwm, bg, float(s))
                true = float(bf.pv(s - 1e-9))
                assert pv == hi
                assert lo * (1 - FP) <= true <= hi * (1 + FP) + 1e-300
                assert hi <= lo * (1 + REL) + 1e-300


def test_score_distribution_matches_rounded_enumeration():
    pwm = jaspar_small()[2][1]
    for eps in (0.05, 0.01):
        probs, origin = score_distribution(pwm, ATRICH, eps)
        assert probs.sum() == pytest.approx(1.0, abs=1e-12)
        k = np.rint(pwm / eps).astype(np.int64)
        kk, pp = np.zeros(1, np.int64), np.ones(1)
        for j in range(pwm.shape[0]):
            kk = (kk[:, None] + k[j][None, :]).ravel()
            pp = (pp[:, None] * ATRICH[None, :]).ravel()
        ref = np.bincount(kk - kk.min(), weights=pp)
        assert origin == pytest.approx(kk.min() * eps)
        np.testing.assert_allclose(probs[: ref.size], ref, rtol=1e-9, atol=1e-18)


def test_pickle_and_equality():
    pwm = jaspar_small()[0][1]
    t = pvalue_to_score(pwm, UNIFORM, 1e-3)
    u = pickle.loads(pickle.dumps(t))
    assert u == t and u is not t
    assert pvalue_to_score(pwm, UNIFORM, 1e-3, table=False) != t
    with pytest.raises(ValueError):
        score_to_pvalue(pvalue_to_score(pwm, UNIFORM, 1e-3, table=False), [t.threshold])


# ------------------------------------------------------------------------------------------------
# longer matrices: meet in the middle (m <= 20) and the exact classes (any m)


def _long():
    mats = dict((n, pwm_from_counts(c)) for n, c in read_jaspar(DATA / "jaspar2024_subset.jaspar"))
    return [(n, mats[n]) for n in ("MA0017.3", "MA0139.2", "MA0007.4", "MA0106.3")]


@pytest.mark.parametrize("name,pwm", _long(), ids=lambda x: x if isinstance(x, str) else "")
def test_long_matrices_meet_in_the_middle(name, pwm):
    rng = np.random.default_rng(11)
    bg = ATRICH
    mm = MITM(pwm, bg)
    for p in (1e-4, 1e-6):
        for exact in (True, False):
            t = pvalue_to_score(pwm, bg, p, exact=exact)
            assert t.reachable
            lo, hi = t.pvalue_bounds
            assert hi <= p * (1 + FP) and hi <= lo * (1 + REL)
            assert lo * (1 - FP) <= mm.pv(t.threshold + t.tie / 4)
            assert mm.pv(t.threshold - t.tie / 4) <= hi * (1 + FP)
            if t.exact_threshold:
                assert lo == hi
            if exact:
                # minimal, not only certified: the lattice's bracket is resolved (workers.distribution.band), so a
                # window whose exact p-value is just under p is a hit (FIMO users found such windows left out)
                assert t.exact_threshold, f"{name} at {p:g}: alpha left to the lattice's bracket"
                below, nearest = mm.around(t.threshold)
                assert nearest > t.tie / 4, "alpha is not in a gap of the attained scores"
                assert mm.pv(below - t.tie / 2) > p, "a lower attained score also has Pv <= p"
        # hit scores: words drawn from the motif, kept where >= alpha
        s = word_scores(pwm, motif_words(pwm, bg, 400, rng))
        s = np.unique(s[s >= t.threshold])[:40]
        got = score_to_pvalue(t, s)
        true = np.array([mm.pv(x - t.tie / 2) for x in s])
        assert np.all(got >= true * (1 - FP)) and np.all(got <= true * (1 + REL))


@pytest.mark.parametrize("name", ["MA1654.2", "MA1930.2"])
def test_long_matrices_top_against_exact_classes(name):
    """m = 21 and 33: the table above alpha against an exhaustive enumeration of the top classes."""
    mats = dict((n, pwm_from_counts(c)) for n, c in read_jaspar(DATA / "jaspar2024_subset.jaspar"))
    pwm = mats[name]
    for p in (1e-4, 1e-6):
        t = pvalue_to_score(pwm, UNIFORM, p, exact=False)
        assert t.reachable and t.pvalue <= p
        lo, hi = t.pvalue_bounds
        assert hi <= lo * (1 + REL)
        # the top bits below the best score, enumerated exactly (as many as 300k classes allow)
        for bits in (12.0, 8.0, 4.0, 2.5):
            start = max(t.threshold, t.max_score - bits)
            ref = score_classes(pwm, UNIFORM, start, cap=400_000)
            if ref is not None:
                break
        vmin, vmax, mass = ref
        tail = np.cumsum(mass[::-1])[::-1]
        keep = vmin > start + t.tie
        q = np.concatenate([vmin[keep], vmax[keep]])
        ref = np.concatenate([tail[keep], tail[keep]])
        got = score_to_pvalue(t, q)
        assert np.all(got >= ref * (1 - FP)) and np.all(got <= ref * (1 + REL))


def test_length_40():
    """ENCODE/HOCOMOCO lengths: m = 40 (CTCF-like 33-mer + 7 columns of MA0139.2)."""
    mats = dict((n, pwm_from_counts(c)) for n, c in read_jaspar(DATA / "jaspar2024_subset.jaspar"))
    pwm = np.vstack([mats["MA1930.2"], mats["MA0139.2"][:7]])
    assert pwm.shape == (40, 4)
    for p in (1e-4, 1e-9):
        t = pvalue_to_score(pwm, ATRICH, p)
        lo, hi = t.pvalue_bounds
        assert t.reachable and hi <= p and hi <= lo * (1 + REL)
        assert pvalue_to_score(pwm, ATRICH, p, table=False).threshold == t.threshold
        pv, (plo, phi) = pvalue_of_score(pwm, ATRICH, t.threshold)
        assert plo <= hi * (1 + FP) and lo <= phi * (1 + FP)       # the two brackets overlap
        vmin, vmax, mass = score_classes(pwm, ATRICH, t.max_score - 2.0, cap=400_000)
        tail = np.cumsum(mass[::-1])[::-1]
        keep = vmin > t.max_score - 2.0 + t.tie
        got = score_to_pvalue(t, vmax[keep])
        assert np.all(got >= tail[keep] * (1 - FP)) and np.all(got <= tail[keep] * (1 + REL))


# ------------------------------------------------------------------------------------------------
# FIMO 5.4.1


FIMO = DATA / "fimo_reference"
NRDB = np.array([0.281774, 0.222020, 0.228876, 0.267330])  # MEME's default DNA background


def _fimo_motif():
    lines = (FIMO / "prodoric_mx000001_meme.txt").read_text().splitlines()
    k = next(i for i, line in enumerate(lines) if line.startswith("letter-probability matrix"))
    nsites = float(lines[k].split("nsites=")[1].split()[0])
    w = int(lines[k].split("w=")[1].split()[0])
    ppm = np.array([[float(x) for x in lines[k + 1 + i].split()] for i in range(w)])
    return ppm, nsites


@pytest.mark.parametrize("results,both", [("results.tsv", True), ("results-norc.tsv", False)])
def test_fimo_pvalues(results, both):
    """FIMO computes p-values on a rounded integer lattice (PSSM range 1000); ours are exact.

    FIMO 5.4.1 defaults: MEME's NRDB background (averaged with its complement when both strands
    are scanned), pseudocount 0.1: p' = (p*nsites + 0.1*bg)/(nsites + 0.1).  MexR has nsites=2,
    so its scores fall on few, heavy tie classes; the rounded lattice moves some of them across
    the score of a hit, and FIMO's p-values differ from the exact ones by up to ~27 % here.  We
    check (1) ours equal an exhaustive meet-in-the-middle enumeration, (2) emulating FIMO's
    lattice reproduces FIMO's p-values to the 3 digits printed, so the deviation is FIMO's
    rounding, (3) the deviation stays within the bound seen.
    """
    ppm, nsites = _fimo_motif()
    assert ppm.shape == (15, 4) and nsites == 2
    bg = (NRDB + NRDB[::-1]) / 2 if both else NRDB
    pwm = np.log2((ppm * nsites + 0.1 * bg) / (nsites + 0.1) / bg)
    # FIMO's lattice
    offset = math.floor(pwm.min())
    scale = math.floor(1000 / (pwm.max() - offset))
    lattice = np.floor((pwm - offset) * scale + 0.5)
    probs, origin = score_distribution(lattice, bg, 1.0)
    lat_tail = np.cumsum(probs[::-1])[::-1]
    mm = MITM(pwm, bg)
    t = pvalue_to_score(pwm, bg, 1e-4)
    index = {c: i for i, c in enumerate("ACGT")}
    devs = []
    for line in (FIMO / results).read_text().splitlines():
        if not line or line.startswith(("#", "motif_id")):
            continue
        f = line.split("\t")
        fimo_score, fimo_p, matched = float(f[6]), float(f[7]), f[9]
        codes = [index[c] for c in matched]  # matched_sequence is on the strand of the hit
        real = float(sum(pwm[j, c] for j, c in enumerate(codes)))
        assert abs(real - fimo_score) <= 15 * 0.5 / scale + 1e-4
        ours, (lo, hi) = pvalue_of_score(pwm, bg, real)
        exact = mm.pv(real - 1e-9)
        assert lo <= exact * (1 + FP) and exact <= hi * (1 + FP) and hi <= lo * (1 + REL)
        assert score_to_pvalue(t, [real])[0] == pytest.approx(exact, rel=REL) or real < t.threshold
        k = int(sum(lattice[j, c] for j, c in enumerate(codes)))
        emulated = lat_tail[int(round(k - origin))]
        assert float(f"{emulated:.3g}") == pytest.approx(fimo_p, rel=1e-9)
        devs.append(ours / fimo_p - 1.0)
    devs = np.abs(devs)
    # seen: max 0.265 (results.tsv, hit 12.5571: exact 4.83e-6 vs FIMO 6.57e-6), 0.0022 (norc)
    assert devs.max() < (0.3 if both else 0.01)


@pytest.mark.parametrize("bg", [UNIFORM, ATRICH], ids=["uniform", "AT0.3"])
def test_several_pvalues_share_work_and_stay_certified(bg):
    """pvalues_to_scores (one coarse pass, shared classes and lattice) against brute force and the
    single-p function; with tables the results are identical to pvalue_to_score."""
    from workers.distribution import pvalues_to_scores

    ps = [1e-5, 1e-2, 1e-3, 1e-4]
    for name, pwm in jaspar_small()[:6] + _random_pwms()[:4]:
        bf = Brute(pwm, bg)
        multi = pvalues_to_scores(pwm, bg, ps, table=False)
        for p, t in zip(ps, multi):
            assert t.requested_pvalue == p
            check_threshold(t, bf, p, need_exact=False)
        with_tables = pvalues_to_scores(pwm, bg, ps[:2])
        assert with_tables == [pvalue_to_score(pwm, bg, p) for p in ps[:2]]
    for name, pwm in _long()[:2]:
        mm = MITM(pwm, bg)
        for p, t in zip([1e-4, 1e-5, 1e-6], pvalues_to_scores(pwm, bg, [1e-4, 1e-5, 1e-6], table=False)):
            lo, hi = t.pvalue_bounds
            assert hi <= p * (1 + FP) and hi <= lo * (1 + REL)
            assert lo * (1 - FP) <= mm.pv(t.threshold + t.tie / 4)
            assert mm.pv(t.threshold - t.tie / 4) <= hi * (1 + FP)


def test_pvalue_table_rows_share_a_table():
    """PvalueTable: rows computed from one ScoreThreshold (a motif's two strands under a strand-symmetric
    background) share its segments (half the bytes to pickle to every worker); lookups equal score_to_pvalue's
    and those of a table of separate copies, row by row."""
    import pickle

    from pipeline.motifs import pwm_from_motif, read_motifs
    from tests.conftest import DATA
    from workers.distribution import pvalue_to_score, score_to_pvalue
    from workers.distribution.pvalue_table import PvalueTable

    pwms = [pwm_from_motif(m, np.full(4, 0.25), 0.1) for m in read_motifs(DATA / "jaspar2024_subset.jaspar")][:8]
    tabs = [t for t in (pvalue_to_score(w, np.full(4, 0.25), 1e-4, table=True) for w in pwms) if t.reachable]
    assert len(tabs) >= 4
    rows = [t for t in tabs for _ in range(2)]                  # each table on two rows (both strands)
    shared = PvalueTable.from_thresholds(rows)
    copies = PvalueTable.from_thresholds([pickle.loads(pickle.dumps(t)) for t in rows])     # distinct objects
    assert shared.x0.size == sum(t.seg_x0.size for t in tabs) == copies.x0.size // 2
    assert len(pickle.dumps(shared)) < 0.6 * len(pickle.dumps(copies))
    assert np.array_equal(np.diff(shared.bounds, axis=1), np.diff(copies.bounds, axis=1))
    rng = np.random.default_rng(3)
    r = rng.integers(0, len(rows), 5000).astype(np.int32)
    s = np.array([rows[i].threshold for i in r]) + rng.uniform(-0.5, 6, r.size)
    want = np.array([score_to_pvalue(rows[i], np.array([x]))[0] for i, x in zip(r, s)])
    got = shared.lookup(r, s)
    assert np.isfinite(got[s >= np.array([rows[i].threshold for i in r])]).all()
    assert np.array_equal(got, want, equal_nan=True) and np.array_equal(copies.lookup(r, s), got, equal_nan=True)
    assert PvalueTable.from_thresholds([]).bounds.shape == (0, 2)


def test_exp_det_is_exp_within_an_ulp_and_underflows_to_zero():
    """The scans' exponential (workers.distribution.pvalue_table.exp_det, twin of the GPU's): against libm's exp
    (math.exp) over the p-values' range and past both ends, at most 1.5 ulp away, exactly 1 at 0, 0 below the
    smallest subnormal, monotone on a fine grid."""
    import math

    from workers.distribution.pvalue_table import exp_array

    rng = np.random.default_rng(5)
    t = np.concatenate([np.linspace(-760.0, 5.0, 200_001), rng.uniform(-40.0, 0.0, 100_000), [0.0, -0.0, -1e-300]])
    got = np.empty_like(t)
    exp_array(t, got)
    want = np.array([math.exp(x) for x in t])
    normal = want >= np.finfo(np.float64).tiny
    assert (np.abs(got[normal] - want[normal]) <= 1.5 * np.spacing(want[normal])).all()
    assert (np.abs(got[~normal] - want[~normal]) <= 2 * 5e-324).all() and (got[t < -745.2] == 0.0).all()
    assert got[-3] == got[-2] == got[-1] == 1.0
    grid = np.linspace(-50.0, 0.0, 400_001)
    g = np.empty_like(grid)
    exp_array(grid, g)
    assert (np.diff(g) >= 0).all()


def test_exp_det_is_the_cuda_twins_sequence_of_roundings():
    """The host's exp_det against the operation sequence of its CUDA twin (workers/scan/scan_mma.cu: exp_det), each
    product and sum rounded alone as NumPy rounds them: bit for bit.  A fused multiply-add on the host (fast-math)
    or a reordered step would break the GPU's and CPU's p-values being the same bits, and fails here."""
    from workers.distribution.pvalue_table import EXP_TABLE, exp_array

    rng = np.random.default_rng(9)
    t = np.concatenate([np.linspace(-750.0, 2.0, 300_001), rng.uniform(-30.0, 0.0, 200_000)])
    got = np.empty_like(t)
    exp_array(t, got)
    src = (Path(__file__).parents[2] / "workers" / "scan" / "scan_mma.cu").read_text()
    body = src[src.index("double exp_det("):src.index("// Score -> p-value of each hit")]
    consts = [float(x) for x in re.findall(r"\d+\.\d+(?:e-?\d+)?", body)]
    inv, hi, lo, c5, c4, c3, c2 = 92.33248261689366, 0.010830424696223417, 2.572804622327669e-14, \
        0.008333333333333333, 0.041666666666666664, 0.16666666666666666, 0.5
    assert all(c in consts for c in (inv, hi, lo, c5, c4, c3, c2))          # the constants the CUDA code uses
    x = np.minimum(np.maximum(t, -746.0), 709.75)
    k = np.floor(x * inv + 0.5)
    r = (x - k * hi) - k * lo
    e = c4 + r * c5
    e = c3 + r * e
    e = c2 + r * e
    e = 1.0 + r * e
    e = r * e
    ki = k.astype(np.int64)
    f = EXP_TABLE[ki & 63]
    v = f + f * e
    q = ki >> 6
    q1 = q >> 1
    want = (v * ((q1 + 1023) << 52).view(np.float64)) * ((q - q1 + 1023) << 52).view(np.float64)
    assert np.array_equal(got, want)
