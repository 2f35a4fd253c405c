"""Reading a scan's results back: ``read_hits`` (q-values joined, ``--max-qvalue`` applied, genomic coordinates
where asked), its ``_run.json``, the per-motif summary ranked by hits."""
from __future__ import annotations

import json

import numpy as np
import pyarrow as pa

from pipeline.engine.dataset import table_tsv
from pipeline.io import arrow, storage
from pipeline.io.schema import HITS_SCHEMA, REGION_HITS_SCHEMA
from pipeline.scan.motif_set import ScanError


def rank_motifs(table: pa.Table) -> pa.Table:
    """The per-motif table (``_motif_summary.parquet``) by hits, most first; ties keep the motif file's order.
    Reordered in Python (a row per motif): ``Table.take`` imports ``pyarrow.compute``, 0.09 s of a 300-peak scan."""
    order = np.argsort(-arrow.to_numpy(table.column("hits")).astype(np.int64), kind="stable").tolist()
    columns = {}
    for name in table.column_names:
        values = table.column(name).to_pylist()
        columns[name] = [values[i] for i in order]
    return arrow.table(columns, schema=table.schema)


def motif_summary_tsv(table: pa.Table) -> bytes:
    """``HITS/_motif_summary.tsv``: every motif (id, name, hits on each strand, reachable, windows, tests), most
    hits first."""
    return table_tsv(rank_motifs(table))


def run_file(out: str) -> dict:
    """The dataset's ``_run.json`` ({} where it has none or cannot be read as JSON)."""
    try:
        return json.loads(storage.read_bytes(storage.join(out, "_run.json")))
    except (FileNotFoundError, ValueError):
        return {}


def hits_schema(out: str, params: dict | None = None) -> pa.Schema:
    """The schema of a hits dataset's files (with ``region`` when it is a scan of BED regions); ``params``: its
    ``_run.json`` where already read."""
    return REGION_HITS_SCHEMA if (run_file(out) if params is None else params).get("regions") else HITS_SCHEMA


def genomic_convention(out: str) -> str | None:
    """The record names' convention when the scan of ``out`` ran with ``--parse-genomic-coord``
    (:mod:`pipeline.scan.genomic_coords`), else None."""
    return run_file(out).get("parse_genomic_coord")


def read_hits(out: str, columns=None, filter=None, max_qvalue: float | None = None) -> pa.Table:
    """Read a hits dataset (small ones; large ones are streamed file by file, as :mod:`pipeline.scan.export` does).

    ``columns``: of :data:`pipeline.io.schema.HITS_READ_SCHEMA` (default all; ``region`` too for a scan of BED
    regions): the files' columns and ``qvalue``,
    joined per (motif_id, p-value) from ``HITS/_qvalues.parquet`` (null when the dataset has none: scanned
    with ``--no-qvalue`` or unfinished).  ``filter``: a pyarrow expression on the files' columns.
    ``max_qvalue``: only hits with q <= it; by default the scan's ``--max-qvalue`` when it was given
    (``max_qvalue=1`` reads every hit).  A scan with ``--parse-genomic-coord`` reads in genome coordinates, the
    record's name in ``record`` after ``chrom`` (:func:`pipeline.scan.genomic_coords.to_genome`)."""
    params = run_file(out)
    schema = hits_schema(out, params)
    want = list(schema.names) + ["qvalue"] if columns is None else list(columns)
    convention = params.get("parse_genomic_coord")
    if convention is None:
        return _read_files(out, schema, want, filter, max_qvalue)
    from pipeline.scan.genomic_coords import to_genome  # noqa: PLC0415

    if columns is None:
        want.insert(want.index("chrom") + 1, "record")
    files_cols = [c for c in dict.fromkeys(want + ["chrom", "start", "end", "strand"]) if c != "record"]
    return to_genome(_read_files(out, schema, files_cols, filter, max_qvalue), convention).select(want)


def _read_files(out: str, schema: pa.Schema, want: list, filter, max_qvalue) -> pa.Table:
    """:func:`read_hits`' columns ``want`` of the files (and the joined ``qvalue``), in record coordinates."""
    import pyarrow.compute as pc  # noqa: PLC0415
    import pyarrow.dataset as ds  # noqa: PLC0415

    from pipeline.scan.qvalues import add_qvalues, map_and_limit  # noqa: PLC0415

    fs, path = storage.arrow_source(out)
    d = ds.dataset(path, filesystem=fs, format="parquet", schema=schema)
    try:
        qmap, limit = map_and_limit(out, max_qvalue)      # the map is small: one row per q-value step
    except ValueError as e:
        raise ScanError(str(e)) from None
    if "qvalue" not in want and limit is None:
        return d.to_table(columns=want, filter=filter)
    if limit is not None:                    # q <= Q is p <= the motif's cutoff: never above the largest cutoff
        top = float(qmap.cutoffs(limit).max(initial=-1.0))
        cut = pc.field("pvalue") <= top
        filter = cut if filter is None else (filter & cut)
    base = [c for c in want if c != "qvalue"]
    t = d.to_table(columns=list(dict.fromkeys(base + ["motif_id", "pvalue"])), filter=filter)
    t = add_qvalues(t, qmap, limit)
    return t.select(want)
