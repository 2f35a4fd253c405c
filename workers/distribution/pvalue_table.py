"""Score → p-value lookups for many motif rows at once (numba, no GIL).

The tail tables of :func:`workers.distribution.pvalue_to_score` (log-linear segments per row) are
flattened once per scan into :class:`PvalueTable`; a hit's p-value is then one binary search in its
row's segments and one exponential, as :func:`workers.distribution.score_to_pvalue` computes it.  A GPU scan
does both on the device (kernel ``pvalue_of`` of ``workers/scan/scan_mma.cu``: the same comparisons, and the same
exponential, :func:`exp_det`), so the host of a GPU worker pays nothing per hit for p-values (10-11 of a 3.1 Gb
scan's ~135 host thread-seconds at p = 1e-4 on one H200) and a GPU run and a CPU run write bit-identical p-values.
"""
from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np


@dataclass
class PvalueTable:
    """The tail tables of every scan row, flattened: row ``r``'s log-linear segments are
    ``bounds[r, 0]:bounds[r, 1]`` of ``x0``, ``a``, ``b``; built once per scan, looked up per hit.  Rows computed
    from one table (a motif's two strands under a strand-symmetric background) share its segments: the table is
    half the size, and so is the scan context broadcast to every worker before the first task (879 JASPAR
    matrices at 1e-4: 38.6 MB of segments before)."""
    x0: np.ndarray          # (S,) float64 segment lower edges, distinct tables concatenated
    a: np.ndarray           # (S,) float64
    b: np.ndarray           # (S,) float64
    bounds: np.ndarray      # (R, 2) int64: row r's segments are bounds[r, 0]:bounds[r, 1]
    top: np.ndarray         # (R,) float64 table_top
    top_zero: np.ndarray    # (R,) uint8
    alpha: np.ndarray       # (R,) float64 the row's score threshold ...
    cap: np.ndarray         # (R,) float64 ... and its certified p-value (ScoreThreshold.pvalue, <= the one asked)

    @classmethod
    def from_thresholds(cls, tables) -> "PvalueTable":
        """The table of some rows.

        Parameters
        ----------
        tables : sequence of ScoreThreshold
            One per row, with its tail table (``pvalue_to_score(..., table=True)``); rows given the same object
            share its segments.

        Returns
        -------
        PvalueTable
        """
        index: dict = {}
        distinct = []
        for t in tables:
            if id(t) not in index:
                index[id(t)] = len(distinct)
                distinct.append(t)
        sizes = np.array([t.seg_x0.size for t in distinct], dtype=np.int64)
        starts = np.zeros(len(distinct) + 1, dtype=np.int64)
        np.cumsum(sizes, out=starts[1:])
        which = np.array([index[id(t)] for t in tables], dtype=np.int64)
        bounds = np.ascontiguousarray(np.column_stack((starts[which], starts[which + 1]))) if len(tables) \
            else np.zeros((0, 2), np.int64)

        def cat(name):      # one copy of each table (no second one by astype: 0.13 s of a 300-peak scan)
            if not distinct:
                return np.zeros(0)
            return np.concatenate([getattr(t, name) for t in distinct]).astype(np.float64, copy=False)
        return cls(x0=cat("seg_x0"), a=cat("seg_a"), b=cat("seg_b"), bounds=bounds,
                   top=np.array([t.table_top for t in tables], dtype=np.float64),
                   top_zero=np.array([t.top_zero for t in tables], dtype=np.uint8),
                   alpha=np.array([t.threshold for t in tables], dtype=np.float64),
                   cap=np.array([t.pvalue for t in tables], dtype=np.float64))

    def lookup(self, rows, scores, seg=None) -> np.ndarray:
        """P-values of hit scores, as :func:`workers.distribution.score_to_pvalue` computes them.

        Parameters
        ----------
        rows : array_like, shape (n,), int
            Row of each score.
        scores : array_like, shape (n,), float64
        seg : array_like, shape (n,), int32, optional
            Each score's segment, when the GPU has already searched for it (:func:`_search` semantics).

        Returns
        -------
        ndarray, shape (n,), float64
            NaN below a row's table.
        """
        rows = np.ascontiguousarray(rows, dtype=np.int32)
        scores = np.ascontiguousarray(scores, dtype=np.float64)
        if seg is None:
            seg = np.empty(scores.size, dtype=np.int32)
            _search(self.x0, self.bounds, rows, scores, seg)
        out = np.empty(scores.size, dtype=np.float64)
        _evaluate(self.x0, self.a, self.b, self.bounds, self.top, self.top_zero, self.alpha, self.cap, rows, scores,
                  np.ascontiguousarray(seg, dtype=np.int32), out)
        return out


@numba.njit(cache=True, nogil=True)
def _search(x0, bounds, rows, scores, seg):  # pragma: no cover - compiled
    """Each score's segment in its row: the last ``j`` in ``[lo, hi)`` with ``x0[j] < s`` (``lo - 1``
    when none), i.e. a binary search for the first ``x0 >= s`` ("left"), then the segment before it.
    The GPU kernel ``pvalue_of`` of ``workers/scan/scan_mma.cu`` does the same search."""
    for i in range(scores.size):
        r = rows[i]
        s = scores[i]
        L, H = bounds[r, 0], bounds[r, 1]
        while L < H:
            mid = (L + H) >> 1
            if x0[mid] < s:
                L = mid + 1
            else:
                H = mid
        seg[i] = L - 1


#: exp_det's constants, shared with its CUDA twin (``workers/scan/scan_mma.cu``; the tables go to the device as they
#: are, so both sides read the same bits).  log(2)/64 split so that ``k * _LN2_64_HI`` is exact for |k| < 2**17.
_INV_LN2_64 = 92.33248261689366                    # 64 / log(2)
_LN2_64_HI = 0.010830424696223417                  # log(2)/64 to 36 bits
_LN2_64_LO = 2.572804622327669e-14                 # log(2)/64 - _LN2_64_HI
EXP_TABLE = np.exp2(np.arange(64) / 64.0)          # 2**(i/64), i = 0..63
POW2_TABLE = np.ldexp(1.0, np.arange(-1022, 1024))  # 2**j, j = -1022..1023, exact


@numba.njit(cache=True, nogil=True, inline="always")
def exp_det(t):  # pragma: no cover - compiled
    """``exp(t)`` within 1.5 ulp (0 below -745.2) from additions, multiplications, ``floor`` and two tables, in an
    order that the CUDA twin ``exp_det`` of ``workers/scan/scan_mma.cu`` repeats operation for operation (no fused
    multiply-adds on either side): CPU and GPU p-values are then the same bits, which libm's and CUDA's ``exp``
    are not (they differ in the last bit for some hits).  ``t = (64 q + i) log(2)/64 + r``, ``|r| <= log(2)/128``:
    ``exp(t) = 2**q 2**(i/64) exp(r)``, ``exp(r) - 1`` to degree 5 (truncation < 0.2 ulp); ``2**q`` applied as
    two normal powers of two, so that a subnormal result is rounded once."""
    if not t > -746.0:           # (NaN too, as CUDA's fmax(NaN, -746) gives -746)
        t = -746.0
    if t > 709.75:
        t = 709.75
    k = np.floor(t * _INV_LN2_64 + 0.5)
    r = (t - k * _LN2_64_HI) - k * _LN2_64_LO
    e = r * (1.0 + r * (0.5 + r * (0.16666666666666666 + r * (0.041666666666666664 + r * 0.008333333333333333))))
    ki = np.int64(k)
    f = EXP_TABLE[ki & 63]
    v = f + f * e
    q = ki >> 6
    q1 = q >> 1
    return (v * POW2_TABLE[q1 + 1022]) * POW2_TABLE[q - q1 + 1022]


@numba.njit(cache=True, nogil=True)
def exp_array(t, out):  # pragma: no cover - compiled
    """:func:`exp_det` of every element of ``t`` (1-D float64) into ``out``."""
    for i in range(t.size):
        out[i] = exp_det(t[i])


@numba.njit(cache=True, nogil=True)
def _evaluate(x0, a, b, bounds, top, top_zero, alpha, cap, rows, scores, seg, out):  # pragma: no cover - compiled
    """P-value of each score in its segment: one :func:`exp_det` (NaN below the row's table).  A score at or above
    the row's threshold ``alpha`` gets at most ``cap``, the certified p-value of ``alpha`` itself: its exact p-value is
    no larger, so the value stays an upper bound, and no hit is reported with a p-value above the one asked for
    (the segments' interpolation put 837 of 16.7 M hits of a 100 Mb scan at 1e-4 up to 7e-4 relatively above it)."""
    for i in range(scores.size):
        r = rows[i]
        j = seg[i]
        s = scores[i]
        if j < bounds[r, 0]:
            out[i] = np.nan
            continue
        sc = s if s < top[r] else top[r]
        v = exp_det(a[j] + b[j] * (sc - x0[j]))
        if v > 1.0:
            v = 1.0
        if s >= alpha[r] and v > cap[r]:
            v = cap[r]
        if top_zero[r] and s > top[r]:
            v = 0.0
        out[i] = v
