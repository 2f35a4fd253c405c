"""The VCF staged for the tasks: its ALT alleles, checked against the genome, in chunks of one record each
(``OUT/_alleles/part-<chunk>.parquet``, file order), streamed a batch at a time (bounded memory).

REF is checked against the genome: a mismatching allele is not scored (the first few named, all counted), and the run
is refused when more than ``max_ref_mismatch`` of the alleles mismatch — a VCF of another genome build is the common
mistake.  A contig named with ``chr`` where the genome has none (or the reverse) is refused as such; alleles on other
contigs the genome lacks are counted and skipped.

With ``samples`` only the alleles they carry are staged; with ``haplotypes`` the combined alleles of nearby variants
on one phased haplotype (``haplotypes.py``) are staged too, in chunks of their own when their record ends."""
from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from pipeline import MotifgridError
from pipeline.io import storage
from pipeline.io.genome import GenomeStore
from pipeline.io.schema import ALLELES_SCHEMA
from pipeline.variants.alleles import CODE
from pipeline.variants.haplotypes import Grouper
from pipeline.variants.vcf import Alleles, Skipped, read_vcf

SHOWN = 5                   # mismatching REFs named one by one


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
    only the records overlapping it (through the VCF's tabix index)."""
    st = Staged(skipped=Skipped())
    folder = storage.join(out, "_alleles")
    storage.makedirs(folder)
    names = store.records.index
    grouper = [None]

    def on_header(chosen):
        if haplotypes:
            grouper[0] = Grouper(chosen.names, flank)

    for batch in read_vcf(vcf, skipped=st.skipped, samples=samples or ("all" if haplotypes else None),
                          on_header=on_header, region=region):
        keep = _on_genome(vcf, batch.chrom, names, st)
        ok = _ref_matches(store, batch, keep, st)
        _check_fraction(vcf, store, st, max_ref_mismatch, final=False)
        if samples:
            carried = np.array(batch.carried, bool)
            st.not_carried += int((keep & ok & ~carried).sum())
            keep &= carried
        _write_chunks(folder, batch, keep & ok, chunk, st)
        if grouper[0] is not None:
            _group(grouper[0], batch, keep & ok, store, folder, chunk, st)
    if grouper[0] is not None:
        _flush(grouper[0], store, folder, chunk, st)
    _check_fraction(vcf, store, st, max_ref_mismatch, final=True)
    if not st.alleles:
        raise VariantsError(f"{vcf}: no allele to score on {store.path} ({_nothing_why(st)})")
    if warn is not None:
        for line in _warnings(st, max_ref_mismatch):
            warn(line)
    storage.atomic_write_bytes(storage.join(folder, "_staged.json"), json.dumps(st.as_dict()).encode())
    return st


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


def _on_genome(vcf: str, chroms: list, names: dict, st: Staged) -> np.ndarray:
    keep = np.ones(len(chroms), bool)
    for i, c in enumerate(chroms):
        if c in names:
            continue
        other = c[3:] if c.startswith("chr") else f"chr{c}"
        if other in names:
            raise VariantsError(f"{vcf}: contig {c!r} is {other!r} in the genome: the VCF and the genome name "
                                "chromosomes differently (a chr prefix); rename the VCF's contigs "
                                "(bcftools annotate --rename-chrs) or give the matching genome")
        st.absent[c] = st.absent.get(c, 0) + 1
        keep[i] = False
    return keep


def _ref_matches(store: GenomeStore, batch, keep: np.ndarray, st: Staged) -> np.ndarray:
    """Each allele's REF equals the genome there (N in either matches anything); mismatches counted and named.  The
    genome is read once per run of alleles on one record within 4 Mb, the bases compared all at once."""
    ok = np.ones(len(batch), bool)
    rec = store.records
    i = 0
    while i < len(batch):
        j = i
        while j < len(batch) and batch.chrom[j] == batch.chrom[i] and batch.pos[j] - batch.pos[i] < (1 << 22):
            j += 1
        if keep[i]:
            ok[i:j] = _compare(store, batch, i, j, int(rec.lengths[rec.index[batch.chrom[i]]]), st)
        i = j
    return ok


def _compare(store: GenomeStore, batch, i: int, j: int, length: int, st: Staged) -> np.ndarray:
    name = batch.chrom[i]
    lo = batch.pos[i] - 1
    refs = batch.ref[i:j]
    sizes = np.array([len(r) for r in refs], np.int64)
    start = np.array(batch.pos[i:j], np.int64) - 1 - lo
    hi = min(int((start + sizes).max()) + lo, length)
    seg = np.concatenate([store.fetch(name, lo, hi), np.full(int(sizes.max()), 5, np.uint8)])   # 5: past the end
    want = CODE[np.frombuffer("".join(refs).encode(), np.uint8)]
    allele = np.repeat(np.arange(j - i), sizes)
    offset = np.arange(want.size) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    got = seg[start[allele] + offset]
    base_ok = (got == want) | ((got == 4) | (want > 3)) & (got != 5)
    good = np.logical_and.reduceat(base_ok, np.cumsum(sizes) - sizes) if want.size else np.ones(0, bool)
    st.checked += j - i
    for k in np.flatnonzero(~good):
        st.mismatched += 1
        if len(st.examples) < SHOWN:
            q = int(start[k])
            seen = "".join("ACGTN"[c] for c in seg[q:q + sizes[k]] if c < 5) or "past the end"
            st.examples.append(f"line {batch.line[i + k]} {name}:{batch.pos[i + k]} REF {refs[k]}, genome {seen}")
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
    _write_chunks(folder, batch, np.ones(len(combos), bool), size, st)


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


def _write_chunks(folder: str, batch, keep: np.ndarray, size: int, st: Staged) -> None:
    """The kept alleles in chunks of at most ``size``, one record each."""
    idx = np.flatnonzero(keep)
    cols = {k: getattr(batch, k) for k in ("line", "chrom", "pos", "id", "ref", "alt")}
    cols["haplotype"] = getattr(batch, "haplotype", None) or [None] * len(batch)
    start = 0
    while start < idx.size:
        chrom = batch.chrom[idx[start]]
        end = start
        while end < idx.size and end - start < size and batch.chrom[idx[end]] == chrom:
            end += 1
        take = idx[start:end]
        table = pa.table({k: pa.array([v[t] for t in take], ALLELES_SCHEMA.field(k).type) for k, v in cols.items()},
                         schema=ALLELES_SCHEMA)
        cid = f"{len(st.chunks):06d}"
        storage.write_parquet(table, storage.join(folder, f"part-{cid}.parquet"))
        st.chunks.append((cid, chrom))
        st.alleles += int(take.size)
        start = end


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
