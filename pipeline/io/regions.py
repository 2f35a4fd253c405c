"""BED regions of a genome store: read, check, merge, and cut into the stretches of window starts a scan scores.

A window is scanned when it lies wholly inside a region.  Overlapping and adjacent regions are merged first
(on the store's packed coordinates), so every genome window is scored and reported once; each merged interval
is cut at block boundaries into *pieces* — the window starts ``[lo, hi)`` of one block core — and a piece's
codes at or past its interval's ``end`` read as code 4, so that no window crosses the region's end.  A hit
is named by a BED region that contains it (:meth:`Regions.name_of`), and counted in the peaks × motifs table by
every region that contains it (:meth:`Regions.containing`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from pipeline import MotifgridError


class RegionError(MotifgridError, ValueError):
    """Bad BED input; ``str(e)`` is one line naming the file, the line and the problem."""


@dataclass(frozen=True)
class Piece:
    """Window starts ``[lo, hi)`` (packed positions) of block ``block``; windows end at or before ``end``."""
    block: int
    lo: int
    hi: int
    end: int


class Regions:
    """BED regions on a store's record table, sorted by (record, start).

    ``record``, ``start``, ``end`` : (n,) int64 — record numbers and record coordinates (0-based, half-open);
    ``names`` : list of n region names (the BED name column, else ``chrom:start-end``).
    """

    def __init__(self, source: str, records, record, start, end, names):
        order = np.lexsort((np.asarray(end), np.asarray(start), np.asarray(record)))
        self.source = source
        self.record = np.asarray(record, np.int64)[order]
        self.start = np.asarray(start, np.int64)[order]
        self.end = np.asarray(end, np.int64)[order]
        self.names = [names[i] for i in order]
        offsets = records.offsets[self.record]
        self.packed_start = offsets + self.start
        self.packed_end = offsets + self.end
        # running maximum of the ends (regions sorted by packed start): the region reaching furthest so far
        self._reach = np.maximum.accumulate(self.packed_end) if len(self) else self.packed_end
        self._reach_at = _running_argmax(self.packed_end)

    def __len__(self) -> int:
        return len(self.names)

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends) of the merged intervals in packed coordinates: overlapping and adjacent regions joined."""
        s, e = self.packed_start, self.packed_end
        if not len(s):
            return s, e
        new = np.ones(len(s), bool)
        new[1:] = s[1:] > self._reach[:-1]                  # a gap before it: a new interval starts
        first = np.flatnonzero(new)
        last = np.r_[first[1:], len(s)] - 1
        return s[first], self._reach[last]

    def pieces(self, block_size: int) -> list[Piece]:
        """The merged intervals cut at block-core boundaries."""
        out = []
        for s, e in zip(*map(np.ndarray.tolist, self.merged())):
            pos = s
            while pos < e:
                b = pos // block_size
                hi = min(e, (b + 1) * block_size)
                out.append(Piece(b, pos, hi, e))
                pos = hi
        return out

    def name_of(self, packed_start: np.ndarray, packed_end: np.ndarray) -> np.ndarray:
        """Index into ``names`` of a region holding each window: one that contains it whole when there is one,
        else one that contains its start (a window across two adjacent or overlapping regions)."""
        k = np.searchsorted(self.packed_start, packed_start, side="right") - 1
        return self._reach_at[np.maximum(k, 0)]

    def containing(self, packed_start: np.ndarray, packed_end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Every (window, region) pair where the region contains the window whole — what each region counts in the
        peaks × motifs table, as motifmatchr counts each peak's sites, overlapping and nested peaks alike — and for
        a window contained by none (across two adjacent or overlapping regions) the region :meth:`name_of` gives.

        Parameters
        ----------
        packed_start, packed_end : ndarray, shape (n,), int
            Windows in packed coordinates.

        Returns
        -------
        window, region : ndarray, shape (p,), int64
            Indices into the windows and into ``names``, sorted by window, then region (p >= n).
        """
        ps, pe = np.asarray(packed_start, np.int64), np.asarray(packed_end, np.int64)
        if not ps.size or not len(self):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        o = np.argsort(ps, kind="stable")
        sp = ps[o]
        # the regions that can hold one: not ended before the first window, not starting after the last
        r0 = int(np.searchsorted(self._reach, sp[0], side="right"))
        r1 = int(np.searchsorted(self.packed_start, sp[-1], side="right"))
        a = np.searchsorted(sp, self.packed_start[r0:r1], side="left")
        cnt = np.searchsorted(sp, self.packed_end[r0:r1], side="left") - a     # windows starting inside each
        region = np.repeat(np.arange(r0, r1, dtype=np.int64), cnt)
        first = np.repeat(np.cumsum(cnt) - cnt, cnt)
        window = o[np.repeat(a, cnt) + np.arange(region.size) - first]
        whole = pe[window] <= self.packed_end[region]
        window, region = window[whole], region[whole]
        alone = np.ones(ps.size, bool)
        alone[window] = False
        rest = np.flatnonzero(alone)
        window = np.concatenate([window, rest])
        region = np.concatenate([region, self.name_of(ps[rest], pe[rest]).astype(np.int64)])
        order = np.lexsort((region, window))
        return window[order].astype(np.int64), region[order]

    def windows_inside(self, lengths) -> np.ndarray:
        """Window starts inside the merged intervals for each window length (tests of the BH correction count
        the windows scored; those holding a code 4 are subtracted by the scan)."""
        s, e = self.merged()
        span = e - s
        return np.array([int(np.maximum(span - int(m) + 1, 0).sum()) for m in lengths], np.int64)


def _running_argmax(x: np.ndarray) -> np.ndarray:
    """Index of the running maximum (first one reaching it)."""
    if not len(x):
        return np.zeros(0, np.int64)
    reach = np.maximum.accumulate(x)
    is_new = np.r_[True, reach[1:] > reach[:-1]]
    idx = np.where(is_new, np.arange(len(x)), 0)
    return np.maximum.accumulate(idx)


def read_bed(path: str | os.PathLike, records) -> Regions:
    """Read a BED file (3 to 12+ columns; ``#``, ``track`` and ``browser`` lines and blank lines skipped) of
    regions on the records of a store.  Unknown records, coordinates that are not integers, ``start > end`` and
    regions past a record's end are one-line errors naming the file and the line."""
    path = os.fspath(path)
    index = records.index
    rec, starts, ends, names = [], [], [], []
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        raise RegionError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise RegionError(f"{path}: is a directory, not a BED file") from None
    with f:
        for ln, raw in enumerate(f, 1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError:
                raise RegionError(f"{path} line {ln}: not UTF-8 text (is it a BED file?)") from None
            if not line.strip() or line.startswith(("#", "track", "browser")):
                continue
            p = line.split("\t") if "\t" in line else line.split()
            if len(p) < 3:
                raise RegionError(f"{path} line {ln}: a BED line needs chrom, start and end (found {len(p)} field(s))")
            i = index.get(p[0])
            if i is None:
                raise RegionError(f"{path} line {ln}: unknown contig {p[0]!r} (not a record of the genome store)")
            try:
                s, e = int(p[1]), int(p[2])
            except ValueError:
                raise RegionError(f"{path} line {ln}: start and end must be integers, got {p[1]!r} and {p[2]!r}") from None
            if s < 0 or e < s:
                raise RegionError(f"{path} line {ln}: bad interval {s}-{e} (need 0 <= start <= end)")
            n = int(records.lengths[i])
            if e > n:
                raise RegionError(f"{path} line {ln}: region {p[0]}:{s}-{e} runs past the end of {p[0]!r} ({n:,} bp)")
            rec.append(i)
            starts.append(s)
            ends.append(e)
            names.append(p[3] if len(p) > 3 and p[3] not in ("", ".") else f"{p[0]}:{s}-{e}")
    if not rec:
        raise RegionError(f"{path}: no regions (an empty BED file)")
    return Regions(path, records, rec, starts, ends, names)
