"""The CPU composition comparison of one task: per test length, one numba pass (:mod:`workers.composition.cpu_numba`)."""
from __future__ import annotations

import numpy as np

from workers.composition.plan import CompositionHits, CompositionPlan, Segments


def _sorted_hits(row, pos, dist, n_rows) -> CompositionHits:
    key = pos.astype(np.int64) * max(n_rows, 1) + row
    o = np.argsort(key, kind="stable")
    return CompositionHits(row[o].astype(np.int32), pos[o].astype(np.int64), dist[o].astype(np.int32))


def compare_cpu(codes: np.ndarray, segments: Segments, plan: CompositionPlan, hits: bool = True):
    """The windows of one task against every test row, one numba pass per test length.

    Parameters
    ----------
    codes : ndarray, shape (V,), uint8
        The task's sequence (A=0 C=1 G=2 T=3, else 4).
    segments : Segments
        Window starts that belong to the task.
    plan : CompositionPlan
    hits : bool
        False: count only.

    Returns
    -------
    counts : ndarray, shape (R,), int64
        Matching windows per plan row.
    found : CompositionHits or None
        The matches, sorted by (position, row) (``hits=True``).
    """
    from workers.composition.cpu_numba import length_pass  # noqa: PLC0415

    counts = np.zeros(plan.n_rows, np.int64)
    rows, poss, dists = [], [], []
    for li, L in enumerate(plan.lengths):
        if plan.dmax[li] < 0:
            continue
        r0, r1 = int(plan.row_start[li]), int(plan.row_start[li + 1])
        c, hr, hp, hd = length_pass(codes, segments.start, segments.n, int(L), plan.box_lo[li], plan.box_dim[li],
                                    int(plan.dmax[li]), plan.row_hist[r0:r1], hits)
        counts[r0:r1] = c
        if hits and hr.size:
            rows.append(hr + r0)
            poss.append(hp)
            dists.append(hd)
    if not hits:
        return counts, None
    if rows:
        found = _sorted_hits(np.concatenate(rows), np.concatenate(poss), np.concatenate(dists), plan.n_rows)
    else:
        found = CompositionHits.empty()
    return counts, found
