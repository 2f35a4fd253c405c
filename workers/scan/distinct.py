"""Distinct (family, p-value) pairs of hits, counted, on the CPU (numba) or the GPU (CuPy): the q-values' sort.

:mod:`pipeline.scan.qvalues` reduces every hit's p-value to one sorted, counted pair per distinct (motif family,
p-value) before Benjamini-Hochberg.  It is a sort of every hit: 516 M p-values for a human genome at p = 1e-4,
68 thread-seconds of the 16 host threads of a GPU machine (docs/benchmarks.md, session 8), while its GPU sat idle;
on a GPU worker the sort goes to the device (CUB's radix sorts), on a CPU worker to one compiled call a file
(:mod:`workers.scan.distinct_numba`: no GIL).  Both give the same arrays.
"""
from __future__ import annotations

import numpy as np


def distinct_pairs(fam: np.ndarray, p: np.ndarray, count: np.ndarray | None = None, device: str = "cpu"):
    """The distinct (fam, p) pairs, sorted by family then p-value, and the summed counts of each.

    Parameters
    ----------
    fam : ndarray of int, shape (n,)
        Family (motif id) index of each item, >= 0.
    p : ndarray of float64, shape (n,)
        P-values, not NaN.
    count : ndarray of int64, shape (n,), optional
        How many hits each item stands for (merging earlier pairs); default one each.
    device : {"cpu", "gpu"}

    Returns
    -------
    fam, p, count : ndarray, shape (k,) each
        int64, float64, int64.
    """
    fam = np.asarray(fam, np.int64)
    p = np.ascontiguousarray(p, np.float64)
    if device == "gpu" and fam.size:
        return _distinct_gpu(fam, p, count)
    from workers.scan.distinct_numba import distinct_runs  # noqa: PLC0415

    if fam.size > 1 and not (fam[1:] >= fam[:-1]).all():
        o = np.argsort(fam, kind="stable")
        fam, p, count = fam[o], p[o], None if count is None else count[o]
    n = fam.size
    of, op, oc = np.empty(n, np.int64), np.empty(n, np.float64), np.empty(n, np.int64)
    k = distinct_runs(fam, p, np.zeros(0, np.int64) if count is None else np.ascontiguousarray(count, np.int64),
                      of, op, oc)
    return of[:k], op[:k], oc[:k]


def distinct_pairs_of(columns, device: str = "cpu"):
    """:func:`distinct_pairs` of the items of several ``(fam, p)`` arrays (an iterable: a task's block files).

    On the GPU they are sorted at once (one transfer, one pair of radix sorts); on the CPU each array is reduced
    as it comes (a block file's hits come grouped by motif: no family sort) and the sorted runs merged after,
    so that memory holds the pairs, not every p-value."""
    if device == "gpu":
        items = list(columns)
        if not items:
            return _empty()
        return distinct_pairs(np.concatenate([f for f, _ in items]), np.concatenate([p for _, p in items]),
                              device="gpu")
    return merge_distinct([distinct_pairs(f, p) for f, p in columns])


def merge_distinct(pieces: list):
    """One distinct, sorted list of several: each piece ``(fam, p, count)`` distinct and sorted by family then
    p-value (what :func:`distinct_pairs` returns), a pair in several pieces once with its counts summed.  Merged
    two by two on the host (numba, linear per round): the same arrays as :func:`distinct_pairs` of their
    concatenation with counts, without sorting it again.

    Parameters
    ----------
    pieces : list of (ndarray, ndarray, ndarray)
        int64 family, float64 p-value, int64 count, shape (k_i,) each.

    Returns
    -------
    fam, p, count : ndarray, shape (k,) each
    """
    from workers.scan.distinct_numba import merge_two  # noqa: PLC0415

    runs = [tuple(np.ascontiguousarray(a, t) for a, t in zip(x, (np.int64, np.float64, np.int64))) for x in pieces]
    if not runs:
        return _empty()
    while len(runs) > 1:
        merged = []
        for a, b in zip(runs[::2], runs[1::2]):
            n = a[0].size + b[0].size
            out = np.empty(n, np.int64), np.empty(n, np.float64), np.empty(n, np.int64)
            k = merge_two(*a, *b, *out)
            merged.append(tuple(x[:k] for x in out))
        runs = merged + ([runs[-1]] if len(runs) % 2 else [])
    return runs[0]


def score_runs(row, score, pvalue=None):
    """A block's distinct (row, score), sorted, with the number of hits of each: all that the q-values need of its
    hits, since a hit's p-value is a function of its row and score (a genome block at p = 1e-4: 2.8 M hits,
    ~0.6 M distinct).  On the device where the arrays are (CuPy's stable radix argsorts; NumPy's stable sort).

    Parameters
    ----------
    row : ndarray or cupy.ndarray of int32, shape (n,)
    score : ndarray or cupy.ndarray of float64, shape (n,)
    pvalue : ndarray or cupy.ndarray of float64, shape (n,), optional
        Each hit's p-value (a function of row and score too).

    Returns
    -------
    row, score, pvalue, count : arrays of the input's module, shape (k,) each
        int32, float64, float64 (None without ``pvalue``), int32.
    """
    gpu = type(row).__module__.startswith("cupy")
    if gpu:
        import cupy as xp  # noqa: PLC0415
    else:
        xp = np
    n = int(row.size)
    if n == 0:
        return row[:0], score[:0], None if pvalue is None else pvalue[:0], xp.zeros(0, np.int32)
    o = xp.argsort(score) if gpu else np.argsort(score, kind="stable")
    o = o[xp.argsort(row[o])] if gpu else o[np.argsort(row[o], kind="stable")]     # stable: scores ascend in a row
    r, s = row[o], score[o]
    new = xp.empty(n, dtype=bool)
    new[0] = True
    new[1:] = (r[1:] != r[:-1]) | (s[1:] != s[:-1])
    first = xp.flatnonzero(new)
    count = xp.diff(xp.concatenate([first, xp.array([n], first.dtype)])).astype(np.int32)
    return r[first], s[first], None if pvalue is None else pvalue[o[first]], count


def _empty():
    return np.zeros(0, np.int64), np.zeros(0), np.zeros(0, np.int64)


def _distinct_gpu(fam: np.ndarray, p: np.ndarray, count: np.ndarray | None):
    """:func:`distinct_pairs` on the current CUDA device: the arrays copied there, then
    :func:`distinct_pairs_on_device`."""
    import cupy as cp  # noqa: PLC0415

    f = cp.asarray(fam.astype(np.int32) if fam.max(initial=0) < 2**31 else fam)
    c = None if count is None else cp.asarray(np.ascontiguousarray(count, np.int64))
    return distinct_pairs_on_device(f, cp.asarray(p), c)


def distinct_pairs_on_device(f, q, count=None):
    """:func:`distinct_pairs` of arrays already on the current CUDA device, on a stream of its own (the worker's
    other threads keep theirs).  (fam, p) order from two stable radix argsorts: by p, then by family.

    Parameters
    ----------
    f : cupy.ndarray of int, shape (n,)
    q : cupy.ndarray of float64, shape (n,)
    count : cupy.ndarray of int64, shape (n,), optional

    Returns
    -------
    fam, p, count : ndarray (host), shape (k,) each
        int64, float64, int64.
    """
    import cupy as cp  # noqa: PLC0415

    n = int(f.size)
    if n == 0:
        return _empty()
    cp.cuda.get_current_stream().synchronize()          # the arrays were made on the caller's stream
    with cp.cuda.Stream(non_blocking=True) as stream:
        o = cp.argsort(q)
        o = o[cp.argsort(f[o])]                 # CUB's radix sort is stable: p stays ascending within a family
        f, q = f[o], q[o]
        new = cp.empty(n, dtype=bool)
        new[0] = True
        new[1:] = (f[1:] != f[:-1]) | (q[1:] != q[:-1])
        first = cp.flatnonzero(new)
        if count is None:
            c = cp.diff(cp.concatenate([first, cp.array([n], first.dtype)]))
        else:
            cs = cp.cumsum(count[o])
            tot = cs[cp.concatenate([first[1:], cp.array([n], first.dtype)]) - 1]
            c = cp.diff(cp.concatenate([cp.zeros(1, tot.dtype), tot]))
        out = (f[first].astype(np.int64).get(stream=stream), q[first].get(stream=stream),
               c.astype(np.int64).get(stream=stream))
        stream.synchronize()
    return out
