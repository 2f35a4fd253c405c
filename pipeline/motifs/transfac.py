"""TRANSFAC-style ``AC/ID/P0`` blocks ending in ``//``: a strict line scan here, then the matrices from
``Bio.motifs.transfac``, checked against the scan."""
from __future__ import annotations

import io
import re

import numpy as np

from pipeline.motifs.model import PROB_TOLERANCE, Motif, MotifError
from pipeline.motifs.records import IUPAC, Record, bio_check, finish, last_line, number
from pipeline.motifs.sources import file_stem

_TF_KEY = re.compile(r"^[A-Z0-9]{2}$")


def _scan_transfac(lines: list[str], src: str) -> list[Record]:
    recs: list[Record] = []
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
                    rid = ident or f"{file_stem(src)}_{len(recs) + 1}"
                    name = blk["keys"].get("ID") or blk["keys"].get("NA") or rid
                    if name == rid and blk["keys"].get("NA"):
                        name = blk["keys"]["NA"]
                    mat = np.array(blk["rows"], dtype=np.float64).reshape(-1, 4)
                    recs.append(Record(rid, name, blk["p0"], mat, blk["row_lines"], None))
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
                if len(vals) == 5 and len(vals[4]) == 1 and vals[4] in IUPAC:
                    vals = vals[:4]  # trailing consensus letter
                if len(vals) != 4:
                    raise MotifError(src, f"matrix row has {len(vals)} values, expected 4 "
                                     "(A C G T)", i)
                blk["rows"].append([number(t, src, i) for t in vals])
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
                         "(truncated file?)", last_line(lines))
    return recs


def read_transfac(text: str, src: str, tol: float = PROB_TOLERANCE) -> list[Motif]:
    """Motifs of TRANSFAC text (``src`` names it in errors; ``tol``: the probability row-sum tolerance)."""
    lines = text.split("\n")
    recs = _scan_transfac(lines, src)
    if not recs:
        raise MotifError(src, "no motifs found (transfac format)")
    motifs = finish(recs, src, integer_counts=True, prob_tolerance=tol)
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
        out.append(bio_check(m, b, src))
    return out
