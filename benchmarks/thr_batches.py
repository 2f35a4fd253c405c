"""How the cold threshold phase depends on the number of batches in flight per worker (GIL convoys).

    python benchmarks/thr_batches.py [--device gpu|cpu] [--workers N] [--threads T] [--batches 4,8,16,64]

879 JASPAR vertebrates at p = 1e-4 with tables, no cache, on a local cluster (warmed up); each setting
twice, best time printed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _count(pwms, background):
    from pipeline.distribution.thresholds import _threshold_batch

    return len(_threshold_batch(pwms, background, [1e-4], 1e-3, True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--workers", type=int)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--batches", default="4,8,16,32,64")
    ap.add_argument("--motifs", default=str(ROOT.parent / "shared/data/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar"))
    a = ap.parse_args()
    from pipeline.engine.cluster import get_client
    from pipeline.scan.motif_set import MotifSet
    from pipeline.distribution.thresholds import _batches, _threshold_batch

    ms = MotifSet.load(a.motifs, np.full(4, 0.25), 0.1)
    with get_client(device=a.device, n_workers=a.workers, threads_per_worker=a.threads, quiet=True) as (c, dev):
        time.sleep(5)                       # warm-up plugin
        print("threads", c.nthreads(), flush=True)
        for nb in [int(x) for x in a.batches.split(",")]:
            best = 1e9
            for _ in range(2):
                groups = _batches(ms.pwms, -(-len(ms.pwms) // nb))
                t = time.perf_counter()
                fs = c.map(_threshold_batch, [[ms.pwms[i] for i in g] for g in groups], background=ms.background,
                           pvalues=[1e-4], rel_tol=1e-3, table=True, pure=False)
                c.gather(fs)
                best = min(best, time.perf_counter() - t)
            best2 = 1e9
            for _ in range(2):          # the same work, results left on the workers: the transfer's share
                t = time.perf_counter()
                fs = c.map(_count, [[ms.pwms[i] for i in g] for g in groups], background=ms.background, pure=False)
                c.gather(fs)
                best2 = min(best2, time.perf_counter() - t)
            print(f"batches {len(groups):4d}  {best:.3f} s  (without sending the results back: {best2:.3f} s)", flush=True)


if __name__ == "__main__":
    main()
