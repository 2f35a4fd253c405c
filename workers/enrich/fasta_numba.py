"""FASTA text of records held as codes, laid out in one compiled pass (numba, no GIL).

``motifgrid enrich`` writes its shuffled controls as ``DIR/control.fa``: for 10⁵ peaks × 1 shuffle that is 37.6 Mb in
~700,000 lines, which Python's per-line slices took 0.5-0.6 s to join (docs/benchmarks.md, issue 19).  Compiled on
first use, cached on disk (``cache=True``), like :mod:`workers.enrich.shuffle_numba`.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def fasta_layout(heads, head_offsets, text, offsets, width):  # pragma: no cover - compiled
    """FASTA bytes: each record's header line, then its letters ``width`` a line.

    Parameters
    ----------
    heads : ndarray, shape (H,), uint8
        Every record's header line (``>name`` and a line end), one after the other.
    head_offsets : ndarray, shape (n + 1,), int64
        Where each record's header starts in ``heads``.
    text : ndarray, shape (L,), uint8
        Every record's letters (ASCII), one after the other.
    offsets : ndarray, shape (n + 1,), int64
        Where each record's letters start in ``text``.
    width : int
        Letters per line.

    Returns
    -------
    ndarray, shape (H + L + lines,), uint8
    """
    n = offsets.size - 1
    size = heads.size + text.size
    for i in range(n):
        size += (offsets[i + 1] - offsets[i] + width - 1) // width
    out = np.empty(size, np.uint8)
    o = 0
    for i in range(n):
        for j in range(head_offsets[i], head_offsets[i + 1]):
            out[o] = heads[j]
            o += 1
        a, b = offsets[i], offsets[i + 1]
        while a < b:
            e = min(a + width, b)
            out[o:o + e - a] = text[a:e]
            o += e - a
            out[o] = 10
            o += 1
            a = e
    return out
