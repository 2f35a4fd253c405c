"""CPU scan benchmark: motifgrid vs MOODS vs memelite (FIMO) in one run, same probability matrices.

    python benchmarks/cpu_scan.py [--fasta F] [--motifs F] [--pvalue P] [--workers N] [--peers moods,memelite]
                                  [--length BP] [--out DIR]

Default workload (issue 2): 10 Mb of human chrX (../shared/data/genomes/hs37_chrX_20-30Mb.fa.gz) × 879 JASPAR
2024 CORE vertebrates, both strands, p = 1e-4, end to end to files.  The peers run twice: in this process on
sequences already in memory, without output (their scan alone; also the hit sets for the Jaccard index), and end
to end to Parquet in a fresh process (benchmarks/peers.py), as motifgrid is timed.  Every tool gets the same PPMs
(FIMO-style pseudocount 0.1 applied beforehand, uniform background).  Prints one JSON line per tool and a
markdown row for docs/benchmarks.md.  Peak RSS is the peak of the summed RSS of the process tree (client,
scheduler, workers), sampled every 50 ms.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared" / "data"


class PeakRSS:
    """Peak of the summed RSS of this process and all its descendants."""

    def __init__(self, interval=0.05):
        import psutil

        self.proc = psutil.Process()
        self.peak = 0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def _run(self, interval):
        import psutil

        while not self._stop.is_set():
            total = 0
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
                for p in procs:
                    try:
                        total += p.memory_info().rss
                    except psutil.Error:
                        pass
            except psutil.Error:
                pass
            self.peak = max(self.peak, total)
            time.sleep(interval)

    def __enter__(self):
        self.peak = 0
        self._t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._t.join()


def read_sequence(fasta: Path, length: int | None):
    import pyfaidx

    fa = pyfaidx.Fasta(str(fasta), as_raw=True)
    name = next(iter(fa.keys()))
    n = len(fa[name]) if not length else min(length, len(fa[name]))
    return name, fa[name][0:n].upper()


def motif_ppms(source: str, pseudocount: float):
    from pipeline.motifs import motif_probabilities, read_motifs

    motifs = read_motifs(source)
    bg = np.full(4, 0.25)
    return motifs, [motif_probabilities(m, bg, pseudocount) for m in motifs]


def run_motifgrid(fasta: Path, motifs: str, pvalue: float, workers: int, work: Path, length: int | None):
    """End to end through the CLI: ingest, then scan to Parquet (timed separately).  The threshold cache is
    a fresh folder: the first scan is cold; a second scan into another folder measures the warm cache."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR=str(work / "cache"))
    src = fasta
    if length:
        name, seq = read_sequence(fasta, length)
        src = work / "input.fa"
        with open(src, "w") as f:
            f.write(f">{name}\n")
            for i in range(0, len(seq), 80):
                f.write(seq[i:i + 80] + "\n")
    store, hits, hits_warm = work / "g.zarr", work / "hits", work / "hits-warm"
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline.cli", "ingest", str(src), str(store)], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    t_ingest = time.perf_counter() - t0
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "pipeline.cli", "scan", str(store), motifs, "--pvalue", str(pvalue),
                            "--out", str(hits), "--workers", str(workers), "--device", "cpu", "--no-progress"],
                           env=env, capture_output=True, text=True)
        t_scan = time.perf_counter() - t0
    if r.returncode:
        raise SystemExit(r.stderr)
    summary = json.loads((hits / "_summary.json").read_text())
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "pipeline.cli", "scan", str(store), motifs, "--pvalue", str(pvalue),
                    "--out", str(hits_warm), "--workers", str(workers), "--device", "cpu", "--no-progress"],
                   env=env, capture_output=True, text=True, check=True)
    t_warm = time.perf_counter() - t0
    return {"tool": "motifgrid", "seconds": t_scan, "seconds_warm_threshold_cache": t_warm, "ingest_seconds": t_ingest,
            "peak_rss_mb": rss.peak / 2**20, "hits": summary["hits"], "hits_dir": str(hits),
            "scores": summary["scores"], "column_scores": summary["column_scores"],
            "seconds_thresholds": summary["seconds_thresholds"], "seconds_tasks_wall": summary["seconds_tasks_wall"]}


def motifgrid_hit_set(hits_dir: str):
    from pipeline.scan.read import read_hits

    t = read_hits(hits_dir, columns=["start", "strand", "motif_id"])
    return set(zip(t.column("motif_id").to_pylist(), t.column("start").to_pylist(), t.column("strand").to_pylist()))


def run_moods(seq: str, motifs, ppms, pvalue: float, thresholds=None):
    import MOODS.scan
    import MOODS.tools

    bg = [0.25] * 4
    mats, ids, strands = [], [], []
    for m, p in zip(motifs, ppms):
        lo = tuple(tuple(float(x) for x in row) for row in np.log2(p / 0.25).T)   # 4 × m, log2 odds
        mats += [lo, MOODS.tools.reverse_complement(lo)]
        ids += [m.id, m.id]
        strands += ["+", "-"]
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        if thresholds is None:
            thr = [MOODS.tools.threshold_from_p(mat, bg, pvalue) for mat in mats]
        else:
            thr = list(thresholds)
        t_thr = time.perf_counter() - t0
        scanner = MOODS.scan.Scanner(7)
        scanner.set_motifs(mats, bg, thr)
        results = scanner.scan(seq)
        t = time.perf_counter() - t0
    hits = set()
    for i, res in enumerate(results):
        for r in res:
            hits.add((ids[i], r.pos, strands[i]))
    return {"tool": "MOODS" + ("" if thresholds is None else " (motifgrid thresholds)"), "seconds": t,
            "threshold_seconds": t_thr, "peak_rss_mb": rss.peak / 2**20, "hits": len(hits)}, hits


def run_memelite(seq: str, motifs, ppms, pvalue: float, name: str):
    from memelite import fimo

    from pipeline.io.genome import encode

    codes = encode(seq)
    onehot = np.zeros((1, 4, codes.size), dtype=np.float32)
    ok = codes < 4
    onehot[0, codes[ok], np.flatnonzero(ok)] = 1
    mdict = {m.id: p.T.copy() for m, p in zip(motifs, ppms)}
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        res = fimo(mdict, onehot, threshold=pvalue, eps=0.0, reverse_complement=True)
        t = time.perf_counter() - t0
    n = sum(len(df) for df in res)
    return {"tool": "memelite (FIMO)", "seconds": t, "peak_rss_mb": rss.peak / 2**20, "hits": n}


def run_peer_end_to_end(tool: str, fasta: Path, motifs: str, pvalue: float, work: Path, length: int | None):
    """The peer as a user runs it: a fresh process that imports it, reads the inputs, scans and writes the hits
    as Parquet (benchmarks/peers.py); timed like motifgrid's CLI."""
    out = work / f"{tool}.parquet"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "peers.py"), tool, str(fasta), motifs, str(pvalue), str(out)]
    if length:
        cmd += ["--length", str(length)]
    with PeakRSS() as rss:
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True)
        t = time.perf_counter() - t0
    if r.returncode:
        raise SystemExit(r.stderr)
    info = json.loads(r.stdout.strip().splitlines()[-1])
    name = {"moods": "MOODS", "memelite": "memelite (FIMO)"}[tool]
    return {"tool": f"{name}, end to end to Parquet", "seconds": t, "peak_rss_mb": rss.peak / 2**20,
            "hits": info["hits"], "seconds_scan_inside": info["seconds_scan"]}


def repeated(a, work: Path, first: dict) -> None:
    """``--repeat N``: motifgrid (cold and warm threshold cache) and the peers end to end, N rounds
    interleaved so that drift of the machine hits every tool alike; median and range of each."""
    import statistics

    peers = [p for p in ("moods", "memelite") if p in a.peers.split(",")]
    times = {"motifgrid cold": [first["seconds"]], "motifgrid warm": [first["seconds_warm_threshold_cache"]]}
    for r in range(a.repeat):
        if r:
            d = work / f"round{r}"
            d.mkdir()
            mg = run_motifgrid(Path(a.fasta), a.motifs, a.pvalue, a.workers, d, a.length or None)
            times["motifgrid cold"].append(mg["seconds"])
            times["motifgrid warm"].append(mg["seconds_warm_threshold_cache"])
        for tool in peers:
            res = run_peer_end_to_end(tool, Path(a.fasta), a.motifs, a.pvalue, work, a.length or None)
            times.setdefault(res["tool"], []).append(res["seconds"])
        print(json.dumps({"round": r, **{k: v[-1] for k, v in times.items()}}), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"\n{a.repeat} rounds, median (min-max):")
    for k, v in times.items():
        ratio = "".join(f"; motifgrid cold {med[k] / med['motifgrid cold']:.2f}x, warm {med[k] / med['motifgrid warm']:.2f}x "
                        "faster" for _ in [0] if not k.startswith("motifgrid"))
        print(f"| {k} | {med[k]:.2f} s ({min(v):.2f}-{max(v):.2f}){ratio} |")


def jaccard(a: set, b: set) -> float:
    return len(a & b) / max(1, len(a | b))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fasta", default=str(SHARED / "genomes" / "hs37_chrX_20-30Mb.fa.gz"))
    ap.add_argument("--motifs", default=str(SHARED / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar"))
    ap.add_argument("--pvalue", type=float, default=1e-4)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--length", type=int, default=0, help="scan only the first BP of the first record")
    ap.add_argument("--peers", default="moods,memelite")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--repeat", type=int, default=1,
                    help="end-to-end runs of motifgrid and of each peer, interleaved; medians reported (this VM's "
                         "timings drift by 10-20 %% between minutes)")
    a = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="motifgrid-bench-"))
    rows = []
    try:
        mg = run_motifgrid(Path(a.fasta), a.motifs, a.pvalue, a.workers, work, a.length or None)
        rows.append(mg)
        print(json.dumps({k: v for k, v in mg.items() if k != "hits_dir"}), flush=True)
        if a.repeat > 1:
            return repeated(a, work, mg)
        peers = [p for p in a.peers.split(",") if p]
        if peers:
            _, seq = read_sequence(Path(a.fasta), a.length or None)
            motifs, ppms = motif_ppms(a.motifs, 0.1)
            ours = motifgrid_hit_set(mg["hits_dir"])
            if "moods" in peers:
                r, moods_hits = run_moods(seq, motifs, ppms, a.pvalue)
                r["jaccard_vs_motifgrid"] = jaccard(ours, moods_hits)
                rows.append(r)
                print(json.dumps(r), flush=True)
                # the same thresholds as motifgrid: differences left are threshold-boundary float ties only
                import pyarrow.parquet as pq

                thr = pq.read_table(Path(mg["hits_dir"]) / "_thresholds.parquet").column("threshold").to_pylist()
                thr = [t if np.isfinite(t) else 1e9 for t in thr]
                r2, moods_same = run_moods(seq, motifs, ppms, a.pvalue, thresholds=thr)
                r2["jaccard_vs_motifgrid"] = jaccard(ours, moods_same)
                rows.append(r2)
                print(json.dumps(r2), flush=True)
            if "memelite" in peers:
                r = run_memelite(seq, motifs, ppms, a.pvalue, "seq")
                rows.append(r)
                print(json.dumps(r), flush=True)
            for tool in [p for p in ("moods", "memelite") if p in peers]:     # as the issue asks: end to end to files
                r = run_peer_end_to_end(tool, Path(a.fasta), a.motifs, a.pvalue, work, a.length or None)
                rows.append(r)
                print(json.dumps(r), flush=True)
        host = f"{platform.node()} ({os.cpu_count()} cores, {platform.processor() or platform.machine()})"
        print(f"\nmachine: {host}; data: {Path(a.fasta).name}{f' first {a.length:,} bp' if a.length else ''} × "
              f"{Path(a.motifs).name}, both strands, p={a.pvalue}")
        for r in rows:
            extra = f", Jaccard vs motifgrid {r['jaccard_vs_motifgrid']:.5f}" if "jaccard_vs_motifgrid" in r else ""
            warm = f" ({r['seconds_warm_threshold_cache']:.1f} s warm)" if "seconds_warm_threshold_cache" in r else ""
            print(f"| {r['tool']} | {r['seconds']:.1f} s{warm} | {r['peak_rss_mb']:.0f} MB | {r['hits']:,} hits{extra} |")
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print("work folder:", work)


if __name__ == "__main__":
    main()
