"""COMPARE (TFM-CUDA §4.5): the probability that a word scores above the thresholds of two matrices, over
every shift and both strands, and the Jaccard similarity of their occurrence sets (numba / CUDA)."""
from workers.compare.pairs import (CompareRows, PairResult, compare_pairs, joint_tp_cpu, prepare_rows, shifts,
                                   similarity)

__all__ = ["CompareRows", "PairResult", "compare_pairs", "joint_tp_cpu", "prepare_rows", "shifts", "similarity"]
