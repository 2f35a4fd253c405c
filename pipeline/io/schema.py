"""The one place that declares every table written and the store attributes.

Every reader and writer imports from here, so a column is named and typed once.
"""
from __future__ import annotations

import pyarrow as pa

STORE_FORMAT_VERSION = 2          # 2: all records packed into one array of blocks + a record table
HITS_FORMAT_VERSION = 4          # 3: manifest entries count the windows tested (q-values); 4: chrom a column

#: strings repeated on every row are dictionary-encoded (pandas reads them as categoricals)
_CAT = pa.dictionary(pa.int32(), pa.string())

#: Hits: 0-based half-open coordinates on the forward strand of their record (``chrom``) for both strands.
HITS_SCHEMA = pa.schema([
    pa.field("chrom", _CAT, nullable=False),                  # the FASTA record (chromosome, peak, promoter)
    pa.field("start", pa.int64(), nullable=False),
    pa.field("end", pa.int64(), nullable=False),
    pa.field("strand", _CAT, nullable=False),                 # "+" or "-"
    pa.field("motif_id", _CAT, nullable=False),
    pa.field("motif_name", _CAT, nullable=False),
    pa.field("score", pa.float64(), nullable=False),          # log2-odds bits, float64 exact
    pa.field("pvalue", pa.float64(), nullable=False),         # exact to 0.1 % relative
])

#: Hits of a scan of BED regions (``--regions``): also the name of a region holding the hit.
REGION_HITS_SCHEMA = pa.schema(list(HITS_SCHEMA) + [pa.field("region", _CAT, nullable=False)])

#: Hits per (record or region, motif) with at least one hit: the peaks × motifs table (``_region_counts.parquet``).
REGION_COUNTS_SCHEMA = pa.schema([
    pa.field("region", _CAT, nullable=False),                 # the record name, or the BED region's name
    pa.field("chrom", _CAT, nullable=False),                  # where it is: record, start, end (0-based, half-open)
    pa.field("start", pa.int64(), nullable=False),
    pa.field("end", pa.int64(), nullable=False),
    pa.field("motif_id", _CAT, nullable=False),
    pa.field("motif_name", _CAT, nullable=False),
    pa.field("hits", pa.int64(), nullable=False),
    pa.field("best_score", pa.float64(), nullable=False),
    pa.field("best_pvalue", pa.float64(), nullable=False),
])

#: ``read_hits``: the files' columns and the q-value joined from ``_qvalues.parquet`` (null without one).
HITS_READ_SCHEMA = HITS_SCHEMA.append(pa.field("qvalue", pa.float64()))

#: ``HITS/_qvalues.parquet``: each motif's q-value as a step function of the p-value (Benjamini-Hochberg over
#: every window tested).  A hit of ``motif_id`` with p-value p has the ``qvalue`` of the row with the smallest
#: ``pvalue >= p``; rows ascend in p-value (and q-value) within a motif, motifs in the motif file's order.
QVALUES_SCHEMA = pa.schema([
    pa.field("motif_id", pa.string(), nullable=False),
    pa.field("pvalue", pa.float64(), nullable=False),      # the largest hit p-value of this q-value's step
    pa.field("qvalue", pa.float64(), nullable=False),
    pa.field("hits", pa.int64(), nullable=False),          # hits of the motif with p-value <= pvalue
])

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
    pa.field("requested_pvalue", pa.float64()),
    pa.field("method", pa.string()),
    pa.field("score_error", pa.float64()),
    pa.field("n_slices", pa.int32()),
    pa.field("n_buckets", pa.int32()),
    pa.field("seed_bound", pa.float64()),
])

#: Hits per motif, written beside the data at the end of a scan.
MOTIF_SUMMARY_SCHEMA = pa.schema([
    pa.field("motif_id", pa.string()),
    pa.field("motif_name", pa.string()),
    pa.field("hits_plus", pa.int64()),
    pa.field("hits_minus", pa.int64()),
    pa.field("hits", pa.int64()),
    pa.field("reachable", pa.bool_()),
    pa.field("windows", pa.int64()),       # window starts without N for the motif's length (one strand)
    pa.field("tests", pa.int64()),         # windows x 2 strands: the q-values' number of tests
])

#: Key-value metadata keys carried by every hits file (values are strings; JSON where structured).
PROVENANCE_KEYS = (
    "motifgrid.version", "motifgrid.hits_format", "motifgrid.command",
    "genome.path", "genome.checksum", "genome.block_size", "genome.halo",
    "motifs.source", "motifs.checksum", "motifs.select", "motifs.count",
    "background", "pseudocount", "pvalue", "strands", "like", "block", "device",
)

#: ``motifgrid compare``: one row per pair of motifs, at its best shift and strand.
PAIRS_SCHEMA = pa.schema([
    pa.field("motif_a", pa.string()),
    pa.field("name_a", pa.string()),
    pa.field("motif_b", pa.string()),
    pa.field("name_b", pa.string()),
    pa.field("similarity", pa.float64()),        # Jaccard of the occurrence sets (estimate)
    pa.field("similarity_low", pa.float64()),    # certified bracket
    pa.field("similarity_high", pa.float64()),
    pa.field("shift", pa.int32()),               # column of A under column 0 of B
    pa.field("strand", pa.string()),             # "+": B as given, "-": B reverse-complemented
    pa.field("overlap", pa.int32()),
    pa.field("tp", pa.float64()),                # P(both above their thresholds), estimate
    pa.field("tp_low", pa.float64()),
    pa.field("tp_high", pa.float64()),
    pa.field("only_a", pa.float64()),
    pa.field("only_b", pa.float64()),
    pa.field("p_a", pa.float64()),
    pa.field("p_b", pa.float64()),
])

#: ``motifgrid compare`` (``--method tomtom``, the default) and ``pipeline.compare.identify``: one row per (query, rank).
#: ``offset``: query column i faces target column i + offset of the target as matched (its reverse complement on
#: strand "-"); ``similarity``: mean column similarity over the overlap (ed: 1 - Euclidean distance / √2, in
#: [0, 1]; pearson: Pearson's r, in [-1, 1]); ``evalue`` = pvalue × targets; ``qvalue``: Benjamini-Hochberg over
#: the query's targets.
BEST_MATCHES_SCHEMA = pa.schema([
    pa.field("query", pa.string(), nullable=False),
    pa.field("query_name", pa.string(), nullable=False),
    pa.field("rank", pa.int32(), nullable=False),
    pa.field("target", pa.string(), nullable=False),
    pa.field("target_name", pa.string(), nullable=False),
    pa.field("pvalue", pa.float64(), nullable=False),
    pa.field("evalue", pa.float64(), nullable=False),
    pa.field("qvalue", pa.float64(), nullable=False),
    pa.field("similarity", pa.float64(), nullable=False),
    pa.field("offset", pa.int32(), nullable=False),
    pa.field("strand", pa.string(), nullable=False),
    pa.field("overlap", pa.int32(), nullable=False),
])

_CLUSTER_FIELDS = [
    pa.field("motif_id", pa.string(), nullable=False),
    pa.field("motif_name", pa.string(), nullable=False),
    pa.field("cluster", pa.int32(), nullable=False),           # 0 = the largest cluster
    pa.field("cluster_size", pa.int32(), nullable=False),
    pa.field("representative", pa.string(), nullable=False),   # motif id of the cluster's representative
    pa.field("representative_name", pa.string(), nullable=False),
]

#: ``motifgrid compare A --cluster E`` (tomtom): average linkage on the symmetric E-value (``pipeline.compare.motif_clusters``).
CLUSTERS_TOMTOM_SCHEMA = pa.schema(_CLUSTER_FIELDS + [
    pa.field("evalue_to_representative", pa.float64(), nullable=False),   # 0 for the representative itself
])

#: ``motifgrid compare A --method occurrence --cluster S``: leader clustering on COMPARE's similarity.
CLUSTERS_OCCURRENCE_SCHEMA = pa.schema(_CLUSTER_FIELDS + [
    pa.field("similarity_to_representative", pa.float64(), nullable=False),  # 1 for the representative itself
])

SITES_FORMAT_VERSION = 1

#: Sites of discovered motifs (``motifgrid discover``): 0-based half-open forward-strand coordinates
#: within the input sequence, as in the hits dataset.
SITES_SCHEMA = pa.schema([
    pa.field("motif_id", _CAT, nullable=False),
    pa.field("sequence", _CAT, nullable=False),                # FASTA record name (first word)
    pa.field("sequence_index", pa.int32(), nullable=False),    # 0-based record number
    pa.field("start", pa.int64(), nullable=False),
    pa.field("end", pa.int64(), nullable=False),
    pa.field("strand", _CAT, nullable=False),                  # "+" or "-"
    pa.field("score", pa.float64(), nullable=False),           # log2-odds bits under the motif's PWM
    pa.field("mismatches", pa.int32(), nullable=False),        # to the motif's consensus
    pa.field("site", pa.string(), nullable=False),             # the site as read on its strand
])

#: Sites of the top enriched motifs in the targets (``motifgrid enrich``, ``sites.parquet``): 0-based half-open
#: forward-strand coordinates within the target sequence; for targets given as BED regions also on the genome.
ENRICH_SITES_SCHEMA = pa.schema([
    pa.field("rank", pa.int32(), nullable=False),              # the motif's rank in enrichment.tsv
    pa.field("motif_id", _CAT, nullable=False),
    pa.field("motif_name", _CAT, nullable=False),
    pa.field("sequence", _CAT, nullable=False),                # FASTA record name, or the BED region's name
    pa.field("sequence_index", pa.int32(), nullable=False),    # 0-based target number (FASTA order, BED genome order)
    pa.field("start", pa.int64(), nullable=False),
    pa.field("end", pa.int64(), nullable=False),
    pa.field("strand", _CAT, nullable=False),                  # "+" or "-"
    pa.field("score", pa.float64(), nullable=False),           # log2-odds bits
    pa.field("pvalue", pa.float64(), nullable=False),
    pa.field("chrom", _CAT),                                   # BED targets: the site on the genome store;
    pa.field("chrom_start", pa.int64()),                       # null for FASTA targets
    pa.field("chrom_end", pa.int64()),
])

COMPOSITION_FORMAT_VERSION = 2          # 2: genome store format 2, chrom a column

#: Composition matches (``motifgrid composition``): windows whose A/C/G/T histogram is similar to a test's.
#: 0-based half-open coordinates on the forward strand of the record (``chrom``); strand "-" = matched the test's
#: reverse complement.
COMPOSITION_SCHEMA = pa.schema([
    pa.field("test_id", _CAT, nullable=False),
    pa.field("chrom", _CAT, nullable=False),
    pa.field("start", pa.int64(), nullable=False),
    pa.field("end", pa.int64(), nullable=False),
    pa.field("strand", _CAT, nullable=False),
    pa.field("similarity", pa.float64(), nullable=False),    # 1 - D/|T|, D the L1 distance of the counts
])

#: Matches per test, written beside the data (and alone with ``--counts-only``).
TEST_SUMMARY_SCHEMA = pa.schema([
    pa.field("test_id", pa.string()),
    pa.field("length", pa.int32()),
    pa.field("matches_plus", pa.int64()),
    pa.field("matches_minus", pa.int64()),     # 0 unless the reverse complement was compared
    pa.field("matches", pa.int64()),
])


#: motifgrid variants: the VCF's alleles as staged (``DIR/_alleles/part-<chunk>.parquet``), one per (record, ALT)
ALLELES_SCHEMA = pa.schema([("line", pa.int64()), ("chrom", pa.string()), ("pos", pa.int64()), ("id", pa.string()),
                            ("ref", pa.string()), ("alt", pa.string()), ("haplotype", pa.string())])

#: motifgrid variants: its rows (``DIR/chrom/<record>/part-<chunk>.parquet``; ``variants.tsv``: these but ``vcf_line``,
#: then ``qvalue``); docs/formats.md, "Variants folder"
VARIANTS_SCHEMA = pa.schema([("chrom", pa.string()), ("pos", pa.int64()), ("id", pa.string()), ("ref", pa.string()),
                             ("alt", pa.string()), ("motif_id", pa.string()), ("motif_name", pa.string()),
                             ("ref_score", pa.float64()), ("alt_score", pa.float64()), ("score_diff", pa.float64()),
                             ("ref_pvalue", pa.float64()), ("alt_pvalue", pa.float64()),
                             ("log10_ratio", pa.float64()), ("call", pa.string()), ("ref_start", pa.int64()),
                             ("ref_strand", pa.string()), ("alt_start", pa.int64()), ("alt_strand", pa.string()),
                             ("vcf_line", pa.int64()), ("haplotype", pa.string()),
                             ("atsnp_ref_pvalue", pa.float64()), ("atsnp_alt_pvalue", pa.float64()),
                             ("atsnp_change_pvalue", pa.float64()), ("atsnp_ref_rse", pa.float64()),
                             ("atsnp_alt_rse", pa.float64()), ("atsnp_change_rse", pa.float64())])
