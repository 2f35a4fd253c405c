"""FASTA input, streamed: sniff the file, then read it once, front to back, in bounded memory.

One pass over the file gives everything ingest needs: the records' names and bases in order, and the
checksum of the file's bytes (computed on the bytes as read, compressed or not).  No index is read or
written, so a stale ``.fai`` beside the input can never describe a different file, and nothing is
written into the input's folder.

Any line layout is accepted (lines of any length, blank lines, LF, CR LF or old Mac OS CR-only line ends); a
record's name is
the first word of its header line, as in samtools and pyfaidx.  Plain, gzip and bgzip files are read
the same way (bgzip is multi-member gzip).
"""
from __future__ import annotations

import gzip
import hashlib
import io
import os
from pathlib import Path
from typing import Iterator

import numpy as np

from pipeline import MotifgridError


class FastaError(MotifgridError, ValueError):
    """Bad FASTA input; ``str(e)`` is one line naming the file, the record and the problem."""


#: bytes a nucleotide sequence may hold: IUPAC codes (U as T, X as N), gaps; anything else is refused
NUCLEOTIDE = np.zeros(256, dtype=bool)
for _c in b"ACGTUNRYSWKMBDHVX":
    NUCLEOTIDE[_c] = NUCLEOTIDE[_c + 32] = True
NUCLEOTIDE[list(b"-.")] = True

#: code of each byte: ACGT (either case) → 0..3, everything else → 4
CODE = np.full(256, 4, dtype=np.uint8)
for _i, _c in enumerate(b"ACGT"):
    CODE[_c] = CODE[_c + 32] = _i

_CHUNK = 1 << 20                       # bytes read at a time (then completed to the end of a line)
_SPACE = b" \t\r\n\v\f"
_IS_SPACE = np.zeros(256, dtype=bool)
_IS_SPACE[list(_SPACE)] = True


def sniff_fasta(path: str | os.PathLike, error=FastaError) -> str:
    """Return ``'plain'``, ``'gzip'`` or ``'bgzip'``; raise ``error`` when ``path`` is not a FASTA file."""
    return sniff_fasta_layout(path, error)[0]


def sniff_fasta_layout(path: str | os.PathLike, error=FastaError) -> tuple[str, bool]:
    """:func:`sniff_fasta`'s kind, and whether the lines end in CR alone (old Mac OS text: read as if they ended
    in LF), from one look at the file's start."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(18)
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except IsADirectoryError:
        raise error(f"{path}: is a directory, not a FASTA file") from None
    except PermissionError:
        raise error(f"{path}: not readable (permission denied)") from None
    kind = "plain"
    opener = open
    if head[:2] == b"\x1f\x8b":
        kind = "bgzip" if len(head) >= 16 and head[12:14] == b"BC" else "gzip"
        opener = gzip.open
    if kind == "bgzip":
        check_bgzf_end(path, error)
    try:
        with opener(path, "rb") as f:
            first = f.read(4096)
    except (OSError, EOFError) as e:
        raise error(f"{path}: unreadable gzip data ({e})") from None
    stripped = first.lstrip(_SPACE)
    if not stripped:
        raise error(f"{path}: empty file, no FASTA records")
    if not stripped.startswith(b">"):
        if b"\x00" in first:
            raise error(f"{path}: binary data, not a FASTA file")
        if stripped.startswith(b"\xef\xbb\xbf"):       # some Windows editors write one
            raise error(f"{path}: starts with a UTF-8 byte-order mark before its first '>'; save it without one "
                        "(e.g. sed -i '1s/^\\xEF\\xBB\\xBF//' FILE)")
        raise error(f"{path}: not a FASTA file (the first record does not start with '>')")
    # CR-only files have no LF at all; the header line of any other file ends within 4 KB in practice
    return kind, b"\r" in first and b"\n" not in first


#: the empty block that ends every complete BGZF (bgzip) file (the SAM/BAM format specification, 4.1.2)
BGZF_EOF = bytes.fromhex("1f8b08040000000000ff0600424302001b0003000000000000000000")


def check_bgzf_end(path, error=FastaError) -> None:
    """Refuse a bgzip file without its end-of-file block: cut short (a killed ``bgzip``, a full disk, an unfinished
    copy).  Cut at a block boundary, it is otherwise valid gzip and read as whole (a P. falciparum genome cut so read
    as 6 records, one 131 kb short, exit 0); cut inside a block, its gzip stream ends inside a member."""
    with open(path, "rb") as f:
        f.seek(0, os.SEEK_END)
        size = f.tell()
        f.seek(max(0, size - len(BGZF_EOF)))
        if f.read() != BGZF_EOF:
            raise error(f"{path}: bgzip file without its end-of-file block: cut short (a killed bgzip, a full disk or "
                        "an unfinished copy?); compress or copy it again")


class _Hashing(io.RawIOBase):
    """A read-only file that hashes every byte read from it (the checksum comes free with the parse)."""

    def __init__(self, f, algo: str = "sha256"):
        self._f = f
        self.hash = hashlib.new(algo)

    def readable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = self._f.readinto(b)
        if n:
            self.hash.update(memoryview(b)[:n])
        return n


def _chunks(f, cr: bool = False) -> Iterator[bytes]:
    """The file's text in pieces of whole lines (a header line is never cut); ``cr``: its lines end in CR alone,
    given back ending in LF."""
    if cr:
        yield from _cr_chunks(f)
        return
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            return
        if not chunk.endswith(b"\n"):
            chunk += f.readline()
        yield chunk


def _cr_chunks(f) -> Iterator[bytes]:
    carry = b""                        # the line going on at the end of the last piece
    while True:
        chunk = f.read(_CHUNK)
        if not chunk:
            if carry:
                yield carry
            return
        chunk = carry + chunk.replace(b"\r", b"\n")
        cut = chunk.rfind(b"\n") + 1
        carry = chunk[cut:]
        if cut:
            yield chunk[:cut]


def load_parser() -> None:
    """Import numba and load :meth:`FastaReader.batches`'s compiled pass from numba's cache (~0.5 s in a fresh
    process, most of it numba's import): a command runs this on a thread from its start, beside its other
    start-up work, instead of first thing inside its FASTA's reading."""
    from workers.fasta_numba import parse_chunk  # noqa: PLC0415

    parse_chunk(np.frombuffer(b">a\nAC\n", np.uint8), CODE, NUCLEOTIDE, _IS_SPACE)


class FastaReader:
    """Stream the records of a FASTA file, a few MB at a time.

    ``for names, starts, codes in reader.batches():`` — ``codes`` is the sequence of the batch, whitespace
    removed, as uint8 codes (:data:`CODE`: A=0 C=1 G=2 T=3 in either case, anything else 4), ``names[i]`` starts at
    ``codes[starts[i]]``, and ``codes[:starts[0]]`` (all of it when ``names`` is empty) continues the record before.
    Every byte is checked: one that is no nucleotide code (:data:`NUCLEOTIDE`) is an error naming the record and
    position.  After the loop, ``reader.checksum`` is ``sha256:<hex>`` of the file's bytes.  Errors are ``error``
    lines naming the file, the record and the problem.
    """

    def __init__(self, path: str | os.PathLike, error=FastaError, unique_names: bool = True):
        self.path = Path(path)
        self.error = error
        self.unique_names = unique_names    # False: names that repeat are read as they are (enrich's controls)
        self.kind, self.cr = sniff_fasta_layout(self.path, error)
        self.checksum: str | None = None
        self._names: dict = {}          # name → record number (1-based)

    def batches(self) -> Iterator[tuple[list, list, np.ndarray]]:
        """``(names, starts, codes)`` of each chunk (see the class).  One compiled pass per chunk
        (:func:`workers.fasta_numba.parse_chunk`, without the GIL: NumPy passes and Python per chunk took twice as long
        and held it), then the header names in Python."""
        from workers.fasta_numba import parse_chunk  # noqa: PLC0415

        last, at = None, 0                   # the record going on at the batch's start, and its bases before it
        for chunk in self._stream():
            codes, head, stop, starts, bad, byte = parse_chunk(np.frombuffer(chunk, np.uint8), CODE, NUCLEOTIDE,
                                                               _IS_SPACE)
            names = [self._name(chunk[h + 1:e]) for h, e in zip(head.tolist(), stop.tolist())]
            if not self._names and codes.size:
                raise self.error(f"{self.path}: sequence before the first '>' header (not a FASTA file)")
            starts_l = starts.tolist()
            if bad >= 0:
                i = int(np.searchsorted(starts, bad, side="right")) - 1
                name, pos = (names[i], bad - starts_l[i]) if i >= 0 else (last, at + bad)
                check_nucleotides(self.path, name, pos, bytes([byte]), error=self.error)
            last, at = (names[-1], codes.size - starts_l[-1]) if names else (last, at + codes.size)
            yield names, starts_l, codes

    def _stream(self) -> Iterator[bytes]:
        """The file's chunks of whole lines; ``checksum`` is set once the last one has been taken."""
        raw = open(self.path, "rb")
        hashing = _Hashing(raw)
        buffered = io.BufferedReader(hashing, buffer_size=1 << 20)
        f = gzip.GzipFile(fileobj=buffered, mode="rb") if self.kind != "plain" else buffered
        try:
            yield from _chunks(f, self.cr)
            while buffered.read(1 << 20):       # bytes after the last gzip member still count in the checksum
                pass
        except (OSError, EOFError) as e:
            raise self.error(f"{self.path}: truncated or corrupt compressed data ({e})") from None
        finally:
            raw.close()
        self.checksum = "sha256:" + hashing.hash.hexdigest()

    def _name(self, header: bytes) -> str:
        words = header.split()
        try:
            name = words[0].decode("utf-8") if words else ""
        except UnicodeDecodeError as e:
            raise self.error(f"{self.path}: not a FASTA text file (in a header line, byte 0x{words[0][e.start]:02x} "
                             "is not UTF-8 text)") from None
        if not name:
            raise self.error(f"{self.path}: a record has an empty name (record {len(self._names) + 1}, header line "
                             f"{'>' + header[:40].decode('utf-8', 'replace')!r})")
        if name in self._names and self.unique_names:
            raise self.error(f"{self.path}: duplicate record name {name!r} (records {self._names[name]:,} and "
                             f"{len(self._names) + 1:,})")
        self._names.setdefault(name, len(self._names) + 1)
        return name


def check_nucleotides(path, name: str, offset: int, text: bytes, error=FastaError) -> None:
    """Refuse bytes that are no nucleotide code (protein, NUL, binary); ``offset``: the record position of
    ``text[0]`` (for the message)."""
    bad = np.flatnonzero(~NUCLEOTIDE[np.frombuffer(text, dtype=np.uint8)])
    if bad.size:
        b = text[bad[0]]
        what = repr(chr(b)) if 0x20 <= b < 0x7f else f"byte 0x{b:02x}"     # a UTF-8 letter's first byte: not a letter
        raise error(f"{path}: record {name!r} position {offset + int(bad[0]) + 1}: {what} is not a "
                    "nucleotide code (protein or binary data?)")
