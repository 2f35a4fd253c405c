"""Score thresholds of many PWMs at one or several p-values, fanned out on Dask.

Each matrix is independent (``workers.distribution.pvalue_to_score``), so the work is a map over
matrices.  To keep the task graph small the matrices travel in batches (at most ``batch`` per task,
fewer when that gives the cluster's threads two batches each, up to ``motifgrid.thresholds.batches-per-process`` (8) per worker process: the
compiled kernels release the GIL, so a worker's threads compute side by side, but the Python between them
does not); batches are dealt round-robin from the matrices
sorted by decreasing length so that each batch gets a similar share of the expensive long matrices,
and the results come back in input order.

With a ``distributed.Client`` (given, or the current one) the batches go through ``client.map``; with a
``concurrent.futures.Executor`` (:class:`Early`: a scan's thresholds computed on the command's threads while it
reads its FASTA and starts its cluster) small batches, longest matrices first, go through ``executor.map``;
without either, a plain loop runs in this process.  Nothing here touches the command line.

Results are cached on disk, one row per matrix in one SQLite file, ``thresholds.sqlite3`` in
``motifgrid.thresholds.cache-dir`` (by default ``~/.cache/motifgrid/thresholds``; empty or ``MOTIFGRID_NO_CACHE=1``
turns it off), and each call's whole result in one more row (a rerun reads one row, not one per matrix).  The key is the
SHA-256 of the matrix bytes, the background, the p-value, the precision, whether a table is kept and the
source of the :mod:`workers.distribution` package (exact lattice, BUCKETSCOREDISTRIBUTION, their numba
kernels), so any change of input or algorithm misses; without tables, an exact threshold at a later p-value of a
call also by the earlier p-values (it may start from their lattice), and a request without tables takes its first
p-value's entries with tables where it finds them (the same thresholds).  Entries are float64 vectors (``_pack``),
never pickles; a cache that cannot be read or written is recomputed around, never an error.
"""
from __future__ import annotations

import atexit
import concurrent.futures
import dataclasses
import functools
import hashlib
import os
import sqlite3
import threading
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import workers.distribution
from workers.distribution import ScoreThreshold, pvalues_to_scores, pvalues_to_scores_bucket

__all__ = ["compute_thresholds", "compute_thresholds_many", "thresholds_table", "METHODS", "method_for", "Early"]


METHODS = ("exact", "bucket", "auto")
AUTO_BUCKET_MIN_LENGTH = 41   # "auto": the exact lattice DP up to this length (it is cheaper there; docs/benchmarks.md)


def method_for(m: int, method: str) -> str:
    """The method "auto" picks for a matrix of length ``m``."""
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    if method != "auto":
        return method
    return "bucket" if m >= AUTO_BUCKET_MIN_LENGTH else "exact"


def _threshold_batch(pwms: list[np.ndarray], background: np.ndarray, pvalues: list[float],
                     rel_tol: float, table: bool, method: str = "exact",
                     device: str = "cpu") -> list[list[ScoreThreshold]]:
    """Thresholds of one batch of matrices at every p-value (runs on a worker): ``[matrix][p]``."""
    out = []
    for w in pwms:
        if method_for(w.shape[0], method) == "bucket":
            out.append(pvalues_to_scores_bucket(w, background, pvalues, rel_tol, device=device))
        else:
            out.append(pvalues_to_scores(w, background, pvalues, rel_tol, table=table))
    return out


def _current_client():
    try:
        from distributed import default_client  # noqa: PLC0415
    except ImportError:  # pragma: no cover - distributed is a dependency
        return None
    try:
        return default_client()
    except ValueError:
        return None


def _batches(pwms: Sequence[np.ndarray], batch: int) -> list[np.ndarray]:
    n = len(pwms)
    nb = max(1, -(-n // max(1, int(batch))))
    order = np.argsort([-np.asarray(w).shape[0] for w in pwms], kind="stable")
    return [order[i::nb] for i in range(nb) if order[i::nb].size]


def compute_thresholds(pwms: list[np.ndarray], background: np.ndarray, pvalue: float,
                       client=None, batch: int = 1024, *, rel_tol: float = 1e-3,
                       table: bool = True, cache=True, method: str = "exact") -> list[ScoreThreshold]:
    """Score threshold of every matrix at ``pvalue``.

    Parameters
    ----------
    pwms : list of ndarray, each of shape (m_i, 4)
        Log-odds matrices (bits, columns A C G T).
    background : ndarray, shape (4,)
        Background letter probabilities.
    pvalue : float
        Requested p-value.
    client : distributed.Client or concurrent.futures.Executor, optional
        Where to run.  ``None``: the current client if there is one, else a plain loop here.
    batch : int
        Matrices per task at most (fewer when that gives the cluster's threads two batches each, up to
        8 batches per worker process).
    rel_tol : float
        Relative precision of the p-values (see ``workers.distribution``).
    table : bool
        Also build the tail tables needed by ``score_to_pvalue`` (default; exact method only).  False
        is faster when only the thresholds are wanted.
    cache : bool or path
        True: the configured on-disk cache (see the module docstring); a path: that folder;
        False: compute everything.
    method : "exact", "bucket" or "auto"
        Exact lattice DP (``workers.distribution``), BUCKETSCOREDISTRIBUTION (``workers.distribution.bucket``,
        no tail table), or per matrix whichever is cheaper (``method_for``).

    Returns
    -------
    list of ScoreThreshold
        One per matrix, in input order.
    """
    return compute_thresholds_many(pwms, background, [pvalue], client, batch, rel_tol=rel_tol,
                                   table=table, cache=cache, method=method)[0]


def compute_thresholds_many(pwms: list[np.ndarray], background: np.ndarray, pvalues: Sequence[float],
                            client=None, batch: int = 1024, *, rel_tol: float = 1e-3, table: bool = True,
                            cache=True, method: str = "exact",
                            device: str = "cpu", store_later: bool = False) -> list[list[ScoreThreshold]]:
    """``compute_thresholds`` at several p-values at once: ``result[i_pvalue][i_matrix]``.

    One task computes all p-values of its matrices (the bucket method reads them all from one
    distribution).  ``device`` is where the bucket method enumerates its slices.  ``store_later``: the
    new cache entries are written by a background thread (a scan goes on with its blocks meanwhile;
    docs/benchmarks.md); :func:`wait_for_cache_writes` waits for it, and so does the exit of
    the process.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, not {method!r}")
    pwms = [np.asarray(w, dtype=np.float64) for w in pwms]
    bg = np.asarray(background, dtype=np.float64)
    pvalues = [float(p) for p in pvalues]
    if not pwms:
        return [[] for _ in pvalues]
    cache = _cache_dir() if cache is True else (Path(cache) if cache else None)
    meths = [method_for(w.shape[0], method) for w in pwms]
    tab = [table and m == "exact" for m in meths]
    out: list[list[ScoreThreshold | None]] = [[None] * len(pwms) for _ in pvalues]
    keys = bundle = None
    if cache:
        # without tables, an exact threshold at a later p-value of a call may start from the lattice of an earlier
        # one (the same matrix): its entry is keyed by those p-values too; the first p-value's is any call's
        keys = [[_key(w, bg, p, rel_tol, t, m, () if t or m != "exact" else tuple(pvalues[:j]))
                 for w, t, m in zip(pwms, tab, meths)] for j, p in enumerate(pvalues)]
        bundle = _bundle_key(keys)
        whole = _load_bundle(cache, bundle, len(pvalues), len(pwms))
        if whole is not None:            # the same matrices asked for again (a rerun): one file, not one per matrix
            return whole
        flat = _load_many(cache, [k for row in keys for k in row])      # one query for every p-value's entries
        out = [flat[j * len(pwms):(j + 1) * len(pwms)] for j in range(len(pvalues))]
        if not table:
            _with_tables(cache, out, pwms, bg, pvalues, rel_tol, meths)
    todo = [i for i in range(len(pwms)) if any(out[j][i] is None for j in range(len(pvalues)))]
    if todo:
        done = _compute([pwms[i] for i in todo], bg, pvalues, client, batch, rel_tol, table, method, device)
        for i, res in zip(todo, done):
            for j, t in enumerate(res):
                out[j][i] = t
    if cache:
        new = [(keys[j][i], out[j][i]) for i in todo for j in range(len(pvalues))]
        new.append((bundle, out))
        if store_later:
            _store_in_background(cache, new)
        else:
            _store_all(cache, new)
    return out  # type: ignore[return-value]


def _with_tables(cache: Path, out: list, pwms, bg, pvalues, rel_tol: float, meths: list) -> None:
    """The first p-value's entries of ``out`` (``[p][matrix]``) still missing filled from the cache's entries with
    tables, where there are: a scan's entries serve a later run that needs no tables (an exact threshold computed
    alone is the same with or without its table: checked on JASPAR 2024's 2,346 CORE matrices, 2-3 p-values, 4
    backgrounds; docs/benchmarks.md)."""
    missing = [i for i in range(len(pwms)) if out[0][i] is None and meths[i] == "exact"]
    if missing:
        found = _load_many(cache, [_key(pwms[i], bg, pvalues[0], rel_tol, True, "exact") for i in missing])
        for i, t in zip(missing, found):
            out[0][i] = t


_writers: list = []               # background cache writers not yet joined (the process waits for them at exit)
_writers_lock = threading.Lock()


def _store_all(cache: Path, entries) -> None:
    _write(cache, [(key, _pack_bundle(t) if isinstance(t, list) else _pack(t)) for key, t in entries])


def _store_in_background(cache: Path, entries) -> None:
    t = threading.Thread(target=_store_all, args=(cache, entries), name="motifgrid-threshold-cache", daemon=True)
    with _writers_lock:         # started before it is listed: a waiter on another thread may join it at once
        t.start()
        _writers.append(t)


def wait_for_cache_writes() -> None:
    """Wait until the cache entries handed to background writers (``store_later``) are on disk."""
    while True:
        with _writers_lock:
            if not _writers:
                return
            t = _writers.pop()
        t.join()


atexit.register(wait_for_cache_writes)


def _compute(pwms, bg, pvalues, client, batch, rel_tol, table, method, device) -> list[list[ScoreThreshold]]:
    if client is None:
        client = _current_client()
    if client is None:
        return _threshold_batch(pwms, bg, pvalues, rel_tol, table, method, device)
    if isinstance(client, concurrent.futures.Executor):
        return _compute_here(client, pwms, bg, pvalues, rel_tol, table, method, device)
    nthreads = client.nthreads()
    threads = sum(nthreads.values())
    if threads:
        # two batches per worker thread (the kernels release the GIL), but at most 8 per worker process:
        # the Python between the kernels holds the GIL, and many threads queueing for it lose more than
        # they gain (docs/benchmarks.md, GPU section: batches per worker); at least 4 matrices each
        import dask.config  # noqa: PLC0415

        per_process = int(dask.config.get("motifgrid.thresholds.batches-per-process", default=8))
        nb = max(1, min(2 * threads, per_process * len(nthreads)))
        batch = min(batch, max(4, -(-len(pwms) // nb)))
    groups = _batches(pwms, batch)
    futures = client.map(_threshold_batch, [[pwms[i] for i in g] for g in groups],
                         background=bg, pvalues=pvalues, rel_tol=rel_tol, table=table,
                         method=method, device=device, pure=False)
    return _in_input_order(len(pwms), groups, client.gather(futures))


EXECUTOR_BATCH = 4    # matrices per batch on an executor: the longest first, so the threads end together


def _compute_here(pool, pwms, bg, pvalues, rel_tol, table, method, device) -> list[list[ScoreThreshold]]:
    """The batches on this process's threads, longest matrices first (a pool takes the next batch as a thread
    frees up, so the long matrices' cost spreads over the threads instead of ending on one)."""
    order = np.argsort([-w.shape[0] for w in pwms], kind="stable")
    groups = [order[i:i + EXECUTOR_BATCH] for i in range(0, len(order), EXECUTOR_BATCH)]
    results = pool.map(lambda g: _threshold_batch([pwms[i] for i in g], bg, pvalues, rel_tol, table, method,
                                                  device), groups)
    return _in_input_order(len(pwms), groups, results)


def _in_input_order(n: int, groups, results) -> list:
    """The batches' results (``results[b][j]`` of matrix ``groups[b][j]``) as one list in input order."""
    out: list = [None] * n
    for g, res in zip(groups, results):
        for i, r in zip(g, res):
            out[int(i)] = r
    return out


class _GatedPool(concurrent.futures.ThreadPoolExecutor):
    """A thread pool running at most ``running`` of its tasks at once until :meth:`open` lets all its threads run."""

    def __init__(self, threads: int, running: int):
        super().__init__(threads, thread_name_prefix="motifgrid-thresholds")
        self._gate = threading.Semaphore(running)
        self._held = threads - running

    def submit(self, fn, /, *args, **kwargs):
        return super().submit(self._gated, fn, *args, **kwargs)

    def _gated(self, fn, *args, **kwargs):
        with self._gate:
            return fn(*args, **kwargs)

    def open(self) -> None:
        held, self._held = self._held, 0
        for _ in range(held):
            self._gate.release()


class Early:
    """Thresholds computed on this process's threads while the caller goes on.

    ``compute(executor)`` runs on a thread of its own and hands ``executor`` (a pool of ``threads`` threads) to
    :func:`compute_thresholds_many` as its client.  Until the caller asks for the :meth:`result`, ``beside``
    of the threads wait: the caller's own work (a FASTA's ingest, a cluster's start: Python that holds the GIL)
    keeps that many cores; then every thread computes.  :meth:`result` returns ``compute``'s value or raises its
    error; :meth:`cancel` drops the batches not started (the caller failed and will not wait).  The kernels
    release the GIL, so the threads compute beside the caller's own work.
    """

    def __init__(self, compute, threads: int, beside: int = 0):
        threads = max(1, int(threads))
        self._pool = _GatedPool(threads, max(1, threads - int(beside)))
        self._value = self._error = None
        self._thread = threading.Thread(target=self._run, args=(compute,), name="motifgrid-thresholds", daemon=True)
        self._thread.start()

    def _run(self, compute) -> None:
        try:
            self._value = compute(self._pool)
        except BaseException as e:  # noqa: BLE001 - handed to whoever asks for the result
            self._error = e
        finally:
            self._pool.shutdown(wait=False)

    def result(self):
        self._pool.open()
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._value

    def cancel(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


# ------------------------------------------------------------------------------------ disk cache
def _cache_dir() -> Path | None:
    from pipeline.io.storage import cache_dir  # noqa: PLC0415

    return cache_dir("motifgrid.thresholds.cache-dir", "~/.cache/motifgrid/thresholds")


@functools.lru_cache(maxsize=1)
def _algorithm_version() -> str:
    h = hashlib.sha256()
    for path in sorted(Path(workers.distribution.__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _key(w: np.ndarray, bg: np.ndarray, pvalue: float, rel_tol: float, table: bool, method: str = "exact",
         after: tuple = ()) -> str:
    h = hashlib.sha256()
    for part in (np.ascontiguousarray(w).tobytes(), bg.tobytes(),
                 repr((w.shape, pvalue, rel_tol, table, method) + ((after,) if after else ())).encode(),
                 _algorithm_version().encode()):
        h.update(part)
    return h.hexdigest()


_ARRAYS = ("seg_x0", "seg_a", "seg_b")
_METHOD_CODES = ("exact", "bucket")
_SCALARS = [f for f in dataclasses.fields(ScoreThreshold) if f.name not in _ARRAYS]


def _pack(t: ScoreThreshold) -> np.ndarray:
    """One float64 vector: the scalar fields in declaration order (bounds as two numbers, the method as
    its index, booleans and integers exactly), then each table array's length and values."""
    head = []
    for f in _SCALARS:
        v = getattr(t, f.name)
        if f.name == "pvalue_bounds":
            head += [float(v[0]), float(v[1])]
        elif f.name == "method":
            head.append(float(_METHOD_CODES.index(v)))
        else:
            head.append(float(v))
    arrays = [np.asarray(getattr(t, n), dtype=np.float64) for n in _ARRAYS]
    return np.concatenate([np.array(head + [a.size for a in arrays]), *arrays])


def _unpack(v: np.ndarray) -> ScoreThreshold:
    kw, i = {}, 0
    for f in _SCALARS:
        if f.name == "pvalue_bounds":
            kw[f.name] = (float(v[i]), float(v[i + 1]))
            i += 2
            continue
        x = float(v[i])
        i += 1
        if f.name == "method":
            kw[f.name] = _METHOD_CODES[int(x)]
        elif f.type in (bool, "bool"):
            kw[f.name] = bool(x)
        elif f.type in (int, "int"):
            kw[f.name] = int(x)
        else:
            kw[f.name] = x
    sizes = [int(x) for x in v[i:i + len(_ARRAYS)]]
    i += len(_ARRAYS)
    for name, n in zip(_ARRAYS, sizes):
        kw[name] = v[i:i + n]           # views of the entry read (a copy each was 0.08 s for 879 matrices)
        i += n
    if i != v.size:
        raise ValueError("cache entry of the wrong size")
    return ScoreThreshold(**kw)


_DB = "thresholds.sqlite3"
_IN_CHUNK = 500                    # keys per ``IN (...)`` query (older SQLite builds allow 999 variables)


def _open(cache: Path):
    """The cache's one SQLite file (``key`` → packed entry), made on first use.  One file instead of one per
    matrix: 880 new entries were 880 file creations, 0.66 CPU-s of a cold scan on the VM, and thousands of
    small files on a cluster's shared filesystem (docs/benchmarks.md).  SQLite's rollback journal (not WAL,
    which needs shared memory that network filesystems lack) serialises concurrent writers."""
    cache.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(cache / _DB, timeout=60)
    try:
        con.execute("CREATE TABLE IF NOT EXISTS entries (key TEXT PRIMARY KEY, value BLOB NOT NULL)")
    except BaseException:
        con.close()
        raise
    return con


def _set_aside(cache: Path) -> None:
    """A cache file that is not a database (torn by a crash of its filesystem, overwritten) is renamed, so the
    next run starts a new one instead of failing to read it forever."""
    try:
        os.replace(cache / _DB, cache / f"{_DB}.unreadable-{uuid.uuid4().hex[:8]}")
    except OSError:
        pass


def _read(cache: Path, keys: list[str]) -> dict:
    """The stored vectors of ``keys`` (those present): ``{key: float64 vector}``."""
    found: dict = {}
    if not (cache / _DB).is_file():
        return found
    try:
        # read-only mode: a cache in a read-only folder still reads
        con = sqlite3.connect((cache / _DB).absolute().as_uri() + "?mode=ro", uri=True, timeout=60)
        try:
            for i in range(0, len(keys), _IN_CHUNK):
                part = keys[i:i + _IN_CHUNK]
                q = f"SELECT key, value FROM entries WHERE key IN ({','.join('?' * len(part))})"
                found.update((k, np.frombuffer(v, dtype=np.float64)) for k, v in con.execute(q, part)
                             if len(v) % 8 == 0)       # a torn row is left out: recomputed and overwritten
        finally:
            con.close()
    except sqlite3.DatabaseError as e:
        if not isinstance(e, sqlite3.OperationalError):
            _set_aside(cache)      # "file is not a database", "database disk image is malformed"
    except (OSError, sqlite3.Error):
        pass                       # locked past the timeout, unreadable folder: computed instead
    return found


def _write(cache: Path, rows: list) -> None:
    """Store ``(key, float64 vector)`` rows in one transaction."""
    try:
        con = _open(cache)
        try:
            with con:
                con.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?)",
                                [(k, np.ascontiguousarray(v, np.float64).tobytes()) for k, v in rows])
        finally:
            con.close()
    except (OSError, sqlite3.Error):
        pass                       # a read-only, full or locked cache never fails a run


def _load_many(cache: Path, keys: list[str]) -> list:
    """The entries of ``keys`` (None where missing or unreadable: recomputed and overwritten)."""
    found = _read(cache, keys)
    out = []
    for k in keys:
        try:
            out.append(_unpack(found[k]) if k in found else None)
        except (ValueError, IndexError):
            out.append(None)
    return out


def _bundle_key(keys: list) -> str:
    h = hashlib.sha256()
    for row in keys:
        h.update("".join(row).encode())
    return "set-" + h.hexdigest()


def _load_bundle(cache: Path, key: str, n_p: int, n_m: int) -> list | None:
    """Every entry of one call (``result[i_pvalue][i_matrix]``) from one row: 879 matrices were 879 reads
    (~0.4 s of a small scan's start-up when each was a file; docs/benchmarks.md)."""
    v = _read(cache, [key]).get(key)
    try:
        n = int(v[0])
        if n != n_p * n_m:
            return None
        sizes = v[1:1 + n].astype(np.int64)
        ends = np.cumsum(sizes) + 1 + n
        if int(ends[-1]) != v.size:
            return None
        flat = [_unpack(v[e - s:e]) for s, e in zip(sizes.tolist(), ends.tolist())]
    except (TypeError, KeyError, ValueError, IndexError):
        return None
    return [flat[j * n_m:(j + 1) * n_m] for j in range(n_p)]


def _pack_bundle(out: list) -> np.ndarray:
    packed = [_pack(t) for row in out for t in row]
    return np.concatenate([np.array([len(packed)] + [x.size for x in packed], np.float64), *packed])


def thresholds_table(ids: Sequence[str], names: Sequence[str], strands: Sequence,
                     tables: Sequence[ScoreThreshold], lengths: Sequence[int] | None = None):
    """One row per (motif, strand) threshold, as a ``pyarrow.Table``.

    Parameters
    ----------
    ids, names : sequence of str, length n
        Motif identifiers and names, one per row.
    strands : sequence, length n
        ``"+"``/``"-"`` or 0 (forward) / 1 (reverse complement).
    tables : sequence of ScoreThreshold, length n
    lengths : sequence of int, length n, optional
        Matrix lengths; when given the table follows ``pipeline.io.schema.THRESHOLDS_SCHEMA``
        (with its ``length`` column).

    Returns
    -------
    pyarrow.Table
        Columns ``motif_id, motif_name, strand, [length,] threshold, pvalue, pvalue_low,
        pvalue_high, reachable, requested_pvalue, method, score_error, n_slices, n_buckets,
        seed_bound``;
        ``threshold`` is ``+inf`` and ``pvalue`` 0 on unreachable rows.  ``score_error`` is the
        certified distance to the exact smallest threshold; ``n_slices``/``n_buckets`` are the
        BUCKETSCOREDISTRIBUTION parameters (0 for the exact method) and ``seed_bound`` the seed's score
        error bound ``⌈1 + log2 N⌉ Δ_M`` for them (NaN for the exact method).
    """
    import pyarrow as pa  # noqa: PLC0415

    from pipeline.io import arrow  # noqa: PLC0415

    n = len(tables)
    if not (len(ids) == len(names) == len(strands) == n):
        raise ValueError("ids, names, strands and tables must have the same length")

    def strand(s) -> str:
        if s in ("+", "-"):
            return s
        if int(s) in (0, 1):
            return "+" if int(s) == 0 else "-"
        raise ValueError(f"strand must be '+', '-', 0 or 1, not {s!r}")

    cols = {
        "motif_id": arrow.strings(ids),
        "motif_name": arrow.strings(names),
        "strand": arrow.strings([strand(s) for s in strands]),
    }
    if lengths is not None:
        if len(lengths) != n:
            raise ValueError("lengths must have one entry per row")
        cols["length"] = arrow.column([int(x) for x in lengths], pa.int32())
    cols.update({
        "threshold": arrow.column([float(t.threshold) for t in tables], pa.float64()),
        "pvalue": arrow.column([float(t.pvalue) for t in tables], pa.float64()),
        "pvalue_low": arrow.column([float(t.pvalue_bounds[0]) for t in tables], pa.float64()),
        "pvalue_high": arrow.column([float(t.pvalue_bounds[1]) for t in tables], pa.float64()),
        "reachable": arrow.column([bool(t.reachable) for t in tables], pa.bool_()),
        "requested_pvalue": arrow.column([float(t.requested_pvalue) for t in tables], pa.float64()),
        "method": arrow.strings([t.method for t in tables]),
        "score_error": arrow.column([float(t.score_error) for t in tables], pa.float64()),
        "n_slices": arrow.column([int(t.n_slices) for t in tables], pa.int32()),
        "n_buckets": arrow.column([int(t.n_buckets) for t in tables], pa.int32()),
        "seed_bound": arrow.column([float(t.seed_bound) for t in tables], pa.float64()),
    })
    if lengths is not None:
        from pipeline.io.schema import THRESHOLDS_SCHEMA  # noqa: PLC0415

        return pa.table(cols, schema=THRESHOLDS_SCHEMA)
    return pa.table(cols)
