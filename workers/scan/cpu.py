"""Multi-PWM scanning of one block: what one task computes on one device.

CPU path (BLAMM, Fostier 2020): every motif and strand is one column of a pattern matrix P, tiled by
motif length; the block's one-hot sequence S_enc (4 floats per position) is used in place through
strided views, never copied window by window.  For a tile of padded length L and an offset ``o``,
the windows starting at ``o, o+w, o+2w, ...`` (``w >= L``) form a legal row-major BLAS operand
``S_enc[4o:]`` with leading dimension ``4w``; one SGEMM gives their scores against every motif of
the tile.  The threshold is folded into P (each column of motif ``k`` carries ``-alpha_k/m_k``), so
a hit candidate is simply a non-negative entry of the product.  Candidates (within a float32 error
margin of the threshold) are rescored in float64 in column order, exactly as a naive loop does;
windows containing a code 4 (N, IUPAC) are never reported.

The Slices Strategy (ℓ-mer tables, the default; :func:`slice_tiles`) finds the same candidates with table
look-ups instead of products.  The GPU path lives in :mod:`workers.scan.gpu` and returns the same arrays.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from workers.scan.plan import BlockHits, ScanPlan, n_prefix, stacked_weights

#: margin (bits) under which float32 scores are rechecked in float64; far above float32 error
#: (< 1e-4 bits for 64 columns of |w| <= 20), far below any threshold gap that matters.
CANDIDATE_MARGIN = 1e-2
_ONE_HOT = np.vstack([np.eye(4, dtype=np.float32), np.zeros((1, 4), np.float32)])


def rescore(codes: np.ndarray, npref: np.ndarray, pos: np.ndarray, rows: np.ndarray, plan: ScanPlan,
            row_sorted: bool = False) -> BlockHits:
    """Exact float64 scores of candidate windows; the hits among them.

    Columns are added in order from 0.0, as a plain float64 loop does (:func:`workers.scan.cpu_numba.
    rescore_windows`), so the scores are bit-identical to it on every device.

    Parameters
    ----------
    codes : ndarray, shape (>= max(pos) + plan.max_length,), uint8
    npref : ndarray, shape (codes.size + 1,), int32
        :func:`workers.scan.plan.n_prefix` of ``codes``.
    pos : ndarray, shape (n,), int64
        Candidate window starts.
    rows : ndarray, shape (n,), int32
        Their plan rows.
    plan : ScanPlan
    row_sorted : bool
        The positions of each row's candidates ascend (a counting sort by row then orders the hits).

    Returns
    -------
    BlockHits
        The candidates scoring ``>= alpha`` with no code 4 in the window, sorted by (row, position).
    """
    from workers.scan.cpu_numba import hits_by_row, rescore_windows  # noqa: PLC0415

    if pos.size == 0:
        return BlockHits.empty()
    score, hit = rescore_windows(codes, npref, pos, rows, *stacked_weights(plan), plan.thresholds)
    if row_sorted:
        return BlockHits(*hits_by_row(pos, rows, score, hit, plan.n_rows))
    pos, row, score = pos[hit], rows[hit], score[hit]
    o = np.argsort((row.astype(np.int64) << 32) | pos)
    return BlockHits(pos[o], row[o], score[o])


def _scan_cpu_blas(codes: np.ndarray, n_positions: int, plan: ScanPlan, chunk_rows: int = 4096) -> BlockHits:
    n = int(n_positions)
    if n <= 0 or not plan.tiles:
        return BlockHits.empty()
    Lmax = plan.max_length
    # one-hot sequence, padded so every strided view stays inside the buffer
    span = chunk_rows * max(t.length for t in plan.tiles)
    total = (-(-n // span) + 1) * span + Lmax + 1
    padded = np.full(total, 4, dtype=np.uint8)
    take = min(codes.size, total)
    padded[:take] = codes[:take]
    enc = _ONE_HOT[padded].reshape(-1)          # (4*total,) float32, N -> zeros
    cand_pos, cand_row = [], []
    item = enc.itemsize
    widest = max(len(t.rows) for t in plan.tiles)
    rbuf = np.empty(chunk_rows * widest, dtype=np.float32)       # reused: no page faults per product
    mbuf = np.empty(chunk_rows, dtype=np.float32)
    for tile in plan.tiles:
        L, P = tile.length, tile.P
        w = L                                       # windows o, o+w, ... never overlap: legal BLAS operand
        step = chunk_rows * w
        thr = -CANDIDATE_MARGIN
        for c0 in range(0, n, step):
            rows_here = min(chunk_rows, -(-(n - c0) // w))
            for o in range(w):
                start = c0 + o
                if start >= n:
                    break
                view = np.lib.stride_tricks.as_strided(enc[4 * start:], shape=(rows_here, 4 * L),
                                                       strides=(4 * w * item, item), writeable=False)
                R = rbuf[: rows_here * P.shape[1]].reshape(rows_here, P.shape[1])
                np.matmul(view, P, out=R)           # (rows_here, c): score - alpha, float32
                rmax = R.max(axis=1, out=mbuf[:rows_here])
                hit_rows = np.flatnonzero(rmax >= thr)
                if hit_rows.size == 0:
                    continue
                sub = R[hit_rows]
                ii, kk = np.nonzero(sub >= thr)
                p = start + hit_rows[ii] * w
                inside = p < n
                cand_pos.append(p[inside].astype(np.int64))
                cand_row.append(tile.rows[kk[inside]])
    if not cand_pos:
        return BlockHits.empty()
    return rescore(codes, n_prefix(padded), np.concatenate(cand_pos), np.concatenate(cand_row), plan)


SLICE_ELL = 4            # ℓ: 256-entry tables, about 3 reads per JASPAR window instead of 4m multiply-adds
#: rows per slice tile at most, by table type: a tile's tables (S x 257 x w entries) stay in L2
SLICE_WIDTH = {np.dtype(np.int8): 256, np.dtype(np.int16): 128, np.dtype(np.float32): 128}
#: fixed per-position cost of one slice of a tile, in row reads (ℓ-mer lookup, loop set-up, remainder)
SLICE_OVERHEAD = 40

#: coarsest resolution (units per bit) worth scanning with each integer table type, tried narrowest first: a coarser
#: row's candidate margin (about S/2 units) lets through more near-threshold windows, each rescored in float64 and
#: each making its chunk's sums be computed twice.  Rows too coarse for int16 keep float32 tables.  1 unit per bit for
#: int8 was the fastest of 0.25-6 on 1 Mi positions of chrX and of peaks × 879 vertebrates at 1e-4 and 1e-5, and ties
#: all-int16 tables at 1e-3, where more rows are coarse (docs/benchmarks.md, "int8 slice tables").
MIN_SCALE = {np.dtype(np.int8): 1.0, np.dtype(np.int16): 64.0}
#: bits by which a table sum may fall short of the column-order float64 score and still be a
#: candidate: far above float64 and float32 accumulation error, far below a score gap that matters
SLICE_SLACK = 1e-3


def _padded_width(c):
    """Rows a tile of ``c`` rows (an int or an array of them) is scanned with: the kernel tests rows a chunk of
    :data:`workers.scan.cpu_numba.CHUNK` at a time (constant trip count: LLVM's vector loop has no epilogue), so
    tiles are padded with rows that can never be candidates."""
    from workers.scan.cpu_numba import CHUNK  # noqa: PLC0415

    return -(-np.asarray(c) // CHUNK) * CHUNK


@dataclass
class SliceTile:
    """One tile of the Slices Strategy (:func:`slice_tiles`)."""
    rows: np.ndarray         # (c,) int32 plan rows
    T: np.ndarray            # (S, 4**ℓ + 1, w) int8 or int16 (quantised) or float32: each ℓ-mer's slice score - alpha
                             # share; w >= c is a multiple of the kernel's chunk (_padded_width), padded with zero rows
    cand_thr: np.ndarray     # (w,) T's dtype: lowest table sum a hit can have (rounding bound + slack below 0);
                             # the dtype's max (inf) on padding rows (never reached)

    @property
    def flat(self) -> tuple:
        """``T``'s slices, each flattened to ((4**ℓ + 1) * w,): the tables as :func:`workers.scan.cpu_numba.scan_tile`
        takes them (views, no copy)."""
        return tuple(self.T.reshape(len(self.T), -1))


def _tile_bounds(nsl: np.ndarray, max_width: int) -> list:
    """Cut rows sorted by slice count into tiles of at most ``max_width`` rows: ``[(lo, hi), ...]``.

    A tile of c rows scans its longest row's S slices: about ``S * (SLICE_OVERHEAD + _padded_width(c))``
    per position (shorter rows read zero slices).  Dynamic programming over the cut points minimises the
    sum, so a few long rows join a tile of shorter ones instead of paying for a tile of their own.
    """
    R = nsl.size
    best = np.zeros(R + 1)
    prev = np.zeros(R + 1, dtype=np.intp)
    for j in range(1, R + 1):
        i = np.arange(max(0, j - max_width), j)
        cost = best[i] + nsl[j - 1] * (SLICE_OVERHEAD + _padded_width(j - i))
        b = int(np.argmin(cost))
        best[j], prev[j] = cost[b], i[b]
    bounds, j = [], R
    while j:
        bounds.append((int(prev[j]), j))
        j = int(prev[j])
    return bounds[::-1]


def slice_tiles(plan: ScanPlan, ell: int = SLICE_ELL) -> list:
    """The Slices Strategy tables (Giraud & Varré 2011, §3.1; Liefooghe et al.), quantised to int8 or int16.

    ``T[s, u, k]`` is the summed score of ℓ-mer ``u`` over columns ``s*ℓ .. s*ℓ+ℓ-1`` of row k, each
    column carrying ``-alpha/m`` (:func:`_slices_of`), times a per-row scale, rounded and clamped
    (:func:`_quantise_many`): a quarter (int8) or half (int16) the bytes of float32 tables, as many times the SIMD
    lanes, and a candidate bound that provably covers the rounding, so the float64 rescoring still sees every hit.
    Each row takes the narrowest type whose resolution is at least ``MIN_SCALE`` units per bit; rows too coarse
    even for int16 keep float32 tables (bound: the sum of the slices' float32 rounding plus ``SLICE_SLACK``;
    ``-1e30`` for an N inside the motif).  Rows of one table type are sorted by slice count and cut into tiles
    (:func:`_tile_bounds`); a tile has its longest row's slice count S, shorter rows get zero tables for their
    missing slices (ℓ-mers past the motif).

    Parameters
    ----------
    plan : ScanPlan
    ell : int
        ℓ, the slice width (tables of ``4**ℓ + 1`` entries per slice).

    Returns
    -------
    list of SliceTile
        ``T`` of shape ``(S, 4**ℓ + 1, w)``, int8, int16 or float32, and ``cand_thr`` of shape ``(w,)``; built once
        per plan and ℓ (the threads of a worker wait for the first) and cached on the plan.
    """
    cached = plan._slices.get(ell)
    if cached is not None:
        return cached
    with _SLICES_LOCK:         # a worker's threads start their first blocks together: build once
        cached = plan._slices.get(ell)
        if cached is None:
            cached = plan._slices[ell] = _build_slice_tiles(plan, ell)
    return cached


_SLICES_LOCK = threading.Lock()


def _row_tables(plan: ScanPlan, ell: int) -> list:
    """Each plan row's slice table: ``(S, int8, int16 or float32 table (S, 4**ℓ + 1), candidate bound)``, in row order.

    Rows of one slice count are built and quantised together (:func:`_slices_of` and :func:`_quantise_many`; the
    row-by-row construction, kept in ``tests/reference.py``, gives the same tables bit for bit): one row at a time,
    Python's per-row calls took 0.5 s for 879 motifs, most of a small scan's task time.  Each row takes the first
    type of int8, int16 (:data:`MIN_SCALE`) and float32 that resolves it finely enough."""
    K = 1 << (2 * ell)
    digits = np.array([[(u >> (2 * (ell - 1 - i))) & 3 for i in range(ell)] for u in range(K)], dtype=np.intp)
    nsl = -(-plan.lengths // ell)
    out: list = [None] * plan.n_rows
    for S in np.unique(nsl).tolist():
        rows = np.flatnonzero(nsl == S)
        T = _slices_of([plan.pwms[r] for r in rows.tolist()], plan.thresholds[rows], int(S), ell, digits)
        for dtype in MIN_SCALE:
            left = [k for k, r in enumerate(rows.tolist()) if out[r] is None]
            if not left:
                break
            Q, thr = _quantise_many(T[left], dtype)
            for k, q, b in zip(left, Q, thr):
                if q is not None:
                    out[rows[k]] = (int(S), q, b)
        for k, r in enumerate(rows.tolist()):
            if out[r] is None:
                T32 = np.maximum(T[k], -1e30).astype(np.float32)
                err = np.abs(T32[:, :K].astype(np.float64) - T[k][:, :K]).max(axis=1).sum()
                out[r] = (int(S), T32, np.float32(-(err + SLICE_SLACK)))
    return out


def _slices_of(pwms: list, alphas: np.ndarray, S: int, ell: int, digits: np.ndarray) -> np.ndarray:
    """Float64 slice tables of ``n`` rows of ``S`` slices, ``-alpha/m`` folded into every column: shape
    (n, S, 4**ℓ + 1).

    Entry ``[r, s, u]`` sums columns ``s*ℓ .. s*ℓ+ℓ-1`` of row r (zero past the motif) for the ℓ-mer ``u``, first
    base most significant; entry ``[r, s, 4**ℓ]`` (an ℓ-mer containing a code > 3) is ``-inf`` for slices inside
    the motif and the slice maximum for the last, partly padded, one (its N may lie past the motif; the float64
    rescoring decides).
    """
    n, K = len(pwms), 1 << (2 * ell)
    W = np.zeros((n, S * ell, 4))
    m = np.array([w.shape[0] for w in pwms], dtype=np.int64)
    for k, w in enumerate(pwms):
        W[k, :m[k]] = w - float(alphas[k]) / m[k]
    T = np.zeros((n, S, K + 1))
    for i in range(ell):
        T[:, :, :K] += W[:, i::ell][:, :, digits[:, i]]
    inside = (np.arange(S) + 1) * ell <= m[:, None]
    T[:, :, K] = np.where(inside, -np.inf, T[:, :, :K].max(axis=2))
    return T


def _quantise_many(T: np.ndarray, dtype=np.int16) -> tuple:
    """int8 or int16 versions of the slice tables ``T`` (n, S, 4**ℓ + 1): a list of n tables (None where a row's would
    be coarser than ``MIN_SCALE[dtype]``) and the (n,) candidate bounds, of ``dtype``.

    With ``scale`` units per bit, ``Q = rint(T * scale)`` is off by at most ``e_s`` units in slice s,
    so a window scoring >= alpha (table sum >= 0 up to float64 error) has ``sum Q >= -sum_s e_s``; the
    candidate bound ``thr = -(floor(sum_s e_s + SLICE_SLACK * scale) + 1)`` lies strictly below that.
    Entries under ``F = thr - 1 - sum_s max(max_u Q[s], 0)`` are raised to ``F`` (so is the N entry
    inside the motif): a window holding one can never reach ``thr``, whatever its other slices, and
    raising entries only raises sums, so no hit is lost.  ``scale`` is chosen per row so that
    ``S * F >= -2**(b-1)`` for b-bit integers (checked per row; a row that fails is coarser than any scale worth
    using): every partial sum (between ``S*F`` and the sum of the maxima) fits the type, which the kernel's
    wrapping adds therefore never leave.
    """
    dtype = np.dtype(dtype)
    lim = -int(np.iinfo(dtype).min)
    n, S, K1 = T.shape
    body = T[:, :, :-1]
    top = np.maximum(body.max(axis=2), 0).sum(axis=1)
    scale = (lim // S - S - 4) / (np.maximum(top, 1.0) + SLICE_SLACK)
    Q = np.rint(body * scale[:, None, None])
    err = np.abs(Q - body * scale[:, None, None]).max(axis=2).sum(axis=1)
    thr = -(np.floor(err + SLICE_SLACK * scale) + 1)
    qmax = Q.max(axis=2)
    floor = thr - 1 - np.maximum(qmax, 0).sum(axis=1)
    ok = (scale >= MIN_SCALE[dtype]) & (S * floor >= -lim) & (np.maximum(qmax, 0).sum(axis=1) <= lim - 1)
    out = np.empty((n, S, K1), dtype=dtype)
    with np.errstate(invalid="ignore"):      # rows too coarse for the type are thrown away below
        out[:, :, :-1] = np.maximum(Q, floor[:, None, None])
        out[:, :, -1] = np.where(np.isfinite(T[:, :, -1]), qmax, floor[:, None])
        bounds = np.where(ok, thr, 0).astype(dtype)
    return [out[k] if ok[k] else None for k in range(n)], bounds


def _build_slice_tiles(plan: ScanPlan, ell: int) -> list:
    K = 1 << (2 * ell)
    groups: dict = {}
    for r, (S, table, bound) in enumerate(_row_tables(plan, ell)):
        groups.setdefault(table.dtype, []).append((S, r, table, bound))
    tiles = []
    for dtype, members in groups.items():
        members.sort(key=lambda x: x[0])
        # padding rows: zero tables and a bound no sum reaches (sums stay within the type, see _quantise_many)
        never = np.iinfo(dtype).max if dtype.kind == "i" else np.inf
        for lo, hi in _tile_bounds(np.array([m[0] for m in members]), SLICE_WIDTH[dtype]):
            part = members[lo:hi]
            S = part[-1][0]
            width = int(_padded_width(len(part)))
            T = np.zeros((S, K + 1, width), dtype=dtype)
            for k, (s, _, t, _) in enumerate(part):
                T[:s, :, k] = t
            cand_thr = np.full(width, never, dtype=dtype)
            cand_thr[:len(part)] = [m[3] for m in part]
            tiles.append(SliceTile(rows=np.array([m[1] for m in part], dtype=np.int32), T=T, cand_thr=cand_thr))
    return tiles


def _scan_cpu_slices(codes: np.ndarray, n_positions: int, plan: ScanPlan, ell: int = SLICE_ELL) -> BlockHits:
    from workers.scan.cpu_numba import kmer_codes, scan_tile  # noqa: PLC0415

    n = int(n_positions)
    if n <= 0 or not plan.n_rows:
        return BlockHits.empty()
    tiles = slice_tiles(plan, ell)
    smax = max(t.T.shape[0] for t in tiles)
    kmer = kmer_codes(codes, n + smax * ell, ell)
    cap = max(1 << 16, n // 8)
    pos_buf = np.empty(cap, dtype=np.int64)
    col_buf = np.empty(cap, dtype=np.int32)
    cand_pos, cand_row = [], []
    for t in tiles:
        while True:
            cnt = scan_tile(kmer, n, t.flat, ell, t.cand_thr, pos_buf, col_buf)
            if cnt <= pos_buf.size:
                break
            pos_buf = np.empty(int(cnt * 1.25), dtype=np.int64)
            col_buf = np.empty(int(cnt * 1.25), dtype=np.int32)
        cand_pos.append(pos_buf[:cnt].copy())
        cand_row.append(t.rows[col_buf[:cnt]])
    padded = np.full(n + plan.max_length + 1, 4, dtype=np.uint8)
    take = min(codes.size, padded.size)
    padded[:take] = codes[:take]
    return rescore(padded, n_prefix(padded), np.concatenate(cand_pos), np.concatenate(cand_row), plan,
                   row_sorted=True)   # a row lies in one tile, whose candidates come position by position


def scan_cpu(codes: np.ndarray, n_positions: int, plan: ScanPlan, method: str | None = None) -> BlockHits:
    """The CPU scan of one block row.

    Parameters
    ----------
    codes : ndarray, shape (>= n_positions + plan.max_length - 1,), uint8
    n_positions : int
        Window starts ``0 .. n_positions - 1``.
    plan : ScanPlan
    method : {"slices", "blas", None}
        The Slices Strategy (default) or BLAMM's BLAS products; the same hits either way.

    Returns
    -------
    BlockHits
        Sorted by (row, position); see :func:`workers.scan.scan_block`.
    """
    method = method or "slices"
    if method == "slices":
        return _scan_cpu_slices(np.asarray(codes, dtype=np.uint8), n_positions, plan)
    if method != "blas":
        raise ValueError(f"unknown CPU scan method {method!r}")
    return _scan_cpu_blas(np.asarray(codes, dtype=np.uint8), n_positions, plan)
