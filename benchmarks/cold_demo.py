"""The demo on a new machine (cold) and again (warm), for this checkout and optionally another one.

    python benchmarks/cold_demo.py [--rounds 3] [--baseline /path/to/other/checkout] [--device cpu]

Cold = a fresh numba cache (``NUMBA_CACHE_DIR``, so the checkout's ``__pycache__`` is neither used nor touched)
and a fresh threshold cache (``DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR``): what ``motifgrid demo`` costs the first
time on a machine.  Warm = the same caches, straight after.  Each run is ``python -m pipeline.cli.command demo --dir NEW``
in a subprocess (the genome is ingested every time, as on a first run).  Rounds interleave the checkouts
(cold A, warm A, cold B, warm B, ...) so that they share the machine's load; the medians are printed with every
run's wall time and the demo's own ``times:`` line (where the checkout prints one).

Prints JSON lines, then a markdown table for docs/benchmarks.md.
"""
from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_demo(checkout: Path, tmp: Path, caches: Path, device: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout), NUMBA_CACHE_DIR=str(caches / "numba"),
               DASK_MOTIFGRID__THRESHOLDS__CACHE_DIR=str(caches / "thresholds"), COLUMNS="400")
    out = Path(tempfile.mkdtemp(dir=tmp, prefix="demo-"))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "pipeline.cli", "demo", "--dir", str(out), "--device", device],
                       cwd=checkout, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if r.returncode:
        raise SystemExit(f"demo failed in {checkout}:\n{r.stderr}")
    summary = json.loads((out / "hits" / "_summary.json").read_text())
    times = re.search(r"^times: (.*)$", r.stderr, re.M)
    shutil.rmtree(out, ignore_errors=True)
    return {"wall": wall, "scan_seconds": summary["seconds"], "thresholds": summary["seconds_thresholds"],
            "blocks": summary["seconds_tasks_wall"], "times": times.group(1) if times else None}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", type=Path, help="another checkout of motifgrid (e.g. the main branch)")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    checkouts = {"this": ROOT} | ({"baseline": a.baseline.resolve()} if a.baseline else {})
    for path in checkouts.values():     # the bytecode a pip install has (this VM sets PYTHONDONTWRITEBYTECODE)
        for pkg in ("pipeline", "workers"):
            compileall.compile_dir(path / pkg, quiet=1)
    rows = {(k, s): [] for k in checkouts for s in ("cold", "warm")}
    with tempfile.TemporaryDirectory(prefix="motifgrid-cold-demo-") as tmp:
        tmp = Path(tmp)
        for rnd in range(a.rounds):
            for name, path in checkouts.items():
                caches = Path(tempfile.mkdtemp(dir=tmp, prefix="caches-"))
                for state in ("cold", "warm"):
                    res = run_demo(path, tmp, caches, a.device) | {"checkout": name, "state": state, "round": rnd}
                    rows[(name, state)].append(res)
                    print(json.dumps(res), flush=True)
                shutil.rmtree(caches, ignore_errors=True)
    print(f"\n{platform.node()}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| checkout | state | wall (median of %d) | scan | thresholds | blocks |" % a.rounds)
    print("|---|---|---|---|---|---|")
    for (name, state), rs in rows.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("wall", "scan_seconds", "thresholds", "blocks")}
        print(f"| {name} ({checkouts[name]}) | {state} | {med['wall']:.1f} s | {med['scan_seconds']:.1f} s | "
              f"{med['thresholds']:.1f} s | {med['blocks']:.1f} s |")


if __name__ == "__main__":
    main()
