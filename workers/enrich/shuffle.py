"""Dinucleotide-preserving shuffles: the control sequences of motif enrichment.

Question: what would these sequences look like with their letters and neighbouring-letter pairs kept but
any motif destroyed?  Each record is shuffled so that its dinucleotide (doublet) counts are exactly those of
the original, its first and last letters stay in place, and every sequence with these properties is equally
likely (Altschul & Erickson 1985; the uniform version of Kandel et al. 1996, which MEME's
``fasta-shuffle-letters -kmer 2`` reaches through uShuffle, Jiang et al. 2008).

The algorithm.  A record of length L is a walk through the doublet multigraph: one vertex per letter, one
edge ``x → y`` per adjacent pair.  Sequences with the same doublet counts, first and last letters are the
Eulerian trails of that graph from the first letter ``s`` to the last ``e``.  A uniform trail is drawn as

1. a random *last-exit arborescence*: for every letter ``v ≠ e`` that has out-edges, the edge by which the
   trail leaves ``v`` for the last time; these edges form a tree directed towards ``e``.  It is drawn by
   Wilson's loop-erased random walks, each step taking one of the vertex's out-edges uniformly, which
   gives every labelled arborescence the same probability;
2. a uniform order of every vertex's other out-edges, with the last exit put last (for ``e``: a uniform
   order of all its out-edges);
3. the walk from ``s`` that takes each vertex's out-edges in that order.

By the BEST theorem every labelled arborescence is completed by the same number of edge orders, each
giving one trail, so trails are uniform; equal letters are interchangeable, so distinct sequences are
uniform too (tested by enumerating every trail of small records).

Letters other than A, C, G, T.  MEME's ``fasta-shuffle-letters`` shuffles the letters it is given:
without an alphabet every character is its own letter; with ``-dna`` aliases (lower case, U) become core
letters first and ambiguous letters (N, IUPAC codes) stay distinct letters.  The sequence codes here
already hold one code (4) for every non-ACGT letter and fold case, so code 4 is a fifth letter of the
graph: every doublet is kept, those touching N included (N·N, A·N, N·C, ...), so a record keeps its number
of N runs and its N count, but the runs may break up and move (a 20-N run can come back as several runs).
The scanner reports no window that holds code 4, so an N inside a control blocks sites there just as in
the target.  Distinct IUPAC letters (R, Y, ...) are not told apart (they are all code 4).

Random streams.  ``seed`` goes through :class:`numpy.random.SeedSequence` to four root words; record
number ``index[i]`` gets its own xoshiro256** stream seeded by splitmix64 from the root words and its
number (the same idea as ``SeedSequence.spawn``, computed in the kernel: 24 µs per spawned SeedSequence
would cost seconds at 10⁵ records).  A record's shuffles therefore depend on (seed, its number, its
letters) only, never on how records are batched; copy k of K is the same for every K ≥ k + 1.
"""
from __future__ import annotations

import numpy as np


def root_words(seed) -> np.ndarray:
    """Four uint64 root words of a run's streams from ``seed`` (int, sequence of ints, or SeedSequence).

    Returns
    -------
    numpy.ndarray, shape (4,), uint64
    """
    ss = seed if isinstance(seed, np.random.SeedSequence) else np.random.SeedSequence(seed)
    return ss.generate_state(4, np.uint64)


def shuffle_dinucleotides(codes: np.ndarray, offsets: np.ndarray, copies: int = 1, seed=0,
                          index: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Dinucleotide-preserving uniform shuffles of many records at once.

    Parameters
    ----------
    codes : numpy.ndarray, shape (V,), uint8
        The records' codes back to back (A=0 C=1 G=2 T=3, 4 = N or any other letter).
    offsets : numpy.ndarray, shape (n + 1,), int64
        Record i is ``codes[offsets[i]:offsets[i + 1]]`` (offsets ascending from 0 to V).
    copies : int
        Shuffled copies per record (K ≥ 1).
    seed : int, sequence of int or numpy.random.SeedSequence
        Root of the random streams.
    index : numpy.ndarray, shape (n,), int64, optional
        The records' numbers in the whole set (their streams); ``arange(n)`` by default.  A caller that
        splits one set into batches passes each batch's global numbers, so results do not depend on the
        split.

    Returns
    -------
    shuffled : numpy.ndarray, shape (K · V,), uint8
        Record i's copy k at ``shuffled[out_offsets[i · K + k]:out_offsets[i · K + k + 1]]``.
    out_offsets : numpy.ndarray, shape (n · K + 1,), int64
    """
    from workers.enrich.shuffle_numba import shuffle_records  # noqa: PLC0415

    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    offsets = np.ascontiguousarray(offsets, dtype=np.int64)
    n = offsets.size - 1
    if n < 0 or offsets[0] != 0 or offsets[-1] != codes.size or (np.diff(offsets) < 0).any():
        raise ValueError("offsets must ascend from 0 to len(codes)")
    if codes.size and int(codes.max()) > 4:
        raise ValueError(f"codes must be 0-4 (A C G T N), found {int(codes.max())}")
    copies = int(copies)
    if copies < 1:
        raise ValueError(f"copies must be >= 1, got {copies}")
    index = np.arange(n, dtype=np.int64) if index is None else np.ascontiguousarray(index, dtype=np.int64)
    if index.shape != (n,):
        raise ValueError(f"index must have one number per record ({n}), got shape {index.shape}")
    out = shuffle_records(codes, offsets, index, copies, root_words(seed))
    lengths = np.repeat(np.diff(offsets), copies)
    out_offsets = np.zeros(n * copies + 1, dtype=np.int64)
    np.cumsum(lengths, out=out_offsets[1:])
    return out, out_offsets


def doublet_counts(codes: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Doublet counts of every record (a check of shuffles; letters 0-4).

    Parameters
    ----------
    codes : numpy.ndarray, shape (V,), uint8
    offsets : numpy.ndarray, shape (n + 1,), int64

    Returns
    -------
    numpy.ndarray, shape (n, 5, 5), int64
        ``[i, x, y]``: adjacent pairs ``x y`` inside record i.
    """
    codes = np.asarray(codes, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    n = offsets.size - 1
    pos = np.arange(max(codes.size - 1, 0))
    rec = np.searchsorted(offsets, pos, side="right") - 1
    inside = pos + 1 < offsets[rec + 1]           # the pair does not straddle two records
    key = (rec[inside] * 5 + codes[pos[inside]]) * 5 + codes[pos[inside] + 1]
    return np.bincount(key, minlength=n * 25).reshape(n, 5, 5)
