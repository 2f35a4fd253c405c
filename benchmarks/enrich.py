"""Motif-enrichment benchmark (issue 19): the plain baseline a user writes without ``motifgrid enrich``.

Baseline = memelite's FIMO over the targets and over their dinucleotide shuffles, the sequences with at least
one hit (either strand, p < ``--pvalue``) counted per motif, and ``scipy.stats.fisher_exact`` (one-sided,
"greater") per motif, then Benjamini-Hochberg.  Phase B of the issue adds ``motifgrid enrich`` on the same
inputs beside it.

Target sets (``--set``):
- ``ctcf``: GM12878 CTCF ChIP-seq, top 500 summits ± 100 (``../shared/data/benchmarks/chipseq_peaks``);
- ``peaks``: ``--peaks`` records (10,000 by default) of 150-600 bases (uniform, seeded) cut at random from
  ``--genome`` (a bgzipped FASTA with its .fai/.gzi; human chrX 1-70 Mb here), none holding an N.

Controls: ``--shuffles`` dinucleotide shuffles of each target (``workers.enrich.shuffle``, uniform, as MEME's
``fasta-shuffle-letters -kmer 2``), named ``<id>|shuf<k>``.  Motifs: JASPAR 2024 CORE non-redundant, all taxa
(2,346), letter probabilities with FIMO's pseudocount 0.1 on a uniform background, given to memelite as is
(``eps=0``); ``--limit-motifs`` takes the first N (quick runs).

Timed steps (wall clock, one process; memelite parallelises its scan over motifs with numba threads):
``read`` (targets, motifs), ``shuffle``, ``scan_targets``, ``scan_controls`` (each includes memelite's FASTA
read and its DataFrames), ``count``, ``fisher`` (+ BH).  The first memelite call of a process also compiles
numba code: ``--warmup`` scans a few records first so the timed scans exclude it.

    python benchmarks/enrich.py --set ctcf --out /tmp/enrich-ctcf
    python benchmarks/enrich.py --set peaks --peaks 10000 --out /tmp/enrich-10k

Writes OUT/baseline.tsv (per motif: counts, odds ratio, p, q; best first), OUT/timings.json, and prints the
top rows.  The same counts through ``pipeline.enrich_stats`` are compared with scipy's p-values (where
scipy's do not underflow) as a cross-check: ``max_log10_difference`` in timings.json.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.enrich_controls import shuffled_controls, write_fasta  # noqa: E402
from pipeline.genome import encode  # noqa: E402
from pipeline.motifs import motif_probabilities, read_motifs  # noqa: E402


def shared_data() -> Path:
    env = os.environ.get("MOTIFGRID_SHARED_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def ctcf_targets():
    """The CTCF top-500 summits (names, codes, offsets)."""
    from pipeline.discover import read_sequences  # noqa: PLC0415

    s = read_sequences(shared_data() / "benchmarks" / "chipseq_peaks" / "Gm12878.CTCF.top500.w200.fa")
    offsets = np.concatenate([[0], np.cumsum(s.lengths)]).astype(np.int64)
    codes = np.concatenate([s.codes[i, :s.lengths[i]] for i in range(s.T)])
    return list(s.names), codes, offsets


def genome_peaks(genome: Path, n: int, seed: int, lo: int = 150, hi: int = 600):
    """``n`` peak-like records cut from ``genome`` (lengths uniform in [lo, hi], no N), named chrom:start-end."""
    import pyfaidx  # noqa: PLC0415

    fa = pyfaidx.Fasta(str(genome), as_raw=True, sequence_always_upper=True)
    chroms = [(k, len(fa[k])) for k in fa.keys()]
    sizes = np.array([c[1] for c in chroms], dtype=np.float64)
    rng = np.random.default_rng(seed)
    names, seqs = [], []
    while len(seqs) < n:
        c = int(rng.choice(len(chroms), p=sizes / sizes.sum()))
        L = int(rng.integers(lo, hi + 1))
        s = int(rng.integers(0, chroms[c][1] - L))
        codes = encode(fa[chroms[c][0]][s:s + L])
        if (codes == 4).any():
            continue
        names.append(f"{chroms[c][0]}:{s}-{s + L}")
        seqs.append(codes)
    offsets = np.concatenate([[0], np.cumsum([x.size for x in seqs])]).astype(np.int64)
    return names, np.concatenate(seqs), offsets


def load_motifs(path: Path | None, limit: int | None):
    f = path or shared_data() / "motifs" / "JASPAR2024_CORE_non-redundant.jaspar"
    motifs = read_motifs(f)[:limit] if limit else read_motifs(f)
    bg = np.full(4, 0.25)
    return motifs, {m.id: motif_probabilities(m, bg, 0.1).T.copy() for m in motifs}


def sequences_with_hits(fasta: Path, ppms: dict, pvalue: float) -> np.ndarray:
    """memelite FIMO over ``fasta``; per motif (dict order) the number of records with at least one hit."""
    from memelite import fimo  # noqa: PLC0415

    hits = fimo(ppms, str(fasta), threshold=pvalue, eps=0.0, reverse_complement=True)
    return np.array([df["sequence_name"].nunique() for df in hits], dtype=np.int64)


def fisher_scipy(pos, n_pos, neg, n_neg):
    from scipy.stats import false_discovery_control, fisher_exact  # noqa: PLC0415

    p = np.array([fisher_exact([[a, n_pos - a], [c, n_neg - c]], alternative="greater").pvalue
                  for a, c in zip(pos.tolist(), neg.tolist())])
    return p, false_discovery_control(p)


def run(a) -> dict:
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t = {}
    t0 = time.perf_counter()
    import scipy.stats  # noqa: F401, PLC0415  (its import is not the test's time)

    names, codes, offsets = ctcf_targets() if a.set == "ctcf" else genome_peaks(Path(a.genome), a.peaks, a.seed)
    motifs, ppms = load_motifs(Path(a.motifs) if a.motifs else None, a.limit_motifs)
    t["read"] = time.perf_counter() - t0
    write_fasta(out / "targets.fa", names, codes, offsets)
    t0 = time.perf_counter()
    cnames, ccodes, coffsets = shuffled_controls(names, codes, offsets, a.shuffles, a.seed)
    t["shuffle"] = time.perf_counter() - t0
    write_fasta(out / "control.fa", cnames, ccodes, coffsets)
    if a.warmup:
        write_fasta(out / "warmup.fa", names[:5], codes[:offsets[5]], offsets[:6])
        sequences_with_hits(out / "warmup.fa", dict(list(ppms.items())[:5]), a.pvalue)
    t0 = time.perf_counter()
    pos = sequences_with_hits(out / "targets.fa", ppms, a.pvalue)
    t["scan_targets"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    neg = sequences_with_hits(out / "control.fa", ppms, a.pvalue)
    t["scan_controls"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    p, q = fisher_scipy(pos, len(names), neg, len(cnames))
    t["fisher"] = time.perf_counter() - t0
    return report(a, out, motifs, names, cnames, pos, neg, p, q, t)


def report(a, out: Path, motifs, names, cnames, pos, neg, p, q, t) -> dict:
    from pipeline.enrich_stats import fisher_log10_pvalue, odds_ratio  # noqa: PLC0415

    lp = fisher_log10_pvalue(pos, len(names), neg, len(cnames))
    ok = p > 1e-290
    diff = float(np.abs(lp[ok] - np.log10(p[ok])).max()) if ok.any() else 0.0
    orr = odds_ratio(pos, len(names), neg, len(cnames))
    order = np.lexsort((-orr, lp))
    lines = ["rank\tmotif_id\tmotif_name\tpos_seqs\tpos_total\tneg_seqs\tneg_total\todds_ratio\tpvalue_scipy\t"
             "log10_pvalue\tqvalue_scipy"]
    for r, i in enumerate(order, 1):
        m = motifs[i]
        lines.append(f"{r}\t{m.id}\t{m.name}\t{pos[i]}\t{len(names)}\t{neg[i]}\t{len(cnames)}\t{orr[i]:.4g}\t"
                     f"{p[i]:.3g}\t{lp[i]:.4f}\t{q[i]:.3g}")
    (out / "baseline.tsv").write_text("\n".join(lines) + "\n")
    res = {"set": a.set, "targets": len(names), "controls": len(cnames), "motifs": len(motifs),
           "pvalue": a.pvalue, "shuffles": a.shuffles, "seed": a.seed, "seconds": t,
           "total_seconds": sum(t.values()), "max_log10_difference": diff,
           "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()}}
    (out / "timings.json").write_text(json.dumps(res, indent=2) + "\n")
    print("\n".join(lines[:11]))
    print(json.dumps(res, indent=2))
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--set", choices=("ctcf", "peaks"), default="ctcf")
    ap.add_argument("--genome", default="/work/genomes/hs37_chrX_1-70Mb.fa.gz")
    ap.add_argument("--peaks", type=int, default=10_000)
    ap.add_argument("--motifs", default=None, help="motif file (default: JASPAR 2024 CORE non-redundant, 2,346)")
    ap.add_argument("--limit-motifs", type=int, default=None)
    ap.add_argument("--pvalue", type=float, default=1e-4)
    ap.add_argument("--shuffles", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--warmup", action="store_true", help="compile memelite's kernels before the timed scans")
    ap.add_argument("--out", default="enrich-benchmark")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    main()
