"""Hits dataset → BED, FIMO TSV or GFF3, streamed block file by block file (bounded memory).

BED is BED6+3: chrom, start, end, motif_id, score, strand, then log-odds score, p-value, motif_name.
Column 5 follows BED's convention, an integer 0-1000: ``min(1000, round(-10 * log10(p-value)))`` (the
PHRED-like scaling narrowPeak files use for column 5).  The p-value, not the log-odds score, because it is
comparable across motifs of different lengths and information content (a log-odds score of 12 bits is a strong
site for one matrix and a weak one for another) and it is never negative; -10 log10 p stays well inside the
range for any p-value a scan reports (p = 1e-4 is 40, 1e-20 is 200; 1000 only below 1e-100).  The log-odds
score itself (bits, may be negative) is column 7, the p-value column 8.
Coordinates inside motifgrid are 0-based half-open on the forward strand of the record (``chrom``).  BED keeps
them; FIMO TSV and GFF3 are 1-based inclusive (start + 1, end).  Files are visited in block order (the records'
order in the store) and each file's rows are put in (record, start) order (a stable sort: motifs of one start keep
the motif file's order), so BED and GFF3 are sorted by record, in the FASTA's order, and start.

FIMO TSV is sorted as FIMO 5.4.1 sorts it (``cisml_match_iterator_next``): by p-value, ascending; equal
p-values of different motifs with the later motif of the motif file first; then, within a motif, by FIMO's
start (the window's first base on "+", its last on "-").  Where FIMO leaves the order to its heap (same
p-value and start), genome order.  Records beyond ``motifgrid.export.sort-rows`` are sorted in
runs on disk and merged (:mod:`pipeline.io.extsort`).  The q-value column (and GFF3's ``qvalue=``) comes from
``HITS/_qvalues.parquet`` (empty without it); ``max_qvalue`` (or the scan's ``--max-qvalue``) keeps only
hits with q <= it.
"""
from __future__ import annotations

import functools
import os
from urllib.parse import quote, unquote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline import MotifgridError
from pipeline.io import arrow, storage

FORMATS = ("bed", "fimo", "gff3")


class ExportError(MotifgridError, ValueError):
    pass


class CommentNameWarning(UserWarning):
    """Records named ``#...`` in a BED or FIMO TSV export: readers that skip comment lines (bedtools, pandas with
    ``comment="#"``) drop their lines.  The CLI prints it as one line (``one_line``)."""
    one_line = True


def _warn_comment_names(names: list, fmt: str) -> bool:
    """Warn (once: True) when a record name starts with ``#`` in a format whose first column it is; GFF3
    percent-encodes it."""
    hashed = [x for x in names if str(x).startswith("#")]
    if hashed and fmt in ("bed", "fimo"):
        import warnings  # noqa: PLC0415

        warnings.warn(CommentNameWarning(
            f"record {hashed[0]!r} (and any other named '#...') starts a line of the {fmt} output with '#': readers "
            "that skip comment lines (bedtools, pandas with comment='#') will drop its hits"), stacklevel=3)
        return True
    return False


class SequenceWarning(UserWarning):
    """The FIMO export's ``matched_sequence`` left empty: the genome store the scan read is gone or has changed
    since.  The CLI prints it as one line (``one_line``)."""
    one_line = True


def _ordered_files(hits: str):
    """The path of every block file, in block order (= the records' order; local paths or URLs)."""
    from pipeline.engine.dataset import iter_manifest  # noqa: PLC0415

    if not storage.exists(storage.join(hits, "_run.json")):
        if not storage.exists(hits):
            raise ExportError(f"{hits}: no such folder (the output folder of a scan)")
        raise ExportError(f"{hits}: not a motifgrid hits dataset (no _run.json)")
    # only what ordering needs: the entries' per-row counts of many blocks would hold a lot of memory
    entries = sorted((e["block"], e["file"]) for e in iter_manifest(hits, drop_torn=True) if e.get("file"))
    for _, f in entries:
        yield storage.join(hits, f)


def _store_for(path):
    from pipeline.io.genome import GenomeError, GenomeStore  # noqa: PLC0415

    md = storage.read_parquet_schema(path).metadata or {}
    sp = md.get(b"genome.path", b"").decode()
    if not sp:
        return None
    try:
        store = GenomeStore(sp)
    except GenomeError as e:
        problem = f"cannot be read ({str(e).split(': ', 1)[-1]})"
    else:
        want = md.get(b"genome.checksum", b"").decode()
        if not want or store.checksum == want:
            return store
        problem = "holds another genome than the one scanned (its checksum differs)"
    import warnings  # noqa: PLC0415

    warnings.warn(SequenceWarning(f"matched_sequence left empty: the genome store the scan read, {sp}, {problem}"),
                  stacklevel=2)
    return None


#: codes 0-4 as letters on the forward strand and complemented (pipeline.io.genome.decode: 4 and above are N)
_LETTERS = np.frombuffer(b"ACGT" + b"N" * 252, np.uint8)
_COMPLEMENT = np.frombuffer(b"TGCA" + b"N" * 252, np.uint8)


def _sequences(store, chrom, starts, ends, strands) -> pa.Array:
    """The matched sequences (as read on their strand) of one file's hits, as an Arrow string array: one read of the
    packed stretch they span (a file holds one block's hits), then per window length one NumPy gather of every
    window's codes (reversed and complemented on ``-``) into the array's data buffer.  (A Python slice and translate
    per hit took 6.5 of a 14.8 M-hit FIMO export's 50 thread-s.)"""
    n = len(starts)
    if store is None or n == 0:
        return pa.array([""] * n, pa.string())
    rec = store.records
    names, inv = np.unique(chrom, return_inverse=True)
    offsets = rec.offsets[[rec.index[x] for x in names.tolist()]][inv]
    lo_p = np.asarray(starts, np.int64) + offsets
    length = np.asarray(ends, np.int64) - np.asarray(starts, np.int64)
    lo = int(lo_p.min())
    codes = np.asarray(store.read_packed(lo, int((lo_p + length).max())), np.uint8)
    out_off = np.zeros(n + 1, np.int64)
    np.cumsum(length, out=out_off[1:])
    data = np.empty(int(out_off[-1]), np.uint8)
    minus = np.asarray(strands) == "-"
    for w in np.unique(length).tolist():
        rows = np.flatnonzero(length == w)
        steps = np.arange(w)
        win = codes[(lo_p[rows] - lo)[:, None] + steps]                      # (k, w) forward codes
        text = np.where(minus[rows, None], _COMPLEMENT[win[:, ::-1]], _LETTERS[win])
        data[(out_off[rows])[:, None] + steps] = text
    return pa.StringArray.from_buffers(n, pa.py_buffer(out_off.astype(np.int32)), pa.py_buffer(data))


def _qvalue_setting(hits: str, max_qvalue: float | None):
    """(QvalueMap or None, the q-value limit to apply or None)."""
    from pipeline.scan.qvalues import map_and_limit  # noqa: PLC0415

    try:
        return map_and_limit(hits, max_qvalue)
    except ValueError as e:
        raise ExportError(str(e)) from None


def _motif_order(hits: str, qmap) -> dict:
    """Motif id → position in the motif file (FIMO's tie order), from the run's motif summary."""
    path = storage.join(hits, "_motif_summary.parquet")
    ids = (storage.read_parquet(path, columns=["motif_id"]).column("motif_id").to_pylist()
           if storage.exists(path) else (qmap.ids if qmap else []))
    return {m: i for i, m in reversed(list(enumerate(ids)))}


def export(hits: str, fmt: str, out: str, with_sequence: bool = True, max_qvalue: float | None = None,
           sort: str = "fimo") -> int:
    """Write ``hits`` as ``fmt`` to ``out`` (a file, written atomically; ``-`` for standard output; see
    :func:`pipeline.io.storage.open_output`); return the number of records.  ``max_qvalue``: only hits with
    q <= it (default: the scan's ``--max-qvalue``, if any).  ``sort="none"``: a FIMO TSV in genome order, as
    FIMO's ``--text`` writes it, streamed from the first file on (FIMO's p-value order needs every hit first)."""
    from pipeline.io.extsort import ExternalSort, write_lines  # noqa: PLC0415

    if fmt not in FORMATS:
        raise ExportError(f"unknown export format {fmt!r}; choose one of {', '.join(FORMATS)}")
    from pipeline.scan.read import genomic_convention  # noqa: PLC0415

    qmap, limit = _qvalue_setting(hits, max_qvalue)
    convention = genomic_convention(hits)
    n = 0
    store = None
    sorter = ranks = None
    warned = False
    if sort not in ("fimo", "none"):
        raise ExportError(f"unknown --sort {sort!r}; choose fimo or none")
    if fmt == "fimo" and sort == "fimo":    # FIMO's order needs every record first: sorted runs beyond sort-rows
        import dask.config  # noqa: PLC0415

        sorter = ExternalSort(None, int(dask.config.get("motifgrid.export.sort-rows")))
        ranks = _motif_order(hits, qmap)
    files = list(_ordered_files(hits))
    if files and with_sequence and fmt == "fimo":
        store = _store_for(files[0])
    # BED has no q-value column: the map is looked up only to keep q <= --max-qvalue (1.5 s of 14.8 M hits)
    need_q = fmt != "bed" or limit is not None
    job = functools.partial(_file_records, fmt=fmt, qmap=qmap if need_q else None, limit=limit, store=store,
                            ranks=ranks, convention=convention, with_q=qmap is not None)
    try:
        with storage.open_output(out, "wb") as f:   # "-" is standard output; a link keeps being a link
            if fmt == "fimo":
                f.write(b"motif_id\tmotif_alt_id\tsequence_name\tstart\tstop\tstrand\tscore\tp-value\tq-value\tmatched_sequence\n")
            elif fmt == "gff3":
                f.write(b"##gff-version 3\n")
            for rows, names, parts in _in_order(job, files):
                warned = warned or _warn_comment_names(names, fmt)
                for rec, keys in parts:
                    if sorter is None:
                        write_lines(f, rec)
                    else:
                        sorter.add(keys, rec)
                n += rows
            if sorter is not None:
                sorter.write(f)
    finally:
        if sorter is not None:
            sorter.close()
    return n


def _in_order(job, files: list):
    """``job(file)`` of every file, in order, computed on ``motifgrid.export.threads`` threads a few files ahead
    (Arrow's compute, Parquet reading and NumPy's sorts run without the GIL beside the Python formatting of
    another file; memory: a few files' records)."""
    import dask.config  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    from workers.backend import cpu_count  # noqa: PLC0415

    threads = int(dask.config.get("motifgrid.export.threads", default=0) or min(4, cpu_count()))
    if threads <= 1:
        yield from map(job, files)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="export") as pool:
        ahead: list = []
        it = iter(files)
        for path in it:
            ahead.append(pool.submit(job, path))
            if len(ahead) > threads:
                yield ahead.pop(0).result()
        for fut in ahead:
            yield fut.result()


def _file_records(path: str, fmt: str, qmap, limit, store, ranks, convention, with_q: bool):
    """One block file's records: (rows, its record names, [(lines, FIMO sort keys or None), ...])."""
    from pipeline.scan.qvalues import add_qvalues, family_codes  # noqa: PLC0415

    t = add_qvalues(storage.read_parquet(path), qmap, limit)
    if t.num_rows == 0:
        return 0, [], []
    chrom = t.column("chrom").combine_chunks()
    # files are grouped by motif row: (record, start) order; records' dictionary is in store order
    o = np.lexsort((arrow.to_numpy(t.column("start")), chrom.indices.to_numpy()))
    t = t.take(pa.array(o))
    c = _columns(t)
    if ranks is not None:                    # per dictionary entry, not per row
        c["rank"] = family_codes(t.column("motif_id"), ranks)
    start, end = c["start"].astype(np.int64), c["end"].astype(np.int64)
    if convention is not None:               # --parse-genomic-coord: on the genome
        c, start, end = _on_genome(c, start, end, convention)
    parts = []
    for lo in range(0, len(start), _CHUNK):       # bounded memory whatever a file holds
        hi = lo + _CHUNK
        part = {k: v[lo:hi] for k, v in c.items()}
        rec = _records(fmt, part, start[lo:hi], end[lo:hi], store, with_q)
        parts.append((rec, _fimo_keys(part, start[lo:hi], end[lo:hi]) if ranks is not None else None))
    return t.num_rows, chrom.dictionary.to_pylist(), parts


_CHUNK = 1 << 20      # records formatted at a time (a block file holds ~230 k hits of chrX x 879 at 1e-4)


def _fimo_keys(c: dict, start: np.ndarray, end: np.ndarray) -> tuple:
    """FIMO's sort keys (see the module docstring): the p-value, then one integer: the motif's position in the
    motif file reversed (bits 40-62: later motifs first) and FIMO's start (bits 0-39).  Ties stay in the input's
    genome order (the sort is stable)."""
    fstart = np.where(c["strand"] == "-", end, start + 1)
    later = (np.int64((1 << 23) - 1) - np.maximum(c["rank"], 0)) << np.int64(40)
    return c["pvalue"].astype(np.float64), later | fstart


#: text columns kept as Arrow dictionary arrays too (``<name>_dict``): formatted per dictionary entry, taken by Arrow
_DICT_COLUMNS = ("chrom", "strand", "motif_id", "motif_name")


def _columns(t: pa.Table) -> dict:
    """A file's columns: numbers as NumPy arrays; the text columns as NumPy object arrays (references into each
    dictionary: no string made per row) and as their Arrow dictionary arrays under ``<name>_dict``."""
    c = {}
    for k in t.column_names:
        col = t.column(k).combine_chunks()
        if pa.types.is_dictionary(col.type):
            c[f"{k}_dict"] = col
            c[k] = col.dictionary.to_numpy(zero_copy_only=False)[col.indices.to_numpy(zero_copy_only=False)]
        else:
            c[k] = col.to_numpy(zero_copy_only=False)
    return c


def _dtexts(c: dict, name: str, fmt=str) -> pa.Array:
    """Column ``name`` as text: through its dictionary where it has one (each entry formatted once, then Arrow's
    take), else :func:`_texts`."""
    d = c.get(f"{name}_dict")
    if d is None:
        return _texts(c[name], fmt)
    return pa.array([fmt(x) for x in d.dictionary.to_pylist()], pa.string()).take(d.indices)


def _codes(c: dict, name: str) -> tuple:
    """(codes (n,) int64, values): a text column as indices into its distinct values."""
    d = c.get(f"{name}_dict")
    if d is not None:
        return d.indices.to_numpy(zero_copy_only=False).astype(np.int64), d.dictionary.to_pylist()
    u, inv = np.unique(c[name], return_inverse=True)
    return inv.astype(np.int64), u.tolist()


def _texts(values: np.ndarray, fmt, suffix: str = "") -> pa.Array:
    """``fmt(v) + suffix`` of every value as an Arrow string array, each distinct value formatted once: a motif's
    scores and p-values take few values (its score lattice), so 14.8 M hits of chrX × 879 motifs format ~1 % of
    their values in Python; the rest is Arrow's (C++) take."""
    u, inv = np.unique(values, return_inverse=True)
    text = [fmt(x) + suffix for x in u.tolist()]
    return pa.array(text, pa.string()).take(pa.array(inv.astype(np.int32, copy=False)))


def _ints(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(np.asarray(values, np.int64)), pa.string())       # exact; Arrow's C++ cast


def _records(fmt: str, c: dict, start: np.ndarray, end: np.ndarray, store, with_q: bool) -> pa.Array:
    """One file's records as an Arrow string array of lines (no newlines), formatted column by column: distinct
    values through Python's format once each (:func:`_texts`, the same text as before), integers by Arrow's cast,
    the lines joined by Arrow (``binary_join_element_wise``).  Per-row Python (``map``/``"\t".join`` over 14.8 M
    hits) made a BED export of chrX × 879 twice as long as its scan, GFF3 four times (issue 46)."""
    n = len(start)
    chrom = _dtexts(c, "chrom")
    score = _texts(c["score"], "{:.6g}".format)
    strand = _dtexts(c, "strand")
    if fmt == "bed":
        cols = [chrom, _ints(start), _ints(end), _dtexts(c, "motif_id"), _ints(bed_score(c["pvalue"])), strand,
                score, _texts(c["pvalue"], "{:.4g}".format), _dtexts(c, "motif_name")]
    elif fmt == "fimo":
        seqs = _sequences(store or None, c.get("record", c["chrom"]), c.get("record_start", start),
                          c.get("record_end", end), c.get("record_strand", c["strand"]))
        q = (_texts(np.where(np.isnan(c["qvalue"]), -1.0, c["qvalue"]), lambda v: "" if v < 0 else f"{v:.3g}")
             if with_q else pa.array([""] * n, pa.string()))
        cols = [_dtexts(c, "motif_id"), _dtexts(c, "motif_name"), chrom, _ints(start + 1), _ints(end), strand,
                score, _texts(c["pvalue"], "{:.3g}".format), q, seqs]
    else:
        esc: dict = {}
        e = (lambda v: esc[v] if v in esc else esc.setdefault(v, _gff_escape(v)))      # noqa: E731
        # per motif, the attributes up to the p-value ("Name=…;motif_id=…;pvalue="), then the p-value and q-value
        ids, names = _codes(c, "motif_id"), _codes(c, "motif_name")
        m = len(names[1])
        head = _texts(ids[0] * m + names[0], lambda k: "Name={};motif_id={};pvalue=".format(e(names[1][k % m]),
                                                                                             e(ids[1][k // m])))
        parts = [head, _texts(c["pvalue"], "{:.4g}".format)]
        if with_q:
            parts.append(_texts(np.where(np.isnan(c["qvalue"]), -1.0, c["qvalue"]),
                                lambda v: ";qvalue=" + ("" if v < 0 else f"{v:.4g}")))
        attrs = pc.binary_join_element_wise(*parts, "")
        const = {t: pa.array([t] * n, pa.string()) for t in ("motifgrid", "TF_binding_site", ".")}
        cols = [_dtexts(c, "chrom", e), const["motifgrid"], const["TF_binding_site"], _ints(start + 1), _ints(end),
                score, strand, const["."], attrs]
    return pc.binary_join_element_wise(*cols, "\t")


def _on_genome(c: dict, start: np.ndarray, end: np.ndarray, convention: str):
    """A file's columns in genome coordinates (:mod:`pipeline.scan.genomic_coords`), the record's own kept under
    ``record``, ``record_start``, ``record_end``, ``record_strand`` (the FIMO export's matched sequences)."""
    from pipeline.scan.genomic_coords import RecordCoords  # noqa: PLC0415

    names, rec = np.unique(c["chrom"], return_inverse=True)
    coords = RecordCoords(names.tolist(), convention)
    ci, gs, ge, st = coords.genome(rec, start, end, c["strand"])
    c = {**c, "record": c["chrom"], "record_start": start, "record_end": end, "record_strand": c["strand"],
         "chrom": np.asarray(coords.contigs, dtype=object)[ci], "strand": st.astype(object)}
    c.pop("chrom_dict", None)
    c.pop("strand_dict", None)
    return c, gs, ge


def bed_score(pvalue: np.ndarray) -> np.ndarray:
    """BED column 5 of hits with these p-values: ``min(1000, round(-10 * log10(p)))``, int64, 0-1000
    (half up; p = 0 gives 1000)."""
    p = np.asarray(pvalue, dtype=np.float64)
    with np.errstate(divide="ignore"):
        s = np.floor(-10.0 * np.log10(p) + 0.5)
    return np.clip(np.nan_to_num(s, nan=0.0, posinf=1000.0), 0, 1000).astype(np.int64)


def _gff_escape(s: str) -> str:
    """Percent-encode (UTF-8) all but ASCII letters, digits and ``._-:+`` and space (GFF3 reserves ``;=&,%``)."""
    return quote(str(s), safe="._-:+ ")


def parse_export(path: str, fmt: str):
    """Read an export back as (chrom, start0, end0, strand, motif_id, score) tuples: for round-trip tests.
    For BED the tuples also carry the BED score (column 5), the p-value and motif_name."""
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("motif_id\t") or not line.strip():
                continue
            p = line.rstrip("\n").split("\t")
            if fmt == "bed":
                rows.append((p[0], int(p[1]), int(p[2]), p[5], p[3], float(p[6]), int(p[4]), float(p[7]), p[8]))
            elif fmt == "fimo":
                rows.append((p[2], int(p[3]) - 1, int(p[4]), p[5], p[0], float(p[6])))
            else:
                attrs = dict(kv.split("=", 1) for kv in p[8].split(";"))
                rows.append((unquote(p[0]), int(p[3]) - 1, int(p[4]), p[6], unquote(attrs["motif_id"]), float(p[5])))
    return rows


# ------------------------------------------------------------------------------------ peaks × motifs matrix
MATRIX_VALUES = ("any", "count", "best-score")


def export_matrix(hits: str, out: str, value: str = "any") -> tuple[int, int, int]:
    """The peaks × motifs matrix of a scan, as motifmatchr hands it to chromVAR: ``out/matrix.mtx`` (Matrix Market,
    coordinate: R's ``Matrix::readMM``, ``scipy.io.mmread``) of every record — or every BED region of a ``--regions``
    scan — by every motif, ``out/rows.tsv`` (name, chrom, start, end; 0-based, half-open) and ``out/cols.tsv``
    (motif_id, motif_name), from ``_region_counts.parquet``.  ``value``: ``any`` (1 where the region has a hit of the
    motif), ``count`` (its hits) or ``best-score`` (its best hit's score).  Every hit at the scan's p-value counts
    (``--max-qvalue`` does not apply: the counts are the scan's).  Returns (rows, columns, non-zero entries)."""
    import scipy.io  # noqa: PLC0415
    import scipy.sparse  # noqa: PLC0415

    from pipeline.scan.region_counts import REGION_COUNTS_FILE  # noqa: PLC0415

    if value not in MATRIX_VALUES:
        raise ExportError(f"unknown --value {value!r}; choose one of {', '.join(MATRIX_VALUES)}")
    counts_file = storage.join(hits, REGION_COUNTS_FILE)
    if not storage.exists(counts_file):
        next(iter(_ordered_files(hits)), None)            # not a dataset: say so
        raise ExportError(f"{hits}: has no {REGION_COUNTS_FILE} (scanned with --no-region-counts, or unfinished)")
    t = storage.read_parquet(counts_file)
    motifs = storage.read_parquet(storage.join(hits, "_motif_summary.parquet"), columns=["motif_id", "motif_name"])
    col_of = {m: j for j, m in enumerate(motifs.column("motif_id").to_pylist())}
    from pipeline.scan.read import run_file  # noqa: PLC0415

    params = run_file(hits)
    rows = _matrix_rows(hits, t, params)
    # a record's row by its name (unique in a store; shown in genome coordinates with --parse-genomic-coord); a BED
    # region's by its name and place (names may repeat)
    by_name = params.get("regions") is None
    row_of = {(key[0] if by_name else key): i for i, key in enumerate(rows)}
    keys = (t.column("region").to_pylist() if by_name else
            zip(*(t.column(c).to_pylist() for c in ("region", "chrom", "start", "end"))))
    i = np.fromiter((row_of[k] for k in keys), np.int64, count=t.num_rows)
    j = np.fromiter((col_of[m] for m in t.column("motif_id").to_pylist()), np.int64, count=t.num_rows)
    v = (np.ones(t.num_rows, np.int64) if value == "any" else
         arrow.to_numpy(t.column("hits")).astype(np.int64) if value == "count" else
         arrow.to_numpy(t.column("best_score")).astype(np.float64))
    m = scipy.sparse.coo_matrix((v, (i, j)), shape=(len(rows), len(col_of)))
    os.makedirs(out, exist_ok=True)
    scipy.io.mmwrite(os.path.join(out, "matrix.mtx"), m, field="integer" if value != "best-score" else "real",
                     comment=f" motifgrid peaks x motifs of {hits}: {value}; rows: rows.tsv, columns: cols.tsv")
    storage.atomic_write_bytes(os.path.join(out, "rows.tsv"), ("name\tchrom\tstart\tend\n" + "".join(
        f"{n}\t{c}\t{s}\t{e}\n" for n, c, s, e in rows)).encode())
    storage.atomic_write_bytes(os.path.join(out, "cols.tsv"), ("motif_id\tmotif_name\n" + "".join(
        f"{a}\t{b}\n" for a, b in zip(*(motifs.column(c).to_pylist() for c in ("motif_id", "motif_name"))))).encode())
    return len(rows), len(col_of), int(m.nnz)


def _matrix_rows(hits: str, counts, params: dict) -> list:
    """(name, chrom, start, end) of every record of the scan's store, or every BED region of a ``--regions`` scan, in
    the store's order; where those cannot be read back (moved, changed), the rows of ``counts`` (regions with a
    hit), with a warning."""
    import warnings  # noqa: PLC0415

    from pipeline.io.genome import GenomeError, file_checksum  # noqa: PLC0415
    from pipeline.io.regions import RegionError, read_bed  # noqa: PLC0415

    first = next(iter(_ordered_files(hits)), None)
    problem = "its genome store cannot be read"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SequenceWarning)
            store = _store_for(first) if first else None
        if store is not None and params.get("regions") is None:
            rec = store.records
            if params.get("parse_genomic_coord"):    # each record where it lies on the genome
                from pipeline.scan.genomic_coords import RecordCoords  # noqa: PLC0415

                rc = RecordCoords(list(rec.names), params["parse_genomic_coord"])
                return [(n, rc.contigs[k], f, la + 1) for n, k, f, la in zip(rec.names, rc.contig.tolist(),
                                                                             rc.first.tolist(), rc.last.tolist())]
            return [(n, n, 0, int(length)) for n, length in zip(rec.names, rec.lengths.tolist())]
        if store is not None:
            if file_checksum(params["regions"]) == params.get("regions_checksum"):
                reg = read_bed(params["regions"], store.records)
                names = store.records.names
                return [(n, names[r], s, e) for n, r, s, e in zip(reg.names, reg.record.tolist(), reg.start.tolist(),
                                                                  reg.end.tolist())]
            problem = f"its BED regions ({params['regions']}) have changed"
    except (GenomeError, RegionError, OSError) as e:
        problem = f"its inputs cannot be read back ({str(e).splitlines()[0]})"
    warnings.warn(SequenceWarning(f"{hits}: {problem}: the matrix has the rows with a hit only"), stacklevel=3)
    seen = dict.fromkeys(zip(*(counts.column(c).to_pylist() for c in ("region", "chrom", "start", "end"))))
    return list(seen)
