"""Issue 49's table: whole ``motifgrid`` commands timed from outside, each with its phases (``MOTIFGRID_TRACE``).

    python benchmarks/whole.py --data DIR --work DIR [--rows genome,enrich,small,200kb,promoters] [--repeat N]

Every row is a fresh ``python -m pipeline.cli ...`` process, as a user types it; the wall time is taken around the
process, and the command's own marks (:mod:`workers.trace`: imports done, inputs planned, cluster up, thresholds,
first result, tasks, q-values, cluster closed, exit; its worker processes' warm-up and first task) are printed as
seconds from the launch, so the fixed costs and the tasks can be told apart.

DIR (``--data``) holds ``JASPAR2024_CORE_vertebrates_non-redundant.jaspar``, ``JASPAR2024_CORE_non-redundant.jaspar``,
``hs37_chrX_1-70Mb.fa.gz``, ``dm3_upstream2000.fa.gz`` and ``Pfalciparum_3D7_genome.fa.gz``
(``../shared/data/get-genomes.sh``).  Rows:

- ``genome``: a 3.1 Gb store of hg38 chromosome lengths, human base composition (``motifgrid bench``'s e2e store) ×
  879 vertebrates, p 1e-4 and 1e-5, cold then warm thresholds, ``--device gpu``;
- ``enrich``: 100,000 peaks (benchmarks/peaks.py's set) × 2,346 CORE, GPU cold, GPU warm, CPU warm;
- ``small``: the 23.3 Mb P. falciparum genome (stands in for the issue's 19.7 Mb genome: no fungal genome is among the
  project's data) × the first 100 CORE matrices at 1e-4 and the first 1,019 at 1e-5, ``--device gpu|cpu|auto``;
- ``200kb``: chrX 20.0-20.2 Mb as FASTA × 879, gpu, cpu, auto;
- ``promoters``: the 26,454 dm3 promoters × 879, gpu, cpu, auto.
Warm rows share one threshold cache (``--work``/cache), primed by an unrecorded run.  One JSON line per run goes to
``--json``.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
VERT = "JASPAR2024_CORE_vertebrates_non-redundant.jaspar"
CORE = "JASPAR2024_CORE_non-redundant.jaspar"
DEVICES = ["gpu", "cpu", "auto"]
ENV: dict = {}                 # --env settings of every run
MARKS = ("entry", "planned", "cluster", "plan", "thresholds", "scattered", "submitted", "first_result", "tasks",
         "reduced", "closed", "printed", "exit")


def run(name: str, args: list, work: Path, cache: Path, sink, env: dict | None = None) -> dict:
    """One whole command: wall seconds, its marks from the launch, the workers' warm-up and first task spans."""
    trace = work / f"trace-{name}.jsonl"
    trace.unlink(missing_ok=True)
    e = {**os.environ, **ENV, "MOTIFGRID_TRACE": str(trace), "DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR": str(cache / "t"),
         "DASK_MOTIFGRID__MOTIFS__CACHE_DIR": str(cache / "m"), **(env or {})}
    t0 = time.time()
    p = subprocess.run([sys.executable, "-m", "pipeline.cli", *args], env=e, capture_output=True, text=True)
    wall = time.time() - t0
    marks, workers = {}, {}
    for line in trace.read_text().splitlines() if trace.exists() else []:
        m = json.loads(line)
        rel = round(m["t"] - t0, 2)
        if m["mark"] in MARKS and m["mark"] not in marks:
            marks[m["mark"]] = rel
        elif m["mark"] not in MARKS:
            workers.setdefault(m["mark"], []).append(rel)
    spans = {k: [min(v), max(v)] for k, v in workers.items()}
    rec = {"run": name, "wall": round(wall, 2), "rc": p.returncode, "marks": marks, "workers": spans}
    rec["said"] = [x.strip() for x in (p.stdout + p.stderr).splitlines() if x.startswith("done:") or "--device auto" in x]
    if p.returncode:
        rec["error"] = (p.stderr or p.stdout)[-600:]
    print(f"{name}: {wall:.2f} s wall  marks {marks}  workers {spans}  {' | '.join(rec['said'])[:200]}"
          + (f"  ERROR {rec['error']}" if p.returncode else ""), flush=True)
    sink.write(json.dumps(rec) + "\n")
    sink.flush()
    return rec


def first_motifs(src: Path, n: int, dst: Path) -> Path:
    """The first ``n`` records of a JASPAR file."""
    out, k = [], 0
    for line in src.read_text().splitlines(keepends=True):
        if line.startswith(">"):
            k += 1
            if k > n:
                break
        out.append(line)
    dst.write_text("".join(out))
    return dst


def slice_fasta(genome: Path, lo: int, hi: int, dst: Path) -> Path:
    with gzip.open(genome, "rt") as f:
        f.readline()
        seq = "".join(line.strip() for line in f)
    dst.write_text(f">chrX:{lo + 1}-{hi}\n" + "\n".join(seq[i:i + 80] for i in range(lo, hi, 80)) + "\n")
    return dst


def genome_rows(data: Path, work: Path, sink, repeat: int) -> None:
    import numpy as np

    from pipeline.cli.bench import synthesize_store

    store = work / "genome.zarr"
    if not store.exists():
        t = time.time()
        synthesize_store(str(store), 3.1e9, np.array([0.2952, 0.2048, 0.2048, 0.2952]), 1 << 24, 127)
        print(f"3.1 Gb store made in {time.time() - t:.1f} s", flush=True)
    for pv in ("1e-4", "1e-5"):
        for k in range(repeat):
            cache = work / f"cache-genome-{pv}"
            shutil.rmtree(cache, ignore_errors=True)            # cold thresholds
            for phase in ("cold", "warm"):
                shutil.rmtree(work / "hits", ignore_errors=True)
                run(f"genome {pv} {phase} #{k + 1}", ["scan", str(store), str(data / VERT), "--pvalue", pv, "--out",
                    str(work / "hits"), "--device", "gpu", "--no-progress"], work, cache, sink)
    shutil.rmtree(work / "hits", ignore_errors=True)


def enrich_rows(data: Path, work: Path, sink, repeat: int) -> None:
    from benchmarks.peaks import peak_set

    peaks = peak_set(data, 100_000, work)
    cache = work / "cache-enrich"
    shutil.rmtree(cache, ignore_errors=True)
    for k in range(repeat):
        for dev, phase in (("gpu", "cold"), ("gpu", "warm"), ("cpu", "warm")):
            if phase == "cold":
                shutil.rmtree(cache, ignore_errors=True)
            shutil.rmtree(work / "enr", ignore_errors=True)
            run(f"enrich 100k x 2346 {dev} {phase} #{k + 1}", ["enrich", str(peaks), "--motifs", str(data / CORE),
                "--out", str(work / "enr"), "--device", dev], work, cache, sink)


def device_rows(label: str, inputs: list, work: Path, sink, repeat: int, cache_name: str) -> None:
    """``inputs`` (scan arguments) on gpu, cpu and auto, warm thresholds (one unrecorded priming run)."""
    cache = work / f"cache-{cache_name}"
    out = str(work / "hx")
    shutil.rmtree(out, ignore_errors=True)
    run(f"{label} (priming)", ["scan", *inputs, "--out", out, "--device", "cpu", "--no-progress"], work, cache, sink)
    for k in range(repeat):
        for dev in DEVICES:
            shutil.rmtree(out, ignore_errors=True)
            run(f"{label} {dev} #{k + 1}", ["scan", *inputs, "--out", out, "--device", dev, "--no-progress"], work,
                cache, sink)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", required=True, type=Path)
    ap.add_argument("--work", default=Path("/tmp/whole"), type=Path)
    ap.add_argument("--rows", default="genome,enrich,small,200kb,promoters")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--devices", default="gpu,cpu,auto", help="the devices of the small, 200kb and promoters rows")
    ap.add_argument("--env", action="append", default=[], help="VAR=VALUE for every command (repeatable)")
    ap.add_argument("--json", default=None, help="JSON lines out (default WORK/whole.jsonl)")
    a = ap.parse_args()
    a.work.mkdir(parents=True, exist_ok=True)
    rows = a.rows.split(",")
    DEVICES[:] = a.devices.split(",")
    ENV.update(kv.split("=", 1) for kv in a.env)
    if ENV:
        print("settings:", ENV, flush=True)
    with open(a.json or a.work / "whole.jsonl", "a") as sink:
        if "small" in rows:
            pf = str(a.data / "Pfalciparum_3D7_genome.fa.gz")
            m100 = first_motifs(a.data / CORE, 100, a.work / "core100.jaspar")
            m1019 = first_motifs(a.data / CORE, 1019, a.work / "core1019.jaspar")
            device_rows("Pf 23.3 Mb x 100 1e-4", [pf, str(m100), "--pvalue", "1e-4"], a.work, sink, a.repeat, "pf100")
            device_rows("Pf 23.3 Mb x 1019 1e-5", [pf, str(m1019), "--pvalue", "1e-5"], a.work, sink, a.repeat,
                        "pf1019")
        if "200kb" in rows:
            fa = slice_fasta(a.data / "hs37_chrX_1-70Mb.fa.gz", 20_000_000, 20_200_000, a.work / "chrX_200kb.fa")
            device_rows("200 kb x 879", [str(fa), str(a.data / VERT)], a.work, sink, a.repeat, "200kb")
        if "promoters" in rows:
            device_rows("26,454 promoters x 879", [str(a.data / "dm3_upstream2000.fa.gz"), str(a.data / VERT)], a.work,
                        sink, a.repeat, "promoters")
        if "enrich" in rows:
            enrich_rows(a.data, a.work, sink, a.repeat)
        if "genome" in rows:
            genome_rows(a.data, a.work, sink, a.repeat)


if __name__ == "__main__":
    main()
