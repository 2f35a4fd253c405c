"""Composition benchmark: the seed's workload shape (61,120 tests of 15-169 nt vs a set of references).

    python benchmarks/composition.py [--genomes DIR] [--work DIR] [--device cpu|gpu] [--similarity 0.9]
                                     [--repeats N] [--baseline-tests 48] [--baseline-positions 262144]
                                     [--hits-tests 2000] [--json FILE]

Workload (built once into --work, deterministic): 61,120 test sequences with lengths uniform in 15..169, cut
from random records of dm3_upstream2000.fa.gz (N-free windows) with 5 % substitutions and, for 30 % of them,
one single-base insertion or deletion; a few hundred are reverse-complemented.  Reference: ce2 chrX
(17.7 Mb) + all 26,454 dm3 promoters (52.9 Mb), ingested once into a genome store (block 1 Mi, halo 168;
the ingest time is reported apart).  Both FASTA files come from ../shared/data/get-genomes.sh.

Measured in one run, each timed --repeats times (best and spread reported):
1. ``counts``: the whole comparison at S >= --similarity, matches per test (``--counts-only``), end to end
   through ``run_composition`` on a local cluster (start-up excluded, reading the store included); at
   S >= 0.9 this workload has ~10^11 matches, far beyond any output (the hit mode refuses it, step 3).
2. ``kernel``: the same comparison task by task in this process with the sequences already in memory.
3. ``refusal``: the hit mode at the same S with the default --max-hits: refused, with its estimate.
4. ``hits``: the hit mode end to end to Parquet for the first --hits-tests tests × ce2 chrX (its own store)
   at S >= --hits-similarity (default 0.97).
5. ``baseline``: the straightforward loop (the seed's CPU version: a sliding window histogram, one count in
   and one out per step, compared with each test), numba-compiled, single thread, on --baseline-tests tests ×
   --baseline-positions positions of ce2 chrX; its matches are checked against ours on the same subset,
   and its time is extrapolated to the whole workload by (window starts × tests), stated as such.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

N_TESTS = 61_120
LMIN, LMAX = 15, 169


def read_fasta(path: Path):
    names, seqs, cur = [], [], []
    with gzip.open(path, "rt") as f:
        for line in f:
            if line.startswith(">"):
                if cur:
                    seqs.append("".join(cur))
                    cur = []
                names.append(line[1:].split()[0])
            else:
                cur.append(line.strip())
    if cur:
        seqs.append("".join(cur))
    return names, seqs


def make_tests(promoters: list, names: list, n: int, seed: int = 2026) -> list:
    rng = np.random.default_rng(seed)
    sizes = np.array([len(s) for s in promoters], float)
    pick = rng.choice(len(promoters), size=4 * n, p=sizes / sizes.sum())
    out, k = [], 0
    comp = str.maketrans("ACGT", "TGCA")
    while len(out) < n:
        r = int(pick[k % pick.size])
        k += 1
        L = int(rng.integers(LMIN, LMAX + 1))
        s = promoters[r]
        if len(s) < L + 2:
            continue
        p = int(rng.integers(0, len(s) - L - 1))
        w = s[p:p + L + 1].upper()
        if any(c not in "ACGT" for c in w):
            continue
        w = list(w[:L])
        for j in np.flatnonzero(rng.random(L) < 0.05):
            w[j] = "ACGT"[rng.integers(4)]
        if rng.random() < 0.3:
            j = int(rng.integers(L))
            if (rng.random() < 0.5 and L < LMAX) or L == LMIN:
                w.insert(j, "ACGT"[rng.integers(4)])
            else:
                del w[j]
        t = "".join(w)
        if rng.random() < 0.005:
            t = t.translate(comp)[::-1]
        out.append((f"t{len(out):05d}|{names[r]}:{p}", t))
    return out


def build(genomes: Path, work: Path) -> dict:
    from pipeline.io.genome import GenomeStore, ingest

    work.mkdir(parents=True, exist_ok=True)
    tests, ref, store = work / "tests.fa", work / "reference.fa", work / "reference.zarr"
    info = {}
    if not tests.exists() or not (ref.exists() or store.exists()):
        pn, ps = read_fasta(genomes / "dm3_upstream2000.fa.gz")
        cn, cs = read_fasta(genomes / "ce2_chrX.fa.gz")
        tmp = tests.with_suffix(".tmp")
        with open(tmp, "w") as f:
            for name, t in make_tests(ps, pn, N_TESTS):
                f.write(f">{name}\n{t}\n")
        os.replace(tmp, tests)
        tmp = ref.with_suffix(".tmp")
        with open(tmp, "w") as f:
            for name, s in list(zip(cn, cs)) + list(zip(pn, ps)):
                f.write(f">{name}\n")
                for i in range(0, len(s), 80):
                    f.write(s[i:i + 80] + "\n")
        os.replace(tmp, ref)
    chrx = work / "ce2_chrX.zarr"
    if not chrx.exists() and (genomes / "ce2_chrX.fa.gz").exists():
        ingest(genomes / "ce2_chrX.fa.gz", chrx, block_size=1 << 20, halo=LMAX - 1)
    if not store.exists():
        t0 = time.perf_counter()
        ingest(ref, store, block_size=1 << 20, halo=LMAX - 1)
        info["ingest_seconds"] = time.perf_counter() - t0
        (work / "ingest.json").write_text(json.dumps(info))
    else:
        info = json.loads((work / "ingest.json").read_text()) if (work / "ingest.json").exists() else {}
    g = GenomeStore(store)
    info.update(reference_bp=g.total_length, contigs=len(g.records), tests=str(tests), store=str(store),
                chrx=str(genomes / "ce2_chrX.fa.gz"), chrx_store=str(chrx))
    return info


def spread(xs):
    return {"best": min(xs), "median": float(np.median(xs)), "worst": max(xs), "runs": xs}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--genomes", default=str(ROOT.parent / "main" / ".devdata" / "genomes"),
                    help="folder with dm3_upstream2000.fa.gz and ce2_chrX.fa.gz (get-genomes.sh)")
    ap.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "motifgrid-composition-bench"))
    ap.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    ap.add_argument("--similarity", type=float, default=0.9)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--parts", default="counts,kernel,refusal,hits,baseline")
    ap.add_argument("--baseline-tests", type=int, default=200)
    ap.add_argument("--baseline-positions", type=int, default=1 << 20)
    ap.add_argument("--hits-tests", type=int, default=1000)
    ap.add_argument("--hits-similarity", type=float, default=0.97)
    ap.add_argument("--json", default=None, help="append one JSON line per measurement")
    a = ap.parse_args(argv)
    parts = set(a.parts.split(","))

    from pipeline.engine.cluster import get_client
    from pipeline.composition.run import (CompositionError, assemble, plan_composition, read_tests, run_composition,
                                      task_groups)
    from workers.composition import Segments, compare_block, histograms, make_plan
    from workers.composition.cpu_numba import sliding_count

    work = Path(a.work)
    info = build(Path(a.genomes), work)
    ts = read_tests(info["tests"])
    lengths = ts.lengths
    print(f"workload: {len(ts.ids):,} tests ({lengths.min()}-{lengths.max()} nt, {np.unique(lengths).size} lengths) × "
          f"{info['reference_bp']:,} bp in {info['contigs']:,} contigs; ingest "
          f"{info.get('ingest_seconds', float('nan')):.0f} s (once); device {a.device}; {platform.processor() or platform.machine()}",
          flush=True)
    results = []

    def record(**kw):
        kw.update(date=time.strftime("%Y-%m-%d"), device=a.device, similarity=a.similarity,
                  host=platform.node(), cpus=len(os.sched_getaffinity(0)))
        results.append(kw)
        print(json.dumps(kw), flush=True)
        if a.json:
            with open(a.json, "a") as f:
                f.write(json.dumps(kw) + "\n")

    s = a.similarity
    pairs_total = None
    with get_client(device=a.device, n_workers=a.workers, quiet=True) as (client, dev):
        if "counts" in parts:
            times, res = [], None
            for _ in range(a.repeats):
                out = work / "out-counts"
                shutil.rmtree(out, ignore_errors=True)
                t0 = time.perf_counter()
                res = run_composition(info["tests"], info["store"], str(out), min_similarity=s, counts_only=True,
                                      client=client, device=dev, progress=False)
                times.append(time.perf_counter() - t0)
            summ = json.loads((out / "_summary.json").read_text())
            pairs_total = res.pairs
            record(part="counts", seconds=spread(times), matches=res.hits, pairs=res.pairs,
                   positions=res.positions, tests_with_matches=summ["tests_with_matches"], tasks=res.tasks,
                   cells=summ["cells"], pairs_per_s=res.pairs / min(times),
                   task_seconds_compare=summ["task_seconds_compare"], task_seconds_io=summ["task_seconds_io"])
        if "kernel" in parts:
            job = plan_composition(info["tests"], info["store"], str(work / "unused"), min_similarity=s)
            groups = task_groups(job.store, 1 << 20)
            seqs = [assemble(job.store, g) for g in groups]
            compare_block(*seqs[0], job.plan, device=dev, hits=False)        # compile / upload
            times = []
            for _ in range(a.repeats):
                t0 = time.perf_counter()
                tot = 0
                for codes, seg in seqs:
                    tot += int(compare_block(codes, seg, job.plan, device=dev, hits=False)[0].sum())
                times.append(time.perf_counter() - t0)
            positions = sum(int(sg.n.sum()) for _, sg in seqs)
            record(part="kernel", seconds=spread(times), matches=tot, tasks=len(seqs), threads=1,
                   window_length_items=positions * int(job.plan.lengths.size),
                   pairs=positions * job.plan.n_rows, pairs_per_s=positions * job.plan.n_rows / min(times))
        if "refusal" in parts:
            out = work / "out-refused"
            shutil.rmtree(out, ignore_errors=True)
            t0 = time.perf_counter()
            try:
                run_composition(info["tests"], info["store"], str(out), min_similarity=s, client=client, device=dev,
                                progress=False)
                msg = "not refused"
            except CompositionError as e:
                msg = str(e)
            record(part="refusal", seconds=time.perf_counter() - t0, message=msg, output_left=out.exists())
        if "hits" in parts:
            sub = work / f"tests-{a.hits_tests}.fa"
            with open(info["tests"]) as f, open(sub, "w") as g:
                for i, line in enumerate(f):
                    if i >= 2 * a.hits_tests:
                        break
                    g.write(line)
            times, res = [], None
            for _ in range(a.repeats):
                out = work / "out-hits"
                shutil.rmtree(out, ignore_errors=True)
                t0 = time.perf_counter()
                res = run_composition(str(sub), info["chrx_store"], str(out), min_similarity=a.hits_similarity, client=client,
                                      device=dev, progress=False, max_hits=10**9)
                times.append(time.perf_counter() - t0)
            size = sum(p.stat().st_size for p in out.glob("*/**/part-*.parquet"))
            summ = json.loads((out / "_summary.json").read_text())
            record(part="hits", seconds=spread(times), tests=a.hits_tests, similarity_hits=a.hits_similarity,
                   matches=res.hits, parquet_bytes=size, estimate=res.estimate["hits"],
                   estimate_seconds=res.estimate["seconds"], task_seconds_compare=summ["task_seconds_compare"],
                   task_seconds_io=summ["task_seconds_io"], note="reference = ce2 chrX store")
    if "baseline" in parts:
        from pipeline.io.genome import encode

        _, cs = read_fasta(Path(info["chrx"]))
        codes = encode(cs[0][:a.baseline_positions + LMAX])
        rng = np.random.default_rng(7)
        pick = np.sort(rng.choice(len(ts.ids), a.baseline_tests, replace=False))
        h = histograms(ts.codes, ts.offsets)[pick]
        L = lengths[pick]
        starts, ns = np.array([0]), np.array([a.baseline_positions])
        plan = make_plan(h, L, s, False)
        ours = np.zeros(len(pick), np.int64)
        c, _ = compare_block(codes, Segments(starts, ns), plan, device="cpu", hits=False)
        np.add.at(ours, plan.row_test, c)
        sliding_count(codes, starts, ns, h[:1], int(L[0]), 1)                # compile
        times = []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            base = np.zeros(len(pick), np.int64)
            for i in range(len(pick)):
                from workers.composition import max_distance

                base[i:i + 1] = sliding_count(codes, starts, ns, h[i:i + 1], int(L[i]), max_distance(int(L[i]), s))
            times.append(time.perf_counter() - t0)
        steps = a.baseline_tests * a.baseline_positions
        per_step = min(times) / steps
        total_pairs = pairs_total or (info["reference_bp"] * len(ts.ids))
        record(part="baseline", seconds=spread(times), steps=steps, ns_per_step=per_step * 1e9,
               equal_to_ours=bool(np.array_equal(base, ours)),
               extrapolated_seconds_one_thread=per_step * total_pairs, extrapolated_pairs=total_pairs,
               note="extrapolated by window starts × tests from the measured subset")
    return 0


if __name__ == "__main__":
    sys.exit(main())
