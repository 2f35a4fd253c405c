"""The block scanner against a plain float64 loop (tests/reference.py) on real human sequence."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.io.genome import encode
from tests.conftest import DATA
from tests.reference import naive_scan
from workers.scan import make_plan, plan_tiles, scan_block, slice_tiles

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


def extreme_panel():
    """Matrices whose int16 slice tables need clamping, or whose ranges are too wide for int16 (float32)."""
    c, s = pwm(CTCF), pwm(SP1)
    rng = np.random.default_rng(11)
    impossible = c.copy()
    impossible[impossible < -3] = -200.0                 # "never this base": entries far below the floor
    lows = np.vstack([c, s, c[:9]])
    lows[::3, 0] = -500.0                                # 35 columns, ordinary maxima, extreme minima
    tiny = np.array([[20, -1e3, -1e3, -1e3], [-1e3, 20, -1e3, -1e3], [5, 5, -1e3, 5], [-1e3, -1e3, -1e3, 20.]])
    mats = [impossible, lows, tiny, rng.normal(0, 3, (33, 4)),
            np.vstack([c, s, c[:9]]) * 8,                # 35 columns, about 100 bits per column
            rng.normal(0, 40, (35, 4))]                  # so wide that an int16 scale is under MIN_SCALE
    rows, mi, st = [], [], []
    for i, w in enumerate(mats):
        for strand, ww in ((0, w), (1, w[::-1, ::-1].copy())):
            rows.append(ww)
            mi.append(i)
            st.append(strand)
    return rows, np.array(mi), np.array(st)


def plant(seq: str, mats: list, rng, copies: int = 8) -> str:
    """``seq`` with best words of each matrix written in, 0-2 random substitutions each, both strands."""
    s = list(seq)
    for w in mats:
        for j in range(copies):
            word = w.argmax(1)
            word[rng.integers(0, len(word), j % 3)] = rng.integers(0, 4, j % 3)
            text = "".join("ACGT"[x] for x in (word if j % 2 else 3 - word[::-1]))
            a = int(rng.integers(0, len(s) - len(text)))
            s[a:a + len(text)] = text
    return "".join(s)


def window_scores(seq: str, w: np.ndarray) -> np.ndarray:
    """Scores of the N-free windows (any summation order: only used to pick thresholds)."""
    codes = encode(seq)
    m = w.shape[0]
    win = np.lib.stride_tricks.sliding_window_view(codes, m)
    ok = (win < 4).all(axis=1)
    return w[np.arange(m), np.minimum(win[ok], 3)].sum(axis=1)


def test_extreme_weights_match_naive(chrx_slice, backend):
    """Very negative entries (clamped to the row floor), 35-column rows with wide ranges (coarse int16
    scale) and rows too wide for int16 (float32 tables), next to N runs: same hits as the naive loop."""
    rng = np.random.default_rng(5)
    rows, mi, st = extreme_panel()
    seq = with_ambiguity(plant(chrx_slice[100_000:104_000], rows[::2], rng), rng)
    thr = np.array([np.sort(window_scores(seq, w))[-4] for w in rows])   # attained: ties at ">=" too
    got, plan = run_block(seq, rows, thr, mi, st, backend)
    ref = naive_scan(seq, rows, thr)
    assert {r for _, r, _ in ref} == set(range(len(rows)))
    assert got == ref
    if backend[1] == "slices":
        kinds = {t.T.dtype for t in slice_tiles(plan)}
        assert kinds == {np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.float32)}, \
            "every table type should be exercised"


def test_row_columns_equal_numpy_gathers():
    """The hits table's per-row columns in one compiled pass = NumPy's gathers (int32 and int64 rows)."""
    from workers.scan.table_numba import row_columns

    rng = np.random.default_rng(4)
    R, n = 37, 5000
    lengths = rng.integers(5, 30, R).astype(np.int64)
    strand, motif, name = (rng.integers(0, k, R).astype(np.int32) for k in (2, 19, 11))
    start = np.sort(rng.integers(0, 10**9, n))
    for rows in (rng.integers(0, R, n).astype(np.int32), rng.integers(0, R, n)):
        end, s, m, nm = row_columns(rows, start, lengths, strand, motif, name)
        np.testing.assert_array_equal(end, start + lengths[rows])
        for got, table in ((s, strand), (m, motif), (nm, name)):
            assert got.dtype == np.int32 and np.array_equal(got, table[rows])
    assert all(a.size == 0 for a in row_columns(np.zeros(0, np.int32), np.zeros(0, np.int64), lengths, strand,
                                                motif, name))


def test_hits_by_row_equals_argsort():
    """The slices path's counting sort by row = the hits, ordered by NumPy's argsort of (row, position), for
    candidates whose positions ascend within each row (as each tile emits them), any interleaving of rows."""
    from workers.scan.cpu_numba import hits_by_row

    rng = np.random.default_rng(8)
    R, n = 50, 20_000
    rows = rng.integers(0, R, n).astype(np.int32)
    pos = np.sort(rng.integers(0, 10**6, n))               # ascending overall, hence within each row
    score, hit = rng.normal(size=n), rng.random(n) < 0.7
    o = np.argsort((rows[hit].astype(np.int64) << 32) | pos[hit], kind="stable")
    got = hits_by_row(pos, rows, score, hit, R + 3)
    for a, b in zip(got, (pos[hit][o], rows[hit][o], score[hit][o])):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert all(a.size == 0 for a in hits_by_row(pos, rows, score, np.zeros(n, bool), R))


def test_slice_tables_built_together_equal_row_by_row():
    """The rows' slice tables, built a slice count at a time, are bit for bit the per-row construction
    (tests/reference.py; int16 where int8 is too coarse, float32 where int16 is): real JASPAR rows and the extreme
    panel."""
    from pipeline.motifs import pwm_from_motif, read_motifs
    from tests.reference import quantise_row, slice_table_row
    from workers.scan.cpu import MIN_SCALE, SLICE_SLACK, _row_tables

    rows, mi, st = extreme_panel()
    jaspar = [pwm_from_motif(m, np.full(4, 0.25), 0.1) for m in
              read_motifs(DATA / "jaspar2024_subset.jaspar")]
    for w in jaspar:
        rows += [w, w[::-1, ::-1].copy()]
    rng = np.random.default_rng(2)
    thr = np.array([w.max(1).sum() - rng.uniform(0, 6) for w in rows])
    plan = make_plan(rows, thr, np.arange(len(rows)) // 2, np.arange(len(rows)) % 2)
    ell = 4
    K = 1 << (2 * ell)
    digits = np.array([[(u >> (2 * (ell - 1 - i))) & 3 for i in range(ell)] for u in range(K)], dtype=np.intp)
    got = _row_tables(plan, ell)
    kinds = set()
    for r, (S, table, bound) in enumerate(got):
        assert S == -(-plan.lengths[r] // ell)
        T = slice_table_row(plan.pwms[r], float(plan.thresholds[r]), S, ell, digits)
        q = quantise_row(T, SLICE_SLACK, MIN_SCALE[np.dtype(np.int8)], np.int8) or \
            quantise_row(T, SLICE_SLACK, MIN_SCALE[np.dtype(np.int16)], np.int16)
        if q is None:
            T32 = np.maximum(T, -1e30).astype(np.float32)
            q = T32, np.float32(-(np.abs(T32[:, :K].astype(np.float64) - T[:, :K]).max(axis=1).sum() + SLICE_SLACK))
        assert table.dtype == q[0].dtype and np.array_equal(table, q[0]) and bound == q[1] and \
            type(bound) is type(q[1]), r
        kinds.add(table.dtype)
    assert kinds == {np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.float32)}


def test_scores_at_and_near_the_threshold(chrx_slice, backend):
    """Thresholds at an attained score and up to 1e-3 bits either side: the site is a hit exactly when
    its float64 score reaches the threshold, whatever the int16 rounding of the tables."""
    seq = chrx_slice[200_000:202_000]
    c, s = pwm(CTCF), pwm(SP1)
    base = [c, s, np.vstack([c, s, c[:9]]), c[:4], np.random.default_rng(2).normal(0, 1.5, (19, 4))]
    base += [w[::-1, ::-1].copy() for w in base]
    scored = naive_scan(seq, base, [-1e9] * len(base))
    deltas = (-1e-3, -2e-4, -1e-12, 0.0, 1e-12, 2e-4, 1e-3)
    rows, thr, ref, sites = [], [], [], []
    for b, w in enumerate(base):
        pos, site = sorted(((x[2], x[0]) for x in scored if x[1] == b), reverse=True)[9][::-1]
        for d in deltas:
            r = len(rows)
            rows.append(w)
            thr.append(site + d)
            sites.append((pos, r, site, d <= 0))
            ref += [(p, r, sc) for p, rb, sc in scored if rb == b and sc >= site + d]
    got, _ = run_block(seq, rows, np.array(thr), np.arange(len(rows)), np.zeros(len(rows)), backend)
    assert got == sorted(ref)
    hits = set(got)
    assert all(((p, r, sc) in hits) == hit for p, r, sc, hit in sites)


def test_integer_candidates_are_near_the_threshold(chrx_slice):
    """The clamp and per-row scale of the int8 and int16 tables: sums cannot wrap, and a candidate of the
    kernel is an N-free window within its row's rounding margin of alpha (the bound's units over the row's scale:
    under 0.1 bit for int16, a few bits at most for int8), or a window with an N in its last, partly padded, slice
    (rescored), never a window further below alpha."""
    pytest.importorskip("numba")
    from tests.reference import quantise_row, slice_table_row
    from workers.scan.cpu import MIN_SCALE, SLICE_SLACK
    from workers.scan.cpu_numba import kmer_codes, scan_tile

    rng = np.random.default_rng(9)
    rows, mi, st = extreme_panel()
    rows += [pwm(CTCF), pwm(SP1), pwm(CTCF)[:9]]
    mi, st = np.append(mi, [6, 7, 8]), np.append(st, [0, 0, 0])
    seq = with_ambiguity(plant(chrx_slice[120_000:130_000], rows[::2], rng), rng)
    thr = np.array([np.sort(window_scores(seq, w))[-4] for w in rows])
    plan = make_plan(rows, thr, mi, st)
    codes = np.full(len(seq) + 64, 4, np.uint8)
    codes[:len(seq)] = encode(seq)
    kmer = kmer_codes(codes, len(seq) + 40, 4)
    digits = np.array([[(u >> (2 * (3 - i))) & 3 for i in range(4)] for u in range(256)], dtype=np.intp)
    seen = {}
    for t in slice_tiles(plan):
        if t.T.dtype.kind != "i":
            continue
        lim = -int(np.iinfo(t.T.dtype).min)
        seen[t.T.dtype.name] = seen.get(t.T.dtype.name, 0) + len(t.rows)
        T = t.T.astype(np.int64)
        assert (T.min(axis=1).sum(axis=0) >= -lim).all() and (T.max(axis=1).sum(axis=0) <= lim - 1).all()
        pos, col = np.empty(1 << 16, np.int64), np.empty(1 << 16, np.int32)
        cnt = scan_tile(kmer, len(seq), t.flat, 4, t.cand_thr, pos, col)
        assert cnt <= pos.size
        for p, k in zip(pos[:cnt], col[:cnt]):
            r = t.rows[k]
            w, m = plan.pwms[r], plan.lengths[r]
            span = codes[p:p + -(-m // 4) * 4]            # the ℓ-mers the tables read
            if (span > 3).any():
                assert (span[:m // 4 * 4] <= 3).all(), "an N in a slice inside the motif is impossible"
                continue
            Tr = slice_table_row(w, float(plan.thresholds[r]), -(-m // 4), 4, digits)
            _, bound, scale = quantise_row(Tr, SLICE_SLACK, MIN_SCALE[t.T.dtype], t.T.dtype.type)
            margin = (1 - int(bound)) / scale
            assert margin < (0.1 if t.T.dtype == np.int16 else 4.0)
            assert w[np.arange(m), span[:m]].sum() >= plan.thresholds[r] - margin
    assert seen.get("int8", 0) >= 4 and seen.get("int16", 0) >= 2, seen


def test_scan_blocks_equals_one_scan_per_block(chrx_slice):
    """scan_blocks (short blocks laid end to end, one scan) gives each block exactly its own scan_block hits, in
    (row, position) order: blocks at contig ends (padding), full blocks whose halo is real sequence (windows
    starting there belong to the next block and must not appear), N runs and IUPAC codes at the cuts, one-window
    blocks, motif lengths 4-35; and against the float64 naive scorer."""
    from workers.scan import scan_blocks

    rng = np.random.default_rng(5)
    rows, thr, mi, st = motif_panel()
    plan = make_plan(rows, thr, mi, st)
    halo = plan.max_length - 1 + 3                      # the store's halo may exceed what the motifs need
    seq = with_ambiguity(chrx_slice[100_000:160_000], rng)
    blocks, ns = [], []
    lo = 0
    for k, n in enumerate([2000, 1, 777, 4096, 35, 3000, 2500, 60, 1500, 5000]):
        block_seq = seq[lo:lo + n + halo]
        if k % 3 == 0:                                  # a contig end: the row padded with 4 past it
            block_seq = block_seq[:n]
        if k == 4:
            block_seq = "N" * n                         # a block of N only (its halo real sequence)
            block_seq += seq[lo + n:lo + n + halo]
        row = np.full(n + halo, 4, np.uint8)
        row[:len(block_seq)] = encode(block_seq)
        blocks.append(row)
        ns.append(n)
        lo += n + 17
    got = scan_blocks(blocks, ns, plan, device="cpu")
    assert len(got) == len(blocks)
    total = 0
    for row, n, h in zip(blocks, ns, got):
        one = scan_block(row, n, plan, device="cpu")
        assert np.array_equal(h.pos, one.pos) and np.array_equal(h.row, one.row) and np.array_equal(h.score, one.score)
        assert h.pos.dtype == one.pos.dtype and h.row.dtype == one.row.dtype
        assert h.pos.size == 0 or h.pos.max() < n
        ref = naive_scan(decode_row(row, n, plan.max_length), rows, thr)
        assert sorted(zip(h.pos.tolist(), h.row.tolist(), h.score.tolist())) == [x for x in ref if x[0] < n]
        total += len(h)
    assert total > 100
    assert scan_blocks(blocks[:1], ns[:1], plan, device="cpu")[0].pos.tolist() == \
        scan_block(blocks[0], ns[0], plan, device="cpu").pos.tolist()
    with pytest.raises(ValueError, match="too short"):
        scan_blocks([blocks[0][:ns[0]], blocks[1]], ns[:2], plan, device="cpu")


def decode_row(row: np.ndarray, n: int, max_length: int) -> str:
    """The text a block row's first n windows read (code 4 as N)."""
    return "".join("ACGTN"[c] for c in row[:n + max_length - 1])


def test_count_scores_gives_each_distinct_row_and_score(chrx_slice, backend):
    """ScanPlan.count_scores: a block's hits come with their distinct (row, score), sorted, and the hits of each
    (the q-values' kept pairs; on the GPU counted on the device), equal to counting the hits themselves."""
    from collections import Counter

    rows, thr, mi, st = motif_panel()
    plan = make_plan(rows, thr, mi, st)
    seq = chrx_slice[:200_000]
    buf = np.full(len(seq) + plan.max_length - 1, 4, np.uint8)
    buf[:len(seq)] = encode(seq)
    assert scan_block(buf, len(seq), plan, device=backend[0], method=backend[1]).pairs is None
    plan.count_scores = True
    h = scan_block(buf, len(seq), plan, device=backend[0], method=backend[1])
    r, s, pv, c = h.pairs
    want = Counter(zip(h.row.tolist(), h.score.tolist()))
    assert len(h) > 1000 and len(want) < len(h)
    assert list(zip(r.tolist(), s.tolist())) == sorted(want) and c.tolist() == [want[k] for k in sorted(want)]
    assert pv is None                                   # (no p-value table in this plan)


def test_pinned_sizes_cover_every_array_of_a_block_near_its_expected_count():
    """The GPU path copies a block's hits into power-of-two pinned buffers; the ones reserved for an expected count n
    (workers.scan.gpu.reserve_pinned) hold the positions, scores, p-values (8 bytes a hit) and rows (4) of any
    block of n/2 to n hits — two of each size a block takes; none are made ahead past PINNED_AHEAD_MAX a thread (a
    permissive p-value)."""
    from collections import Counter

    from workers.scan.gpu import pinned_capacity, pinned_sizes

    for nbytes in (1, 65_536, 65_537, 3_000_000, 1 << 24, (1 << 24) + 1):
        cap = pinned_capacity(nbytes)
        assert cap & (cap - 1) == 0 and cap >= max(nbytes, 65_536) and (cap < 2 * nbytes or cap == 65_536)
    from workers.scan.gpu import PINNED_AHEAD_MAX

    assert pinned_sizes(3e7) == [] and sum(pinned_capacity(b) for b in pinned_sizes(2_940_000)) <= PINNED_AHEAD_MAX
    rng = np.random.default_rng(1)
    for n in (2_940_000, 290_000, 1_000_003):
        reserved = Counter(pinned_capacity(s) for s in pinned_sizes(n))
        for hits in rng.integers(n // 2 + 1, n + 1, 200).tolist() + [n, n // 2 + 1]:
            need = Counter(pinned_capacity(b * hits) for b in (8, 8, 8, 4))
            assert all(reserved[c] >= k for c, k in need.items()), (n, hits)
