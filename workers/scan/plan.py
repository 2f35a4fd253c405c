"""The scan plan and the hits of one block: the types every scan module shares (CPU, GPU, dispatch).

A *row* is one (motif, strand) pair.  The plan holds each row's float64 matrix as scored and its threshold,
and groups the rows into tiles of similar length whose pattern matrices carry the threshold folded into
every column (``w - alpha/m``), so a window is a candidate when its tile score is non-negative.  Built once
on the client and sent once to each worker; the CPU and GPU scans build their own tables from it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Tile:
    """Rows of similar length scanned together: their pattern matrix, threshold folded in (:func:`folded`)."""
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
    pvalues: object = None          # optional workers.distribution.PvalueTable of the rows: a GPU scan then
                                    # also returns each hit's p-value (BlockHits.pvalue)
    count_scores: bool = False      # scan_block also returns each block's distinct (row, score), counted
                                    # (BlockHits.pairs): the q-values' kept pairs (workers.scan.kept_pairs)
    pair_families: np.ndarray | None = None   # (R,) int32 q-value family of each row: a GPU scan with p-values
                                    # also leaves each hit's (family, p-value) on the device (BlockHits.device_pairs)
    _slices: dict = field(default_factory=dict, repr=False)  # per-ℓ slice tables, stacked weights (built on first use)

    @property
    def n_rows(self) -> int:
        return len(self.pwms)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_slices"] = {}
        return state


def plan_tiles(lengths: np.ndarray, waste: float = 0.15, max_width: int = 512) -> list[np.ndarray]:
    """Group rows into tiles of similar length, longest first.

    Parameters
    ----------
    lengths : ndarray, shape (R,), int
        Motif length of every row.
    waste : float
        A tile takes rows down to ``(1 - waste)`` of its longest one (padding at most ``waste``).
    max_width : int
        Rows per tile at most.

    Returns
    -------
    list of ndarray, shape (c,), int32
        The rows of each tile, longest first.
    """
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
    """The scan plan of a set of rows.

    Parameters
    ----------
    pwms : list of ndarray, shape (m_r, 4), float64
        Matrix of every row as scored (the "-" row holds the reverse complement).
    thresholds : ndarray, shape (R,), float64
        Score threshold ``alpha`` of every row; rows with ``alpha = inf`` (unreachable) are left out.
    row_motif : ndarray, shape (R,), int
        Motif index of every row.
    row_strand : ndarray, shape (R,), int
        0 for "+", 1 for "-".

    Returns
    -------
    ScanPlan
        The rows kept, their length tiles with float32 pattern matrices ``(4L, c)`` (threshold folded in).
    """
    thresholds = np.asarray(thresholds, dtype=np.float64)
    keep = np.flatnonzero(np.isfinite(thresholds))
    pwms = [np.ascontiguousarray(pwms[i], dtype=np.float64) for i in keep]
    lengths = np.array([p.shape[0] for p in pwms], dtype=np.int32)
    plan = ScanPlan(pwms=pwms, thresholds=thresholds[keep], row_motif=np.asarray(row_motif)[keep].astype(np.int32),
                    row_strand=np.asarray(row_strand)[keep].astype(np.int8), lengths=lengths,
                    max_length=int(lengths.max()) if len(lengths) else 0)
    for rows in plan_tiles(lengths):
        L = int(lengths[rows].max())
        P = folded(plan, rows, L, len(rows))
        plan.tiles.append(Tile(rows=rows, length=L, P=P.reshape(4 * L, len(rows)).astype(np.float32)))
    return plan


def folded(plan: ScanPlan, rows: np.ndarray, length: int, width: int) -> np.ndarray:
    """The threshold folded into every column of some rows: the tiles' float32 pattern matrices and the GPU's
    fp16 fragments (with their rounding bounds) are made from it.

    Parameters
    ----------
    plan : ScanPlan
    rows : ndarray, shape (c,), int
        Plan rows, ``c <= width``.
    length, width : int
        Columns (``>=`` the longest row's length) and rows of the result.

    Returns
    -------
    ndarray, shape (length, 4, width), float64
        ``[j, x, k] = w_r[j, x] - alpha_r / m_r`` for ``r = rows[k]``; 0 past ``m_r`` and past the rows.
    """
    out = np.zeros((length, 4, width), dtype=np.float64)
    for k, r in enumerate(rows):
        m = plan.lengths[r]
        out[:m, :, k] = plan.pwms[r] - plan.thresholds[r] / m
    return out


@dataclass
class BlockHits:
    """Hits of one block, sorted by (row, position): each motif/strand row's hits together, in genome order
    (the order of the Parquet files: long runs of one motif, ascending coordinates inside, make them smaller
    and faster to encode than position order).  ``pos`` is relative to the block row start."""
    pos: np.ndarray      # (n,) int64
    row: np.ndarray      # (n,) int32 ScanPlan row
    score: np.ndarray    # (n,) float64, exact (column-order float64 sum)
    pvalue: np.ndarray | None = None   # (n,) float64 p-value (PvalueTable.lookup's bits), where the scan made it
    #: with ``ScanPlan.count_scores``: the distinct (row, score) of the hits, sorted, and how many hits share each:
    #: (row (k,) int32, score (k,) float64, pvalue (k,) float64 or None, count (k,) int32) (:func:`score_runs`)
    pairs: tuple | None = None
    #: with ``ScanPlan.pair_families`` on the GPU: (family (n,) int32, p-value (n,) float64) as CuPy arrays, complete
    #: (the scan's stream synchronised), for the kept pairs without a copy to the host and back
    device_pairs: tuple | None = None

    @classmethod
    def empty(cls) -> "BlockHits":
        return cls(np.empty(0, np.int64), np.empty(0, np.int32), np.empty(0, np.float64))

    def __len__(self) -> int:
        return len(self.pos)


def n_prefix(codes: np.ndarray) -> np.ndarray:
    """Prefix counts of code-4 positions, for O(1) "window holds an N" tests.

    Parameters
    ----------
    codes : ndarray, shape (n,), uint8

    Returns
    -------
    ndarray, shape (n + 1,), int32
        ``out[i]`` = codes > 3 among ``codes[:i]``.
    """
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


def stacked_weights(plan: ScanPlan) -> tuple:
    """All rows' matrices stacked (built once, cached on the plan): the float64 rescoring reads them.

    Parameters
    ----------
    plan : ScanPlan
        With at least one row.

    Returns
    -------
    weights : ndarray, shape (sum of m_r, 4), float64
        Row ``r`` at ``weights[starts[r]:starts[r] + lengths[r]]``.
    starts : ndarray, shape (R,), int64
    lengths : ndarray, shape (R,), int64
    """
    cached = plan._slices.get("weights")
    if cached is None:
        starts = np.zeros(plan.n_rows, dtype=np.int64)
        np.cumsum(plan.lengths[:-1], out=starts[1:])
        cached = plan._slices["weights"] = (np.concatenate(plan.pwms), starts, plan.lengths.astype(np.int64))
    return cached
