"""JASPAR bracket format (``A [ 1 2 3 ]``), plain 4-row pfm blocks and a bare single matrix: a strict line
scan here, then the matrices from ``Bio.motifs.jaspar``, checked against the scan."""
from __future__ import annotations

import io
import re

import numpy as np

from pipeline.motifs.model import PROB_TOLERANCE, Motif, MotifError
from pipeline.motifs.records import Record, bio_check, finish, is_number, last_line, number
from pipeline.motifs.sources import file_stem

#: One bracketed row of a JASPAR record (letter, values); also how :mod:`pipeline.motifs.sniff` recognises one.
JASPAR_ROW = re.compile(r"^([A-Za-z])\s*\[(.*)\]$")


def _scan_jaspar(lines: list[str], src: str) -> list[Record]:
    recs: list[Record] = []
    cur = None  # dict(id, name, line, rows: list[(line, letter, values)])

    def close(end_line):
        if cur is None:
            return
        rows = cur["rows"]
        if not rows:
            recs.append(Record(cur["id"], cur["name"], cur["line"], np.zeros((0, 4)), None, None))
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
        recs.append(Record(cur["id"], cur["name"], cur["line"], mat.reshape(-1, 4), None, None))

    for i, raw in enumerate(lines, 1):
        s = raw.strip()
        if not s:
            continue
        if s.startswith(">"):
            if cur is not None and cur.get("headerless"):
                raise MotifError(src, f"matrix rows before the first '>' header: a file of "
                                 "several motifs needs a '>' header line for each", cur["line"])
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
            stem = file_stem(src)        # a single matrix without a header: named by its file
            cur = {"id": stem, "name": stem, "line": i, "rows": [], "headerless": True}
        if len(cur["rows"]) == 4:
            raise MotifError(src, f"record {cur['id']!r} (line {cur['line']}) has more than 4 "
                             "matrix rows (A C G T)", i)
        m = JASPAR_ROW.match(s)
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
            if tokens and not is_number(tokens[0]) and len(tokens[0]) == 1 and tokens[0].isalpha():
                raise MotifError(src, f"row label {tokens[0]!r} without brackets (expected "
                                 f"'{tokens[0]} [ ... ]' or plain numbers)", i)
        vals = [number(t, src, i) for t in tokens]
        cur["rows"].append((i, letter, vals))
    close(last_line(lines))
    return recs


def read_jaspar(text: str, src: str, tol: float = PROB_TOLERANCE) -> list[Motif]:
    """Motifs of JASPAR text (``src`` names it in errors; ``tol``: the probability row-sum tolerance)."""
    lines = text.split("\n")
    recs = _scan_jaspar(lines, src)
    if not recs:
        raise MotifError(src, "no motifs found (jaspar format)")
    motifs = finish(recs, src, integer_counts=True, prob_tolerance=tol)  # line-aware checks first
    from Bio import motifs as bio_motifs  # noqa: PLC0415

    try:
        bio = list(bio_motifs.parse(io.StringIO(text), "jaspar"))
    except Exception as e:  # Bio raises bare Exception / ValueError / KeyError
        raise MotifError(src, f"Bio.motifs jaspar parser failed: {type(e).__name__}: {e}") from None
    n_headers = sum(1 for ln in lines if ln.lstrip().startswith(">")) or 1
    if len(bio) != len(recs) or len(bio) != n_headers:
        raise MotifError(src, f"Bio.motifs returned {len(bio)} motifs but the file has "
                         f"{n_headers} records")
    return [bio_check(m, b, src) for m, b in zip(motifs, bio)]
