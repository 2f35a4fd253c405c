"""VCF input, streamed: one row per (record, ALT) in batches, every line checked.

Plain or gzip/bgzip (bgzip is gzip: read in one stream, a truncated file named as such).  Kept: SNVs, MNVs, insertions,
deletions and complex substitutions (REF and ALT DNA).  Skipped with a count: symbolic ALTs (``<DEL>``), breakends
(``]chr2:3]A``), ``*`` (a spanning deletion) and ``.`` (no ALT).  Refused, naming the line: a record before the
``#CHROM`` header, fewer than five columns, a POS that is no positive integer, a REF or ALT that is no sequence, and
records out of order (a contig that comes back after another, or a POS before the previous one: ``bcftools sort``).

With ``samples`` the GT field of those samples is read: each allele row says whether any of them carries it and on
which haplotypes (``2 * sample + k`` for the GT's ``k``-th allele) — where the genotype is phased (``|``), haploid
or homozygous; an unphased heterozygous genotype carries the allele on no known haplotype (counted).

:func:`read_columns` is the fast reader of the common case (no samples, no region): the same batches as columns
(:class:`Columns`), the records parsed by Arrow and checked a batch at a time.  It reads only what it reads exactly
as :func:`read_vcf` does; anything else (a blank or ``#`` line among the records, rows of different column counts,
a field :func:`read_vcf` would refuse, records out of order, bytes that are not UTF-8...) makes it give up
(:class:`Irregular`): the caller then reads the file with :func:`read_vcf`, which names any error.
"""
from __future__ import annotations

import gzip
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline import MotifgridError

_DNA = re.compile(r"^[ACGTNacgtn]+$")
_BLOCK = 1 << 22            # read_columns: bytes parsed at a time (a longer line makes it give up)


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


# ------------------------------------------------------------------------------------------------ the fast reader
class Irregular(Exception):  # noqa: N818  (not an error: a hand-over)
    """:func:`read_columns` gives up: the file has something it does not read exactly as :func:`read_vcf`."""


@dataclass
class Columns:
    """A batch of ALT alleles as columns (what staging works on): ``line`` and ``pos`` NumPy int64, ``chrom``,
    ``id``, ``ref``, ``alt`` (upper case) and ``haplotype`` (or None: all null) Arrow strings."""
    line: np.ndarray
    pos: np.ndarray
    chrom: pa.Array
    id: pa.Array
    ref: pa.Array
    alt: pa.Array
    haplotype: pa.Array | None = None

    def __len__(self) -> int:
        return len(self.line)

    @classmethod
    def of(cls, batch: Alleles) -> Columns:
        """The columns of a :class:`Alleles` batch (``haplotype``: the attribute, where set)."""
        try:
            pos = np.array(batch.pos, np.int64)
        except OverflowError:               # a POS past int64: an error only where it is used, as before
            pos = np.array(batch.pos, object)
        hap = getattr(batch, "haplotype", None)
        return cls(np.array(batch.line, np.int64), pos, *(pa.array(getattr(batch, k), pa.string())
                                                          for k in ("chrom", "id", "ref", "alt")),
                   pa.array(hap, pa.string()) if hap else None)

    def slice(self, start: int, end: int) -> Columns:
        return Columns(self.line[start:end], self.pos[start:end], *(a.slice(start, end - start) for a in
                                                                    (self.chrom, self.id, self.ref, self.alt)))

    @staticmethod
    def concat(parts: list) -> Columns:
        if len(parts) == 1:
            return parts[0]
        return Columns(np.concatenate([p.line for p in parts]), np.concatenate([p.pos for p in parts]),
                       *(pa.concat_arrays([getattr(p, k) for p in parts]) for k in ("chrom", "id", "ref", "alt")))

    def codes(self) -> tuple:
        """``(codes, names)``: each allele's contig as an index into ``names`` (the contigs in order of first
        appearance)."""
        if getattr(self, "_codes", None) is None:
            enc = pc.dictionary_encode(self.chrom)
            self._codes = (enc.indices.to_numpy(zero_copy_only=False), enc.dictionary.to_pylist())
        return self._codes


def read_columns(path: str, batch: int = 100_000, skipped: Skipped | None = None):
    """:func:`read_vcf`'s batches (the same alleles, line numbers and batch ends; no samples, no region) as
    :class:`Columns`, the records read by Arrow.  Raises :class:`Irregular` where the file has anything it does not
    read exactly as :func:`read_vcf` (a batch is yielded only once every record up to the end of its Arrow block
    is checked: what was yielded is what :func:`read_vcf` yields)."""
    skipped = skipped if skipped is not None else Skipped()
    try:
        with open(path, "rb") as f:
            gz = f.read(2) == b"\x1f\x8b"
        f = gzip.open(path, "rb") if gz else open(path, "rb")   # noqa: SIM115  (closed below)
    except Exception as e:  # noqa: BLE001
        raise Irregular(str(e)) from None
    with f:
        done = _skip_header(f)
        order = _Order()
        pending, count = [], 0
        for rb in _record_batches(f):
            cols, parent = _batch_alleles(rb, done, skipped, order)
            done += rb.num_rows
            start = 0
            while count + len(cols) - start >= batch:         # read_vcf yields after the record that fills a batch
                end = int(np.searchsorted(parent, parent[start + batch - count - 1], "right"))
                yield Columns.concat(pending + [cols.slice(start, end)])
                pending, count, start = [], 0, end
            if start < len(cols):
                pending.append(cols.slice(start, len(cols)))
                count += len(cols) - start
    if pending:
        yield Columns.concat(pending)


def _skip_header(f) -> int:
    """The lines up to the ``#CHROM`` line (counted as read_vcf counts them); anything but ``##`` lines before it,
    or a lone CR, gives up."""
    n = 0
    try:
        while True:
            raw = f.readline()
            if not raw:
                raise Irregular("no #CHROM line")
            n += 1
            text = raw[:-1] if raw.endswith(b"\n") else raw
            text = text[:-1] if text.endswith(b"\r") else text
            if b"\r" in text:
                raise Irregular("a CR within a header line")
            if text.startswith(b"#CHROM"):
                return n
            if not text.startswith(b"##"):
                raise Irregular("a header line that is not ##")
    except Irregular:
        raise
    except Exception as e:  # noqa: BLE001  (a corrupt compressed file...: read_vcf says so)
        raise Irregular(str(e)) from None


def _record_batches(f):
    """Arrow record batches of the first five columns (strings) of the records from ``f`` on; give up on any
    error (a row of another column count, bytes that are not UTF-8, a line longer than a block...)."""
    import pyarrow.csv as pcsv  # noqa: PLC0415

    names = [f"f{i}" for i in range(5)]
    try:
        reader = pcsv.open_csv(
            f, read_options=pcsv.ReadOptions(autogenerate_column_names=True, block_size=_BLOCK),
            parse_options=pcsv.ParseOptions(delimiter="\t", quote_char=False, escape_char=False,
                                            ignore_empty_lines=False),
            convert_options=pcsv.ConvertOptions(include_columns=names, column_types=dict.fromkeys(names, pa.string())))
        while True:
            try:
                rb = reader.read_next_batch()
            except StopIteration:
                return
            if rb.num_rows:
                yield rb
    except Exception as e:  # noqa: BLE001
        raise Irregular(str(e)) from None


@dataclass
class _Order:
    """The records' order so far: the contigs seen, the last contig and POS."""
    seen: set = field(default_factory=set)
    chrom: str | None = None
    pos: int = 0

    def check(self, chrom: pa.Array, pos: np.ndarray) -> None:
        """Give up where a contig comes back after another or POS goes down within one."""
        enc = pc.dictionary_encode(chrom)
        codes, names = enc.indices.to_numpy(zero_copy_only=False), enc.dictionary.to_pylist()
        starts = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1]])
        for s in starts.tolist():
            name = names[codes[s]]
            if name != self.chrom:
                if name in self.seen:
                    raise Irregular("a contig comes back")
                self.seen.add(name)
            elif pos[s] < self.pos:
                raise Irregular("POS goes down")
            self.chrom = name
        down = np.diff(pos) < 0
        down[starts[1:] - 1] = False
        if down.any():
            raise Irregular("POS goes down")
        self.pos = int(pos[-1])


_DIGIT = np.zeros(256, bool)
_DIGIT[np.frombuffer(b"0123456789", np.uint8)] = True
_BASE = np.zeros(256, bool)
_BASE[np.frombuffer(b"ACGTNacgtn", np.uint8)] = True


def string_bytes(arr: pa.Array) -> tuple:
    """``(data, offsets)`` of an Arrow string array without nulls: string ``k`` is ``data[offsets[k]:offsets[k + 1]]``
    (NumPy, no copy of the bytes)."""
    _, offsets, data = arr.buffers()
    offsets = np.frombuffer(offsets, np.int32)[arr.offset:arr.offset + len(arr) + 1].astype(np.int64)
    data = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    return data, offsets


def _all_of(arr: pa.Array, table: np.ndarray, most: int | None = None) -> bool:
    """Every string of ``arr`` is 1 (to ``most``) bytes of ``table``."""
    data, offsets = string_bytes(arr)
    sizes = np.diff(offsets)
    return bool(sizes.min() >= 1 and (most is None or sizes.max() <= most)
                and table[data[offsets[0]:offsets[-1]]].all())


def _batch_alleles(rb, done: int, skipped: Skipped, order: _Order) -> tuple:
    """The DNA ALTs of an Arrow batch of records (``done`` lines before it) as :class:`Columns` and each one's
    record (row of ``rb``); other ALTs counted in ``skipped``; gives up on what read_vcf refuses or reads
    otherwise (POS: 1 to 18 digits, not 0; REF: ``_DNA``; contig: not starting with ``#``)."""
    chrom, pos_text, vid, ref, alts = rb.columns
    if not _all_of(pos_text, _DIGIT, 18) or not _all_of(ref, _BASE):
        raise Irregular("a POS or REF read_vcf refuses or reads otherwise")
    pos = pc.cast(pos_text, pa.int64()).to_numpy()
    if (pos < 1).any() or pc.any(pc.starts_with(chrom, "#")).as_py():
        raise Irregular("POS 0, or a # line among the records")
    order.check(chrom, pos)
    if _all_of(alts, _BASE):                                  # one DNA ALT a record (no comma)
        parent = np.arange(len(rb))
        return Columns(done + parent + 1, pos, chrom, vid, pc.ascii_upper(ref), pc.ascii_upper(alts)), parent
    split = pc.split_pattern(alts, ",")
    flat = pc.list_flatten(split)
    parent = pc.list_parent_indices(split).to_numpy().astype(np.int64)
    dna = pc.match_substring_regex(flat, _DNA.pattern)
    if not pc.all(dna).as_py():
        _count_skipped(pc.filter(flat, pc.invert(dna)), skipped)
        flat = pc.filter(flat, dna)
        parent = parent[dna.to_numpy(zero_copy_only=False)]
    take = pa.array(parent)
    cols = Columns(done + parent + 1, pos[parent], chrom.take(take), vid.take(take), pc.ascii_upper(ref).take(take),
                   pc.ascii_upper(flat))
    return cols, parent


def _count_skipped(other: pa.Array, skipped: Skipped) -> None:
    """Count the ALTs that are no DNA as read_vcf does (the first that applies: ``<``, a bracket, ``*``, ``.``);
    give up on any other (read_vcf refuses it)."""
    sym = pc.starts_with(other, "<").to_numpy(zero_copy_only=False)
    brk = pc.or_(pc.match_substring(other, "["), pc.match_substring(other, "]")).to_numpy(zero_copy_only=False)
    brk &= ~sym
    spanning = pc.equal(other, "*").to_numpy(zero_copy_only=False)
    no_alt = pc.equal(other, ".").to_numpy(zero_copy_only=False)
    if not (sym | brk | spanning | no_alt).all():
        raise Irregular("an ALT that is not a sequence, a symbolic allele or a breakend")
    skipped.symbolic += int(sym.sum())
    skipped.breakend += int(brk.sum())
    skipped.spanning += int(spanning.sum())
    skipped.no_alt += int(no_alt.sum())
