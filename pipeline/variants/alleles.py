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
    enough for every edit and its flanks inside the record).  Built by one gather: each output base's source is
    the record (N-padded beyond its ends) or the ALT cores laid end to end."""
    n = len(pos)
    trimmed = [(int(q) - 1, r, a) if len(r) == 1 == len(a) else trim(int(q), r, a) for q, r, a in zip(pos, ref, alt)]
    p = np.fromiter((t[0] for t in trimmed), np.int64, n)
    ref_len = np.fromiter((len(t[1]) for t in trimmed), np.int64, n)
    alt_len = np.fromiter((len(t[2]) for t in trimmed), np.int64, n)
    sizes = np.concatenate([ref_len, alt_len]) + 2 * flank
    starts = np.zeros(2 * n + 1, np.int64)
    np.cumsum(sizes, out=starts[1:])
    padded = np.full(len(segment) + 2 * flank, 4, np.uint8)      # N beyond the record on both sides
    lo_ok, hi_ok = max(seg_start, 0), min(seg_start + len(segment), record_length)
    padded[flank + lo_ok - seg_start:flank + hi_ok - seg_start] = segment[lo_ok - seg_start:hi_ok - seg_start]
    cores = CODE[np.frombuffer("".join(t[2] for t in trimmed).encode(), np.uint8)]
    core_at = np.zeros(n, np.int64)
    np.cumsum(alt_len[:-1], out=core_at[1:])
    left = p - seg_start                                          # each allele's left flank in ``padded``
    right = left + flank + ref_len                                # its right flank
    t = np.arange(int(starts[-1])) - np.repeat(starts[:-1], sizes)           # offset in its context
    ctx = np.repeat(np.arange(2 * n), sizes)
    a = ctx % n if n else ctx
    src = left[a] + t                                             # ref contexts, and alt flanks on the left
    is_alt = ctx >= n
    in_core = is_alt & (t >= flank) & (t < flank + alt_len[a])
    after = is_alt & (t >= flank + alt_len[a])
    src = np.where(in_core, padded.size + core_at[a] + t - flank, src)
    src = np.where(after, right[a] + t - flank - alt_len[a], src)
    codes = np.concatenate([padded, cores])[src] if src.size else np.zeros(0, np.uint8)
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
