"""Comparing motifs with motifs.  COMPARE (TFM-CUDA §4.5): the probability that a word scores above the
thresholds of two matrices, over every shift and both strands, and the Jaccard similarity of their occurrence
sets (numba / CUDA).  Tomtom (``tomtom``): MEME's complete-score statistic of query columns against target
columns, for identification (``pipeline.compare.identify``)."""
from workers.compare.cpu import joint_tp_cpu
from workers.compare.pairs import PairResult, compare_pairs, shifts, similarity
from workers.compare.rows import CompareRows, prepare_rows

__all__ = ["CompareRows", "PairResult", "compare_pairs", "joint_tp_cpu", "prepare_rows", "shifts", "similarity"]
