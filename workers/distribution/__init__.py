"""Score distributions of PWMs under an order-0 background: exact thresholds and p-values (integer lattice
DP with certified brackets + exact tie classes), BUCKETSCOREDISTRIBUTION for long matrices (numba / CUDA),
the flat tail tables a scan looks its hits' p-values up in, and FIMO 5.4.1's integer lattice and p-value table
(``fimo_lattice``, for ``--like fimo``)."""
from workers.distribution.bucket import (BucketDistribution, bucket_distribution, choose_slices,
                                         pvalues_to_scores_bucket, split_slices)
from workers.distribution.exact import (pvalue_of_score, pvalue_to_score, pvalues_to_scores, score_classes,
                                        score_distribution, score_to_pvalue)
from workers.distribution.pvalue_table import PvalueTable
from workers.distribution.threshold import ScoreThreshold

__all__ = ["BucketDistribution", "PvalueTable", "ScoreThreshold", "bucket_distribution", "choose_slices",
           "pvalue_of_score", "pvalue_to_score", "pvalues_to_scores", "pvalues_to_scores_bucket", "score_classes",
           "score_distribution", "score_to_pvalue", "split_slices"]
