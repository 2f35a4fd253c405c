"""Input and output under every capability: a FASTA read in one streaming pass (``fasta``), the genome store of
overlapping blocks and its reader (``genome``), BED regions of a store (``regions``), local paths or fsspec URLs
(``storage``), the Arrow schemas of every table written (``schema``), Arrow arrays from NumPy (``arrow``), sorting
beyond memory (``extsort``), region queries of a bgzipped VCF through its .tbi/.csi index (``tabix``)."""
from pipeline.io.fasta import FastaError, FastaReader, sniff_fasta
from pipeline.io.genome import GenomeError, GenomeStore, ingest
from pipeline.io.regions import RegionError, Regions, read_bed

__all__ = ["FastaError", "FastaReader", "GenomeError", "GenomeStore", "RegionError", "Regions", "ingest", "read_bed",
           "sniff_fasta"]
