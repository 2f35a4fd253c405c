"""pipeline.enrich.centrality: CentriMo's central-enrichment test, against CentriMo's own reported numbers, a plain
reference written from its documentation, and exact integers far below 1e-300."""
import math
from fractions import Fraction

import numpy as np
import pytest

from pipeline.enrich.centrality import (CENTRALITY_SCHEMA, best_sites, binomial_log_sf, central_enrichment,
                                 central_windows, log_adjust, log_betainc)

stats = pytest.importorskip("scipy.stats")
special = pytest.importorskip("scipy.special")


# rows of centrimo.txt files written by CentriMo (MEME suite's example output, and a MEME-ChIP run on ENCODE
# SP3 summits ±100): sites_in_bin, total_sites, bin_width, total_width, p-value, mult_tests, log_adj_p-value.
# sites_in_bin is printed rounded; tie weights make it fractional (the p-value pins it: 19.5, 268.5).
CENTRIMO_ROWS = [
    (70, 629, 14, 486, 1.9e-21, 117852, -36.04),     # MA0108.1 TBP (--local: many windows)
    (319, 690, 128, 485, 4.5e-29, 117852, -53.59),   # UP00093_1 Klf7_primary
    (19.5, 531, 2, 192, 2.6e-6, 95, math.log(2.4e-4)),      # M6207_1.02 ELK1 (central windows)
    (268.5, 313, 137, 183, 1.7e-6, 91, math.log(1.5e-4)),   # M5591_1.02 KLF13
]


@pytest.mark.parametrize("row", CENTRIMO_ROWS)
def test_binomial_and_adjustment_reproduce_centrimo(row):
    sites, total, bins, n_bins, p, tests, log_adj = row
    lp = binomial_log_sf(sites, total, bins / n_bins)
    assert math.exp(lp) == pytest.approx(p, rel=0.05)            # printed with 2 digits
    assert float(log_adjust(lp, tests)) == pytest.approx(log_adj, abs=0.06)


@pytest.mark.parametrize("n_bins,tests", [(193, 96), (183, 91), (192, 95), (2, 0), (3, 1), (4, 1), (5, 2)])
def test_window_count_as_centrimo(n_bins, tests):
    # mult_tests of the central rows above: 193 -> 96, 183 -> 91, 192 -> 95
    k = central_windows(n_bins)
    assert k.size == tests
    assert (k % 2 == n_bins % 2).all() and (k < n_bins).all()


def test_log_betainc_against_scipy_and_exact():
    rng = np.random.default_rng(1)
    a = rng.uniform(0.5, 300, 500)
    b = rng.uniform(0.5, 300, 500)
    x = rng.uniform(0, 1, 500)
    r = special.betainc(a, b, x)
    ok = r > 1e-250
    np.testing.assert_allclose(np.exp(log_betainc(a, b, x))[ok], r[ok], rtol=1e-10)
    # integer a: I_p(k, n - k + 1) = P(Bin(n, p) >= k), exactly from fractions, far below 1e-300
    for k, n, p in [(400, 500, Fraction(1, 20)), (5000, 5000, Fraction(1, 100)), (900, 1200, Fraction(3, 17))]:
        tail = sum(math.comb(n, j) * p ** j * (1 - p) ** (n - j) for j in range(k, n + 1))
        want = (math.log10(tail.numerator) - math.log10(tail.denominator)) * math.log(10)
        assert float(log_betainc(k, n - k + 1, float(p))) == pytest.approx(want, rel=1e-10)


def test_log_adjust_matches_the_formula():
    lp = np.log(np.array([1e-3, 0.2, 1e-12, 0.9]))
    n = np.array([96, 10, 5000, 3])
    exact = [1 - (1 - Fraction(float(p))) ** int(k) for p, k in zip(np.exp(lp), n)]
    want = [math.log(q.numerator) - math.log(q.denominator) for q in exact]
    np.testing.assert_allclose(log_adjust(lp, n), want, rtol=1e-10)
    assert float(log_adjust(-2000.0, 100)) == pytest.approx(-2000.0 + math.log(100))


def _reference(L, widths, sites):
    """CentriMo central mode written from its documentation, one motif at a time: ``sites`` are
    (motif, record, start) best sites (no ties); a window of k positions holds the sites whose centre is
    within (k - 1)/2 bases of the sequence centre."""
    out = []
    for m, w in enumerate(widths):
        n_bins = L - w + 1
        offs = np.array([(2 * s + w - 1 - (L - 1)) / 2 for mm, _, s in sites if mm == m])
        total = offs.size
        ks = [k for k in range(1, n_bins) if k % 2 == n_bins % 2]
        best = (0.0, 0, 0.0)
        for k in ks:
            inside = int((np.abs(offs) <= (k - 1) / 2).sum())
            p = stats.binom.sf(inside - 1, total, k / n_bins) if inside else 1.0
            adj = -math.expm1(len(ks) * math.log1p(-p)) if p < 1 else 1.0
            if math.log(adj) < best[0] - 1e-12:
                best = (math.log(adj), k, inside)
        out.append((best, total, n_bins, len(ks)))
    return out


def test_central_enrichment_against_reference():
    rng = np.random.default_rng(7)
    L, widths = 101, np.array([8, 11, 15, 20])
    rows = []
    for m, w in enumerate(widths):
        for r in range(150):
            if rng.random() < 0.7:
                centred = m % 2 == 0 and rng.random() < 0.4     # motifs 0 and 2 favour the centre
                mid = (L - w) // 2
                s = int(np.clip(mid + rng.integers(-4, 5), 0, L - w)) if centred else int(rng.integers(0, L - w + 1))
                rows.append((m, r, s))
    # weaker sites of the same records must not count: only each record's best
    weak = [(m, r, (s + 7) % (L - widths[m] + 1)) for m, r, s in rows[::3]]
    motif = np.array([m for m, _, _ in rows + weak])
    record = np.array([r for _, r, _ in rows + weak])
    start = np.array([s for _, _, s in rows + weak])
    score = np.concatenate([np.full(len(rows), 10.0), np.full(len(weak), 9.0)])
    t = central_enrichment(widths, L, motif, record, start, score, n_motifs_tested=50)
    assert t.schema.equals(CENTRALITY_SCHEMA)
    ref = _reference(L, widths, rows)
    for got, ((la, k, inside), total, n_bins, tests) in zip(t.to_pylist(), ref):
        assert got["centrality_total"] == total and got["centrality_bins"] == n_bins
        assert got["centrality_tests"] == tests
        assert got["centrality_width"] == k and got["centrality_sites"] == inside
        assert got["centrality_log10_pvalue"] == pytest.approx(la / math.log(10), rel=1e-7, abs=1e-12)
        assert got["centrality_evalue"] == pytest.approx(min(50 * math.exp(la), 50), rel=1e-7)
    lp = t.column("centrality_log10_pvalue").to_numpy()
    assert lp[0] < -5 and lp[2] < -5 and lp[1] > -2 and lp[3] > -2


def test_ties_share_a_sequence_and_tiny_pvalues_stay_finite():
    m, r, s, w = best_sites([0, 0, 0, 1], [3, 3, 3, 3], [5, 9, 2, 4], [7.0, 7.0 + 1e-12, 6.0, 1.0])
    assert sorted(zip(m.tolist(), r.tolist(), s.tolist(), w.tolist())) == [(0, 3, 5, 0.5), (0, 3, 9, 0.5),
                                                                           (1, 3, 4, 1.0)]
    # 5000 summit-centred sites: p far below 1e-300, still finite
    L, wdt = 200, 10
    n = 5000
    t = central_enrichment([wdt], L, np.zeros(n, int), np.arange(n), np.full(n, (L - wdt) // 2),
                           np.ones(n))
    row = t.to_pylist()[0]
    assert row["centrality_width"] == 1 and row["centrality_sites"] == n
    want = n * math.log10(1 / (L - wdt + 1)) + math.log10(row["centrality_tests"])
    assert row["centrality_log10_pvalue"] == pytest.approx(want, rel=1e-9)
    assert row["centrality_pvalue"] == 0.0
