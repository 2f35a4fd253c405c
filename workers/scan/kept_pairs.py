"""The hits' (family, p-value) pairs kept in the worker that scanned them, for the q-value reduction of the run.

:mod:`pipeline.scan.qvalues` needs every hit's (motif family, p-value) at the end of a run.  Read back from the hits
files, that is a second pass over them: on one GPU, for the 516 M hits of a human genome at p = 1e-4, 20
thread-seconds of Parquet reading and 52 of per-file sorts (docs/benchmarks.md, issue 18).  Instead each scan
task leaves its block files' pairs in its worker's memory (12 bytes a hit: 6.2 GB for that genome), and the
reduction's collect task on that worker sorts them all at once (:func:`collect`; on a GPU worker they are uploaded
together and sorted there, one pair of radix sorts).

On a GPU worker the pairs the scan made on the device (``BlockHits.device_pairs``) stay there, while a quarter of
the device's memory stays free (else they are copied to the host as any other): no host copy in the scan tasks
(3.5-4 thread-s of a 3.1 Gb scan at 1e-4) and no upload of 1.5 GB a worker when the reduction starts.

Bounded: a worker keeps at most ``budget`` bytes of pairs per run (a fraction of its memory limit);
past it, it drops what it kept and the reduction reads the files as before.  Keyed by run and block file: a task
run again replaces its arrays, and :func:`collect` answers only when it holds exactly the files it is asked for
(else None, and the files are read).  :func:`drop` frees a run's pairs (the end of every run, failed or not).
"""
from __future__ import annotations

import threading

import numpy as np

_ITEM_BYTES = 12                 # int32 family + float64 p-value (+ int64 count where counted)
_lock = threading.Lock()
_runs: dict = {}                 # run key -> _Kept


class _Kept:
    def __init__(self, budget: int):
        self.budget = budget
        self.arrays: dict = {}       # block file -> (family, p-value), host arrays
        self.nbytes = 0
        self.overflow = False


def keep(run: str, rel: str, family: np.ndarray, pvalue: np.ndarray, budget: int, count: np.ndarray | None = None) -> bool:
    """Keep block file ``rel``'s pairs for run ``run``; False when the run's pairs no longer fit ``budget`` bytes
    (then nothing of the run is kept).

    Parameters
    ----------
    run, rel : str
    family : ndarray or cupy.ndarray of int, shape (n,)
        Family (motif id) index of each hit.
    pvalue : ndarray or cupy.ndarray of float64, shape (n,)
        (CuPy arrays: kept on the device while room is left there, as they are: not views of a larger buffer)
    budget : int
        Bytes of pairs the worker may hold for the run.
    count : ndarray of int, shape (n,), optional
        Hits each pair stands for (a block's distinct pairs, ``workers.scan.BlockHits.pairs``); default one each.
    """
    need = family.size * (_ITEM_BYTES + (0 if count is None else 8))
    with _lock:
        k = _runs.setdefault(run, _Kept(budget))
        if k.overflow:
            return False
        old = k.arrays.pop(rel, None)
        k.nbytes -= 0 if old is None else old[3]
        if k.nbytes + need > k.budget:
            k.overflow, k.arrays, k.nbytes = True, {}, 0
            return False
        k.nbytes += need                                  # reserved while the arrays are copied
    # host copies on any worker: copied to a GPU block by block from pageable memory, 16 threads' copies queued on
    # the driver's staging buffers (+27 thread-s in the scan tasks of a genome at 1e-4 on one H200); the
    # collect uploads them at once
    if type(family).__module__.startswith("cupy") and not _device_room(need):
        family, pvalue = family.get(), pvalue.get()
    if type(family).__module__.startswith("cupy"):
        arrays = (family.astype(np.int32, copy=False), pvalue, None, need)
    else:
        arrays = (np.ascontiguousarray(family, np.int32), np.array(pvalue, np.float64),   # (not a view of the table)
                  None if count is None else np.array(count, np.int64), need)
    with _lock:
        if k.overflow or _runs.get(run) is not k:
            return False
        k.arrays[rel] = arrays
    return True


def collect(run: str, files: list, device: str):
    """The distinct (family, p-value) pairs, counted, of block files ``files`` of run ``run`` (sorted by family, then
    p-value), and the run's pairs freed; None when this worker does not hold exactly those files' pairs.

    Returns
    -------
    (family, pvalue, count) : ndarray, shape (k,) each (int64, float64, int64), or None
    """
    with _lock:
        k = _runs.pop(run, None)
    if k is None or k.overflow or set(k.arrays) != set(files):
        return None
    from workers.scan.distinct import distinct_pairs_of, distinct_pairs_on_device  # noqa: PLC0415

    arrays = [k.arrays.pop(rel)[:3] for rel in files]
    counted = any(c is not None for _, _, c in arrays)
    if device != "gpu":
        if not counted:
            return distinct_pairs_of([(f, q) for f, q, _ in arrays])
        from workers.scan.distinct import distinct_pairs  # noqa: PLC0415

        return distinct_pairs(*(np.concatenate(x) for x in zip(*_with_counts(arrays))))
    import cupy as cp  # noqa: PLC0415

    n = sum(a[0].size for a in arrays)
    if not n:
        return distinct_pairs_of([])
    fam, p = cp.empty(n, np.int32), cp.empty(n, np.float64)
    cnt = cp.empty(n, np.int64) if counted else None
    at = 0
    for f, q, c in _with_counts(arrays) if counted else arrays:   # into the device arrays (no host concatenation)
        if isinstance(f, cp.ndarray):                 # kept there by the scan (complete: its stream was synchronised)
            fam[at:at + f.size] = f
            p[at:at + f.size] = q
        else:
            fam[at:at + f.size].set(f)
            p[at:at + f.size].set(q)
        if counted:
            cnt[at:at + f.size].set(c)
        at += f.size
    del arrays
    return distinct_pairs_on_device(fam, p, cnt)


def _device_room(nbytes: int) -> bool:
    """Whether ``nbytes`` more on the current device leave a quarter of its memory free."""
    import cupy as cp  # noqa: PLC0415

    free, total = cp.cuda.Device().mem_info
    return free - nbytes > total // 4


def _with_counts(arrays: list) -> list:
    """``(family, p-value, count)`` of each kept array, a count of one where it had none."""
    return [(f, q, np.ones(f.size, np.int64) if c is None else c) for f, q, c in arrays]


def drop(run: str) -> None:
    """Free run ``run``'s pairs on this worker (nothing when it has none)."""
    with _lock:
        _runs.pop(run, None)


def held(run: str) -> tuple[int, bool]:
    """(block files held, overflowed) for run ``run`` on this worker."""
    with _lock:
        k = _runs.get(run)
        return (0, False) if k is None else (len(k.arrays), k.overflow)
