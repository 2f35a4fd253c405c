"""The one place that declares every table written and the store attributes.

Every reader and writer imports from here, so a column is named and typed once.
"""
from __future__ import annotations

import pyarrow as pa

STORE_FORMAT_VERSION = 1
HITS_FORMAT_VERSION = 1

#: strings repeated on every row are dictionary-encoded (pandas reads them as categoricals)
_CAT = pa.dictionary(pa.int32(), pa.string())

#: Hits: 0-based half-open coordinates on the forward strand for both strands.
HITS_SCHEMA = pa.schema([
    pa.field("chrom", pa.string(), nullable=False),
    pa.field("start", pa.int64(), nullable=False),
    pa.field("end", pa.int64(), nullable=False),
    pa.field("strand", _CAT, nullable=False),                 # "+" or "-"
    pa.field("motif_id", _CAT, nullable=False),
    pa.field("motif_name", _CAT, nullable=False),
    pa.field("score", pa.float64(), nullable=False),          # log2-odds bits, float64 exact
    pa.field("pvalue", pa.float64(), nullable=False),         # exact to 0.1 % relative
])

#: Columns written inside each Parquet file (``chrom`` lives in the hive partition path).
HITS_FILE_SCHEMA = pa.schema([f for f in HITS_SCHEMA if f.name != "chrom"])

#: Per-motif thresholds, written beside the hits and by ``motifgrid thresholds``.
THRESHOLDS_SCHEMA = pa.schema([
    pa.field("motif_id", pa.string()),
    pa.field("motif_name", pa.string()),
    pa.field("strand", pa.string()),
    pa.field("length", pa.int32()),
    pa.field("threshold", pa.float64()),
    pa.field("pvalue", pa.float64()),
    pa.field("pvalue_low", pa.float64()),
    pa.field("pvalue_high", pa.float64()),
    pa.field("reachable", pa.bool_()),
])

#: Hits per motif, written beside the data at the end of a scan.
MOTIF_SUMMARY_SCHEMA = pa.schema([
    pa.field("motif_id", pa.string()),
    pa.field("motif_name", pa.string()),
    pa.field("hits_plus", pa.int64()),
    pa.field("hits_minus", pa.int64()),
    pa.field("hits", pa.int64()),
    pa.field("reachable", pa.bool_()),
])

#: Key-value metadata keys carried by every hits file (values are strings; JSON where structured).
PROVENANCE_KEYS = (
    "motifgrid.version", "motifgrid.hits_format", "motifgrid.command",
    "genome.path", "genome.checksum", "genome.block_size", "genome.halo",
    "motifs.source", "motifs.checksum", "motifs.count",
    "background", "pseudocount", "pvalue", "block", "device",
)

COMPOSITION_FORMAT_VERSION = 1

#: Composition matches (``motifgrid composition``): windows whose A/C/G/T histogram is similar to a test's.
#: 0-based half-open coordinates on the forward strand; strand "-" = matched the test's reverse complement.
COMPOSITION_SCHEMA = pa.schema([
    pa.field("test_id", _CAT, nullable=False),
    pa.field("chrom", pa.string(), nullable=False),
    pa.field("start", pa.int64(), nullable=False),
    pa.field("end", pa.int64(), nullable=False),
    pa.field("strand", _CAT, nullable=False),
    pa.field("similarity", pa.float64(), nullable=False),    # 1 - D/|T|, D the L1 distance of the counts
])

#: Columns written inside each composition Parquet file (``chrom`` is the hive partition).
COMPOSITION_FILE_SCHEMA = pa.schema([f for f in COMPOSITION_SCHEMA if f.name != "chrom"])

#: Matches per test, written beside the data (and alone with ``--counts-only``).
TEST_SUMMARY_SCHEMA = pa.schema([
    pa.field("test_id", pa.string()),
    pa.field("length", pa.int32()),
    pa.field("matches_plus", pa.int64()),
    pa.field("matches_minus", pa.int64()),     # 0 unless the reverse complement was compared
    pa.field("matches", pa.int64()),
])
