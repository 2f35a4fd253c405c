"""The VCF staged for the tasks: its ALT alleles, checked against the genome, in chunks of one record each
(``OUT/_alleles/part-<chunk>.parquet``, file order), streamed a batch at a time (bounded memory).

REF is checked against the genome: a mismatching allele is not scored (the first few named, all counted), and the run
is refused when more than ``max_ref_mismatch`` of the alleles mismatch — a VCF of another genome build is the common
mistake.  A contig named with ``chr`` where the genome has none (or the reverse) is refused as such; alleles on other
contigs the genome lacks are counted and skipped.

With ``samples`` only the alleles they carry are staged; with ``haplotypes`` the combined alleles of nearby variants
on one phased haplotype (``haplotypes.py``) are staged too, in chunks of their own when their record ends.

The common case (no samples, haplotypes or region) is read by Arrow (``vcf.read_columns``), the staging done on whole
columns and the chunk files written by a thread; a file that reader gives up on is staged again from its first line
by the Python reader (``vcf.read_vcf``): the same chunks, the same counts, the same errors."""
from __future__ import annotations

import json
from collections import deque
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import closing
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pipeline import MotifgridError
from pipeline.io import storage
from pipeline.io.genome import GenomeStore
from pipeline.io.schema import ALLELES_SCHEMA
from pipeline.variants.alleles import CODE
from pipeline.variants.haplotypes import Grouper
from pipeline.variants.vcf import Alleles, Columns, Irregular, Skipped, read_columns, read_vcf, string_bytes

SHOWN = 5                   # mismatching REFs named one by one
_LAST = int(np.iinfo(np.int64).max)
FAST = True                 # the common case (no samples, haplotypes or region) read by read_columns (tests: False)
BATCH = 100_000             # alleles checked and staged at a time (chunks end with a batch; the REF check follows each)


class VariantsError(MotifgridError, RuntimeError):
    """A variants run that cannot start or go on; ``str(e)`` is one line."""


@dataclass
class Staged:
    """What staging found: the chunks ``[(chunk id, record)]`` and the counts."""
    chunks: list = field(default_factory=list)
    alleles: int = 0
    records: int = 0
    skipped: Skipped = field(default_factory=Skipped)
    absent: dict = field(default_factory=dict)          # contig the genome lacks -> alleles
    mismatched: int = 0
    checked: int = 0
    examples: list = field(default_factory=list)
    not_carried: int = 0                                # alleles none of --samples carries
    combined: int = 0                                   # haplotype combinations staged
    conflicts: int = 0                                  # edits overlapping another of their haplotype

    def as_dict(self) -> dict:
        return {"chunks": self.chunks, "alleles": self.alleles, "checked": self.checked,
                "not_carried": self.not_carried, "combined": self.combined, "haplotype_conflicts": self.conflicts,
                "ref_mismatches": self.mismatched, "ref_mismatch_examples": self.examples,
                "absent_contigs": self.absent, "skipped": self.skipped.__dict__}


def stage(vcf: str, store: GenomeStore, out: str, chunk: int, max_ref_mismatch: float, warn=None,
          samples: list | None = None, haplotypes: bool = False, flank: int = 0, region: str | None = None) -> Staged:
    """Stream ``vcf`` into ``out/_alleles/``; ``warn(line)`` says what is skipped.  Refuses a VCF whose contigs or
    REF alleles say it is not on ``store``'s genome.  ``samples``: only the alleles they carry; ``haplotypes``: the
    combined alleles of nearby variants of each phased haplotype (of ``samples``, else every sample) too; ``region``:
    only the records overlapping it (through the VCF's tabix index).

    Without samples, haplotypes and region the VCF is read by :func:`read_columns` (Arrow); where it gives up
    (:class:`Irregular`) staging starts again from the first line with :func:`read_vcf`, which stages the same
    chunks again (the same names) and names any error."""
    folder = storage.join(out, "_alleles")
    storage.makedirs(folder)
    store = _Held(store)
    st = None
    if FAST and not samples and not haplotypes and region is None:
        st = Staged(skipped=Skipped())
        with _Writer() as writer, closing(read_columns(vcf, batch=BATCH, skipped=st.skipped)) as batches:
            try:
                for cols in batches:
                    _stage_batch(vcf, store, folder, cols, chunk, max_ref_mismatch, st, writer=writer)
            except Irregular:
                st = None
    if st is None:
        st = _stage_python(vcf, store, folder, chunk, max_ref_mismatch, samples, haplotypes, flank, region)
    _check_fraction(vcf, store, st, max_ref_mismatch, final=True)
    if not st.alleles:
        raise VariantsError(f"{vcf}: no allele to score on {store.path} ({_nothing_why(st)})")
    if warn is not None:
        for line in _warnings(st, max_ref_mismatch):
            warn(line)
    storage.atomic_write_bytes(storage.join(folder, "_staged.json"), json.dumps(st.as_dict()).encode())
    return st


def _stage_python(vcf: str, store: GenomeStore, folder: str, chunk: int, most: float, samples, haplotypes: bool,
                  flank: int, region) -> Staged:
    """Staging through :func:`read_vcf` (samples, haplotypes, a region, or a file read_columns gave up on)."""
    st = Staged(skipped=Skipped())
    grouper = [None]

    def on_header(chosen):
        if haplotypes:
            grouper[0] = Grouper(chosen.names, flank)

    for batch in read_vcf(vcf, batch=BATCH, skipped=st.skipped, samples=samples or ("all" if haplotypes else None),
                          on_header=on_header, region=region):
        keep = _stage_batch(vcf, store, folder, Columns.of(batch), chunk, most, st,
                            np.array(batch.carried, bool) if samples else None)
        if grouper[0] is not None:
            _group(grouper[0], batch, keep, store, folder, chunk, st)
    if grouper[0] is not None:
        _flush(grouper[0], store, folder, chunk, st)
    return st


def _stage_batch(vcf: str, store: GenomeStore, folder: str, cols: Columns, chunk: int, most: float, st: Staged,
                 carried: np.ndarray | None = None, writer=None) -> np.ndarray:
    """Check a batch's contigs and REFs, stage the alleles kept (of those ``carried``, where given; written by
    ``writer``, where given, else here and now); which."""
    keep = _on_genome(vcf, cols, store.records.index, st)
    ok = _ref_matches(store, cols, keep, st)
    _check_fraction(vcf, store, st, most, final=False)
    if carried is not None:
        st.not_carried += int((keep & ok & ~carried).sum())
        keep &= carried
    _write_chunks(folder, cols, keep & ok, chunk, st, writer)
    return keep & ok


class _Writer:
    """The chunk files written in turn by a thread while the next batch is read and checked.  As if written here:
    after a write's error the later writes are skipped, and the error is raised (at the latest when the ``with``
    block ends, every write done) in place of any later one."""

    def __init__(self, most: int = 64):
        self.pool = ThreadPoolExecutor(1, thread_name_prefix="motifgrid-stage")
        self.pending: deque = deque()
        self.most = most            # files queued at most (memory)
        self.error = None
        self.raised = False

    def _write(self, table: pa.Table, path: str) -> None:
        if self.error is None:
            try:
                storage.write_parquet(table, path)
            except BaseException as e:  # noqa: BLE001  (raised in the staging's thread)
                self.error = e

    def write(self, table: pa.Table, path: str) -> None:
        if len(self.pending) >= self.most:
            self.pending.popleft().result()
        self._raise()
        self.pending.append(self.pool.submit(self._write, table, path))

    def _raise(self) -> None:
        if self.error is not None and not self.raised:
            self.raised = True
            raise self.error

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> bool:
        wait(list(self.pending))
        self.pending.clear()
        self.pool.shutdown()
        self._raise()
        return False


class _Held:
    """The genome store with the last block read held: runs of alleles (and batches) that meet in a block read it
    once (``fetch`` as :meth:`GenomeStore.fetch`; all else the store's)."""

    def __init__(self, store: GenomeStore):
        self.store = store
        self.held = (None, None)

    def __getattr__(self, name: str):
        return getattr(self.store, name)

    def fetch(self, name: str, start: int, end: int) -> np.ndarray:
        store, rec = self.store, self.store.records
        i = rec.index[name]
        lo = int(rec.offsets[i]) + max(start, 0)
        hi = int(rec.offsets[i]) + min(end, int(rec.lengths[i]))
        size = store.block_size
        parts = [np.zeros(0, np.uint8)]
        for b in range(lo // size, (hi - 1) // size + 1) if hi > lo else ():
            if self.held[0] != b:
                self.held = (b, store.read_block(store.block(b)))
            parts.append(self.held[1][max(lo - b * size, 0):min(hi - b * size, size)])
        return np.concatenate(parts)


def load_staged(out: str) -> Staged | None:
    """The staging of an earlier run of ``out`` (``--resume``), or None where it did not finish."""
    path = storage.join(out, "_alleles", "_staged.json")
    if not storage.exists(path):
        return None
    d = json.loads(storage.read_bytes(path))
    st = Staged(chunks=[tuple(c) for c in d["chunks"]], alleles=d["alleles"], checked=d["checked"],
                mismatched=d["ref_mismatches"], examples=d["ref_mismatch_examples"], absent=d["absent_contigs"],
                skipped=Skipped(**d["skipped"]), not_carried=d["not_carried"], combined=d["combined"],
                conflicts=d["haplotype_conflicts"])
    return st


def _on_genome(vcf: str, cols: Columns, names: dict, st: Staged) -> np.ndarray:
    """Which alleles are on a contig of the genome; the others counted by contig.  A contig that is the genome's
    but for a ``chr`` prefix is refused (the first of the batch)."""
    codes, contigs = cols.codes()
    on = np.ones(len(contigs), bool)
    for k, c in enumerate(contigs):
        if c in names:
            continue
        other = c[3:] if c.startswith("chr") else f"chr{c}"
        if other in names:
            raise VariantsError(f"{vcf}: contig {c!r} is {other!r} in the genome: the VCF and the genome name "
                                "chromosomes differently (a chr prefix); rename the VCF's contigs "
                                "(bcftools annotate --rename-chrs) or give the matching genome")
        on[k] = False
    if not on.all():
        counts = np.bincount(codes, minlength=len(contigs))
        for k in np.flatnonzero(~on).tolist():
            st.absent[contigs[k]] = st.absent.get(contigs[k], 0) + int(counts[k])
    return on[codes]


def _ref_matches(store: GenomeStore, cols: Columns, keep: np.ndarray, st: Staged) -> np.ndarray:
    """Each allele's REF equals the genome there (N in either matches anything); mismatches counted and named.  The
    genome is read once per run of alleles on one record within 4 Mb (the alleles are sorted), the bases compared
    all at once."""
    ok = np.ones(len(cols), bool)
    codes, contigs = cols.codes()
    bounds = np.flatnonzero(np.r_[True, codes[1:] != codes[:-1], True]).tolist()
    rec = store.records
    refs = string_bytes(cols.ref)
    for a, b in zip(bounds[:-1], bounds[1:]):
        if not keep[a]:
            continue
        name = contigs[codes[a]]
        length = int(rec.lengths[rec.index[name]])
        i = a
        while i < b:
            far = min(int(cols.pos[i]) + (1 << 22), _LAST)
            j = max(a + int(np.searchsorted(cols.pos[a:b], far, "left")), i + 1)
            ok[i:j] = _compare(store, cols, refs, i, j, name, length, st)
            i = j
    return ok


def _compare(store: GenomeStore, cols: Columns, refs: tuple, i: int, j: int, name: str, length: int,
             st: Staged) -> np.ndarray:
    data, offsets = refs
    lo = int(cols.pos[i]) - 1
    sizes = np.diff(offsets[i:j + 1])
    start = np.array(cols.pos[i:j], np.int64) - 1 - lo
    hi = min(int((start + sizes).max()) + lo, length)
    seg = np.concatenate([store.fetch(name, lo, hi), np.full(int(sizes.max()), 5, np.uint8)])   # 5: past the end
    want = CODE[data[offsets[i]:offsets[j]]]
    allele = np.repeat(np.arange(j - i), sizes)
    offset = np.arange(want.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    got = seg[start[allele] + offset]
    base_ok = (got == want) | ((got == 4) | (want > 3)) & (got != 5)
    good = np.logical_and.reduceat(base_ok, np.cumsum(sizes) - sizes) if want.size else np.ones(0, bool)
    st.checked += j - i
    for k in np.flatnonzero(~good).tolist():
        st.mismatched += 1
        if len(st.examples) < SHOWN:
            q = int(start[k])
            seen = "".join("ACGTN"[c] for c in seg[q:q + sizes[k]] if c < 5) or "past the end"
            ref = data[offsets[i + k]:offsets[i + k + 1]].tobytes().decode()
            st.examples.append(f"line {cols.line[i + k]} {name}:{cols.pos[i + k]} REF {ref}, genome {seen}")
    return good


def _check_fraction(vcf, store, st: Staged, most: float, final: bool) -> None:
    if st.checked and (final or st.checked >= 1000) and st.mismatched > most * st.checked:
        raise VariantsError(f"{vcf}: REF differs from the genome {store.path} at {st.mismatched:,} of "
                            f"{st.checked:,} alleles checked ({100 * st.mismatched / st.checked:.0f} %, above "
                            f"--max-ref-mismatch {most:g}): is the VCF on another genome build? First: "
                            + "; ".join(st.examples[:3]))


def _group(grouper: Grouper, batch: Alleles, keep: np.ndarray, store: GenomeStore, folder: str, size: int,
           st: Staged) -> None:
    """Feed the kept alleles to the haplotype runs; a record's combinations staged when it ends."""
    for i in np.flatnonzero(keep):
        if grouper.chrom is not None and batch.chrom[i] != grouper.chrom:
            _flush(grouper, store, folder, size, st)
        grouper.add(batch.chrom[i], batch.line[i], batch.pos[i], batch.id[i], batch.ref[i], batch.alt[i],
                    batch.slots[i])


def _flush(grouper: Grouper, store: GenomeStore, folder: str, size: int, st: Staged) -> None:
    chrom = grouper.chrom
    if chrom is None:
        return
    combos = grouper.flush(_text_of(store, chrom))
    st.conflicts = grouper.conflicts
    if not combos:
        return
    batch = Alleles(line=[c.line for c in combos], chrom=[chrom] * len(combos), pos=[c.pos for c in combos],
                    id=[c.id for c in combos], ref=[c.ref for c in combos], alt=[c.alt for c in combos])
    batch.haplotype = [c.haplotype for c in combos]
    st.combined += len(combos)
    _write_chunks(folder, Columns.of(batch), np.ones(len(combos), bool), size, st)


def _text_of(store: GenomeStore, chrom: str):
    """``fetch(lo, hi)``: the record's bases as text, read a megabase window at a time (the last one kept: a record's
    combinations come by position)."""
    letters = np.frombuffer(b"ACGTN", np.uint8)
    held = {}

    def fetch(lo: int, hi: int) -> str:
        w0 = lo >> 20
        if (hi - 1) >> 20 != w0:
            return letters[store.fetch(chrom, lo, hi)].tobytes().decode()
        if w0 not in held:
            held.clear()
            held[w0] = letters[store.fetch(chrom, w0 << 20, (w0 + 1) << 20)].tobytes().decode()
        return held[w0][lo - (w0 << 20):hi - (w0 << 20)]
    return fetch


def _write_chunks(folder: str, cols: Columns, keep: np.ndarray, size: int, st: Staged, writer=None) -> None:
    """The kept alleles in chunks of at most ``size``, one record each: runs of one contig among the kept, cut
    every ``size``; each chunk a slice of the kept rows' table (written by ``writer``, where given)."""
    idx = np.flatnonzero(keep)
    if not idx.size:
        return
    codes, contigs = cols.codes()
    kept = codes[idx]
    cuts = np.flatnonzero(kept[1:] != kept[:-1]) + 1
    table = _table(cols, None if idx.size == len(cols) else idx)
    for a, b in zip(np.r_[0, cuts].tolist(), np.r_[cuts, idx.size].tolist()):
        for s in range(a, b, size):
            n = min(size, b - s)
            cid = f"{len(st.chunks):06d}"
            (writer.write if writer is not None else storage.write_parquet)(
                table.slice(s, n), storage.join(folder, f"part-{cid}.parquet"))
            st.chunks.append((cid, contigs[kept[s]]))
            st.alleles += n


def _table(cols: Columns, idx: np.ndarray | None) -> pa.Table:
    """The alleles ``idx`` of the batch (None: all) as a table of ALLELES_SCHEMA."""
    hap = cols.haplotype if cols.haplotype is not None else pa.nulls(len(cols), pa.string())
    strings = [cols.chrom, cols.id, cols.ref, cols.alt, hap]
    line, pos = cols.line, cols.pos
    if idx is not None:
        strings = [a.take(pa.array(idx)) for a in strings]
        line, pos = line[idx], pos[idx]
    chrom, vid, ref, alt, hap = strings
    return pa.table([pa.array(line, pa.int64()), chrom, pa.array(pos, pa.int64()), vid, ref, alt, hap],
                    schema=ALLELES_SCHEMA)


def _nothing_why(st: Staged) -> str:
    parts = []
    if st.absent:
        parts.append(f"contigs absent from the genome: {', '.join(sorted(st.absent)[:5])}")
    if st.skipped.total():
        parts.append(f"ALTs skipped: {st.skipped.line()}")
    if st.mismatched:
        parts.append(f"{st.mismatched:,} REF mismatches")
    return "; ".join(parts) or "the VCF has no record"


def _warnings(st: Staged, most: float) -> list:
    out = []
    if st.skipped.total():
        out.append(f"{st.skipped.total():,} ALT alleles not scored: {st.skipped.line()}")
    if st.absent:
        n = sum(st.absent.values())
        out.append(f"{n:,} alleles on {len(st.absent)} contig(s) the genome lacks, skipped: "
                   + ", ".join(sorted(st.absent)[:5]) + (" …" if len(st.absent) > 5 else ""))
    if st.skipped.unphased:
        out.append(f"{st.skipped.unphased:,} unphased heterozygous genotypes: their ALT is on no known haplotype "
                   "(not combined with nearby variants)")
    if st.conflicts:
        out.append(f"{st.conflicts:,} edits overlap an earlier edit of their haplotype (inconsistent phasing?): "
                   "left out of that haplotype's combination")
    if st.mismatched:
        out.append(f"REF differs from the genome at {st.mismatched:,} of {st.checked:,} alleles (at most "
                   f"{most:g} allowed), not scored: " + "; ".join(st.examples))
    return out
