"""Region queries on a bgzipped VCF through its tabix (``.tbi``) or CSI (``.csi``) index, in pure Python.

``motifgrid variants VCF --region chr:start-end`` reads only the records that overlap the region: the index names,
per sequence, the stretches of the compressed file (*chunks*, pairs of BGZF virtual offsets
``compressed block offset << 16 | offset within the uncompressed block``) that hold the records of each *bin*.

Formats (hts-specs: SAMv1 §5 "Indexing BAM" for the binning scheme, tabix.pdf for .tbi, CSIv1.pdf for .csi):

* Binning scheme: a sequence of ``2**(min_shift + 3*depth)`` positions is cut into ``depth + 1`` levels of bins;
  level 0 is one bin spanning everything, and each bin splits into 8 at the next level, so the bins at the deepest
  level span ``2**min_shift`` positions.  Bins are numbered level by level (level ``l`` starts at
  ``(8**l - 1) / 7``).  A record goes into the smallest bin that contains its whole span; the bins that can hold a
  record overlapping ``[beg, end)`` are those overlapping it on each level (``reg2bins``).
* ``.tbi``: ``min_shift`` 14 and ``depth`` 5 fixed (positions below 2**29 only), plus a *linear index*: for each
  16 kb window, the smallest virtual offset of a record overlapping it.  Chunks that end at or before the linear
  entry of the query's first window hold only records ending before the region, and are dropped.
* ``.csi``: ``min_shift`` and ``depth`` in the header (``tabix --csi -m``), so long sequences fit; no linear index,
  instead each bin carries ``loffset``, the smallest virtual offset of a record overlapping the bin's first window.
* Both are BGZF-compressed, little-endian; a tabix-made index carries the tabix configuration (format, columns,
  meta character, lines to skip) and the sequence names, in the header (``.tbi``) or the ``aux`` block (``.csi``).
  The pseudo-bin ``(8**(depth+1) - 1)/7 + 1`` (37450 for ``.tbi``) holds statistics, not records: skipped.

A record's span is what tabix (htslib 1.16, ``-p vcf``) uses, checked against the binary: from ``POS`` to
``POS + len(REF) - 1``, or to ``INFO/END`` where that is at least ``POS`` (then it replaces the REF length, even
when shorter; an ``END`` below ``POS`` is ignored).  A record is reported when its span overlaps the region.
"""
from __future__ import annotations

import gzip
import os
import re
import struct
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np
from Bio import bgzf

__all__ = ["Region", "TabixIndex", "fetch_lines", "find_index", "header_lines", "parse_region", "read_index",
           "record_span", "reg2bins"]

TBI_MAGIC = b"TBI\x01"
CSI_MAGIC = b"CSI\x01"
#: the fixed binning of a .tbi (and of BAI): 16 kb windows, 6 levels, positions below 2**29
TBI_MIN_SHIFT, TBI_DEPTH = 14, 5
#: the tabix ``format`` presets (the low 16 bits; 0x10000 flags 0-based UCSC coordinates)
FORMATS = {0: "generic", 1: "SAM", 2: "VCF"}
VCF_FORMAT = 2

# ---------------------------------------------------------------------------------------------------- regions


@dataclass(frozen=True)
class Region:
    """A sequence name and 0-based, half-open coordinates; ``end0`` None runs to the end of the sequence."""
    chrom: str
    start0: int = 0
    end0: int | None = None

    def __str__(self) -> str:
        if self.start0 == 0 and self.end0 is None:
            return self.chrom
        return f"{self.chrom}:{self.start0 + 1}-{'' if self.end0 is None else self.end0}"


_COORDS = re.compile(r"(?P<start>[0-9][0-9,]*)?(?:(?P<dash>-)(?P<end>[0-9][0-9,]*)?)?")


def parse_region(text: str, names: Sequence[str] | None = None) -> Region:
    """``chr``, ``chr:start``, ``chr:start-end`` (1-based, inclusive, like samtools and tabix; commas allowed in
    numbers; ``chr:start`` runs to the sequence's end, ``chr:-end`` starts at 1).  With ``names`` (the index's
    sequence names) a name that itself contains ``:`` is taken whole, as htslib does; ``{name}:start-end`` quotes
    one.  A ``ValueError`` names what is wrong; unlike tabix, which prints nothing, a start after the end and a
    position 0 are refused rather than read as an empty or whole-sequence query."""
    text = text.strip()
    if not text:
        raise ValueError("empty region: expected chr, chr:start or chr:start-end")
    if names is not None and text in names:
        return Region(text)
    if text.startswith("{"):
        close = text.find("}")
        if close < 0:
            raise ValueError(f"region {text!r}: '{{' without a closing '}}'")
        chrom, rest = text[1:close], text[close + 1:]
        if rest and not rest.startswith(":"):
            raise ValueError(f"region {text!r}: expected ':' after '}}', found {rest!r}")
        coords = rest[1:]
    else:
        chrom, colon, coords = text.rpartition(":")
        if not colon:
            chrom, coords = coords, ""
    if not chrom:
        raise ValueError(f"region {text!r}: no sequence name before ':'")
    start0, end0 = _parse_coords(text, coords)
    return Region(chrom, start0, end0)


def _parse_coords(text: str, coords: str) -> tuple[int, int | None]:
    """``(start0, end0)`` of the part after the colon: empty is the whole sequence (as tabix reads ``chr:``)."""
    m = _COORDS.fullmatch(coords)
    if m is None:
        raise ValueError(f"region {text!r}: cannot read {coords!r} as start or start-end "
                         "(1-based positions, digits and commas)")
    start = _position(text, m["start"], "start") if m["start"] else 1
    end = _position(text, m["end"], "end") if m["end"] else None
    if end is not None and start > end:
        raise ValueError(f"region {text!r}: start {start:,} is after end {end:,}")
    return start - 1, end


def _position(text: str, digits: str, what: str) -> int:
    value = int(digits.replace(",", ""))
    if value < 1:
        raise ValueError(f"region {text!r}: {what} is {value}; positions are 1-based (the first base is 1)")
    return value


# ---------------------------------------------------------------------------------------------------- binning


def _bin_ranges(beg: int, end: int, min_shift: int, depth: int) -> list[tuple[int, int]]:
    """Per level, the first and last bin overlapping ``[beg, end)`` (the spec's ``reg2bins`` without listing)."""
    maxpos = 1 << (min_shift + 3 * depth)
    end = min(end, maxpos)
    if beg >= end:
        return []
    last = end - 1
    ranges, first_of_level, shift = [], 0, min_shift + 3 * depth
    for level in range(depth + 1):
        ranges.append((first_of_level + (beg >> shift), first_of_level + (last >> shift)))
        first_of_level += 1 << (3 * level)
        shift -= 3
    return ranges


def reg2bins(beg: int, end: int, min_shift: int = TBI_MIN_SHIFT, depth: int = TBI_DEPTH) -> list[int]:
    """The bins that may hold records overlapping ``[beg, end)`` (0-based, half-open), coarsest level first."""
    return [b for lo, hi in _bin_ranges(beg, end, min_shift, depth) for b in range(lo, hi + 1)]


def _first_bin(level: int) -> int:
    return ((1 << (3 * level)) - 1) // 7


# ---------------------------------------------------------------------------------------------------- the index


@dataclass
class _Sequence:
    """One sequence's bins: ``bin -> (loffset, chunks as an (n, 2) uint64 array)``; ``linear`` for a .tbi."""
    bins: dict
    linear: np.ndarray | None = None


class TabixIndex:
    """A parsed .tbi or .csi: ``names`` (sequence names in index order), ``kind`` ("tbi"/"csi"), ``min_shift``,
    ``depth``, ``format`` (the tabix preset: 2 for VCF), ``meta`` (the header character) and ``skip``."""

    def __init__(self, path: Path, kind: str, min_shift: int, depth: int, conf: tuple, names: list[str],
                 sequences: list[_Sequence]):
        self.path, self.kind, self.min_shift, self.depth = path, kind, min_shift, depth
        self.format, self.col_seq, self.col_beg, self.col_end, meta, self.skip = conf
        self.meta = chr(meta) if 0 < meta < 128 else ""
        self.names = names
        self._sequences = sequences
        self._tid = {name: i for i, name in enumerate(names)}

    def __repr__(self) -> str:
        return (f"TabixIndex({str(self.path)!r}, {self.kind}, min_shift={self.min_shift}, depth={self.depth}, "
                f"{len(self.names)} sequences)")

    def chunks(self, chrom: str, start0: int = 0, end0: int | None = None) -> list[tuple[int, int]]:
        """Sorted, merged ``(voffset_start, voffset_end)`` holding every record of ``chrom`` that may overlap
        ``[start0, end0)``; empty for a sequence the index does not know (tabix prints nothing there)."""
        tid = self._tid.get(chrom)
        if tid is None:
            return []
        seq = self._sequences[tid]
        maxpos = 1 << (self.min_shift + 3 * self.depth)
        end0 = maxpos if end0 is None else end0
        ranges = _bin_ranges(max(start0, 0), end0, self.min_shift, self.depth)
        if not ranges or not seq.bins:
            return []
        # list the candidate bins, or scan the index's own, whichever is shorter (a whole chr1 on a CSI of
        # min_shift 10 is a quarter million candidate bins, most of them empty)
        if sum(hi - lo + 1 for lo, hi in ranges) <= len(seq.bins):
            found = [b for lo, hi in ranges for b in range(lo, hi + 1) if b in seq.bins]
        else:
            found = [b for b in seq.bins if any(lo <= b <= hi for lo, hi in ranges)]
        if not found:
            return []
        pairs = np.concatenate([seq.bins[b][1] for b in found])
        pairs = pairs[pairs[:, 1] > self._min_offset(seq, min(max(start0, 0), maxpos - 1))]
        return _merge(pairs)

    def _min_offset(self, seq: _Sequence, beg: int) -> int:
        """A virtual offset before which no record overlapping ``beg`` or later starts: chunks ending at or before it
        are skipped (they only hold records that end before the region)."""
        if seq.linear is not None:
            if len(seq.linear) == 0:
                return 0
            return int(seq.linear[min(beg >> self.min_shift, len(seq.linear) - 1)])
        # CSI: htslib's walk — the deepest-level bin holding beg, else the nearest bin to its left on that level,
        # else up a level: every such bin's loffset is a window at or before beg's, so still a lower bound
        b = _first_bin(self.depth) + (beg >> self.min_shift)
        while b > 0 and b not in seq.bins:
            parent = (b - 1) >> 3
            b = b - 1 if b > (parent << 3) + 1 else parent
        return seq.bins[b][0] if b in seq.bins else 0


def _merge(pairs: np.ndarray) -> list[tuple[int, int]]:
    """Chunks sorted by start, overlapping or touching ones joined, so that each byte is read once."""
    out: list[list[int]] = []
    for start, stop in pairs[np.argsort(pairs[:, 0], kind="stable")].tolist():
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], stop)
        else:
            out.append([start, stop])
    return [(a, b) for a, b in out]


class _Cursor:
    """Little-endian reads off the decompressed index, each short read a ``ValueError`` naming the file."""

    def __init__(self, path: Path, data: bytes):
        self.path, self.data, self.pos = path, data, 0

    def take(self, fmt: str) -> tuple:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise ValueError(f"{self.path}: truncated index ({len(self.data):,} bytes once decompressed; "
                             f"{size} more wanted at byte {self.pos:,})")
        out = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return out

    def count(self, what: str) -> int:
        (n,) = self.take("<i")
        if n < 0:
            raise ValueError(f"{self.path}: corrupt index (negative {what} {n} at byte {self.pos - 4:,})")
        return n

    def raw(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise ValueError(f"{self.path}: truncated index ({len(self.data):,} bytes once decompressed; "
                             f"{n:,} more wanted at byte {self.pos:,})")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def offsets(self, n: int) -> np.ndarray:
        """``n`` uint64 values (virtual offsets)."""
        return np.frombuffer(self.raw(8 * n), dtype="<u8").astype(np.uint64)


def _decompress(path: Path) -> bytes:
    """The index's bytes: BGZF as htslib writes it; an uncompressed index (htslib reads those too) as is."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head in (TBI_MAGIC, CSI_MAGIC):
        return path.read_bytes()
    parts = []
    try:
        with bgzf.BgzfReader(str(path), "rb") as reader:
            while block := reader.read(1 << 20):
                parts.append(block)
    except (ValueError, struct.error, zlib.error, EOFError) as e:
        raise ValueError(f"{path}: not a readable BGZF-compressed index (truncated or corrupt: {e})") from None
    return b"".join(parts)


def _conf_and_names(cur: _Cursor, n_ref: int) -> tuple[tuple, list[str]]:
    """The tabix configuration (format, col_seq, col_beg, col_end, meta, skip) and the sequence names."""
    conf = cur.take("<6i")
    l_nm = cur.count("names length")
    blob = cur.raw(l_nm)
    names = [n.decode("utf-8", errors="replace") for n in blob.split(b"\0")[:-1]] if blob else []
    if blob and not blob.endswith(b"\0"):
        raise ValueError(f"{cur.path}: corrupt index (the sequence names do not end with a NUL byte)")
    if len(names) != n_ref:
        raise ValueError(f"{cur.path}: corrupt index ({len(names)} sequence names for {n_ref} indexed sequences)")
    return conf, names


def _read_bins(cur: _Cursor, csi: bool, pseudo_bin: int) -> dict:
    """One sequence's bins; a .tbi's bins get their loffset from the linear index later."""
    bins = {}
    for _ in range(cur.count("bin count")):
        (b,) = cur.take("<I")
        (loffset,) = cur.take("<Q") if csi else (0,)
        n_chunk = cur.count("chunk count")
        chunks = cur.offsets(2 * n_chunk).reshape(n_chunk, 2)
        if b != pseudo_bin:  # statistics (mapped/unmapped counts), not records
            bins[b] = (loffset, chunks)
    return bins


def _forward_fill(linear: np.ndarray) -> np.ndarray:
    """Zero entries (windows no record overlaps; old tabix wrote them so) take the previous window's offset, as
    htslib does on load: still a lower bound for the records of the windows after them."""
    idx = np.where(linear != 0, np.arange(len(linear)), 0)
    return linear[np.maximum.accumulate(idx)] if len(linear) else linear


def _parse_tbi(path: Path, cur: _Cursor) -> TabixIndex:
    n_ref = cur.count("sequence count")
    conf, names = _conf_and_names(cur, n_ref)
    pseudo = _first_bin(TBI_DEPTH + 1) + 1
    sequences = []
    for _ in range(n_ref):
        bins = _read_bins(cur, False, pseudo)
        linear = _forward_fill(cur.offsets(cur.count("linear index length")))
        sequences.append(_Sequence(bins, linear))
    return TabixIndex(path, "tbi", TBI_MIN_SHIFT, TBI_DEPTH, conf, names, sequences)


def _parse_csi(path: Path, cur: _Cursor) -> TabixIndex:
    min_shift, depth = cur.take("<2i")
    if not (0 < min_shift < 64 and 0 <= depth < 20 and min_shift + 3 * depth < 64):
        raise ValueError(f"{path}: corrupt index (min_shift {min_shift}, depth {depth})")
    aux = _Cursor(path, cur.raw(cur.count("aux length")))
    n_ref = cur.count("sequence count")
    if len(aux.data) < 28:
        # bcftools' CSI of a BCF carries no tabix block: its names live in the BCF header, not here
        if n_ref:
            raise ValueError(f"{path}: a CSI index without sequence names (no tabix configuration in its aux "
                             "block; a BCF's index?): make one with tabix -p vcf --csi")
        conf, names = (VCF_FORMAT, 1, 2, 0, ord("#"), 0), []
    else:
        conf, names = _conf_and_names(aux, n_ref)
    pseudo = _first_bin(depth + 1) + 1
    sequences = [_Sequence(_read_bins(cur, True, pseudo)) for _ in range(n_ref)]
    return TabixIndex(path, "csi", min_shift, depth, conf, names, sequences)


def read_index(index_path: str | os.PathLike) -> TabixIndex:
    """Parse a .tbi or .csi (told apart by the magic bytes, not the name); a ``ValueError`` naming the file for
    a wrong magic, a truncated or a corrupt index."""
    path = Path(index_path)
    cur = _Cursor(path, _decompress(path))
    magic = cur.data[:4]
    cur.pos = 4
    if magic == TBI_MAGIC:
        return _parse_tbi(path, cur)
    if magic == CSI_MAGIC:
        return _parse_csi(path, cur)
    raise ValueError(f"{path}: not a tabix or CSI index (magic bytes {magic!r}, expected {TBI_MAGIC!r} "
                     f"or {CSI_MAGIC!r})")


def find_index(vcf_path: str | os.PathLike) -> Path | None:
    """``VCF.tbi``, else ``VCF.csi``, else None.  (htslib tries ``.csi`` first; the two answer alike.)"""
    for ext in (".tbi", ".csi"):
        candidate = Path(f"{os.fspath(vcf_path)}{ext}")
        if candidate.is_file():
            return candidate
    return None


# ---------------------------------------------------------------------------------------------------- records

# C's strtol(s, &end, 0): optional sign, then hex (0x), octal (leading 0) or decimal digits — htslib reads POS and
# INFO/END so, and matching it means ``END=0x600`` spans to 1536 here too
_C_INT = re.compile(r"\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def _c_integer(text: str) -> int | None:
    m = _C_INT.match(text)
    if m is None:
        return None
    digits = m[2]
    base = 16 if digits[:2].lower() == "0x" else 8 if digits.startswith("0") and len(digits) > 1 else 10
    value = int(digits, base)
    return -value if m[1] == "-" else value


def _info_end(info: str) -> int | None:
    """The value of the first ``END=`` item of INFO, read as htslib does (``strstr`` for ``END=`` at the start,
    else ``;END=``): the first ``;``-separated item that begins ``END=``."""
    for item in info.split(";"):
        if item.startswith("END="):
            return _c_integer(item[4:])
    return None


def record_span(line: str) -> tuple[str, int, int]:
    """``(chrom, beg0, end0)`` of a VCF record, 0-based half-open, as tabix ``-p vcf`` computes it: ``POS - 1``
    (at least 0) to ``beg0 + len(REF)`` (``POS`` for an empty or missing REF), replaced by ``INFO/END`` when that is
    past ``beg0`` (an ``END`` before ``POS`` is ignored, as htslib does with a warning)."""
    cols = line.split("\t", 8)
    pos = _c_integer(cols[1]) if len(cols) > 1 else None
    if pos is None:
        raise ValueError(f"not a VCF record (no integer POS in the second column): {line[:120]!r}")
    beg, end = max(pos - 1, 0), max(pos, 1)
    if len(cols) > 3 and cols[3]:
        end = beg + len(cols[3])
    if len(cols) > 7:
        info_end = _info_end(cols[7])
        if info_end is not None and info_end > beg:
            end = info_end
    return cols[0], beg, end


def header_lines(vcf_path: str | os.PathLike) -> list[str]:
    """The ``#`` lines at the start of a VCF (plain, gzip or bgzip), without line ends."""
    with open(vcf_path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    out = []
    with (gzip.open(vcf_path, "rb") if gz else open(vcf_path, "rb")) as f:
        for raw in f:
            if not raw.startswith(b"#"):
                break
            out.append(_text(raw))
    return out


def _text(raw: bytes) -> str:
    """A line without its ``\\n`` and one ``\\r`` (htslib's ``bgzf_getline`` drops both), decoded like vcf.py."""
    if raw.endswith(b"\n"):
        raw = raw[:-1]
    if raw.endswith(b"\r"):
        raw = raw[:-1]
    return raw.decode("utf-8", errors="replace")


def _warn_if_stale(vcf: Path, index: Path) -> None:
    # htslib compares whole seconds (st_mtime) and warns, reading on: an index written in the same second passes
    try:
        stale = os.stat(index).st_mtime_ns // 10**9 < os.stat(vcf).st_mtime_ns // 10**9
    except OSError:
        return
    if stale:
        warnings.warn(f"the index file is older than the data file: {index}", stacklevel=3)


def fetch_lines(vcf_path: str | os.PathLike, region: str | Region,
                index: TabixIndex | str | os.PathLike | None = None) -> Iterator[str]:
    """The lines (without line ends) of the records of a bgzipped VCF overlapping ``region``, in file order, each
    once, as ``tabix VCF region`` prints them (no header).  ``index``: a read index, its path, or None to look
    beside the VCF (``find_index``).  Raises at once (not on the first ``next``): ``FileNotFoundError`` with no
    index, ``ValueError`` for a bad region, a bad index or one not made for VCF; warns for an index older than
    the VCF.  A sequence the index does not know yields nothing."""
    vcf = Path(vcf_path)
    if not vcf.is_file():
        raise FileNotFoundError(f"{vcf}: no such file")
    if not isinstance(index, TabixIndex):
        index_path = Path(index) if index is not None else find_index(vcf)
        if index_path is None:
            raise FileNotFoundError(f"{vcf}: no tabix index beside it ({vcf}.tbi or {vcf}.csi): make one with "
                                    f"tabix -p vcf {vcf}")
        index = read_index(index_path)
    _warn_if_stale(vcf, index.path)
    if index.format & 0xFFFF != VCF_FORMAT:
        kind = FORMATS.get(index.format & 0xFFFF, f"format {index.format}")
        raise ValueError(f"{index.path}: indexes {kind} records, not VCF (make it with tabix -p vcf)")
    if not isinstance(region, Region):
        region = parse_region(region, index.names)
    chunks = index.chunks(region.chrom, region.start0, region.end0)
    if not chunks:
        return iter(())
    return _read_records(vcf, chunks, region)


def _read_records(vcf: Path, chunks: list[tuple[int, int]], region: Region) -> Iterator[str]:
    """Walk the chunks as htslib's ``hts_itr_next`` does: records in a chunk are read from its start while the
    file position is before its end; the first record of another sequence, or starting at or past the region's
    end, ends the query (the file is sorted); the rest are kept when their span overlaps the region."""
    beg, end = region.start0, region.end0
    pos = -1  # virtual offset read up to: chunks are disjoint once merged, this also guards a shared boundary
    try:
        with bgzf.BgzfReader(str(vcf), "rb") as handle:
            for start, stop in chunks:
                if stop <= pos:
                    continue
                if start > pos:
                    handle.seek(start)
                    pos = start
                while pos < stop:
                    raw = handle.readline()
                    if not raw:
                        return
                    pos = handle.tell()
                    line = _text(raw)
                    chrom, rec_beg, rec_end = record_span(line)
                    if chrom != region.chrom or (end is not None and rec_beg >= end):
                        return
                    if rec_end > beg:
                        yield line
    except (struct.error, zlib.error, EOFError) as e:
        raise ValueError(f"{vcf}: truncated or corrupt BGZF data ({e})") from None
    except ValueError as e:
        raise ValueError(f"{vcf}: {e}") from None
