"""Where one GPU block's time goes: each step of ``workers.scan.gpu._scan`` timed alone (synchronised).

    python benchmarks/gpu_block_profile.py [--positions N] [--motifs FILE]

879 JASPAR vertebrates at p = 1e-4 on N (default 16 Mi) positions of iid sequence with human base composition;
single thread, each step followed by a stream synchronisation, best of 5.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--positions", type=int, default=16 << 20)
    ap.add_argument("--motifs", default=str(ROOT.parent / "shared/data/motifs/JASPAR2024_CORE_vertebrates_non-redundant.jaspar"))
    a = ap.parse_args()
    import cupy as cp

    from pipeline.scan.motif_set import MotifSet, row_thresholds
    from workers.distribution.pvalue_table import PvalueTable
    from workers.scan import make_plan
    from workers.scan import gpu as G

    bg = np.array([0.2952, 0.2048, 0.2048, 0.2952])
    ms = MotifSet.load(a.motifs, np.full(4, 0.25), 0.1)
    tables = row_thresholds(ms, 1e-4)
    pwms, rm, rs = ms.rows()
    thr = np.array([t.threshold if t.reachable else np.inf for t in tables])
    plan = make_plan(pwms, thr, rm, rs)
    plan.pvalues = PvalueTable.from_thresholds([tables[i] for i in np.flatnonzero(np.isfinite(thr))])
    n = a.positions
    codes = np.random.default_rng(1).choice(4, size=n + 128, p=bg).astype(np.uint8)
    G.scan_gpu(codes, n, plan)                                   # compile, upload tables
    T = G.device_tables(plan)
    S = T.state()
    res = {}

    def step(name, fn):
        S.stream.synchronize()
        t = time.perf_counter()
        out = fn()
        S.stream.synchronize()
        res.setdefault(name, []).append(time.perf_counter() - t)
        return out

    with S.stream:
        for _ in range(5):
            codes_d = step("H2D codes", lambda: cp.asarray(codes))
            pos, row = step("candidate pass", lambda: G.candidates(codes_d, n, plan))
            rescore, pvalue_of = G.rescore_kernels()
            score = cp.empty(pos.size, dtype=np.float64)
            hit = cp.empty(pos.size, dtype=np.uint8)
            step("rescore", lambda: rescore(((pos.size + 255) // 256,), (256,), (codes_d, np.int64(codes_d.size), pos, row,
                 np.uint32(pos.size), T.pwm, T.pwm_off, T.lengths, T.thresholds, score, hit)))
            keep = step("flatnonzero", lambda: cp.flatnonzero(hit))
            p2, r2, s2 = step("gather hits", lambda: (pos[keep], row[keep], score[keep]))
            order = step("argsort", lambda: cp.argsort((r2.astype(np.int64) << 32) | p2.astype(np.int64)))
            p3, r3, s3 = step("gather order", lambda: (p2[order], r2[order], s2[order]))
            pv = cp.empty(p3.size, dtype=np.float64)
            step("pvalue_of", lambda: pvalue_of(((p3.size + 255) // 256,), (256,), (r3, s3, np.uint32(p3.size),
                 *T.pvalues, pv)))
            step("D2H pvalue", lambda: cp.asnumpy(pv))
            step("D2H pos + int64", lambda: cp.asnumpy(p3).astype(np.int64))
            step("D2H row", lambda: cp.asnumpy(r3))
            step("D2H score", lambda: cp.asnumpy(s3))
            import cupyx
            if "pinned" not in res:
                res["pinned"] = [0.0]
                pin = [cupyx.empty_pinned(x.shape, x.dtype) for x in (pv, p3, r3, s3)]
            step("D2H all 4, pinned", lambda: [x.get(out=o, stream=S.stream) for x, o in zip((pv, p3, r3, s3), pin)])
            step("whole scan_gpu", lambda: G.scan_gpu(codes, n, plan))
    print(f"{n} positions, {int(pos.size)} candidates, {int(p3.size)} hits; {cp.cuda.runtime.getDeviceProperties(0)['name'].decode()}")
    for k, v in res.items():
        if k == "pinned":
            continue
        print(f"  {k:18s} {min(v) * 1e3:8.2f} ms")


if __name__ == "__main__":
    main()
