"""Sorting text records that may not fit in memory: sorted runs on disk, then a k-way merge.

Records (one output line each, as an Arrow string array) come with sort keys (a tuple of NumPy arrays,
most significant first).  Up to ``max_rows`` are held and sorted in memory; beyond that each full buffer
is sorted and written as a run (a Parquet file in a temporary folder) and the runs are merged in batches:
every run holds a buffer of rows, all buffered rows with keys up to the smallest last key among runs not
yet exhausted are sorted and written, and the emptied buffers are refilled.  The sort is stable (a row
counter is the last key), so the output is the same however many runs there are.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa


def _order(keys: list) -> np.ndarray:
    return np.lexsort(keys[::-1])          # lexsort's last key is the most significant


def _le(keys: list, bound: tuple) -> int:
    """Rows of sorted ``keys`` that are <= ``bound`` (lexicographically): they form a prefix."""
    n = keys[0].size
    less = np.zeros(n, dtype=bool)
    eq = np.ones(n, dtype=bool)
    for k, b in zip(keys, bound):
        less |= eq & (k < b)
        eq &= k == b
    return int(np.count_nonzero(less | eq))


class ExternalSort:
    """``add`` records with keys, then ``write(f)`` writes their lines to text file ``f`` in key order."""

    def __init__(self, tmp_parent: str, max_rows: int = 1_000_000):
        self.tmp_parent = tmp_parent
        self.max_rows = max(1, int(max_rows))
        self.keys: list = []            # per added chunk: list of key arrays
        self.lines: list = []           # per added chunk: pa.StringArray
        self.held = 0
        self.seen = 0
        self.runs: list = []
        self.tmp = None

    def add(self, keys: tuple, lines) -> None:
        lines = lines if isinstance(lines, pa.Array) else pa.array(lines, pa.string())
        n = len(lines)
        if n == 0:
            return
        seq = np.arange(self.seen, self.seen + n, dtype=np.int64)      # stability: input order breaks ties
        self.seen += n
        self.keys.append([np.asarray(k) for k in keys] + [seq])
        self.lines.append(lines)
        self.held += n
        if self.held >= self.max_rows:
            self._spill()

    def _take(self):
        keys = [np.concatenate(k) for k in zip(*self.keys)]
        lines = pa.concat_arrays(self.lines)
        self.keys, self.lines, self.held = [], [], 0
        o = _order(keys)
        return [k[o] for k in keys], lines.take(pa.array(o))

    def _spill(self) -> None:
        import pyarrow.parquet as pq  # noqa: PLC0415

        if self.tmp is None:
            self.tmp = tempfile.mkdtemp(prefix=".sort-", dir=self.tmp_parent)
        keys, lines = self._take()
        t = pa.table({**{f"k{i}": k for i, k in enumerate(keys)}, "line": lines})
        path = os.path.join(self.tmp, f"run-{len(self.runs):06d}.parquet")
        pq.write_table(t, path, compression="lz4")
        self.runs.append(path)

    def write(self, f) -> None:
        """Write every line (newline-terminated) to ``f`` in key order; temporary runs are removed."""
        try:
            if not self.runs:
                if self.held:
                    _, lines = self._take()
                    _write_lines(f, lines)
                return
            if self.held:
                self._spill()
            self._merge(f)
        finally:
            self.close()

    def close(self) -> None:
        if self.tmp is not None:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None

    def _merge(self, f) -> None:
        import pyarrow.parquet as pq  # noqa: PLC0415

        batch = max(1024, self.max_rows // (2 * len(self.runs)))       # all buffers together: ~max_rows / 2
        files = [pq.ParquetFile(p) for p in self.runs]
        nkeys = files[0].schema_arrow.names.index("line")
        its = [pf.iter_batches(batch_size=batch) for pf in files]
        bufs: list = [None] * len(its)

        def refill(i):
            b = next(its[i], None)
            if b is None:                  # run exhausted: it no longer bounds what may be written
                its[i] = bufs[i] = None
            else:
                bufs[i] = ([b.column(j).to_numpy() for j in range(nkeys)], b.column(nkeys))

        for i in range(len(its)):
            refill(i)
        while any(b is not None for b in bufs):
            live = [i for i, b in enumerate(bufs) if b is not None]
            # rows up to the smallest last buffered key of a run with more to read are all known: write them
            bound = min((tuple(k[-1] for k in bufs[i][0]) for i in live if its[i] is not None), default=None)
            keys, lines = [], []
            for i in live:
                k, ln = bufs[i]
                n = k[0].size if bound is None else _le(k, bound)
                if n:
                    keys.append([x[:n] for x in k])
                    lines.append(ln.slice(0, n))
                if n == k[0].size:
                    refill(i)
                else:
                    bufs[i] = ([x[n:] for x in k], ln.slice(n))
            if lines:
                cat = [np.concatenate(x) for x in zip(*keys)]
                _write_lines(f, pa.concat_arrays(lines).take(pa.array(_order(cat))))


def _write_lines(f, lines: pa.Array) -> None:
    step = 1 << 16
    for lo in range(0, len(lines), step):
        f.write("\n".join(lines.slice(lo, step).to_pylist()) + "\n")
