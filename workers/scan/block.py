"""Scanning block rows on the device asked for: the one place that chooses between the CPU and GPU scans."""
from __future__ import annotations

import numpy as np

from workers.backend import resolve_device
from workers.scan.cpu import scan_cpu
from workers.scan.distinct import score_runs
from workers.scan.gpu import scan_gpu
from workers.scan.plan import BlockHits, ScanPlan


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
        return scan_gpu(codes, n_positions, plan)            # (its pairs counted on the device)
    hits = scan_cpu(codes, n_positions, plan, method)
    if plan.count_scores:
        hits.pairs = score_runs(hits.row, hits.score, hits.pvalue)
    return hits


def scan_blocks(codes_list: list, n_positions: list, plan: ScanPlan, device: str | None = None,
                method: str | None = None) -> list[BlockHits]:
    """:func:`scan_block` of several blocks in one call: what short blocks (promoters, scaffolds) need, since a
    call has a fixed cost, whatever the block's size, that a 2 kb block cannot amortise (docs/benchmarks.md).

    Each block row is cut to its ``n + L - 1`` codes (``L`` the longest motif), the cuts are laid end to end and
    scanned as one row; a hit belongs to the block whose window starts it covers, and the windows that start in
    a cut's last ``L - 1`` codes (they reach into the next cut) are dropped.  Every kept window reads exactly the
    codes it reads in its own block, so the hits are those of one ``scan_block`` per block (tests check it).

    Parameters
    ----------
    codes_list : list of ndarray, shape (>= n_i + plan.max_length - 1,), uint8
        The block rows.
    n_positions : list of int
        Window starts of each block.
    plan : ScanPlan
    device : {"cpu", "gpu", None}
    method : {"slices", "blas", None}
        As :func:`scan_block`.

    Returns
    -------
    list of BlockHits
        One per block, positions relative to its own row, sorted by (row, position).
    """
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
                             None if hits.pvalue is None else hits.pvalue[sel]))
    return out
