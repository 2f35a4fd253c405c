"""What a variants run writes once its chunks are done: the q-values (Benjamini-Hochberg over every allele × motif
tested, on each row's smaller p-value), ``variants.tsv``, the input VCF annotated (``INFO`` ``MOTIFGRID``) and
``_summary.json``; :func:`read_variants` reads the rows back with their q-values."""
from __future__ import annotations

import json
import time

import numpy as np
import pyarrow as pa

from pipeline.engine.dataset import iter_manifest
from pipeline.io import arrow, storage
from pipeline.variants.task import CALLS, COLUMNS
from pipeline.variants.vcf import open_text

INFO_HEADER = ('##INFO=<ID=MOTIFGRID,Number=.,Type=String,Description="Motifs whose best site the ALT makes or '
               'breaks (motifgrid variants): motif|call|log10(p_ref/p_alt)|ALT, call gain, loss or both">')


def _parts(out: str):
    """The rows' files in chunk (file) order."""
    entries = sorted(iter_manifest(out, "chunk"), key=lambda e: e["chunk"])
    return entries, [storage.join(out, f) for e in entries for f in e["files"]]


def qvalue_steps(out: str, tests: int):
    """``(p, q)`` ascending: the q-value of a row of smaller p-value ``x`` is ``q[searchsorted(p, x)]``."""
    from pipeline.scan.qvalues import steps  # noqa: PLC0415

    _, files = _parts(out)
    ps = [np.minimum(arrow.to_numpy(t.column("ref_pvalue")), arrow.to_numpy(t.column("alt_pvalue")))
          for t in (storage.read_parquet(f, columns=["ref_pvalue", "alt_pvalue"]) for f in files)]
    p = np.concatenate(ps) if ps else np.zeros(0)
    values, counts = np.unique(p, return_counts=True)
    sp, sq, _ = steps(values, counts, max(tests, int(counts.sum())))
    return sp, sq


def _qvalues(p: np.ndarray, steps_p: np.ndarray, steps_q: np.ndarray) -> np.ndarray:
    i = np.searchsorted(steps_p, p, side="left")
    return steps_q[np.minimum(i, steps_q.size - 1)] if steps_q.size else np.ones(p.size)


def read_variants(out: str, columns=None) -> pa.Table:
    """Every row of a finished variants run, file order, with its ``qvalue``."""
    q = storage.read_parquet(storage.join(out, "_qvalues.parquet"))
    sp, sq = arrow.to_numpy(q.column("pvalue")), arrow.to_numpy(q.column("qvalue"))
    _, files = _parts(out)
    tables = [storage.read_parquet(f) for f in files]
    t = pa.concat_tables(tables) if tables else pa.table({c: pa.array([], pa.string()) for c in COLUMNS})
    if t.num_rows:
        p = np.minimum(arrow.to_numpy(t.column("ref_pvalue")), arrow.to_numpy(t.column("alt_pvalue")))
        t = t.append_column("qvalue", pa.array(_qvalues(p, sp, sq)))
    return t.select(columns) if columns else t


def _fmt(v) -> str:
    if v is None:
        return "."
    if isinstance(v, float):
        return "." if v != v else f"{v:.6g}"
    return str(v)


def write_tsv(out: str, sp, sq) -> int:
    """``variants.tsv``: a header line, then every row (file order) with its q-value; the rows written."""
    cols = [c for c in COLUMNS if c != "vcf_line"] + ["qvalue"]
    n = 0
    _, files = _parts(out)
    with storage.open_output(storage.join(out, "variants.tsv"), "w") as f:
        f.write("\t".join(cols) + "\n")
        for path in files:
            t = storage.read_parquet(path)
            p = np.minimum(arrow.to_numpy(t.column("ref_pvalue")), arrow.to_numpy(t.column("alt_pvalue")))
            q = _qvalues(p, sp, sq).tolist()
            values = [t.column(c).to_pylist() for c in cols[:-1]] + [q]
            f.writelines("\t".join(_fmt(v) for v in row) + "\n" for row in zip(*values))
            n += t.num_rows
    return n


def write_vcf(out: str, vcf: str) -> int:
    """``variants.vcf``: the input with the MOTIFGRID INFO field on the records a motif's call concerns; records
    annotated."""
    _, files = _parts(out)
    notes: dict = {}
    for path in files:
        t = storage.read_parquet(path, columns=["vcf_line", "motif_id", "call", "log10_ratio", "alt"])
        for line, motif, call, ratio, alt in zip(*(t.column(c).to_pylist() for c in t.column_names)):
            if call != "none":
                notes.setdefault(line, []).append(f"{_clean(motif)}|{call}|{ratio:.3g}|{alt}")
    n = 0
    with open_text(vcf) as src, storage.open_output(storage.join(out, "variants.vcf"), "w") as dst:
        for i, text in enumerate(src, 1):
            if text.startswith("#CHROM"):
                dst.write(INFO_HEADER + "\n")
            elif i in notes and not text.startswith("#"):
                cols = text.rstrip("\r\n").split("\t")
                cols += ["."] * (8 - len(cols))
                field = "MOTIFGRID=" + ",".join(notes[i])
                cols[7] = field if cols[7] in (".", "") else f"{cols[7]};{field}"
                text = "\t".join(cols) + "\n"
                n += 1
            dst.write(text)
    return n


def _clean(name: str) -> str:
    """A motif id as an INFO value allows (no separators of the field)."""
    return "".join("_" if c in "|,;= \t" else c for c in name)


def finish(job, ctx, seconds: dict, device: str) -> dict:
    """q-values, ``variants.tsv``, ``variants.vcf`` and ``_summary.json`` (written last); the summary."""
    t0 = time.perf_counter()
    entries, _ = _parts(job.out)
    tests = sum(e["tests"] for e in entries)
    sp, sq = qvalue_steps(job.out, tests)
    storage.write_parquet(pa.table({"pvalue": pa.array(sp, pa.float64()), "qvalue": pa.array(sq, pa.float64())}),
                          storage.join(job.out, "_qvalues.parquet"))
    rows = write_tsv(job.out, sp, sq)
    annotated = write_vcf(job.out, job.vcf)
    calls = dict.fromkeys(CALLS, 0)
    for path in _parts(job.out)[1]:
        for c in storage.read_parquet(path, columns=["call"]).column("call").to_pylist():
            calls[c] += 1
    st = job.staged
    summary = {"alleles": st.alleles, "motifs": len(ctx.motif_ids), "tests": tests, "rows": rows, "calls": calls,
               "vcf_records_annotated": annotated, "pvalue": job.settings.pvalue, "device": device,
               "chunks": len(st.chunks), "exact_pvalues": sum(e["exact_fallbacks"] for e in entries),
               "staged": {k: v for k, v in st.as_dict().items() if k != "chunks"},
               "seconds": time.perf_counter() - job.t_start,
               "seconds_steps": {**seconds, "outputs": time.perf_counter() - t0}}
    storage.atomic_write_bytes(storage.join(job.out, "_summary.json"), json.dumps(summary, indent=1).encode())
    return summary
