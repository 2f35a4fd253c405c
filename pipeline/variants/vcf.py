"""VCF input, streamed: one row per (record, ALT) in batches, every line checked.

Plain or gzip/bgzip (bgzip is gzip: read in one stream, a truncated file named as such).  Kept: SNVs, MNVs, insertions,
deletions and complex substitutions (REF and ALT DNA).  Skipped with a count: symbolic ALTs (``<DEL>``), breakends
(``]chr2:3]A``), ``*`` (a spanning deletion) and ``.`` (no ALT).  Refused, naming the line: a record before the
``#CHROM`` header, fewer than five columns, a POS that is no positive integer, a REF or ALT that is no sequence, and
records out of order (a contig that comes back after another, or a POS before the previous one: ``bcftools sort``).
"""
from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field

from pipeline import MotifgridError

_DNA = re.compile(r"^[ACGTNacgtn]+$")


class VcfError(MotifgridError, ValueError):
    """A VCF that cannot be read; ``str(e)`` names the file and line."""


@dataclass
class Alleles:
    """A batch of ALT alleles, one per (VCF record, ALT), in file order."""
    line: list = field(default_factory=list)     # the record's line number in the file (1-based)
    chrom: list = field(default_factory=list)
    pos: list = field(default_factory=list)      # VCF POS (1-based)
    id: list = field(default_factory=list)
    ref: list = field(default_factory=list)      # upper case
    alt: list = field(default_factory=list)      # upper case

    def __len__(self) -> int:
        return len(self.line)


@dataclass
class Skipped:
    """ALTs not scored, by reason."""
    symbolic: int = 0
    breakend: int = 0
    spanning: int = 0
    no_alt: int = 0

    def total(self) -> int:
        return self.symbolic + self.breakend + self.spanning + self.no_alt

    def line(self) -> str:
        parts = [f"{n:,} {what}" for n, what in ((self.symbolic, "symbolic (<...>)"), (self.breakend, "breakend"),
                                                   (self.spanning, "spanning deletion (*)"), (self.no_alt, "no ALT (.)"))
                 if n]
        return ", ".join(parts)


def open_text(path: str):
    """The VCF's lines as text: gzip and bgzip by their magic bytes, else plain."""
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace", newline="")
    return open(path, encoding="utf-8", errors="replace", newline="")


def read_vcf(path: str, batch: int = 100_000, skipped: Skipped | None = None):
    """Batches (:class:`Alleles`) of at most ``batch`` ALT alleles of the VCF at ``path``, in file order; ``skipped``
    counts the ALTs left out."""
    skipped = skipped if skipped is not None else Skipped()
    out = Alleles()
    header = False
    seen: set = set()
    last = (None, 0)
    n = 0
    try:
        with open_text(path) as f:
            for n, text in enumerate(f, 1):
                text = text.rstrip("\r\n")
                if text.startswith("##") or not text.strip():
                    continue
                if text.startswith("#"):
                    if not text.startswith("#CHROM"):
                        raise VcfError(f"{path}: line {n}: a header line must start with ## or #CHROM")
                    header = True
                    continue
                if not header:
                    raise VcfError(f"{path}: line {n}: a record before the #CHROM header line (is this a VCF?)")
                last = _record(path, n, text, out, skipped, seen, last)
                if len(out) >= batch:
                    yield out
                    out = Alleles()
    except (EOFError, gzip.BadGzipFile, OSError) as e:
        if isinstance(e, (FileNotFoundError, PermissionError)):
            raise
        raise VcfError(f"{path}: truncated or corrupt compressed file after line {n} ({e})") from None
    if not header:
        raise VcfError(f"{path}: no #CHROM header line: not a VCF")
    if len(out):
        yield out


def _record(path, n, text, out: Alleles, skipped: Skipped, seen: set, last: tuple) -> tuple:
    cols = text.split("\t")
    if len(cols) < 5:
        raise VcfError(f"{path}: line {n}: {len(cols)} tab-separated columns, a record needs CHROM POS ID REF ALT")
    chrom, pos_text, vid, ref, alts = cols[:5]
    try:
        pos = int(pos_text)
    except ValueError:
        pos = 0
    if pos < 1:
        raise VcfError(f"{path}: line {n}: POS {pos_text!r} is not a positive integer")
    if not _DNA.match(ref):
        raise VcfError(f"{path}: line {n}: REF {ref!r} is not a DNA sequence (A, C, G, T, N)")
    if chrom != last[0]:
        if chrom in seen:
            raise VcfError(f"{path}: line {n}: {chrom} comes back after other contigs: the VCF is not sorted "
                           "(bcftools sort)")
        seen.add(chrom)
    elif pos < last[1]:
        raise VcfError(f"{path}: line {n}: POS {pos} on {chrom} after {last[1]}: the VCF is not sorted "
                       "(bcftools sort)")
    for alt in alts.split(","):
        if _DNA.match(alt):
            out.line.append(n)
            out.chrom.append(chrom)
            out.pos.append(pos)
            out.id.append(vid)
            out.ref.append(ref.upper())
            out.alt.append(alt.upper())
        elif alt.startswith("<"):
            skipped.symbolic += 1
        elif "[" in alt or "]" in alt:
            skipped.breakend += 1
        elif alt == "*":
            skipped.spanning += 1
        elif alt == ".":
            skipped.no_alt += 1
        else:
            raise VcfError(f"{path}: line {n}: ALT {alt!r} is not a sequence, a symbolic allele or a breakend")
    return chrom, pos
