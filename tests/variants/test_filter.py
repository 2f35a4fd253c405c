"""The variants filter on the CPU (``workers.variants.reaching``: listed rows, scanned rows, q-gram blocks) on real
human chrX contexts: it marks every (allele, motif row) pair where a covering window of either allele reaches the
row's threshold (the exact float64 scores of ``best_of``), with SNVs, MNVs, short and long insertions and deletions,
N beside and inside the windows, edits at a record's ends; JASPAR rows and rows shorter than, as long as and longer
than the q-gram block (up to 40 columns), a letter that never matches, a row every window reaches and one none can;
at several p-values and with every long row listed, or scanned.  Its false positives are only pairs whose SNV bound
(the better base at the SNV, the one pass both filters make) comes within the margin of the threshold: no more than
the former lookahead filter kept."""
from __future__ import annotations

import numpy as np
import pytest

from tests.conftest import DATA

BG = np.full(4, 0.25)
CODE = np.full(256, 4, np.uint8)
CODE[list(b"ACGT")] = range(4)


def _synthetic_rows(rng) -> list:
    """Log-odds rows of many lengths (around the block's 7 and far past it), one with a letter that never matches."""
    rows = []
    for m in (1, 2, 3, 4, 6, 7, 8, 13, 14, 15, 22, 40):
        probs = rng.dirichlet(np.full(4, 0.35), size=m)
        rows.append(np.log2(np.maximum(probs, 1e-3) / BG))
    never = np.log2(rng.dirichlet(np.full(4, 0.5), size=9) / BG)
    never[4, 2] = -np.inf
    rows.append(never)
    return rows


@pytest.fixture(scope="module")
def pwms():
    from pipeline.scan.motif_set import MotifSet

    jaspar, _, _ = MotifSet.load(str(DATA / "jaspar2024_subset.jaspar"), BG, 0.1).rows()
    return jaspar + _synthetic_rows(np.random.default_rng(5)) + [np.zeros((10, 4)), np.ones((11, 4))]


@pytest.fixture(scope="module")
def record(chrx_2mb) -> str:
    """6 kb of real chrX with Ns planted: single ones and a run of 12."""
    g = list(chrx_2mb[300_000:306_000])
    for p in (700, 1500, 1503, 2400, 3300):
        g[p] = "N"
    g[4200:4212] = "N" * 12
    return "".join(g)


def _alleles(g: str, seed: int) -> tuple[list, list, list]:
    """(pos, ref, alt), 1-based, REF from the record: SNVs (most), MNVs, insertions and deletions of 1-5 bases and
    long ones, at the record's ends and beside the planted Ns."""
    rng = np.random.default_rng(seed)
    n = len(g)
    beside_n = [p + d for p in (700, 1500, 2400, 3300, 4200, 4211) for d in (-9, -3, -1, 2, 5)]
    picks = [1, 2, 3, n - 2, n - 1, n] + beside_n
    picks += rng.choice(np.arange(1, n + 1), 420, replace=False).tolist()
    pos, ref, alt = [], [], []
    for k, p in enumerate(sorted(set(picks))):
        kind = k % 10
        base = g[p - 1]
        if base == "N":
            continue
        if kind < 6 or p > n - 40:
            r, a = base, "ACGT"[("ACGT".index(base) + 1 + k % 3) % 4]
        elif kind == 6:
            r = g[p - 1:p + 1]
            a = "".join(rng.choice(list("ACGT"), 2))
        elif kind == 7:
            r, a = base, base + "".join(rng.choice(list("ACGT"), 24 if k % 40 == 7 else 1 + k % 5))
        else:
            r, a = g[p - 1:p + (30 if k % 40 == 8 else 1 + k % 5)], base
        if "N" in r or r == a:
            continue
        pos.append(p)
        ref.append(r)
        alt.append(a)
    return pos, ref, alt


@pytest.fixture(scope="module")
def contexts_(record, pwms):
    from pipeline.variants.alleles import contexts

    pos, ref, alt = _alleles(record, 11)
    g = CODE[np.frombuffer(record.encode(), np.uint8)]
    flank = max(w.shape[0] for w in pwms) - 1
    cx = contexts(g, 0, len(g), pos, ref, alt, flank)
    return cx.codes, cx.starts, cx.e0, cx.e1


_THRESHOLDS: dict = {}


def _thresholds(pwms, pvalue: float) -> np.ndarray:
    from workers.distribution import pvalue_to_score

    if pvalue in _THRESHOLDS:
        return _THRESHOLDS[pvalue]
    alpha = []
    for w in pwms:
        if not np.ptp(w[np.isfinite(w)]):
            alpha.append(float(w.sum()) if w[0, 0] == 0 else np.inf)    # every window reaches / none may
            continue
        t = pvalue_to_score(w, BG, pvalue)
        alpha.append(t.threshold if t.reachable else np.inf)
    return _THRESHOLDS.setdefault(pvalue, np.array(alpha))


def _truth(cx, rows) -> np.ndarray:
    """(n, R): a covering window of the ref or the alt context reaches (exact float64 scores)."""
    from workers.variants import best_of

    n, R = (cx[1].size - 1) // 2, rows.lengths.size
    ctx, row = np.repeat(np.arange(2 * n), R), np.tile(np.arange(R), 2 * n)
    best, _ = best_of(*cx, rows, ctx, row)
    reach = best.reshape(2 * n, R) >= rows.alpha
    return reach[:n] | reach[n:]


def _snv_bound(cx, rows, i: int, r: int) -> float:
    """The best covering window of allele ``i`` for row ``r``, an SNV's column counting the better of its two bases
    (the bound both the filter and its lookahead predecessor test for an SNV, in one pass over its ref context); the
    better allele's exact best for any other allele.  Float64; N never matches."""
    from workers.variants.score import PAIR_CODE, PAIRS

    codes, starts, e0, e1 = cx
    n = (starts.size - 1) // 2
    m = int(rows.lengths[r])
    w = rows.stack[r, :m]
    table = np.concatenate([w, np.full((m, 1), -np.inf)] + [np.maximum(w[:, [x]], w[:, [y]]) for x, y in PAIRS], 1)
    ref = codes[starts[i]:starts[i + 1]].astype(np.int64)
    alt = codes[starts[n + i]:starts[n + i + 1]].astype(np.int64)
    sides = [(ref, e0[i], e1[i]), (alt, e0[n + i], e1[n + i])]
    if e1[i] - e0[i] == 1 and e1[n + i] - e0[n + i] == 1 and max(ref[e0[i]], alt[e0[n + i]]) < 4:
        ref[e0[i]] = PAIR_CODE[ref[e0[i]], alt[e0[n + i]]]
        sides = sides[:1]
    best = -np.inf
    for seq, lo, hi in sides:
        for s in range(max(lo - m + 1, 0), min(hi - 1, seq.size - m) + 1):
            best = max(best, float(table[np.arange(m), seq[s:s + m]].sum()))
    return best


@pytest.mark.parametrize("pvalue", [1e-4, 1e-3, 1e-2])
@pytest.mark.parametrize("dense", [None, 0.0, 2.0], ids=["tuned", "all-scanned", "all-listed"])
def test_the_filter_marks_every_reaching_pair_and_little_else(pwms, contexts_, monkeypatch, pvalue, dense):
    import workers.variants.score as score
    from workers.variants import Rows, reaching

    if dense is not None:
        monkeypatch.setattr(score, "DENSE", dense)
    rows = Rows(pwms, _thresholds(pwms, pvalue))
    f = rows.qgrams
    long_rows = np.flatnonzero(rows.lengths > score.Q)
    if dense == 0.0:
        assert set(f["scan"]) == set(long_rows)
    elif dense == 2.0:
        assert f["scan"].size == 0
    elif pvalue == 1e-2:
        assert 0 < f["scan"].size < long_rows.size              # both kinds of long rows
    marks = reaching(*contexts_, rows)
    truth = _truth(contexts_, rows)
    assert truth.sum() > 50 and truth[:, -2].mean() > 0.9 and not marks[:, -1].any()
    missed = np.argwhere(truth & ~marks)
    assert missed.size == 0, f"pairs reaching their threshold not marked: {missed[:10].tolist()}"
    extra = np.argwhere(marks & ~truth)
    for i, r in extra:
        assert _snv_bound(contexts_, rows, i, r) >= rows.alpha[r] - 2 * score.MARGIN, (i, r)
    assert len(extra) <= max(5, 0.01 * truth.sum())
    print(f"p={pvalue} {dense}: {truth.sum()} pairs reach, {marks.sum()} marked ({len(extra)} false positives)")


def test_q_gram_codes_and_the_empty_cases(pwms):
    from workers.variants import Rows, reaching
    from workers.variants.score import Q, _qgrams

    codes = np.random.default_rng(3).integers(0, 5, 500).astype(np.uint8)
    gram, run = np.empty(codes.size, np.uint16), np.empty(codes.size, np.uint8)
    _qgrams(codes, gram, run)
    for p in range(codes.size):
        bases = [int(c) if c < 4 else 0 for c in codes[p:p + Q]] + [0] * max(0, p + Q - codes.size)
        assert gram[p] == sum(b << (2 * (Q - 1 - k)) for k, b in enumerate(bases))
        ok = 0
        while ok < Q and p + ok < codes.size and codes[p + ok] < 4:
            ok += 1
        assert run[p] == ok
    rows = Rows(pwms, _thresholds(pwms, 1e-3))
    assert reaching(np.zeros(0, np.uint8), np.zeros(1, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64),
                    rows).shape == (0, len(pwms))
    none = Rows([], np.zeros(0))
    cx = (CODE[np.frombuffer(b"ACGTACGTAC" * 2, np.uint8)], np.array([0, 10, 20]), np.array([5, 5]), np.array([6, 6]))
    assert reaching(*cx, none).shape == (1, 0)
