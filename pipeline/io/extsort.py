"""Sorting text records that may not fit in memory: sorted runs on disk, then a k-way merge.

Records (one output line each) come with sort keys (a tuple of NumPy arrays, most significant first).  Up
to ``max_rows`` are held and sorted in memory (``np.lexsort``, stable: ties keep the input order).  Beyond
that each full buffer is sorted and written as a run (an Arrow IPC file in a temporary folder, by default in ``TMPDIR`` as
sort(1) does; read back
memory-mapped) with the rows' input positions as a last key, and the runs are merged in rounds: every run
holds its current batch, all held rows with keys up to the smallest last key among runs not yet exhausted
are sorted and written, and the emptied batches are replaced by the runs' next ones.  The output is the same
however many runs there are.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import numpy as np
import pyarrow as pa

from pipeline.io import arrow


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
    """``add`` records with keys, then ``write(f)`` writes their lines to binary file ``f`` in key order."""

    def __init__(self, tmp_parent: str | None = None, max_rows: int = 1_000_000):
        self.tmp_parent = tmp_parent
        self.max_rows = max(1, int(max_rows))
        self.keys: list = []            # per added chunk: list of key arrays
        self.lines: list = []           # per added chunk: pa.StringArray
        self.held = 0
        self.seen = 0                   # rows added before the held ones
        self.runs: list = []
        self.tmp = None

    def add(self, keys: tuple, lines) -> None:
        lines = lines if isinstance(lines, pa.Array) else arrow.strings(lines)
        if len(lines) == 0:
            return
        self.keys.append([np.asarray(k) for k in keys])
        self.lines.append(lines)
        self.held += len(lines)
        if self.held >= self.max_rows:
            self._spill()

    def _take(self):
        """The held rows, sorted: (keys, input positions, lines)."""
        keys = [np.concatenate(k) for k in zip(*self.keys)]
        lines = pa.concat_arrays(self.lines)
        o = _order(keys)
        seq = self.seen + o.astype(np.int64)
        self.seen += len(lines)
        self.keys, self.lines, self.held = [], [], 0
        return [k[o] for k in keys], seq, lines.take(arrow.column(o))

    def _spill(self) -> None:
        if self.tmp is None:
            self.tmp = tempfile.mkdtemp(prefix="motifgrid-sort-", dir=self.tmp_parent)
        keys, seq, lines = self._take()
        t = arrow.table({**{f"k{i}": k for i, k in enumerate(keys)}, "seq": seq, "line": lines})
        path = os.path.join(self.tmp, f"run-{len(self.runs):06d}.arrow")
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, t.schema) as w:
            w.write_table(t, max_chunksize=max(1024, self.max_rows // 16))
        self.runs.append(path)

    def write(self, f) -> None:
        """Write every line (newline-terminated) to ``f`` in key order; temporary runs are removed."""
        try:
            if not self.runs:
                if self.held:
                    write_lines(f, self._take()[2])
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
        # read, not memory-mapped: a mapped run's pages stay in the process's RSS once touched (115 bytes a row
        # of a 39 M-hit FIMO export, 4.8 GB); read batches are freed as the merge moves past them
        readers = [pa.ipc.open_file(pa.OSFile(p, "rb")) for p in self.runs]
        nkeys = readers[0].schema.names.index("line")          # the keys, then "seq"
        nxt = [0] * len(readers)
        bufs: list = [None] * len(readers)

        def refill(i):
            if nxt[i] == readers[i].num_record_batches:
                bufs[i] = None
                return
            b = readers[i].get_batch(nxt[i])
            nxt[i] += 1
            bufs[i] = ([b.column(j).to_numpy() for j in range(nkeys)], b.column(nkeys))

        def more(i):
            return nxt[i] < readers[i].num_record_batches

        for i in range(len(readers)):
            refill(i)
        while any(b is not None for b in bufs):
            live = [i for i, b in enumerate(bufs) if b is not None]
            # every row up to the smallest last held key of a run with more to read is known: write them
            bound = min((tuple(k[-1] for k in bufs[i][0]) for i in live if more(i)), default=None)
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
                write_lines(f, pa.concat_arrays(lines).take(arrow.column(_order(cat))))


def write_lines(f, lines: pa.Array) -> None:
    """``lines`` (an Arrow string array), each ended by a newline, to binary file ``f``: the array joined by Arrow
    and its data buffer written as it is (no Python string per line)."""
    import pyarrow.compute as pc  # noqa: PLC0415

    if len(lines) == 0:
        return
    text = pc.binary_join_element_wise(lines.cast(pa.string()), "", "\n")
    offsets = np.frombuffer(text.buffers()[1], np.int32, len(text) + 1, text.offset * 4)
    f.write(memoryview(text.buffers()[2])[offsets[0]:offsets[-1]])
