"""Motif identification (workers/compare/tomtom.py, pipeline/compare/identify.py): Tomtom's statistic against a plain-loop
reference, against memelite's tomtom, on queries cut from JASPAR matrices, and the output table."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pyarrow.compute as pc
import pytest

from pipeline.compare.identify import BEST_MATCHES_SCHEMA, IdentifyError, identify, match_all
from pipeline.motifs import Motif, motif_probabilities
from tests.conftest import SHARED, needs_shared
from workers.compare import tomtom as tt

BINS = 100


# ------------------------------------------------------------------------------------ plain-loop reference
def _col_score(q, t, distance):
    if distance == "ed":
        return -math.sqrt(sum((a - b) ** 2 for a, b in zip(q, t)))
    qc, tc = [a - 0.25 for a in q], [b - 0.25 for b in t]
    den = math.sqrt(sum(a * a for a in qc) * sum(b * b for b in tc))
    return sum(a * b for a, b in zip(qc, tc)) / den if den > 0 else 0.0


def naive_tomtom(queries, targets, distance="ed", both_strands=True, min_overlap=1):
    """Tomtom as tomtom.c describes it, one pair and one offset at a time (float64, np.convolve).

    Returns (Q, N) arrays p, lattice score, offset, strand, overlap."""
    N = len(targets)
    mats = list(targets) + ([t[::-1, ::-1] for t in targets] if both_strands else [])
    starts = np.cumsum([0] + [len(t) for t in mats])
    tcols = [c for t in mats for c in t]
    C = len(tcols)
    out = {k: np.zeros((len(queries), N)) for k in ("p", "score", "offset", "strand", "overlap")}
    for qi, q in enumerate(queries):
        n = len(q)
        S = np.array([[_col_score(a, b, distance) for b in tcols] for a in q])
        R = S - np.median(S, axis=1)[:, None]
        small, large = R.min(), R.max()
        small = large - 1 if large == small else small
        o = math.floor(small)
        scale = max(math.floor(BINS / (large - o)), 1)
        ints = np.clip(np.floor((R - o) * scale + 0.5), 0, BINS).astype(int)
        z0 = round(-o * scale)
        hist = [np.bincount(ints[i], minlength=BINS + 1) / C for i in range(n)]

        def pmf(a, m):
            p = hist[a]
            for k in range(a + 1, a + m):
                p = np.convolve(p, hist[k])
            return p

        for j in range(N):
            tl = len(targets[j])
            best = None
            for s in range(2 if both_strands else 1):
                base = starts[j + s * N]
                for off in range(-(n - 1), tl):
                    pairs = [(i, i + off) for i in range(n) if 0 <= i + off < tl]
                    if len(pairs) < min(min_overlap, n, tl):
                        continue
                    sc = sum(int(ints[i, base + c]) - z0 for i, c in pairs)
                    cand = (sc, len(pairs), -s, -off)
                    best = cand if best is None or cand > best else best
            sc = best[0]
            log_g = 0.0
            for off in range(-(n - 1), tl):
                a, e = max(0, -off), min(n, tl - off)
                p, thr = pmf(a, e - a), sc + (e - a) * z0 - 1      # P(span sum <= thr)
                if thr < 0:
                    log_g = -math.inf
                    break
                below, above = math.fsum(p[:thr + 1]), math.fsum(p[thr + 1:])
                if below == 0:
                    log_g = -math.inf
                    break
                log_g += math.log(below) if below < 0.5 else math.log1p(-above)
            strands = 2 if both_strands else 1
            out["p"][qi, j] = 1.0 if log_g == -math.inf else -math.expm1(strands * log_g)
            out["score"][qi, j], out["overlap"][qi, j] = sc, best[1]
            out["strand"][qi, j], out["offset"][qi, j] = -best[2], -best[3]
    return out


def _random_ppms(rng, widths, sharp=0.5):
    return [rng.dirichlet(np.full(4, sharp), size=w) for w in widths]


@pytest.mark.parametrize("distance,both,mo", [("ed", True, 1), ("ed", False, 3), ("pearson", True, 2)])
def test_matches_plain_loop_reference(distance, both, mo):
    rng = np.random.default_rng(7)
    targets = _random_ppms(rng, rng.integers(3, 11, size=24))
    queries = _random_ppms(rng, [2, 4, 5, 5, 7])
    queries.append(targets[3][1:5].copy())                         # a real match, tiny p-value
    ts = tt.prepare_targets(targets, distance=distance, both_strands=both, device="cpu")
    res = tt.search(queries, ts, min_overlap=mo)
    ref = naive_tomtom(queries, targets, distance, both, mo)
    np.testing.assert_allclose(res.pvalue, ref["p"], rtol=1e-9, atol=0)
    for k in ("offset", "strand", "overlap"):
        np.testing.assert_array_equal(getattr(res, k), ref[k], err_msg=k)
    assert res.pvalue[-1, 3] < 1e-6 and res.offset[-1, 3] == 1 and res.strand[-1, 3] == 0
    # the complete score in column-score units is the lattice score over the query's scale
    S = tt.column_scores(np.concatenate(queries[-1:]), ts)
    _, _, scale = tt.quantise(S, 4)
    np.testing.assert_allclose(res.score[-1] * scale[0], ref["score"][-1], atol=1e-9)


def test_tiny_widths_and_flat_columns():
    rng = np.random.default_rng(4)
    targets = _random_ppms(rng, [1, 1, 2, 3, 1, 2, 5])
    queries = _random_ppms(rng, [1, 1, 3, 6])
    for both in (True, False):
        res = tt.search(queries, tt.prepare_targets(targets, both_strands=both, device="cpu"), min_overlap=2)
        ref = naive_tomtom(queries, targets, "ed", both, 2)
        np.testing.assert_allclose(res.pvalue, ref["p"], rtol=1e-9)
        for k in ("offset", "strand", "overlap"):
            np.testing.assert_array_equal(getattr(res, k), ref[k], err_msg=k)
    flat = tt.search([np.full((3, 4), 0.25)], tt.prepare_targets([np.full((4, 4), 0.25)] * 3, device="cpu"))
    assert (flat.pvalue == 1.0).all() and (flat.overlap == 3).all()      # every alignment ties: no evidence


def test_span_convolution_compiled_equals_broadcast():
    """The CPU's compiled convolution step of the span distributions = the broadcast adds (the GPU's), bit for bit,
    on real query histograms against JASPAR-like targets (taps with zero entries, spans of several lengths)."""
    rng = np.random.default_rng(8)
    ts = tt.prepare_targets(_random_ppms(rng, rng.integers(4, 16, size=60)), device="cpu")
    ints, _, _ = tt.quantise(tt.column_scores(np.concatenate(_random_ppms(rng, [9, 9, 9])), ts), 9)
    f = tt.column_histograms(ints)
    taps = np.flatnonzero(f.reshape(-1, f.shape[2]).any(axis=0))
    assert taps.size < f.shape[2]                                  # some entries never occur
    pmf = f
    for m in range(1, 5):
        prev, ker = pmf[:, :9 - m], f[:, m:]
        want = np.zeros((prev.shape[0], prev.shape[1], prev.shape[2] + f.shape[2] - 1))
        for k in taps:
            want[:, :, k:k + prev.shape[2]] += prev * ker[:, :, k:k + 1]
        got = tt._convolve(prev, ker, taps, np)
        assert np.array_equal(got, want), m
        pmf = got


@pytest.mark.parametrize("C", [1, 2, 3, 10, 101, 4096, 5001])
def test_selection_medians_equal_numpy(C):
    """The GPU's median (histogram selection) gives np.median's values exactly: ties, constant rows, odd/even."""
    rng = np.random.default_rng(C)
    S = -np.sqrt(rng.uniform(size=(12, C)) * 2)
    S[3] = 1.5
    S[4, :C // 2] = 0.25
    S[5] = np.round(S[5], 1)
    S[6, ::2] = S[6, 0]
    np.testing.assert_array_equal(tt._select_medians(S, np), np.median(S, axis=1))


def test_batches_are_independent():
    rng = np.random.default_rng(3)
    targets = _random_ppms(rng, rng.integers(4, 14, size=40))
    queries = _random_ppms(rng, [6, 6, 6, 9, 4, 6])
    ts = tt.prepare_targets(targets, device="cpu")
    one = tt.search(queries, ts)
    each = tt.search(queries, ts, chunk_bytes=1)                   # one query per batch
    for k in ("pvalue", "score", "offset", "strand", "overlap"):
        np.testing.assert_array_equal(getattr(one, k), getattr(each, k))
    single = tt.search([queries[3]], ts)
    np.testing.assert_array_equal(single.pvalue[0], one.pvalue[3])


# ------------------------------------------------------------------------------------ JASPAR
@pytest.fixture(scope="module")
def jaspar():
    if SHARED is None:
        from tests.conftest import NO_SHARED

        pytest.skip(NO_SHARED)
    from pipeline.motifs import read_motifs

    return read_motifs(SHARED / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar")


def _ppm(m):
    return m.matrix / m.matrix.sum(axis=1, keepdims=True)


@needs_shared
def test_agrees_with_memelite(jaspar, monkeypatch):
    """Same matrices, complete scores both: p-values close, rankings the same; with memelite's binned median
    put in place of the exact one, p-values equal to 1e-9 and best alignments equal up to ties."""
    memelite = pytest.importorskip("memelite")
    T = [_ppm(m) for m in jaspar]
    Q = T[::30]
    mp, _, mo, mov, mst = memelite.tomtom([q.T.copy() for q in Q], [t.T.copy() for t in T], n_target_bins=None)
    ts = tt.prepare_targets(T, device="cpu")
    res = tt.search(Q, ts)
    d = np.abs(np.log10(res.pvalue) - np.log10(mp))
    assert np.median(d) < 0.005 and np.percentile(d, 95) < 0.05, (np.median(d), np.percentile(d, 95))
    assert (res.pvalue.argmin(axis=1) == mp.argmin(axis=1)).all()
    top = np.argsort(mp, axis=1)[:, :10]                          # memelite's ten best per query: same order
    same = [(np.argsort(res.pvalue[i, top[i]], kind="stable") == np.argsort(mp[i, top[i]], kind="stable")).mean()
            for i in range(len(Q))]
    assert np.mean(same) > 0.9, np.mean(same)

    from memelite.tomtom import _binned_median

    def binned(S, xp):
        bins, counts = np.zeros((1000, 2)), np.ones(S.shape[1], np.int64)
        return np.array([_binned_median(r, bins, r.min(), r.max(), counts) for r in S])

    monkeypatch.setattr(tt, "_row_medians", binned)
    res = tt.search(Q, ts)
    np.testing.assert_allclose(res.pvalue, mp, rtol=1e-9)
    differ = (res.offset != mo) | (res.strand != mst)
    assert (res.overlap[~differ] == mov[~differ]).all()
    lattice = {}
    for i, j in zip(*np.nonzero(differ)):                         # memelite prefers the reverse strand on ties
        n, w = len(Q[i]), len(T[j])
        if i not in lattice:
            ints, z0, scale = tt.quantise(tt.column_scores(Q[i], ts), n)
            lattice[i] = (ints[0].astype(int) - z0[0], scale[0])
        c, scale = lattice[i]
        base = ts.starts[j + int(mst[i, j]) * len(T)]
        theirs = sum(c[k, base + k + int(mo[i, j])] for k in range(n) if 0 <= k + int(mo[i, j]) < w)
        assert theirs == round(res.score[i, j] * scale), (i, j)


@needs_shared
def test_cut_queries_identify_their_matrix(jaspar):
    """Eight consecutive columns cut from a JASPAR matrix, as counts: the source matrix is the best match,
    at the cut's offset, forward; the same cut reverse-complemented: the reverse strand, the same columns."""
    rng = np.random.default_rng(11)
    long = [m for m in jaspar if m.length >= 12]
    picks = [long[i] for i in rng.choice(len(long), size=16, replace=False)]
    queries, starts = [], []
    for k, m in enumerate(picks):
        s = int(rng.integers(0, m.length - 8 + 1))
        starts.append(s)
        cut = m.matrix[s:s + 8]
        if k % 2:
            cut = cut[::-1, ::-1]
        queries.append(Motif(id=f"cut{k}", name=m.name, matrix=np.ascontiguousarray(cut), kind="counts",
                             nsites=None, source="test", record=k + 1))
    tab = identify(queries, jaspar, top=3)
    best = tab.filter(pc.equal(tab["rank"], 1)).to_pylist()
    for k, (row, m, s) in enumerate(zip(best, picks, starts)):
        assert row["target"] == m.id, (k, row, m)
        assert row["overlap"] == 8 and row["similarity"] == pytest.approx(1.0, abs=1e-12)
        if k % 2 == 0:
            assert (row["strand"], row["offset"]) == ("+", s), (k, row, s)
        else:       # the reverse complement of the target holds the cut at m - s - 8
            assert (row["strand"], row["offset"]) == ("-", m.length - s - 8), (k, row, s)
        assert row["pvalue"] < 1e-8 and row["evalue"] == pytest.approx(row["pvalue"] * len(jaspar))


@needs_shared
def test_overhanging_query(jaspar):
    """Two uniform columns then a matrix's first six: the match overhangs by two (offset -2, overlap 6)."""
    m = next(x for x in jaspar if x.length >= 10)
    mat = np.vstack([np.full((2, 4), 5.0), m.matrix[:6] / m.matrix[:6].sum(axis=1, keepdims=True) * 20])
    q = Motif(id="over", name="over", matrix=mat, kind="counts", nsites=None, source="test", record=1)
    row = identify([q], jaspar, top=1).to_pylist()[0]
    assert (row["target"], row["strand"], row["offset"], row["overlap"]) == (m.id, "+", -2, 6)


# ------------------------------------------------------------------------------------ q-values and the table
def test_bh_qvalues():
    rng = np.random.default_rng(5)
    p = np.concatenate([rng.uniform(size=(3, 40)) ** 3, np.array([[0.01] * 20 + [1.0] * 20])])
    q = tt.bh_qvalues(p)
    n = p.shape[1]
    for row, qrow in zip(p, q):                                   # the definition, O(n²)
        order = np.argsort(row, kind="stable")
        expect = np.empty(n)
        for r, i in enumerate(order):
            expect[i] = min(1.0, min(row[order[k]] * n / (k + 1) for k in range(r, n)))
        np.testing.assert_allclose(qrow, expect, rtol=1e-12)
    stats = pytest.importorskip("scipy.stats")
    np.testing.assert_allclose(q, stats.false_discovery_control(p, axis=1), rtol=1e-12)


def _motifs(rng, widths, tag):
    return [Motif(id=f"{tag}{k}", name=f"{tag.upper()}{k}", matrix=rng.dirichlet(np.full(4, 0.4), size=w) * 30,
                  kind="counts", nsites=None, source=f"{tag}.jaspar", record=k + 1) for k, w in enumerate(widths)]


def test_identify_table():
    rng = np.random.default_rng(2)
    targets = _motifs(rng, rng.integers(5, 13, size=60), "t")
    queries = [targets[4], targets[10]] + _motifs(rng, [6, 8], "q")
    tab = identify(queries, targets, top=4)
    assert tab.schema.equals(BEST_MATCHES_SCHEMA)
    meta = json.loads(tab.schema.metadata[b"motifgrid.identify"])
    assert meta["distance"] == "ed" and meta["targets"] == 60 and meta["top"] == 4
    assert tab["rank"].to_pylist() == [1, 2, 3, 4] * 4
    assert tab["query"].to_pylist()[::4] == ["t4", "t10", "q0", "q1"]
    assert tab["target"].to_pylist()[:1] == ["t4"] and tab["target"].to_pylist()[4:5] == ["t10"]
    m = match_all(queries, targets)
    rows = tab.to_pylist()
    for r in rows:
        i = [q.id for q in queries].index(r["query"])
        j = int(r["target"][1:])
        assert r["pvalue"] == m.pvalue[i, j] and r["qvalue"] == m.qvalue[i, j]
        assert r["evalue"] == pytest.approx(60 * r["pvalue"], rel=1e-12)
        assert r["target_name"] == targets[j].name
        qm, tm = motif_probabilities(queries[i], np.full(4, 0.25)), motif_probabilities(targets[j], np.full(4, 0.25))
        assert r["similarity"] == pytest.approx(tt.alignment_similarity(qm, tm, r["offset"], r["strand"] == "-"))
    for k in range(4):
        p = [r["pvalue"] for r in rows[4 * k:4 * k + 4]]
        assert p == sorted(p)
    selfless = identify(queries[:2], targets, top=2, exclude_self=True)
    assert "t4" not in selfless["target"].to_pylist()[:2] and "t10" not in selfless["target"].to_pylist()[2:]


def test_bad_input():
    rng = np.random.default_rng(1)
    targets = _motifs(rng, [6] * 50, "t")
    lo = Motif(id="lo", name="lo", matrix=np.zeros((5, 4)) + 10.0, kind="logodds", nsites=None, source="x.meme",
               record=3)
    with pytest.raises(IdentifyError, match=r"x\.meme: motif lo \(record 3\) is a log-odds matrix"):
        identify([lo], targets)
    with pytest.raises(IdentifyError, match="top must be >= 1"):
        identify(targets[:1], targets, top=0)
    with pytest.raises(IdentifyError, match="distance must be one of ed, pearson"):
        identify(targets[:1], targets, distance="sandelin")
    with pytest.raises(IdentifyError, match="min_overlap"):
        identify(targets[:1], targets, min_overlap=0)
    with pytest.raises(ValueError, match="target 1: rows must be letter probabilities"):
        tt.prepare_targets([np.full((3, 4), 0.25), np.ones((3, 4))])
    with pytest.raises(ValueError, match="distance must be one of"):
        tt.prepare_targets([np.full((3, 4), 0.25)], distance="sandelin")
    with pytest.warns(RuntimeWarning, match="fewer than 50"):
        identify(targets[:1], targets[:10])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert identify(targets[:1], targets, top=100).num_rows == 50     # top is capped at the targets


@pytest.mark.gpu
def test_gpu_matches_cpu():
    rng = np.random.default_rng(9)
    targets = _random_ppms(rng, rng.integers(4, 20, size=300))
    queries = _random_ppms(rng, [5, 8, 8, 12, 20]) + [targets[7][2:9].copy()]
    cpu = tt.search(queries, tt.prepare_targets(targets, device="cpu"))
    gpu = tt.search(queries, tt.prepare_targets(targets, device="gpu"))
    same = (cpu.score == gpu.score) & (cpu.offset == gpu.offset) & (cpu.strand == gpu.strand)
    assert same.mean() > 0.995
    np.testing.assert_allclose(gpu.pvalue[same], cpu.pvalue[same], rtol=1e-6)
    assert (gpu.pvalue.argmin(axis=1) == cpu.pvalue.argmin(axis=1)).all()
    import cupy

    S = -np.sqrt(rng.uniform(size=(40, 3001)) * 2)
    S[1, ::2] = S[1, 0]
    np.testing.assert_array_equal(tt._select_medians(cupy.asarray(S), cupy).get(), np.median(S, axis=1))


# ------------------------------------------------------------------------------------ run_identify (the fan-out)
def test_run_identify_batches_equal_one_pass():
    """Queries cut into tasks (one query each; self-matches excluded by index) give the table and p-values of one
    in-process pass: the E- and q-values of a task are final since it holds every target."""
    from pipeline.compare.identify import query_tasks, run_identify

    rng = np.random.default_rng(12)
    motifs = _motifs(rng, rng.integers(5, 14, size=55), "m")
    one = match_all(motifs, motifs, exclude_self=True)
    res = run_identify(motifs, motifs, top=4, exclude_self=True, keep_pvalues=True, queries_per_task=1, device="cpu")
    assert res.tasks == 55
    np.testing.assert_array_equal(res.pvalue, one.pvalue)
    ref = identify(motifs, motifs, top=4, exclude_self=True)
    assert res.table.equals(ref) and res.table.schema.metadata == ref.schema.metadata
    parts = query_tasks(np.array([5, 9, 5, 7, 9, 5]), n_workers=1, per_task=2)
    assert [p.tolist() for p in parts] == [[0, 2], [5, 3], [1, 4]]          # by width, then input order


@pytest.mark.gpu
def test_run_identify_gpu_matches_cpu():
    from pipeline.compare.identify import run_identify

    rng = np.random.default_rng(13)
    motifs = _motifs(rng, rng.integers(5, 20, size=120), "g")
    cpu = run_identify(motifs[:30], motifs, top=3, device="cpu", keep_pvalues=True)
    gpu = run_identify(motifs[:30], motifs, top=3, device="gpu", keep_pvalues=True)
    assert gpu.table["target"].to_pylist()[::3] == cpu.table["target"].to_pylist()[::3]
    assert np.isclose(gpu.pvalue, cpu.pvalue, rtol=1e-6, atol=0).mean() > 0.995     # lattice ties may differ


def test_run_identify_on_dask_lays_targets_out_once_per_worker(monkeypatch):
    """On a Dask cluster (one worker, two threads) the tasks share one target layout: prepare_targets runs once
    for 8 tasks; the result equals the in-process one."""
    from distributed import Client, LocalCluster

    from pipeline.compare.identify import run_identify

    calls = []
    real = tt.prepare_targets

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(tt, "prepare_targets", counted)
    rng = np.random.default_rng(14)
    motifs = _motifs(rng, rng.integers(5, 12, size=60), "d")
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cl, \
            Client(cl) as c:
        res = run_identify(motifs[:16], motifs, c, top=2, queries_per_task=2)
    assert res.tasks == 8 and len(calls) == 1
    assert res.table.equals(identify(motifs[:16], motifs, top=2))
