"""COMPARE (workers/compare/, pipeline/compare/run.py) against brute-force enumeration of all words."""
from __future__ import annotations

import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.motifs import reverse_complement
from workers.compare import compare_pairs, joint_tp_cpu, prepare_rows, shifts, similarity
from workers.distribution import pvalue_to_score

ATRICH = np.array([0.3, 0.2, 0.2, 0.3])
UNIFORM = np.full(4, 0.25)


def _pwm(rng, m, bg, sharp=0.5):
    c = rng.dirichlet(np.full(4, sharp), size=m)
    return np.log2((c * 0.97 + 0.01) / bg)


def brute_joint(wa, ta, wb, tb, shift, bg):
    """P(S_A >= ta, S_B >= tb), P(S_A >= ta), P(S_B >= tb) over all words of the union (plain enumeration)."""
    ma, mb = len(wa), len(wb)
    start = min(0, shift)
    L = max(ma, shift + mb) - start
    WA = np.zeros((L, 4))
    WB = np.zeros((L, 4))
    WA[-start:-start + ma] = wa
    WB[shift - start:shift - start + mb] = wb
    sa, sb, pr = np.zeros(1), np.zeros(1), np.ones(1)
    for j in range(L):
        sa = (sa[:, None] + WA[j]).ravel()
        sb = (sb[:, None] + WB[j]).ravel()
        pr = (pr[:, None] * bg).ravel()
    a = sa >= ta - 1e-9
    b = sb >= tb - 1e-9
    return pr[a & b].sum(), pr[a].sum(), pr[b].sum()


def _rows(pwms, bg, p, cells):
    thr = [pvalue_to_score(w, bg, p, table=False).threshold for w in pwms]
    return prepare_rows(pwms, thr, bg, cells=cells), thr


@pytest.mark.parametrize("ma,mb,bg,p", [(6, 5, ATRICH, 1e-2), (5, 5, UNIFORM, 1e-2), (7, 4, ATRICH, 3e-3)])
@pytest.mark.parametrize("cells", [16, 64])
def test_joint_brackets_brute_force_all_shifts(ma, mb, bg, p, cells):
    rng = np.random.default_rng(ma * 10 + mb)
    A, B = _pwm(rng, ma, bg), _pwm(rng, mb, bg)
    pwms = [A, reverse_complement(A), B, reverse_complement(B)]
    rows, thr = _rows(pwms, bg, p, cells)
    for rb in (2, 3):
        for s in shifts(ma, mb):
            if max(ma, s + mb) - min(0, s) > 11:
                continue
            tp = joint_tp_cpu(rows, 0, rows, rb, s)
            t, pa, pb = brute_joint(pwms[0], thr[0], pwms[rb], thr[rb], s, bg)
            assert tp[0] <= t * (1 + 1e-9) + 1e-15 <= tp[2] * (1 + 1e-9) + 2e-15, (s, tp, t)
            assert tp[0] <= tp[1] <= tp[2]
            J = similarity(tp, rows.marg[0], rows.marg[rb])
            Jt = t / (pa + pb - t)
            assert J[0] - 1e-12 <= Jt <= J[2] + 1e-12, (J, Jt)
        # marginals bracket the exact p-values
        _, pa, pb = brute_joint(pwms[0], thr[0], pwms[rb], thr[rb], 0, bg)
        assert rows.marg[0, 0] <= pa * (1 + 1e-9) <= rows.marg[0, 2] * (1 + 1e-9) + 1e-15
        assert rows.marg[rb, 0] <= pb * (1 + 1e-9) <= rows.marg[rb, 2] * (1 + 1e-9) + 1e-15


def _words(L):
    """Every word of length ``L`` (4^L, L) int8, in lexicographic order."""
    return np.stack(np.meshgrid(*[np.arange(4, dtype=np.int8)] * L, indexing="ij"), axis=-1).reshape(-1, L)


def _short_matrices(rng):
    """12 short PWMs (3-5 columns) and their p-values: every third passes only its best word (p just above
    4^-m: the threshold equals the best word's score), some with two letters tied in a column or a uniform
    column (several words tie at the top)."""
    out = []
    for k in range(12):
        m = int(rng.integers(3, 6))
        w = np.log2((rng.dirichlet(np.full(4, 0.4), size=m) * 0.96 + 0.01) / UNIFORM)
        if k % 4 == 1:
            w[1] = w[1, [0, 0, 2, 3]]
        if k == 5:
            w[-1] = 0.0
        p = 4.0 ** -m * 1.5 if k % 3 == 0 else 4.0 ** -m * (3 + 10 * rng.uniform())
        out.append((w, p))
    return out


@pytest.mark.parametrize("seed", [17, 2])
def test_ties_at_the_threshold_by_enumeration(seed):
    """All 66 pairs of 12 short matrices against every word: marginals and certified brackets hold the exact
    values, a matrix whose threshold is its best word's score included (on main it had P = 0 and brackets of
    [0, 0]: the lattice cut dropped the word on the threshold; the pair's bracket was the reported shift's,
    which need not be the best one)."""
    from workers.distribution import pvalue_to_score

    rng = np.random.default_rng(seed)
    pwms, tabs = [], []
    for w, p in _short_matrices(rng):
        for x in (w, reverse_complement(w)):
            pwms.append(x)
            tabs.append(pvalue_to_score(x, UNIFORM, p, table=False))
    thr = [t.threshold for t in tabs]
    rows = prepare_rows(pwms, tabs, UNIFORM, cells=64)

    def passing(r, W):                          # every word of W that row r's matrix passes
        return sum(pwms[r][j, W[:, j]] for j in range(pwms[r].shape[0])) >= thr[r]

    only_best = 0
    for r, w in enumerate(pwms):
        exact = passing(r, _words(len(w))).mean()
        lo, est, hi = rows.marg[r]
        assert lo <= exact * (1 + 1e-12) and exact <= hi * (1 + 1e-12), (r, rows.marg[r], exact)
        if exact == 4.0 ** -len(w):             # only the best word passes: counted exactly
            only_best += 1
            assert est == pytest.approx(exact, rel=1e-12), (r, rows.marg[r], exact)
    assert only_best >= 4

    def exact_case(ra, rb, s):
        ma, mb = len(pwms[ra]), len(pwms[rb])
        start = min(0, s)
        W = _words(max(ma, s + mb) - start)
        A, B = passing(ra, W[:, -start:-start + ma]), passing(rb, W[:, s - start:s - start + mb])
        tp, pa, pb = (A & B).mean(), A.mean(), B.mean()
        return tp, (tp / (pa + pb - tp) if pa + pb > tp else 0.0), pa, pb

    pairs = np.array([(i, j) for i in range(12) for j in range(i + 1, 12)])
    res = compare_pairs(rows, rows, pairs)
    for k, (i, j) in enumerate(pairs):
        ma, mb = len(pwms[2 * i]), len(pwms[2 * j])
        best = max(exact_case(2 * i, 2 * j + st, s)[1] for st in (0, 1) for s in shifts(ma, mb))
        lo, est, hi = res.jaccard[k]
        assert lo - 1e-12 <= best <= hi + 1e-12 and lo <= est <= hi, (i, j, res.jaccard[k], best)
        tp, _, pa, pb = exact_case(2 * i, 2 * j + int(res.strand[k]), int(res.shift[k]))
        assert res.tp[k, 0] <= tp * (1 + 1e-12) + 1e-15 and tp <= res.tp[k, 2] * (1 + 1e-12) + 1e-15
        for p_est, r, exact in ((res.pa[k], 2 * i, pa), (res.pb[k], 2 * j + int(res.strand[k]), pb)):
            assert rows.marg[r, 0] <= exact * (1 + 1e-12) <= rows.marg[r, 2] * (1 + 1e-12) + 1e-15
            if exact == 4.0 ** -len(pwms[r]):
                assert p_est == pytest.approx(exact, rel=1e-12)


def test_estimate_converges_with_cells():
    rng = np.random.default_rng(11)
    A, B = _pwm(rng, 8, UNIFORM, sharp=2.0), _pwm(rng, 7, UNIFORM, sharp=2.0)
    pwms = [A, reverse_complement(A), B, reverse_complement(B)]
    errs = []
    for cells in (16, 110):
        rows, thr = _rows(pwms, UNIFORM, 1e-2, cells)
        worst = 0.0
        for s in shifts(8, 7, 4):
            tp = joint_tp_cpu(rows, 0, rows, 2, s)
            t, _, _ = brute_joint(pwms[0], thr[0], pwms[2], thr[2], s, UNIFORM)
            worst = max(worst, (tp[2] - tp[0]) / max(t, 1e-300))
        errs.append(worst)
    assert 0 < errs[1] < errs[0] / 3          # the certified bracket narrows with the grid


def test_self_and_reverse_complement():
    rng = np.random.default_rng(2)
    A = _pwm(rng, 12, UNIFORM, sharp=0.3)
    B = _pwm(rng, 9, UNIFORM, sharp=0.3)
    pwms = [A, reverse_complement(A), reverse_complement(A), A, B, reverse_complement(B)]
    rows, _ = _rows(pwms, UNIFORM, 1e-4, 64)
    res = compare_pairs(rows, rows, np.array([[0, 0], [0, 1], [0, 2]]))
    # A with itself: similarity 1 at shift 0 on the + strand; with its reverse complement: on the - strand
    assert res.jaccard[0, 1] == pytest.approx(1.0, abs=1e-9) and res.shift[0] == 0 and res.strand[0] == 0
    assert res.jaccard[1, 1] == pytest.approx(1.0, abs=1e-9) and res.shift[1] == 0 and res.strand[1] == 1
    assert res.overlap[0] == 12 and res.overlap[1] == 12
    assert res.jaccard[2, 1] < 0.2      # an unrelated matrix


def test_best_shift_of_a_sub_motif():
    rng = np.random.default_rng(4)
    A = _pwm(rng, 14, UNIFORM, sharp=0.2)
    B = A[3:12].copy()                  # columns 3..11 of A
    pwms = [A, reverse_complement(A), B, reverse_complement(B), reverse_complement(B), B]
    rows, _ = _rows(pwms, UNIFORM, 1e-3, 64)
    res = compare_pairs(rows, rows, np.array([[0, 1], [0, 2]]))
    assert res.shift[0] == 3 and res.strand[0] == 0 and res.overlap[0] == 9
    assert res.shift[1] == 3 and res.strand[1] == 1        # B given reverse-complemented
    assert res.jaccard[0, 1] > 0.05


def _write_jaspar(path, motifs):
    with open(path, "w") as f:
        for name, counts in motifs:
            f.write(f">{name} {name.lower()}\n")
            for x, b in enumerate("ACGT"):
                f.write(f"{b} [ " + " ".join(str(int(v)) for v in counts[:, x]) + " ]\n")


def _counts(rng, m, sharp=0.3):
    return np.round(rng.dirichlet(np.full(4, sharp), size=m) * 100)


def test_cli_compare_cluster_and_two_collections(tmp_path):
    from pipeline.cli.command import main
    from pipeline.compare.run import read_pairs
    from pipeline.io.schema import PAIRS_SCHEMA

    rng = np.random.default_rng(9)
    base = [_counts(rng, 10) for _ in range(3)]
    motifs = []
    for k, c in enumerate(base):
        motifs.append((f"M{k}.1", c))
        noisy = np.maximum(c + rng.integers(0, 3, size=c.shape), 0)
        motifs.append((f"M{k}.2", noisy))                       # a near copy
        motifs.append((f"M{k}.3", noisy[::-1, ::-1].copy()))     # its reverse complement
    motifs.append(("U.1", _counts(rng, 8)))
    a = tmp_path / "a.jaspar"
    _write_jaspar(a, motifs)
    out = tmp_path / "cmp"
    assert main(["compare", str(a), "--out", str(out), "--method", "occurrence", "--cluster", "0.5", "--pvalue",
                 "1e-4", "--pairs-per-task", "7"]) == 0
    t = read_pairs(str(out))
    assert t.schema.remove_metadata() == PAIRS_SCHEMA
    n = len(motifs)
    assert t.num_rows == n * (n - 1) // 2
    d = t.to_pandas().set_index(["motif_a", "motif_b"])
    for k in range(3):
        assert d.loc[(f"M{k}.1", f"M{k}.2"), "similarity"] > 0.5
        assert d.loc[(f"M{k}.1", f"M{k}.2"), "strand"] == "+"
        assert d.loc[(f"M{k}.2", f"M{k}.3"), "strand"] == "-"
        assert d.loc[(f"M{k}.2", f"M{k}.3"), "similarity"] == pytest.approx(1.0, abs=1e-9)
    assert (d["similarity_low"] <= d["similarity"] + 1e-12).all()
    assert (d["similarity"] <= d["similarity_high"] + 1e-12).all()
    cl = pq.read_table(out / "clusters.parquet").to_pandas().set_index("motif_id")
    assert list(cl.columns) == ["motif_name", "cluster", "cluster_size", "representative", "representative_name",
                                "similarity_to_representative"]
    assert (cl["motif_name"] == [i.lower() for i in cl.index]).all()
    assert (cl["representative_name"] == [i.lower() for i in cl["representative"]]).all()
    for k in range(3):
        assert cl.loc[f"M{k}.1", "cluster"] == cl.loc[f"M{k}.2", "cluster"] == cl.loc[f"M{k}.3", "cluster"]
    assert cl.loc["U.1", "cluster_size"] == 1
    # every member is at least the cut-off similar to its representative
    assert (cl["similarity_to_representative"] >= 0.5).all()
    summ = json.loads((out / "_summary.json").read_text())
    assert summ["pairs"] == n * (n - 1) // 2 and summ["clusters"] == cl["cluster"].nunique()
    # refuses a non-empty output; A × B mode
    assert main(["compare", str(a), "--out", str(out)]) == 2
    b = tmp_path / "b.jaspar"
    _write_jaspar(b, motifs[:2])
    out2 = tmp_path / "cmp2"
    assert main(["compare", str(a), str(b), "--out", str(out2), "--method", "occurrence"]) == 0
    t2 = read_pairs(str(out2)).to_pandas()
    assert len(t2) == n * 2
    same = t2[(t2.motif_a == "M0.1") & (t2.motif_b == "M0.1")]
    assert float(same.similarity.iloc[0]) == pytest.approx(1.0, abs=1e-9) and int(same["shift"].iloc[0]) == 0
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "c3"), "--cluster", "0.5"]) == 2


@pytest.mark.gpu
def test_gpu_matches_cpu():
    from workers.backend import gpu_available

    if not gpu_available():
        pytest.skip("no GPU")
    from pipeline.motifs import pwm_from_motif, read_motifs
    from tests.conftest import SHARED

    path = SHARED / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar"
    ms = read_motifs(path)[:40]
    pwms = []
    for m in ms:
        w = pwm_from_motif(m, UNIFORM)
        pwms += [w, reverse_complement(w)]
    rows, _ = _rows(pwms, UNIFORM, 1e-4, 64)
    pairs = np.array([(i, j) for i in range(40) for j in range(i, 40)])
    c = compare_pairs(rows, rows, pairs, device="cpu")
    g = compare_pairs(rows, rows, pairs, device="gpu")
    np.testing.assert_allclose(g.tp, c.tp, rtol=2e-4, atol=1e-12)
    np.testing.assert_allclose(g.jaccard, c.jaccard, rtol=2e-3, atol=1e-6)
    assert (g.shift == c.shift).mean() > 0.97


# ------------------------------------------------------------------------------------ compare --method tomtom
def _jaspar_counts(path, motifs):
    with open(path, "w") as f:
        for mid, name, counts in motifs:
            f.write(f">{mid} {name}\n")
            for x, b in enumerate("ACGT"):
                f.write(f"{b} [ " + " ".join(str(int(v)) for v in counts[:, x]) + " ]\n")


def test_cli_tomtom_best_matches(tmp_path, capsys):
    """`compare Q DB` (Tomtom, the default): best_matches.tsv/.parquet with the schema's columns, --top ranks per
    query, the values identify() gives in this process, each query's best match printed; cuts of database
    motifs (one reverse-complemented) find their source at the cut's offset and strand."""
    import pyarrow.compute as pc

    from pipeline.cli.command import main
    from pipeline.compare.identify import identify
    from pipeline.motifs import read_motifs
    from pipeline.io.schema import BEST_MATCHES_SCHEMA

    rng = np.random.default_rng(5)
    db = [(f"T{k}.1", f"tf{k}", _counts(rng, int(rng.integers(6, 14)), sharp=0.5)) for k in range(60)]
    src = db[7][2]
    queries = [("Q1", "cut7", src[1:6]), ("Q2", "cut7rc", src[1:6][::-1, ::-1]), ("Q3", "other", _counts(rng, 8))]
    _jaspar_counts(tmp_path / "db.jaspar", db)
    _jaspar_counts(tmp_path / "q.jaspar", queries)
    out = tmp_path / "tom"
    assert main(["compare", str(tmp_path / "q.jaspar"), str(tmp_path / "db.jaspar"), "--out", str(out),
                 "--top", "3", "--workers", "1"]) == 0
    printed = capsys.readouterr().out.splitlines()
    t = pq.read_table(out / "best_matches.parquet")
    assert t.schema.remove_metadata() == BEST_MATCHES_SCHEMA
    assert (out / "best_matches.tsv").read_text().splitlines()[0].split("\t") == BEST_MATCHES_SCHEMA.names
    assert t.num_rows == 9 and t["rank"].to_pylist() == [1, 2, 3] * 3 and t["query"].to_pylist()[::3] == ["Q1", "Q2", "Q3"]
    ref = identify(read_motifs(tmp_path / "q.jaspar"), read_motifs(tmp_path / "db.jaspar"), top=3)
    for col in ("target", "pvalue", "evalue", "qvalue", "similarity", "offset", "strand", "overlap"):
        assert t[col].to_pylist() == ref[col].to_pylist(), col
    best = t.filter(pc.equal(t["rank"], 1)).to_pylist()
    assert [(r["target"], r["target_name"], r["offset"], r["strand"]) for r in best[:2]] == [
        ("T7.1", "tf7", 1, "+"), ("T7.1", "tf7", len(src) - 6, "-")]
    assert best[0]["evalue"] == pytest.approx(60 * best[0]["pvalue"]) and best[0]["pvalue"] < 1e-4
    assert len(printed) == 3
    for line, r in zip(printed, best):
        assert line == (f"{r['query']} {r['query_name']}\t{r['target']} {r['target_name']}\tp={r['pvalue']:.3g}\t"
                        f"E={r['evalue']:.3g}\tq={r['qvalue']:.3g}\toffset={r['offset']}\tstrand={r['strand']}")
    run = json.loads((out / "_run.json").read_text())
    assert run["method"] == "tomtom" and run["top"] == 3 and run["distance"] == "ed" and "cells" not in run
    assert json.loads((out / "_summary.json").read_text())["pairs"] == 180


def test_cli_tomtom_within_one_collection(tmp_path, capsys):
    """`compare A` pairs the motifs of A with each other, never with themselves; --cluster writes clusters with ids
    and names; options of the other method are refused (one line, exit 2), as is a log-odds matrix."""
    from pipeline.cli.command import main
    from tests.conftest import DATA

    a = DATA / "jaspar2024_subset.jaspar"
    out = tmp_path / "self"
    from pipeline.compare.identify import FewTargetsWarning

    with pytest.warns(FewTargetsWarning, match="12 target motifs"):        # printed as one line by the CLI
        assert main(["compare", str(a), "--out", str(out), "--top", "2", "--cluster", "--workers", "1"]) == 0
    io = capsys.readouterr()
    t = pq.read_table(out / "best_matches.parquet").to_pylist()
    assert len(t) == 24 and all(r["query"] != r["target"] for r in t)
    assert len(io.out.splitlines()) == 12 and "8 clusters at E <= 1 →" in io.err
    cl = (out / "clusters.tsv").read_text().splitlines()
    assert cl[0].split("\t") == ["motif_id", "motif_name", "cluster", "cluster_size", "representative",
                                 "representative_name", "evalue_to_representative"]
    rows = [x.split("\t") for x in cl[1:]]
    ctcf = [r for r in rows if r[1] == "CTCF"]
    assert len(ctcf) == 2 and ctcf[0][2] == ctcf[1][2] and ctcf[0][5] == "CTCF"        # the two CTCF matrices
    assert json.loads((out / "_summary.json").read_text())["pairs"] == 132
    for argv, msg in ((["--cells", "30"], "--cells is a setting of --method occurrence"),
                      (["--method", "occurrence", "--top", "2"], "--top is a setting of --method tomtom"),
                      (["--method", "occurrence", "--distance", "pearson"], "--distance is a setting of --method tomtom")):
        assert main(["compare", str(a), "--out", str(tmp_path / "x"), *argv]) == 2
        assert capsys.readouterr().err == f"motifgrid compare: error: {msg}\n"
    lo = DATA / "motifs" / "formats" / "logodds_only.meme"
    assert main(["compare", str(lo), str(a), "--out", str(tmp_path / "lo")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("motifgrid compare: error: ") and "logodds_only.meme" in err and "log-odds" in err
    assert err.count("\n") == 1 and not (tmp_path / "x").exists() and not (tmp_path / "lo").exists()


@pytest.mark.parametrize("method", ["tomtom", "occurrence"])
def test_shared_query_ids_are_named_in_one_warning(tmp_path, method):
    """Two query matrices under one id (HOMER files name motifs by their consensus) are both compared, and the
    command says in one warning that its rows cannot tell them apart (it kept quiet); the targets' file is checked
    too, a file without shared ids says nothing."""
    from pipeline.cli.command import main
    from pipeline.motifs import SharedIdWarning

    rng = np.random.default_rng(9)
    _jaspar_counts(tmp_path / "q.jaspar", [("Q1", "a", _counts(rng, 7)), ("Q1", "b", _counts(rng, 9)),
                                           ("Q2", "c", _counts(rng, 8))])
    _jaspar_counts(tmp_path / "db.jaspar", [(f"T{k}", f"t{k}", _counts(rng, 8)) for k in range(4)] +
                   [("T1", "again", _counts(rng, 6))])
    with pytest.warns(SharedIdWarning) as seen:
        assert main(["compare", str(tmp_path / "q.jaspar"), str(tmp_path / "db.jaspar"), "--out", str(tmp_path / "o"),
                     "--method", method, "--workers", "1"]) == 0
    keyed = "compare's tables name motifs by id, so the rows of matrices sharing one cannot be told apart"
    assert [str(w.message) for w in seen if w.category is SharedIdWarning] == [
        f"{tmp_path / 'q.jaspar'}: 1 motif id(s) name more than one matrix (Q1 ×2); {keyed}; give them distinct ids "
        "to tell them apart",
        f"{tmp_path / 'db.jaspar'}: 1 motif id(s) name more than one matrix (T1 ×2); {keyed}; give them distinct ids "
        "to tell them apart"]
    import warnings

    _jaspar_counts(tmp_path / "clean.jaspar", [(f"C{k}", f"c{k}", _counts(rng, 8)) for k in range(4)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", SharedIdWarning)
        assert main(["compare", str(tmp_path / "clean.jaspar"), "--out", str(tmp_path / "p"), "--method", method,
                     "--workers", "1"]) == 0


def test_a_pfm_query_is_named_once(tmp_path, capsys):
    """A 4-column PFM's motif is named by its id: compare's line names it once (it printed "MA0004.1 MA0004.1")."""
    from pipeline.cli.command import main
    from tests.conftest import DATA

    pfm = DATA / "motifs" / "formats" / "MA0004.1.pfm"
    assert main(["compare", str(pfm), str(DATA / "jaspar2024_subset.jaspar"), "--out", str(tmp_path / "c")]) == 0
    line = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("MA0004.1"))
    assert line.startswith("MA0004.1\tMA0004.1 Arnt\tp="), line
