"""Peaks and promoters benchmark (issue 16): many short records, FASTA in → Parquet out, peers in the same run.

    python benchmarks/peaks.py [--set promoters|peaks|both] [--genomes DIR] [--peaks N] [--motifs F] [--pvalue P]
                               [--workers N] [--peers memelite,moods] [--work DIR] [--rounds R]

Sets (``../shared/data/get-genomes.sh DIR`` builds them; default DIR /work/genomes):
- ``promoters``: the 26,454 dm3 2 kb promoters (``dm3_upstream2000.fa.gz``, 52.9 Mb);
- ``peaks``: N peak-like records (default 100,000), 150-600 bp cut at random (seed 16) from human chrX 1-70 Mb
  (``hs37_chrX_1-70Mb.fa.gz``), written once into the work folder.
Each tool runs end to end in a fresh process, as a user runs it: motifgrid ``scan FASTA MOTIFS`` (the FASTA is
ingested inside the run) with a cold threshold cache, then again with it warm; memelite and MOODS through
``benchmarks/peers.py --all-records`` (same probability matrices, Parquet out).  Peak memory is the peak summed
RSS of the process tree (sampled every 50 ms).  Prints one JSON line per tool and set, and the window scores per
second (bases × 2 strands × motifs / seconds) to compare with the 10 Mb chrX run of ``benchmarks/cpu_scan.py``.
``--rounds R`` runs every tool R times, interleaved round by round (the VM's speed drifts by up to 1.7x within
minutes: a loop of 10⁷ additions took 0.97-1.75 s on 2026-11-27), and ends each set with the median seconds and the
ratios of the medians; every run also reports its CPU seconds (user + system of the process tree).
"""
from __future__ import annotations

import argparse
import compileall
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from benchmarks.cpu_scan import PeakRSS  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"


def peak_set(genomes: Path, n: int, work: Path, seed: int = 16) -> Path:
    """``n`` records of 150-600 bp cut at random from chrX 1-70 Mb (windows holding N are kept: real peaks do)."""
    out = work / f"peaks{n}.fa"
    if out.exists():
        return out
    with gzip.open(genomes / "hs37_chrX_1-70Mb.fa.gz", "rt") as f:
        f.readline()
        seq = "".join(line.strip() for line in f)
    rng = np.random.default_rng(seed)
    lengths = rng.integers(150, 601, n)
    starts = rng.integers(0, len(seq) - 601, n)
    with open(out, "w") as f:
        for i, (s, L) in enumerate(zip(starts.tolist(), lengths.tolist())):
            f.write(f">peak{i} X:{s}-{s + L}\n{seq[s:s + L]}\n")
    return out


def bases(fasta: Path) -> int:
    opener = gzip.open if fasta.suffix == ".gz" else open
    with opener(fasta, "rt") as f:
        return sum(len(line.strip()) for line in f if not line.startswith(">"))


class PeerFailed(RuntimeError):
    """A peer that did not finish (memelite is killed for memory on 100,000 peaks of a 23 GB VM): reported, not fatal."""


def _children_cpu() -> float:
    u = resource.getrusage(resource.RUSAGE_CHILDREN)
    return u.ru_utime + u.ru_stime


def run(cmd: list, env: dict, fatal: bool = True) -> tuple[float, float, str]:
    """``(seconds, peak MB, stdout)`` of ``cmd``; its CPU seconds in ``run.cpu`` (the last call's)."""
    with PeakRSS() as rss:
        t0, c0 = time.perf_counter(), _children_cpu()
        r = subprocess.run(cmd, env=env, capture_output=True, text=True)
        secs = time.perf_counter() - t0
        run.cpu = _children_cpu() - c0
    if r.returncode:
        why = f"killed by signal {-r.returncode}" if r.returncode < 0 else f"exit {r.returncode}"
        msg = f"{' '.join(cmd[:3])}: {why} after {secs:.1f} s at {rss.peak / 2**20:.0f} MB peak RSS"
        if fatal:
            raise SystemExit(f"{msg}\n{r.stderr[-3000:]}")
        raise PeerFailed(msg)
    return secs, rss.peak / 2**20, r.stdout


def motifgrid(fasta: Path, a, work: Path, name: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT), DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR=str(work / f"cache-{name}"))
    res = {}
    shutil.rmtree(work / f"cache-{name}", ignore_errors=True)
    for phase in ("cold", "warm"):
        out = work / f"hits-{name}-{phase}"
        shutil.rmtree(out, ignore_errors=True)
        secs, mb, _ = run([sys.executable, "-m", "pipeline.cli", "scan", str(fasta), a.motifs, "--pvalue", str(a.pvalue),
                           "--out", str(out), "--workers", str(a.workers), "--device", "cpu", "--no-progress"], env)
        s = json.loads((out / "_summary.json").read_text())
        res[phase] = {"seconds": secs, "cpu_seconds": round(run.cpu, 2), "peak_rss_mb": mb, "hits": s["hits"]}
    return {"tool": "motifgrid", "set": name, **res, "blocks": s["blocks"], "positions": s["positions"]}


def peer(tool: str, fasta: Path, a, work: Path, name: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    try:
        secs, mb, stdout = run([sys.executable, str(ROOT / "benchmarks" / "peers.py"), tool, str(fasta), a.motifs,
                                str(a.pvalue), str(work / f"{tool}-{name}.parquet"), "--all-records"], env, fatal=False)
    except PeerFailed as e:
        return {"tool": tool, "set": name, "failed": str(e)}
    res = json.loads(stdout.splitlines()[-1])
    # (memelite's hits in windows without N are counted after its job, in its process: not its time)
    return {"tool": tool, "set": name, "seconds": secs - res.get("seconds_diagnostic", 0.0),
            "cpu_seconds": round(run.cpu, 2), "peak_rss_mb": mb, **res}


def _rate(r: dict, bp: int, n_motifs: int | None) -> dict:
    """The row with its bases and window scores per second (bases x 2 strands x motifs / warm seconds)."""
    r["bp"] = bp
    if "failed" not in r and n_motifs:
        r["window_scores_per_s"] = bp * 2 * n_motifs / (r["warm"]["seconds"] if r["tool"] == "motifgrid" else r["seconds"])
    return r


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", choices=["promoters", "peaks", "both"], default="both")
    ap.add_argument("--genomes", default="/work/genomes")
    ap.add_argument("--peaks", type=int, default=100_000)
    ap.add_argument("--motifs", default=str(SHARED / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar"))
    ap.add_argument("--pvalue", type=float, default=1e-4)
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--peers", default="memelite,moods")
    ap.add_argument("--work", default="/tmp/motifgrid-peaks-bench")
    ap.add_argument("--rounds", type=int, default=1, help="runs of every tool, interleaved (medians at the end)")
    a = ap.parse_args(argv)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    # the project's bytecode, as a pip-installed package has it: with PYTHONDONTWRITEBYTECODE set (this VM) and no
    # .pyc files, every motifgrid run compiled the sources again (0.1-0.5 s a run)
    compileall.compile_dir(ROOT / "pipeline", quiet=1)
    compileall.compile_dir(ROOT / "workers", quiet=1)
    genomes = Path(a.genomes)
    sets = []
    if a.set in ("promoters", "both"):
        sets.append(("promoters", genomes / "dm3_upstream2000.fa.gz"))
    if a.set in ("peaks", "both"):
        sets.append((f"peaks{a.peaks}", peak_set(genomes, a.peaks, work)))
    n_motifs = sum(1 for line in open(a.motifs) if line.startswith(">")) if not a.motifs.startswith("JASPAR") else None
    for name, fasta in sets:
        bp = bases(fasta)
        rounds = []
        for _ in range(a.rounds):
            rows = [motifgrid(fasta, a, work, name)]
            print(json.dumps(_rate(rows[0], bp, n_motifs)), flush=True)
            for t in a.peers.split(","):
                if t:
                    rows.append(peer(t, fasta, a, work, name))
                    print(json.dumps(_rate(rows[-1], bp, n_motifs)), flush=True)
            _ratios(name, rows)
            rounds.append(rows)
        if a.rounds > 1:
            _medians(name, rounds)
    return 0


def _ratios(name: str, rows: list) -> None:
    mg = rows[0]
    for r in rows[1:]:
        if "failed" in r:
            print(f"{name}: motifgrid {mg['cold']['seconds']:.1f} s cold vs {r['tool']}: {r['failed']}", flush=True)
            continue
        print(f"{name}: motifgrid {mg['cold']['seconds']:.1f} s cold / {mg['warm']['seconds']:.1f} s warm "
              f"({mg['warm']['peak_rss_mb']:.0f} MB) vs {r['tool']} {r['seconds']:.1f} s ({r['peak_rss_mb']:.0f} MB): "
              f"{r['seconds'] / mg['cold']['seconds']:.2f}x cold, {r['seconds'] / mg['warm']['seconds']:.2f}x warm",
              flush=True)


def _medians(name: str, rounds: list) -> None:
    """The median seconds of each tool over the rounds, and the ratios of the medians (per round in brackets)."""
    cold = np.median([r[0]["cold"]["seconds"] for r in rounds])
    warm = np.median([r[0]["warm"]["seconds"] for r in rounds])
    for k in range(1, len(rounds[0])):
        runs = [r[k] for r in rounds if "failed" not in r[k]]
        if not runs:
            continue
        peer_s = np.median([r["seconds"] for r in runs])
        each = ", ".join(f"{r[k]['seconds'] / r[0]['cold']['seconds']:.2f}" for r in rounds if "failed" not in r[k])
        print(f"{name}, median of {len(runs)} rounds: motifgrid {cold:.1f} s cold / {warm:.1f} s warm vs "
              f"{runs[0]['tool']} {peer_s:.1f} s: {peer_s / cold:.2f}x cold ({each} by round), {peer_s / warm:.2f}x warm",
              flush=True)


    return 0


if __name__ == "__main__":
    raise SystemExit(main())
