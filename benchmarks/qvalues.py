"""Cost of the q-values: scan with and without them (interleaved rounds), and the FIMO export's p-value sort.

    python benchmarks/qvalues.py [--fasta F] [--motifs F] [--pvalue P] [--workers N] [--repeat N] [--length BP]

Default workload: the issue-2 benchmark (10 Mb of human chrX × 879 JASPAR 2024 CORE vertebrates, p = 1e-4).
The store is ingested once and the threshold cache warmed by a first scan (not counted); then each round runs
``motifgrid scan`` with the q-values and with ``--no-qvalue`` into fresh folders (order alternating between rounds
so that drift of a shared machine hits both alike) and exports the dataset as BED (genome order) and FIMO TSV
(sorted by p-value, with q-values).  Prints one JSON line per round and medians as markdown rows for
docs/benchmarks.md.  The reduction's own time is ``_summary.json`` → ``qvalues.seconds``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"


def _run(args: list, env: dict) -> float:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], env=env, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr)
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fasta", default=str(SHARED / "genomes" / "hs37_chrX_20-30Mb.fa.gz"))
    ap.add_argument("--motifs", default=str(SHARED / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar"))
    ap.add_argument("--pvalue", type=float, default=1e-4)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--length", type=int, default=0, help="only the first BP of the first record")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="motifgrid-qvalues-"))
    env = dict(os.environ, PYTHONPATH=str(ROOT), DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR=str(work / "cache"))
    try:
        src = Path(a.fasta)
        if a.length:
            import pyfaidx

            fa = pyfaidx.Fasta(str(src), as_raw=True)
            name = next(iter(fa.keys()))
            src = work / "input.fa"
            seq = fa[name][0:min(a.length, len(fa[name]))]
            src.write_text(f">{name}\n" + "\n".join(seq[i:i + 80] for i in range(0, len(seq), 80)) + "\n")
        _run(["ingest", str(src), str(work / "g.zarr")], env)
        scan = ["scan", str(work / "g.zarr"), a.motifs, "--pvalue", str(a.pvalue), "--workers", str(a.workers),
                "--device", "cpu", "--no-progress"]
        _run(scan + ["--out", str(work / "warm")], env)                  # thresholds cached, kernels compiled
        times: dict = {"scan, q-values": [], "scan, --no-qvalue": [], "q-value reduction (in the scan)": [],
                       "export bed": [], "export fimo (sorted, q-values)": []}
        for r in range(a.repeat):
            runs = [("q", []), ("noq", ["--no-qvalue"])]
            for tag, extra in (runs if r % 2 == 0 else runs[::-1]):
                out = work / f"{tag}{r}"
                t = _run(scan + ["--out", str(out), *extra], env)
                times["scan, q-values" if tag == "q" else "scan, --no-qvalue"].append(t)
                if tag == "q":
                    s = json.loads((out / "_summary.json").read_text())
                    times["q-value reduction (in the scan)"].append(s["qvalues"]["seconds"])
                    hits, qsum = s["hits"], s["qvalues"]
            q = work / f"q{r}"
            times["export bed"].append(_run(["export", str(q), "--format", "bed", "-o", str(work / "h.bed")], env))
            times["export fimo (sorted, q-values)"].append(
                _run(["export", str(q), "--format", "fimo", "-o", str(work / "h.tsv")], env))
            for d in (work / f"q{r}", work / f"noq{r}"):
                shutil.rmtree(d)
            print(json.dumps({"round": r, **{k: v[-1] for k, v in times.items()}}), flush=True)
        print(f"\n{Path(a.fasta).name}{f' first {a.length:,} bp' if a.length else ''} × {Path(a.motifs).name}, "
              f"p={a.pvalue}, {hits:,} hits, {qsum['hits_at_level']:,} at q <= {qsum['level']}, "
              f"{qsum['steps']:,} q-value steps; {a.repeat} rounds, median (min-max):")
        for k, v in times.items():
            print(f"| {k} | {statistics.median(v):.2f} s ({min(v):.2f}-{max(v):.2f}) |")
    finally:
        if a.keep:
            print("work folder:", work)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
