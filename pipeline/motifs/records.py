"""What the format readers share: :class:`Record` (one motif as a line scan found it, with the line of each
position), strict number parsing, and :func:`finish`, which validates records and turns them into
:class:`~pipeline.motifs.model.Motif` with errors naming the file, line and record; and the cross-check of a
``Bio.motifs`` result against the line scan (:func:`bio_check`; what it guards against: ``_BIO_NOTES``)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from pipeline.motifs.model import PROB_TOLERANCE, Motif, MotifError

#: IUPAC nucleotide letters: a consensus letter that may lead (HOMER/pfm) or trail (TRANSFAC) a matrix row.
IUPAC = set("ACGTURYSWKMBDHVNacgturyswkmbdhvn")

_BIO_NOTES = """Bio.motifs (Biopython 1.88) behaviours that the readers of this package guard against:
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


@dataclass
class Record:
    """One motif as a line scan found it: ``matrix`` (m, 4) rows as read, the line of its header and of each
    position (``pos_lines``; None when rows are letters, as in JASPAR), ``kind`` None to be inferred."""
    id: str
    name: str
    line: int  # line of the header (or first row)
    matrix: np.ndarray  # (m, 4)
    pos_lines: list[int] | None  # line of each position, None when rows are letters (jaspar)
    kind: str | None  # None: infer
    nsites: float | None = None


def number(token: str, src: str, line: int, *, negative_ok: bool = False) -> float:
    """``token`` as a finite float (>= 0 unless ``negative_ok``), else a MotifError naming ``src`` and ``line``."""
    try:
        v = float(token)
    except ValueError:
        raise MotifError(src, f"non-numeric value {token!r}", line=line) from None
    if not math.isfinite(v):
        raise MotifError(src, f"value {token!r} is not finite", line=line)
    if v < 0 and not negative_ok:
        raise MotifError(src, f"negative value {token!r}", line=line)
    return v


def last_line(lines: list[str], upto: int | None = None) -> int:
    """1-based number of the last non-blank line among lines[:upto]."""
    k = len(lines) if upto is None else upto
    while k > 0 and not lines[k - 1].strip():
        k -= 1
    return max(k, 1)


def is_number(token: str) -> bool:
    """Whether ``token`` parses as a float."""
    try:
        float(token)
    except ValueError:
        return False
    return True


def _loc(rec: Record, pos: int) -> int:
    return rec.pos_lines[pos] if rec.pos_lines is not None else rec.line


def _infer_kind(mat: np.ndarray, integer_counts: bool) -> str:
    if mat.size and (mat > 1.0 + 1e-6).any():
        return "counts"
    if integer_counts and mat.size and np.all(mat == np.round(mat)):
        return "counts"
    return "probabilities"


def finish(recs: list[Record], src: str, *, integer_counts: bool = False,
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
                # rows short of 1 (a lost digit, an upstream 0.2 0.2 0.2 0.2) are renormalised, with a warning
                # (sniff.warn_short_rows); a row over 1 is no probability row (counts in a probability block?)
                off = np.flatnonzero(sums - 1.0 > prob_tolerance + 1e-9)
                if off.size:
                    pos = int(off[0])
                    raise MotifError(
                        src,
                        f"position {pos + 1} of a probability matrix sums to {sums[pos]:.4g} "
                        f"(more than 1 + {prob_tolerance:g})",
                        _loc(rec, pos), k, rec.id,
                    )
            elif nsites is None:
                nsites = float(sums.max())
        mat = np.ascontiguousarray(mat, dtype=np.float64)
        mat.setflags(write=False)
        out.append(Motif(rec.id, rec.name or rec.id, mat, kind, nsites, src, k))
    return out


def bio_matrix(bio_motif) -> np.ndarray:
    """The (m, 4) A C G T count matrix of a ``Bio.motifs`` motif."""
    return np.array([bio_motif.counts[b] for b in "ACGT"], dtype=np.float64).T.reshape(-1, 4)


def bio_check(m: Motif, bio_motif, src: str) -> Motif:
    """Take the Bio.motifs matrix after checking it against the line scan."""
    bm = bio_matrix(bio_motif)
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
