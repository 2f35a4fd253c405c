"""Nucleotide-histogram comparison of short tests with reference windows (Breland et al.): the tests as
lattice points, L1 balls read row by row (numba / CUDA)."""
from workers.composition.block import compare_block
from workers.composition.plan import (CompositionHits, CompositionPlan, Segments, histograms, make_plan,
                                      max_distance, similarity)

__all__ = ["CompositionHits", "CompositionPlan", "Segments", "compare_block", "histograms", "make_plan",
           "max_distance", "similarity"]
