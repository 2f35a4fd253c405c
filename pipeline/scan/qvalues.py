"""Q-values of a scan: Benjamini-Hochberg per motif over every window tested, one reduction at the end of a run.

The tests of motif k (length m) are its window starts without N on both strands: ``N_k = 2 · windows(m)``,
counted per block by the scan tasks (manifest entries ``windows``).  Only hits are stored, and that is enough
for an exact BH: every window that is not a hit has a larger p-value than every hit, so the rank of a hit
among all ``N_k`` tests is its rank among the hits.  With the motif's distinct hit p-values ``p_1 < ... < p_R``
and ``C_j`` hits at p-value ``<= p_j``::

    q(p_i) = min_{j >= i} min(1, p_j · N_k / C_j)

(FIMO 5.4.1's ``compute_qvalues`` with π0 = 1: FIMO multiplies by a π0 estimated from a random sample of
10,000 window p-values; here the count is exact and the result deterministic, and conservative by that
factor.)  q depends only on (motif, p-value), so a map ``HITS/_qvalues.parquet`` holds it for any reader to
join (:class:`QvalueMap`); q is a non-decreasing step function of p, so the map keeps one row per step (the
largest hit p-value of each q-value): far fewer rows than hits, since the many null hits share q = 1.

Motifs are keyed by ``motif_id`` (the only motif key in the hits files): motifs that share an id form one BH
family, their tests added.

The reduction reads the ``motif_id`` and ``pvalue`` columns of the finished block files back (they are the
persisted p-values: no second copy is written while scanning) in tasks of bounded size:

* one task when the run's hits fit ``motifgrid.qvalues.task-hits``;
* otherwise *collect* tasks, each over block files holding at most that many hits, write each motif group's
  distinct (motif, p-value, count) triples to ``HITS/_qvalues.parts/`` and *reduce* tasks, one per group of
  motifs holding at most that many hits, merge their group's parts and compute its steps.  No process holds
  more than about ``task-hits`` p-values; the client only gathers the steps.
"""
from __future__ import annotations

import io
import json
import time
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from pipeline.io import arrow, storage
from pipeline.io.schema import QVALUES_SCHEMA

QVALUES_FILE = "_qvalues.parquet"
PARTS_DIR = "_qvalues.parts"
_META_KEY = b"motifgrid.qvalues"
#: piece of a collect task: distinct (motif family, p-value) and their hit counts
_PIECE = np.dtype([("family", "<i4"), ("pvalue", "<f8"), ("count", "<i8")])


# ------------------------------------------------------------------------------------ arithmetic
def bh_qvalues(pvalues: np.ndarray, counts: np.ndarray, tests: int) -> np.ndarray:
    """Benjamini-Hochberg q-values of one motif's distinct hit p-values.

    ``pvalues`` ascending and distinct, ``counts`` the hits at each, ``tests`` the number of tests (windows
    scored; hits and non-hits).  Returns ``q_i = min_{j >= i} min(1, p_j · tests / C_j)`` with ``C_j`` the
    hits at p-value ``<= p_j``."""
    p = np.asarray(pvalues, dtype=np.float64)
    c = np.cumsum(np.asarray(counts, dtype=np.int64))
    if p.size == 0:
        return np.zeros(0)
    if c[-1] > tests:
        raise ValueError(f"{int(c[-1])} hits but only {int(tests)} tests")
    r = p * float(tests) / c
    return np.minimum(np.minimum.accumulate(r[::-1])[::-1], 1.0)


def steps(pvalues: np.ndarray, counts: np.ndarray, tests: int):
    """(pvalue, qvalue, hits) at the last p-value of each q-value step (see :func:`bh_qvalues`)."""
    q = bh_qvalues(pvalues, counts, tests)
    cum = np.cumsum(np.asarray(counts, dtype=np.int64))
    last = np.flatnonzero(np.r_[q[1:] != q[:-1], True]) if q.size else np.zeros(0, np.intp)
    return np.asarray(pvalues, np.float64)[last], q[last], cum[last]


def families(ids: list) -> tuple[list, np.ndarray]:
    """Motif ids → (distinct ids in file order, family index of each motif)."""
    index: dict = {}
    fam = np.array([index.setdefault(i, len(index)) for i in ids], dtype=np.int64)
    return list(index), fam


def family_codes(column, index: dict) -> np.ndarray:
    """Family index of each row of a ``motif_id`` column (dictionary or string; Array or ChunkedArray);
    -1 for an id that ``index`` does not know."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    out = []
    for ch in chunks:
        if not pa.types.is_dictionary(ch.type):
            ch = ch.dictionary_encode()
        lut = np.array([index.get(s, -1) for s in ch.dictionary.to_pylist()] or [-1], dtype=np.int64)
        out.append(lut[arrow.to_numpy(ch.indices).astype(np.int64)])
    return np.concatenate(out) if out else np.zeros(0, np.int64)


# ------------------------------------------------------------------------------------ the map
@dataclass
class QvalueMap:
    """``HITS/_qvalues.parquet`` in memory: per motif id, its q-value steps."""
    ids: list
    offsets: np.ndarray          # (F + 1,) rows of family f: offsets[f]:offsets[f+1]
    pvalue: np.ndarray           # step ends, ascending within a family
    qvalue: np.ndarray
    hits: np.ndarray             # hits of the family at p-value <= pvalue
    max_qvalue: float | None     # the scan's --max-qvalue (applied where hits are read), or None
    info: dict

    @classmethod
    def read(cls, out: str) -> "QvalueMap | None":
        """The map of hits dataset ``out``, or None when it has none (``--no-qvalue``, unfinished run)."""
        path = storage.join(out, QVALUES_FILE)
        if not storage.exists(path):
            return None
        t = storage.read_parquet(path)
        codes = t.column("motif_id").combine_chunks().dictionary_encode()      # rows come grouped by motif
        return cls.from_rows(arrow.to_numpy(codes.indices), codes.dictionary.to_pylist(),
                             arrow.to_numpy(t.column("pvalue")), arrow.to_numpy(t.column("qvalue")),
                             arrow.to_numpy(t.column("hits")),
                             json.loads((t.schema.metadata or {}).get(_META_KEY, b"{}")))

    @classmethod
    def from_rows(cls, codes: np.ndarray, names: list, pvalue, qvalue, hits, info: dict) -> "QvalueMap":
        """The map of the file's rows: ``codes`` (n,) each row's index into ``names`` (the motif ids), rows grouped
        by motif and ascending in p-value within each; ``info`` the file's metadata."""
        start = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]]) if codes.size else np.zeros(0, np.int64)
        return cls(ids=[names[i] for i in codes[start].tolist()], offsets=np.r_[start, codes.size].astype(np.int64),
                   pvalue=pvalue, qvalue=qvalue, hits=hits, max_qvalue=info.get("max_qvalue"), info=info)

    @property
    def index(self) -> dict:
        return {m: f for f, m in enumerate(self.ids)}

    def lookup(self, motif_id, pvalue: np.ndarray) -> np.ndarray:
        """q-value of each hit (``motif_id`` column, ``pvalue`` array); NaN for a hit the map does not cover."""
        fam = family_codes(motif_id, self.index)
        p = np.asarray(pvalue, dtype=np.float64)
        q = np.full(p.size, np.nan)
        order = np.argsort(fam, kind="stable")
        bounds = np.searchsorted(fam[order], np.arange(-1, len(self.ids) + 1))
        for f in np.flatnonzero(np.diff(bounds[1:])):      # families present (family -1 left NaN)
            rows = order[bounds[f + 1]:bounds[f + 2]]
            lo, hi = self.offsets[f], self.offsets[f + 1]
            k = np.searchsorted(self.pvalue[lo:hi], p[rows], side="left")
            ok = k < hi - lo
            q[rows[ok]] = self.qvalue[lo:hi][k[ok]]
        return q

    def cutoffs(self, max_qvalue: float) -> np.ndarray:
        """Per family, the largest hit p-value with q <= ``max_qvalue`` (-1 when none): q is non-decreasing in
        p, so ``q <= Q`` is ``p <= cutoff``."""
        out = np.full(len(self.ids), -1.0)
        for f in range(len(self.ids)):
            lo, hi = self.offsets[f], self.offsets[f + 1]
            k = np.searchsorted(self.qvalue[lo:hi], max_qvalue, side="right")
            if k:
                out[f] = self.pvalue[lo + k - 1]
        return out

    def hits_at(self, max_qvalue: float) -> int:
        """Hits with q <= ``max_qvalue``, over all motifs."""
        n = 0
        for f in range(len(self.ids)):
            lo, hi = self.offsets[f], self.offsets[f + 1]
            k = np.searchsorted(self.qvalue[lo:hi], max_qvalue, side="right")
            n += int(self.hits[lo + k - 1]) if k else 0
        return n


def check_max_qvalue(q, what: str = "--max-qvalue") -> None:
    if q is not None and not (0.0 < float(q) <= 1.0):
        raise ValueError(f"{what} must be in (0, 1], got {q}")


def map_and_limit(out: str, max_qvalue: float | None):
    """(the map of ``out`` or None, the q-value limit to apply or None): ``max_qvalue``, else the scan's
    recorded ``--max-qvalue``.  ValueError for a limit out of (0, 1] or on a dataset without q-values."""
    check_max_qvalue(max_qvalue)
    qmap = QvalueMap.read(out)
    limit = max_qvalue if max_qvalue is not None else (qmap.max_qvalue if qmap else None)
    if limit is not None and qmap is None:
        raise ValueError(f"{out}: has no q-values (scanned with --no-qvalue, or unfinished): cannot keep q <= {limit}")
    return qmap, limit


def add_qvalues(table: pa.Table, qmap: "QvalueMap | None", max_qvalue: float | None) -> pa.Table:
    """``table`` (with ``motif_id`` and ``pvalue``) with a ``qvalue`` column appended (null without a map) and,
    with ``max_qvalue``, only its rows with q <= ``max_qvalue``."""
    if qmap is None:
        return table.append_column("qvalue", pa.nulls(table.num_rows, pa.float64()))
    q = qmap.lookup(table.column("motif_id"), arrow.to_numpy(table.column("pvalue")))
    table = table.append_column("qvalue", arrow.column(q))        # (arrow.*: no pandas import)
    if max_qvalue is not None:
        table = table.filter(arrow.column(q <= max_qvalue))
    return table


# ------------------------------------------------------------------------------------ tasks
def _as_piece(fam: np.ndarray, p: np.ndarray, count: np.ndarray) -> np.ndarray:
    out = np.empty(fam.size, _PIECE)
    out["family"], out["pvalue"], out["count"] = fam, p, count
    return out


def collect_task(out: str, files: list, index: dict, group_starts: np.ndarray, parts: str | None, task: int,
                 device: str = "cpu"):
    """Read the (motif, p-value) columns of ``files``; per group of families (``group_starts``: first family
    of each group), their distinct (family, p-value, count) (sorted on ``device``).  Written to
    ``parts/g<group>/c<task>.npy`` and the paths returned, or returned as arrays when ``parts`` is None:
    ``{group: path or array}``, with the task's thread-seconds by step under ``"seconds"``."""
    from workers.scan.distinct import distinct_pairs_of  # noqa: PLC0415

    t0 = time.perf_counter()
    t_read = 0.0

    def columns():
        nonlocal t_read
        for rel in files:
            tr = time.perf_counter()
            # one thread a file: the task is one of many running side by side (Arrow's pool only queued them:
            # 95 -> 24 thread-s reading 516 M hits' p-values on a 16-thread GPU worker)
            t = storage.read_parquet(storage.join(out, rel), columns=["motif_id", "pvalue"], use_threads=False)
            f = family_codes(t.column("motif_id"), index)
            if f.size and f.min() < 0:
                raise ValueError(f"{storage.join(out, rel)}: a motif id that is not in the run's motif set")
            p = arrow.to_numpy(t.column("pvalue"))
            t_read += time.perf_counter() - tr
            yield f, p

    piece = _as_piece(*distinct_pairs_of(columns(), device=device))
    t2 = time.perf_counter()
    t1 = t0 + t_read
    result = _by_group(piece, group_starts, parts, task)
    result["seconds"] = {"collect_read": t1 - t0, "collect_distinct": t2 - t1,
                         "collect_write": time.perf_counter() - t2}
    result["rows"] = piece.size
    return result


def kept_collect_task(run: str, files: list, group_starts: np.ndarray, device: str = "cpu"):
    """:func:`collect_task` from the (family, p-value) pairs that the scan tasks of run ``run`` kept in this worker
    for its block ``files`` (:mod:`workers.scan.kept_pairs`: no file read; on a GPU worker one sort on the device),
    or None when the worker does not hold exactly those files' pairs (then the files are read)."""
    from workers.scan import kept_pairs  # noqa: PLC0415

    t0 = time.perf_counter()
    got = kept_pairs.collect(run, files, device)
    if got is None:
        return None
    piece = _as_piece(*got)
    result = _by_group(piece, group_starts, None, 0)
    result["seconds"] = {"kept_distinct": time.perf_counter() - t0}
    result["rows"] = piece.size                    # this worker's distinct pairs (the reduction's input, summed)
    return result


def _by_group(piece: np.ndarray, group_starts: np.ndarray, parts: str | None, task: int) -> dict:
    """``{group: the piece's rows of that group of families}``, as arrays, or as ``parts/g<group>/c<task>.npy``
    files (their paths) when ``parts`` is set."""
    cut = np.searchsorted(piece["family"], np.r_[group_starts, np.iinfo(np.int64).max])
    result = {}
    for g in np.flatnonzero(np.diff(cut)).tolist():
        arr = piece[cut[g]:cut[g + 1]]
        if parts is None:
            result[g] = arr
            continue
        buf = io.BytesIO()
        np.save(buf, arr, allow_pickle=False)
        path = storage.join(parts, f"g{g:06d}", f"c{task:06d}.npy")
        storage.makedirs(storage.join(parts, f"g{g:06d}"))
        storage.atomic_write_bytes(path, buf.getvalue(), durable=False)  # scratch of one run
        result[g] = path
    return result


def _kept_collected(client, kept: dict | None, run: str | None, files: list, starts: np.ndarray, device: str,
                    tag: str, lost: str | None = None):
    """The kept-pairs collect tasks (one per worker, on it) when the workers kept the pairs of every file of
    ``files`` (``kept``: worker address -> its block files), else None (nothing submitted, or their futures
    dropped), and why not (a few words, or None)."""
    if run is None:
        return None, None                          # the run kept no pairs (a CPU run, --resume, keep-pairs false)
    if not kept:
        return None, lost or ("the pairs were lost" if kept is None else "no pairs kept")
    if sorted(r for rels in kept.values() for r in rels) != sorted(r for r, _ in files):
        return None, "the workers' pairs are not those of the run's files"
    if not set(kept) <= set(client.scheduler_info().get("workers", {})):
        return None, "a worker that scanned has gone"     # and its pairs with it
    # loose restrictions: a worker that dies now does not leave its task waiting forever; run elsewhere, the
    # task finds no pairs there (None) and the files are read
    holders = sorted(kept)
    futures = [client.submit(kept_collect_task, run, kept[w], starts, device, pure=False, workers=[w],
                             allow_other_workers=True, key=f"qvalues-kept-{k}-{tag}")
               for k, w in enumerate(holders)]
    from pipeline.engine.cluster import WorkerLeft, gather_placed  # noqa: PLC0415

    try:
        held = gather_placed(client, [client.submit(_is_piece, f, pure=False, key=f"qvalues-kept-ok-{k}-{tag}")
                                      for k, f in enumerate(futures)], holders)
    except WorkerLeft:
        return None, "a worker that scanned has gone"
    return (list(zip(holders, futures)), None) if all(held) else (None, "a worker no longer held its pairs")


def _is_piece(result) -> bool:
    return result is not None


def _group_piece(result: dict, group: int) -> dict:
    """One group's rows of a collect task's result (and, for group 0, the task's seconds and rows): what a reduce
    task on another worker needs of it, so that only that group travels."""
    if result is None:
        raise KeptPairsLost("a worker that held kept pairs left")
    out = {group: result[group]} if group in result else {}
    if group == 0:
        out.update(seconds=result["seconds"], rows=result.get("rows", 0))
    return out


def _spread_reduce(client, held: list, groups: int, tests: np.ndarray, tag: str) -> list:
    """The reduce tasks of kept pieces ``held`` (``[(worker, collect future), ...]``) spread over those workers, group
    ``g`` on the ``g``-th of them in turn: each worker receives only its groups' rows of the others' pieces
    (``_group_piece`` tasks, run where each piece is), and merges them in its own process (its own GIL).  Pinned
    to one worker, the reduction of a genome's 48 M distinct pairs at 1e-4 gathered ~1 GB there and merged it on
    its threads alone (1.1-1.4 s of a 4-process GPU run: docs/benchmarks.md, session 22)."""
    owners = [w for w, _ in held]
    reduced = []
    for g in range(groups):
        picks = [client.submit(_group_piece, f, g, pure=False, workers=[w], allow_other_workers=True,
                               key=f"qvalues-pick-{k}-{g}-{tag}") for k, (w, f) in enumerate(held)]
        reduced.append(client.submit(reduce_task, g, picks, tests, pure=False, key=f"qvalues-reduce-{g}-{tag}",
                                     workers=[owners[g % len(owners)]], allow_other_workers=True))
    return reduced


def _cfg_spread() -> bool:
    import dask.config  # noqa: PLC0415

    return bool(dask.config.get("motifgrid.qvalues.spread-reduce", default=True))


def reduce_task(group: int, collected: list, tests: np.ndarray) -> dict:
    """Merge one group's pieces (from every collect task's result) and compute its families' steps (and the
    task's thread-seconds by step under ``"seconds"``; group 0's also the collect tasks')."""
    t0 = time.perf_counter()
    arrays = []
    seconds: dict = {}
    rows = 0
    if any(res is None for res in collected):     # a kept piece computed again where no pairs were kept
        raise KeptPairsLost("a worker that held kept pairs left")
    for res in collected if group == 0 else []:
        for k, v in res["seconds"].items():
            seconds[k] = seconds.get(k, 0.0) + v
        rows += res.get("rows", 0)
    for res in collected:
        x = res.get(group)
        if isinstance(x, str):
            x = np.load(io.BytesIO(storage.read_bytes(x)) if storage.is_url(x) else x, allow_pickle=False)
        if x is not None:
            arrays.append(x)
    t1 = time.perf_counter()
    if len(arrays) == 1:
        d = arrays[0]                          # already distinct and sorted
    else:   # each piece is distinct and sorted: merged, not sorted again (on one H200, 4 workers' pieces of a genome
        # at 1e-4: 1.8-2.3 thread-s of device sorts; session 10: 6.6 with numba sorts on the host)
        from workers.scan.distinct import merge_distinct  # noqa: PLC0415

        d = _as_piece(*merge_distinct([(a["family"], a["pvalue"], a["count"]) for a in arrays]))
    t2 = time.perf_counter()
    out = _steps_of(d, tests)
    out["seconds"] = {**seconds, "reduce_read": t1 - t0, "reduce_merge": t2 - t1,
                      "reduce_steps": time.perf_counter() - t2}
    out["rows"] = rows
    return out


def _steps_of(d: np.ndarray, tests: np.ndarray) -> dict:
    """:func:`steps` of every family of ``d`` (a ``_PIECE`` array sorted by family, then p-value) in one
    compiled call (no GIL: a Python loop over 879 families queued on it behind 15 other threads, 11 thread-s
    of a genome's reduction): ``{"family", "pvalue", "qvalue", "hits"}``, (k,) each."""
    from workers.scan.distinct_numba import bh_steps  # noqa: PLC0415

    n = d.size
    fam = np.ascontiguousarray(d["family"], np.int64)
    out = {"pvalue": np.empty(n), "qvalue": np.empty(n), "hits": np.empty(n, np.int64),
           "family": np.empty(n, np.int64)}
    k = bh_steps(fam, np.ascontiguousarray(d["pvalue"]), np.ascontiguousarray(d["count"], np.int64),
                 np.ascontiguousarray(tests, np.int64), out["pvalue"], out["qvalue"], out["hits"], out["family"])
    if k < 0:
        f = int(fam[-1 - k])
        hits = int(d["count"][fam == f].sum())
        raise ValueError(f"{hits} hits but only {int(tests[f])} tests")
    return {key: v[:k] for key, v in out.items()}


# ------------------------------------------------------------------------------------ the reduction
def _cfg_task_hits() -> int:
    import dask.config  # noqa: PLC0415

    return int(dask.config.get("motifgrid.qvalues.task-hits", default=20_000_000))


#: bytes a p-value takes in a task of the reduction (read back, sorted, counted: measured ~50)
_BYTES_PER_HIT = 50


def _task_hits(client) -> int:
    """``motifgrid.qvalues.task-hits``, or less where the workers' memory limits say so: two tasks per thread,
    each within a quarter of a thread's share of its worker's limit (a node of 4 GB and 16 threads: 1.25 M hits a
    task, not 20 M).  Workers without a limit leave the setting as it is."""
    cap = _cfg_task_hits()
    for w in client.scheduler_info().get("workers", {}).values():
        limit, threads = int(w.get("memory_limit") or 0), max(1, int(w.get("nthreads") or 1))
        if limit:
            cap = min(cap, max(1, limit // (threads * 4 * _BYTES_PER_HIT)))
    return cap


#: groups of motifs a worker at most when kept pieces are reduced where they are (:func:`_spread_reduce`)
_SPREAD_GROUPS = 8
#: hits below which the collect is one task (0.2 s for 2.2 M hits on one core): more tasks only add overhead
_MIN_SPLIT = 2_000_000


def _cuts(sizes, budget: int, max_items: int | None = None) -> list:
    """Consecutive items in groups of at most ``budget`` summed size (an item larger than it alone)."""
    groups, cur, tot = [], [], 0
    for i, s in enumerate(sizes):
        if cur and (tot + s > budget or (max_items and len(cur) >= max_items)):
            groups.append(cur)
            cur, tot = [], 0
        cur.append(i)
        tot += int(s)
    if cur:
        groups.append(cur)
    return groups


def _rmtree(path: str) -> None:
    if storage.is_url(path):
        fs, p = storage.url_to_fs(path)
        if fs.exists(p):
            fs.rm(p, recursive=True)
        return
    import shutil  # noqa: PLC0415

    shutil.rmtree(path, ignore_errors=True)


def _pieces_worker(client, hits: int) -> str | None:
    """The worker (address) with the largest memory limit, if that limit holds the pieces of ``hits`` hits four
    times over (at most one (family, p-value, count) each, ``_PIECE.itemsize`` bytes); else None."""
    limits = {a: w.get("memory_limit") or 0 for a, w in client.scheduler_info().get("workers", {}).items()}
    best = max(limits, key=limits.get, default=None)
    return best if best is not None and 4 * hits * _PIECE.itemsize <= limits[best] else None


class KeptPairsLost(RuntimeError):
    """A worker that held kept pairs left after they were checked: the reduction reads the files instead."""


def compute_qvalues(client, out: str, files: list, motif_ids: list, tests: np.ndarray, hits: np.ndarray,
                    max_qvalue: float | None = None, level: float = 0.05, device: str = "cpu",
                    kept: dict | None = None, run: str | None = None, kept_lost: str | None = None) -> dict:
    """Write ``out/_qvalues.parquet`` for the finished block ``files`` (``[(relative path, hits), ...]``).

    ``motif_ids``, ``tests``, ``hits``: per motif of the run (tests = windows without N × 2 strands).  ``kept``
    (worker address -> block files) and ``run``: the scan tasks kept the files' (family, p-value) pairs in their
    workers under this run key (:mod:`workers.scan.kept_pairs`): collected there, not read from the files, when
    every file's pairs are held; ``kept_lost``: why ``kept`` is None when the scan lost them (reported).  Returns a
    small summary: hits with q <= ``max_qvalue`` (or ``level``), tasks, whether the kept pairs were used (and why
    not: ``kept_pairs_fallback``), seconds.

    Workers may leave at any moment (a nanny restarting them, preemption, the OOM killer): no task is bound to one
    worker without a fallback (a task placed on a worker runs elsewhere when that worker has gone), and pairs kept
    in a worker that leaves make the reduction read the files instead (:class:`KeptPairsLost`)."""
    t0 = time.perf_counter()
    ids, fam = families(motif_ids)
    tests_f = np.zeros(len(ids), np.int64)
    hits_f = np.zeros(len(ids), np.int64)
    np.add.at(tests_f, fam, np.asarray(tests, np.int64))
    np.add.at(hits_f, fam, np.asarray(hits, np.int64))
    from pipeline.engine.cluster import WorkerLeft  # noqa: PLC0415

    r = _Reduction(client, out, files, {m: f for f, m in enumerate(ids)}, hits_f, tests_f, device, kept)
    held, fallback = _kept_collected(client, kept, run, files, r.starts, device, r.tag, kept_lost)
    t_collected = time.perf_counter()                # the kept pairs' collect tasks have answered (if any)
    try:
        results, n_tasks = r.run(held)
    except (KeptPairsLost, WorkerLeft) as e:        # read the files again, on whichever workers there are
        held, fallback = None, f"{e}; the files were read"
        r.unplace()
        results, n_tasks = r.run(None)
    t_reduced = time.perf_counter()
    steps_s: dict = {}
    piece_rows = 0
    for res in results:
        for k, v in res.pop("seconds").items():
            steps_s[k] = steps_s.get(k, 0.0) + v
        piece_rows += res.pop("rows", 0)
    table, qmap = _qvalue_table(results, ids, tests_f, max_qvalue)
    t_table = time.perf_counter()
    storage.write_parquet(table, storage.join(out, QVALUES_FILE))
    t_written = time.perf_counter()
    at = max_qvalue if max_qvalue is not None else level
    return {"level": at, "hits_at_level": qmap.hits_at(at), "max_qvalue": max_qvalue, "steps": table.num_rows,
            "families": len(ids), "tests": int(tests_f.sum()), "tasks": n_tasks, "kept_pairs": held is not None,
            "kept_pairs_fallback": fallback,         # why kept pairs were not used (the files read instead), or None
            "seconds": time.perf_counter() - t0, "seconds_tasks_wall": t_reduced - t0,
            # wall-clock phases (docs/benchmarks.md): kept pairs collected, reduced, map built, map written
            "phases": {"collected": t_collected - t0, "reduced": t_reduced - t0, "table": t_table - t0,
                       "written": t_written - t0},
            "task_seconds_by_step": steps_s, "piece_rows": piece_rows}


class _Reduction:
    """The collect and reduce tasks of one q-value reduction, planned from the run's files and the workers.

    The collect tasks' pieces go to the reduce tasks through Dask (in memory) when there is one group of motifs, or
    when one worker has the memory to hold them all: then every task of the reduction is placed on that worker
    (``pin``), its reduce tasks reading the pieces where they are (writing and reading ~1,000 part files cost a
    genome's reduction 37 of 116 thread-s on one H100; on 2x H200, 16 threads each, the reduction took 3.8 s on one
    worker in memory, 7.2 s on both through files and 11.6 s on both through Dask's transfers: docs/benchmarks.md,
    session 8); otherwise through files, so that no process holds more than one group's pieces.  Pieces kept in
    several workers are reduced where they are instead, each worker a share of the groups (:func:`_spread_reduce`).
    """

    def __init__(self, client, out, files, index, hits_f, tests_f, device, kept):
        self.client, self.out, self.files, self.index, self.tests_f, self.device = (client, out, files, index,
                                                                                   tests_f, device)
        total = sum(h for _, h in files)
        self.pin = _pieces_worker(client, total)
        nthreads = client.nthreads()
        self.spread = _cfg_spread() and bool(kept) and len(kept) > 1     # kept pieces in several workers
        threads = max(1, nthreads.get(self.pin, 0) if self.pin and not self.spread else sum(nthreads.values()))
        # two tasks per worker thread, each within [_MIN_SPLIT, task-hits] hits: collect tasks x motif groups part
        # files go through the shuffle, so they stay ~(2 threads)^2 (2 M-hit tasks made 258^2 = 66 k files for the
        # 516 M hits of a human genome at 1e-4), and no two tasks per thread hold more than 2 x task-hits p-values
        task_hits = _task_hits(client)
        budget = min(task_hits, max(_MIN_SPLIT, -(-total // (2 * threads))))
        self.file_groups = _cuts([h for _, h in files], budget, max_items=2048)
        if self.spread:  # each group's rows of every piece travel as a task of their own: a few groups a worker
            # (144 groups over 4 workers of 16 threads put 576 such tasks on the scheduler, 0.7 s: docs/benchmarks.md)
            fam_groups = _cuts(hits_f, min(task_hits, max(budget, -(-total // (_SPREAD_GROUPS * len(kept))))))
        else:
            fam_groups = _cuts(hits_f, budget)
        self.groups = len(fam_groups)
        self.starts = np.array([g[0] for g in fam_groups], dtype=np.int64)
        self.tag = uuid.uuid4().hex[:6]
        self.parts = storage.join(out, PARTS_DIR)
        # placed on the pin while it lives; elsewhere once it has left (loose: a worker lost after the last block
        # left these tasks waiting for its address forever, issue 45)
        self.on = ({"workers": [self.pin], "allow_other_workers": True} if self.pin and len(nthreads) > 1 else {})

    def unplace(self) -> None:
        """No task placed on any worker from now on, the pieces through files when there are several groups: the
        worker the reduction was placed on, or one that held kept pairs, has left."""
        self.pin, self.on, self.spread = None, {}, False

    def run(self, held) -> tuple:
        """The reduce tasks' results and the number of tasks: from the pieces ``held`` in the workers (the kept
        pairs' collect futures), else from the files.  :class:`KeptPairsLost` when a holder left meanwhile."""
        client, tag = self.client, self.tag
        _rmtree(self.parts)                          # left by a reduction that was interrupted
        if held is not None:
            collected = [f for _, f in held]
        else:
            where = self.parts if self.groups > 1 and self.pin is None else None
            tag = self.tag = uuid.uuid4().hex[:6]    # a fallback's keys are new ones
            collected = [client.submit(collect_task, self.out, [self.files[i][0] for i in g], self.index, self.starts,
                                       where, k, self.device, pure=False, key=f"qvalues-collect-{k}-{tag}", **self.on)
                         for k, g in enumerate(self.file_groups)]
        if held is not None and self.spread:
            reduced = _spread_reduce(client, held, self.groups, self.tests_f, tag)
        else:
            reduced = [client.submit(reduce_task, g, collected, self.tests_f, pure=False,
                                     key=f"qvalues-reduce-{g}-{tag}", **self.on) for g in range(self.groups)]
        from pipeline.engine.cluster import gather_placed  # noqa: PLC0415

        placed = set(self.on.get("workers", ())) | {w for w, _ in held or ()}
        try:
            return gather_placed(client, reduced, placed), len(collected) + len(reduced)
        finally:
            for f in [*collected, *reduced]:
                f.release()
            _rmtree(self.parts)


def _qvalue_table(results: list, ids: list, tests_f: np.ndarray, max_qvalue) -> tuple:
    """The map's table (rows grouped by motif, ascending in p-value) of the reduce tasks' ``results``, and the map."""
    cat = {k: np.concatenate([r[k] for r in results]) for k in ("family", "pvalue", "qvalue", "hits")}
    order = np.lexsort((cat["pvalue"], cat["family"]))
    cat = {k: v[order] for k, v in cat.items()}
    info = {"method": "benjamini-hochberg", "pi0": 1.0, "tests": "windows without N x 2 strands, per motif id",
            "max_qvalue": max_qvalue, "families": len(ids), "tests_total": int(tests_f.sum())}
    # motif ids through a dictionary, decoded in Arrow: a Python list of one string per step (1-2 M steps for a
    # genome at 1e-4) took a fifth of a second on the client
    motif_id = arrow.dictionary(cat["family"].astype(np.int32), arrow.strings(ids)).dictionary_decode()
    table = arrow.table({"motif_id": motif_id,
                         "pvalue": cat["pvalue"].astype(np.float64), "qvalue": cat["qvalue"].astype(np.float64),
                         "hits": cat["hits"].astype(np.int64)}, schema=QVALUES_SCHEMA)
    table = table.replace_schema_metadata({_META_KEY: json.dumps(info).encode()})
    qmap = QvalueMap.from_rows(cat["family"].astype(np.int64), ids, cat["pvalue"], cat["qvalue"], cat["hits"],
                               info)                 # what is written, not read back
    return table, qmap
