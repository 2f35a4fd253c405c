"""Ingest's FASTA opening: what the fresh index (issue 14) costs, and the whole ingest.

    python benchmarks/ingest_index.py FASTA [FASTA ...] [--repeats 3] [--work DIR] [--json FILE]

For each FASTA (e.g. dm3_upstream2000.fa.gz, hs37_chrX_1-70Mb.fa.gz from ../shared/data/get-genomes.sh, which
come with samtools .fai/.gzi beside them), measured --repeats times, best and spread reported:

1. ``open``: ``pipeline.genome._open_fasta`` — the one pass that computes the checksum, counts records and
   bases, and decompresses a compressed input into the temporary folder; then pyfaidx builds its index there.
2. ``open_beside``: what ingest did before: the checksum pass, then pyfaidx reading the index beside the input
   (``rebuild=False``; bgzip through pyfaidx's BGZF reader).  Only where an index exists beside the input;
   it may be stale, which is why it is no longer done.
3. ``read``: reading every record whole through each of the two (what ingest's block reads add up to).
4. ``ingest``: ``motifgrid ingest`` end to end (store written into --work, removed after).

Timings depend on the machine's load: run it alone.
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path


def _best(times: list) -> dict:
    return {"best_s": round(min(times), 3), "median_s": round(statistics.median(times), 3), "runs": len(times)}


def _read_all(fa) -> int:
    return sum(len(fa[k][0:len(fa[k])]) for k in fa.keys())


def measure(path: Path, work: Path, repeats: int) -> dict:
    import pyfaidx

    from pipeline.genome import _open_fasta, file_checksum, ingest, sniff_fasta

    kind = sniff_fasta(path)
    rec: dict = {"fasta": str(path), "kind": kind, "bytes": path.stat().st_size}
    t_open, t_read, t_old, t_old_read, t_ingest = [], [], [], [], []
    for _ in range(repeats):
        tmp = Path(tempfile.mkdtemp(dir=work))
        t0 = time.perf_counter()
        fa, _, tally = _open_fasta(path, kind, tmp)
        t_open.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        rec["bases"] = _read_all(fa)
        t_read.append(time.perf_counter() - t0)
        rec["records"] = tally.records
        fa.close()
        shutil.rmtree(tmp)
        if Path(str(path) + ".fai").exists():
            t0 = time.perf_counter()
            file_checksum(path)
            old = pyfaidx.Fasta(str(path), as_raw=True, rebuild=False, build_index=False)
            t_old.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            _read_all(old)
            t_old_read.append(time.perf_counter() - t0)
            old.close()
        store = work / "bench.zarr"
        t0 = time.perf_counter()
        ingest(path, store)
        t_ingest.append(time.perf_counter() - t0)
        shutil.rmtree(store)
    rec["open"], rec["read"], rec["ingest"] = _best(t_open), _best(t_read), _best(t_ingest)
    if t_old:
        rec["open_beside"], rec["read_beside"] = _best(t_old), _best(t_old_read)
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("fasta", nargs="+", type=Path, help="FASTA files (plain, gzip, bgzip)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per measurement (default 3)")
    ap.add_argument("--work", type=Path, default=None, help="folder for temporary copies and stores")
    ap.add_argument("--json", help="also write the records here (one JSON object a line)")
    a = ap.parse_args(argv)
    work = a.work or Path(tempfile.mkdtemp(prefix="ingest-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    out = []
    for f in a.fasta:
        rec = measure(f, work, a.repeats)
        print(json.dumps(rec), flush=True)
        out.append(rec)
    if a.json:
        Path(a.json).write_text("".join(json.dumps(r) + "\n" for r in out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
