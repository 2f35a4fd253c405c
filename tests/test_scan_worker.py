"""The block scanner against a plain float64 loop (tests/reference.py) on real human sequence."""
from __future__ import annotations

import numpy as np

from pipeline.genome import encode
from tests.reference import naive_scan
from workers.scan import make_plan, plan_tiles, scan_block

# Two real JASPAR 2024 count matrices (MA0139.2 CTCF, 15 columns; MA0079.5 SP1, 11 columns), rows A C G T
CTCF = np.array([
    [281, 56, 8, 744, 40, 107, 1, 0, 4, 0, 0, 108, 0, 20, 19],
    [49, 629, 895, 0, 838, 55, 973, 1000, 0, 997, 1, 55, 960, 5, 75],
    [557, 109, 39, 223, 1, 839, 1, 0, 994, 1, 997, 835, 38, 954, 843],
    [113, 206, 58, 33, 121, 0, 25, 0, 2, 2, 2, 2, 2, 21, 63]], float).T
SP1 = np.array([
    [11, 0, 1, 0, 0, 0, 0, 8, 4, 2, 12],
    [49, 1, 0, 0, 100, 0, 12, 86, 6, 60, 36],
    [25, 99, 99, 100, 0, 100, 85, 4, 89, 15, 32],
    [15, 0, 0, 0, 0, 0, 3, 2, 1, 23, 20]], float).T


def pwm(counts, bg=0.25, ps=0.1):
    ppm = (counts + ps * bg) / (counts.sum(1, keepdims=True) + ps)
    return np.log2(ppm / bg)


def motif_panel():
    """Real matrices cut and joined to lengths 4..35 (plus one random), forward and reverse-complement rows."""
    c, s = pwm(CTCF), pwm(SP1)
    mats = [c[:4], s[3:8], s, c, np.vstack([c, s]), np.vstack([c, s, c[:9]]),
            np.random.default_rng(7).normal(0, 1.5, (19, 4))]
    assert sorted(m.shape[0] for m in mats) == [4, 5, 11, 15, 19, 26, 35]
    rows, thr, mi, st = [], [], [], []
    for i, w in enumerate(mats):
        for strand, ww in ((0, w), (1, w[::-1, ::-1].copy())):
            rows.append(ww)
            hi, lo = ww.max(1).sum(), ww.min(1).sum()
            thr.append(hi - 0.3 * (hi - lo) if w.shape[0] > 6 else hi - 0.2 * (hi - lo))
            mi.append(i)
            st.append(strand)
    return rows, np.array(thr), np.array(mi), np.array(st)


def with_ambiguity(seq: str, rng) -> str:
    """Real sequence with N runs, IUPAC letters and soft-masked (lower-case) stretches."""
    s = list(seq)
    for _ in range(12):
        a, k = int(rng.integers(0, len(s) - 60)), int(rng.integers(1, 50))
        s[a:a + k] = "N" * k
    for a in rng.integers(0, len(s), 40):
        s[a] = "RYKMSWBDHV"[a % 10]
    a = int(rng.integers(0, len(s) - 500))
    s[a:a + 400] = [x.lower() for x in s[a:a + 400]]
    return "".join(s)


def run_block(seq: str, rows, thr, mi, st, backend):
    plan = make_plan(rows, thr, mi, st)
    codes = encode(seq)
    halo = plan.max_length - 1
    buf = np.full(len(seq) + halo, 4, np.uint8)
    buf[:len(seq)] = codes
    h = scan_block(buf, len(seq), plan, device=backend[0], method=backend[1])
    return sorted(zip(h.pos.tolist(), h.row.tolist(), h.score.tolist())), plan


def test_matches_naive_on_real_sequence(chrx_slice, backend):
    rng = np.random.default_rng(1)
    seq = with_ambiguity(chrx_slice[50_000:62_000], rng)
    rows, thr, mi, st = motif_panel()
    # make one threshold an attained score exactly, so ">=" at a tie is exercised
    ref0 = naive_scan(seq[:3000], rows[6:7], [-1e9])
    thr[6] = sorted(x[2] for x in ref0)[-5]
    got, plan = run_block(seq, rows, thr, mi, st, backend)
    ref = naive_scan(seq, rows, thr)
    assert len(ref) > 200, "the panel should give a few hundred hits"
    assert {r for _, r, _ in ref} == set(range(len(rows)))
    assert got == ref          # same windows, same rows, bit-identical float64 scores


def test_n_windows_never_reported(backend):
    rows, thr, mi, st = motif_panel()
    seq = "ACGT" * 10 + "N" + "CCGCGCCCCCTGGTGGCCAGCCACTAGGTGGCGCTG" * 3
    got, _ = run_block(seq, rows, thr - 100, mi, st, backend)   # threshold low: every valid window is a hit
    ref = naive_scan(seq, rows, thr - 100)
    assert got == ref
    for pos, r, _ in got:
        assert "N" not in seq[pos:pos + rows[r].shape[0]]


def test_window_touching_contig_end(backend):
    rows, thr, mi, st = motif_panel()
    seq = "GGCCAGCAGGGGGCGCT"   # CTCF-like core ends exactly at the sequence end
    got, _ = run_block(seq, rows[6:8], thr[6:8] - 100, mi[6:8], st[6:8], backend)
    assert got == naive_scan(seq, rows[6:8], thr[6:8] - 100)
    assert max(p for p, _, _ in got) == len(seq) - 15


def test_many_tiles_and_unreachable_rows(chrx_slice, backend):
    rng = np.random.default_rng(3)
    rows = [rng.normal(0, 1, (int(m), 4)) for m in rng.integers(4, 36, 300)]
    thr = np.array([w.max(1).sum() - 0.25 * (w.max(1).sum() - w.min(1).sum()) for w in rows])
    thr[::7] = np.inf                         # unreachable rows are dropped, the rest keep their indices
    plan = make_plan(rows, thr, np.arange(300), np.zeros(300))
    assert len(plan.tiles) > 3 and plan.n_rows == int(np.isfinite(thr).sum())
    seq = chrx_slice[:4000]
    codes = np.full(4000 + 40, 4, np.uint8)
    codes[:4000] = encode(seq)
    h = scan_block(codes, 4000, plan, device=backend[0], method=backend[1])
    kept = np.flatnonzero(np.isfinite(thr))
    ref = naive_scan(seq, [rows[i] for i in kept], thr[kept])
    assert sorted(zip(h.pos.tolist(), h.row.tolist(), h.score.tolist())) == ref


def test_plan_tiles_cover_every_row_once():
    lengths = np.array([5, 30, 12, 12, 13, 29, 6, 21, 8, 8, 35])
    tiles = plan_tiles(lengths)
    allr = np.sort(np.concatenate(tiles))
    assert (allr == np.arange(len(lengths))).all()
    for t in tiles:
        assert lengths[t].min() >= 0.85 * lengths[t].max() - 1e-9 or len(t) == 1


def test_n_right_after_a_site_does_not_hide_it(backend):
    """Slices pad the last slice past the motif end: an N there must not reject the window."""
    rows, thr, mi, st = motif_panel()
    for r in (0, 2, 4):                                   # lengths 4, 5, 15 (forward rows)
        w = rows[r]
        best = "".join("ACGT"[i] for i in w.argmax(1))
        seq = "CCCC" + best + "N" + "GGGG" + best + "NNNNNNNN"
        got, _ = run_block(seq, [w], np.array([w.max(1).sum() - 1e-9]), [0], [0], backend)
        assert [p for p, _, _ in got] == [4, 4 + len(best) + 5]
