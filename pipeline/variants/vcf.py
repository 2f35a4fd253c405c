"""VCF input, streamed: one row per (record, ALT) in batches, every line checked.

Plain or gzip/bgzip (bgzip is gzip: read in one stream, a truncated file named as such).  Kept: SNVs, MNVs, insertions,
deletions and complex substitutions (REF and ALT DNA).  Skipped with a count: symbolic ALTs (``<DEL>``), breakends
(``]chr2:3]A``), ``*`` (a spanning deletion) and ``.`` (no ALT).  Refused, naming the line: a record before the
``#CHROM`` header, fewer than five columns, a POS that is no positive integer, a REF or ALT that is no sequence, and
records out of order (a contig that comes back after another, or a POS before the previous one: ``bcftools sort``).

With ``samples`` the GT field of those samples is read: each allele row says whether any of them carries it and on
which haplotypes (``2 * sample + k`` for the GT's ``k``-th allele) — where the genotype is phased (``|``), haploid
or homozygous; an unphased heterozygous genotype carries the allele on no known haplotype (counted).
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
    carried: list = field(default_factory=list)  # with samples: any of them carries the ALT
    slots: list = field(default_factory=list)    # with samples: the haplotypes carrying it (tuple of 2 * sample + k)

    def __len__(self) -> int:
        return len(self.line)


@dataclass
class Skipped:
    """ALTs not scored, by reason."""
    symbolic: int = 0
    breakend: int = 0
    spanning: int = 0
    no_alt: int = 0
    unphased: int = 0           # (sample, ALT) heterozygous without phase: on no known haplotype

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


@dataclass
class Samples:
    """The samples whose genotypes are read: their names and columns (0-based) in the VCF."""
    names: list
    columns: list


def _samples(path: str, n: int, text: str, wanted) -> Samples | None:
    """The header line's samples named by ``wanted`` (a list, or "all"); a name the VCF lacks is refused."""
    if wanted is None:
        return None
    have = text.rstrip("\r\n").split("\t")[9:]
    if not have:
        raise VcfError(f"{path}: line {n}: no sample columns: --samples and --haplotypes need the genotypes (GT) of "
                       "samples")
    names = have if wanted == "all" else list(wanted)
    missing = [w for w in names if w not in have]
    if missing or not names:
        shown = ", ".join(have[:8]) + (" …" if len(have) > 8 else "") if have else "none"
        raise VcfError(f"{path}: line {n}: sample(s) {', '.join(missing) or '(none)'} not in the VCF (its samples: "
                       f"{shown})")
    return Samples(names, [9 + have.index(w) for w in names])


def open_lines(path: str, region: str | None = None):
    """The VCF's lines (a context manager): the whole file, or with ``region`` (``chr:start-end``) its header then
    the records overlapping the region, read through the ``.tbi``/``.csi`` index beside it (``pipeline.io.tabix``);
    line numbers then count in that view."""
    if region is None:
        return open_text(path)
    from contextlib import nullcontext  # noqa: PLC0415
    from itertools import chain  # noqa: PLC0415

    from pipeline.io.tabix import fetch_lines, header_lines  # noqa: PLC0415

    try:
        records = fetch_lines(path, region)
    except (FileNotFoundError, ValueError) as e:
        raise VcfError(f"--region {region}: {e}") from None
    return nullcontext(line + "\n" for line in chain(header_lines(path), records))


def read_vcf(path: str, batch: int = 100_000, skipped: Skipped | None = None, samples=None, on_header=None,
             region: str | None = None):
    """Batches (:class:`Alleles`) of at most ``batch`` ALT alleles of the VCF at ``path`` (the records overlapping
    ``region`` only, where given), in file order; ``skipped`` counts the ALTs left out.  ``samples`` (names, or
    "all") reads their genotypes; ``on_header(Samples)`` is told which before the first batch."""
    skipped = skipped if skipped is not None else Skipped()
    out = Alleles()
    header = False
    chosen = None
    seen: set = set()
    last = (None, 0)
    n = 0
    try:
        with open_lines(path, region) as f:
            for n, text in enumerate(f, 1):
                text = text.rstrip("\r\n")
                if text.startswith("##") or not text.strip():
                    continue
                if text.startswith("#"):
                    if not text.startswith("#CHROM"):
                        raise VcfError(f"{path}: line {n}: a header line must start with ## or #CHROM")
                    header = True
                    chosen = _samples(path, n, text, samples)
                    if on_header is not None:
                        on_header(chosen)
                    continue
                if not header:
                    raise VcfError(f"{path}: line {n}: a record before the #CHROM header line (is this a VCF?)")
                last = _record(path, n, text, out, skipped, seen, last, chosen)
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


def _record(path, n, text, out: Alleles, skipped: Skipped, seen: set, last: tuple, chosen=None) -> tuple:
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
    gts = None if chosen is None else _genotypes(path, n, cols, chosen)
    for number, alt in enumerate(alts.split(","), 1):
        if _DNA.match(alt):
            if gts is not None:
                _carriers(gts, str(number), out, skipped)
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


def _genotypes(path, n, cols: list, chosen: Samples) -> list:
    """The chosen samples' GT alleles (``["0", "1"]``) and whether phased: ``[(alleles, phased)]``; missing
    genotypes (no GT, ``.``) carry nothing."""
    if len(cols) < 10:
        raise VcfError(f"{path}: line {n}: {len(cols)} columns: no FORMAT and sample columns to read genotypes from")
    keys = cols[8].split(":")
    if "GT" not in keys:
        return [((), True)] * len(chosen.columns)
    g = keys.index("GT")
    out = []
    for c in chosen.columns:
        if c >= len(cols):
            raise VcfError(f"{path}: line {n}: {len(cols)} columns, the sample of column {c + 1} is missing")
        fields = cols[c].split(":")
        gt = fields[g] if g < len(fields) else "."
        out.append((tuple(gt.replace("|", "/").split("/")), "/" not in gt))
    return out


def _carriers(gts: list, number: str, out: Alleles, skipped: Skipped) -> None:
    """Append which chosen samples carry ALT ``number`` and on which known haplotypes."""
    slots = []
    carried = False
    for s, (alleles, phased) in enumerate(gts):
        if number not in alleles:
            continue
        carried = True
        if phased or len(alleles) == 1 or all(a == number for a in alleles):
            slots.extend(2 * s + k for k, a in enumerate(alleles[:2]) if a == number)
        else:
            skipped.unphased += 1
    out.carried.append(carried)
    out.slots.append(tuple(slots))
