"""Motif discovery benchmark: planted (l, d) instances (Buhler & Tompa's set-up) and the CTCF peaks check.

Planted sets: t = 20 sequences of n = 600 over a uniform background, one occurrence per sequence with exactly
d substitutions (tests/planted.py); the ZOOPS set plants (15, 4) in 15 of the 20 sequences.  Per instance:
success = the planted consensus recovered exactly, nPC = Buhler & Tompa's performance coefficient over the
site residues, time = the `discover` call on an already running cluster (cluster start-up is reported once).
The baseline measured in the same run is the papers' final choice (rank by likelihood, no (l, d) ranking or
local search) on the same candidates (``--baseline``).

    python benchmarks/discovery.py --sets 11,2 13,3 --instances 20                # CPU here
    python benchmarks/discovery.py --sets 15,4 16,5 18,6 z15,4 --instances 20 --device gpu
    python benchmarks/discovery.py --sets "" --ctcf                              # the CTCF peaks check
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pipeline.engine.cluster import get_client  # noqa: E402
from pipeline.discover.run import discover, run_discover  # noqa: E402
from pipeline.discover.inputs import DiscoverSettings, read_sequences  # noqa: E402
from tests.planted import performance_coefficient, planted_instance  # noqa: E402


def shared_data() -> Path:
    env = os.environ.get("MOTIFGRID_SHARED_DATA")
    return Path(env) if env else ROOT.parent / "shared" / "data"


def parse_set(s: str):
    zoops = s.startswith("z")
    l, d = (int(x) for x in s.lstrip("z").split(","))
    return l, d, zoops


def run_set(client, device, spec, instances, args, tmp):
    l, d, zoops = parse_set(spec)
    rows = []
    for k in range(instances):
        pi = planted_instance(l, d, t=20, n=600, seed=10_000 * l + 100 * d + k + (50 if zoops else 0),
                              sites=15 if zoops else None)
        fa = pi.write(Path(tmp) / f"{spec}-{k}.fa")
        seqs = read_sequences(fa)
        for variant in (["ours", "baseline"] if args.baseline else ["ours"]):
            st = DiscoverSettings(width=l, mutations=d, model="zoops" if zoops else "oops", algorithm=args.algorithm,
                                  seed=k, chains=args.chains, trials=args.trials, ld_rank=variant == "ours",
                                  **({"em_keep": args.em_keep} if args.em_keep else {}))
            t0 = time.perf_counter()
            found, stats = discover(seqs, st, client, device=device)
            dt = time.perf_counter() - t0
            m = found[0]
            npc = performance_coefficient(pi, {i: p for i, p, *_ in m.sites})
            r = stats["rounds"][0]
            rows.append({"set": spec, "instance": k, "variant": variant, "ok": m.consensus == pi.motif,
                         "npc": npc, "seconds": dt, "found": m.consensus, "planted": pi.motif, "by": m.origin,
                         "ld_count": m.ld_count, "task_seconds": r["task_seconds"], "merge": r["seconds_merge"],
                         "projection": r["projection"], "chains": r["gibbs_chains"], "device": device,
                         "phases": r.get("task_phases"), "tasks_wall": r["seconds_tasks"],
                         "climbed_starts": r.get("climbed_starts"),
                         # which algorithm's own (l, d) optima (GPU tasks) already held the planted motif
                         "found_in": {k: pi.motif in v for k, v in (r.get("climbed") or {}).items()
                                      if r.get("climbed_starts")}})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def summarise(rows):
    out = []
    for spec in dict.fromkeys(r["set"] for r in rows):
        for variant in dict.fromkeys(r["variant"] for r in rows):
            rs = [r for r in rows if r["set"] == spec and r["variant"] == variant]
            if not rs:
                continue
            secs = [r["seconds"] for r in rs]
            out.append({"set": spec, "variant": variant, "instances": len(rs),
                        "success": sum(r["ok"] for r in rs) / len(rs),
                        "npc": statistics.mean(r["npc"] for r in rs),
                        "seconds_median": statistics.median(secs), "seconds_max": max(secs),
                        "seconds_min": min(secs)})
            fi = [r["found_in"] for r in rs if r.get("found_in")]
            if fi:
                out[-1]["found_in"] = {k: sum(f.get(k, False) for f in fi) / len(fi) for k in fi[0]}
    return out


def ctcf(client, device, args):
    data = shared_data()
    fa = data / "benchmarks/chipseq_peaks/Gm12878.CTCF.top500.w200.fa"
    db = data / "motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar"
    with tempfile.TemporaryDirectory() as tmp:
        st = DiscoverSettings(width=args.ctcf_width, both_strands=True, model="zoops", algorithm=args.algorithm,
                              seed=0, chains=args.chains)
        t0 = time.perf_counter()
        res = run_discover(str(fa), str(Path(tmp) / "out"), st, client, device=device, compare_to=str(db))
        dt = time.perf_counter() - t0
    m = res.motifs[0]
    row = {"ctcf": True, "device": device, "seconds": dt, "consensus": m["consensus"], "sites": m["sites"],
           "best_match": m["best_match"], "found_by": m["found_by"],
           "task_seconds": res.stats["rounds"][0]["task_seconds"], "merge": res.stats["rounds"][0]["seconds_merge"]}
    print(json.dumps(row), flush=True)
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="*", default=["11,2", "13,3"], help="l,d (prefix z for the ZOOPS variant)")
    ap.add_argument("--instances", type=int, default=20)
    ap.add_argument("--device", choices=["auto", "cpu", "gpu"], default="auto")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--algorithm", default="both", choices=["gibbs", "projection", "both"])
    ap.add_argument("--chains", type=int)
    ap.add_argument("--trials", type=int)
    ap.add_argument("--em-keep", type=int, help="models per PROJECTION task that get full EM")
    ap.add_argument("--baseline", action="store_true", help="also rank by likelihood only (the papers' choice)")
    ap.add_argument("--ctcf", action="store_true")
    ap.add_argument("--ctcf-width", type=int, default=15)
    ap.add_argument("--json", help="append the rows and the summary to this JSON-lines file")
    ap.add_argument("--no-warmup", dest="warmup", action="store_false",
                    help="time the first instance cold (kernel compilation, numba cache load included)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    dev = None if args.device == "auto" else args.device
    rows = []
    with get_client(n_workers=args.workers, device=dev, quiet=True) as (client, device), \
            tempfile.TemporaryDirectory() as tmp:
        print(json.dumps({"cluster_start_seconds": time.perf_counter() - t0, "device": device,
                          "workers": len(client.scheduler_info()["workers"])}), flush=True)
        if args.warmup:      # first use on a fresh machine: CUDA kernels compiled, numba cache loaded (untimed)
            t1 = time.perf_counter()
            wp = planted_instance(11, 2, t=20, n=600, seed=1)
            discover(read_sequences(wp.write(Path(tmp) / "warmup.fa")),
                     DiscoverSettings(width=11, mutations=2, model="oops", seed=0), client, device=device)
            print(json.dumps({"warmup_seconds": time.perf_counter() - t1}), flush=True)
        for spec in [s for s in args.sets if s]:
            rows += run_set(client, device, spec, args.instances, args, tmp)
        summary = summarise(rows)
        for s in summary:
            print(json.dumps({"summary": s}), flush=True)
        c = ctcf(client, device, args) if args.ctcf else None
    if args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
            for s in summary:
                f.write(json.dumps({"summary": s}) + "\n")
            if c:
                f.write(json.dumps(c) + "\n")
    print("\n| set | variant | instances | success | nPC | s/instance median (min–max) | planted among own optima |")
    print("|---|---|---|---|---|---|---|")
    for s in summary:
        fi = ", ".join(f"{k} {v:.2f}" for k, v in s.get("found_in", {}).items()) or "—"
        print(f"| ({s['set']}) | {s['variant']} | {s['instances']} | {s['success']:.2f} | {s['npc']:.3f} | "
              f"{s['seconds_median']:.2f} ({s['seconds_min']:.2f}–{s['seconds_max']:.2f}) | {fi} |")


if __name__ == "__main__":
    main()
