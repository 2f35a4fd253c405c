"""The best window of every motif row on every allele context.

An allele's context is its sequence with ``flank`` bases of the genome on each side (N past a record's end); its edit
is ``[e0, e1)`` of the context (empty for the reference side of an insertion or the alternative side of a deletion).
A window of length ``m`` starting at ``s`` covers the edit when ``e0 - m < s < e1``: it overlaps the edited bases,
or, for an empty edit, holds both bases beside the junction.  Windows with an N are not scored (as in the scan).
Scores are float64 sums in column order, the scan's rescoring, so a window scores the same here as in a scan."""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, parallel=True)
def _best(codes, starts, e0, e1, pwms, lengths, best, where):  # pragma: no cover - compiled
    for a in numba.prange(starts.size - 1):
        lo = starts[a]
        size = starts[a + 1] - lo
        for r in range(lengths.size):
            m = lengths[r]
            top = -np.inf
            at = -1
            for s in range(max(e0[a] - m + 1, 0), min(e1[a] - 1, size - m) + 1):
                acc = 0.0
                for j in range(m):
                    c = codes[lo + s + j]
                    if c > 3:
                        acc = -np.inf
                        break
                    acc += pwms[r, j, c]
                if acc > top:
                    top = acc
                    at = s
            best[a, r] = top
            where[a, r] = at


def best_windows(codes: np.ndarray, starts: np.ndarray, e0: np.ndarray, e1: np.ndarray, pwms: list):
    """``(score, start)``, each ``(n_contexts, n_rows)``: the best covering window of each row on each context
    (``-inf`` and ``-1`` where none is scored: an edit beside a record's end, or Ns).

    Parameters
    ----------
    codes : uint8 array, the contexts end to end (0-3 ACGT, 4 N)
    starts : int64 array, ``(n + 1,)``: context ``a`` is ``codes[starts[a]:starts[a + 1]]``
    e0, e1 : int64 arrays, ``(n,)``: each context's edit
    pwms : the rows' matrices, ``(m_r, 4)`` float64 each (a motif's ``-`` strand a row of its own)
    """
    n = starts.size - 1
    lengths = np.array([w.shape[0] for w in pwms], dtype=np.int64)
    stack = np.zeros((len(pwms), int(lengths.max(initial=1)), 4), np.float64)
    for r, w in enumerate(pwms):
        stack[r, :w.shape[0]] = w
    best = np.empty((n, len(pwms)), np.float64)
    where = np.empty((n, len(pwms)), np.int64)
    _best(np.ascontiguousarray(codes, np.uint8), np.ascontiguousarray(starts, np.int64),
          np.ascontiguousarray(e0, np.int64), np.ascontiguousarray(e1, np.int64), stack, lengths, best, where)
    return best, where
