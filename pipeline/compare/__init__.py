"""Motif against motif: Tomtom identification of query motifs in a database (``identify``: E- and q-values, best
matches), the all-pairs COMPARE of occurrence (``run``: ``run_compare`` and its settings, either method), clusters of
redundant motifs (``motif_clusters``)."""
from pipeline.compare.identify import IdentifyError, match_all, run_identify
from pipeline.compare.motif_clusters import cluster_motifs
from pipeline.compare.run import CompareError, CompareSettings, read_pairs, run_compare, settings_for

__all__ = ["CompareError", "CompareSettings", "IdentifyError", "cluster_motifs", "match_all",
           "read_pairs", "run_compare", "run_identify", "settings_for"]
