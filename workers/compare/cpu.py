"""COMPARE of one row pair at one shift on the CPU: the aligned union-length tables, then the pruned 2-D
lattice DP (numba, :func:`workers.compare.cpu_numba.joint_tail`)."""
from __future__ import annotations

import numpy as np

from workers.compare.rows import CompareRows


def aligned(rows_a: CompareRows, ra: int, rows_b: CompareRows, rb: int, shift: int):
    """Union-length tables of two rows at a relative shift.

    Parameters
    ----------
    rows_a, rows_b : CompareRows
    ra, rb : int
        Rows of A and B.
    shift : int
        Column of A under B's column 0 (negative: B starts first).

    Returns
    -------
    KA, KB : ndarray, shape (L, 4), int64
        Deficits of A and B on the union length ``L`` (0 on padding columns and where a letter cannot occur).
    PR : ndarray, shape (L, 4), float64
        Letter probabilities; 0 for a letter either matrix forbids.
    """
    ka, pa = rows_a.rows_kdef(ra), rows_a.rows_prob(ra)
    kb, pb = rows_b.rows_kdef(rb), rows_b.rows_prob(rb)
    ma, mb = ka.shape[0], kb.shape[0]
    start = min(0, shift)
    L = max(ma, shift + mb) - start
    KA = np.zeros((L, 4), np.int64)
    KB = np.zeros((L, 4), np.int64)
    bg = rows_a.background
    PR = np.tile(bg, (L, 1))
    ia = -start
    ib = shift - start
    KA[ia: ia + ma] = ka
    KB[ib: ib + mb] = kb
    # a letter forbidden in either matrix has probability 0 (the background's own zeros included)
    okA = np.ones((L, 4), bool)
    okA[ia: ia + ma] = pa > 0
    okB = np.ones((L, 4), bool)
    okB[ib: ib + mb] = pb > 0
    PR = np.where(okA & okB, PR, 0.0)
    KA = np.where(PR > 0, KA, 0)
    KB = np.where(PR > 0, KB, 0)
    return KA, KB, PR


def joint_tp_cpu(rows_a: CompareRows, ra: int, rows_b: CompareRows, rb: int, shift: int) -> np.ndarray:
    """The joint tail of one row pair at one shift (numba).

    Parameters
    ----------
    rows_a, rows_b : CompareRows
    ra, rb : int
    shift : int
        As :func:`aligned`.

    Returns
    -------
    ndarray, shape (3,), float64
        ``[TP_low, TP_est, TP_high]``: P(both scores above their thresholds), certified low and high ends and
        the estimate; zeros when either row is unreachable.
    """
    from workers.compare.cpu_numba import joint_tail  # noqa: PLC0415

    ca, cb = rows_a.cut[ra], rows_b.cut[rb]
    out = np.zeros(3)
    if ca[2] < 0 or cb[2] < 0:
        return out
    KA, KB, PR = aligned(rows_a, ra, rows_b, rb, shift)
    na, nb = int(ca[2]) + 1, int(cb[2]) + 1
    qa = (na - 1 - ca).astype(np.int64)       # grid coordinates: i = na-1-deficit
    qb = (nb - 1 - cb).astype(np.int64)
    qa = np.where(ca < 0, na, qa)
    qb = np.where(cb < 0, nb, qb)
    joint_tail(-KA, -KB, PR, na, nb, qa, qb, out)
    return out
