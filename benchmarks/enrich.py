"""Motif-enrichment benchmark (issue 19): ``motifgrid enrich`` beside the plain baseline a user writes without it.

Baseline = memelite's FIMO over the targets and over their dinucleotide shuffles, the sequences with at least
one hit (either strand, p < ``--pvalue``) counted per motif, and ``scipy.stats.fisher_exact`` (one-sided,
"greater") per motif, then Benjamini-Hochberg.

``motifgrid enrich`` runs on the same targets (``OUT/targets.fa``), the same motifs and the same shuffles (same
seed and algorithm: its ``control.fa`` is the baseline's, checked), as a user runs it: ``python -m pipeline.cli.command
enrich ...`` in a new process, timed from the outside (wall clock: interpreter start, imports, cluster, every
step), ``--motifgrid-runs`` times (default 2).  With ``--cold`` the first run gets an empty threshold cache (a
fresh ``motifgrid.thresholds.cache-dir``, shared by the later runs): run 1 computes the thresholds of every
matrix, the others read them.  Each run's own breakdown (``_summary.json``: seconds per step) goes into the
timings.  ``--enrich-args`` passes more options (``"--device gpu"``, ``"--no-cluster"``).

Target sets (``--set``):
- ``ctcf``: GM12878 CTCF ChIP-seq, top 500 summits ± 100 (``../shared/data/benchmarks/chipseq_peaks``);
- ``peaks``: ``--peaks`` records (10,000 by default) of 150-600 bases (uniform, seeded) cut at random from
  ``--genome`` (a bgzipped FASTA with its .fai/.gzi; human chrX 1-70 Mb here), none holding an N.

Controls: ``--shuffles`` dinucleotide shuffles of each target (``workers.enrich.shuffle``, uniform, as MEME's
``fasta-shuffle-letters -kmer 2``), named ``<id>|shuf<k>``.  Motifs: JASPAR 2024 CORE non-redundant, all taxa
(2,346), letter probabilities with FIMO's pseudocount 0.1 on a uniform background, given to memelite as is
(``eps=0``); ``--limit-motifs`` takes the first N (quick runs; motifgrid then gets the same N as a file).

Timed steps of the baseline (wall clock, one process; memelite parallelises its scan over motifs with numba
threads): ``read`` (targets, motifs), ``shuffle``, ``scan_targets``, ``scan_controls`` (each includes memelite's
FASTA read and its DataFrames), ``fisher`` (+ BH).  The first memelite call of a process also compiles numba
code: ``--warmup`` scans a few records first so the timed scans exclude it.  ``--skip-baseline`` runs only
motifgrid (100,000 peaks on a GPU machine).

    python benchmarks/enrich.py --set ctcf --out /tmp/enrich-ctcf --warmup
    python benchmarks/enrich.py --set peaks --peaks 10000 --out /tmp/enrich-10k --warmup --cold
    python benchmarks/enrich.py --set peaks --peaks 100000 --skip-baseline --cold --out /tmp/enrich-100k

Writes OUT/baseline.tsv (per motif: counts, odds ratio, p, q; best first), OUT/motifgrid/ (the last run's
folder), OUT/timings.json, and prints the top rows.  The baseline's counts through ``pipeline.enrich.stats``
are compared with scipy's p-values (``max_log10_difference``), and motifgrid's counts with the baseline's
(``agreement``: motifs with equal counts, the largest difference, the top rows of both).  memelite computes
p-values from a binned score distribution, motifgrid exactly: a window near a threshold may fall on either
side.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.enrich.controls import shuffled_controls, write_fasta  # noqa: E402
from pipeline.io.genome import encode  # noqa: E402
from pipeline.motifs import motif_probabilities, read_motifs  # noqa: E402


def shared_data() -> Path:
    env = os.environ.get("MOTIFGRID_SHARED_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def ctcf_targets():
    """The CTCF top-500 summits (names, codes, offsets)."""
    from pipeline.discover.inputs import read_sequences  # noqa: PLC0415

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
    res = {"set": a.set, "targets": len(names), "motifs": len(motifs), "pvalue": a.pvalue, "shuffles": a.shuffles,
           "seed": a.seed, "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                       "python": platform.python_version(), "load_average": os.getloadavg()}}
    if not a.skip_baseline:
        res["baseline"] = baseline(a, out, names, codes, offsets, motifs, ppms, t)
    if a.motifgrid_runs:
        res["motifgrid"] = run_motifgrid(a, out, motifs)
        if not a.skip_baseline:
            res["agreement"] = agreement(out)
    (out / "timings.json").write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return res


def baseline(a, out: Path, names, codes, offsets, motifs, ppms, t: dict) -> dict:
    """The memelite + scipy baseline: its table (OUT/baseline.tsv) and seconds."""
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


def run_motifgrid(a, out: Path, motifs) -> dict:
    """``motifgrid enrich`` on OUT/targets.fa, ``--motifgrid-runs`` times in new processes (wall clock each)."""
    src = Path(a.motifs) if a.motifs else shared_data() / "motifs" / "JASPAR2024_CORE_non-redundant.jaspar"
    if a.limit_motifs:                      # the same first N matrices as the baseline, as a JASPAR file
        from pipeline.motifs import format_jaspar  # noqa: PLC0415

        src = out / "motifs.jaspar"
        src.write_text(format_jaspar(motifs))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    if a.cold:
        env["DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR"] = tempfile.mkdtemp(prefix="motifgrid-bench-cache-")
    cmd = [sys.executable, "-m", "pipeline.cli", "enrich", str(out / "targets.fa"), "--motifs", str(src),
           "--out", str(out / "motifgrid"), "--overwrite", "--no-progress", "--pvalue", repr(a.pvalue),
           "--shuffles", str(a.shuffles), "--seed", str(a.seed), *shlex.split(a.enrich_args or "")]
    runs = []
    for i in range(a.motifgrid_runs):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if p.returncode:
            raise SystemExit(f"motifgrid enrich failed ({p.returncode}): {p.stderr.strip()[-2000:]}")
        s = json.loads((out / "motifgrid" / "_summary.json").read_text())
        runs.append({"run": i + 1, "threshold_cache": ("cold" if i == 0 else "warm") if a.cold else "as found",
                     "wall_seconds": wall, "seconds_in_command": s["seconds"], "steps": s["seconds_steps"],
                     "device": s["device"], "workers": s["workers"], "hits": s["hits"], "clusters": s["clusters"]})
        print(p.stderr.strip().splitlines()[-1], f"(wall {wall:.1f} s, run {i + 1})", file=sys.stderr)
    same = (out / "control.fa").exists() and \
        (out / "control.fa").read_bytes() == (out / "motifgrid" / "control.fa").read_bytes()
    return {"command": " ".join(shlex.quote(c) for c in cmd[2:]), "runs": runs, "same_controls_as_baseline": same}


def agreement(out: Path) -> dict:
    """motifgrid's counts against the baseline's, motif by motif, and the top rows of both.  Matrices that cannot
    reach the p-value (exact p-values: their best word is less rare than it) have no site in motifgrid; memelite's
    binned p-values give them sites, and they are counted apart."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    mg = {r["motif_id"]: r for r in pq.read_table(out / "motifgrid" / "enrichment.parquet").to_pylist()}
    unreachable = set(json.loads((out / "motifgrid" / "_summary.json").read_text())["unreachable_motifs"])
    rows = [ln.split("\t") for ln in (out / "baseline.tsv").read_text().splitlines()[1:]]
    diff = np.array([max(abs(int(r[3]) - mg[r[1]]["pos_seqs"]), abs(int(r[5]) - mg[r[1]]["neg_seqs"])) for r in rows])
    reach = np.array([r[1] not in unreachable for r in rows])
    mg_top = sorted(mg.values(), key=lambda r: r["rank"])[:10]
    return {"motifs": len(rows), "unreachable_in_motifgrid": int((~reach).sum()),
            "reachable_equal_counts": int((diff[reach] == 0).sum()),
            "reachable_median_count_difference": float(np.median(diff[reach])) if reach.any() else 0.0,
            "reachable_max_count_difference": int(diff[reach].max(initial=0)),
            "baseline_top10": [r[1] for r in rows[:10]], "motifgrid_top10": [r["motif_id"] for r in mg_top],
            "top10_shared": len({r[1] for r in rows[:10]} & {r["motif_id"] for r in mg_top})}


def report(a, out: Path, motifs, names, cnames, pos, neg, p, q, t) -> dict:
    from pipeline.enrich.stats import fisher_log10_pvalue, odds_ratio  # noqa: PLC0415

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
    print("\n".join(lines[:11]))
    return {"controls": len(cnames), "seconds": t, "total_seconds": sum(t.values()), "max_log10_difference": diff}


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
    ap.add_argument("--skip-baseline", action="store_true", help="only motifgrid enrich")
    ap.add_argument("--motifgrid-runs", type=int, default=2, help="motifgrid enrich runs (0: only the baseline)")
    ap.add_argument("--cold", action="store_true", help="the first motifgrid run starts with an empty threshold cache")
    ap.add_argument("--enrich-args", default="", help="more motifgrid enrich options, e.g. '--device gpu'")
    ap.add_argument("--out", default="enrich-benchmark")
    return run(ap.parse_args(argv))


if __name__ == "__main__":
    main()
