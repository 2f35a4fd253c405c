"""Alleles as edits of the genome and the short contexts scored around them.

An ALT allele is trimmed of the bases it shares with REF, first at the start (VCF's anchor base of an indel), then at
the end: ``p`` (0-based) is where the edit starts, ``ref_core`` the genome bases it replaces and ``alt_core`` what it
puts there (either may be empty).  Each side's context is ``flank`` genome bases, the side's core, ``flank`` genome
bases (N past a record's end), its edit ``[flank, flank + len(core))``.  In a repeat the trimmed edit is the leftmost
placement VCF's left-aligned records give; a window covers it as ``workers.variants.score`` says."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: nucleotide codes of ASCII bytes (upper and lower case; anything else N)
CODE = np.full(256, 4, np.uint8)
for _i, _b in enumerate(b"ACGT"):
    CODE[_b] = _i
    CODE[ord(chr(_b).lower())] = _i


def trim(pos: int, ref: str, alt: str) -> tuple[int, str, str]:
    """``(p, ref_core, alt_core)`` of a VCF allele at 1-based ``pos``: shared leading then trailing bases dropped."""
    k = 0
    while k < len(ref) and k < len(alt) and ref[k] == alt[k]:
        k += 1
    ref, alt = ref[k:], alt[k:]
    j = 0
    while j < len(ref) and j < len(alt) and ref[-1 - j] == alt[-1 - j]:
        j += 1
    return pos - 1 + k, ref[:len(ref) - j], alt[:len(alt) - j]


@dataclass
class Contexts:
    """Every allele's two contexts end to end (``codes``), ref contexts first: context ``a`` of ``2 n`` is
    ``codes[starts[a]:starts[a + 1]]`` with its edit ``[e0[a], e1[a])``."""
    codes: np.ndarray
    starts: np.ndarray
    e0: np.ndarray
    e1: np.ndarray
    p: np.ndarray           # (n,) 0-based start of each edit on its record
    ref_len: np.ndarray     # (n,) its trimmed REF length


def contexts(segment: np.ndarray, seg_start: int, record_length: int, pos: list, ref: list, alt: list,
             flank: int) -> Contexts:
    """The contexts of alleles on one record, whose codes ``[seg_start, seg_start + len(segment))`` are given (wide
    enough for every edit and its flanks inside the record); the bases copied by ``workers.variants.contexts``."""
    from workers.variants.contexts import fill_contexts  # noqa: PLC0415  (numba: the workers', not the client's)

    n = len(pos)
    p = np.asarray(pos, np.int64) - 1
    ref_len = np.fromiter(map(len, ref), np.int64, n)
    alt_len = np.fromiter(map(len, alt), np.int64, n)
    core = list(alt)                                              # an SNV is its own trimmed edit
    for i in np.flatnonzero((ref_len != 1) | (alt_len != 1)).tolist():
        p[i], r, core[i] = trim(int(pos[i]), ref[i], alt[i])
        ref_len[i], alt_len[i] = len(r), len(core[i])
    sizes = np.concatenate([ref_len, alt_len]) + 2 * flank
    starts = np.zeros(2 * n + 1, np.int64)
    np.cumsum(sizes, out=starts[1:])
    padded = np.full(len(segment) + 2 * flank, 4, np.uint8)      # N beyond the record on both sides
    lo_ok, hi_ok = max(seg_start, 0), min(seg_start + len(segment), record_length)
    padded[flank + lo_ok - seg_start:flank + hi_ok - seg_start] = segment[lo_ok - seg_start:hi_ok - seg_start]
    cores = CODE[np.frombuffer("".join(core).encode(), np.uint8)]
    codes = fill_contexts(padded, cores, p - seg_start, ref_len, alt_len, starts, flank)
    e0 = np.full(2 * n, flank, np.int64)
    e1 = flank + np.concatenate([ref_len, alt_len])
    return Contexts(codes, starts, e0, e1, p, ref_len)


def genome_starts(ctx: Contexts, allele: np.ndarray, where: np.ndarray, flank: int, alt: bool) -> np.ndarray:
    """0-based genome coordinates of windows starting at ``where`` (context offsets, -1 for none; any shape whose
    first axis follows ``allele``) of the alleles' ref (``alt`` False) or alt contexts: a window starting in the left
    flank at its genome base; one starting inside an alt core at ``p`` plus its offset there, at most the REF core's
    length."""
    shape = (-1,) + (1,) * (where.ndim - 1)
    p = ctx.p[allele].reshape(shape)
    off = where - flank
    inside = np.minimum(np.maximum(off, 0), ctx.ref_len[allele].reshape(shape)) if alt else off
    out = p + np.where(off < 0, off, inside)
    return np.where(where < 0, -1, out)
