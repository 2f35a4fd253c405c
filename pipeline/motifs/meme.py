"""MEME minimal/text v4 motif files and full MEME text output (own strict parser: the ``Bio.motifs`` MEME
readers are wrong for real files, see :mod:`pipeline.motifs.records`)."""
from __future__ import annotations

import re

import numpy as np

from pipeline.motifs.model import PROB_TOLERANCE, Motif, MotifError
from pipeline.motifs.records import Record, finish, is_number, last_line, number

_MEME_MATRIX = re.compile(r"^\s*(letter-probability|log-odds) matrix:(.*)$")
_MEME_PARAM = re.compile(r"([A-Za-z]+)\s*=\s*(\S+)")


def read_meme(text: str, src: str, tol: float = PROB_TOLERANCE) -> list[Motif]:
    """Motifs of MEME text (``src`` names it in errors; ``tol``: the probability row-sum tolerance)."""
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
    recs: list[Record] = []
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
            nsites = number(params["nsites"], src, params["_line"])
        mat = np.array(rows, dtype=np.float64).reshape(-1, 4)
        recs.append(Record(mid, alt or mid, start + 1, mat, row_lines, kind, nsites))
    n_motif_lines = len(re.findall(r"(?m)^MOTIF\s", text))
    if n_motif_lines != len(recs):
        raise MotifError(src, f"parsed {len(recs)} motifs but the file has {n_motif_lines} MOTIF "
                         "lines")
    return finish(recs, src, prob_tolerance=tol)


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
        if not words or not is_number(words[0]):
            break
        if len(words) != 4:
            raise MotifError(src, f"{which} matrix row has {len(words)} values, expected 4 "
                             "(A C G T)", k + 1)
        rows.append([number(t, src, k + 1, negative_ok=negative_ok) for t in words])
        row_lines.append(k + 1)
        k += 1
    if w is not None and len(rows) < w:
        where = k + 1 if k < end and lines[k].strip() else last_line(lines, k)
        raise MotifError(src, f"MOTIF {mid}: {which} matrix ends after {len(rows)} of w={w} rows "
                         "(truncated?)", where)
    nxt = k
    while nxt < end and not lines[nxt].strip():
        nxt += 1
    if nxt < end:
        words = lines[nxt].split()
        if words and is_number(words[0]):
            raise MotifError(src, f"MOTIF {mid}: {which} matrix has more rows than w={w}", nxt + 1)
    return (rows, row_lines, params), k
