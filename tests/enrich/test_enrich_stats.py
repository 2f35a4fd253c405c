"""pipeline.enrich.stats: Fisher's one-sided test in log space (vs scipy and exact integers), odds ratio,
E- and q-values, the enrichment table."""
import math

import numpy as np
import pyarrow as pa
import pytest

from pipeline.enrich.stats import (ENRICHMENT_SCHEMA, EnrichError, enrichment_table, fisher_log10_pvalue,
                                   odds_ratio)

stats = pytest.importorskip("scipy.stats")


def _exact_log10(a, n1, c, n2):
    """log10 P(X >= a) from exact integers: Σ C(K, x) C(N - K, n1 - x) / C(N, n1)."""
    N, K = n1 + n2, a + c
    num = sum(math.comb(K, x) * math.comb(N - K, n1 - x) for x in range(a, min(K, n1) + 1))
    return math.log10(num) - math.log10(math.comb(N, n1))


def test_fisher_against_scipy():
    rng = np.random.default_rng(0)
    n1 = rng.integers(1, 400, 400)
    n2 = rng.integers(1, 400, 400)
    a = rng.integers(0, n1 + 1)
    c = rng.integers(0, n2 + 1)
    got = 10.0 ** fisher_log10_pvalue(a, n1, c, n2)
    want = [stats.fisher_exact([[x, m - x], [y, k - y]], alternative="greater").pvalue
            for x, m, y, k in zip(a, n1, c, n2)]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0)
    # edges: all or none of the targets with a site, empty control hits
    for t in [(0, 10, 0, 10), (10, 10, 10, 10), (10, 10, 0, 10), (0, 10, 10, 10), (3, 3, 0, 1)]:
        want = stats.fisher_exact([[t[0], t[1] - t[0]], [t[2], t[3] - t[2]]], alternative="greater").pvalue
        assert 10.0 ** fisher_log10_pvalue(*t) == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("table", [(5000, 10000, 30, 10000), (10000, 10000, 0, 10000), (900, 1000, 100, 50000),
                                   (150, 5000, 100, 50000), (2000, 2500, 4000, 12500), (60, 80, 40, 80)])
def test_fisher_far_below_double_range(table):
    got = float(fisher_log10_pvalue(*table))
    want = _exact_log10(*table)
    assert got == pytest.approx(want, rel=1e-9, abs=1e-10)


def test_fisher_tiny_pvalues_stay_ordered():
    # scipy underflows these to 0; the log keeps their order
    a = np.array([9000, 9500, 9900, 10000])
    lp = fisher_log10_pvalue(a, 10000, 100, 10000)
    assert np.isfinite(lp).all() and (lp < -1000).all() and (np.diff(lp) < 0).all()
    assert stats.fisher_exact([[9000, 1000], [100, 9900]], alternative="greater").pvalue == 0.0


def test_fisher_bad_counts():
    with pytest.raises(EnrichError, match="0 <= seqs <= total"):
        fisher_log10_pvalue(11, 10, 0, 10)


def test_odds_ratio():
    t = [(30, 100, 10, 100), (7, 50, 9, 40)]
    for a, n1, c, n2 in t:
        want = stats.fisher_exact([[a, n1 - a], [c, n2 - c]]).statistic
        assert odds_ratio(a, n1, c, n2) == pytest.approx(want)
    # a zero cell: Haldane-Anscombe, +0.5 everywhere
    assert odds_ratio(10, 10, 3, 20) == pytest.approx((10.5 * 17.5) / (0.5 * 3.5))
    assert odds_ratio(0, 10, 3, 20) == pytest.approx((0.5 * 17.5) / (10.5 * 3.5))


def test_enrichment_table():
    ids = ["M1", "M2", "M3", "M4"]
    names = ["a", "b", "c", "d"]
    pos = np.array([10, 400, 50, 400])
    neg = np.array([12, 40, 45, 40])
    t = enrichment_table(ids, names, pos, 500, neg, 1000, n_tests=10, params={"pvalue": 1e-4})
    assert t.schema.equals(ENRICHMENT_SCHEMA, check_metadata=False)
    rows = t.to_pylist()
    assert [r["rank"] for r in rows] == [1, 2, 3, 4]
    # M2 and M4 tie: the file order breaks it
    assert [r["motif_id"] for r in rows][:2] == ["M2", "M4"]
    for r in rows:
        i = ids.index(r["motif_id"])
        p = stats.fisher_exact([[pos[i], 500 - pos[i]], [neg[i], 1000 - neg[i]]], alternative="greater").pvalue
        assert r["pvalue"] == pytest.approx(p, rel=1e-9)
        assert r["evalue"] == pytest.approx(min(p * 10, 10), rel=1e-9)
        assert r["log10_pvalue"] == pytest.approx(math.log10(p), abs=1e-9)
        assert r["cluster"] is None and r["representative"] is None
    # BH over 10 tests (6 untested motifs count as p = 1)
    ps = np.array([r["pvalue"] for r in rows] + [1.0] * 6)
    m = ps.size
    q = [min(1.0, min(ps[np.argsort(ps)][j] * m / (j + 1) for j in range(k, m))) for k in range(m)]
    assert [r["qvalue"] for r in rows] == pytest.approx(q[:4], rel=1e-12)
    assert '"pvalue": 0.0001' in t.schema.metadata[b"motifgrid.enrich"].decode()


def test_evalue_is_p_times_tests_exactly_where_p_is_a_float():
    """p = 1 gives E = the number of tests itself (it was 878.9999999999997 of 879, from the logs); a p below the
    float range still gets its E from the log."""
    t = enrichment_table(["a", "b", "c"], ["a", "b", "c"], np.array([0, 3, 1000]), 1000, np.array([40, 3, 0]), 1000,
                         n_tests=879, params={}).to_pylist()
    by = {r["motif_id"]: r for r in t}
    assert by["a"]["pvalue"] == 1.0 and by["a"]["evalue"] == 879.0
    assert by["b"]["evalue"] == by["b"]["pvalue"] * 879
    assert by["c"]["pvalue"] == 0.0 and by["c"]["evalue"] == 0.0 and by["c"]["log10_pvalue"] < -300
    assert by["c"]["log10_pvalue"] + math.log10(879) < -300       # (its E from the log: 0 here too)


def test_enrichment_table_clusters_and_extra():
    extra = pa.table({"x": pa.array([1.0, 2.0, 3.0])})
    t = enrichment_table(["A", "B", "C"], ["a", "b", "c"], [1, 50, 9], 100, [1, 1, 1], 100,
                         clusters=[0, 1, 0], representatives=["C", "B", "C"], extra=extra)
    rows = t.to_pylist()
    assert [r["motif_id"] for r in rows] == ["B", "C", "A"]
    assert [(r["cluster"], r["representative"], r["x"]) for r in rows] == [(1, "B", 2.0), (0, "C", 3.0),
                                                                           (0, "C", 1.0)]
    t = enrichment_table(["A", "B", "C"], ["a", "b", "c"], [1, 50, 9], 100, [1, 1, 1], 100,
                         clusters=[None, 0, 0], representatives=[None, "B", "B"])        # A left out: nulls
    assert [(r["cluster"], r["representative"]) for r in t.to_pylist()] == [(0, "B"), (0, "B"), (None, None)]
    with pytest.raises(EnrichError, match="no target or no control"):
        enrichment_table(["A"], ["a"], [0], 0, [0], 10)
    with pytest.raises(EnrichError, match="rows for 3 motifs"):
        enrichment_table(["A", "B", "C"], ["a", "b", "c"], [1, 2, 3], 10, [1, 1, 1], 10, extra=extra.slice(0, 2))


def test_e_and_q_below_the_float_range_are_kept_as_logs():
    """TAp73 peaks put TP53 at E ≈ 1e-324: its evalue and qvalue underflowed to 0 in enrichment.tsv and the summary
    ("E=0 q=0") and the top motifs tied.  log10_evalue and log10_qvalue carry them on, equal to p × tests and BH
    computed in decimal arithmetic from exact p-values, and the TSV and summary write them from the logs, never as 0."""
    from decimal import Decimal, getcontext

    from pipeline.engine.dataset import table_tsv
    from pipeline.enrich.outputs import _logged_values
    from pipeline.enrich.report import sci
    from pipeline.cli.summary import _logged

    getcontext().prec = 40
    pos, neg, n = [3_000, 2_800, 400, 10, 1_500], [50, 60, 300, 12, 40], 3_000
    t = enrichment_table([f"M{i}" for i in range(5)], [f"m{i}" for i in range(5)], pos, n, neg, n, n_tests=879)
    rows = t.to_pylist()
    exact = {f"M{i}": Decimal(10) ** Decimal(_exact_log10(a, n, c, n)) for i, (a, c) in enumerate(zip(pos, neg))}
    p = [exact[r["motif_id"]] for r in rows]                       # rows are sorted by p
    assert all(r["qvalue"] == 0.0 and r["evalue"] == 0.0 and p[i] < Decimal("1e-330") for i, r in enumerate(rows[:2]))
    q = [min(min(p[j] * 879 / (j + 1) for j in range(i, 5)), Decimal(1)) for i in range(5)]
    for r, pi, qi in zip(rows, p, q):
        assert r["log10_evalue"] == pytest.approx(float(min(pi * 879, Decimal(879)).log10()), abs=1e-8)
        assert r["log10_qvalue"] == pytest.approx(float(qi.log10()), abs=1e-8)
    lq = [r["log10_qvalue"] for r in rows]
    assert lq[0] < lq[1] < -330                                     # ordered, not tied at 0
    tsv = table_tsv(_logged_values(t)).decode().splitlines()
    head = tsv[0].split("\t")
    for line, r in zip(tsv[1:3], rows):
        cells = dict(zip(head, line.split("\t")))
        for name in ("pvalue", "evalue", "qvalue"):
            assert cells[name] == sci(r[f"log10_{name}"], 4) and not cells[name].startswith("0"), cells
    assert _logged(rows[0], "qvalue", sci) == sci(lq[0]) != "0"
