"""Motif input: read PWM/PFM collections and build the PWM model the scanner uses.

Readers
-------
:func:`read_motifs` reads one motif collection into a list of :class:`Motif`.  Supported:

``"jaspar"``
    JASPAR bracket format (``A [ 1 2 3 ]``), the plain 4-row pfm blocks (``>MA0004.1 Arnt`` then
    4 rows of counts) and a single bare matrix without a header (the id is then the file stem).
``"meme"``
    MEME minimal/text v4 motif files and full MEME text output (``MEME version`` line required).
    The letter-probability matrix is used; a motif that has only a ``log-odds matrix`` is kept as
    ``kind="logodds"``.
``"transfac"``
    TRANSFAC-style ``AC/ID/P0`` blocks ending in ``//``.
``"homer"``
    HOMER ``.motif``: ``>consensus<TAB>name<TAB>logodds_threshold...`` then rows of 4 values.
``"pfm"``
    gimmemotifs 4-column ``.pfm``: ``#`` comment lines, ``>name``, one row per position, 4 numbers
    A C G T (an optional leading consensus letter per row is allowed, as in ``ENCODE.pfm``).

Named JASPAR releases shipped inside pyjaspar are read with a source such as ``JASPAR2024``
(CORE, all taxa) or ``JASPAR2024:CORE:vertebrates``; see :func:`read_motifs`.

Every reader is strict: a malformed input raises :class:`MotifError` whose message is one line
naming the file and, where known, the line number and record.  For the jaspar and transfac formats
Biopython's ``Bio.motifs`` parser produces the matrices, but only after a line-level scan of this
module has checked the file, and its result is then checked against that scan (same number of
records, same ids, same values), because ``Bio.motifs`` drops or invents records silently on some
malformed inputs.  MEME, HOMER and gimmemotifs pfm files are read by the small strict parsers here,
because the ``Bio.motifs`` readers for them are wrong for real files (see ``_BIO_NOTES``).

PWM model
---------
:func:`motif_probabilities` and :func:`pwm_from_motif` follow FIMO's defaults (MEME suite 5.4.1,
``motif.c:apply_pseudocount_to_motif``, ``motif-in.c:post_process_motif``, ``fimo.c``): rows are
normalised, then ``p' = (p*N + pseudocount*bg) / (N + pseudocount)`` with ``N`` the number of
sites, pseudocount 0.1 by default, and scores are ``log2(p'/bg)`` bits.  FIMO's *default background*
is not uniform but MEME's NRDB DNA frequencies (``read_background("nrdb")``), averaged with their
complement when both strands are scanned; with that background these PWMs reproduce FIMO 5.4.1's
reported scores exactly once FIMO's integer lattice (range 1000) is applied, and to within
``w * 0.5 / scale`` (about 0.01 bits) without it.
"""
from __future__ import annotations

import gzip
import hashlib
import io
import math
import os
import re
import zlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pipeline import MotifgridError

__all__ = [
    "FORMATS",
    "Motif",
    "MotifError",
    "duplicate_ids",
    "format_jaspar",
    "format_meme",
    "motif_probabilities",
    "motifs_checksum",
    "pwm_from_motif",
    "read_background",
    "read_motifs",
    "reverse_complement",
    "select_motifs",
]

#: Format names accepted by :func:`read_motifs`.
FORMATS = ("jaspar", "meme", "transfac", "homer", "pfm")
_FORMAT_ALIASES = {"minimal": "meme", "meme-minimal": "meme", "tf": "transfac", "motif": "homer"}
#: Extensions (after stripping ``.gz``) that decide the format without looking at the content.
_EXT_FORMATS = {
    ".jaspar": "jaspar",
    ".meme": "meme",
    ".transfac": "transfac",
    ".motif": "homer",
    ".motifs": "homer",
    ".homer": "homer",
}
#: Tolerance on the row sums of a matrix of kind "probabilities".
PROB_TOLERANCE = 0.02
#: MEME's DEFAULT_SITE_COUNT (motif.c), used when a probability matrix has no usable nsites.
DEFAULT_NSITES = 20
#: Floor applied to probabilities before the log, so that p = 0 (pseudocount 0) gives a large
#: finite negative score (log2(1e-10/0.25) = -31.2 bits) instead of -inf.
PROB_FLOOR = 1e-10

#: MEME suite ``alphabet.c:get_nrdb_frequencies`` NRDB_DNA (A C G T).  FIMO 5.4.1 uses this as its
#: default background (no ``--bfile``), averaged with its complement (A=T, C=G) when it scans both
#: strands and as is with ``--norc`` (``motif-in.c:set_pseudo_bg``).  It is *not* uniform.
NRDB_DNA = np.array([0.281774, 0.222020, 0.228876, 0.267330])

_RELEASE_RE = re.compile(r"JASPAR\d{4}(:.*)?")
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
_IUPAC = set("ACGTURYSWKMBDHVNacgturyswkmbdhvn")

_BIO_NOTES = """Bio.motifs (Biopython 1.88) behaviours that this module guards against:
- jaspar: a header with no rows, or a truncated last record, is dropped silently; a ragged record
  raises a bare Exception; NaN/negative counts are accepted.
- transfac: strict=True rejects tab-separated files (JASPAR's own .transfac export); with
  strict=False, the counts of the previous record are not reset at '//', so a record without a
  matrix becomes a copy of the previous motif; a record not closed by '//' is dropped silently.
- minimal (MEME): probabilities are rounded to integer counts (round(p*nsites)); nsites must be an
  integer; a background line that starts with a space fails (yetfasco_all.meme); a motif with only
  a log-odds matrix takes the next motif's letter-probability matrix and that next motif is lost;
  a short row silently ends the matrix.
- meme: only MEME XML is read, MEME text output raises.
- pfm-four-columns: rows of the wrong width are skipped silently, and rows that start with an
  A/C/G/T consensus letter (ENCODE.pfm) are skipped too, shortening motifs.
"""


class MotifError(MotifgridError, ValueError):
    """Bad motif input.

    ``str(e)`` is one line naming the file (and line number / record where known) and the
    problem, e.g. ``"motifs.jaspar line 14: row 'C' has 7 values, row 'A' has 8"``.

    Attributes
    ----------
    source : str or None
        The file path or release name.
    line : int or None
        1-based line number in the (decompressed) text, where known.
    record : int or None
        1-based record index, where known.
    problem : str
        The problem alone, without the location.
    """

    def __init__(self, source, problem, line=None, record=None, motif_id=None, hint=None):
        self.source = None if source is None else str(source)
        self.line = line
        self.record = record
        self.problem = " ".join(str(problem).split())
        self.hint = hint
        where = self.source or "<motifs>"
        if line is not None:
            where += f" line {line}"
        if record is not None:
            where += f" record {record}"
            if motif_id:
                where += f" ({motif_id})"
        self.where = where
        super().__init__(self.with_hint(hint))

    def with_hint(self, hint: str | None) -> str:
        """The one-line message with another way out than the Python one (``hint``: the CLI's flag), or none."""
        return f"{self.where}: {self.problem}" + (f" ({hint})" if hint else "")


@dataclass(frozen=True, eq=False)
class Motif:
    """One motif matrix.

    Attributes
    ----------
    id : str
        Identifier: the JASPAR matrix id ("MA0002.3"), the MEME ``MOTIF <id>``, the TRANSFAC
        ``AC`` (else ``ID``), the HOMER consensus field, or the pfm header's first word.
    name : str
        Alternative name ("Runx1"); falls back to ``id``.
    matrix : numpy.ndarray, shape (m, 4), float64, read-only
        Columns A C G T, one row per motif position; values as read (counts, probabilities or
        MEME log-odds).
    kind : str
        ``"counts"``, ``"probabilities"`` or ``"logodds"`` (a MEME motif with only a
        ``log-odds matrix``; MEME writes those as 100 * log2(p/bg), see :func:`pwm_from_motif`).
    nsites : float or None
        MEME ``nsites=``; for counts the largest row sum; otherwise None.
    source : str
        The file path or release name it came from.
    record : int
        1-based index of the record in its source.
    """

    id: str
    name: str
    matrix: np.ndarray
    kind: str
    nsites: float | None
    source: str
    record: int

    @property
    def length(self) -> int:
        """Number of motif positions ``m``."""
        return int(self.matrix.shape[0])

    def __repr__(self) -> str:
        return (
            f"Motif(id={self.id!r}, name={self.name!r}, length={self.length}, kind={self.kind!r}, "
            f"nsites={self.nsites!r}, source={self.source!r}, record={self.record})"
        )


# --------------------------------------------------------------------------------------------
# Internal record representation shared by the scanners
# --------------------------------------------------------------------------------------------


@dataclass
class _Rec:
    id: str
    name: str
    line: int  # line of the header (or first row)
    matrix: np.ndarray  # (m, 4)
    pos_lines: list[int] | None  # line of each position, None when rows are letters (jaspar)
    kind: str | None  # None: infer
    nsites: float | None = None


def _num(token: str, src: str, line: int, *, negative_ok: bool = False) -> float:
    try:
        v = float(token)
    except ValueError:
        raise MotifError(src, f"non-numeric value {token!r}", line=line) from None
    if not math.isfinite(v):
        raise MotifError(src, f"value {token!r} is not finite", line=line)
    if v < 0 and not negative_ok:
        raise MotifError(src, f"negative value {token!r}", line=line)
    return v


def _last_line(lines: list[str], upto: int | None = None) -> int:
    """1-based number of the last non-blank line among lines[:upto]."""
    k = len(lines) if upto is None else upto
    while k > 0 and not lines[k - 1].strip():
        k -= 1
    return max(k, 1)


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _loc(rec: _Rec, pos: int) -> int:
    return rec.pos_lines[pos] if rec.pos_lines is not None else rec.line


def _infer_kind(mat: np.ndarray, integer_counts: bool) -> str:
    if mat.size and (mat > 1.0 + 1e-6).any():
        return "counts"
    if integer_counts and mat.size and np.all(mat == np.round(mat)):
        return "counts"
    return "probabilities"


def _finish(recs: list[_Rec], src: str, *, integer_counts: bool = False,
            prob_tolerance: float = PROB_TOLERANCE) -> list[Motif]:
    """Validate scanned records and turn them into Motif objects."""
    out = []
    for k, rec in enumerate(recs, 1):
        mat = np.asarray(rec.matrix, dtype=np.float64)
        if mat.ndim != 2 or mat.shape[0] == 0:
            raise MotifError(src, "zero-length motif (no positions)", rec.line, k, rec.id)
        if mat.shape[1] != 4:
            raise MotifError(src, f"matrix has {mat.shape[1]} columns, expected 4 (A C G T)",
                             rec.line, k, rec.id)
        bad = ~np.isfinite(mat)
        if bad.any():
            pos = int(np.argwhere(bad)[0][0])
            raise MotifError(src, f"position {pos + 1} has a non-finite value", _loc(rec, pos),
                             k, rec.id)
        kind = rec.kind or _infer_kind(mat, integer_counts)
        nsites = rec.nsites
        if kind != "logodds":
            neg = mat < 0
            if neg.any():
                pos = int(np.argwhere(neg)[0][0])
                raise MotifError(src, f"position {pos + 1} has a negative value", _loc(rec, pos),
                                 k, rec.id)
            sums = mat.sum(axis=1)
            zero = np.flatnonzero(sums <= 0)
            if zero.size:
                pos = int(zero[0])
                raise MotifError(src, f"position {pos + 1} sums to 0", _loc(rec, pos), k, rec.id)
            if kind == "probabilities":
                off = np.flatnonzero(np.abs(sums - 1.0) > prob_tolerance + 1e-9)
                if off.size:
                    pos = int(off[0])
                    raise MotifError(
                        src,
                        f"position {pos + 1} of a probability matrix sums to {sums[pos]:.4g} "
                        f"(must be 1 +- {prob_tolerance:g})",
                        _loc(rec, pos), k, rec.id,
                    )
            elif nsites is None:
                nsites = float(sums.max())
        mat = np.ascontiguousarray(mat, dtype=np.float64)
        mat.setflags(write=False)
        out.append(Motif(rec.id, rec.name or rec.id, mat, kind, nsites, src, k))
    return out


# --------------------------------------------------------------------------------------------
# JASPAR (scan here, matrices from Bio.motifs.jaspar)
# --------------------------------------------------------------------------------------------

_JASPAR_ROW = re.compile(r"^([A-Za-z])\s*\[(.*)\]$")


def _scan_jaspar(lines: list[str], src: str) -> list[_Rec]:
    recs: list[_Rec] = []
    cur = None  # dict(id, name, line, rows: list[(line, letter, values)])

    def close(end_line):
        if cur is None:
            return
        rows = cur["rows"]
        if not rows:
            recs.append(_Rec(cur["id"], cur["name"], cur["line"], np.zeros((0, 4)), None, None))
            return
        if len(rows) != 4:
            raise MotifError(src, f"record {cur['id']!r} (line {cur['line']}) has {len(rows)} "
                             "matrix rows, expected 4 (A C G T); truncated?", end_line)
        n0 = len(rows[0][2])
        first = rows[0][1] or "A"
        for j, (ln, letter, vals) in enumerate(rows[1:], 1):
            if len(vals) != n0:
                raise MotifError(src, f"row {letter or 'ACGT'[j]!r} has {len(vals)} values, "
                                 f"row {first!r} has {n0}", ln)
        if rows[0][1] is not None:
            by_letter = {r[1]: r[2] for r in rows}
            mat = np.array([by_letter[b] for b in "ACGT"], dtype=np.float64).T
        else:
            mat = np.array([r[2] for r in rows], dtype=np.float64).T
        recs.append(_Rec(cur["id"], cur["name"], cur["line"], mat.reshape(-1, 4), None, None))

    for i, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        if s.startswith(">"):
            close(i)
            words = s[1:].split()
            if not words:
                raise MotifError(src, "empty '>' header", i)
            cur = {"id": words[0], "name": words[1] if len(words) > 1 else words[0],
                   "line": i, "rows": []}
            continue
        if cur is None:
            if recs:
                raise MotifError(src, "matrix row outside a record (no '>' header)", i)
            stem = _stem(src)
            cur = {"id": stem, "name": stem, "line": i, "rows": []}
        if len(cur["rows"]) == 4:
            raise MotifError(src, f"record {cur['id']!r} (line {cur['line']}) has more than 4 "
                             "matrix rows (A C G T)", i)
        m = _JASPAR_ROW.match(s)
        if m:
            letter = m.group(1)
            if letter not in "ACGT":
                raise MotifError(src, f"row label {letter!r} is not one of A C G T", i)
            if any(r[1] == letter for r in cur["rows"]):
                raise MotifError(src, f"row {letter!r} appears twice in record {cur['id']!r}", i)
            if cur["rows"] and cur["rows"][0][1] is None:
                raise MotifError(src, "bracketed row mixed with plain rows in one record", i)
            tokens = m.group(2).split()
        else:
            if "[" in s or "]" in s:
                raise MotifError(src, "malformed bracketed row (expected 'A [ 1 2 3 ]')", i)
            if cur["rows"] and cur["rows"][0][1] is not None:
                raise MotifError(src, "plain row mixed with bracketed rows in one record", i)
            letter = None
            tokens = s.split()
            if tokens and not _is_number(tokens[0]) and len(tokens[0]) == 1 and tokens[0].isalpha():
                raise MotifError(src, f"row label {tokens[0]!r} without brackets (expected "
                                 f"'{tokens[0]} [ ... ]' or plain numbers)", i)
        vals = [_num(t, src, i) for t in tokens]
        cur["rows"].append((i, letter, vals))
    close(_last_line(lines))
    return recs


def _read_jaspar(text: str, src: str, tol: float = PROB_TOLERANCE) -> list[Motif]:
    lines = text.split("\n")
    recs = _scan_jaspar(lines, src)
    if not recs:
        raise MotifError(src, "no motifs found (jaspar format)")
    motifs = _finish(recs, src, integer_counts=True, prob_tolerance=tol)  # line-aware checks first
    from Bio import motifs as bio_motifs  # noqa: PLC0415

    try:
        bio = list(bio_motifs.parse(io.StringIO(text), "jaspar"))
    except Exception as e:  # Bio raises bare Exception / ValueError / KeyError
        raise MotifError(src, f"Bio.motifs jaspar parser failed: {type(e).__name__}: {e}") from None
    n_headers = sum(1 for ln in lines if ln.lstrip().startswith(">")) or 1
    if len(bio) != len(recs) or len(bio) != n_headers:
        raise MotifError(src, f"Bio.motifs returned {len(bio)} motifs but the file has "
                         f"{n_headers} records")
    return [_bio_check(m, b, src) for m, b in zip(motifs, bio)]


def _bio_matrix(bio_motif) -> np.ndarray:
    return np.array([bio_motif.counts[b] for b in "ACGT"], dtype=np.float64).T.reshape(-1, 4)


def _bio_check(m: Motif, bio_motif, src: str) -> Motif:
    """Take the Bio.motifs matrix after checking it against the line scan."""
    bm = _bio_matrix(bio_motif)
    bio_id = getattr(bio_motif, "matrix_id", None)
    if bio_motif.__class__.__module__.endswith("transfac"):
        bio_id = bio_motif.get("AC") or bio_motif.get("ID") or bio_motif.get("NA")
    if bm.shape != m.matrix.shape or not np.array_equal(bm, m.matrix) or (
        bio_id is not None and bio_id != m.id
    ):
        raise MotifError(src, "Bio.motifs and the line scan disagree on this record", None,
                         m.record, m.id)
    bm.setflags(write=False)
    return Motif(m.id, m.name, bm, m.kind, m.nsites, m.source, m.record)


# --------------------------------------------------------------------------------------------
# TRANSFAC (scan here, matrices from Bio.motifs.transfac)
# --------------------------------------------------------------------------------------------

_TF_KEY = re.compile(r"^[A-Z0-9]{2}$")


def _scan_transfac(lines: list[str], src: str) -> list[_Rec]:
    recs: list[_Rec] = []
    blk: dict | None = None
    in_matrix = False

    def new_block(i):
        return {"line": i, "keys": {}, "rows": [], "row_lines": [], "p0": None}

    for i, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        if s == "//":
            in_matrix = False
            if blk is not None:
                ident = blk["keys"].get("AC") or blk["keys"].get("ID") or blk["keys"].get("NA")
                if blk["p0"] is not None:
                    rid = ident or f"{_stem(src)}_{len(recs) + 1}"
                    name = blk["keys"].get("ID") or blk["keys"].get("NA") or rid
                    if name == rid and blk["keys"].get("NA"):
                        name = blk["keys"]["NA"]
                    mat = np.array(blk["rows"], dtype=np.float64).reshape(-1, 4)
                    recs.append(_Rec(rid, name, blk["p0"], mat, blk["row_lines"], None))
                elif ident is not None:
                    raise MotifError(src, f"record {ident!r} (line {blk['line']}) has no P0/PO "
                                     "matrix", i)
            blk = None
            continue
        words = s.split()
        key = words[0]
        if blk is None:
            blk = new_block(i)
        if in_matrix:
            if key.isdigit():
                pos = int(key)
                expected = len(blk["rows"]) + blk["first_pos"]
                if not blk["rows"] and pos in (0, 1):
                    blk["first_pos"] = pos
                    expected = pos
                if pos != expected:
                    raise MotifError(src, f"matrix row number {key} out of order (expected "
                                     f"{expected:02d})", i)
                vals = words[1:]
                if len(vals) == 5 and len(vals[4]) == 1 and vals[4] in _IUPAC:
                    vals = vals[:4]  # trailing consensus letter
                if len(vals) != 4:
                    raise MotifError(src, f"matrix row has {len(vals)} values, expected 4 "
                                     "(A C G T)", i)
                blk["rows"].append([_num(t, src, i) for t in vals])
                blk["row_lines"].append(i)
                continue
            in_matrix = False
        if key in ("P0", "PO"):
            if blk["p0"] is not None:
                raise MotifError(src, "second P0/PO matrix in one record (missing '//'?)", i)
            if [w.upper() for w in words[1:5]] != ["A", "C", "G", "T"]:
                raise MotifError(src, f"{key} line must be followed by A C G T", i)
            blk["p0"] = i
            blk["first_pos"] = 1
            in_matrix = True
            continue
        if not _TF_KEY.match(key):
            raise MotifError(src, f"not a TRANSFAC line (2-letter key expected): {s[:40]!r}", i)
        if key in ("AC", "ID", "NA") and key not in blk["keys"] and len(words) > 1:
            blk["keys"][key] = s.split(None, 1)[1].strip()  # whole value, as Bio.motifs keeps it
    if blk is not None and (blk["p0"] is not None or blk["keys"]):
        raise MotifError(src, f"record starting at line {blk['line']} is not terminated by '//' "
                         "(truncated file?)", _last_line(lines))
    return recs


def _read_transfac(text: str, src: str, tol: float = PROB_TOLERANCE) -> list[Motif]:
    lines = text.split("\n")
    recs = _scan_transfac(lines, src)
    if not recs:
        raise MotifError(src, "no motifs found (transfac format)")
    motifs = _finish(recs, src, integer_counts=True, prob_tolerance=tol)
    from Bio import motifs as bio_motifs  # noqa: PLC0415

    try:
        bio = list(bio_motifs.parse(io.StringIO(text), "transfac", strict=False))
    except Exception as e:
        raise MotifError(src, f"Bio.motifs transfac parser failed: {type(e).__name__}: {e}") from None
    n_blocks = len(recs)  # blocks with a P0/PO matrix closed by '//'
    n_p0 = sum(1 for ln in lines if re.match(r"\s*P[0O]\s", ln))
    if len(bio) != n_blocks or n_p0 != n_blocks:
        raise MotifError(src, f"Bio.motifs returned {len(bio)} motifs but the file has {n_p0} "
                         "matrices")
    out = []
    for m, b in zip(motifs, bio):
        if not (b.get("AC") or b.get("ID") or b.get("NA")):
            b["AC"] = m.id  # anonymous record: id made up from the file stem
        out.append(_bio_check(m, b, src))
    return out


# --------------------------------------------------------------------------------------------
# MEME minimal / text output (own strict parser)
# --------------------------------------------------------------------------------------------

_MEME_MATRIX = re.compile(r"^\s*(letter-probability|log-odds) matrix:(.*)$")
_MEME_PARAM = re.compile(r"([A-Za-z]+)\s*=\s*(\S+)")


def _read_meme(text: str, src: str, tol: float = PROB_TOLERANCE) -> list[Motif]:
    lines = text.split("\n")
    n = len(lines)
    version_seen = False
    i = 0
    # header: up to the first MOTIF line
    while i < n and not lines[i].startswith("MOTIF"):
        s = lines[i].strip()
        if s.startswith("MEME version"):
            version_seen = True
        elif s.startswith("ALPHABET"):
            alph = s[len("ALPHABET"):].strip()
            if alph.startswith("="):
                if alph[1:].strip().upper() != "ACGT":
                    raise MotifError(src, f"unsupported alphabet {alph[1:].strip()!r} (only DNA "
                                     "ACGT)", i + 1)
            elif "DNA" not in alph.upper():
                raise MotifError(src, f"unsupported alphabet {alph!r} (only DNA ACGT)", i + 1)
        i += 1
    if not version_seen:
        raise MotifError(src, "no 'MEME version' line before the first MOTIF: not a MEME file")
    starts = [k for k in range(n) if lines[k].startswith("MOTIF")]
    if not starts:
        raise MotifError(src, "no motifs found (no MOTIF lines)")
    recs: list[_Rec] = []
    for si, start in enumerate(starts):
        end = starts[si + 1] if si + 1 < len(starts) else n
        words = lines[start].split()
        if len(words) < 2:
            raise MotifError(src, "MOTIF line without an identifier", start + 1)
        mid = words[1]
        alt = words[2] if len(words) > 2 and "=" not in words[2] and words[2] != "width" else None
        if alt == "MEME" and "width" in lines[start]:
            alt = f"MEME-{mid}"  # MEME 4 text output: "MOTIF  1 MEME  width = ..."
        found = {}
        k = start + 1
        while k < end:
            m = _MEME_MATRIX.match(lines[k])
            if not m:
                k += 1
                continue
            which = m.group(1)
            if which in found:
                raise MotifError(src, f"second {which} matrix in MOTIF {mid}", k + 1)
            params = dict(_MEME_PARAM.findall(m.group(2)))
            params["_line"] = k + 1
            found[which], k = _meme_matrix(lines, k, end, params, which, src, mid)
        if "letter-probability" in found:
            rows, row_lines, params = found["letter-probability"]
            kind = "probabilities"
        elif "log-odds" in found:
            rows, row_lines, params = found["log-odds"]
            kind = "logodds"
        else:
            raise MotifError(src, f"MOTIF {mid} has no letter-probability or log-odds matrix",
                             start + 1)
        nsites = None
        if kind == "probabilities" and "nsites" in params:
            nsites = _num(params["nsites"], src, params["_line"])
        mat = np.array(rows, dtype=np.float64).reshape(-1, 4)
        recs.append(_Rec(mid, alt or mid, start + 1, mat, row_lines, kind, nsites))
    n_motif_lines = len(re.findall(r"(?m)^MOTIF\s", text))
    if n_motif_lines != len(recs):
        raise MotifError(src, f"parsed {len(recs)} motifs but the file has {n_motif_lines} MOTIF "
                         "lines")
    return _finish(recs, src, prob_tolerance=tol)


def _meme_matrix(lines, k, end, params, which, src, mid):
    """Read the rows of one MEME matrix whose header is lines[k]; return ((rows, lines, params), next)."""
    header_line = k + 1
    alength = params.get("alength")
    if alength is not None and alength != "4":
        raise MotifError(src, f"alength={alength}, only DNA (alength=4) is supported", header_line)
    w = params.get("w")
    if w is not None:
        try:
            w = int(w)
        except ValueError:
            raise MotifError(src, f"w={w!r} is not an integer", header_line) from None
        if w < 0:
            raise MotifError(src, f"w={w} is negative", header_line)
    negative_ok = which == "log-odds"
    rows, row_lines = [], []
    k += 1
    # blank lines may separate the header from the first row
    while k < end and not lines[k].strip() and (w is None or w > 0):
        k += 1
    while k < end and (w is None or len(rows) < w):
        s = lines[k].strip()
        words = s.split()
        if not words or not _is_number(words[0]):
            break
        if len(words) != 4:
            raise MotifError(src, f"{which} matrix row has {len(words)} values, expected 4 "
                             "(A C G T)", k + 1)
        rows.append([_num(t, src, k + 1, negative_ok=negative_ok) for t in words])
        row_lines.append(k + 1)
        k += 1
    if w is not None and len(rows) < w:
        where = k + 1 if k < end and lines[k].strip() else _last_line(lines, k)
        raise MotifError(src, f"MOTIF {mid}: {which} matrix ends after {len(rows)} of w={w} rows "
                         "(truncated?)", where)
    nxt = k
    while nxt < end and not lines[nxt].strip():
        nxt += 1
    if nxt < end:
        words = lines[nxt].split()
        if words and _is_number(words[0]):
            raise MotifError(src, f"MOTIF {mid}: {which} matrix has more rows than w={w}", nxt + 1)
    return (rows, row_lines, params), k


# --------------------------------------------------------------------------------------------
# HOMER .motif and gimmemotifs .pfm (own strict parsers; rows are positions)
# --------------------------------------------------------------------------------------------


def _read_rows_format(text: str, src: str, fmt: str, tol: float) -> list[Motif]:
    lines = text.split("\n")
    recs: list[_Rec] = []
    cur = None
    for i, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        if s.startswith("#") and fmt == "pfm":
            continue
        if s.startswith(">"):
            if cur is not None:
                recs.append(cur)
            if fmt == "homer":
                fields = s[1:].split("\t") if "\t" in s else s[1:].split()
                fields = [f.strip() for f in fields]
                if not fields or not fields[0]:
                    raise MotifError(src, "empty '>' header", i)
                if len(fields) > 2 and fields[2] and not _is_number(fields[2]):
                    raise MotifError(src, f"HOMER log-odds threshold {fields[2]!r} is not a "
                                     "number", i)
                mid, name = fields[0], (fields[1] if len(fields) > 1 and fields[1] else fields[0])
            else:
                words = s[1:].split()
                if not words:
                    raise MotifError(src, "empty '>' header", i)
                mid, name = words[0], (words[1] if len(words) > 1 else words[0])
            cur = _Rec(mid, name, i, [], [], None)
            continue
        if cur is None:
            raise MotifError(src, "matrix row before the first '>' header", i)
        words = s.split()
        if len(words) == 5 and len(words[0]) == 1 and words[0] in _IUPAC:
            words = words[1:]  # leading consensus letter (ENCODE.pfm)
        if len(words) != 4:
            raise MotifError(src, f"row has {len(words)} values, expected 4 (A C G T)", i)
        cur.matrix.append([_num(t, src, i) for t in words])
        cur.pos_lines.append(i)
    if cur is not None:
        recs.append(cur)
    if not recs:
        raise MotifError(src, f"no motifs found ({fmt} format)")
    for r in recs:
        r.matrix = np.array(r.matrix, dtype=np.float64).reshape(-1, 4)
    n_headers = sum(1 for ln in lines if ln.lstrip().startswith(">"))
    if n_headers != len(recs):
        raise MotifError(src, f"parsed {len(recs)} motifs but the file has {n_headers} headers")
    return _finish(recs, src, prob_tolerance=tol)


def _read_homer(text, src, tol=PROB_TOLERANCE):
    return _read_rows_format(text, src, "homer", tol)


def _read_pfm(text, src, tol=PROB_TOLERANCE):
    return _read_rows_format(text, src, "pfm", tol)


_PARSERS = {
    "jaspar": _read_jaspar,
    "meme": _read_meme,
    "transfac": _read_transfac,
    "homer": _read_homer,
    "pfm": _read_pfm,
}


# --------------------------------------------------------------------------------------------
# Sources, decompression, format detection
# --------------------------------------------------------------------------------------------


def _stem(src: str) -> str:
    name = Path(src).name
    for ext in (".gz",):
        if name.endswith(ext):
            name = name[: -len(ext)]
    stem, dot, ext = name.rpartition(".")
    return stem if dot and stem else name


def _read_bytes(src: str) -> bytes:
    p = Path(src)
    if not p.exists():
        raise MotifError(src, "no such file")
    if p.is_dir():
        raise MotifError(src, "is a directory, not a motif file")
    try:
        return p.read_bytes()
    except OSError as e:
        raise MotifError(src, f"cannot read: {e.strerror or e}") from None


def _decode(data: bytes, src: str) -> str:
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise MotifError(src, f"corrupt gzip data: {e}") from None
    if b"\x00" in data[:65536]:
        raise MotifError(src, "binary file, not a motif text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _ext(src: str) -> str:
    name = Path(src).name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return Path(name).suffix


def _sniff(text: str, ext: str) -> str | None:
    lines = [ln.strip() for ln in text.split("\n")]
    content = [ln for ln in lines if ln and not ln.startswith("#")]
    if not content:
        return None
    head = content[:400]
    if any(ln.startswith("MEME version") for ln in lines[:2000]):
        return "meme"
    if any(re.match(r"P[0O]\s+A\s+C\s+G\s+T", ln) for ln in head) and any(
        ln == "//" for ln in content
    ):
        return "transfac"
    if any(_JASPAR_ROW.match(ln) and ln[0] in "ACGT" for ln in head[:10]):
        return "jaspar"
    # rows-of-numbers formats: look at the blocks under the first headers
    blocks, cur = [], None
    for ln in head:
        if ln.startswith(">"):
            cur = {"header": ln, "widths": []}
            blocks.append(cur)
            continue
        words = ln.split()
        if len(words) == 5 and len(words[0]) == 1 and words[0] in _IUPAC:
            words = words[1:]
        if cur is None:
            if not all(_is_number(w) for w in words):
                return None  # text before any header that is not a matrix row
            cur = {"header": None, "widths": []}
            blocks.append(cur)
        cur["widths"].append(len(words))
    full = blocks[:-1] if len(blocks) > 1 else blocks  # the last block may be cut by head[:400]
    if not full or not any(b["widths"] for b in full):
        return None
    has_comments = any(ln.startswith("#") for ln in lines if ln)
    if all(len(b["widths"]) in (0, 4) for b in full):  # every record has 4 rows
        if all(set(b["widths"]) <= {4} for b in full):  # ... and 4 columns: ambiguous 4 x 4
            return "pfm" if has_comments else "jaspar"
        return "jaspar"
    # rows are positions: gimmemotifs pfm or HOMER
    if blocks[0]["header"] is None:
        return None
    if ext == ".pfm" or has_comments:
        return "pfm"
    fields = blocks[0]["header"][1:].split("\t")
    if len(fields) >= 3 and _is_number(fields[2].strip()):
        return "homer"
    return "pfm"


def _resolve_format(fmt: str | None, src: str, text: str) -> str:
    if fmt is not None:
        f = _FORMAT_ALIASES.get(str(fmt).lower(), str(fmt).lower())
        if f not in FORMATS:
            raise MotifError(src, f"unknown motif format {fmt!r} (known: {', '.join(FORMATS)})")
        return f
    ext = _ext(src)
    if ext in _EXT_FORMATS:
        return _EXT_FORMATS[ext]
    f = _sniff(text, ext)
    if f is None:
        raise MotifError(src, f"cannot tell the motif format from the extension {ext!r} or the content; "
                         f"name the file *{', *'.join(sorted(_EXT_FORMATS))}", hint="or pass format= to read_motifs")
    return f


# --------------------------------------------------------------------------------------------
# pyjaspar releases
# --------------------------------------------------------------------------------------------


#: JASPAR's collections: a release name's second field is one of them, or else a selection of ids and names
JASPAR_COLLECTIONS = ("CORE", "CNE", "PHYLOFACTS", "SPLICE", "POLII", "FAM", "PBM", "PBM_HOMEO", "PBM_HLH",
                      "UNVALIDATED")
_RELEASE_FORM = ("JASPARyyyy[:COLLECTION[:tax_group[,tax_group]][:ID_OR_NAME,...]] or "
                 "JASPARyyyy:ID_OR_NAME[,ID_OR_NAME...]")


def _parse_release(src: str) -> tuple[str, str | None, list[str] | None, list[str] | None] | None:
    """``(release, collection, tax groups, selectors)`` of a release name, None when ``src`` is not one.
    ``collection`` is None for a bare selection (``JASPAR2024:MA0139.2,CTCF``), looked up in the whole release."""
    if not _RELEASE_RE.fullmatch(src):
        return None
    release, _, rest = src.partition(":")
    head = rest.partition(":")[0]
    if rest and head.upper() not in JASPAR_COLLECTIONS:        # JASPAR2024:ID_OR_NAME,...  (names may hold '::')
        return release, None, None, _selectors(src, rest)
    parts = rest.split(":", 2) if rest else []
    collection = parts[0].upper() if parts else "CORE"
    tax = parts[1] if len(parts) > 1 and parts[1] else None
    sel = _selectors(src, parts[2]) if len(parts) > 2 else None
    taxa = None
    if tax is not None:
        taxa = [t.strip().lower() for t in tax.split(",")]
        if not all(_WORD_RE.fullmatch(t) for t in taxa):
            raise MotifError(src, f"bad tax group {tax!r} (a release name is {_RELEASE_FORM})")
    return release, collection, taxa, sel


def _selectors(src: str, text: str) -> list[str]:
    from pipeline.selection import split_selectors  # noqa: PLC0415

    try:
        return split_selectors(text)
    except ValueError as e:
        raise MotifError(src, f"{e} (a release name is {_RELEASE_FORM})") from None


def _read_release(src: str, spec) -> list[Motif]:
    release, collection, taxa, sel = spec
    try:
        import pyjaspar  # noqa: PLC0415
    except ImportError:
        raise MotifError(src, "pyjaspar is not installed; cannot read a named JASPAR release") from None
    releases = getattr(pyjaspar, "jaspar_releases", {})
    if release not in releases:
        raise MotifError(src, f"unknown JASPAR release {release!r} (pyjaspar has "
                         f"{', '.join(sorted(releases))})")
    import warnings  # noqa: PLC0415

    db = pyjaspar.jaspardb(release=release)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pyjaspar warns on 0 motifs and unknown ids; we raise instead
        if collection is None:
            bio = [db.fetch_motif_by_id(mid) for mid in _release_lookup(db, src, sel)]
        else:
            bio = db.fetch_motifs(collection=collection, tax_group=taxa)
    recs = [_Rec(b.matrix_id, b.name or b.matrix_id, None, _bio_matrix(b), None, "counts") for b in bio]
    if not recs:
        raise MotifError(src, "0 motifs in this release/collection/tax group")
    motifs = _finish(recs, src)
    return select_motifs(motifs, sel, src) if collection is not None and sel else motifs


def _release_lookup(db, src: str, selectors: list[str]) -> list[str]:
    """Matrix ids (``BASE.VERSION``) of a selection from the whole release (:func:`pipeline.selection.lookup`)."""
    from pipeline.selection import lookup  # noqa: PLC0415

    rows = db.conn.execute("select BASE_ID, VERSION, NAME, COLLECTION from MATRIX").fetchall()
    found, unknown = lookup(rows, selectors)
    if unknown:
        raise _unknown_error(src, unknown, [f"{b}.{v}" for b, v, _, _ in rows], [r[2] or "" for r in rows])
    return found


def _unknown_error(src: str, unknown: list[str], ids: list[str], names: list[str]) -> MotifError:
    from pipeline.selection import describe_unknown  # noqa: PLC0415

    return MotifError(src, describe_unknown(unknown, ids, names))


def select_motifs(motifs: list[Motif], selectors, src: str | None = None) -> list[Motif]:
    """The motifs that ``selectors`` (ids or names, see :mod:`pipeline.selection`) choose, in source order.

    An id selects that motif; an id without its ``.version`` every version present; a name every motif of that
    name; case is ignored when nothing matches as written.  A selector that matches nothing is a
    :class:`MotifError` listing near ids and names."""
    from pipeline.selection import select  # noqa: PLC0415

    if isinstance(selectors, str):
        selectors = [selectors]
    src = src if src is not None else (motifs[0].source if motifs else None)
    keep, unknown = select(list(selectors), [m.id for m in motifs], [m.name for m in motifs])
    if unknown:
        raise _unknown_error(src, unknown, [m.id for m in motifs], [m.name for m in motifs])
    return [motifs[i] for i in keep]


# --------------------------------------------------------------------------------------------
# Public API
# --------------------------------------------------------------------------------------------


def read_motifs(
    source: str | os.PathLike, format: str | None = None, *, prob_tolerance: float = PROB_TOLERANCE,
    select=None,
) -> list[Motif]:
    """Read every motif of a motif file or of a named JASPAR release.

    Parameters
    ----------
    source : str or os.PathLike
        A motif file (``.gz`` files are decompressed transparently), or a JASPAR release shipped
        by pyjaspar: ``JASPARyyyy[:COLLECTION[:tax_group[,tax_group...]][:ID_OR_NAME,...]]``, e.g.
        ``JASPAR2024`` (collection CORE, all taxa) or ``JASPAR2024:CORE:vertebrates``, or
        ``JASPARyyyy:ID_OR_NAME[,ID_OR_NAME...]``: single matrices from the whole release, in that
        order (``JASPAR2024:MA0139.2,MA0079.5``; a base id ``MA0139`` is its latest version; a name
        ``CTCF`` the latest version of every CORE matrix of that name).  A source is a release
        name only if no file of that name exists.  Releases are non-redundant (latest version
        of each base id), exactly as ``jaspardb(release).fetch_motifs(collection, tax_group)``
        returns them, in that order.
    format : str, optional
        One of ``FORMATS`` ("jaspar", "meme", "transfac", "homer", "pfm"; alias "minimal" for
        "meme").  By default the extension decides (``.jaspar``, ``.meme``, ``.transfac``,
        ``.motif``), and the content when the extension is ambiguous (``.pfm``, ``.txt``, ...).
    prob_tolerance : float, default 0.02
        Largest allowed ``|row sum - 1|`` for a matrix of kind "probabilities".  Keyword-only
        addition to the agreed API: real files break the 0.02 rule (``RSAT_vertebrates.pfm``
        motif ``cluster_2047`` has a last row ``0.2 0.2 0.2 0.2``); a caller can loosen it
        explicitly instead of the reader normalising such rows silently.
    select : str or list of str, optional
        Keep only these motifs, by id or name (:func:`select_motifs`; FIMO's ``--motif``), in
        source order; one that matches nothing is an error listing near ids and names.

    Returns
    -------
    list of Motif
        In file order, ``record`` = 1..n.  Duplicate ids are kept (see :func:`duplicate_ids`).

    Raises
    ------
    MotifError
        Missing/unreadable file, unknown format, 0 motifs, or any malformed record: ragged rows,
        non-numeric / negative / NaN / inf values, zero-length motifs, a position summing to 0,
        probability rows not summing to 1 +- 0.02, truncated records.
    """
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a path or a release name, not {type(source).__name__}")
    src = os.fspath(source)
    if isinstance(src, bytes):
        src = os.fsdecode(src)
    if not os.path.exists(src):
        spec = _parse_release(src)
        if spec is not None:
            if format not in (None, "jaspar"):
                raise MotifError(src, f"a motif format ({format!r}) makes no sense for a JASPAR release")
            motifs = _read_release(src, spec)
            return select_motifs(motifs, select, src) if select else motifs
    if format is not None:
        _resolve_format(format, src, "")  # unknown format: fail before touching the file
    text = _decode(_read_bytes(src), src)
    if not text.strip():
        raise MotifError(src, "file is empty (0 motifs)")
    fmt = _resolve_format(format, src, text)
    motifs = _PARSERS[fmt](text, src, prob_tolerance)
    return select_motifs(motifs, select, src) if select else motifs


def duplicate_ids(motifs: list[Motif]) -> dict[str, int]:
    """Ids that occur more than once in ``motifs``, with their counts (read_motifs keeps both)."""
    return {k: v for k, v in Counter(m.id for m in motifs).items() if v > 1}


def _check_background(background) -> np.ndarray:
    bg = np.asarray(background, dtype=np.float64)
    if bg.shape != (4,) or not np.all(np.isfinite(bg)) or np.any(bg <= 0):
        raise ValueError(f"background must be 4 finite values > 0 (A C G T), got {background!r}")
    return bg / bg.sum()


def motif_probabilities(motif: Motif, background: np.ndarray, pseudocount: float = 0.1) -> np.ndarray:
    """Position probability matrix with FIMO's pseudocount rule.

    MEME suite 5.4.1 ``motif.c:apply_pseudocount_to_motif`` (called by ``motif-in.c`` with FIMO's
    ``--motif-pseudo``, default 0.1, after ``normalize_motif``)::

        p' = (p * N + pseudocount * bg) / (N + pseudocount)

    with ``N`` = the row sum of that position for counts (so ``p*N`` is the count), and for
    probabilities ``motif.nsites`` when > 0, else 20 (MEME's DEFAULT_SITE_COUNT).  Rows are
    normalised to sum 1 first (MEME's reader does the same).  Note MEME stores N in an ``int``,
    so a fractional nsites is truncated there; here it is used as is.

    Parameters
    ----------
    motif : Motif
        kind "counts" or "probabilities".
    background : numpy.ndarray, shape (4,)
        A C G T background, all > 0 (normalised here).
    pseudocount : float, default 0.1
        Total pseudocount; 0 returns the (normalised) matrix unchanged.

    Returns
    -------
    numpy.ndarray, shape (m, 4), float64
        Each row sums to 1.
    """
    if motif.kind == "logodds":
        raise ValueError(f"motif {motif.id} is a log-odds matrix; it has no probabilities")
    try:
        pseudocount = float(pseudocount)
    except (TypeError, ValueError):
        raise ValueError(f"pseudocount must be a number, got {pseudocount!r}") from None
    if not (math.isfinite(pseudocount) and pseudocount >= 0):
        raise ValueError(f"pseudocount must be a finite number >= 0, got {pseudocount!r}")
    bg = _check_background(background)
    mat = np.asarray(motif.matrix, dtype=np.float64)
    sums = mat.sum(axis=1, keepdims=True)
    p = mat / sums
    if pseudocount == 0:
        return p
    if motif.kind == "counts":
        n = sums
    else:
        n = motif.nsites if motif.nsites is not None and motif.nsites > 0 else DEFAULT_NSITES
    return (p * n + pseudocount * bg) / (n + pseudocount)


def pwm_from_motif(motif: Motif, background: np.ndarray, pseudocount: float = 0.1) -> np.ndarray:
    """Log-odds scoring matrix in bits, as FIMO computes it.

    ``log2(max(p', 1e-10) / bg)`` with ``p'`` from :func:`motif_probabilities`.  The floor
    ``PROB_FLOOR`` = 1e-10 only matters with pseudocount 0 and a zero probability, where it gives
    ``log2(1e-10/bg)`` (about -31 bits for bg 0.25) instead of -inf.

    Parameters
    ----------
    motif : Motif
    background : numpy.ndarray, shape (4,)
    pseudocount : float, default 0.1

    Returns
    -------
    numpy.ndarray, shape (m, 4), float64
        For ``kind == "logodds"`` the matrix is returned as is (a copy), ignoring background and
        pseudocount.  MEME files write log-odds as ``100 * log2(p/bg)`` (``motif.c``,
        ``convert_freqs_into_scores``), so those values are on a 100x scale compared with bits.
    """
    if motif.kind == "logodds":
        return np.array(motif.matrix, dtype=np.float64)
    bg = _check_background(background)
    p = motif_probabilities(motif, bg, pseudocount)
    return np.log2(np.maximum(p, PROB_FLOOR) / bg)


def reverse_complement(pwm: np.ndarray) -> np.ndarray:
    """Reverse complement of a (m, 4) A C G T matrix: ``pwm[::-1, ::-1].copy()``.

    Parameters
    ----------
    pwm : numpy.ndarray, shape (m, 4)

    Returns
    -------
    numpy.ndarray, shape (m, 4)
    """
    pwm = np.asarray(pwm)
    if pwm.ndim != 2 or pwm.shape[1] != 4:
        raise ValueError(f"expected an (m, 4) matrix, got shape {pwm.shape}")
    return pwm[::-1, ::-1].copy()


def read_background(spec: str | None, genome_background=None) -> np.ndarray:
    """Order-0 A C G T background.

    Parameters
    ----------
    spec : str or None
        ``None`` or ``"uniform"``: 0.25 each.  ``"nrdb"``: MEME's NRDB DNA frequencies, FIMO's
        default background (see ``NRDB_DNA``).  ``"genome"``: ``genome_background`` (required;
        counts or frequencies).  ``"a,c,g,t"``: 4 comma-separated numbers.  Otherwise a path to a
        MEME-style background file: ``#`` comments, lines ``A 0.3`` (order-0 letters; lines for
        higher orders such as ``AA 0.09`` are ignored).
    genome_background : array_like, shape (4,), optional

    Returns
    -------
    numpy.ndarray, shape (4,), float64
        Sums to 1, all > 0.

    Raises
    ------
    MotifError
        Bad spec or file (with the file's name and line).
    """
    if spec is None or spec == "uniform":
        return np.full(4, 0.25)
    if spec == "nrdb":
        return NRDB_DNA.copy()
    if spec == "genome":
        if genome_background is None:
            raise MotifError("background", "'genome' background asked for but no genome "
                             "background was given")
        vals, where, line = np.asarray(genome_background, dtype=np.float64), "genome background", None
    elif not os.path.exists(spec) and "," in spec:
        parts = [t.strip() for t in spec.split(",")]
        if len(parts) != 4 or not all(_is_number(t) for t in parts):
            raise MotifError(spec, "background must be 4 comma-separated numbers (A,C,G,T)")
        vals, where, line = np.array([float(t) for t in parts]), spec, None
    else:
        if not os.path.exists(spec):
            raise MotifError(spec, "background is not 'uniform', 'genome', 4 comma-separated "
                             "numbers or an existing file")
        text = _decode(_read_bytes(spec), spec)
        found: dict[str, float] = {}
        line = None
        for i, raw in enumerate(text.split("\n"), 1):
            s = raw.split("#", 1)[0].strip()
            if not s:
                continue
            words = s.split()
            if len(words) != 2:
                raise MotifError(spec, f"expected 'LETTER FREQUENCY', got {s[:40]!r}", i)
            key = words[0].upper()
            if len(key) != 1:
                continue  # higher-order Markov entries
            if key not in "ACGT":
                raise MotifError(spec, f"letter {words[0]!r} is not one of A C G T", i)
            if key in found:
                raise MotifError(spec, f"letter {key!r} given twice", i)
            found[key] = _num(words[1], spec, i)
            line = i
        missing = [b for b in "ACGT" if b not in found]
        if missing:
            raise MotifError(spec, f"background file lacks {' '.join(missing)}")
        vals, where = np.array([found[b] for b in "ACGT"]), spec
    if vals.shape != (4,) or not np.all(np.isfinite(vals)) or np.any(vals <= 0):
        raise MotifError(where, f"background must be 4 finite values > 0 (A C G T), got "
                         f"{vals.tolist()}", line)
    return vals / vals.sum()


def motifs_checksum(source: str | os.PathLike) -> str:
    """SHA-256 (hex) of the motif file's bytes, or of the release name for pyjaspar releases.

    For a release the hashed text is the source string as given after normalisation
    (``JASPAR2024:CORE:vertebrates``), so different collections or tax groups differ.
    """
    src = os.fspath(source)
    if not os.path.exists(src):
        spec = _parse_release(src)
        if spec is not None:
            release, collection, taxa, sel = spec
            fields = [release, ",".join(sel)] if collection is None else [release, collection, ",".join(taxa or [])]
            if collection is not None and sel:
                fields.append(",".join(sel))
            name = ":".join(fields).rstrip(":")          # JASPAR2024:CORE:vertebrates as before
            return hashlib.sha256(name.encode()).hexdigest()
    h = hashlib.sha256()
    h.update(_read_bytes(src))
    return h.hexdigest()


# --------------------------------------------------------------------------------------------
# Writers (read back by read_motifs: tested round trips)
# --------------------------------------------------------------------------------------------


def _check_writable(motifs) -> None:
    for m in motifs:
        if m.kind == "logodds":
            raise ValueError(f"motif {m.id}: a log-odds matrix cannot be written as probabilities or counts")
        if not re.fullmatch(r"\S+", m.id) or not re.fullmatch(r"\S+", m.name):
            raise ValueError(f"motif id and name must be non-empty words without spaces: {m.id!r} {m.name!r}")


def format_meme(motifs: list[Motif], background=None, strands: str = "+ -") -> str:
    """MEME minimal motif format (version 4) text of ``motifs``.

    Letter probabilities are the rows normalised to sum 1 (6 decimals), ``nsites`` is ``motif.nsites``
    (for counts the largest row sum).  No ``E=`` is written: nothing here computes a motif's significance,
    and MEME's minimal format makes it optional (``E= 0`` would claim a perfect one).

    Parameters
    ----------
    motifs : list of Motif
        kind "counts" or "probabilities".
    background : array_like, shape (4,), optional
        Written as the ``Background letter frequencies`` (uniform when not given).
    strands : str
        ``"+ -"`` or ``"+"``.
    """
    _check_writable(motifs)
    bg = np.full(4, 0.25) if background is None else _check_background(background)
    out = ["MEME version 4", "", "ALPHABET= ACGT", "", f"strands: {strands}", "",
           "Background letter frequencies",
           " ".join(f"{b} {v:.6f}" for b, v in zip("ACGT", bg)), ""]
    for m in motifs:
        mat = np.asarray(m.matrix, np.float64)
        p = mat / mat.sum(axis=1, keepdims=True)
        nsites = m.nsites if m.nsites is not None else (float(mat.sum(axis=1).max()) if m.kind == "counts"
                                                        else DEFAULT_NSITES)
        out.append(f"MOTIF {m.id} {m.name}" if m.name != m.id else f"MOTIF {m.id}")
        out.append(f"letter-probability matrix: alength= 4 w= {m.length} nsites= {nsites:g}")
        out += [" ".join(f"{v:.6f}" for v in row) for row in p]
        out.append("")
    return "\n".join(out) + "\n"


def format_jaspar(motifs: list[Motif]) -> str:
    """JASPAR bracket format text of ``motifs`` (``>id<TAB>name`` then rows A C G T).

    Counts are written as integers where they are whole numbers, else with 4 decimals; probability
    matrices as probabilities (6 decimals).
    """
    _check_writable(motifs)
    out = []
    for m in motifs:
        mat = np.asarray(m.matrix, np.float64)
        whole = m.kind == "counts" and np.all(mat == np.round(mat))
        out.append(f">{m.id}\t{m.name}")
        for k, b in enumerate("ACGT"):
            vals = [f"{int(v)}" if whole else (f"{v:.4f}" if m.kind == "counts" else f"{v:.6f}") for v in mat[:, k]]
            out.append(f"{b} [ " + " ".join(vals) + " ]")
    return "\n".join(out) + "\n"
