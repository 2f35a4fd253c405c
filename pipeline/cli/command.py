"""``motifgrid`` command line.

Every user error (bad file, bad argument, refused output) ends with one line on stderr and exit
status 2; nothing that looks finished is left behind.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
import threading
import time
from pathlib import Path

import dask.config

from pipeline import MotifgridError, __version__

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
                   help="local CPU cluster of N single-threaded worker processes instead of threads in one process")
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
    ``pipeline.scan.graph.default_background`` (FIMO's NRDB with --like fimo, else motifgrid.scan.background)."""
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
    from pipeline.motifs import FORMATS  # noqa: PLC0415

    s.add_argument("sequences", metavar="SEQUENCES", help="the targets: a FASTA (peaks, promoters), or a BED of "
                   "regions of --genome")
    s.add_argument("--motifs", required=True, metavar="DB", help="motif file (JASPAR, MEME, TRANSFAC, HOMER, PFM) or "
                   "a JASPAR release (JASPAR2024, JASPAR2024:CORE:vertebrates, ...)")
    s.add_argument("--motif", action="append", metavar="ID_OR_NAME", dest="motif_select",
                   help="only this motif of DB, by id or name; repeat for more (default: every motif)")
    s.add_argument("--motif-format", choices=FORMATS, metavar="FORMAT", help="format of the motif file")
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


def _args_export(s: argparse.ArgumentParser, cfg: dict) -> None:
    """Arguments of ``motifgrid export``."""
    s.add_argument("hits", help="hits dataset (motifgrid scan --out)")
    s.add_argument("--format", choices=["bed", "fimo", "gff3", "matrix"], required=True,
                   help="BED6+3 (0-based), FIMO TSV or GFF3 (1-based); matrix: the peaks x motifs matrix (Matrix "
                        "Market, rows.tsv, cols.tsv) into the folder -o")
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
                   help="only hits with q <= Q (default: the scan's --max-qvalue, else every hit)")
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


# ------------------------------------------------------------------------------------ commands
def _console():
    """The commands' console (stderr).  Written to a file or a pipe (a SLURM log, `2>&1 | grep`), it wraps nothing:
    rich's default there is 80 columns, which cut lines such as "... window scores/s" / "(... column scores/s)" in two
    and broke grep."""
    from rich.console import Console  # noqa: PLC0415

    return Console(stderr=True, soft_wrap=not sys.stderr.isatty())


def cmd_ingest(a) -> int:
    from pipeline.io.genome import ingest  # noqa: PLC0415

    t0 = time.perf_counter()
    g = ingest(a.fasta, a.store, block_size=a.block_size, halo=a.halo)
    bg = g.background
    print(f"ingested {a.fasta} → {a.store}: {len(g.records):,} records, {g.total_length:,} bp, {g.n_blocks} blocks "
          f"of {g.block_size:,} (+{g.halo} halo), background A={bg[0]:.3f} C={bg[1]:.3f} G={bg[2]:.3f} "
          f"T={bg[3]:.3f}, N={g.attrs['base_counts']['N']:,}, {time.perf_counter() - t0:.1f}s")
    return 0


def _security(a):
    """``distributed.Security`` from ``--tls-ca/--tls-cert/--tls-key`` (files checked here), or None."""
    flags = {"--tls-ca": a.tls_ca, "--tls-cert": a.tls_cert, "--tls-key": a.tls_key}
    if not any(flags.values()):
        return None
    if not (a.scheduler or a.scheduler_file):
        raise UserError("--tls-ca/--tls-cert/--tls-key are for a running scheduler (--scheduler or "
                        "--scheduler-file); local clusters listen on 127.0.0.1 only")
    if not (a.tls_ca and a.tls_cert):
        raise UserError("TLS needs --tls-ca and --tls-cert (and --tls-key unless the key is in the certificate file)")
    for flag, path in flags.items():
        if path and not os.path.isfile(path):
            raise UserError(f"{path}: no such file ({flag})")
    from distributed.security import Security  # noqa: PLC0415

    return Security(tls_ca_file=a.tls_ca, tls_client_cert=a.tls_cert, tls_client_key=a.tls_key,
                    require_encryption=True)


def _check_out_file(path: str, overwrite: bool | None = None) -> None:
    """An output file (``-o``): ``-`` (standard output), a stream (FIFO, device), or a file in an existing folder,
    not a folder itself, nor inside a motifgrid output folder; written by :func:`pipeline.io.storage.open_output`.
    ``overwrite=False``: an existing file is refused."""
    from pipeline.io import storage  # noqa: PLC0415

    if storage.is_url(path):
        raise UserError(f"-o {path}: give a local file name, or - for standard output")
    try:
        kind, target = storage.output_target(path)
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder; give a file name") from None
    d = os.path.dirname(target)
    if kind == "file" and not os.path.isdir(d):
        raise UserError(f"{path}: cannot write it, the folder {d} does not exist")
    if kind != "file":
        return
    _refuse_inside_output(path, d)
    if overwrite is False and os.path.exists(target):      # (a dangling link: its target is written)
        raise UserError(f"{path}: exists; --overwrite to replace it")


def _refuse_inside_output(path: str, folder: str) -> None:
    """UserError when ``folder``, where ``path`` would be written, is or lies in a motifgrid output folder: a file
    there becomes part of the dataset (Parquet readers took ``H/hits.bed`` as theirs)."""
    inside = _output_folder_of(folder)
    if inside is not None:
        raise UserError(f"{path}: inside the motifgrid output folder {inside}; write it elsewhere (readers of that "
                        "folder take every file in it as theirs)")


def _output_folder_of(folder: str) -> str | None:
    """The motifgrid output folder (one holding a ``_run.json``) that ``folder`` is or lies in, or None."""
    d = os.path.abspath(folder)
    while True:
        if os.path.isfile(os.path.join(d, "_run.json")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _local_out(a) -> None:
    """Only ingest, scan and export take object-store URLs (pipeline/io/storage.py) so far."""
    from pipeline.io import storage  # noqa: PLC0415

    if getattr(a, "out", None) and storage.is_url(a.out):
        raise UserError(f"--out {a.out}: motifgrid {a.cmd} writes to a local (or shared) folder; "
                        "object-store URLs are taken by ingest, scan and export")


def _client_kwargs(a):
    """``get_client`` arguments; the scheduler file and TLS files are checked here, before any work starts."""
    from pipeline.engine.cluster import check_local_device, scheduler_address  # noqa: PLC0415

    dev = None if a.device == "auto" else a.device
    scheduler = scheduler_address(a.scheduler, a.scheduler_file)
    if scheduler is None:
        check_local_device(dev)
    return dict(scheduler=scheduler, n_workers=a.workers, device=dev,
                threads_per_worker=a.threads, processes=a.processes, security=_security(a))


def _local_gpu(client_kw: dict) -> bool:
    """A local cluster for these arguments would be GPU workers: ``--device gpu``, or ``--device auto`` where a GPU
    answers (the probe is cached)."""
    from workers.backend import gpu_available  # noqa: PLC0415

    return client_kw["device"] == "gpu" or (client_kw["device"] is None and gpu_available())


def _prestart(client_kw: dict) -> None:
    """A local cluster of worker processes (GPU workers, ``--processes``): start their forkserver now
    (:func:`pipeline.engine.cluster.prestart_workers`), so that it imports and loads kernels while the command reads its
    inputs.  Under ``--device auto`` it is started where a GPU answers (the probe is cached: ``--device auto``
    asks it anyway), and stays idle if the cost model then picks the in-process CPU cluster."""
    from pipeline.engine.cluster import prestart_workers  # noqa: PLC0415

    if client_kw["scheduler"] is not None:
        return
    gpu = _local_gpu(client_kw)
    if gpu or client_kw["processes"]:
        prestart_workers(gpu=gpu)


def _threshold_threads(client_kw: dict) -> int:
    """Threads of this process for the thresholds beside the planning (``pipeline.scan.graph.plan_scan``): every core when
    the scan's cluster will be threads of this process (CPU, no ``--processes``), which would compute them on the
    same cores after its start anyway; else 0: worker processes start on those cores meanwhile (16 threshold threads
    beside the start of one H100's four GPU workers made the whole scan 0.4-0.5 s slower; docs/benchmarks.md)."""
    from pipeline.engine.cluster import cpu_count  # noqa: PLC0415

    if client_kw["scheduler"] is not None or client_kw["processes"] or _local_gpu(client_kw):
        return 0
    return cpu_count()


def _background(fn) -> threading.Thread:
    """``fn()`` on a daemon thread (loading ahead of need: a failure is left for the step that needs it to report)."""
    def run():
        try:
            fn()
        except Exception:  # noqa: BLE001, S110
            pass
    t = threading.Thread(target=run, name=f"motifgrid-{getattr(fn, '__name__', 'load')}", daemon=True)
    t.start()
    return t


class _EarlyCluster:
    """``get_client(**kw)`` entered on a thread at once, so that a local GPU cluster starts while the command
    plans (reading the motifs and the store: 1.4 s on a 16-core H200 host, beside a 4-6 s start); ``get()`` waits
    for it; leaving the ``with`` block waits for the start to finish, then closes it (a planning error included)."""

    def __init__(self, **kw):
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

        from pipeline.engine.cluster import get_client  # noqa: PLC0415

        self._cm = get_client(**kw)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="cluster-start")
        self._entered = self._pool.submit(self._cm.__enter__)

    def get(self):
        return self._entered.result()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self._pool.shutdown(wait=True)
        if self._entered.exception() is None:     # started: close it (a failed start closed what it had)
            self._cm.__exit__(*exc)
        return False


def _early_cluster(kw: dict, processes: bool, paths: list, motifs: str):
    """The command's local cluster of worker processes (``processes``: the command's arguments ask for one) started now
    on a thread (:class:`_EarlyCluster`), beside the command's reading of its inputs; None for an in-process cluster,
    a scheduler given, or an input plainly missing (its error then comes at once, not after a start)."""
    if kw["scheduler"] is None and processes and _inputs_present(paths, motifs):
        return _EarlyCluster(**kw, quiet=True, dashboard=True)
    return None


def _inputs_present(paths: list, motifs: str) -> bool:
    """The input files (``paths``; None for one not given) and the motif file exist: URLs and JASPAR release names are
    taken as given.  A command starts its cluster beside the planning only then, so a plainly missing input is
    reported at once instead of after the start."""
    from pipeline.io import storage  # noqa: PLC0415
    from pipeline.motifs.releases import parse_release  # noqa: PLC0415

    given = [p for p in paths if p is not None] + ([] if parse_release(motifs) is not None else [motifs])
    return all(storage.is_url(p) or os.path.exists(p) for p in given)


def _plan_scan(a, console, threshold_threads: int = 0):
    """``plan_scan`` of the command's arguments; says where an ingested FASTA went.  ``threshold_threads``: the
    thresholds start on that many threads of this process as soon as the motifs are read (a local cluster)."""
    from pipeline.scan.graph import plan_scan  # noqa: PLC0415

    job = plan_scan(a.store, a.motifs, a.out, pvalue=a.pvalue, background=a.background,
                    pseudocount=a.pseudocount, resume=a.resume, like=getattr(a, "like", None),
                    strands=getattr(a, "strand", "both"), overwrite=getattr(a, "overwrite", False),
                    select=getattr(a, "motif_select", None), motif_format=getattr(a, "motif_format", None),
                    qvalues=not getattr(a, "no_qvalue", False), max_qvalue=getattr(a, "max_qvalue", None),
                    regions=getattr(a, "regions", None), threshold_threads=threshold_threads,
                    parse_genomic_coord=getattr(a, "parse_genomic_coord", False))
    if job.ingested:
        console.print(f"{a.store}: {len(job.store.records):,} records, {job.store.total_length:,} bp → "
                      f"{job.store.path} (kept with the hits: exports read the sequences from it; --resume reuses it)")
    return job


def cmd_scan(a, console=None, before_scan=None) -> int:
    """``before_scan(job)``: called once the cluster is up, before the thresholds and blocks (the demo's notes)."""
    import contextlib  # noqa: PLC0415

    console = console or _console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    client_kw = _client_kwargs(a)
    _prestart(client_kw)                  # the workers' forkserver imports beside the planning below
    if os.path.isfile(a.store):           # a FASTA scanned directly: numba and its parser load beside the motifs' read
        from pipeline.io.fasta import load_parser  # noqa: PLC0415

        _background(load_parser)
    # worker processes asked for by name (--device gpu, --device cpu --processes) start beside the planning too;
    # --device auto decides after it, by the cost model
    early = _early_cluster(client_kw, client_kw["device"] == "gpu" or (
        client_kw["device"] == "cpu" and client_kw["processes"]), [a.store], a.motifs)
    with early or contextlib.nullcontext():
        job = _plan_scan(a, console, _threshold_threads(client_kw))
        try:
            res = _run_planned(job, a, client_kw, early, console, command, before_scan)
        except BaseException:
            if job.thresholds is not None:
                job.thresholds.cancel()         # the cluster did not start: the batches not begun are dropped
            from pipeline.engine.dataset import restore_replaced  # noqa: PLC0415

            restore_replaced(job.out)           # stopped before the scan began: what --overwrite set aside, back
            raise
    _print_summary(res, console)
    return 0


def _run_planned(job, a, client_kw, early, console, command, before_scan):
    """:func:`cmd_scan` once its inputs are planned: the cluster (``early``'s, or one started now), the scan."""
    import contextlib  # noqa: PLC0415

    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.scan.graph import execute_scan  # noqa: PLC0415

    # (a scheduler of its own serves its dashboard whatever the job's size)
    small = early is None and client_kw["scheduler"] is None and job.positions < int(
        dask.config.get("motifgrid.scan.dashboard-min-positions", default=0))
    if client_kw["device"] is None and client_kw["scheduler"] is None:       # --device auto on this machine
        choice = _auto_device(job, a.pvalue)
        if choice is not None:
            client_kw["device"] = choice.device
            console.print(choice.line())
    with (contextlib.nullcontext(early.get()) if early else
          get_client(**client_kw, quiet=True, dashboard=not small,
                     threads_only=_on_threads(small, job.positions))) as (client, device):
        console.print(_cluster_line(client, device, small))
        if before_scan is not None:
            before_scan(job)
        return execute_scan(job, client, device=device, progress=not a.no_progress, command=command, console=console)


def _on_threads(small: bool, positions: int) -> bool:
    """A job without the dashboard (``small``) and of at most ``motifgrid.scan.threads-max-positions`` positions runs
    on the command's threads where its cluster would be local CPU threads (:func:`pipeline.engine.cluster.get_client`)."""
    return small and positions <= int(dask.config.get("motifgrid.scan.threads-max-positions", default=0))


def _runs_on(client, device: str) -> str:
    """``2 CPU thread(s), no cluster`` (:class:`pipeline.engine.thread_client.ThreadClient`) or ``4 GPU worker(s)``."""
    if getattr(client, "threads_only", False):
        return f"{sum(client.nthreads().values())} CPU thread(s), no cluster"
    return f"{len(client.scheduler_info()['workers'])} {device.upper()} worker(s)"


def _cluster_line(client, device: str, small: bool) -> str:
    """What the scan runs on: the workers and the dashboard, or this process's threads (a small local CPU job)."""
    from pipeline.engine.cluster import dashboard_link  # noqa: PLC0415

    if getattr(client, "threads_only", False):
        return f"[bold]motifgrid scan[/] on {_runs_on(client, device)} (a small job; dashboard off)"
    addr = client.scheduler.address or ""
    follow = "" if addr.startswith("inproc://") else f"; scheduler: {addr}"   # for notebooks/dashboard.ipynb
    return (f"[bold]motifgrid scan[/] on {_runs_on(client, device)}; "
            f"dashboard: {'off (a small job)' if small else dashboard_link(client)}{follow}")


def _auto_device(job, pvalue: float):
    """The cost model's device for a local scan on a machine with GPUs (:mod:`pipeline.engine.cost`); None without one."""
    from workers.backend import gpu_available  # noqa: PLC0415

    if not gpu_available():
        return None
    import cupy  # noqa: PLC0415

    from pipeline.engine.cluster import cpu_count  # noqa: PLC0415
    from pipeline.engine.cost import estimate  # noqa: PLC0415

    strands = len(job.mset.strand_rows)
    columns = strands * sum(int(w.shape[0]) for w in job.mset.pwms)
    return estimate(job.positions, columns, strands * len(job.mset.pwms), pvalue, cpu_count(),
                    cupy.cuda.runtime.getDeviceCount())


def _print_summary(res, console) -> None:
    import json  # noqa: PLC0415

    from pipeline.io import storage  # noqa: PLC0415

    s = json.loads(storage.read_bytes(storage.join(res.out, "_summary.json")))
    rate = res.scores / res.seconds if res.seconds and res.scores else 0.0
    console.print(f"done: {s['blocks']} blocks ({res.blocks_skipped} already finished), {s['hits']:,} hits, "
                  f"{res.seconds:.1f}s, {rate:.3g} window scores/s "
                  f"({res.column_scores / res.seconds if res.seconds else 0:.3g} column scores/s) on {res.device}")
    if res.unreachable:
        console.print(f"{len(res.unreachable)} motif(s) cannot reach the p-value on some strand and report no hits there: "
                      + ", ".join(res.unreachable[:10]) + (" …" if len(res.unreachable) > 10 else ""))
    q = res.qvalues
    if q:
        kept = (" (kept when the hits are read: read_hits, motifgrid export)" if q["max_qvalue"] is not None
                else "")
        console.print(f"q-values: {q['hits_at_level']:,} of {s['hits']:,} hits have q <= {q['level']:g}{kept}; "
                      f"Benjamini-Hochberg per motif over {s['tests']:,} tests (windows without N x strands) "
                      f"→ {res.out}/_qvalues.parquet", soft_wrap=True)
    from pipeline.cli.summary import top_motif_lines, top_motifs  # noqa: PLC0415

    for line in top_motif_lines(top_motifs(res.out, 5), res.out):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    console.print(f"hits: {res.out} (Parquet: chrom/<record>/ and packed/)  · per motif: {res.out}/_motif_summary.tsv "
                  f"(.parquet)  · per record or region and motif: {res.out}/_region_counts.parquet  "
                  f"· motifgrid summary {res.out}", soft_wrap=True)


def cmd_composition(a) -> int:
    _local_out(a)
    from pipeline.engine.cluster import dashboard_link, get_client  # noqa: PLC0415
    from pipeline.composition.run import execute_composition, plan_composition  # noqa: PLC0415

    console = _console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    client_kw = _client_kwargs(a)                     # (a device or scheduler refused before the output is claimed)
    job = plan_composition(a.tests, a.reference, a.out, min_similarity=a.min_similarity, both_strands=a.both_strands,
                           counts_only=a.counts_only, resume=a.resume, block_size=a.block_size, console=console,
                           overwrite=a.overwrite)
    p = job.plan
    console.print(f"{len(job.tests.ids):,} tests ({p.lengths.size} lengths, {int(p.lengths.min())}-{p.max_length} nt"
                  f"{', both strands' if p.both_strands else ''}) × {job.store.total_length:,} bp in "
                  f"{len(job.store.records):,} records, S >= {p.min_similarity:g}")
    try:
        with get_client(**client_kw, quiet=True) as (client, device):
            console.print(f"[bold]motifgrid composition[/] on {len(client.scheduler_info()['workers'])} "
                          f"{device.upper()} worker(s); dashboard: {dashboard_link(client)}")
            res = execute_composition(job, client, device=device, progress=not a.no_progress, command=command,
                                      console=console, max_hits=a.max_hits)
    except BaseException:
        from pipeline.engine.dataset import restore_replaced  # noqa: PLC0415

        restore_replaced(job.out)           # stopped before the run began: what --overwrite set aside, back
        raise
    rate = res.pairs / res.seconds if res.seconds else 0.0
    est = res.estimate
    if est:
        console.print(f"estimated {est['hits']:,} matches from {est['sampled_tasks']} task(s) "
                      f"({est['sampled_positions']:,} window starts) in {est['seconds']:.1f}s")
    console.print(f"done: {res.tasks} tasks ({res.tasks_skipped} already finished), {res.hits:,} matches, "
                  f"{res.seconds:.1f}s, {rate:.3g} window-test pairs/s on {res.device}")
    console.print(f"per test: {res.out}/_test_summary.parquet"
                  + ("" if a.counts_only else f"  · matches: {res.out}/{{chrom/*,packed}}/part-*.parquet"))
    return 0


def cmd_thresholds(a) -> int:
    import numpy as np  # noqa: PLC0415
    import pyarrow as pa  # noqa: PLC0415

    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.io.genome import GenomeStore  # noqa: PLC0415
    from pipeline.motifs import read_background  # noqa: PLC0415
    from pipeline.scan.graph import MotifSet, check_like, default_background, motif_thresholds_table, row_thresholds_many  # noqa: PLC0415

    _check_out_file(a.out or "-")
    check_like(a.like, a.strand)
    if a.background == "genome" and not a.store:
        raise UserError("--background genome is the composition of a genome store: give --store STORE")
    gbg = GenomeStore(a.store).background if a.store else None
    bg = read_background(a.background or default_background(a.like), genome_background=gbg)
    mset = MotifSet.load(a.motifs, bg, a.pseudocount, select=a.motif_select, format=a.motif_format, like=a.like,
                         strands=a.strand, keyed="the table names motifs by id, so the rows of matrices sharing one "
                         "cannot be told apart")
    kw = _client_kwargs(a)
    device = kw["device"]
    kw["device"] = "cpu"
    with get_client(**kw, quiet=True, threads_only=True) as (client, _):    # a local run: this process's threads
        per_p = row_thresholds_many(mset, a.pvalue, client=client, method=a.method, table=False,
                                    rel_tol=a.rel_tol, device="gpu" if device == "gpu" else "cpu")
    _, _, strands = mset.rows()
    t = pa.concat_tables([motif_thresholds_table(mset, tables, strands) for tables in per_p])
    from pipeline.engine.dataset import table_tsv  # noqa: PLC0415
    from pipeline.io.storage import open_output  # noqa: PLC0415

    with open_output(a.out or "-", "wb") as f:
        f.write(table_tsv(t))
    reach = np.asarray(t.column("reachable").to_pylist())
    err = np.asarray(t.column("score_error").to_pylist(), dtype=float)[reach]
    lo = np.asarray(t.column("pvalue_low").to_pylist())[reach]
    hi = np.asarray(t.column("pvalue_high").to_pylist())[reach]
    width = np.where(lo > 0, hi / np.where(lo > 0, lo, 1) - 1, np.where(hi > 0, np.inf, 0.0))
    methods = sorted(set(t.column("method").to_pylist()))
    print(f"{len(mset.ids)} motifs × {len(a.pvalue)} p-value(s): {t.num_rows} rows, "
          f"{int((~reach).sum())} unreachable; method {'+'.join(methods)}; "
          f"largest p-value bracket {float(width.max(initial=0.0)):.2e} (relative), "
          f"largest score error {float(np.nanmax(err, initial=0.0)):.3g} bits", file=sys.stderr)
    return 0


def _one_line_warnings(cmd: str) -> None:
    """Warnings meant for the user (a class with ``one_line``, e.g. identification's small target set) print as
    ``motifgrid CMD: warning: ...``, without Python's source line; any other keeps Python's format."""
    import warnings  # noqa: PLC0415

    plain = warnings.formatwarning

    def fmt(message, category, filename, lineno, line=None):
        if getattr(category, "one_line", False):
            return f"motifgrid {cmd}: warning: {message}\n"
        return plain(message, category, filename, lineno, line)

    warnings.formatwarning = fmt


def _compare_settings(a):
    """``CompareSettings`` from the arguments (``pipeline.compare.run.settings_for``)."""
    from pipeline.compare.run import METHOD_OPTIONS, settings_for  # noqa: PLC0415
    from pipeline.motifs import read_background  # noqa: PLC0415

    if a.cluster is not None and a.motifs_b:
        raise UserError("--cluster groups one collection: give only A")
    given = {k: getattr(a, k) for opts in METHOD_OPTIONS.values() for k in opts}
    return settings_for(a.method, given, cluster=None if a.cluster == -1.0 else a.cluster,
                        default_cluster=a.cluster == -1.0, min_overlap=a.min_overlap, pseudocount=a.pseudocount,
                        background=tuple(read_background(a.background)), background_spec=a.background)


def cmd_compare(a) -> int:
    _local_out(a)
    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.compare.run import best_match_lines, run_compare, summary_line  # noqa: PLC0415

    settings = _compare_settings(a)
    kw = _client_kwargs(a)
    console = _console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    with get_client(**kw, quiet=True) as (client, device):
        res = run_compare(a.motifs_a, a.motifs_b, a.out, client, settings, device=device, command=command)
    if settings.method == "tomtom":                      # each query's best match: data, on standard output
        try:
            print("\n".join(best_match_lines(a.out)), flush=True)
        except BrokenPipeError:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    console.print(summary_line(res, settings, a.out), markup=False, highlight=False, soft_wrap=True)
    return 0


def cmd_discover(a) -> int:
    started = time.perf_counter()        # the time printed and summary.json's span the whole command
    _local_out(a)
    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.discover.run import DiscoverSettings, read_sequences, run_discover  # noqa: PLC0415

    console = _console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    settings = DiscoverSettings(width=a.width, algorithm=a.algorithm, mutations=a.mutations, model=a.model,
                                both_strands=a.both_strands, motifs=a.motifs, seed=a.seed, trials=a.trials,
                                projection_k=a.projection_k, bucket_threshold=a.bucket_threshold,
                                chains=a.chains, update=a.update)
    settings.check(read_sequences(a.sequences))          # bad input fails before a cluster starts
    if a.compare_to:
        from pipeline.motifs import read_motifs  # noqa: PLC0415

        read_motifs(a.compare_to)

    def progress(rnd, m, secs):
        extra = f", {m.ld_count} sequences within d" if m.ld_count is not None else ""
        console.print(f"motif {rnd + 1}: {m.consensus} ({len(m.sites)} sites, {m.information_content:.1f} bits"
                      f"{extra}, by {m.origin}) in {secs:.1f}s")

    with get_client(**_client_kwargs(a), quiet=True) as (client, device):
        res = run_discover(a.sequences, a.out, settings, client, device=device, compare_to=a.compare_to,
                           command=command, progress=progress, started=started)
    for m in res.motifs:
        bm = m["best_match"]
        if bm:
            console.print(f"{m['id']} {m['consensus']}: best match {bm['id']} {bm['name']} (p={bm['pvalue']:.2g}, "
                          f"E={bm['evalue']:.2g}, offset {bm['offset']}, strand {bm['strand']}, {bm['overlap']} "
                          "columns)", markup=False, highlight=False, soft_wrap=True)
    ph = res.stats["seconds"]
    console.print(f"done in {res.seconds:.1f}s on {device} (start-up {ph['setup']:.1f}s, search {ph['search']:.1f}s"
                  + (f", --compare-to {ph['compare_to']:.1f}s" if a.compare_to else "") + f", writing {ph['write']:.1f}s"
                  f"; as summary.json): {res.out}/motifs.meme, motifs.jaspar, sites.parquet, summary.json")
    return 0


def _control_draws(a, option: str, default: int) -> int:
    """``--shuffles`` / ``--seed`` of ``enrich``, with a warning where the control is the user's file (they shape
    only the shuffled and genomic controls: they were ignored without a word)."""
    value = getattr(a, option)
    if value is None:
        return default
    from pipeline.enrich.inputs import control_kind  # noqa: PLC0415

    if control_kind(a.control) == "file":
        import warnings  # noqa: PLC0415

        from pipeline.enrich.stats import EnrichWarning  # noqa: PLC0415

        warnings.warn(EnrichWarning(f"--{option} shapes the shuffled and genomic controls only; the control file "
                                    f"{a.control} is used as it is"), stacklevel=2)
    return value


def cmd_enrich(a) -> int:
    _local_out(a)
    import contextlib  # noqa: PLC0415

    from pipeline.enrich.run import EnrichSettings, read_inputs, result_lines  # noqa: PLC0415
    from pipeline.enrich.inputs import load_kernels  # noqa: PLC0415

    console = _console()
    command = " ".join(shlex.quote(x) for x in ["motifgrid", *sys.argv[1:]])
    kw = _client_kwargs(a)
    _prestart(kw)                         # the workers' forkserver imports beside reading the inputs
    st = EnrichSettings(pvalue=a.pvalue, control=a.control, genome=a.genome, shuffles=_control_draws(a, "shuffles", 1),
                        seed=_control_draws(a, "seed", 0), cluster=None if a.no_cluster else a.cluster,
                        centrality=a.centrality, background=a.background, pseudocount=a.pseudocount, top=a.top,
                        select=a.motif_select, motif_format=a.motif_format, overwrite=a.overwrite)
    _background(load_kernels)             # numba and the controls' kernels beside reading the inputs
    # GPU workers (CPU ones with --processes) start at once, beside reading the inputs: on one H100 the cluster was
    # ready ~0.9 s after the controls and the store when started only after the targets (docs/benchmarks.md, issue 19)
    early = _early_cluster(kw, _local_gpu(kw) or kw["processes"], [a.sequences, a.genome], a.motifs)
    with early or contextlib.nullcontext():
        inputs = read_inputs(a.sequences, a.motifs, a.out, st, command=command)
        small = early is None and inputs.positions() < int(dask.config.get("motifgrid.scan.dashboard-min-positions",
                                                                           default=0))
        res, job = _run_enrich(inputs, kw, early, small, console, a, command)
    for line in result_lines(job, res):
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return 0


def _run_enrich(inputs, kw, early, small, console, a, command):
    """:func:`cmd_enrich` once its inputs are read: the controls and the store made while the cluster starts (3 s of
    a GPU cluster's start, 1 s of a CPU one's), then the scan, statistics and report; ``(result, job)``."""
    import contextlib  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from pipeline.engine.cluster import get_client  # noqa: PLC0415
    from pipeline.enrich.run import abandon, execute_enrich, prepare_enrich  # noqa: PLC0415

    with ThreadPoolExecutor(1, thread_name_prefix="enrich-prepare") as pool:
        # an in-process cluster: the scan's thresholds start on this machine's cores once the scan is planned
        planned, job = pool.submit(prepare_enrich, inputs, _threshold_threads(kw)), None
        try:
            with (contextlib.nullcontext(early.get()) if early else
                  get_client(**kw, quiet=True, dashboard=not small,
                             threads_only=_on_threads(small, inputs.positions()))) as (client, device):
                job = planned.result()
                console.print(f"[bold]motifgrid enrich[/] on {_runs_on(client, device)}: {len(job.targets):,} "
                              f"targets, {len(job.controls):,} controls ({job.control_info['kind']}), "
                              f"{len(job.motifs):,} motifs")
                res = execute_enrich(job, client, device=device, progress=not a.no_progress, command=command,
                                     console=console)
        except BaseException:
            job = job or _prepared(planned)
            if job is not None:
                abandon(job)
            raise
    return res, job


def _prepared(planned):
    """The job a preparation made, once it is over (None when it failed: it removed what it wrote)."""
    try:
        return planned.result()
    except BaseException:
        return None


def cmd_export(a) -> int:
    from pipeline.scan.export import export  # noqa: PLC0415

    from pipeline.io.storage import output_target  # noqa: PLC0415

    if a.format == "matrix":
        return _export_matrix(a)
    _check_out_file(a.out, overwrite=a.overwrite)
    _warn_unfinished(a.hits)
    to_stdout = output_target(a.out)[0] == "stdout"
    try:
        n = export(a.hits, a.format, a.out, max_qvalue=a.max_qvalue, sort=a.sort)
    except BrokenPipeError:          # `motifgrid export H -o - | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    print(f"wrote {n:,} hits to {'standard output' if to_stdout else a.out} ({a.format})",
          file=sys.stderr if to_stdout else sys.stdout)
    return 0


def _export_matrix(a) -> int:
    """``export --format matrix -o DIR``: a new folder (or, with --overwrite, one holding only an earlier matrix),
    not inside a motifgrid output folder."""
    from pipeline.scan.export import export_matrix  # noqa: PLC0415

    out = os.path.abspath(a.out)
    if a.max_qvalue is not None:
        raise UserError("--max-qvalue does not apply to --format matrix: it counts every hit at the scan's p-value")
    _refuse_inside_output(a.out, out if os.path.isdir(out) else os.path.dirname(out))
    if os.path.exists(out):
        ours = {"matrix.mtx", "rows.tsv", "cols.tsv"}
        if not os.path.isdir(out) or not a.overwrite or not set(os.listdir(out)) <= ours:
            raise UserError(f"{a.out}: exists; --overwrite replaces a folder holding only an earlier matrix")
    elif not os.path.isdir(os.path.dirname(out)):
        raise UserError(f"{a.out}: cannot write it, the folder {os.path.dirname(out)} does not exist")
    _warn_unfinished(a.hits)
    rows, cols, nnz = export_matrix(a.hits, out, a.value)
    print(f"wrote {rows:,} x {cols:,} matrix ({nnz:,} non-zero, {a.value}) to {a.out}/matrix.mtx, rows.tsv, cols.tsv")
    return 0


def _warn_unfinished(hits: str) -> None:
    """One line on stderr when ``hits`` is a scan that has not finished (interrupted, or running): its finished
    blocks' hits only, and no q-values yet."""
    from pipeline.io import storage  # noqa: PLC0415

    if storage.exists(storage.join(hits, "_run.json")) and not storage.exists(storage.join(hits, "_summary.json")):
        print(f"motifgrid export: warning: {hits} is an unfinished scan: only the hits of its finished blocks, without "
              "q-values (rerun its scan with --resume to complete it)", file=sys.stderr)


def cmd_summary(a) -> int:
    import json  # noqa: PLC0415

    from pipeline.cli.summary import summarize, summary_lines  # noqa: PLC0415

    s = summarize(a.path, top=a.top)
    try:
        print(json.dumps(s, indent=1) if a.json else "\n".join(summary_lines(s)), flush=True)
    except BrokenPipeError:          # `motifgrid summary X --json | head`: the reader has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def cmd_demo(a) -> int:
    from pipeline.io.genome import GenomeStore, ingest  # noqa: PLC0415

    t0 = time.perf_counter()
    warm = _KernelWarmup.start(a)
    console = _console()
    d = Path(a.dir)
    d.mkdir(parents=True, exist_ok=True)
    fasta = Path(__file__).parent / "data" / "hs37_chrX_20-22Mb.fa.gz"
    store = d / "genome.zarr"
    t_ingest = None
    if not store.exists():
        console.print(f"ingesting the bundled genome slice {fasta.name} (human GRCh37 chrX:20,000,001-22,000,000) → {store}")
        t_ingest = time.perf_counter()
        ingest(fasta, store, block_size=262_144)
        t_ingest = time.perf_counter() - t_ingest
    else:
        GenomeStore(store)
    hits = d / "hits"
    a.store, a.out, a.background, a.pseudocount = str(store), str(hits), "uniform", 0.1
    a.resume, a.no_progress = True, False
    console.print(f"scanning with {a.motifs}, p < {a.pvalue}, both strands")
    cmd_scan(a, console=console, before_scan=warm.announce if warm else None)
    _demo_report(hits, console)
    _demo_times(hits, console, warm, t_ingest, time.perf_counter() - t0)
    return 0


def _workers_dispatchers() -> list:
    """The numba kernels of the ``workers`` modules imported so far."""
    from numba.core.dispatcher import Dispatcher  # noqa: PLC0415

    return [v for name, mod in list(sys.modules.items()) if name.startswith("workers.") and mod is not None
            for v in list(vars(mod).values()) if isinstance(v, Dispatcher)]


class _KernelWarmup:
    """The demo's first seconds on a new machine are numba compiling the kernels (17-21 s on the 2-core VM, a helper
    process compiling half of them: ``workers.warmup``; cached on disk after that, next to the sources or, where those
    are read-only, in numba's user cache folder; NUMBA_CACHE_DIR chooses).  For a local CPU cluster (threads of this
    process) they are compiled or loaded here, in a thread started before the genome is ingested, the motifs read
    and the cluster started: the workers find them ready (``workers.warmup.warm`` runs once per process)."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.seconds = None
        self.thread = threading.Thread(target=self._run, name="motifgrid-demo-warmup", daemon=True)
        self.thread.start()

    @classmethod
    def start(cls, a):
        """A running warm-up, or None where the workers are other processes or machines (they warm up themselves)."""
        if a.scheduler or a.scheduler_file or a.processes or a.device == "gpu":
            return None
        from workers.backend import gpu_available  # noqa: PLC0415

        return cls() if a.device == "cpu" or not gpu_available() else None

    def _run(self):
        from workers.warmup import warm  # noqa: PLC0415

        try:
            warm("cpu")
        except Exception:          # noqa: BLE001 - the scan's own tasks will say what is wrong
            pass
        self.seconds = time.perf_counter() - self.t0

    def compiled(self) -> int:
        """Kernels compiled so far in this process because numba's disk cache had none (0: loaded from the cache)."""
        return sum(sum(d.stats.cache_misses.values()) for d in _workers_dispatchers())

    def announce(self, job) -> None:
        if self.thread.is_alive() and self.compiled():
            _console().print(f"first run on this machine: compiling the scan and threshold kernels (numba; under a "
                             f"minute on 2 cores), then the thresholds of {len(job.mset.ids)} motifs; both are cached for "
                             "later runs …")


def _demo_times(hits: Path, console, warm, t_ingest, total: float) -> None:
    """Where the demo's time went: ingest, kernels (compiled or loaded, in the background), motifs and cluster,
    thresholds, blocks (from the scan's ``_summary.json``)."""
    import json  # noqa: PLC0415

    s = json.loads((hits / "_summary.json").read_text())
    parts = [] if t_ingest is None else [f"ingest {t_ingest:.1f} s"]
    if s.get("blocks_this_run"):
        rest = s["seconds"] - s["seconds_thresholds"] - s["seconds_tasks_wall"]
        parts += [f"thresholds {s['seconds_thresholds']:.1f} s", f"scanning the blocks {s['seconds_tasks_wall']:.1f} s",
                  f"the rest of the scan (reading the motifs, starting the workers, q-values, summaries) {rest:.1f} s"]
    line = f"time: {total:.1f} s in all" + (f" — {', '.join(parts)}" if parts else "")
    if warm is not None:                   # beside the above, on a thread of its own
        warm.thread.join()
        how = "compiled (first run; cached now)" if warm.compiled() else "loaded from numba's cache"
        line += f"; numba's kernels {how} in the background, ready {warm.seconds:.1f} s after the start"
    console.print(line, soft_wrap=True)


def _demo_report(hits: Path, console) -> None:
    import pyarrow.compute as pc  # noqa: PLC0415

    from pipeline.scan.graph import read_hits  # noqa: PLC0415

    t = read_hits(str(hits), columns=["chrom", "start", "end", "strand", "motif_name", "score", "pvalue"])
    best = t.take(pc.sort_indices(t, sort_keys=[("pvalue", "ascending")])[:3])
    for r in best.to_pylist():
        console.print(f"  strongest: {r['motif_name']} at {r['chrom']}:{r['start']:,}-{r['end']:,} ({r['strand']}) "
                      f"score {r['score']:.2f} p={r['pvalue']:.2g}")
    # pyarrow is a dependency (pandas is not: a plain install has no pandas)
    console.print("look at them: python -c \"import pyarrow.parquet as pq; print(pq.read_table('"
                  f"{hits}').slice(0, 5).to_pylist())\"  ·  motifgrid export {hits} --format bed -o hits.bed")


def _message(e: Exception, a) -> str:
    """The error's line, its advice for Python callers (``format=`` of read_motifs) replaced by this command's
    flag (``--motif-format``), or dropped where the command has none."""
    if getattr(e, "hint", None) and hasattr(e, "with_hint"):
        return e.with_hint("or pass --motif-format FORMAT" if hasattr(a, "motif_format") else None)
    return str(e)


#: what an interrupted command leaves, for the commands that can go on from it
_AFTER_INTERRUPT = {"scan": "; finished blocks are kept (rerun with --resume)",
                    "composition": "; finished blocks are kept (rerun with --resume)",
                    "demo": "; finished blocks are kept (run the demo again to finish)"}

def _after_interrupt(a) -> str:
    """:data:`_AFTER_INTERRUPT` for the command, where its output folder holds a run to go on from (a scan stopped
    while it read its inputs has none)."""
    from pipeline.io import storage  # noqa: PLC0415

    out = getattr(a, "out", None)
    if out and not storage.is_url(str(out)) and not os.path.exists(os.path.join(str(out), "_run.json")):
        return ""
    return _AFTER_INTERRUPT.get(a.cmd, "")


COMMANDS = {"ingest": cmd_ingest, "scan": cmd_scan, "thresholds": cmd_thresholds, "compare": cmd_compare,
            "discover": cmd_discover, "composition": cmd_composition, "export": cmd_export, "demo": cmd_demo,
            "summary": cmd_summary, "enrich": cmd_enrich}

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
    "export": ("hits dataset → BED, FIMO TSV or GFF3", _args_export),
    "discover": ("de novo motif discovery: Gibbs chains and PROJECTION trials on Dask, EM, "
                 "MEME/JASPAR motifs, sites Parquet, summary", _args_discover),
    "summary": ("what a motifgrid output folder holds (scan, composition, compare, discover or enrich): "
                "parameters, progress, totals, top motifs, hits per contig", _args_summary),
    "bench": ("throughput of the scan worker (GPU kernel, CuPy baseline, CPU) and end to end; "
              "motifgrid bench -h", None),
    "demo": ("ingest the bundled genome slice and scan it with JASPAR 2024 CORE vertebrates", _args_demo),
}


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["bench"]:                      # its own option parser (pipeline/cli/bench.py)
        from pipeline.cli.bench import main as bench_main  # noqa: PLC0415

        return bench_main(argv[1:], formatter_class=HelpFormatter)
    parser = build_parser()
    a = parser.parse_args(argv)
    _one_line_warnings(a.cmd)          # warnings meant for the user, of every command: one line each
    try:
        return COMMANDS[a.cmd](a) or 0
    except (MotifgridError, UserError) as e:
        print(f"motifgrid {a.cmd}: error: {_message(e, a)}", file=sys.stderr)
        return EXIT_USAGE
    except FileNotFoundError as e:
        print(f"motifgrid {a.cmd}: error: {e.filename}: no such file or directory", file=sys.stderr)
        return EXIT_USAGE
    except PermissionError as e:
        print(f"motifgrid {a.cmd}: error: {e.filename}: permission denied", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        print(f"motifgrid {a.cmd}: error: {e.strerror or e} {('(' + str(e.filename) + ')') if e.filename else ''}",
              file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print(f"motifgrid {a.cmd}: interrupted{_after_interrupt(a)}", file=sys.stderr)
        return 130


def _terminate_as_interrupt() -> None:
    """SIGTERM (``kill``, Slurm's ``scancel`` and time limit, a container's stop) stops a command as Ctrl-C does:
    its one "interrupted" line, finished blocks kept for ``--resume``, temporary folders removed (a FASTA's
    store being ingested was left behind); a second SIGTERM ends it at once."""
    import signal  # noqa: PLC0415

    def stop(signum, frame):
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)


def entry() -> None:
    """The console script: ``main``, then a quick exit.

    Tearing down the interpreter (every module of dask, distributed, numba, pyarrow, zarr) takes ~0.6 s
    after a scan has finished and reported.  The exit handlers still run (they close clusters and
    temporary folders, flush logs); then the standard streams are flushed and the process ends with
    ``os._exit``, skipping only the module teardown.  Every output file is closed (and renamed into
    place) by then.  ``MOTIFGRID_SLOW_EXIT=1`` keeps the normal exit (debugging, leak checkers).
    The garbage collector's thresholds are raised first (:func:`workers.backend.set_gc_threshold`), and numba's
    BLAS probe is kept from importing scipy.linalg (:func:`workers.backend.skip_numba_blas_probe`).
    """
    from workers.backend import set_gc_threshold, skip_numba_blas_probe  # noqa: PLC0415

    skip_numba_blas_probe()
    _terminate_as_interrupt()
    try:
        set_gc_threshold()           # before the commands' imports (motifgrid.cluster.gc-threshold)
    except ValueError as e:
        print(f"motifgrid: error: {e}", file=sys.stderr)
        os._exit(EXIT_USAGE)
    rc = main()
    if os.environ.get("MOTIFGRID_SLOW_EXIT"):
        sys.exit(rc)
    import atexit  # noqa: PLC0415

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):      # a closed pipe: nothing more can be said
            pass
    os._exit(rc if isinstance(rc, int) else 1)


if __name__ == "__main__":
    entry()
