"""Formats whose rows are positions: HOMER ``.motif`` and gimmemotifs ``.pfm`` (own strict parsers)."""
from __future__ import annotations

import numpy as np

from pipeline.motifs.model import PROB_TOLERANCE, Motif, MotifError
from pipeline.motifs.records import IUPAC, Record, finish, is_number, number


def _read_rows_format(text: str, src: str, fmt: str, tol: float) -> list[Motif]:
    lines = text.split("\n")
    recs: list[Record] = []
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
                if len(fields) > 2 and fields[2] and not is_number(fields[2]):
                    raise MotifError(src, f"HOMER log-odds threshold {fields[2]!r} is not a "
                                     "number", i)
                mid, name = fields[0], (fields[1] if len(fields) > 1 and fields[1] else fields[0])
            else:
                words = s[1:].split()
                if not words:
                    raise MotifError(src, "empty '>' header", i)
                mid, name = words[0], (words[1] if len(words) > 1 else words[0])
            cur = Record(mid, name, i, [], [], None)
            continue
        if cur is None:
            raise MotifError(src, "matrix row before the first '>' header", i)
        words = s.split()
        if len(words) == 5 and len(words[0]) == 1 and words[0] in IUPAC:
            words = words[1:]  # leading consensus letter (ENCODE.pfm)
        if len(words) != 4:
            # more than 4: a matrix of one row per base (JASPAR's layout) that is not 4 rows long reads this way
            hint = ("; a matrix of one row per base (A C G T) needs exactly 4 rows" if len(words) > 4 else "")
            raise MotifError(src, f"row has {len(words)} values, expected 4 (A C G T){hint}", i)
        cur.matrix.append([number(t, src, i) for t in words])
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
    return finish(recs, src, prob_tolerance=tol)


def read_homer(text, src, tol=PROB_TOLERANCE):
    """Motifs of HOMER ``.motif`` text."""
    return _read_rows_format(text, src, "homer", tol)


def read_pfm(text, src, tol=PROB_TOLERANCE):
    """Motifs of gimmemotifs ``.pfm`` text."""
    return _read_rows_format(text, src, "pfm", tol)
