"""Score thresholds of many PWMs at one p-value, fanned out on Dask.

Each matrix is independent (``workers.distribution.pvalue_to_score``), so the work is a map over
matrices.  To keep the task graph small the matrices travel in batches (``batch`` per task);
batches are dealt round-robin from the matrices sorted by decreasing length so that each batch
gets a similar share of the expensive long matrices, and the results come back in input order.

With a ``distributed.Client`` (given, or the current one) the batches go through ``client.map``;
without one, a plain loop runs in this process.  Nothing here touches the command line.

Results are cached on disk, one ``.npz`` per matrix (``motifgrid.thresholds.cache-dir``, by default
``~/.cache/motifgrid/thresholds``; empty or ``MOTIFGRID_NO_CACHE=1`` turns it off).  The key is the
SHA-256 of the matrix bytes, the background, the p-value, the precision, whether a table is kept and the
source of :mod:`workers.distribution`, so any change of input or algorithm misses.  Files are plain
NumPy arrays read with ``allow_pickle=False`` and written atomically.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import uuid
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import workers.distribution
from workers.distribution import ScoreThreshold, pvalue_to_score

__all__ = ["compute_thresholds", "thresholds_table"]


def _threshold_batch(pwms: list[np.ndarray], background: np.ndarray, pvalue: float,
                     rel_tol: float, table: bool) -> list[ScoreThreshold]:
    """Thresholds of one batch of matrices (runs on a worker)."""
    return [pvalue_to_score(w, background, pvalue, rel_tol, table=table) for w in pwms]


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
                       client=None, batch: int = 64, *, rel_tol: float = 1e-3,
                       table: bool = True, cache=True) -> list[ScoreThreshold]:
    """Exact score threshold of every matrix at ``pvalue``.

    Parameters
    ----------
    pwms : list of ndarray, each of shape (m_i, 4)
        Log-odds matrices (bits, columns A C G T).
    background : ndarray, shape (4,)
        Background letter probabilities.
    pvalue : float
        Requested p-value.
    client : distributed.Client, optional
        Where to run.  ``None``: the current client if there is one, else a plain loop here.
    batch : int
        Matrices per task.
    rel_tol : float
        Relative precision of the p-values (see ``workers.distribution``).
    table : bool
        Also build the tail tables needed by ``score_to_pvalue`` (default).  False is faster
        when only the thresholds are wanted.
    cache : bool or path
        True: the configured on-disk cache (see the module docstring); a path: that folder;
        False: compute everything.

    Returns
    -------
    list of ScoreThreshold
        One per matrix, in input order.
    """
    pwms = [np.asarray(w, dtype=np.float64) for w in pwms]
    bg = np.asarray(background, dtype=np.float64)
    if not pwms:
        return []
    cache = _cache_dir() if cache is True else (Path(cache) if cache else None)
    keys = [_key(w, bg, float(pvalue), rel_tol, table) for w in pwms] if cache else None
    out: list[ScoreThreshold | None] = [_load(cache, k) for k in keys] if cache else [None] * len(pwms)
    todo = [i for i, t in enumerate(out) if t is None]
    if todo:
        done = _compute([pwms[i] for i in todo], bg, float(pvalue), client, batch, rel_tol, table)
        for i, t in zip(todo, done):
            out[i] = t
            if cache:
                _store(cache, keys[i], t)
    return out  # type: ignore[return-value]


def _compute(pwms, bg, pvalue, client, batch, rel_tol, table) -> list[ScoreThreshold]:
    if client is None:
        client = _current_client()
    if client is None:
        return _threshold_batch(pwms, bg, pvalue, rel_tol, table)
    groups = _batches(pwms, batch)
    futures = client.map(_threshold_batch, [[pwms[i] for i in g] for g in groups],
                         background=bg, pvalue=pvalue, rel_tol=rel_tol, table=table,
                         pure=False)
    results = client.gather(futures)
    out: list[ScoreThreshold | None] = [None] * len(pwms)
    for g, res in zip(groups, results):
        for i, r in zip(g, res):
            out[int(i)] = r
    return out  # type: ignore[return-value]


# ------------------------------------------------------------------------------------ disk cache
def _cache_dir() -> Path | None:
    import dask.config  # noqa: PLC0415

    if os.environ.get("MOTIFGRID_NO_CACHE"):
        return None
    d = dask.config.get("motifgrid.thresholds.cache-dir", default="~/.cache/motifgrid/thresholds")
    return Path(os.path.expanduser(d)) if d else None


@functools.lru_cache(maxsize=1)
def _algorithm_version() -> str:
    return hashlib.sha256(Path(workers.distribution.__file__).read_bytes()).hexdigest()[:16]


def _key(w: np.ndarray, bg: np.ndarray, pvalue: float, rel_tol: float, table: bool) -> str:
    h = hashlib.sha256()
    for part in (np.ascontiguousarray(w).tobytes(), bg.tobytes(), repr((w.shape, pvalue, rel_tol, table)).encode(),
                 _algorithm_version().encode()):
        h.update(part)
    return h.hexdigest()


def _load(cache: Path, key: str) -> ScoreThreshold | None:
    path = cache / key[:2] / f"{key}.npz"
    try:
        with np.load(path, allow_pickle=False) as z:
            kw = {}
            for f in dataclasses.fields(ScoreThreshold):
                v = z[f.name]
                if f.name == "pvalue_bounds":
                    kw[f.name] = (float(v[0]), float(v[1]))
                elif v.ndim:
                    kw[f.name] = v.copy()
                else:
                    kw[f.name] = v.item()
            return ScoreThreshold(**kw)
    except (OSError, KeyError, ValueError):
        return None            # missing or unreadable: recompute (and overwrite)


def _store(cache: Path, key: str, t: ScoreThreshold) -> None:
    try:
        d = cache / key[:2]
        d.mkdir(parents=True, exist_ok=True)
        tmp = d / f".{key}.{uuid.uuid4().hex}.npz"
        np.savez(tmp, **{f.name: np.asarray(getattr(t, f.name)) for f in dataclasses.fields(ScoreThreshold)})
        os.replace(tmp, d / f"{key}.npz")
    except OSError:
        pass                   # a read-only or full cache never fails a run


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
        Matrix lengths; when given the table follows ``pipeline.schema.THRESHOLDS_SCHEMA``
        (with its ``length`` column).

    Returns
    -------
    pyarrow.Table
        Columns ``motif_id, motif_name, strand, [length,] threshold, pvalue, pvalue_low,
        pvalue_high, reachable``; ``threshold`` is ``+inf`` and ``pvalue`` 0 on unreachable
        rows.
    """
    import pyarrow as pa  # noqa: PLC0415

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
        "motif_id": pa.array([str(x) for x in ids], pa.string()),
        "motif_name": pa.array([str(x) for x in names], pa.string()),
        "strand": pa.array([strand(s) for s in strands], pa.string()),
    }
    if lengths is not None:
        if len(lengths) != n:
            raise ValueError("lengths must have one entry per row")
        cols["length"] = pa.array([int(x) for x in lengths], pa.int32())
    cols.update({
        "threshold": pa.array([float(t.threshold) for t in tables], pa.float64()),
        "pvalue": pa.array([float(t.pvalue) for t in tables], pa.float64()),
        "pvalue_low": pa.array([float(t.pvalue_bounds[0]) for t in tables], pa.float64()),
        "pvalue_high": pa.array([float(t.pvalue_bounds[1]) for t in tables], pa.float64()),
        "reachable": pa.array([bool(t.reachable) for t in tables], pa.bool_()),
    })
    if lengths is not None:
        from pipeline.schema import THRESHOLDS_SCHEMA  # noqa: PLC0415

        return pa.table(cols, schema=THRESHOLDS_SCHEMA)
    return pa.table(cols)
