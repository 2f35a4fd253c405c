"""What a variants run writes once its chunks are done: the q-values (Benjamini-Hochberg over every allele × motif
tested, on each row's smaller p-value), ``variants.tsv``, the input VCF annotated (``INFO`` ``MOTIFGRID``) and
``_summary.json``; :func:`read_variants` reads the rows back with their q-values."""
from __future__ import annotations

import json
import os
import time

import numpy as np
import pyarrow as pa

from pipeline.engine.dataset import iter_manifest
from pipeline.io import arrow, storage
from pipeline.io.schema import VARIANTS_SCHEMA
from pipeline.variants.task import CALLS, COLUMNS
from pipeline.variants.vcf import open_lines

INFO_HEADER = ('##INFO=<ID=MOTIFGRID,Number=.,Type=String,Description="Motifs whose best site the ALT makes or '
               'breaks (motifgrid variants): motif|call|log10(p_ref/p_alt)|ALT, call gain, loss or both">')


def parts(out: str):
    """The manifest entries and the rows' files, in chunk (file) order."""
    entries = sorted(iter_manifest(out, "chunk"), key=lambda e: e["chunk"])
    return entries, [storage.join(out, f) for e in entries for f in e["files"]]


def read_steps(out: str):
    """``(p, q)`` of ``DIR/_qvalues.parquet`` (see :func:`with_qvalues`)."""
    q = storage.read_parquet(storage.join(out, "_qvalues.parquet"))
    return arrow.to_numpy(q.column("pvalue")), arrow.to_numpy(q.column("qvalue"))


def with_qvalues(t: pa.Table, sp, sq) -> pa.Table:
    """The rows ``t`` with their ``qvalue``: the step at each row's smaller p-value."""
    p = np.minimum(arrow.to_numpy(t.column("ref_pvalue")), arrow.to_numpy(t.column("alt_pvalue")))
    return t.append_column("qvalue", pa.array(_qvalues(p, sp, sq), pa.float64()))


def qvalue_steps(files: list, tests: int):
    """``(p, q)`` ascending over the rows of ``files``: the q-value of a row of smaller p-value ``x`` is
    ``q[searchsorted(p, x)]``."""
    from pipeline.scan.qvalues import steps  # noqa: PLC0415

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
    sp, sq = read_steps(out)
    _, files = parts(out)
    tables = [storage.read_parquet(f) for f in files]
    t = with_qvalues(pa.concat_tables(tables) if tables else VARIANTS_SCHEMA.empty_table(), sp, sq)
    return t.select(columns) if columns else t


def rounded(x: np.ndarray, digits: int = 6) -> np.ndarray:
    """``x`` to ``digits`` significant digits, as the double nearest that decimal (an integer divided by an exact
    power of ten), so that its shortest text is the decimal; values whose power is beyond 10^22 are left as they are."""
    x = np.asarray(x, np.float64)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        k = (digits - 1 - np.floor(np.log10(np.abs(x)))).astype(np.float64)
        ok = np.isfinite(x) & (x != 0) & (np.abs(k) <= 22)
        k = np.where(ok, k, 0.0)
        scale = 10.0 ** np.abs(k)
        up = np.where(k >= 0, np.round(x * scale) / scale, np.round(x / scale) * scale)
    return np.where(ok, up, x)


def _text(column: pa.Array) -> pa.Array:
    """A column as TSV text: numbers to 6 significant digits in Arrow's own formatting (the shortest text that reads
    back as the same value), ``.`` for a missing value or NaN."""
    import pyarrow.compute as pc  # noqa: PLC0415

    if pa.types.is_floating(column.type):
        x = rounded(arrow.to_numpy(column.fill_null(np.nan)))
        column = pa.array(x, mask=np.isnan(x))
    return pc.fill_null(column.cast(pa.string()), ".")


def tsv_columns(haplotypes: bool = False, atsnp: bool = False) -> list:
    """``variants.tsv``'s columns: the rows' but ``vcf_line`` (``haplotype`` only with ``--haplotypes``, the atSNP
    columns only with ``--atsnp``), then ``qvalue``."""
    return [c for c in COLUMNS if c != "vcf_line" and (haplotypes or c != "haplotype")
            and (atsnp or not c.startswith("atsnp_"))] + ["qvalue"]


def in_order(fn, items: list, ahead: int | None = None):
    """``fn(item)`` of each item, yielded in order, computed on threads up to ``ahead`` items in advance (one per
    core): Arrow's reads, casts and CSV formatting release the GIL, and the results held stay bounded."""
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    ahead = ahead or max(1, min(8, os.cpu_count() or 1))
    with ThreadPoolExecutor(ahead) as pool:
        pending = [pool.submit(fn, x) for x in items[:ahead]]
        for i in range(len(items)):
            got = pending[i].result()
            pending[i] = None
            if i + ahead < len(items):
                pending.append(pool.submit(fn, items[i + ahead]))
            yield got


def tsv_bytes(t: pa.Table, cols: list) -> pa.Buffer:
    """``variants.tsv``'s lines of the rows ``t`` (with their ``qvalue``): formatted column by column by Arrow and
    its CSV writer (a Python line per row took 12 µs: 22 s of a GPU run's 1.8 M rows)."""
    import pyarrow.csv as csv  # noqa: PLC0415

    buf = pa.BufferOutputStream()
    if t.num_rows:
        csv.write_csv(pa.table({c: _text(t.column(c).combine_chunks()) for c in cols}), buf,
                      csv.WriteOptions(include_header=False, delimiter="\t", quoting_style="none"))
    return buf.getvalue()


def tsv_header(cols: list) -> bytes:
    return ("\t".join(cols) + "\n").encode()


def write_tsv(out: str, files: list, sp, sq, haplotypes: bool = False, atsnp: bool = False) -> int:
    """``variants.tsv``: a header line, then every row (file order) with its q-value; the rows written.  The files
    formatted on threads (``in_order``: 7.1 s of 3.7 M rows on one core)."""
    cols = tsv_columns(haplotypes, atsnp)

    def text(path: str):
        t = with_qvalues(storage.read_parquet(path), sp, sq)
        return t.num_rows, tsv_bytes(t, cols)

    n = 0
    with storage.open_output(storage.join(out, "variants.tsv"), "wb") as f:
        f.write(tsv_header(cols))
        for rows, data in in_order(text, files):
            f.write(data)
            n += rows
    return n


def write_vcf(out: str, files: list, vcf: str, region: str | None = None) -> int:
    """``variants.vcf``: the input with the MOTIFGRID INFO field on the records a motif's call concerns (the rows of
    ``files``; a haplotype's combined allele concerns several records and is left to the TSV); records annotated."""
    notes = _notes(files)
    n = 0
    with open_lines(vcf, region) as src, storage.open_output(storage.join(out, "variants.vcf"), "w") as dst:
        for i, text in enumerate(src, 1):
            if text.startswith("#CHROM"):
                dst.write(INFO_HEADER + "\n")
            elif i in notes and not text.startswith("#"):
                cols = text.rstrip("\r\n").split("\t")
                cols += ["."] * (8 - len(cols))
                field = "MOTIFGRID=" + notes[i]
                cols[7] = field if cols[7] in (".", "") else f"{cols[7]};{field}"
                text = "\t".join(cols) + "\n"
                n += 1
            dst.write(text)
    return n


def _notes(files: list) -> dict:
    """``{vcf line: "motif|call|log10ratio|ALT,..."}`` of the rows with a call, built by Arrow a file at a time (a
    Python string per row took 15 s of 8.9 M rows): each row's note ends in a comma, and a line's notes, adjacent in
    a file (a chunk's rows are by allele, then motif), are one slice of the notes' bytes."""
    import pyarrow.compute as pc  # noqa: PLC0415

    def one(path: str):
        t = storage.read_parquet(path, columns=["vcf_line", "motif_id", "call", "log10_ratio", "alt", "haplotype"])
        t = t.filter(pc.and_(pc.not_equal(t.column("call"), "none"), pc.is_null(t.column("haplotype"))))
        if not t.num_rows:
            return None
        motif = pc.replace_substring_regex(t.column("motif_id"), r"[|,;= \t]", "_")
        ratio = _text(pa.chunked_array([pa.array(rounded(arrow.to_numpy(t.column("log10_ratio")), 3))]))
        note = pc.binary_join_element_wise(motif, t.column("call"), ratio, t.column("alt"), "|")
        note = pc.binary_join_element_wise(note, pa.scalar(","), "").combine_chunks()
        offsets = np.frombuffer(note.buffers()[1], np.int32, len(note) + 1, note.offset * 4)
        return offsets, note.buffers()[2].to_pybytes(), arrow.to_numpy(t.column("vcf_line"))

    notes: dict = {}
    for got in in_order(one, files):
        if got is None:
            continue
        offsets, data, lines = got
        cut = np.flatnonzero(np.diff(lines)) + 1
        for a, b in zip(np.concatenate([[0], cut]).tolist(), np.concatenate([cut, [len(lines)]]).tolist()):
            text = data[offsets[a]:offsets[b] - 1].decode()
            line = int(lines[a])
            notes[line] = f"{notes[line]},{text}" if line in notes else text
    return notes


def finish(job, ctx, seconds: dict, device: str) -> dict:
    """q-values, ``variants.tsv``, ``variants.vcf`` and ``_summary.json`` (written last); the summary."""
    t0 = time.perf_counter()
    entries, files = parts(job.out)
    tests = sum(e["tests"] for e in entries)
    sp, sq = qvalue_steps(files, tests)
    storage.write_parquet(pa.table({"pvalue": pa.array(sp, pa.float64()), "qvalue": pa.array(sq, pa.float64())}),
                          storage.join(job.out, "_qvalues.parquet"))
    t1 = time.perf_counter()
    rows = write_tsv(job.out, files, sp, sq, job.settings.haplotypes, job.settings.atsnp)
    t2 = time.perf_counter()
    annotated = write_vcf(job.out, files, job.vcf, job.settings.region)
    t3 = time.perf_counter()
    calls = {c: sum(e["calls"][c] for e in entries) for c in CALLS}
    st = job.staged
    summary = {"alleles": st.alleles, "motifs": len(ctx.motif_ids), "tests": tests, "rows": rows, "calls": calls,
               "vcf_records_annotated": annotated, "pvalue": job.settings.pvalue, "device": device,
               "chunks": len(st.chunks), "exact_pvalues": sum(e["exact_fallbacks"] for e in entries),
               "staged": {k: v for k, v in st.as_dict().items() if k != "chunks"},
               **({"atsnp": {"samples": job.settings.atsnp_samples, "markov": ctx.markov}} if ctx.markov else {}),
               "seconds": time.perf_counter() - job.t_start,
               "seconds_steps": {**seconds, "outputs": time.perf_counter() - t0},
               "seconds_outputs": {"qvalues": t1 - t0, "tsv": t2 - t1, "vcf": t3 - t2}}
    storage.atomic_write_bytes(storage.join(job.out, "_summary.json"), json.dumps(summary, indent=1).encode())
    return summary
