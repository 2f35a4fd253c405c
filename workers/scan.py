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

The GPU path lives in :mod:`workers.scan_gpu` and returns the same arrays.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import numpy as np

from workers.backend import resolve_device

#: margin (bits) under which float32 scores are rechecked in float64; far above float32 error
#: (< 1e-4 bits for 64 columns of |w| <= 20), far below any threshold gap that matters.
CANDIDATE_MARGIN = 1e-2
_ONE_HOT = np.vstack([np.eye(4, dtype=np.float32), np.zeros((1, 4), np.float32)])


@dataclass
class Tile:
    rows: np.ndarray          # (c,) int32 indices into ScanPlan rows
    length: int               # padded length L (the longest motif of the tile)
    P: np.ndarray             # (4L, c) float32; entry [4j+x, k] = w_k[j, x] - alpha_k / m_k (0 past m_k)


@dataclass
class ScanPlan:
    """Everything a worker needs to scan any block; built once on the client, sent once per worker.

    A *row* is one (motif, strand) pair: ``row_motif[r]`` is the motif index, ``row_strand[r]`` is
    0 for "+" and 1 for "-".  The "-" row scores the forward window with the reverse-complement
    matrix, so its hits are reported on the forward coordinates of the window.
    """
    pwms: list                      # per row: (m, 4) float64 matrix actually scored
    thresholds: np.ndarray          # (R,) float64 alpha per row (finite: unreachable rows are left out)
    row_motif: np.ndarray           # (R,) int32
    row_strand: np.ndarray          # (R,) int8
    lengths: np.ndarray             # (R,) int32
    tiles: list = field(default_factory=list)
    max_length: int = 0
    pvalues: object = None          # optional workers.pvalue_table.PvalueTable of the rows: a GPU scan then
                                    # also returns each hit's p-value segment (BlockHits.seg)
    _gpu: dict = field(default_factory=dict, repr=False)   # per-device cache of uploaded tables
    _slices: dict = field(default_factory=dict, repr=False)  # per-ℓ slice tables, stacked weights (built on first use)

    @property
    def n_rows(self) -> int:
        return len(self.pwms)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_gpu"] = {}
        state["_slices"] = {}
        return state


def plan_tiles(lengths: np.ndarray, waste: float = 0.15, max_width: int = 512) -> list[np.ndarray]:
    """Group rows into tiles of similar length (padding waste <= ``waste``), longest first."""
    order = np.argsort(-lengths, kind="stable")
    tiles, cur, cur_len = [], [], 0
    for r in order:
        m = int(lengths[r])
        if cur and (m < cur_len * (1 - waste) or len(cur) >= max_width):
            tiles.append(np.asarray(cur, dtype=np.int32))
            cur = []
        if not cur:
            cur_len = m
        cur.append(int(r))
    if cur:
        tiles.append(np.asarray(cur, dtype=np.int32))
    return tiles


def make_plan(pwms: list, thresholds: np.ndarray, row_motif: np.ndarray, row_strand: np.ndarray) -> ScanPlan:
    """Build the plan from per-row float64 matrices and thresholds (rows with alpha = inf are dropped)."""
    thresholds = np.asarray(thresholds, dtype=np.float64)
    keep = np.flatnonzero(np.isfinite(thresholds))
    pwms = [np.ascontiguousarray(pwms[i], dtype=np.float64) for i in keep]
    lengths = np.array([p.shape[0] for p in pwms], dtype=np.int32)
    plan = ScanPlan(pwms=pwms, thresholds=thresholds[keep], row_motif=np.asarray(row_motif)[keep].astype(np.int32),
                    row_strand=np.asarray(row_strand)[keep].astype(np.int8), lengths=lengths,
                    max_length=int(lengths.max()) if len(lengths) else 0)
    for rows in plan_tiles(lengths):
        L = int(lengths[rows].max())
        P = np.zeros((L, 4, len(rows)), dtype=np.float64)
        for k, r in enumerate(rows):
            m = lengths[r]
            P[:m, :, k] = pwms[r] - plan.thresholds[r] / m
        plan.tiles.append(Tile(rows=rows, length=L, P=P.reshape(4 * L, len(rows)).astype(np.float32)))
    return plan


@dataclass
class BlockHits:
    """Hits of one block, sorted by (row, position): each motif/strand row's hits together, in genome order
    (the order of the Parquet files: long runs of one motif, ascending coordinates inside, make them smaller
    and faster to encode than position order).  ``pos`` is relative to the block row start."""
    pos: np.ndarray      # (n,) int64
    row: np.ndarray      # (n,) int32 ScanPlan row
    score: np.ndarray    # (n,) float64, exact (column-order float64 sum)
    seg: np.ndarray | None = None   # (n,) int32 p-value segment (PvalueTable.lookup), where already found

    @classmethod
    def empty(cls) -> "BlockHits":
        return cls(np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.float64))

    def __len__(self) -> int:
        return len(self.pos)


def n_prefix(codes: np.ndarray) -> np.ndarray:
    """(n+1,) int32 prefix count of code-4 positions, for O(1) "window contains N" tests."""
    out = np.zeros(codes.size + 1, dtype=np.int32)
    np.cumsum(codes >= 4, out=out[1:])
    return out


def valid_windows(codes: np.ndarray, n_positions: int, lengths: np.ndarray) -> np.ndarray:
    """Window starts ``0 .. n_positions-1`` whose window holds no code 4, for each window length: the windows a
    scan tests on one strand (the multiple-testing count of the q-values).

    Parameters
    ----------
    codes : ndarray, shape (r,), uint8
        Block row (A=0 C=1 G=2 T=3, other=4); codes past its end count as 4.
    n_positions : int
        Window starts to count (the block core, clipped to the contig end).
    lengths : ndarray, shape (L,), int
        Window lengths.

    Returns
    -------
    ndarray, shape (L,), int64
        Valid window starts per length.

    Counted from the runs of codes < 4 (a window is valid iff it lies inside one run), so the cost is one pass
    over the row plus O(runs) per length rather than a prefix-sum test per position and length.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.zeros(lengths.size, dtype=np.int64)
    n = int(n_positions)
    if n <= 0 or lengths.size == 0:
        return out
    span = min(int(codes.size), n + int(lengths.max()) - 1)
    good = np.zeros(span + 2, dtype=np.int8)
    good[1:-1] = codes[:span] < 4
    edges = np.flatnonzero(np.diff(good))           # run starts and ends alternate (indices into codes)
    a, b = edges[0::2], edges[1::2]
    if a.size * lengths.size <= 1 << 16:            # all lengths at once: a few calls for a short block
        return np.maximum(np.minimum(b[None, :] - lengths[:, None], n - 1) - a[None, :] + 1, 0).sum(axis=1)
    for i, m in enumerate(lengths.tolist()):        # starts p in [a, b - m] with p < n
        out[i] = np.maximum(np.minimum(b - m, n - 1) - a + 1, 0).sum()
    return out


def rescore(codes: np.ndarray, npref: np.ndarray, pos: np.ndarray, rows: np.ndarray, plan: ScanPlan) -> BlockHits:
    """Exact float64 scores of candidate windows (``slices_numba.rescore_windows``: column order, as a plain
    loop); keep those >= alpha with no N, sorted by (row, position).  Host arrays; ``codes`` must reach
    ``max(pos) + max_length``."""
    from workers.slices_numba import rescore_windows  # noqa: PLC0415

    if pos.size == 0:
        return BlockHits.empty()
    score, hit = rescore_windows(codes, npref, pos, rows, *stacked_weights(plan), plan.thresholds)
    pos, row, score = pos[hit], rows[hit], score[hit]
    o = np.argsort((row.astype(np.int64) << 32) | pos)
    return BlockHits(pos[o], row[o], score[o])


def _scan_cpu(codes: np.ndarray, n_positions: int, plan: ScanPlan, chunk_rows: int = 4096) -> BlockHits:
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
SLICE_WIDTH = 128        # rows per slice tile at most: an int16 tile's tables (S x 257 x 128 x 2 B) stay in L2
#: fixed per-position cost of one slice of a tile, in row reads (ℓ-mer lookup, loop set-up, remainder)
SLICE_OVERHEAD = 40

#: coarsest int16 resolution (units per bit) worth scanning: coarser rows keep float32 tables, since
#: their candidate margin (about S/2 units) would let many more near-threshold windows be rescored
MIN_SCALE = 64.0
#: bits by which a table sum may fall short of the column-order float64 score and still be a
#: candidate: far above float64 and float32 accumulation error, far below a score gap that matters
SLICE_SLACK = 1e-3


def _padded_width(c):
    """Rows an int16 tile of ``c`` rows (an int or an array of them) is scanned with: LLVM's vector loop over
    rows handles 128 rows per iteration (16 lanes, unrolled 8 times on AVX2) and leaves the rest to slower
    epilogues, so 118 rows cost twice 128 (AMD EPYC, 1 Mi positions, 5 slices: 23.2 vs 11.7 ms; 64 rows
    11.5 ms).  Tiles above 32 rows are padded to 128 with rows that can never be candidates; narrower ones to
    a multiple of 16."""
    return np.where(np.asarray(c) > 32, SLICE_WIDTH, -(-np.asarray(c) // 16) * 16)


@dataclass
class SliceTile:
    rows: np.ndarray         # (c,) int32 plan rows
    T: np.ndarray            # (S, 4**ℓ + 1, w) int16 (quantised) or float32: each ℓ-mer's slice score - alpha share;
                             # w >= c: int16 tiles are padded (_padded_width) with zero rows
    cand_thr: np.ndarray     # (w,) T's dtype: lowest table sum a hit can have (rounding bound + slack below 0);
                             # int16 max on padding rows (never reached)


def _row_slices(w: np.ndarray, alpha: float, S: int, ell: int, digits: np.ndarray) -> np.ndarray:
    """(S, 4**ℓ + 1) float64 slice table of one row, ``-alpha/m`` folded into every column.

    Entry ``[s, u]`` sums columns ``s*ℓ .. s*ℓ+ℓ-1`` (zero past the motif) for the ℓ-mer ``u``, first
    base most significant; entry ``[s, 4**ℓ]`` (an ℓ-mer containing a code > 3) is ``-inf`` for slices
    inside the motif and the slice maximum for the last, partly padded, one (its N may lie past the
    motif; the float64 rescoring decides).
    """
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


def _quantise(T: np.ndarray) -> tuple | None:
    """int16 version of one row's slice table, or None where it would be coarser than ``MIN_SCALE``.

    With ``scale`` units per bit, ``Q = rint(T * scale)`` is off by at most ``e_s`` units in slice s,
    so a window scoring >= alpha (table sum >= 0 up to float64 error) has ``sum Q >= -sum_s e_s``; the
    candidate bound ``thr = -(floor(sum_s e_s + SLICE_SLACK * scale) + 1)`` lies strictly below that.
    Entries under ``F = thr - 1 - sum_s max(max_u Q[s], 0)`` are raised to ``F`` (so is the N entry
    inside the motif): a window holding one can never reach ``thr``, whatever its other slices, and
    raising entries only raises sums, so no hit is lost.  ``scale`` is chosen per row so that
    ``S * F >= -32768`` (asserted): every partial sum (between ``S*F`` and the sum of the maxima) fits int16,
    which the kernel's wrapping int16 adds therefore never leave.
    """
    S, K1 = T.shape
    body = T[:, :-1]
    top = np.maximum(body.max(axis=1), 0).sum()
    scale = (32768 // S - S - 4) / (max(top, 1.0) + SLICE_SLACK)
    if scale < MIN_SCALE:
        return None
    Q = np.rint(body * scale)
    err = np.abs(Q - body * scale).max(axis=1).sum()
    thr = -(np.floor(err + SLICE_SLACK * scale) + 1)
    qmax = Q.max(axis=1)
    floor = thr - 1 - np.maximum(qmax, 0).sum()
    assert S * floor >= -32768 and np.maximum(qmax, 0).sum() <= 32767, "int16 slice sums could wrap"
    out = np.empty((S, K1), dtype=np.int16)
    out[:, :-1] = np.maximum(Q, floor)
    out[:, -1] = np.where(np.isfinite(T[:, -1]), qmax, floor)
    return out, np.int16(thr)


def _tile_bounds(nsl: np.ndarray) -> list:
    """Cut rows sorted by slice count into tiles of at most ``SLICE_WIDTH`` rows: ``[(lo, hi), ...]``.

    A tile of c rows scans its longest row's S slices: about ``S * (SLICE_OVERHEAD + _padded_width(c))``
    per position (shorter rows read zero slices).  Dynamic programming over the cut points minimises the
    sum, so a few long rows join a tile of shorter ones instead of paying for a tile of their own.
    """
    R = nsl.size
    best = np.zeros(R + 1)
    prev = np.zeros(R + 1, dtype=np.intp)
    for j in range(1, R + 1):
        i = np.arange(max(0, j - SLICE_WIDTH), j)
        cost = best[i] + nsl[j - 1] * (SLICE_OVERHEAD + _padded_width(j - i))
        b = int(np.argmin(cost))
        best[j], prev[j] = cost[b], i[b]
    bounds, j = [], R
    while j:
        bounds.append((int(prev[j]), j))
        j = int(prev[j])
    return bounds[::-1]


def slice_tiles(plan: ScanPlan, ell: int = SLICE_ELL) -> list:
    """The Slices Strategy tables (Giraud & Varré 2011, §3.1; Liefooghe et al.), quantised to int16.

    ``T[s, u, k]`` is the summed score of ℓ-mer ``u`` over columns ``s*ℓ .. s*ℓ+ℓ-1`` of row k, each
    column carrying ``-alpha/m`` (:func:`_row_slices`), times a per-row scale, rounded and clamped
    (:func:`_quantise`): half the bytes of float32 tables, twice the SIMD lanes, and a candidate bound
    that provably covers the rounding, so the float64 rescoring still sees every hit.  Rows whose
    int16 resolution would be under ``MIN_SCALE`` units per bit keep float32 tables (bound: the sum of
    the slices' float32 rounding plus ``SLICE_SLACK``; ``-1e30`` for an N inside the motif).  Rows of one
    table type are sorted by slice count and cut into tiles (:func:`_tile_bounds`); a tile has its
    longest row's slice count S, shorter rows get zero tables for their missing slices (ℓ-mers past
    the motif).  Cached on the plan.
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


def _build_slice_tiles(plan: ScanPlan, ell: int) -> list:
    K = 1 << (2 * ell)
    digits = np.array([[(u >> (2 * (ell - 1 - i))) & 3 for i in range(ell)] for u in range(K)], dtype=np.intp)
    nsl = -(-plan.lengths // ell)
    groups: dict = {}
    for r in range(plan.n_rows):
        T = _row_slices(plan.pwms[r], float(plan.thresholds[r]), int(nsl[r]), ell, digits)
        q = _quantise(T)
        if q is None:
            T32 = np.maximum(T, -1e30).astype(np.float32)
            err = np.abs(T32[:, :K].astype(np.float64) - T[:, :K]).max(axis=1).sum()
            q = T32, np.float32(-(err + SLICE_SLACK))
        groups.setdefault(q[0].dtype, []).append((int(nsl[r]), r, *q))
    tiles = []
    for dtype, members in groups.items():
        members.sort(key=lambda x: x[0])
        for lo, hi in _tile_bounds(np.array([m[0] for m in members])):
            part = members[lo:hi]
            S = part[-1][0]
            width = int(_padded_width(len(part))) if dtype == np.int16 else len(part)
            T = np.zeros((S, K + 1, width), dtype=dtype)
            for k, (s, _, t, _) in enumerate(part):
                T[:s, :, k] = t
            # padding rows: zero tables and a bound no sum reaches (sums stay within int16, see _quantise)
            cand_thr = np.full(width, np.iinfo(np.int16).max if dtype == np.int16 else np.inf, dtype=dtype)
            cand_thr[:len(part)] = [m[3] for m in part]
            tiles.append(SliceTile(rows=np.array([m[1] for m in part], dtype=np.int32), T=T, cand_thr=cand_thr))
    return tiles


def stacked_weights(plan: ScanPlan) -> tuple:
    """All rows' matrices stacked, ``(weights (sum m, 4), starts (R,), lengths (R,))``; cached on the plan."""
    cached = plan._slices.get("weights")
    if cached is None:
        starts = np.zeros(plan.n_rows, dtype=np.int64)
        np.cumsum(plan.lengths[:-1], out=starts[1:])
        cached = plan._slices["weights"] = (np.concatenate(plan.pwms), starts, plan.lengths.astype(np.int64))
    return cached


def _scan_cpu_slices(codes: np.ndarray, n_positions: int, plan: ScanPlan, ell: int = SLICE_ELL) -> BlockHits:
    from workers.slices_numba import kmer_codes, scan_tile  # noqa: PLC0415

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
            cnt = scan_tile(kmer, n, tuple(t.T), ell, t.cand_thr, pos_buf, col_buf)
            if cnt <= pos_buf.size:
                break
            pos_buf = np.empty(int(cnt * 1.25), dtype=np.int64)
            col_buf = np.empty(int(cnt * 1.25), dtype=np.int32)
        cand_pos.append(pos_buf[:cnt].copy())
        cand_row.append(t.rows[col_buf[:cnt]])
    padded = np.full(n + plan.max_length + 1, 4, dtype=np.uint8)
    take = min(codes.size, padded.size)
    padded[:take] = codes[:take]
    return rescore(padded, n_prefix(padded), np.concatenate(cand_pos), np.concatenate(cand_row), plan)


def scan_block(codes: np.ndarray, n_positions: int, plan: ScanPlan, device: str | None = None,
               method: str | None = None) -> BlockHits:
    """Scan the windows starting at ``0 .. n_positions-1`` of ``codes`` with every row of ``plan``.

    Parameters
    ----------
    codes : ndarray, shape (B + H,), uint8
        Block row from the genome store (A=0 C=1 G=2 T=3, other=4); ``H >= plan.max_length - 1``.
    n_positions : int
        Number of window starts to test (the block core, clipped to the contig end).
    plan : ScanPlan
    device : {"cpu", "gpu", None}
    method : {"slices", "blas", None}
        CPU algorithm: the Slices Strategy (ℓ-mer tables, the default) or
        BLAMM's BLAS products.  Both give the same hits.

    Returns
    -------
    BlockHits
        Host arrays, sorted by (row, position); identical on every device.
    """
    dev = resolve_device(device)
    if plan.max_length and codes.size < n_positions + plan.max_length - 1:
        raise ValueError(f"block row of {codes.size} codes is too short for {n_positions} windows of "
                         f"length {plan.max_length}")
    if dev == "gpu":
        from workers.scan_gpu import scan_gpu  # noqa: PLC0415

        return scan_gpu(codes, n_positions, plan)
    method = method or "slices"
    if method == "slices":
        return _scan_cpu_slices(np.asarray(codes, dtype=np.uint8), n_positions, plan)
    if method != "blas":
        raise ValueError(f"unknown CPU scan method {method!r}")
    return _scan_cpu(np.asarray(codes, dtype=np.uint8), n_positions, plan)


def scan_blocks(codes_list: list, n_positions: list, plan: ScanPlan, device: str | None = None,
                method: str | None = None) -> list[BlockHits]:
    """:func:`scan_block` of several blocks in one call: what short blocks (promoters, scaffolds) need, since a
    call has a fixed cost (~2 ms on the CPU for 1,562 rows) that a 2 kb block cannot amortise.

    Each block row is cut to its ``n + L - 1`` codes (``L`` the longest motif), the cuts are laid end to end and
    scanned as one row; a hit belongs to the block whose window starts it covers, and the windows that start in
    a cut's last ``L - 1`` codes (they reach into the next cut) are dropped.  Every kept window reads exactly the
    codes it reads in its own block, so the hits are those of one ``scan_block`` per block (tests check it)."""
    if len(codes_list) != len(n_positions):
        raise ValueError("one n_positions per block row")
    if len(codes_list) <= 1:
        return [scan_block(c, n, plan, device=device, method=method) for c, n in zip(codes_list, n_positions)]
    tail = max(plan.max_length - 1, 0)
    cuts = []
    for c, n in zip(codes_list, n_positions):
        if c.size < n + tail:
            raise ValueError(f"block row of {c.size} codes is too short for {n} windows of length {plan.max_length}")
        cuts.append(c[: n + tail])
    offsets = np.zeros(len(cuts) + 1, dtype=np.int64)
    np.cumsum([c.size for c in cuts], out=offsets[1:])
    hits = scan_block(np.concatenate(cuts), int(offsets[-1] - tail), plan, device=device, method=method)
    k = np.searchsorted(offsets, hits.pos, side="right") - 1
    local = hits.pos - offsets[k]
    keep = np.flatnonzero(local < np.asarray(n_positions, dtype=np.int64)[k])
    order = keep[np.argsort(k[keep], kind="stable")]         # by block; (row, position) order kept inside
    bounds = np.zeros(len(cuts) + 1, dtype=np.int64)
    np.cumsum(np.bincount(k[keep], minlength=len(cuts)), out=bounds[1:])
    out = []
    for b in range(len(cuts)):
        sel = order[bounds[b]:bounds[b + 1]]
        out.append(BlockHits(local[sel], hits.row[sel], hits.score[sel],
                             None if hits.seg is None else hits.seg[sel]))
    return out
