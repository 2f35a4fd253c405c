"""Nucleotide-histogram comparison (Breland et al., seed 004): what one task computes on one device.

For every test sequence T and every reference window W of length |T|, D = Σ_x |T[x] − W[x]| over the
four counts (A, C, G, T) and S = 1 − D/|T|; the pair is a match when S ≥ s.  Window counts are computed
once per test *length*, as the seed does: on the GPU from prefix sums (the seed's inclusive scans), on the
CPU by a sliding count (one packed add per base in and out: less memory traffic on one core).

What differs from the seed is how a window meets the tests of its length.  The seed compares every
window with every test (windows × tests operations).  Here both sides become points of a lattice:
a histogram of length L is the cell (a, c, g) (t = L − a − c − g), and S ≥ s is an L1 ball of radius
``dmax`` around the test.  Windows are *counted* (count mode) or *counting-sorted* (hit mode) into the
cells of a box that covers every test's ball; then each test reads its ball row by row: for a fixed
(Δa, Δc) the admissible Δg form one interval, which is one contiguous run of cells, so the number of
windows in it is a difference of two prefix offsets.  The work is windows × lengths + tests × rows
(+ one write per hit), instead of windows × tests.  The answer is exactly the seed's: the same windows,
the same D, S computed as ``1.0 - D / L`` in float64 and compared with ``>= s`` (``dmax`` is derived
with that very expression, so there is no rounding disagreement at the boundary).

Windows holding any code 4 (N, IUPAC, padding) are skipped.  With ``both_strands`` each test also gives
a "-" row with the reverse-complement histogram (A↔T, C↔G counts), reported on the forward coordinates.

This module holds the plan and the result types that every composition module shares; the CPU kernels
are numba (:mod:`workers.composition.cpu`, :mod:`workers.composition.cpu_numba`), the GPU ones CUDA through
CuPy (:mod:`workers.composition.gpu`); both return the same arrays, sorted the same way, and
:func:`workers.composition.compare_block` chooses between them.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class CompositionPlan:
    """The tests as lattice points, grouped by length; built once on the client, sent once per worker.

    A *row* is one (test, strand) pair; rows are ordered by length, rows of length index ``li`` are
    ``row_start[li]:row_start[li + 1]``.  ``box_lo[li]``/``box_dim[li]`` is the (a, c, g) box that holds
    every ball of that length; ``box_off`` places the boxes one after another (the GPU keeps them all).
    """
    lengths: np.ndarray        # (nL,) int32, ascending
    dmax: np.ndarray           # (nL,) int32: largest D with 1 - D/L >= s (-1: nothing can match)
    box_lo: np.ndarray         # (nL, 3) int32
    box_dim: np.ndarray        # (nL, 3) int32
    box_off: np.ndarray        # (nL + 1,) int64
    row_start: np.ndarray      # (nL + 1,) int64
    row_hist: np.ndarray       # (R, 3) int32: (a, c, g) of the test (or of its reverse complement)
    row_test: np.ndarray       # (R,) int32
    row_strand: np.ndarray     # (R,) int8: 0 "+", 1 "-"
    row_length: np.ndarray     # (R,) int32
    n_tests: int
    min_similarity: float
    both_strands: bool

    @property
    def n_rows(self) -> int:
        return int(self.row_test.size)

    @property
    def max_length(self) -> int:
        return int(self.lengths.max()) if self.lengths.size else 0

    @property
    def cells(self) -> int:
        return int(self.box_off[-1])


def max_distance(length: int, min_similarity: float) -> int:
    """The largest L1 distance that still matches: the exact boundary of ``S >= s``.

    Parameters
    ----------
    length : int
        ``L``, the test's length.
    min_similarity : float
        ``s``.

    Returns
    -------
    int
        The largest ``D`` in ``[0, 2L]`` with ``1.0 - D / L >= s`` in float64 (the naive reference's
        expression), or -1 when none.
    """
    d = np.arange(2 * length + 1, dtype=np.int64)
    ok = np.flatnonzero(1.0 - d / np.float64(length) >= min_similarity)
    return int(ok[-1]) if ok.size else -1


def histograms(codes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """A, C, G, T counts of each test.

    Parameters
    ----------
    codes : ndarray, shape (V,), uint8
        All tests concatenated (A=0 C=1 G=2 T=3; a code 4 is not counted).
    offsets : ndarray, shape (n + 1,), int64
        Test ``i`` is ``codes[offsets[i]:offsets[i+1]]``.

    Returns
    -------
    ndarray, shape (n, 4), int32
    """
    n = offsets.size - 1
    idx = np.repeat(np.arange(n), np.diff(offsets))
    h = np.zeros((n, 5), dtype=np.int64)
    np.add.at(h, (idx, codes.astype(np.int64)), 1)
    return h[:, :4].astype(np.int32)


def make_plan(hists: np.ndarray, lengths: np.ndarray, min_similarity: float,
              both_strands: bool = False) -> CompositionPlan:
    """The plan of a set of tests.

    Parameters
    ----------
    hists : ndarray, shape (n, 4), int
        A, C, G, T counts of each test (:func:`histograms`); tests hold A, C, G, T only.
    lengths : ndarray, shape (n,), int
    min_similarity : float
        ``s``: a window matches when ``1 - D/L >= s``.
    both_strands : bool
        Also a "-" row per test (its reverse complement's counts).

    Returns
    -------
    CompositionPlan
        Rows ordered by (length, test, strand), each length's ``dmax`` and (a, c, g) box.
    """
    hists = np.asarray(hists, dtype=np.int32).reshape(-1, 4)
    lengths = np.asarray(lengths, dtype=np.int32)
    if hists.shape[0] != lengths.size or np.any(hists.sum(1) != lengths):
        raise ValueError("test histograms must count every position (A, C, G, T only)")
    n = lengths.size
    tests = np.arange(n, dtype=np.int32)
    if both_strands:
        h = np.concatenate([hists, hists[:, ::-1]])           # reverse complement: (t, g, c, a)
        t = np.concatenate([tests, tests])
        st = np.concatenate([np.zeros(n, np.int8), np.ones(n, np.int8)])
    else:
        h, t, st = hists, tests, np.zeros(n, np.int8)
    ln = lengths[t]
    order = np.lexsort((st, t, ln))
    h, t, st, ln = h[order], t[order], st[order], ln[order]
    uniq = np.unique(ln)
    row_start = np.searchsorted(ln, np.append(uniq, np.iinfo(np.int32).max)).astype(np.int64)
    nl = uniq.size
    dmax = np.array([max_distance(int(L), min_similarity) for L in uniq], dtype=np.int32)
    box_lo = np.zeros((nl, 3), np.int32)
    box_dim = np.zeros((nl, 3), np.int32)
    for li, L in enumerate(uniq):
        if dmax[li] < 0:
            continue
        k = int(dmax[li]) // 2                  # D >= 2 max|Δx|: a ball spans ±k on each axis
        hh = h[row_start[li]:row_start[li + 1], :3]
        lo = np.maximum(hh.min(0) - k, 0)
        hi = np.minimum(hh.max(0) + k, int(L))
        box_lo[li], box_dim[li] = lo, hi - lo + 1
    box_off = np.zeros(nl + 1, np.int64)
    box_off[1:] = np.cumsum(np.prod(box_dim.astype(np.int64), axis=1))
    return CompositionPlan(lengths=uniq.astype(np.int32), dmax=dmax, box_lo=box_lo, box_dim=box_dim,
                           box_off=box_off, row_start=row_start, row_hist=np.ascontiguousarray(h[:, :3]),
                           row_test=t.astype(np.int32), row_strand=st, row_length=ln.astype(np.int32),
                           n_tests=int(n), min_similarity=float(min_similarity), both_strands=bool(both_strands))


@dataclass
class Segments:
    """Where windows start in a task's sequence: ``[start[i], start[i] + n[i])`` (block cores).

    The sequence is the blocks' rows (core + halo, cut at the contig end) one after another, each
    followed by a code 4, so no window runs from one block into the next.
    """
    start: np.ndarray          # (k,) int64 offsets in the sequence
    n: np.ndarray              # (k,) int64 window starts (core length)

    def start_mask(self, size: int) -> np.ndarray:
        m = np.zeros(size, np.uint8)
        for s, k in zip(self.start, self.n):
            m[s:s + k] = 1
        return m


@dataclass
class CompositionHits:
    """Matches of one task, sorted by (position, row); ``pos`` is the offset in the task's sequence."""
    row: np.ndarray            # (h,) int32
    pos: np.ndarray            # (h,) int64
    distance: np.ndarray       # (h,) int32: D

    def __len__(self) -> int:
        return int(self.row.size)

    @classmethod
    def empty(cls) -> "CompositionHits":
        return cls(np.zeros(0, np.int32), np.zeros(0, np.int64), np.zeros(0, np.int32))


def similarity(distance: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The seed's similarity (its equation 5).

    Parameters
    ----------
    distance : array_like of int, any shape
        ``D``.
    length : array_like of int, broadcast with ``distance``
        ``L``.

    Returns
    -------
    ndarray, float64
        ``1 - D/L``.
    """
    return 1.0 - np.asarray(distance, np.float64) / np.asarray(length, np.float64)
