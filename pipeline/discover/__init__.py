"""De novo motif discovery: the sequences and settings (``inputs``), PROJECTION trial and Gibbs chain batches and the
merge as tasks (``tasks``), the rounds of mask and repeat on Dask (``run``: ``discover``, ``run_discover``), the
motifs, sites and summaries written (``outputs``)."""
from pipeline.discover.inputs import DiscoverError, DiscoverSettings, read_sequences
from pipeline.discover.run import discover, run_discover

__all__ = ["DiscoverError", "DiscoverSettings", "discover", "read_sequences", "run_discover"]
