"""The ``motifgrid`` command's arguments: every subcommand's options (``SUBCOMMANDS``, in ``motifgrid -h`` order), the
shared groups (cluster, motifs, dataset, ``--like``), number checks, ``UserError`` and the usage exit status."""
from __future__ import annotations

import argparse

import dask.config

from pipeline import __version__


EXIT_USAGE = 2


class UserError(Exception):
    pass


def _number(kind, ok, what: str):
    """An argparse type: parse with ``kind`` (float or int), then require ``ok(value)``."""
    def parse(s: str):
        try:
            v = kind(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not {'an integer' if kind is int else 'a number'}: {s!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"{what}, got {s}")
        return v
    return parse


_pvalue = _number(float, lambda v: 0.0 < v < 1.0, "a p-value must be in (0, 1)")


_nonneg = _number(float, lambda v: 0.0 <= v < float("inf"), "must be a finite number >= 0")


_positive = _number(float, lambda v: 0.0 < v < float("inf"), "must be a finite number > 0")


_posint = _number(int, lambda v: v >= 1, "must be >= 1")


_nonnegint = _number(int, lambda v: v >= 0, "must be >= 0")


_similarity = _number(float, lambda v: 0.0 < v <= 1.0, "a similarity must be in (0, 1]")


_qvalue = _number(float, lambda v: 0.0 < v <= 1.0, "a q-value must be in (0, 1]")


def _calls(s: str) -> list:
    """``--calls gain,loss``: a variants run's calls (pipeline.variants.task.CALLS)."""
    got = [c.strip() for c in s.split(",") if c.strip()]
    bad = [c for c in got if c not in ("gain", "loss", "both", "none")]
    if bad or not got:
        raise argparse.ArgumentTypeError(f"calls are among gain, loss, both, none (comma-separated), got {s!r}")
    return got


def _cluster_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cluster")
    g.add_argument("--scheduler", metavar="ADDRESS", help="use a running Dask scheduler (tcp://host:port)")
    g.add_argument("--scheduler-file", metavar="FILE", help="use the scheduler described in this file")
    g.add_argument("--workers", type=_posint, metavar="N",
                   help="local cluster: worker threads (CPU) or GPUs used (default: one per core / every GPU; "
                        "worker processes per GPU: motifgrid.cluster.gpu-processes)")
    g.add_argument("--threads", type=_posint, metavar="N",
                   help="local cluster: threads per GPU worker process (default: the cores shared among them), "
                        "per CPU worker process (--processes; default 1), or of the CPU worker (as --workers)")
    g.add_argument("--processes", action="store_true",
                   help="local CPU cluster of N single-threaded worker processes instead of threads in one process; "
                        "with --device gpu, worker processes per GPU (motifgrid.cluster.gpu-processes) instead of "
                        "this process's threads on a one-GPU machine")
    g.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto",
                   help="where the workers compute (auto: GPUs when present, else CPU)")
    g.add_argument("--tls-ca", metavar="PEM", help="TLS to the scheduler: CA certificate(s) of the cluster")
    g.add_argument("--tls-cert", metavar="PEM", help="TLS: this client's certificate")
    g.add_argument("--tls-key", metavar="PEM", help="TLS: this client's private key (when not in --tls-cert)")


def _motif_args(p: argparse.ArgumentParser) -> None:
    """The motif source of a command that scores motifs (scan, thresholds): a file or a release, a selection,
    and the file's format when neither its name nor its content tells it."""
    from pipeline.motifs import FORMATS  # noqa: PLC0415

    p.add_argument("motifs", help="motif file (JASPAR, MEME, TRANSFAC, HOMER, PFM) or a JASPAR release: "
                   "JASPAR2024, JASPAR2024:CORE:vertebrates, JASPAR2024:MA0139.2,MA0079.5 or JASPAR2024:CTCF "
                   "(matrix ids or names)")
    p.add_argument("--motif", action="append", metavar="ID_OR_NAME", dest="motif_select",
                   help="only this motif, by id (MA0139.2, or MA0139 for any version) or name (CTCF); repeat "
                        "for more (default: every motif of the source)")
    p.add_argument("--motif-format", choices=FORMATS, metavar="FORMAT",
                   help=f"format of the motif file ({', '.join(FORMATS)}; default: from its extension, "
                        "else its content)")


def _motif_db_args(p: argparse.ArgumentParser) -> None:
    """The motif database of a command whose positional argument is its sequences (enrich, variants): ``--motifs``,
    a selection, the file's format."""
    from pipeline.motifs import FORMATS  # noqa: PLC0415

    p.add_argument("--motifs", required=True, metavar="DB", help="motif file (JASPAR, MEME, TRANSFAC, HOMER, PFM) or "
                   "a JASPAR release (JASPAR2024, JASPAR2024:CORE:vertebrates, ...)")
    p.add_argument("--motif", action="append", metavar="ID_OR_NAME", dest="motif_select",
                   help="only this motif of DB, by id or name; repeat for more (default: every motif)")
    p.add_argument("--motif-format", choices=FORMATS, metavar="FORMAT", help="format of the motif file")


def _dataset_args(p: argparse.ArgumentParser, kind: str, metavar: str) -> None:
    """--resume / --overwrite of a command that writes a dataset folder."""
    g = p.add_mutually_exclusive_group()
    g.add_argument("--resume", action="store_true", help=f"complete an interrupted {kind} into {metavar}")
    g.add_argument("--overwrite", action="store_true",
                   help=f"replace the motifgrid dataset in {metavar} (finished or not) with a new {kind}: set aside once "
                        "this run's inputs are checked, removed once its cluster is up, put back if it stops before; "
                        "any other folder, or an input inside it, is refused")


class HelpFormatter(argparse.HelpFormatter):
    """``-h`` shows every option's default (the p-value default had to be found by experiment): appended to the
    help text unless the text already says it, or there is none (flags, options off by default)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if (action.default not in (None, False, argparse.SUPPRESS) and "default" not in text
                and (action.option_strings or action.nargs in ("?", "*"))):
            text += " (default: %(default)s)"
        return text


def _like_args(p: argparse.ArgumentParser) -> None:
    """``--like`` and ``--strand`` (scan, thresholds).  ``--background`` defaults to None here, resolved by
    ``pipeline.scan.motif_set.default_background`` (FIMO's NRDB with --like fimo, else motifgrid.scan.background)."""
    p.add_argument("--like", choices=["fimo"], default=None,
                   help="fimo: FIMO 5.4.1's scores (its integer lattice), p-values and hits, NRDB background "
                        "by default (README, docs/formats.md)")
    p.add_argument("--strand", choices=["both", "+", "-"], default="both",
                   help="strands scanned (default both; + is FIMO's --norc)")
    p.set_defaults(background=None)


class _Parser(argparse.ArgumentParser):
    """Argument errors as one line (``motifgrid scan: error: ...``), exit status 2; ``-h`` shows the usage
    and every option's default."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", HelpFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message):
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see {self.prog} -h)\n")


def _args_ingest(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid ingest``."""
    s.add_argument("fasta", help="FASTA file: plain, gzip or bgzip (an index beside it is never used)")
    s.add_argument("store", help="the new genome store (a folder, or an fsspec URL such as s3://bucket/g.zarr)")
    s.add_argument("--block-size", type=_posint, default=cfg["ingest"]["block-size"],
                   help="positions per block (one scan task reads one block)")
    s.add_argument("--halo", type=_nonnegint, default=cfg["ingest"]["halo"],
                   help="overlap between blocks; must be >= the longest motif - 1")


def _args_scan(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid scan``."""
    s.add_argument("store", metavar="STORE|FASTA", help="genome store (motifgrid ingest), or a FASTA (plain, gzip, "
                   "bgzip: peaks, promoters, a genome; ingested into HITS/_genome.zarr, kept with the hits)")
    _motif_args(s)
    s.add_argument("--pvalue", type=_pvalue, default=cfg["scan"]["pvalue"],
                   help="report windows with a p-value at most this (the threshold per motif and strand)")
    s.add_argument("--out", required=True, metavar="HITS", help="hits dataset folder (or fsspec URL) to write")
    s.add_argument("--background", help="uniform | genome | FILE | a,c,g,t | nrdb (default: "
                   f"{cfg['scan']['background']}; FIMO's nrdb with --like fimo)")
    s.add_argument("--pseudocount", type=_nonneg, default=cfg["scan"]["pseudocount"],
                   help="added to the counts (scaled by the background) before the log-odds")
    _dataset_args(s, "scan", "HITS")
    s.add_argument("--no-qvalue", action="store_true",
                   help="skip the q-values (Benjamini-Hochberg per motif over every window tested; HITS/_qvalues.parquet)")
    s.add_argument("--max-qvalue", type=_qvalue, metavar="Q",
                   help="record Q: read_hits and motifgrid export then keep hits with q <= Q (the files keep all)")
    s.add_argument("--parse-genomic-coord", action="store_true",
                   help="records named chrom:start-end (bedtools getfasta, HOMER, MACS, samtools faidx): hits in genome "
                        "coordinates wherever they are read or exported (FIMO's option; the record's name kept in "
                        "read_hits' record column)")
    s.add_argument("--regions", metavar="BED", help="scan only the windows lying wholly inside these regions of the "
                   "store, or of the FASTA's records (BED 3-12 columns, contigs named as the store's or FASTA's "
                   "records; overlapping and adjacent regions merged; hits get a region column)")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    _like_args(s)
    _cluster_args(s)


def _args_composition(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid composition``."""
    def c(name):
        return dask.config.get(f"motifgrid.composition.{name}")

    s.add_argument("tests", help="FASTA of test sequences (A, C, G, T/U; any lengths up to the store halo + 1)")
    s.add_argument("reference", help="genome store (motifgrid ingest) or FASTA (ingested into OUT/_reference.zarr)")
    s.add_argument("--min-similarity", type=_similarity, default=c("min-similarity"), metavar="S",
                   help="report windows with 1 - D/|T| >= S")
    s.add_argument("--out", required=True, metavar="OUT", help="composition dataset folder to write")
    s.add_argument("--both-strands", action="store_true",
                   help="also compare with each test's reverse complement (A<->T, C<->G counts; strand '-')")
    s.add_argument("--counts-only", action="store_true", help="write matches per test only, not the matches")
    s.add_argument("--max-hits", type=_nonnegint, default=c("max-hits"), metavar="N",
                   help="refuse when the estimated number of matches is larger")
    s.add_argument("--block-size", type=_posint, default=None,
                   help="block size of the store a FASTA reference is ingested into (default %s)" % c("block-size"))
    _dataset_args(s, "composition run", "OUT")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    _cluster_args(s)


def _args_thresholds(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid thresholds``."""
    _motif_args(s)
    s.add_argument("--pvalue", type=_pvalue, nargs="+", default=[cfg["scan"]["pvalue"]],
                   help="one or more p-values (one row per motif, strand and p-value)")
    s.add_argument("--method", choices=["exact", "bucket", "auto"], default="exact",
                   help="exact lattice DP, BUCKETSCOREDISTRIBUTION, or per matrix the cheaper")
    s.add_argument("--rel-tol", type=_number(float, lambda v: 0 < v < 0.5, "must be in (0, 0.5)"),
                   default=1e-3, help="relative precision of the p-value brackets")
    s.add_argument("--background", help="uniform | FILE | a,c,g,t | nrdb (genome needs --store; default: "
                   f"{cfg['scan']['background']}; FIMO's nrdb with --like fimo)")
    s.add_argument("--store", help="genome store, for --background genome")
    s.add_argument("--pseudocount", type=_nonneg, default=cfg["scan"]["pseudocount"],
                   help="added to the counts (scaled by the background) before the log-odds")
    s.add_argument("-o", "--out", default="-", help="TSV file, or - for standard output")
    _like_args(s)
    _cluster_args(s)


def _args_compare(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid compare``."""
    s.add_argument("motifs_a", metavar="A", help="motif file or JASPAR release (queries; alone: against each other)")
    s.add_argument("motifs_b", metavar="B", nargs="?", help="second motif file or release (the targets, or A x B pairs)")
    s.add_argument("--out", required=True, metavar="DIR", help="output folder (best_matches.tsv/.parquet or pairs/, "
                   "clusters)")
    s.add_argument("--method", choices=["tomtom", "occurrence"], default="tomtom",
                   help="tomtom: Tomtom's complete-score p-, E- and q-values of each query's best alignments "
                        "(which factor is this?); occurrence: COMPARE, the Jaccard index of the two matrices' "
                        "occurrence sets at their thresholds, with certified brackets (same sites?)")
    s.add_argument("--top", type=_posint, metavar="N", help="tomtom: matches kept per query (default 5)")
    s.add_argument("--distance", choices=["ed", "pearson"], help="tomtom: column comparison, Euclidean distance "
                   "(MEME 5's default) or Pearson correlation (default ed)")
    s.add_argument("--cluster", nargs="?", const=-1.0, type=_positive, metavar="CUTOFF",
                   help="also group the motifs of A (clusters.parquet, clusters.tsv): tomtom: average linkage at "
                        "E <= CUTOFF (default 1); occurrence: leader clustering at similarity >= CUTOFF (default 0.5)")
    s.add_argument("--min-overlap", type=_posint, default=1,
                   help="alignments with at least this many common columns, or all of the shorter motif's when it "
                        "has fewer (Tomtom's -min-overlap)")
    s.add_argument("--background", default="uniform", help="uniform | FILE | a,c,g,t")
    s.add_argument("--pseudocount", type=_nonneg, default=cfg["scan"]["pseudocount"],
                   help="added to the counts (scaled by the background): Tomtom's -motif-pseudo, or before the "
                        "log-odds")
    s.add_argument("--pvalue", type=_pvalue, help=f"occurrence: thresholds of both matrices (default "
                   f"{cfg['scan']['pvalue']})")
    s.add_argument("--cells", type=_number(int, lambda v: 4 <= v <= 110, "must be in 4..110"),
                   help="occurrence: lattice cells per matrix between its threshold and its best score (default 64)")
    s.add_argument("--pairs-per-task", type=_posint, metavar="N", help="occurrence: pairs per Dask task (default: "
                   "chosen from the pairs and workers)")
    _cluster_args(s)


def _args_enrich(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid enrich``."""
    s.add_argument("sequences", metavar="SEQUENCES", help="the targets: a FASTA (peaks, promoters), or a BED of "
                   "regions of --genome")
    _motif_db_args(s)
    s.add_argument("--out", required=True, metavar="DIR", help="output folder (enrichment.tsv/.parquet, "
                   "enrichment_clusters.tsv, sites.parquet, control.fa|.bed, enrichment.png/.html)")
    s.add_argument("--control", default="shuffled", metavar="shuffled|genomic|FASTA|BED",
                   help="shuffled: each target's dinucleotide shuffles (DIR/control.fa); genomic: regions of --genome "
                        "of each target's length and GC (DIR/control.bed); or the control sequences' file")
    s.add_argument("--genome", metavar="STORE", help="genome store (motifgrid ingest) of BED targets or controls, "
                   "and of genomic controls")
    s.add_argument("--pvalue", type=_pvalue, default=cfg["scan"]["pvalue"],
                   help="a site: a window with p-value at most this, either strand (each motif's threshold: "
                        "its smallest score of p-value <= this, docs/formats.md)")
    s.add_argument("--shuffles", type=_posint, metavar="K", help="controls per target (shuffles or genomic "
                   "regions; default 1)")
    s.add_argument("--seed", type=_nonnegint, help="seed of the shuffles and genomic draws (default 0)")
    s.add_argument("--cluster", type=_positive, default=1.0, metavar="E", help="group the best-ranked motifs "
                   f"(the {cfg['enrich']['cluster-top']} best; Tomtom's statistic, average linkage at E <= this)")
    s.add_argument("--no-cluster", action="store_true", help="no clusters")
    s.add_argument("--centrality", action="store_true", help="CentriMo's test of the best sites' distance to "
                   "the sequence centres")
    s.add_argument("--top", type=_posint, default=cfg["enrich"]["top"], metavar="N",
                   help="motifs drawn (PNG, HTML) and whose sites go to sites.parquet")
    s.add_argument("--background", help=f"uniform | genome (the sequences scanned) | FILE | a,c,g,t | nrdb (default: "
                   f"{cfg['scan']['background']})")
    s.add_argument("--pseudocount", type=_nonneg, default=cfg["scan"]["pseudocount"],
                   help="added to the counts (scaled by the background) before the log-odds")
    s.add_argument("--overwrite", action="store_true", help="replace the enrichment in DIR")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    _cluster_args(s)


def _args_variants(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid variants``."""
    s.add_argument("vcf", metavar="VCF", help="variants: a VCF, plain or bgzipped (SNVs, MNVs, indels; multi-allelic "
                   "records split per ALT; symbolic and breakend ALTs skipped with a count)")
    s.add_argument("--genome", required=True, metavar="STORE|FASTA", help="the genome the VCF is on: a genome store "
                   "(motifgrid ingest) or a FASTA (ingested into DIR/_genome.zarr); REF is checked against it")
    _motif_db_args(s)
    s.add_argument("--out", required=True, metavar="DIR", help="output folder (variants.tsv, variants.vcf, Parquet "
                   "rows in chrom/<record>/, _qvalues.parquet, _summary.json)")
    s.add_argument("--pvalue", type=_pvalue, default=cfg["scan"]["pvalue"],
                   help="a site: the allele's best window covering the variant has a p-value at most this (either "
                        "strand); calls gain, loss, both")
    s.add_argument("--report", choices=["sites", "all"], default="sites", help="sites: the rows where either allele "
                   "has a site; all: every (allele, motif)")
    s.add_argument("--samples", type=lambda t: [x for x in t.split(",") if x], metavar="S1,S2",
                   help="only the alleles these samples carry (GT); with --haplotypes, only their haplotypes")
    s.add_argument("--region", metavar="CHR:START-END", help="only the records overlapping this region (1-based, "
                   "inclusive, as tabix): a bgzipped VCF with its .tbi or .csi index beside it")
    s.add_argument("--atsnp", action="store_true", help="also atSNP's p-values of each SNV allele's best match among "
                   "the windows over it and of the change (rank test), under a first-order Markov background, by "
                   "importance sampling (columns atsnp_*: p-values and their relative standard errors)")
    s.add_argument("--markov", metavar="FILE", help="--atsnp's background: a TSV with a header line, then rows prior, "
                   "A, C, G, T of four probabilities (default: the genome's dinucleotides, written to DIR/_markov.tsv)")
    s.add_argument("--haplotypes", action="store_true", help="also score nearby variants of one phased haplotype "
                   "together (within the longest motif's width): one row per distinct combination, its carriers in "
                   "the haplotype column")
    s.add_argument("--max-ref-mismatch", type=_nonneg, default=cfg["variants"]["max-ref-mismatch"], metavar="F",
                   help="refuse the VCF when REF differs from the genome at more than this fraction of its alleles "
                        "(a wrong build); mismatching alleles are not scored")
    s.add_argument("--background", help=f"uniform | genome | FILE | a,c,g,t | nrdb (default: "
                   f"{cfg['scan']['background']})")
    s.add_argument("--pseudocount", type=_nonneg, default=cfg["scan"]["pseudocount"],
                   help="added to the counts (scaled by the background) before the log-odds")
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
    _dataset_args(s, "variants run", "DIR")
    _cluster_args(s)


def _args_export(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid export``."""
    s.add_argument("hits", help="hits dataset (motifgrid scan --out), or a variants folder (motifgrid variants "
                   "--out)")
    s.add_argument("--format", choices=["bed", "fimo", "gff3", "matrix", "tsv"], required=True,
                   help="BED6+3 (0-based), FIMO TSV or GFF3 (1-based); matrix: the peaks x motifs matrix (Matrix "
                        "Market, rows.tsv, cols.tsv) into the folder -o; a variants folder: bed (BED6+4, a line per "
                        "row and allele with a window) or tsv (variants.tsv's columns)")
    s.add_argument("-o", "--out", required=True, metavar="FILE",
                   help="output file, or - for standard output (a symbolic link keeps pointing at its target); "
                        "a folder for --format matrix")
    s.add_argument("--sort", choices=["fimo", "none"], default="fimo",
                   help="--format fimo: FIMO's order (by p-value; every hit is read before the first line) or none "
                        "(genome order, as FIMO's --text: lines stream at once)")
    s.add_argument("--value", choices=["any", "count", "best-score"], default="any",
                   help="--format matrix: 1 where a record or region has a hit of the motif (default), its hits, "
                        "or its best hit's score")
    s.add_argument("--max-qvalue", type=_qvalue, metavar="Q",
                   help="only hits with q <= Q (default: the scan's --max-qvalue, else every hit); a variants "
                        "folder: only rows with q <= Q")
    s.add_argument("--calls", type=_calls, metavar="CALLS",
                   help="a variants folder: only rows with these calls, comma-separated among gain, loss, both, none "
                        "(default: every row)")
    s.add_argument("--overwrite", action="store_true", help="replace FILE if it exists")


def _args_discover(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid discover``."""
    s.add_argument("sequences", help="FASTA (plain or gzip): peak sequences, promoters, ...")
    s.add_argument("--width", "-w", type=_posint, required=True, metavar="L", help="motif width")
    s.add_argument("--algorithm", choices=["gibbs", "projection", "both"], default="both",
                   help="Gibbs chains, PROJECTION trials, or both (their best models refined by EM)")
    s.add_argument("--mutations", "-d", type=_nonnegint, metavar="D",
                   help="planted (l, d) problem: rank by sequences with an l-mer within D mismatches of the "
                        "consensus (and choose PROJECTION's k from it)")
    s.add_argument("--model", choices=["oops", "zoops"], default="zoops",
                   help="one occurrence per sequence, or zero or one (default)")
    s.add_argument("--both-strands", action="store_true", help="search the reverse complement too")
    s.add_argument("--motifs", type=_posint, default=1, metavar="K", help="motifs to find (mask and repeat)")
    s.add_argument("--trials", type=_posint, metavar="M", help="PROJECTION trials (default: Buhler & Tompa's m)")
    s.add_argument("--projection-k", type=_posint, metavar="K", help="projected positions (default from l, d, t, n)")
    s.add_argument("--bucket-threshold", type=_posint, metavar="S", help="enriched bucket size (default from t, n, k)")
    s.add_argument("--chains", type=_posint, metavar="N", help="Gibbs chains (default 4096 on CPU, 65536 on GPU for 20 sequences; "
                   "scaled by 20/sequences, at least 256)")
    s.add_argument("--update", choices=["best", "sample"], default="best",
                   help="Gibbs update: the best window (deterministic, default) or a draw from the posterior")
    s.add_argument("--seed", type=_nonnegint, default=0, help="seed of the random draws (a run is determined by it)")
    s.add_argument("--compare-to", metavar="MOTIFS", help="motif database for each motif's best match")
    s.add_argument("--out", required=True, metavar="DIR", help="output folder (motifs, sites, summary)")
    _cluster_args(s)


def _args_summary(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid summary``."""
    s.add_argument("path", metavar="PATH", help="an output folder (the --out of scan, composition, compare, discover)")
    s.add_argument("--top", type=_posint, default=10, metavar="N", help="motifs (tests, pairs) listed (default 10)")
    s.add_argument("--json", action="store_true", help="the summary as JSON on stdout")


def _args_demo(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid demo``."""
    s.add_argument("--dir", default="motifgrid-demo", help="working folder")
    s.add_argument("--motifs", default="JASPAR2024:CORE:vertebrates", help="motif file or JASPAR release")
    s.add_argument("--pvalue", type=_pvalue, default=1e-4, help="p-value threshold of the scan")
    _cluster_args(s)


def build_parser() -> argparse.ArgumentParser:
    """The ``motifgrid`` parser: a subcommand per entry of ``SUBCOMMANDS`` (its help, then its arguments), in order."""
    cfg = dask.config.get("motifgrid")
    p = _Parser(prog="motifgrid", description="Genome-scale TF motif analysis on Dask (CPU or GPU).")
    p.add_argument("--version", action="version", version=f"motifgrid {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND", parser_class=_Parser)
    for name, (text, add_args) in SUBCOMMANDS.items():
        s = sub.add_parser(name, help=text)
        if add_args is not None:
            add_args(s, cfg)
    return p


#: The subcommands, in ``motifgrid -h`` order: the one-line help and the function that adds the arguments
#: (``bench`` parses its own: ``main``)
SUBCOMMANDS = {
    "ingest": ("FASTA (plain, gzip, bgzip) → Zarr genome store of overlapping blocks", _args_ingest),
    "scan": ("scan a genome store, a FASTA or BED regions of a store with a motif set → Parquet hits", _args_scan),
    "composition": ("short test sequences × reference windows with a similar nucleotide "
                    "histogram (S = 1 - L1/|T| >= s) → Parquet", _args_composition),
    "thresholds": ("score thresholds (achieved p-values, error bounds) per motif and strand", _args_thresholds),
    "compare": ("which known motif is this? (Tomtom, the default) or do two motifs call the same sites? (--method "
                "occurrence): the motifs of A against each other, or against B", _args_compare),
    "enrich": ("which known motifs are enriched in a set of sequences (peaks) against controls (shuffled, "
               "genomic or given)? SEA's Fisher test on the scan, clusters, CentriMo", _args_enrich),
    "variants": ("which variants of a VCF make or break a motif's site: each allele's best window, exact p-values, "
                 "gain / loss calls → TSV, Parquet, an annotated VCF", _args_variants),
    "export": ("hits dataset → BED, FIMO TSV or GFF3; variants folder → BED or TSV", _args_export),
    "discover": ("de novo motif discovery: Gibbs chains and PROJECTION trials on Dask, EM, "
                 "MEME/JASPAR motifs, sites Parquet, summary", _args_discover),
    "summary": ("what a motifgrid output folder holds (scan, composition, compare, discover or enrich): "
                "parameters, progress, totals, top motifs, hits per contig", _args_summary),
    "bench": ("throughput of the scan worker (GPU kernel, CuPy baseline, CPU) and end to end; "
              "motifgrid bench -h", None),
    "demo": ("ingest the bundled genome slice and scan it with JASPAR 2024 CORE vertebrates", _args_demo),
}
