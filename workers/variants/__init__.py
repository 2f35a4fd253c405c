"""Variant effects on one device: each motif row's best window on each allele of a variant — the windows of a short
context that overlap the allele's edit — scored in float64 in column order, as the scan rescores its hits."""
from workers.variants.score import best_windows

__all__ = ["best_windows"]
