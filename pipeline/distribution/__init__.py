"""Score distributions on Dask: thresholds of many matrices at several p-values, fanned out in batches of
matrices with a disk cache (``thresholds``: exact, bucket or auto), and FIMO's integer-scaled matrices for
``--like fimo`` (``fimo``).  The kernels are ``workers.distribution``'s."""
from pipeline.distribution.fimo import fimo_background, fimo_matrix
from pipeline.distribution.thresholds import compute_thresholds, compute_thresholds_many, thresholds_table

__all__ = ["compute_thresholds", "compute_thresholds_many", "fimo_background", "fimo_matrix", "thresholds_table"]
