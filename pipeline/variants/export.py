"""A finished ``motifgrid variants`` folder → BED or TSV (``motifgrid export DIR``), streamed one Parquet part at a
time (bounded memory: a part holds one chunk's rows).

Rows are kept where ``max_qvalue`` (q <= it; the q-values of ``DIR/_qvalues.parquet``, joined as
:func:`pipeline.variants.outputs.read_variants` joins them) and ``calls`` (a subset of gain, loss, both, none) say.
Order: the rows' file order, as ``variants.tsv``: the chunks in the VCF's order (each a run of alleles of one contig,
in VCF line and ALT order), within an allele the motif file's order.  Not sorted by start: a VCF sorted by position
gives BED lines near genome order, but a window may start before an earlier variant's (``sort -k1,1 -k2,2n`` or
``bedtools sort`` where a tool needs sorted input).

BED is BED6+4: one line per row and allele side that has a best window (``ref_start`` / ``alt_start`` set), the REF
line before the ALT line: chrom, start (0-based: ``ref_start`` or ``alt_start``), end (start + the motif's length),
name ``motif_id|ref-or-alt|call|ID`` (the VCF's ID; ``chrom:pos:ref:alt`` where it is ``.``), score (the scan's BED
column 5: ``min(1000, round(-10 log10 p))`` of the side's p-value, :func:`pipeline.scan.export.bed_score`), strand,
then the side's log-odds score, its p-value, motif_name and the variant as ``chrom:pos:ref:alt``.

The motifs' lengths are not in the rows, nor can they be derived from them (a best window only has to cover the
edit): they are read from the run's motif source (``_run.json``: ``motifs_source``, ``motifs_select``), refused when
its checksum differs from the run's ``motifs_checksum``.  Coordinates are on the reference: an ALT window's start is
``alt_start`` (a window starting inside inserted or substituted bases at the edit's start plus its offset there, at
most the REF core's length) and its end that start + the motif's length, its length on the ALT haplotype, not its span
on the reference where an indel lies inside it.

TSV is ``variants.tsv``'s format (its header and columns: the rows' but ``vcf_line``, ``haplotype`` only from a run
with ``--haplotypes``, the atSNP columns from one with ``--atsnp``, then ``qvalue``), of the rows kept."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pipeline import MotifgridError
from pipeline.io import arrow, storage
from pipeline.io.extsort import write_lines
from pipeline.scan.export import ExportError, bed_score
from pipeline.variants.outputs import parts, read_steps, tsv_bytes, tsv_columns, tsv_header, with_qvalues
from pipeline.variants.task import CALLS

FORMATS = ("bed", "tsv")


def is_variants_folder(folder: str) -> bool:
    """``folder`` holds a ``motifgrid variants`` run: its ``_run.json`` has ``vcf_checksum`` (as ``motifgrid summary``
    tells)."""
    path = storage.join(folder, "_run.json")
    try:
        run = json.loads(storage.read_bytes(path)) if storage.exists(path) else None
    except (ValueError, OSError):
        return False
    return isinstance(run, dict) and "vcf_checksum" in run


def parse_calls(calls) -> list | None:
    """``calls`` (None, ``"gain,loss"`` or a list of them) checked against gain, loss, both, none."""
    if calls is None:
        return None
    got = [c.strip() for c in (calls.split(",") if isinstance(calls, str) else calls) if c.strip()]
    bad = [c for c in got if c not in CALLS]
    if bad or not got:
        raise ExportError(f"calls {', '.join(bad) or '(none)'}: choose among {', '.join(CALLS)}")
    return got


def export_variants(folder: str, format: str, out: str, max_qvalue: float | None = None, calls=None) -> int:
    """Write the finished variants run ``folder`` as ``format`` (``bed`` or ``tsv``, see the module docstring) to
    ``out`` (a file, written atomically; ``-`` for standard output: :func:`pipeline.io.storage.open_output`), the rows
    with q <= ``max_qvalue`` and a call among ``calls`` (default: every row); the lines written (BED: one per row and
    side with a window; TSV: one per row, the header left out)."""
    if format not in FORMATS:
        raise ExportError(f"{folder}: a variants folder exports as {' or '.join(FORMATS)}, not {format!r}")
    if max_qvalue is not None and not 0 < max_qvalue <= 1:
        raise ExportError(f"a q-value limit must be in (0, 1], got {max_qvalue}")
    keep = parse_calls(calls)
    run = _finished_run(folder)
    steps = read_steps(folder)
    cols = tsv_columns(bool(run.get("haplotypes")), bool(run.get("atsnp")))
    lengths = motif_lengths(folder, run) if format == "bed" else None
    n = 0
    with storage.open_output(out, "wb") as f:     # "-" is standard output; a link keeps being a link
        if format == "tsv":
            f.write(tsv_header(cols))
        for path in parts(folder)[1]:
            t = _kept(storage.read_parquet(path), steps, max_qvalue, keep)
            if format == "bed":
                lines = bed_lines(t, lengths, folder)
                write_lines(f, lines)
                n += len(lines)
            else:                                  # formatted aside, then one write: a closed pipe raises here
                f.write(tsv_bytes(t, cols))
                n += t.num_rows
    return n


def _finished_run(folder: str) -> dict:
    """The ``_run.json`` of a finished variants run."""
    if not storage.exists(folder):
        raise ExportError(f"{folder}: no such folder (the output folder of motifgrid variants)")
    if not is_variants_folder(folder):
        raise ExportError(f"{folder}: not a motifgrid variants folder (no _run.json with vcf_checksum)")
    if not (storage.exists(storage.join(folder, "_summary.json"))
            and storage.exists(storage.join(folder, "_qvalues.parquet"))):
        raise ExportError(f"{folder}: an unfinished variants run (no _summary.json, no q-values yet); rerun its "
                          "motifgrid variants with --resume to finish it")
    return json.loads(storage.read_bytes(storage.join(folder, "_run.json")))


def _kept(t: pa.Table, steps: tuple, max_qvalue: float | None, calls: list | None) -> pa.Table:
    """One part's rows with their ``qvalue`` (``_qvalues.parquet``'s step at each row's smaller p-value, as
    ``read_variants``), those the filters keep."""
    t = with_qvalues(t, *steps)
    q = arrow.to_numpy(t.column("qvalue"))
    mask = pa.array(q <= max_qvalue if max_qvalue is not None else np.ones(q.size, bool))
    if calls is not None:
        mask = pc.and_(mask, pc.is_in(_plain(t.column("call")), value_set=pa.array(calls, pa.string())))
    return t.filter(mask)


def motif_lengths(folder: str, run: dict) -> dict:
    """Motif id → its length, read from the run's motif source (``run``, its ``_run.json``: ``motifs_source``,
    ``motifs_select``) once its checksum is the run's; None for an id that matrices of different lengths share."""
    import warnings  # noqa: PLC0415

    from pipeline.motifs import motifs_checksum, read_motifs  # noqa: PLC0415

    src = run.get("motifs_source")
    why = f"{folder}: BED's end is a window's start + its motif's length, read from the run's motifs, {src},"
    try:
        same = motifs_checksum(src) == run.get("motifs_checksum")
        if same:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")            # the run said them
                motifs = read_motifs(src, select=run.get("motifs_select"))
    except (OSError, MotifgridError) as e:
        raise ExportError(f"{why} which cannot be read ({str(e).splitlines()[0]}); --format tsv needs no "
                          "motif") from None
    if not same:
        raise ExportError(f"{why} which has changed since the run (its checksum differs); --format tsv needs no "
                          "motif")
    out: dict = {}
    for m in motifs:
        k = int(m.matrix.shape[0])
        out[m.id] = k if out.get(m.id, k) == k else None
    return out


def _plain(col) -> pa.Array:
    """A column as one plain (not dictionary) array."""
    col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    return col.dictionary_decode() if pa.types.is_dictionary(col.type) else col


def _texts(values: np.ndarray, fmt) -> pa.Array:
    """``fmt(v)`` of every value, each distinct value formatted once (a motif's scores take few values)."""
    u, inv = np.unique(values, return_inverse=True)
    return pa.array([fmt(x) for x in u.tolist()], pa.string()).take(pa.array(inv.astype(np.int64).ravel()))


def _ints(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(np.asarray(values, np.int64)), pa.string())


def _lengths_of(motif: pa.Array, lengths: dict, folder: str) -> np.ndarray:
    """Each row's motif length (per distinct motif id)."""
    enc = motif.dictionary_encode()
    ids = enc.dictionary.to_pylist()
    missing = [m for m in ids if lengths.get(m) is None]
    if missing:
        what = "is not among" if missing[0] not in lengths else "names matrices of different lengths in"
        raise ExportError(f"{folder}: motif {missing[0]!r} {what} the run's motifs: the BED ends cannot be given")
    return np.asarray([lengths[m] for m in ids], np.int64)[arrow.to_numpy(enc.indices)]


def bed_lines(t: pa.Table, lengths: dict, folder: str = "") -> pa.Array:
    """The BED lines (no newlines) of the rows ``t``: per row its REF then its ALT line, a side without a window
    left out (see the module docstring)."""
    n = t.num_rows
    if n == 0:
        return pa.array([], pa.string())
    c = {k: _plain(t.column(k)) for k in ("chrom", "id", "ref", "alt", "motif_id", "motif_name", "call")}
    variant = pc.binary_join_element_wise(c["chrom"], _ints(arrow.to_numpy(t.column("pos"))), c["ref"], c["alt"], ":")
    vid = c["id"].fill_null(".")
    ident = pc.if_else(pc.equal(vid, "."), variant, vid)
    length = _lengths_of(c["motif_id"], lengths, folder)
    name_tail = pc.binary_join_element_wise(c["call"], ident, "|")
    sides = []
    for side in ("ref", "alt"):
        start_col = _plain(t.column(f"{side}_start"))
        start = arrow.to_numpy(start_col.fill_null(0)).astype(np.int64)
        p = arrow.to_numpy(t.column(f"{side}_pvalue")).astype(np.float64)
        cols = [c["chrom"], _ints(start), _ints(start + length),
                pc.binary_join_element_wise(c["motif_id"], pa.array([side] * n, pa.string()), name_tail, "|"),
                _ints(bed_score(p)), _plain(t.column(f"{side}_strand")).fill_null("."),
                _texts(arrow.to_numpy(t.column(f"{side}_score")).astype(np.float64), "{:.6g}".format),
                _texts(p, "{:.4g}".format), c["motif_name"].fill_null("."), variant]
        line = pc.binary_join_element_wise(*cols, "\t")
        sides.append(pc.if_else(start_col.is_valid(), line, pa.scalar(None, pa.string())))
    order = np.arange(2 * n).reshape(2, n).T.ravel()            # row 0's REF, row 0's ALT, row 1's REF, ...
    return pa.concat_arrays(sides).take(pa.array(order)).drop_null()
