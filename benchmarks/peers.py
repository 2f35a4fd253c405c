"""The peers of benchmarks/cpu_scan.py end to end to files, as a user would run them: one fresh process that
imports the tool, reads the FASTA and the motifs, scans both strands and writes the hits as Parquet.

    python benchmarks/peers.py moods|memelite FASTA MOTIFS PVALUE OUT.parquet [--length BP] [--threads N]

Same probability matrices as motifgrid (``pipeline.motifs``: FIMO-style pseudocount 0.1, uniform background).
Parquet (pyarrow) is the cheapest common output; each tool's native text output would cost more.  Prints one
JSON line: hits and the seconds spent scanning (the rest of the process's wall time is start-up and I/O).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _sequence(fasta: str, length: int | None):
    import pyfaidx

    fa = pyfaidx.Fasta(fasta, as_raw=True)
    name = next(iter(fa.keys()))
    n = len(fa[name]) if not length else min(length, len(fa[name]))
    return name, fa[name][0:n].upper()


def _ppms(motifs: str):
    from pipeline.motifs import motif_probabilities, read_motifs

    ms = read_motifs(motifs)
    return ms, [motif_probabilities(m, np.full(4, 0.25), 0.1) for m in ms]


def _write(out: str, cols: dict) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table(cols), out, compression="zstd")


def _moods_matrices(ppms) -> list:
    """Log-odds matrices for MOODS, forward then reverse complement of each motif."""
    import MOODS.tools

    mats = []
    for p in ppms:
        lo = tuple(tuple(float(x) for x in row) for row in np.log2(p / 0.25).T)
        mats += [lo, MOODS.tools.reverse_complement(lo)]
    return mats


def _moods_scanner(mats, pvalue: float):
    """MOODS's own thresholds and a scanner holding every matrix (timed with the scan, as MOODS runs)."""
    import MOODS.scan
    import MOODS.tools

    bg = [0.25] * 4
    scanner = MOODS.scan.Scanner(7)
    scanner.set_motifs(mats, bg, [MOODS.tools.threshold_from_p(mat, bg, pvalue) for mat in mats])
    return scanner


def _onehot(seqs: list, n: int) -> np.ndarray:
    """memelite's input: one-hot (len(seqs), 4, n) float32 of equal-length sequences (N: all zero)."""
    from pipeline.io.genome import encode

    onehot = np.zeros((len(seqs), 4, n), dtype=np.float32)
    for j, seq in enumerate(seqs):
        codes = encode(seq)
        ok = codes < 4
        onehot[j, codes[ok], np.flatnonzero(ok)] = 1
    return onehot


def run_moods(a) -> dict:
    chrom, seq = _sequence(a.fasta, a.length)
    ms, ppms = _ppms(a.motifs)
    mats = _moods_matrices(ppms)
    t0 = time.perf_counter()
    results = _moods_scanner(mats, a.pvalue).scan(seq)
    t_scan = time.perf_counter() - t0
    start, length, mid, strand, score = [], [], [], [], []
    for i, res in enumerate(results):
        m = len(mats[i][0])
        for r in res:
            start.append(r.pos)
            score.append(r.score)
        k = len(res)
        length += [m] * k
        mid += [i // 2] * k
        strand += [i % 2] * k
    start = np.asarray(start, dtype=np.int64)
    _write(a.out, {"chrom": [chrom] * start.size, "start": start, "end": start + np.asarray(length, np.int64),
                   "strand": np.where(np.asarray(strand) == 0, "+", "-"),
                   "motif_id": np.asarray([m.id for m in ms], dtype=object)[np.asarray(mid, dtype=np.int64)],
                   "score": np.asarray(score)})
    return {"hits": int(start.size), "seconds_scan": t_scan}


def _hits_without_n(seqs: dict, chrom, start, end) -> int:
    """Hits whose window holds no N (or other non-ACGT letter): what motifgrid and MOODS can report.  memelite scores
    an N as 0, so every all-N window passes the matrices whose threshold is negative (26 of the 879 vertebrates at
    1e-4): 223,062 of its 245,956 hits on 300 chrX peaks were such windows (docs/benchmarks.md)."""
    from pipeline.io.genome import encode
    from workers.scan.plan import n_prefix

    import pandas as pd

    n_free = 0
    codes, names = pd.factorize(np.asarray(chrom, dtype=object))     # hashed: no per-record pass over every hit
    start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    for k, name in enumerate(names):
        sel = order[bounds[k]:bounds[k + 1]]
        bad = n_prefix(encode(seqs[name]))            # non-ACGT codes before each position
        n_free += int(np.count_nonzero(bad[end[sel]] == bad[start[sel]]))
    return n_free


def _counted_without_n(seqs: dict, chrom, start, end) -> dict:
    """``hits_without_n`` and the seconds it took (``seconds_diagnostic``: the caller's timing leaves them out —
    a count for the comparison, not part of the tool's job)."""
    t0 = time.perf_counter()
    n = _hits_without_n(seqs, chrom, start, end)
    return {"hits_without_n": n, "seconds_diagnostic": time.perf_counter() - t0}


def run_memelite(a) -> dict:
    import pandas as pd
    from memelite import fimo

    chrom, seq = _sequence(a.fasta, a.length)
    ms, ppms = _ppms(a.motifs)
    onehot = _onehot([seq], len(seq))
    t0 = time.perf_counter()
    res = fimo({m.id: p.T.copy() for m, p in zip(ms, ppms)}, onehot, threshold=a.pvalue, eps=0.0,
               reverse_complement=True)
    t_scan = time.perf_counter() - t0
    df = pd.concat([d for d in res if len(d)], ignore_index=True)
    _write(a.out, {"chrom": [chrom] * len(df), "start": df["start"].to_numpy(np.int64),
                   "end": df["end"].to_numpy(np.int64), "strand": df["strand"].to_numpy(),
                   "motif_id": df["motif_name"].to_numpy(), "score": df["score"].to_numpy(),
                   "pvalue": df["p-value"].to_numpy()})
    return {"hits": int(len(df)), **_counted_without_n({chrom: seq}, [chrom] * len(df), df["start"],
                                                                      df["end"]), "seconds_scan": t_scan}


def _records(fasta: str):
    import pyfaidx

    fa = pyfaidx.Fasta(fasta, as_raw=True)
    return [(name, fa[name][:].upper()) for name in fa.keys()]


def run_moods_records(a) -> dict:
    """``--all-records``: every record of a multi-record FASTA (a promoter set), one ``scan`` call each."""
    recs = _records(a.fasta)
    ms, ppms = _ppms(a.motifs)
    mats = _moods_matrices(ppms)
    t0 = time.perf_counter()
    scanner = _moods_scanner(mats, a.pvalue)
    cols = {"chrom": [], "start": [], "end": [], "strand": [], "motif_id": [], "score": []}
    for name, seq in recs:
        for i, res in enumerate(scanner.scan(seq)):
            m = len(mats[i][0])
            for r in res:
                cols["chrom"].append(name)
                cols["start"].append(r.pos)
                cols["end"].append(r.pos + m)
                cols["strand"].append("+-"[i % 2])
                cols["motif_id"].append(ms[i // 2].id)
                cols["score"].append(r.score)
    t_scan = time.perf_counter() - t0
    _write(a.out, cols)
    return {"hits": len(cols["start"]), "seconds_scan": t_scan, "records": len(recs)}


def run_memelite_records(a) -> dict:
    """``--all-records``: every record, one ``fimo`` call per record length (it takes a batch of equal-length
    one-hot sequences)."""
    import pandas as pd
    from memelite import fimo

    recs = _records(a.fasta)
    ms, ppms = _ppms(a.motifs)
    by_len: dict = {}
    for name, seq in recs:
        by_len.setdefault(len(seq), []).append((name, seq))
    t0 = time.perf_counter()
    frames = []
    for n, group in by_len.items():
        res = fimo({m.id: p.T.copy() for m, p in zip(ms, ppms)}, _onehot([g[1] for g in group], n), threshold=a.pvalue, eps=0.0,
                   reverse_complement=True)
        names = np.asarray([g[0] for g in group], dtype=object)
        for d in res:
            if len(d):
                d = d.copy()
                d["chrom"] = names[d["sequence_name"].to_numpy(np.int64)]
                frames.append(d)
    t_scan = time.perf_counter() - t0
    df = pd.concat(frames, ignore_index=True)
    _write(a.out, {"chrom": df["chrom"].to_numpy(), "start": df["start"].to_numpy(np.int64),
                   "end": df["end"].to_numpy(np.int64), "strand": df["strand"].to_numpy(),
                   "motif_id": df["motif_name"].to_numpy(), "score": df["score"].to_numpy(),
                   "pvalue": df["p-value"].to_numpy()})
    return {"hits": int(len(df)), **_counted_without_n(dict(recs), df["chrom"], df["start"], df["end"]),
            "seconds_scan": t_scan, "records": len(recs)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tool", choices=["moods", "memelite"])
    ap.add_argument("fasta")
    ap.add_argument("motifs")
    ap.add_argument("pvalue", type=float)
    ap.add_argument("out")
    ap.add_argument("--length", type=int, default=0)
    ap.add_argument("--all-records", action="store_true", help="scan every record (default: the first one)")
    a = ap.parse_args(argv)
    a.length = a.length or None
    if a.all_records:
        run = run_moods_records if a.tool == "moods" else run_memelite_records
    else:
        run = run_moods if a.tool == "moods" else run_memelite
    print(json.dumps(run(a)), flush=True)


if __name__ == "__main__":
    main()
