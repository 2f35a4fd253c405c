"""The scan: a genome store, a FASTA or BED regions of a store × a motif set → Parquet hits, a file per block.

``plan_scan`` reads and checks every input and claims the output (``plan``, ``source``, ``motif_set``);
``execute_scan`` runs it on a Dask client (``graph``; each block task in ``task``), then the q-values (``qvalues``)
and the per-record counts (``region_counts``); ``read_hits`` reads the hits back (``read``) and ``export.export`` writes
BED, FIMO TSV, GFF3 or a peaks × motifs matrix (``export_matrix``; ``genomic_coords`` for FIMO's chrom:start-end names)."""
from pipeline.scan.export import ExportError, export_matrix
from pipeline.scan.graph import ScanResult, execute_scan, run_scan
from pipeline.scan.motif_set import MotifSet, ScanError
from pipeline.scan.plan import ScanJob, plan_scan
from pipeline.scan.read import read_hits

__all__ = ["ExportError", "MotifSet", "ScanError", "ScanJob", "ScanResult", "execute_scan",
           "export_matrix", "plan_scan", "read_hits", "run_scan"]
