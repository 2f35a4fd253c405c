"""Variant effects on one device: which motif rows may reach their threshold on which allele contexts (a filter with
lookahead), then the best covering window of those rows on both alleles, scored in float64 in column order as the
scan rescores its hits."""
from workers.variants.score import Rows, best_of, reaching

__all__ = ["Rows", "best_of", "reaching"]
