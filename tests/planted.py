"""Planted (l, d) motif instances (Pevzner & Sze's challenge problem; Buhler & Tompa's benchmark).

``t`` sequences of length ``n`` over a uniform iid background; a random consensus ``M`` of length ``l``;
each sequence (OOPS) or a chosen subset of them (ZOOPS) gets one occurrence of ``M`` with exactly ``d``
substitutions at distinct random positions, at a uniformly random start.  Everything is drawn from one
``numpy.random.Generator`` seeded with ``seed``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LETTERS = "ACGT"


@dataclass
class Planted:
    sequences: list          # str
    names: list
    motif: str               # the planted consensus M
    starts: list             # start of the occurrence per sequence, None where there is none (ZOOPS)
    occurrences: list        # the planted l-mer per sequence (or None)
    l: int
    d: int

    def fasta(self) -> str:
        return "".join(f">{n}\n{s}\n" for n, s in zip(self.names, self.sequences))

    def write(self, path) -> str:
        with open(path, "w") as f:
            f.write(self.fasta())
        return str(path)


def planted_instance(l: int, d: int, t: int = 20, n: int = 600, seed: int = 0,
                     sites: int | None = None) -> Planted:
    """One planted (l, d) instance.

    Parameters
    ----------
    l, d : int
        Motif length and exact number of substitutions per occurrence.
    t, n : int
        Number and length of the sequences.
    seed : int
    sites : int, optional
        ZOOPS: only this many sequences (chosen at random) hold an occurrence; default all ``t`` (OOPS).
    """
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 4, size=(t, n))
    motif = rng.integers(0, 4, size=l)
    with_site = np.ones(t, bool)
    if sites is not None:
        with_site[:] = False
        with_site[rng.choice(t, size=sites, replace=False)] = True
    starts, occs = [], []
    for i in range(t):
        if not with_site[i]:
            starts.append(None)
            occs.append(None)
            continue
        occ = motif.copy()
        pos = rng.choice(l, size=d, replace=False)
        occ[pos] = (occ[pos] + rng.integers(1, 4, size=d)) % 4        # a different letter, uniformly
        st = int(rng.integers(0, n - l + 1))
        codes[i, st:st + l] = occ
        starts.append(st)
        occs.append("".join(LETTERS[c] for c in occ))
    seqs = ["".join(LETTERS[c] for c in row) for row in codes]
    return Planted(sequences=seqs, names=[f"seq{i + 1}" for i in range(t)],
                   motif="".join(LETTERS[c] for c in motif), starts=starts, occurrences=occs, l=l, d=d)


def performance_coefficient(planted: Planted, found: dict) -> float:
    """Buhler & Tompa's nPC: |K ∩ P| / |K ∪ P| over residues, K the planted sites, P the found ones.

    ``found`` maps a sequence index to the start of the predicted site (forward coordinates, width l).
    """
    inter = union = 0
    for i in range(len(planted.sequences)):
        k = set() if planted.starts[i] is None else set(range(planted.starts[i], planted.starts[i] + planted.l))
        p = set() if found.get(i) is None else set(range(found[i], found[i] + planted.l))
        inter += len(k & p)
        union += len(k | p)
    return inter / union if union else 1.0
