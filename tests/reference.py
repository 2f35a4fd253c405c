"""Independent references for the tests: float64 arithmetic in plain loops or plain NumPy, no shared code with
the scanners."""
from __future__ import annotations

import gzip

import numpy as np

CODE = {c: i for i, c in enumerate("ACGT")}


def naive_scan(seq: str, pwms: list, thresholds: list):
    """Every window of ``seq`` (a str) scored by every (pwm, threshold) in float64.

    Returns a sorted list of (pos, row, score) for windows without non-ACGT letters scoring >= threshold.
    Each window's score is ``((0 + w[0][c0]) + w[1][c1]) + ...`` in column order, the additions of a plain loop over
    the window's letters (bit for bit), done for all windows at once column by column (a Python loop per letter took
    ~1 minute of the suite).
    """
    codes = np.array([CODE.get(c, -1) for c in seq.upper()], dtype=np.int64)
    out = []
    for r, (w, t) in enumerate(zip(pwms, thresholds)):
        w = np.asarray(w, dtype=np.float64)
        m, n = len(w), codes.size - len(w) + 1
        if n <= 0:
            continue
        acc, ok = np.zeros(n), np.ones(n, dtype=bool)
        for j in range(m):
            c = codes[j:j + n]
            ok &= c >= 0
            acc += w[j][np.maximum(c, 0)]
        out += [(int(i), r, float(acc[i])) for i in np.flatnonzero(ok & (acc >= t))]
    out.sort()
    return out


def brute_force_pvalue(pwm: np.ndarray, bg: np.ndarray, alpha: float, tie: float = 1e-9) -> float:
    """P(score >= alpha - tie) by enumerating all 4^m words (m <= 11).

    Scores within ``tie`` bits are one score: the same real score summed in another column order can
    differ by an ulp, so an attained score's p-value counts its ties.
    """
    m = pwm.shape[0]
    scores = np.zeros(1)
    probs = np.ones(1)
    for j in range(m):
        scores = (scores[:, None] + pwm[j][None, :]).ravel()
        probs = (probs[:, None] * bg[None, :]).ravel()
    return float(probs[scores >= alpha - tie].sum())


def naive_composition_arrays(seq: str, tests: list, min_similarity: float, both_strands: bool = False):
    """:func:`naive_composition` as four arrays (pos, test index, strand ``"+"``/``"-"``, similarity), unsorted: the
    same recount, without a Python tuple per match (half a million of them took seconds)."""
    from numpy.lib.stride_tricks import sliding_window_view

    s = np.frombuffer(seq.upper().encode(), np.uint8)
    parts = []
    by_len: dict = {}
    for i, t in enumerate(tests):
        by_len.setdefault(len(t), []).append(i)
    for L, idx in by_len.items():
        if L > len(s):
            continue
        win = sliding_window_view(s, L)
        counts = np.stack([(win == ord(c)).sum(1) for c in "ACGT"], axis=1).astype(np.int64)
        clean = counts.sum(1) == L
        for i in idx:
            t = tests[i].upper().replace("U", "T")
            h = np.array([t.count(c) for c in "ACGT"], np.int64)
            variants = [("+", h)] + ([("-", h[::-1])] if both_strands else [])
            for strand, hh in variants:
                d = np.abs(counts - hh).sum(1)
                sim = 1.0 - d.astype(np.float64) / float(L)
                p = np.flatnonzero(clean & (sim >= min_similarity))
                parts.append((p, np.full(p.size, i), np.full(p.size, strand), sim[p]))
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, "<U1"), np.zeros(0, np.float64)
    return tuple(np.concatenate([q[k] for q in parts]) for k in range(4))


def naive_composition(seq: str, tests: list, min_similarity: float, both_strands: bool = False):
    """Every window of ``seq`` recounted from its letters and compared with every test (strings), in float64.

    Returns a sorted list of (pos, test index, strand, similarity) with S = 1 - D/|T| >= min_similarity,
    D = sum over A, C, G, T of |count in test - count in window|; windows with other letters are left out;
    strand "-" compares the window with the test's reverse complement (U counts as T).
    """
    pos, test, strand, sim = naive_composition_arrays(seq, tests, min_similarity, both_strands)
    return sorted(zip(pos.tolist(), test.tolist(), strand.tolist(), sim.tolist()))


def has_site(seq: str, pwm: np.ndarray, threshold: float) -> bool:
    """Whether some window of ``seq`` without a non-ACGT letter scores ``>= threshold`` under ``pwm`` ((m, 4)),
    the window's score summed column by column in float64 (the order :func:`naive_scan` sums in), vectorised
    over the windows."""
    codes = np.array([CODE.get(c, 4) for c in seq.upper()], dtype=np.int64)
    m = pwm.shape[0]
    if codes.size < m:
        return False
    win = np.lib.stride_tricks.sliding_window_view(codes, m)
    valid = (win < 4).all(axis=1)
    acc = np.zeros(win.shape[0])
    w = np.asarray(pwm, dtype=np.float64)
    for j in range(m):
        acc += w[j, np.minimum(win[:, j], 3)]
    return bool((valid & (acc >= threshold)).any())


def slice_table_row(w, alpha: float, S: int, ell: int, digits):
    """One row's float64 slice table, built row by row (:func:`workers.scan.cpu._slices_of` builds many at once):
    ``-alpha/m`` folded into every column, entry ``[s, u]`` the sum of columns ``s*ℓ .. s*ℓ+ℓ-1`` for ℓ-mer ``u``,
    the last entry ``-inf`` inside the motif and the slice maximum on the last, padded, slice."""
    m = w.shape[0]
    K = 1 << (2 * ell)
    W = np.zeros((S * ell, 4))
    W[:m] = w - alpha / m
    T = np.zeros((S, K + 1))
    for i in range(ell):
        T[:, :K] += W[i::ell][:, digits[:, i]]
    inside = (np.arange(S) + 1) * ell <= m
    T[:, K] = np.where(inside, -np.inf, T[:, :K].max(axis=1))
    return T


def quantise_row(T, slack: float, min_scale: float, dtype=np.int16):
    """One row's int8 or int16 slice table, candidate bound and scale (units per bit), row by row
    (:func:`workers.scan.cpu._quantise_many` quantises many at once), or None where the scale would be under
    ``min_scale`` or the clamped sums could leave the type."""
    lim = -int(np.iinfo(dtype).min)
    S, K1 = T.shape
    body = T[:, :-1]
    top = np.maximum(body.max(axis=1), 0).sum()
    scale = (lim // S - S - 4) / (max(top, 1.0) + slack)
    if scale < min_scale:
        return None
    Q = np.rint(body * scale)
    err = np.abs(Q - body * scale).max(axis=1).sum()
    thr = -(np.floor(err + slack * scale) + 1)
    qmax = Q.max(axis=1)
    floor = thr - 1 - np.maximum(qmax, 0).sum()
    if S * floor < -lim or np.maximum(qmax, 0).sum() > lim - 1:
        return None
    out = np.empty((S, K1), dtype=dtype)
    out[:, :-1] = np.maximum(Q, floor)
    out[:, -1] = np.where(np.isfinite(T[:, -1]), qmax, floor)
    return out, dtype(thr), scale


def fasta_records(path) -> list:
    """Every record of a FASTA file (plain or gzip) as ``(name, codes)``, read line by line (lines end in LF, CR LF,
    or CR alone in a file without LF): a header is a line starting with ``>``, its name the first word; whitespace
    anywhere in a sequence line is dropped; A/C/G/T in either case are codes 0-3 and any other byte 4 (the reference
    for ``pipeline.io.fasta.FastaReader``)."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    if b"\n" not in data:                   # old Mac OS text: lines end in CR alone
        data = data.replace(b"\r", b"\n")
    table = {ord(c): i % 4 for i, c in enumerate("ACGTacgt")}
    records = []
    for line in data.split(b"\n"):
        if not line:
            continue
        if line.startswith(b">"):
            records.append((line[1:].split()[0].decode(), []))
        else:
            records[-1][1].extend(table.get(b, 4) for b in line.translate(None, b" \t\r\n\v\f"))
    return [(name, np.array(codes, np.uint8)) for name, codes in records]
