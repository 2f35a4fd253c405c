"""Enrichment controls computed on a worker: dinucleotide-preserving uniform shuffles of many records at once
(Altschul–Erickson with a random last-exit arborescence, per-record seeded streams; numba)."""
from workers.enrich.shuffle import doublet_counts, root_words, shuffle_dinucleotides

__all__ = ["doublet_counts", "root_words", "shuffle_dinucleotides"]
