"""The sequences of ``motifgrid enrich``: targets and controls read into memory, and the one store they are scanned in.

- **Targets** (``SEQUENCES``): a FASTA file (plain, gzip, bgzip; read by :class:`pipeline.io.fasta.FastaReader`), or a
  BED file of regions of a genome store (``--genome``; :func:`pipeline.io.regions.read_bed`, regions in genome
  order), their bases read from the store.
- **Controls** (``--control``): ``shuffled`` (each target shuffled ``K`` times keeping its dinucleotide counts,
  records ``<id>|shuf<k>``; written to ``DIR/control.fa``), ``genomic`` (``K`` regions of the store per target,
  of its length and GC bin, overlapping no target region; ``DIR/control.bed``), or a FASTA / BED file.
- **One store** (:func:`sequence_store`): targets then controls, records ``t<i>`` and ``c<j>`` (unique whatever
  the users' names are, and the first control record tells targets from controls), laid out as ``ingest`` lays
  out a FASTA.  Each sequence is its own record, so overlapping target regions (the summits of nearby peaks)
  each get their own hits, as SEA sees sequences; a scan of BED regions (``scan --regions``) merges overlapping
  regions and credits a shared window to one of them.

Every sequence is kept, also an empty one, one shorter than a motif or one holding N: SEA counts every sequence
in the totals.  A BED region listed twice (the same contig, start and end) is counted once, with a warning.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from pipeline import MotifgridError

KEYWORDS = ("shuffled", "genomic")


class EnrichInputError(MotifgridError, ValueError):
    """Targets or controls that cannot be used; one line naming the file and the problem."""


@dataclass
class Sequences:
    """Sequences held in memory: ``names`` (the users'), ``codes`` (V,) uint8 of all of them end to end,
    ``offsets`` (n + 1,) int64.  BED regions also keep where they are: ``chrom`` (n names), ``start``, ``end``
    ((n,) int64) and ``record`` ((n,) int64, the store's record numbers)."""
    names: list
    codes: np.ndarray
    offsets: np.ndarray
    source: str
    checksum: str
    chrom: list | None = None
    start: np.ndarray | None = None
    end: np.ndarray | None = None
    record: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.names)

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


# ------------------------------------------------------------------------------------ reading
def read_fasta(path: str, role: str) -> Sequences:
    """Every record of a FASTA file; a byte that is no nucleotide code is an error naming the record and position.
    Names must differ among the targets (their sites name them), not among the controls (SEA reads them as given)."""
    from pipeline.io.fasta import FastaReader  # noqa: PLC0415

    reader = FastaReader(path, error=EnrichInputError, unique_names=role != "--control")
    names, starts, parts, total = [], [], [], 0
    for nm, st, codes in reader.batches():         # bytes checked: no nucleotide code is an error
        names += nm
        starts.append(np.asarray(st, np.int64) + total)
        parts.append(codes)
        total += codes.size
    if not names:
        raise EnrichInputError(f"{path}: empty file, no FASTA records ({role})")
    if total == 0:
        raise EnrichInputError(f"{path}: no sequence in any of its {len(names)} record(s) ({role})")
    offsets = np.concatenate(starts + [np.array([total], np.int64)])
    return Sequences(names, np.concatenate(parts), offsets, os.path.abspath(path), reader.checksum)


def read_regions_of(path: str, store, role: str) -> Sequences:
    """The regions of a BED file (3-12 columns) of ``store``, in genome order, with their bases."""
    from pipeline.enrich.controls import read_regions  # noqa: PLC0415
    from pipeline.io.genome import file_checksum  # noqa: PLC0415
    from pipeline.io.regions import RegionError, read_bed  # noqa: PLC0415

    try:
        bed = read_bed(path, store.records)
    except RegionError as e:
        raise EnrichInputError(f"{e} ({role})") from None
    empty = np.flatnonzero(bed.end == bed.start)
    if empty.size:
        k = int(empty[0])
        raise EnrichInputError(f"{path}: region {bed.names[k]!r} ({store.records.names[bed.record[k]]}:{bed.start[k]}-"
                               f"{bed.end[k]}) is empty ({role})")
    keep = _first_of_repeats(bed, path, store.records.names, role)
    record, start, end = bed.record[keep], bed.start[keep], bed.end[keep]
    codes, offsets = read_regions(cached_access(store), record, start, end)
    names = store.records.names
    return Sequences([bed.names[k] for k in keep.tolist()], codes, offsets, os.path.abspath(path), file_checksum(path),
                     chrom=[names[r] for r in record.tolist()], start=start, end=end, record=record)


def _first_of_repeats(bed, path: str, contigs: list, role: str) -> np.ndarray:
    """Indices of ``bed``'s regions without the repeats of an earlier one (the same contig, start and end), with a
    warning when there are any: a peak listed twice (replicates' files concatenated) would count twice in the
    Fisher test's table, and make its motifs look more enriched than they are.  Overlapping regions that are not
    the same interval stay (the summits of nearby peaks)."""
    same = (np.diff(bed.record) == 0) & (np.diff(bed.start) == 0) & (np.diff(bed.end) == 0)   # sorted: repeats adjacent
    repeat = np.flatnonzero(same) + 1
    if repeat.size:
        import warnings  # noqa: PLC0415

        from pipeline.enrich.stats import EnrichWarning  # noqa: PLC0415

        k = int(repeat[0])
        warnings.warn(f"{path}: {repeat.size:,} region(s) repeat an earlier one with the same coordinates (first: "
                      f"{contigs[bed.record[k]]}:{bed.start[k]}-{bed.end[k]}); each region is counted once ({role})",
                      EnrichWarning, stacklevel=3)
    return np.setdiff1d(np.arange(len(bed)), repeat)


def read_sequences(path: str, store, role: str) -> Sequences:
    """A FASTA file, else (with a genome store) a BED file of its regions."""
    from pipeline.io.fasta import sniff_fasta  # noqa: PLC0415

    try:
        sniff_fasta(path, error=EnrichInputError)
        is_fasta = True
    except EnrichInputError as e:
        if not os.path.isfile(path):
            raise EnrichInputError(f"{e} ({role})") from None
        is_fasta = False
        why = str(e).split(": ", 1)[-1]
    if is_fasta:
        return read_fasta(path, role)
    if store is None:
        what = why if "not a FASTA file" in why else f"not a FASTA file ({why})"    # said once
        raise EnrichInputError(f"{path}: {what}; a BED file of regions needs --genome STORE ({role})")
    return read_regions_of(path, store, role)


class _BlockCache:
    """``fetch(record, start, end)`` of a genome store that keeps the last few block rows it decoded: regions read
    in genome order (BED targets, then controls) mostly fall in a block read before, and the controls drawn from a
    chunk that crosses a block border alternate between its two blocks (one row kept: every such draw read a
    block again)."""

    KEEP = 4

    def __init__(self, store):
        self.store = store
        self.rows: dict = {}          # block index -> row, least recently used first

    def __call__(self, record: int, start: int, end: int) -> np.ndarray:
        st = self.store
        rec = st.records
        lo = int(rec.offsets[record]) + start
        hi = int(rec.offsets[record]) + min(end, int(rec.lengths[record]))
        out = np.empty(max(hi - lo, 0), dtype=np.uint8)
        pos, B = lo, st.block_size
        while pos < hi:
            b = pos // B
            row = self.rows.pop(b, None)
            if row is None:
                row = st.read_block(st.block(b))
                if len(self.rows) >= self.KEEP:
                    del self.rows[next(iter(self.rows))]
            self.rows[b] = row
            take = min(hi, (b + 1) * B) - pos
            out[pos - lo:pos - lo + take] = row[pos - b * B:pos - b * B + take]
            pos += take
        return out


def cached_access(store):
    """A :class:`pipeline.enrich.controls.GenomeAccess` of a (format 2) store, its last block row kept."""
    from pipeline.enrich.controls import GenomeAccess  # noqa: PLC0415

    rec = store.records
    return GenomeAccess(list(rec.names), np.asarray(rec.lengths, np.int64), _BlockCache(store), str(store.path))


# ------------------------------------------------------------------------------------ controls
def control_kind(control: str) -> str:
    """``shuffled``, ``genomic``, or ``file`` (a FASTA or BED path)."""
    return control if control in KEYWORDS else "file"


def make_controls(targets: Sequences, control: str, copies: int, seed: int, store) -> tuple[Sequences, dict]:
    """The control sequences and what describes them (``kind``, ``copies``, and for genomic controls the chunks
    read and the regions placed in a widened GC bin)."""
    kind = control_kind(control)
    if kind == "shuffled":
        from pipeline.enrich.controls import shuffled_controls  # noqa: PLC0415

        names, codes, offsets = shuffled_controls(targets.names, targets.codes, targets.offsets, copies, seed)
        return (Sequences(names, codes, offsets, "shuffled", targets.checksum),
                {"kind": kind, "copies": copies, "seed": seed})
    if kind == "genomic":
        return _genomic(targets, copies, seed, store)
    return read_sequences(control, store, "--control"), {"kind": "file", "file": os.path.abspath(control)}


def _genomic(targets: Sequences, copies: int, seed: int, store) -> tuple[Sequences, dict]:
    from pipeline.enrich.controls import ControlError, composition, read_regions, sample_genomic_controls  # noqa: PLC0415

    empty = np.flatnonzero(targets.lengths == 0)
    if empty.size:
        raise EnrichInputError(f"{targets.source}: target {targets.names[int(empty[0])]!r} is empty; genomic controls "
                               "are drawn at each target's length")
    access = cached_access(store)
    gc, n = composition(targets.codes, targets.offsets)
    blank = np.flatnonzero(n == targets.lengths)
    if blank.size:          # no GC to match: its controls would come from the AT-richest bin, sites and all
        k = int(blank[0])
        raise EnrichInputError(f"{targets.source}: {blank.size:,} target(s) hold no A, C, G or T (first: "
                               f"{targets.names[k]!r}, {targets.lengths[k]:,} N); genomic controls are matched to "
                               "each target's GC: leave such targets out, or use --control shuffled")
    exclude = None if targets.record is None else (targets.record, targets.start, targets.end)
    if exclude is None:
        import warnings  # noqa: PLC0415

        from pipeline.enrich.stats import EnrichWarning  # noqa: PLC0415

        warnings.warn(f"{targets.source}: FASTA targets have no place in {store.path}, so genomic controls may overlap "
                      "them (give the targets as a BED of regions of --genome to keep the controls off them)",
                      EnrichWarning, stacklevel=3)
    try:
        ctl = sample_genomic_controls(access, targets.lengths, gc, copies=copies, exclude=exclude, seed=seed)
    except ControlError as e:
        raise EnrichInputError(str(e)) from None
    codes, offsets = read_regions(access, ctl.record, ctl.start, ctl.end)
    k = np.arange(ctl.target.size) - np.searchsorted(ctl.target, ctl.target, side="left") + 1
    names = [f"{targets.names[t]}|ctl{j}" for t, j in zip(ctl.target.tolist(), k.tolist())]
    rec_names = access.names
    seqs = Sequences(names, codes, offsets, "genomic", store.checksum,
                     chrom=[rec_names[r] for r in ctl.record.tolist()], start=ctl.start, end=ctl.end,
                     record=ctl.record)
    gap = round(float(np.abs(ctl.gc - gc[ctl.target]).max()), 4)
    if ctl.widened:
        _warn_widened(ctl.widened, ctl.target.size, gap, access.source)
    return seqs, {"kind": "genomic", "copies": copies, "seed": seed, "chunks": ctl.chunks, "widened": ctl.widened,
                  "largest_gc_gap": gap, "controls": ctl}


def _warn_widened(widened: int, n: int, gap: float, genome: str) -> None:
    """Say that some controls' GC matches their targets' less closely than one bin: the Fisher test then compares
    sequences of different GC, which alone can make GC-rich motifs look enriched."""
    import warnings  # noqa: PLC0415

    from pipeline.enrich.controls import DEFAULT_BIN_WIDTH  # noqa: PLC0415
    from pipeline.enrich.stats import EnrichWarning  # noqa: PLC0415

    warnings.warn(f"{widened:,} of {n:,} genomic controls are from a wider GC bin than their target's (too few "
                  f"regions of {genome} in its {DEFAULT_BIN_WIDTH:.0%} bin); the largest GC gap between a control and "
                  f"its target is {gap:.3f}", EnrichWarning, stacklevel=2)


def write_controls(out: str, targets: Sequences, controls: Sequences, info: dict, store) -> str | None:
    """``control.fa`` (shuffled) or ``control.bed`` (genomic) in ``out``; the file name, or None (the user's)."""
    from pipeline.enrich.controls import write_bed, write_fasta  # noqa: PLC0415

    if info["kind"] == "shuffled":
        write_fasta(os.path.join(out, "control.fa"), controls.names, controls.codes, controls.offsets)
        return "control.fa"
    if info["kind"] == "genomic":
        write_bed(os.path.join(out, "control.bed"), cached_access(store), info["controls"], targets.names)
        return "control.bed"
    return None


# ------------------------------------------------------------------------------------ the store
TARGET_PREFIX, CONTROL_PREFIX = "t", "c"


def record_names(n_targets: int, n_controls: int) -> list:
    """The store's record names: ``t0 … t<T-1>`` then ``c0 … c<C-1>``."""
    return [f"{TARGET_PREFIX}{i}" for i in range(n_targets)] + [f"{CONTROL_PREFIX}{j}" for j in range(n_controls)]


def sequence_store(path: str, targets: Sequences, controls: Sequences, halo: int, block_size: int):
    """One genome store of the targets then the controls (records :func:`record_names`)."""
    from pipeline.io.genome import store_from_codes  # noqa: PLC0415

    codes = np.concatenate([targets.codes, controls.codes])
    offsets = np.concatenate([targets.offsets[:-1], controls.offsets + targets.offsets[-1]])
    # a scratch store (removed at the end of the run), written and read once: no codec (100,000 peaks and their
    # shuffles on the VM: written in 0.80-0.93 s instead of 0.96-1.37, read in 0.05 s instead of 0.14; 74 MB)
    return store_from_codes(path, record_names(len(targets), len(controls)), codes, offsets,
                            source=f"enrich:{targets.source}", checksum=targets.checksum,
                            block_size=block_size, halo=halo, compress=False)


def load_kernels() -> None:
    """Import numba and load the compiled kernels that reading the targets and making the controls need (the FASTA
    parser, the shuffle, ``control.fa``'s layout) from numba's cache, on tiny inputs of the real types.  ``motifgrid
    enrich`` runs this on a thread from its start, beside reading the motifs and targets: done first inside the
    shuffle it was most of that step (numba's import and its first cache load, ~1 s of the ~2 s "controls" of 10⁵
    peaks on a GPU host)."""
    from workers.enrich.fasta_numba import fasta_layout  # noqa: PLC0415
    from workers.enrich.shuffle import shuffle_dinucleotides  # noqa: PLC0415

    from pipeline.io.fasta import load_parser  # noqa: PLC0415
    from pipeline.io.genome import LETTERS  # noqa: PLC0415

    load_parser()                                      # the targets' FASTA first: it is read before the shuffle

    codes = np.array([0, 1, 2, 3, 0, 4], np.uint8)
    offsets = np.array([0, 6], np.int64)
    shuffle_dinucleotides(codes, offsets, 1, 0, np.zeros(1, np.int64))
    fasta_layout(np.frombuffer(b">a\n", np.uint8), np.array([0, 3], np.int64), LETTERS[codes], offsets, 60)  # as write_fasta
