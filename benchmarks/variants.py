"""Variant effects: ``motifgrid variants`` against the do-it-yourself pipeline a user writes today, in one run.

    python benchmarks/variants.py [--genome FASTA] [--motifs F] [--variants N] [--pvalue P] [--workers N]
                                  [--peers moods] [--out DIR] [--keep]

Default workload (issue 48): N SNVs and indels (80 % SNVs, 10 % insertions and 10 % deletions of 1-5 bp) placed at
random on human GRCh37 chrX 1-70 Mb (``get-genomes.sh``) with the genome's REF, × 879 JASPAR 2024 vertebrates, both
strands, p = 1e-4.  motifgrid runs end to end from the VCF (CLI, a fresh process, the genome store ingested
beforehand, the thresholds' cache warm from a first run whose time is printed too).  The peer (MOODS) gets what
such a pipeline gives it: each allele's ref and alt sequences with 30 bp of genome on each side (written to a FASTA,
timed), scanned with the same thresholds as motifgrid (``_thresholds`` of a motifgrid scan at the same p), one
``scan`` call per sequence.  Prints one JSON line per tool and a markdown row for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
SHARED = ROOT.parent / "shared" / "data"


def place_variants(seq: str, name: str, n: int, seed: int = 1) -> list:
    """(chrom, pos, ref, alt) sorted, on bases that are not N."""
    rng = np.random.default_rng(seed)
    arr = np.frombuffer(seq.encode(), np.uint8)
    ok = np.flatnonzero(np.isin(arr, np.frombuffer(b"ACGT", np.uint8)))
    pos = np.unique(rng.choice(ok[(ok > 100) & (ok < len(seq) - 100)], n, replace=False)) + 1
    out = []
    for i, p in enumerate(pos.tolist()):
        r = seq[p - 1]
        u = rng.random()
        if u < 0.8:
            out.append((name, p, r, "ACGT"[("ACGT".index(r) + 1 + i % 3) % 4]))
        elif u < 0.9:
            out.append((name, p, r, r + "".join(rng.choice(list("ACGT"), 1 + i % 5))))
        else:
            d = seq[p - 1:p + 1 + i % 5]
            if "N" in d:
                out.append((name, p, r, "ACGT"[("ACGT".index(r) + 1) % 4]))
            else:
                out.append((name, p, d, r))
    return out


def write_vcf(path: Path, variants: list) -> None:
    with open(path, "w") as f:
        f.write("##fileformat=VCFv4.2\n#CHROM\tPOS\tID\tREF\tALT\tQUAL\tFILTER\tINFO\n")
        f.writelines(f"{c}\t{p}\tv{i}\t{r}\t{a}\t.\t.\t.\n" for i, (c, p, r, a) in enumerate(variants))


def run_motifgrid(vcf: Path, store: Path, motifs: str, pvalue: float, workers, device: str, work: Path,
                  env: dict, extra: list = ()) -> dict:
    try:
        from cpu_scan import PeakRSS
    except ImportError:                 # (no psutil: the GPU machine)
        PeakRSS = None
    import contextlib

    res = {}
    for label in ("cold", "warm"):
        out = work / f"out-{label}"
        cmd = [sys.executable, "-m", "pipeline.cli", "variants", str(vcf), "--genome", str(store), "--motifs", motifs,
               "--out", str(out), "--pvalue", str(pvalue), "--device", device, "--no-progress"]
        cmd += (["--workers", str(workers)] if workers else []) + list(extra)
        with PeakRSS() if PeakRSS else contextlib.nullcontext() as rss:
            t0 = time.perf_counter()
            r = subprocess.run(cmd, env=env, capture_output=True, text=True)
            secs = time.perf_counter() - t0
        if r.returncode:
            raise SystemExit(r.stderr)
        s = json.loads((out / "_summary.json").read_text())
        res[label] = {"seconds": secs, "peak_rss_mb": rss.peak / 2**20 if rss else float("nan"), "rows": s["rows"], "calls": s["calls"],
                      "tests": s["tests"], "steps": s["seconds_steps"], "exact_pvalues": s["exact_pvalues"],
                      "outputs": s.get("seconds_outputs")}
        if "--atsnp" in extra:
            res[label]["atsnp"] = atsnp_precision(out)
    return res


def atsnp_precision(out: Path) -> dict:
    """The relative standard errors of the atSNP p-values reached (median, 99th percentile, max) by p-value decade."""
    from pipeline.variants import read_variants

    t = read_variants(str(out), columns=["atsnp_ref_pvalue", "atsnp_ref_rse", "atsnp_change_pvalue",
                                         "atsnp_change_rse"])
    cols = {c: t.column(c).to_numpy(zero_copy_only=False).astype(float) for c in t.column_names}
    snv = ~np.isnan(cols["atsnp_ref_pvalue"])
    res = {"snv_rows": int(snv.sum())}
    for col in ("ref", "change"):
        p, r = cols[f"atsnp_{col}_pvalue"][snv], cols[f"atsnp_{col}_rse"][snv]
        for lo in (1e-2, 1e-4, 1e-6, 1e-8):
            sel = (p < lo * 100) & (p >= lo) & np.isfinite(r)
            if sel.any():
                res[f"{col}_{lo:g}"] = {"n": int(sel.sum()), "rse_median": float(np.median(r[sel])),
                                        "rse_p99": float(np.quantile(r[sel], 0.99))}
        res[f"{col}_above_samples"] = int((~np.isfinite(r)).sum())
    return res


def run_moods(variants: list, seq: str, motifs: str, pvalue: float, work: Path) -> dict:
    """The DIY pipeline: ref/alt ±30 bp into a FASTA, then MOODS with motifgrid's thresholds."""
    import MOODS.scan
    import MOODS.tools

    from pipeline.motifs import read_background
    from pipeline.scan.motif_set import MotifSet, row_thresholds

    t0 = time.perf_counter()
    fa = work / "alleles.fa"
    with open(fa, "w") as f:
        for i, (_, p, r, a) in enumerate(variants):
            left, right = seq[p - 31:p - 1], seq[p - 1 + len(r):p - 1 + len(r) + 30]
            f.write(f">v{i}_ref\n{left}{r}{right}\n>v{i}_alt\n{left}{a}{right}\n")
    t_fasta = time.perf_counter() - t0
    mset = MotifSet.load(motifs, read_background("uniform"), 0.1)
    pwms, _, _ = mset.rows()
    thr = [t.threshold for t in row_thresholds(mset, pvalue, table=False)]
    mats = [tuple(tuple(float(x) for x in row) for row in w.T) for w in pwms]
    keep = [i for i, t in enumerate(thr) if np.isfinite(t)]
    t1 = time.perf_counter()
    scanner = MOODS.scan.Scanner(7)
    scanner.set_motifs([mats[i] for i in keep], [0.25] * 4, [thr[i] - 1e-9 for i in keep])
    hits = 0
    with open(fa) as f:
        for line in f:
            if not line.startswith(">"):
                hits += sum(len(x) for x in scanner.scan(line.strip()))
    t_scan = time.perf_counter() - t1
    return {"seconds": t_fasta + t_scan, "seconds_fasta": t_fasta, "seconds_scan": t_scan, "hits": hits,
            "sequences": 2 * len(variants)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--genome", default=str(ROOT.parent / "genomes" / "hs37_chrX_1-70Mb.fa.gz"))
    ap.add_argument("--motifs", default=str(SHARED / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar"))
    ap.add_argument("--variants", type=int, default=1_000_000)
    ap.add_argument("--pvalue", type=float, default=1e-4)
    ap.add_argument("--workers", type=int, help="local cluster workers (default: one per core, or every GPU)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "gpu"])
    ap.add_argument("--peers", default="moods")
    ap.add_argument("--out", help="work folder (default: a temporary one)")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--atsnp", action="store_true", help="motifgrid with --atsnp (its precision is printed)")
    a = ap.parse_args()
    import gzip
    import shutil

    work = Path(a.out or tempfile.mkdtemp(prefix="motifgrid-variants-"))
    work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT)] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]),
               DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR=str(work / "cache"))
    with gzip.open(a.genome, "rt") if a.genome.endswith(".gz") else open(a.genome) as f:
        name = f.readline()[1:].split()[0]
        seq = "".join(line.strip() for line in f).upper()
    variants = place_variants(seq, name, a.variants)
    vcf = work / "variants.vcf"
    write_vcf(vcf, variants)
    store = work / "genome.zarr"
    if not store.exists():
        subprocess.run([sys.executable, "-m", "pipeline.cli", "ingest", a.genome, str(store)], check=True, env=env,
                       capture_output=True)
    res = {"motifgrid": run_motifgrid(vcf, store, a.motifs, a.pvalue, a.workers, a.device, work, env,
                                      ["--atsnp"] if a.atsnp else [])}
    print(json.dumps({"tool": "motifgrid", **res["motifgrid"]}))
    if "moods" in a.peers.split(","):
        res["moods"] = run_moods(variants, seq, a.motifs, a.pvalue, work)
        print(json.dumps({"tool": "moods", **res["moods"]}))
    m = res["motifgrid"]["warm"]
    peer = res.get("moods")
    print(f"\n| motifgrid variants{' --atsnp' if a.atsnp else ''} | {len(variants):,} variants on {Path(a.genome).name} × {Path(a.motifs).name}, "
          f"p={a.pvalue:g}, {a.device} ({a.workers or 'all'} workers) | {m['seconds']:.1f} s warm ({res['motifgrid']['cold']['seconds']:.1f} "
          f"s cold), {m['peak_rss_mb']:.0f} MB, {m['rows']:,} rows | "
          + (f"MOODS DIY {peer['seconds']:.1f} s (FASTA {peer['seconds_fasta']:.1f} s, scan {peer['seconds_scan']:.1f}"
             f" s) → {peer['seconds'] / m['seconds']:.2f}×" if peer else "-") + " |")
    if not a.keep and not a.out:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
