"""The per-row columns of a block's hits table in one pass (numba, no GIL).

:func:`pipeline.scan.task.hits_table` needs, per hit, its window end and the dictionary indices of its strand,
motif id and motif name, each a lookup by the hit's plan row.  As NumPy gathers that is four passes over the rows,
four fresh arrays and a temporary for the end; at p = 1e-4 a GPU worker builds these tables for half a billion hits
and the table step was a fifth of its host time (docs/benchmarks.md, issue 18).  One compiled pass reads each row
once.  Compiled on first use, cached on disk (``cache=True``), like :mod:`workers.scan.counts_numba`.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def row_columns(rows, start, lengths, row_strand, row_motif, row_name):  # pragma: no cover - compiled
    """``(start + lengths[rows], row_strand[rows], row_motif[rows], row_name[rows])``.

    Parameters
    ----------
    rows : ndarray, shape (n,), int
        Plan row of each hit.
    start : ndarray, shape (n,), int64
        Window starts.
    lengths : ndarray, shape (R,), int64
    row_strand, row_motif, row_name : ndarray, shape (R,), int32

    Returns
    -------
    end : ndarray, shape (n,), int64
    strand, motif, name : ndarray, shape (n,), int32 each
    """
    n = rows.size
    end = np.empty(n, np.int64)
    strand = np.empty(n, np.int32)
    motif = np.empty(n, np.int32)
    name = np.empty(n, np.int32)
    for i in range(n):
        r = rows[i]
        end[i] = start[i] + lengths[r]
        strand[i] = row_strand[r]
        motif[i] = row_motif[r]
        name[i] = row_name[r]
    return end, strand, motif, name
