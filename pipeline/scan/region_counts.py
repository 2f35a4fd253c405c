"""The peaks × motifs table: hits, best score and best p-value per (record or region, motif) with hits.

Each scan task reduces its block's hits (:func:`block_counts`, ``HITS/_counts/<block>.parquet``, sorted by
(key, motif)); the end of the run merges the blocks into ``HITS/_region_counts.parquet`` (:func:`write_region_counts`).
A key is a record number (a scan of a store or a FASTA) or a region number (``--regions``).  Blocks come in packed
order, so their sorted keys mostly follow one another: the merge is one linear pass over runs of equal keys (a sort
only when overlapping regions make the keys of two blocks interleave).  NumPy throughout: ``Table.group_by`` and
``pyarrow.dataset`` import pandas, which a scan never does.
"""
from __future__ import annotations

import threading
import time

import numpy as np
import pyarrow as pa

from pipeline.io import arrow, storage

COUNTS_DIR = "_counts"
REGION_COUNTS_FILE = "_region_counts.parquet"
_COLUMNS = ("key", "motif", "hits", "best_score", "best_pvalue")
_PRESENCE_CELLS = 1 << 26       # block_presence's table of marks: at most 64 MB, else it sorts
_COUNT_SORT_SPAN = 1 << 22      # block_counts' counting sort by key: at most 32 MB of counts, else NumPy sorts
#: rows of a row group of ``_region_counts.parquet`` (~50 MB of arrays): each row group repeats the name
#: dictionaries (100,000 peaks: 37 one-block row groups wrote in 1.48 s, 6 of 1 Mi rows in 0.66 s)
_ROW_GROUP = 1 << 20


def block_counts(key: np.ndarray, motif: np.ndarray, row: np.ndarray, score: np.ndarray, pvalue: np.ndarray,
                 n_motifs: int) -> pa.Table:
    """One block's counts, from its hits in (plan row, position) order.

    Within a plan row the hits ascend in position, so their keys (records, or regions) ascend too: the hits of
    one (row, key) are one run, reduced in place; only the runs are then sorted (a genome block: ~2 runs per
    motif, not millions of hits).

    Parameters
    ----------
    key, motif, row : ndarray, shape (n,), int
        Each hit's record (or region) number, motif number and plan row, in (row, position) order.
    score, pvalue : ndarray, shape (n,), float64
    n_motifs : int

    Returns
    -------
    pyarrow.Table
        ``key`` int64, ``motif`` int32, ``hits`` int64, ``best_score``, ``best_pvalue`` float64; one row per
        (key, motif) with hits, sorted by (key, motif).
    """
    n = key.size
    if n == 0:
        return arrow.table({"key": np.zeros(0, np.int64), "motif": np.zeros(0, np.int32), "hits": np.zeros(0, np.int64),
                            "best_score": np.zeros(0), "best_pvalue": np.zeros(0)})
    if int(key.max()) - int(key.min()) <= _COUNT_SORT_SPAN:      # a block's records or regions: a count table
        from workers.scan.counts_numba import reduce_block  # noqa: PLC0415

        cols = reduce_block(np.ascontiguousarray(key, np.int64), np.ascontiguousarray(motif, np.int32),
                            np.ascontiguousarray(row, np.int32), np.ascontiguousarray(score, np.float64),
                            np.ascontiguousarray(pvalue, np.float64), n_motifs)
        return arrow.table(dict(zip(_COLUMNS, cols)))
    first = np.flatnonzero(np.r_[True, (row[1:] != row[:-1]) | (key[1:] != key[:-1])])
    runs = {"key": key[first].astype(np.int64), "motif": motif[first].astype(np.int32),
            "hits": np.diff(np.append(first, n)).astype(np.int64),
            "best_score": np.maximum.reduceat(score, first), "best_pvalue": np.minimum.reduceat(pvalue, first)}
    return arrow.table(_reduce(runs, n_motifs))


def block_presence(key: np.ndarray, motif: np.ndarray, n_motifs: int, groups: np.ndarray | None = None,
                   split: np.ndarray | None = None) -> pa.Table:
    """The distinct (key, motif) pairs of a block's hits, sorted: a scan without hits files (``motifgrid enrich``
    counts sequences with a site), ~20x cheaper than :func:`block_counts` (no p-values, no sort: a mark per pair
    in a (keys in the block) x motifs table).  With ``groups``, the keys held by this block alone are counted
    instead of listed: one row per (group, motif) with ``key = -1 - group`` and ``records`` the number of its keys
    with hits (100,000 peaks and as many controls: 3·10⁷ pairs written and read back became 2 x 2,346 counts a
    block); only the keys of ``split`` records keep a (key, motif) row each (``records`` 1), to be made distinct
    over the blocks that share them.

    Parameters
    ----------
    key, motif : ndarray, shape (n,), int
        Each hit's record (or region) number and motif number, any order.
    n_motifs : int
    groups : ndarray, shape (K,), int, optional
        The group of every key (e.g. 0 targets, 1 controls).
    split : ndarray, shape (K,), bool, optional
        Keys whose windows start in more than one block core (needed with ``groups``).

    Returns
    -------
    pyarrow.Table
        ``key`` int64, ``motif`` int32 (and ``records`` int64 with ``groups``); one row per (key, motif) with hits,
        sorted by (key, motif).
    """
    if groups is not None and key.size and (int(key.max()) - int(key.min()) + 1) * n_motifs <= _PRESENCE_CELLS:
        return _grouped_presence(key, motif, n_motifs, groups, split)
    if key.size == 0:
        k, m = np.zeros(0, np.int64), np.zeros(0, np.int32)
    else:
        lo, hi = int(key.min()), int(key.max())
        if (hi - lo + 1) * n_motifs > _PRESENCE_CELLS:         # keys far apart (overlapping regions): a sort
            pair = np.unique(key.astype(np.int64) * n_motifs + motif)
            k, m = pair // n_motifs, (pair % n_motifs).astype(np.int32)
        else:
            seen = np.zeros((hi - lo + 1, n_motifs), bool)
            seen[key - lo, motif] = True
            k, m = np.nonzero(seen)
            k, m = k.astype(np.int64) + lo, m.astype(np.int32)
    if groups is None:
        return arrow.table({"key": k, "motif": m})
    alone = ~split[k]                               # keys far apart with groups (a block too wide for the marks)
    n_groups = int(groups.max()) + 1
    counts = np.bincount(groups[k[alone]].astype(np.int64) * n_motifs + m[alone], minlength=n_groups * n_motifs)
    return _grouped_table(counts.reshape(n_groups, n_motifs), k[~alone], m[~alone])


def _grouped_presence(key, motif, n_motifs, groups, split) -> pa.Table:
    """:func:`block_presence` with groups, in one compiled pass (:func:`workers.scan.counts_numba.presence_counts`)."""
    from workers.scan.counts_numba import presence_counts  # noqa: PLC0415

    lo = int(key.min())
    counts, pk, pm = presence_counts(np.ascontiguousarray(key, np.int64), np.ascontiguousarray(motif, np.int32), lo,
                                     int(key.max()) - lo + 1, n_motifs, np.ascontiguousarray(groups, np.int64),
                                     np.ascontiguousarray(split, np.bool_), int(groups.max()) + 1)
    o = np.lexsort((pm, pk))
    return _grouped_table(counts, pk[o], pm[o])


def _grouped_table(counts: np.ndarray, pk: np.ndarray, pm: np.ndarray) -> pa.Table:
    """The grouped presence rows: ``counts`` (groups, motifs) as rows ``key = -1 - group`` (keys ascending, so groups
    descending), then the split keys' pairs ``pk``, ``pm`` (sorted), ``records`` 1 each."""
    n_groups = counts.shape[0]
    g, m = np.nonzero(counts[::-1])
    g = n_groups - 1 - g
    return arrow.table({"key": np.concatenate([-1 - g.astype(np.int64), pk.astype(np.int64)]),
                        "motif": np.concatenate([m, pm]).astype(np.int32),
                        "records": np.concatenate([counts[g, m], np.ones(pk.size, np.int64)])})


def split_keys(offsets: np.ndarray, ends: np.ndarray, block_size: int) -> np.ndarray:
    """Records whose windows start in more than one block core, (K,) bool: those a block's counts cannot settle."""
    return offsets // block_size != np.maximum(ends - 1, offsets) // block_size


def _counts_rel(block_id: str) -> str:
    """A block's counts file, relative to the hits folder."""
    return f"{COUNTS_DIR}/{block_id}.parquet"


def write_block_counts(out: str, block_id: str, table: pa.Table) -> str:
    """``HITS/_counts/<block>.parquet``; its path relative to ``out``."""
    rel = _counts_rel(block_id)
    storage.makedirs(storage.join(out, COUNTS_DIR))
    # a scratch file of the run, read once by the merge: no dictionaries or statistics (14 vs 21 ms a block)
    storage.write_parquet(table, storage.join(out, rel), use_dictionary=False, write_statistics=False)
    return rel


def _parts(out: str, columns=_COLUMNS):
    """Each block's counts as a dict of arrays, in block order."""
    folder = storage.join(out, COUNTS_DIR)
    files = sorted(f for f in storage.listdir(folder) if f.endswith(".parquet") and not f.startswith(".")) \
        if storage.exists(folder) else []
    for f in files:
        yield _read_part(storage.join(folder, f), columns)


def _read_part(path: str, columns=_COLUMNS) -> dict:
    t = storage.read_parquet(path, columns=list(columns))
    return {c: arrow.to_numpy(t.column(c)) for c in columns}


def _reduce(col: dict, n_motifs: int) -> dict:
    """Rows of equal (key, motif) summed (hits) / maxed (score) / minimised (p-value); sorted by (key, motif)."""
    k = col["key"].astype(np.int64) * n_motifs + col["motif"].astype(np.int64)
    if k.size and (np.diff(k) < 0).any():
        o = np.argsort(k, kind="stable")
        k, col = k[o], {c: v[o] for c, v in col.items()}
    if not k.size:
        return {c: v[:0] for c, v in col.items()}
    first = np.flatnonzero(np.r_[True, k[1:] != k[:-1]])
    return {"key": (k[first] // n_motifs).astype(np.int64), "motif": (k[first] % n_motifs).astype(np.int32),
            "hits": np.add.reduceat(col["hits"].astype(np.int64), first),
            "best_score": np.maximum.reduceat(col["best_score"], first),
            "best_pvalue": np.minimum.reduceat(col["best_pvalue"], first)}


def _interleaved(out: str) -> bool:
    """True when a block's first key comes before the previous block's last one (overlapping regions)."""
    last = -1
    for part in _parts(out, ("key",)):
        k = part["key"]
        if k.size:
            if k[0] < last:
                return True
            last = int(k[-1])
    return False


def _merged(out: str, n_motifs: int, parts=None):
    """The blocks' counts reduced per (key, motif), a chunk at a time, in (key, motif) order.

    Blocks come in packed order, so only the last key of a block can continue in the next one (a record or region
    across the border): that key's rows are carried into the next block's chunk; the rest is final, and memory holds
    one block's counts.  When the keys of two blocks interleave (overlapping regions), all is reduced at once.
    ``parts``: the blocks' counts in block order, whose keys never interleave (records), instead of ``_counts/``."""
    if parts is None and _interleaved(out):
        parts = list(_parts(out))
        if parts:
            yield _reduce({c: np.concatenate([p[c] for p in parts]) for c in _COLUMNS}, n_motifs)
        return
    carry = None
    for part in (_parts(out) if parts is None else parts):      # each already reduced and sorted by (key, motif)
        if not part["key"].size:
            continue
        if carry is not None and part["key"][0] == carry["key"][0]:      # the carried key goes on here
            same = int(np.searchsorted(part["key"], part["key"][0], side="right"))
            head = _reduce({c: np.concatenate([carry[c], part[c][:same]]) for c in _COLUMNS}, n_motifs)
            part = {c: np.concatenate([head[c], part[c][same:]]) for c in _COLUMNS}
        elif carry is not None:
            yield carry
        tail = int(np.searchsorted(part["key"], part["key"][-1], side="left"))
        carry = {c: v[tail:] for c, v in part.items()}
        yield {c: v[:tail] for c, v in part.items()}
    if carry is not None:
        yield carry


def _row_groups(tables, rows: int = _ROW_GROUP):
    """The tables regrouped into tables of at least ``rows`` rows (the last one smaller); chunks not copied."""
    buf, n = [], 0
    for t in tables:
        buf.append(t)
        n += t.num_rows
        if n >= rows:
            yield pa.concat_tables(buf)
            buf, n = [], 0
    if buf:
        yield pa.concat_tables(buf)


def write_region_counts(out: str, records, regions, motif_ids: list, motif_names: list, parts=None) -> None:
    """``HITS/_region_counts.parquet`` (:data:`pipeline.io.schema.REGION_COUNTS_SCHEMA`): the blocks' counts merged,
    written a chunk (row group) at a time.  ``records``: the store's record table; ``regions``: the scan's
    :class:`pipeline.io.regions.Regions` or None; ``parts``: the blocks' counts as :func:`_merged` takes them."""
    from pipeline.io.schema import REGION_COUNTS_SCHEMA  # noqa: PLC0415

    names = arrow.strings(records.names)           # each string once, rows by dictionary index (6.8 M rows for
    ids, mnames = arrow.strings(motif_ids), arrow.strings(motif_names)   # 26,454 promoters: per-row strings, 20 s)
    region_names = None if regions is None else arrow.strings(regions.names)

    def table(m: dict) -> pa.Table:
        key, motif = m["key"].astype(np.int32), m["motif"].astype(np.int32)
        if regions is not None:
            region = arrow.dictionary(key, region_names)
            chrom = arrow.dictionary(regions.record[key].astype(np.int32), names)
            start, end = regions.start[key], regions.end[key]
        else:
            region = chrom = arrow.dictionary(key, names)
            start, end = np.zeros(key.size, np.int64), records.lengths[key]
        return arrow.table({"region": region, "chrom": chrom, "start": start, "end": end,
                            "motif_id": arrow.dictionary(motif, ids), "motif_name": arrow.dictionary(motif, mnames),
                            "hits": m["hits"], "best_score": m["best_score"], "best_pvalue": m["best_pvalue"]},
                           schema=REGION_COUNTS_SCHEMA)

    empty = {c: np.zeros(0, np.int64 if c in ("key", "motif", "hits") else np.float64) for c in _COLUMNS}
    # row-group statistics for every column but the motifs' (every row group holds every motif: they prune
    # nothing, and their string min/max cost a fifth of the write)
    stats = [f.name for f in REGION_COUNTS_SCHEMA if f.name not in ("motif_id", "motif_name")]
    # dictionary pages for the names only: tried on the numbers, a dictionary is built and dropped for each
    # column chunk (1.12 -> 0.85 s for the 6.1 M rows of 100,000 peaks, the file 27 % larger).  Every row group
    # keeps the whole name list: dictionaries sliced to each row group's keys wrote in 0.46 s, but readers then
    # meet differing dictionaries (pyarrow's group_by refuses them)
    strings = [f.name for f in REGION_COUNTS_SCHEMA if pa.types.is_dictionary(f.type)]
    storage.write_parquet_chunks(_row_groups(table(m) for m in _merged(out, len(motif_ids), parts)), REGION_COUNTS_SCHEMA,
                                 storage.join(out, REGION_COUNTS_FILE), empty=table(empty), write_statistics=stats,
                                 use_dictionary=strings, row_group_size=2 * _ROW_GROUP)


class StreamingRegionCounts:
    """``_region_counts.parquet`` written while the scan runs: a thread merges each block's counts as soon as that
    block and every block before it are finished (tasks finish about in block order), so that the end of the run
    only merges the last blocks and closes the file.  For scans keyed by record (no ``--regions``): their blocks'
    keys never interleave.  100,000 peaks on 2 cores: the merge, 1.2-1.5 s after the tasks, now runs beside them.

    Parameters
    ----------
    out : str
        The hits folder.
    block_ids : list of str
        Every block of the scan (finished in earlier runs or not).
    finished : iterable of str
        Blocks already finished (``--resume``).
    records, motif_ids, motif_names
        As :func:`write_region_counts`.
    """

    def __init__(self, out: str, block_ids, finished, records, motif_ids: list, motif_names: list):
        self.out, self.order = out, sorted(block_ids)
        self._done, self._stop, self._cond = set(finished), False, threading.Condition()
        self._error: BaseException | None = None
        self._seconds = 0.0
        self._thread = threading.Thread(target=self._run, args=(records, motif_ids, motif_names),
                                        name="motifgrid-region-counts", daemon=True)
        self._thread.start()

    def finished(self, block_ids) -> None:
        """These blocks are written (their counts files, if they have hits, are in place)."""
        with self._cond:
            self._done.update(block_ids)
            self._cond.notify()

    def _ready(self):
        for bid in self.order:
            with self._cond:
                while bid not in self._done and not self._stop:
                    self._cond.wait()
                if self._stop:
                    raise _Cancelled
            path = storage.join(self.out, _counts_rel(bid))
            if storage.exists(path):                 # a block without hits has no counts
                yield _read_part(path)

    def _run(self, records, motif_ids, motif_names) -> None:
        t = time.perf_counter()
        try:
            write_region_counts(self.out, records, None, motif_ids, motif_names, parts=self._ready())
        except _Cancelled:
            pass
        except BaseException as e:      # noqa: BLE001 - handed to close()
            self._error = e
        self._seconds = time.perf_counter() - t

    def close(self) -> float:
        """Wait for the file (every block must have been reported finished); its thread's seconds.  Raises what
        the writer raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._seconds

    def cancel(self) -> None:
        """Stop without a file (a failed scan): the writer's temporary file is removed."""
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join()


class _Cancelled(Exception):
    pass
