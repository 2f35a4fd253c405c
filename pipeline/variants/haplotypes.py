"""Phased haplotypes (``--haplotypes``): nearby variants on one haplotype scored together.

Two ALT alleles carried by the same haplotype (phased GT) are *nearby* when one window of the longest motif can
cover both edits: the next edit starts less than ``flank`` (the longest motif's length - 1) bases after the previous
one ends.  A run of nearby alleles on a haplotype becomes one combined allele: REF is the genome from the first edit's
start to the last edit's end, ALT the same span with every edit applied (the bases between edits kept), scored like an
MNV — the windows overlapping that span, on both sides (so a window between two edits that touches neither is among
them, as the middle base of an MNV is).  Each distinct combination is scored once; its ``haplotype`` column lists
the haplotypes that carry it (``sample:1``/``sample:2`` for the GT's first/second allele).  The single alleles are
scored as without ``--haplotypes``; combinations come after their record's single alleles.

Edits that overlap on one haplotype (a deletion over an SNV of the same haplotype: an inconsistent phasing) cannot
be applied together: the later one is left out of that haplotype's run (counted).  Memory: the open run of each
haplotype and the distinct combinations of one record."""
from __future__ import annotations

from dataclasses import dataclass, field

from pipeline.variants.alleles import trim


@dataclass
class Member:
    line: int
    pos: int
    id: str
    start: int      # 0-based trimmed edit [start, end) on the record
    end: int
    core: str       # the trimmed ALT bases


@dataclass
class Combined:
    """A combined allele as staged: one row of ``_alleles/`` with its ``haplotype`` carriers."""
    line: int
    pos: int
    id: str
    ref: str
    alt: str
    haplotype: str


@dataclass
class Grouper:
    """Runs of nearby alleles per haplotype, fed in file order (``add``); ``flush`` the record's combinations."""
    names: list                                         # sample names, haplotype slot ``s`` is ``names[s // 2]``
    flank: int
    open: dict = field(default_factory=dict)            # slot -> [Member]
    combos: dict = field(default_factory=dict)          # tuple of (line, start, core) -> (members, [slot])
    conflicts: int = 0
    chrom: str | None = None

    def add(self, chrom: str, line: int, pos: int, vid: str, ref: str, alt: str, slots: tuple) -> None:
        if chrom != self.chrom:
            self.close_all()
            self.chrom = chrom
        p, rc, ac = trim(pos, ref, alt)
        m = Member(line, pos, vid, p, p + len(rc), ac)
        for s in slots:
            run = self.open.get(s)
            if run and m.start < run[-1].end:
                self.conflicts += 1             # overlaps the run's last edit on this haplotype
                continue
            if run and m.start - run[-1].end >= self.flank:
                self._close(s)
                run = None
            if run:
                run.append(m)
            else:
                self.open[s] = [m]

    def _close(self, slot: int) -> None:
        run = self.open.pop(slot, None)
        if run and len(run) > 1:
            key = tuple((x.line, x.start, x.core) for x in run)
            self.combos.setdefault(key, (run, []))[1].append(slot)

    def close_all(self) -> None:
        for s in list(self.open):
            self._close(s)

    def flush(self, fetch) -> list:
        """The record's combinations (runs all closed), by position; ``fetch(start, end)`` gives genome text."""
        self.close_all()
        out = [self._combined(run, slots, fetch) for run, slots in self.combos.values()]
        self.combos = {}
        return sorted((c for c in out if c is not None), key=lambda c: (c.pos, c.line, c.alt))

    def _combined(self, run: list, slots: list, fetch) -> Combined | None:
        lo, hi = run[0].start, run[-1].end
        anchor = 1 if hi == lo else 0           # only insertions: keep the base before them, as VCF does
        if lo - anchor < 0:
            return None                         # insertions before a record's first base: nothing to anchor on
        genome = fetch(lo - anchor, hi)
        alt, at = [genome[:anchor]], lo
        for x in run:
            alt += [genome[anchor + at - lo:anchor + x.start - lo], x.core]
            at = x.end
        alt.append(genome[anchor + at - lo:])
        alt_text = "".join(alt)
        if alt_text == genome:
            return None
        label = ",".join(f"{self.names[s // 2]}:{s % 2 + 1}" for s in sorted(slots))
        return Combined(run[0].line, lo - anchor + 1, ";".join(x.id for x in run), genome, alt_text, label)
