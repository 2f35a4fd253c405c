"""FIMO's ``--parse-genomic-coord``: records named by where they lie in a genome give hits in genome coordinates.

Peak FASTA files made by ``bedtools getfasta`` (``chr1:1000-1200``, BED coordinates: 0-based start, end
excluded; with ``-s``, ``chr1:1000-1200(-)`` for the reverse complement), HOMER, MACS or ``samtools faidx``
(``chr1:1001-1200``, 1-based, end included) name each record by its region.  A scan with
``--parse-genomic-coord`` records that; :func:`pipeline.scan.read.read_hits` and every export then give each hit on the
genome: ``chrom`` the contig, ``start``/``end`` shifted (and, for a ``(-)`` record, mirrored, its strand flipped),
the record's own name kept in ``record``.  Which convention a name follows is told by the record's length: ``end -
start`` for BED's, ``end - start + 1`` for samtools'; a name that is neither, or no region, is an error naming the
record.  The scan itself (blocks, thresholds, q-values, region counts) is per record, as without the option.
"""
from __future__ import annotations

import re

import numpy as np

from pipeline import MotifgridError

#: ``chrom:start-end`` with an optional ``(+)``/``(-)`` (bedtools getfasta -s); thousands separators allowed
NAME = re.compile(r"^(?P<chrom>\S+?):(?P<start>\d[\d,]*)-(?P<end>\d[\d,]*)(?:\((?P<strand>[+-])\))?$")


class CoordError(MotifgridError, ValueError):
    """A record name that gives no genome region (one line)."""


def _parse(name: str, i: int, source: str):
    m = NAME.match(name)
    if m is None:
        raise CoordError(f"{source}: record {name!r} (record {i + 1:,}) is not named chrom:start-end; "
                         "--parse-genomic-coord needs every record so named (bedtools getfasta, samtools faidx)")
    return m["chrom"], int(m["start"].replace(",", "")), int(m["end"].replace(",", "")), m["strand"] == "-"


def check_names(records, source: str) -> str:
    """The convention of a store's record names — ``"bed"`` (0-based start, end excluded: ``end - start`` is the
    record's length) or ``"1-based"`` (end included) — or :class:`CoordError` naming the first record that has no
    genome region, whose length disagrees with its name, or that follows the other convention."""
    conv = None
    for i, (name, length) in enumerate(zip(records.names, np.asarray(records.lengths).tolist())):
        _, start, end, _ = _parse(name, i, source)
        this = "bed" if end - start == length else "1-based" if end - start + 1 == length else None
        if this is None:
            raise CoordError(f"{source}: record {name!r} holds {length:,} bases, but its name spans {end - start:,} "
                             f"(BED) or {end - start + 1:,} (1-based) bases")
        if conv is not None and this != conv:
            raise CoordError(f"{source}: record {name!r} is named in {this} coordinates, the records before it in "
                             f"{conv} ones")
        conv = conv or this
    return conv or "bed"


class RecordCoords:
    """Where records named ``chrom:start-end[(±)]`` lie on the genome, under the ``convention`` :func:`check_names`
    found: :attr:`contig` (index into :attr:`contigs`), :attr:`first` (the genome position of the region's first
    base), :attr:`last` (of its last), :attr:`minus` (the record is the region's reverse complement)."""

    def __init__(self, names: list, convention: str = "bed", source: str = "the FASTA"):
        parsed = [_parse(n, i, source) for i, n in enumerate(names)]
        self.contigs = list(dict.fromkeys(p[0] for p in parsed))
        index = {c: k for k, c in enumerate(self.contigs)}
        self.contig = np.array([index[p[0]] for p in parsed], np.int64)
        shift = 0 if convention == "bed" else 1
        self.first = np.array([p[1] - shift for p in parsed], np.int64)
        self.last = np.array([p[2] - 1 for p in parsed], np.int64)
        self.minus = np.array([p[3] for p in parsed], bool)

    def genome(self, record: np.ndarray, start: np.ndarray, end: np.ndarray, strand=None):
        """Windows ``[start, end)`` of records ``record`` (indices into the names) on the genome: (contig index,
        start, end, strand or None)."""
        record = np.asarray(record, np.int64)
        start, end = np.asarray(start, np.int64), np.asarray(end, np.int64)
        minus = self.minus[record]
        gs = np.where(minus, self.last[record] - (end - 1), self.first[record] + start)
        st = None
        if strand is not None:
            strand = np.asarray(strand).astype(str)
            st = np.where(minus, np.where(strand == "+", "-", "+"), strand)
        return self.contig[record], gs, gs + (end - start), st


def to_genome(table, convention: str):
    """A hits table (``chrom`` the record name, ``start``, ``end``, ``strand``) in genome coordinates, its record names
    read in ``convention`` (:func:`check_names`): ``chrom`` the contig, positions shifted (mirrored on
    reverse-complemented records, their strand flipped), ``record`` (the record's name) added after ``chrom``."""
    import pyarrow as pa  # noqa: PLC0415

    from pipeline.io import arrow  # noqa: PLC0415

    chrom = table.column("chrom").combine_chunks()
    if not pa.types.is_dictionary(chrom.type):
        chrom = chrom.dictionary_encode()
    coords = RecordCoords(chrom.dictionary.to_pylist(), convention)       # the records present, each once
    rec = arrow.to_numpy(chrom.indices).astype(np.int64)
    names = chrom.dictionary_decode()
    has_strand = "strand" in table.column_names
    ci, gs, ge, st = coords.genome(rec, arrow.to_numpy(table.column("start")), arrow.to_numpy(table.column("end")),
                                   np.asarray(table.column("strand").to_pylist()) if has_strand else None)
    out = table
    contig = arrow.dictionary(ci.astype(np.int32), arrow.strings(coords.contigs))
    k = out.column_names.index("chrom")
    out = out.set_column(k, "chrom", contig if pa.types.is_dictionary(table.schema.field("chrom").type)
                         else contig.dictionary_decode())
    out = out.add_column(k + 1, "record", names)
    out = out.set_column(out.column_names.index("start"), "start", pa.array(gs, table.schema.field("start").type))
    out = out.set_column(out.column_names.index("end"), "end", pa.array(ge, table.schema.field("end").type))
    if has_strand:
        out = out.set_column(out.column_names.index("strand"), "strand",
                             pa.array(st.tolist(), table.schema.field("strand").type) if not pa.types.is_dictionary(
                                 table.schema.field("strand").type) else pa.array(st.tolist()).dictionary_encode())
    return out
