"""Control sequences for motif enrichment: dinucleotide shuffles of the targets, or GC-matched genomic regions.

**Shuffled** (``--control shuffled``, the default): each target shuffled ``K`` times keeping its dinucleotide
counts exactly (:mod:`workers.enrich.shuffle`), records named ``<id>|shuf<k>`` (:func:`shuffled_controls`,
:func:`write_fasta`: ``DIR/control.fa``).

**Genomic** (``--control genomic``): HOMER's background idea (random genomic regions whose GC% distribution
matches the targets'), made per target: every target gets ``K`` regions of *its own length* whose GC fraction
falls in *its* GC bin (bins of ``bin_width`` = 0.02 by default), so the length and GC distributions of the
controls are those of the targets.  Regions hold no N (code 4) and overlap neither a target nor each other
(:func:`sample_genomic_controls`, :func:`write_bed`: ``DIR/control.bed``).

The sampler reads the genome through :class:`GenomeAccess`, three things only: record names, record
lengths and the codes of ``record[start:end)``.  :func:`genome_access` makes one from either genome store
format (one array per record, or the packed store's record table), :func:`in_memory` from sequences held
in memory (tests, FASTA genomes).  It reads the genome a *chunk* (1 Mi bases) at a time, chosen at random
in proportion to record length, and draws candidate starts uniformly inside it for a random pool of the
targets still short of controls.  A chunk gives at most ``spread`` (2) times its even share of the controls
(``slots × chunk / genome``), so they come from many chunks across the genome rather than the first few read;
the price is reading about half a genome's worth of chunks (~1,500 for human).  A target whose GC bin is too
rare to fill has its bin widened one step at a time (``Controls.widened`` counts the regions so placed); a
genome too small for the controls asked is an error, not a silent shortfall.
"""
from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np

from pipeline import MotifgridError
from pipeline.io import storage

DEFAULT_BIN_WIDTH = 0.02      # GC bins of 2 % (5 % bins leave a within-bin mismatch at 10^4 targets: benchmarks.md)
DEFAULT_CHUNK = 1 << 20       # bases read at a time (a block of a genome store)
_PACK = np.array([0, 1, 1, 0, 1 << 32], dtype=np.int64)   # per code: +1 G/C, +2^32 N
IDLE = 25                     # chunks in a row that place nothing before the GC bins are widened
DRAWS = 1 << 16               # candidate starts evaluated per chunk (shared by the targets drawing from it)


class ControlError(MotifgridError, ValueError):
    """Controls cannot be made as asked (one line)."""


@dataclass(frozen=True)
class GenomeAccess:
    """The three things the sampler reads: record ``names``, their ``lengths`` ((R,) int64) and
    ``fetch(record, start, end)``, the uint8 codes of ``[start, end)`` of record number ``record``."""
    names: list
    lengths: np.ndarray
    fetch: Callable[[int, int, int], np.ndarray]
    source: str = "genome"


def _fetch_named(store, names, record, start, end):
    return store.fetch(names[record], start, end)


def _fetch_memory(seqs, record, start, end):
    return seqs[record][start:end]


def genome_access(store) -> GenomeAccess:
    """A :class:`GenomeAccess` of a :class:`pipeline.io.genome.GenomeStore` of either format: the packed store
    (``store.records``: names, offsets, lengths) or one array per record (``store.contigs``)."""
    rec = getattr(store, "records", None)
    if rec is not None and hasattr(rec, "names"):
        names, lengths = list(rec.names), np.asarray(rec.lengths, dtype=np.int64)
    else:
        names = [c["name"] for c in store.contigs]
        lengths = np.array([c["length"] for c in store.contigs], dtype=np.int64)
    return GenomeAccess(names, lengths, functools.partial(_fetch_named, store, names), str(store.path))


def in_memory(names, seqs, source: str = "sequences") -> GenomeAccess:
    """A :class:`GenomeAccess` of records held in memory (``seqs``: uint8 code arrays)."""
    seqs = [np.asarray(s, dtype=np.uint8) for s in seqs]
    return GenomeAccess(list(names), np.array([s.size for s in seqs], dtype=np.int64),
                        functools.partial(_fetch_memory, seqs), source)


def read_regions(genome: GenomeAccess, record, start, end, span: int = DEFAULT_CHUNK):
    """Codes of regions, in the given order: ``(codes (V,) uint8, offsets (n + 1,) int64)``; neighbouring
    regions of a record are read together, ``span`` bases or fewer a read."""
    record, start, end = (np.asarray(v, dtype=np.int64) for v in (record, start, end))
    _check_regions(genome, record, start, end)
    offsets = np.zeros(record.size + 1, dtype=np.int64)
    np.cumsum(end - start, out=offsets[1:])
    out = np.empty(int(offsets[-1]), dtype=np.uint8)
    order = np.lexsort((start, record))
    i = 0
    while i < order.size:
        r, lo = record[order[i]], start[order[i]]
        j, hi = i, end[order[i]]
        while j + 1 < order.size and record[order[j + 1]] == r and max(hi, end[order[j + 1]]) - lo <= span:
            j += 1
            hi = max(hi, end[order[j]])
        codes = genome.fetch(int(r), int(lo), int(hi))
        for k in order[i:j + 1]:
            out[offsets[k]:offsets[k + 1]] = codes[start[k] - lo:end[k] - lo]
        i = j + 1
    return out, offsets


def _check_regions(genome: GenomeAccess, record, start, end) -> None:
    if record.size and ((record < 0).any() or (record >= len(genome.names)).any()):
        raise ControlError(f"{genome.source}: a region names record {int(record.max())}; "
                           f"the genome has {len(genome.names)}")
    bad = np.flatnonzero((start < 0) | (end <= start) | (end > genome.lengths[record]))
    if bad.size:
        k = int(bad[0])
        raise ControlError(f"{genome.source}: region {genome.names[record[k]]}:{start[k]}-{end[k]} is empty or "
                           f"outside its record (length {int(genome.lengths[record[k]])})")


def composition(codes: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record: GC fraction of its A/C/G/T letters ((n,) float64; 0 for a record without any) and its
    count of code 4 ((n,) int64)."""
    codes = np.asarray(codes)
    offsets = np.asarray(offsets, dtype=np.int64)
    gc = np.concatenate([[0], np.cumsum((codes == 1) | (codes == 2))])
    nn = np.concatenate([[0], np.cumsum(codes == 4)])
    g = gc[offsets[1:]] - gc[offsets[:-1]]
    n = nn[offsets[1:]] - nn[offsets[:-1]]
    acgt = np.diff(offsets) - n
    return np.where(acgt > 0, g / np.maximum(acgt, 1), 0.0), n


def gc_bins(gc, bin_width: float = DEFAULT_BIN_WIDTH) -> np.ndarray:
    """GC bin of each fraction: ``floor(gc / bin_width)``, the last bin closed at 1."""
    n = int(np.ceil(1.0 / bin_width - 1e-9))
    return np.minimum((np.asarray(gc, dtype=np.float64) / bin_width + 1e-9).astype(np.int64), n - 1)


@dataclass
class Controls:
    """Genomic control regions, grouped by target: ``target[i]``'s control in ``record[i]``,
    ``[start[i], end[i])``, GC fraction ``gc[i]``; ``widened`` regions came from a neighbouring GC bin."""
    record: np.ndarray
    start: np.ndarray
    end: np.ndarray
    target: np.ndarray
    gc: np.ndarray
    widened: int
    chunks: int


class _Occupied:
    """Per record, the sorted disjoint intervals no control may overlap (targets, controls placed)."""

    def __init__(self, n_records: int, record, start, end):
        empty = (np.zeros(0, np.int64), np.zeros(0, np.int64))
        self.iv = [empty] * n_records
        order = np.argsort(record, kind="stable")
        record, start, end = record[order], start[order], end[order]
        bounds = np.searchsorted(record, np.arange(n_records + 1))
        for r in np.flatnonzero(np.diff(bounds)):
            self.iv[r] = _merge(start[bounds[r]:bounds[r + 1]], end[bounds[r]:bounds[r + 1]])

    def free(self, r: int, s: np.ndarray, e: np.ndarray) -> np.ndarray:
        starts, ends = self.iv[r]
        if starts.size == 0:
            return np.ones(s.shape, dtype=bool)
        i = np.searchsorted(ends, s, side="right")          # first interval ending after s
        return (i >= starts.size) | (starts[np.minimum(i, starts.size - 1)] >= e)

    def add(self, r: int, s: np.ndarray, e: np.ndarray) -> None:
        starts, ends = self.iv[r]
        self.iv[r] = _merge(np.concatenate([starts, s]), np.concatenate([ends, e]))


def _merge(s, e):
    if not len(s):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    o = np.argsort(s, kind="stable")
    s, e = np.asarray(s, np.int64)[o], np.asarray(e, np.int64)[o]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, bool)
    new[1:] = s[1:] >= reach[:-1]
    first = np.flatnonzero(new)
    return s[first], reach[np.r_[first[1:], s.size] - 1]


def sample_genomic_controls(genome: GenomeAccess, lengths, gc, *, copies: int = 1, exclude=None, seed=0,
                            bin_width: float = DEFAULT_BIN_WIDTH, chunk: int = DEFAULT_CHUNK,
                            spread: float = 2.0) -> Controls:
    """``copies`` genomic regions per target, each of the target's length and GC bin, without N, overlapping
    neither ``exclude`` nor each other.

    Parameters
    ----------
    genome : GenomeAccess
    lengths : array-like of int, shape (T,)
        Target lengths.
    gc : array-like of float, shape (T,)
        Target GC fractions (:func:`composition`).
    copies : int
        Controls per target (K).
    exclude : tuple of three arrays (record, start, end), optional
        Regions no control may overlap: the targets, when they come from this genome.
    seed : int or numpy.random.SeedSequence
    bin_width, chunk, spread :
        GC bin width; bases read at a time; how many times its even share of the controls a chunk may give.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    tbin = gc_bins(gc, bin_width)
    T, copies = lengths.size, int(copies)
    if T == 0 or copies < 1:
        raise ControlError("genomic controls need at least one target and copies >= 1")
    G = int(genome.lengths.sum())
    if G == 0 or lengths.max() > genome.lengths.max():
        raise ControlError(f"{genome.source}: a target of {int(lengths.max())} bases is longer than every record")
    ex = exclude if exclude is not None else (np.zeros(0, np.int64),) * 3
    occ = _Occupied(len(genome.names), *(np.asarray(v, dtype=np.int64) for v in ex))
    rng = np.random.default_rng(seed)
    need = np.full(T, copies, dtype=np.int64)
    slots = T * copies
    cap = max(1, int(np.ceil(slots * min(chunk, G) / G * spread)))
    stage = max(100, 4 * int(np.ceil(slots / cap)))
    weights = genome.lengths / G
    got: list = []
    tol = widened = chunks = 0
    n_bins = int(gc_bins(1.0, bin_width)) + 1
    since = idle = 0
    while need.any():
        chunks += 1
        since += 1
        if since > stage or idle >= IDLE:      # the bins left are too rare here: widen them one step
            tol += 1
            since = idle = 0
            if tol >= n_bins:
                raise ControlError(f"{genome.source}: placed {slots - int(need.sum())} of {slots} genomic control "
                                   f"regions without N or overlaps; the genome is too small for {copies} per target")
        r = int(rng.choice(weights.size, p=weights))
        cs = int(rng.integers(0, max(int(genome.lengths[r]) - chunk, 0) + 1))
        codes = np.asarray(genome.fetch(r, cs, min(cs + chunk, int(genome.lengths[r]))))
        acc = _draw(rng, codes, cs, r, lengths, tbin, need, tol, occ, cap, bin_width)
        for t, s, g in acc:
            got.append((t, r, s, g, int(abs(gc_bins(g, bin_width) - tbin[t]) > 0)))
        idle = 0 if acc else idle + 1
    got.sort(key=lambda x: x[0])                 # stable: a target's controls in the order found
    a = np.array(got, dtype=np.float64).reshape(-1, 5)
    t, rec, st = a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), a[:, 2].astype(np.int64)
    widened = int(a[:, 4].sum())
    return Controls(rec, st, st + lengths[t], t, a[:, 3], widened, chunks)


def _draw(rng, codes, cs, r, lengths, tbin, need, tol, occ, cap, bin_width) -> list:
    """Controls placed from one chunk (record ``r``, bases ``codes`` from ``cs``): ``[(target, start, gc)]``;
    ``need`` and the occupied intervals are updated."""
    C = codes.size
    pool = np.flatnonzero((need > 0) & (lengths <= C))
    if pool.size == 0:
        return []
    pool = rng.permutation(pool)[:max(64, 8 * cap)]
    pre = np.zeros(C + 1, dtype=np.int64)
    np.cumsum(_PACK[codes], out=pre[1:])             # G+C count in the low 32 bits, N count above
    L = lengths[pool, None]
    tries = max(8, min(1024, DRAWS // pool.size))
    s = (rng.random((pool.size, tries)) * (C - L + 1)).astype(np.int64)
    d = pre[s + L] - pre[s]
    g = (d & 0xFFFFFFFF) / L
    ok = (d >> 32 == 0) & (np.abs(gc_bins(g, bin_width) - tbin[pool, None]) <= tol)
    ok &= occ.free(r, (cs + s).ravel(), (cs + s + L).ravel()).reshape(s.shape)
    row = np.flatnonzero(ok.any(axis=1))
    j = ok[row].argmax(axis=1)                       # the first acceptable draw: uniform among acceptable
    t, st, gg = pool[row], cs + s[row, j], g[row, j]
    out, s_acc, e_acc = [], [], []
    for i in range(t.size):                          # pool order is random: keep non-overlapping ones
        e = st[i] + lengths[t[i]]
        if any(st[i] < e2 and s2 < e for s2, e2 in zip(s_acc, e_acc)):
            continue
        out.append((int(t[i]), int(st[i]), float(gg[i])))
        s_acc.append(st[i])
        e_acc.append(e)
        need[t[i]] -= 1
        if len(out) >= cap:
            break
    if out:
        occ.add(r, np.array(s_acc, np.int64), np.array(e_acc, np.int64))
    return out


def shuffled_controls(names, codes: np.ndarray, offsets: np.ndarray, copies: int = 1, seed=0, index=None):
    """Dinucleotide shuffles of the targets: ``(names, codes, offsets)`` of the control records, named
    ``<id>|shuf<k>`` (k from 1), each target's copies together.  ``index``: the targets' numbers in the whole
    set when this is one batch of it (:func:`workers.enrich.shuffle.shuffle_dinucleotides`)."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from workers.enrich.shuffle import shuffle_dinucleotides  # noqa: PLC0415

    offsets = np.asarray(offsets, np.int64)
    n = offsets.size - 1
    index = np.arange(n, dtype=np.int64) if index is None else np.asarray(index, np.int64)
    # a record's shuffles depend on its number only, never on the batch: batches on threads (the kernel runs
    # without the GIL) give the same controls (10^5 peaks on a 16-core GPU machine: 2.6-3.0 s -> 2.1-2.5 s)
    cuts = np.unique(np.linspace(0, n, min(8, os.cpu_count() or 1, max(n // 1000, 1)) + 1).astype(np.int64))

    def batch(a: int, b: int):
        return shuffle_dinucleotides(codes[offsets[a]:offsets[b]], offsets[a:b + 1] - offsets[a], copies, seed,
                                     index[a:b])[0]

    with ThreadPoolExecutor(max(len(cuts) - 1, 1)) as pool:
        parts = list(pool.map(batch, cuts[:-1].tolist(), cuts[1:].tolist()))
    out = np.concatenate(parts) if parts else np.zeros(0, np.uint8)
    oo = np.zeros(n * copies + 1, np.int64)
    np.cumsum(np.repeat(np.diff(offsets), copies), out=oo[1:])
    return [f"{n}|shuf{k}" for n in names for k in range(1, copies + 1)], out, oo


def write_fasta(path, names, codes: np.ndarray, offsets: np.ndarray, width: int = 60) -> None:
    """Records as FASTA (upper case, N for code 4, ``width`` letters a line), written atomically; laid out in one
    compiled pass (:mod:`workers.enrich.fasta_numba`)."""
    from pipeline.io.genome import LETTERS  # noqa: PLC0415
    from workers.enrich.fasta_numba import fasta_layout  # noqa: PLC0415

    heads = [b">" + str(n).encode() + b"\n" for n in names]
    head_offsets = np.zeros(len(heads) + 1, np.int64)
    np.cumsum(np.fromiter(map(len, heads), np.int64, len(heads)), out=head_offsets[1:])
    text = fasta_layout(np.frombuffer(b"".join(heads), np.uint8), head_offsets,
                        LETTERS[np.minimum(np.asarray(codes), 4)], np.asarray(offsets, np.int64), int(width))
    storage.atomic_write_bytes(path, text.tobytes())


def write_bed(path, genome: GenomeAccess, controls: Controls, target_names) -> None:
    """Controls as BED4 (``chrom start end <target>|ctl<k>``, 0-based half-open), grouped by target."""
    t = controls.target                      # grouped by target, ascending
    k = np.arange(t.size) - np.searchsorted(t, t, side="left") + 1
    lines = [f"{genome.names[r]}\t{s}\t{e}\t{target_names[t]}|ctl{j}\n"
             for r, s, e, t, j in zip(controls.record.tolist(), controls.start.tolist(), controls.end.tolist(),
                                      controls.target.tolist(), k.tolist())]
    storage.atomic_write_bytes(path, "".join(lines).encode())
