"""The front door: :func:`read_motifs` (a file in any supported format, or a named JASPAR release), format
detection from the extension or the content, and :func:`motifs_checksum` (a source's identity in provenance)."""
from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

import numpy as np

from pipeline.motifs import cache
from pipeline.motifs.jaspar import JASPAR_ROW, read_jaspar
from pipeline.motifs.meme import read_meme
from pipeline.motifs.model import PROB_TOLERANCE, Motif, MotifError
from pipeline.motifs.records import IUPAC, is_number
from pipeline.motifs.releases import parse_release, read_release
from pipeline.motifs.rows import read_homer, read_pfm
from pipeline.motifs.selectors import select_motifs
from pipeline.motifs.sources import decode, read_bytes
from pipeline.motifs.transfac import read_transfac

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

_PARSERS = {
    "jaspar": read_jaspar,
    "meme": read_meme,
    "transfac": read_transfac,
    "homer": read_homer,
    "pfm": read_pfm,
}


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
    if any(JASPAR_ROW.match(ln) and ln[0] in "ACGT" for ln in head[:10]):
        return "jaspar"
    # rows-of-numbers formats: look at the blocks under the first headers
    blocks, cur = [], None
    for ln in head:
        if ln.startswith(">"):
            cur = {"header": ln, "widths": []}
            blocks.append(cur)
            continue
        words = ln.split()
        if len(words) == 5 and len(words[0]) == 1 and words[0] in IUPAC:
            words = words[1:]
        if cur is None:
            if not all(is_number(w) for w in words):
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
    if len(fields) >= 3 and is_number(fields[2].strip()):
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
        Largest ``|row sum - 1|`` a row of a matrix of kind "probabilities" may have without notice:
        one over ``1 + prob_tolerance`` is an error, rows under ``1 - prob_tolerance`` are named in one
        :class:`ShortRowsWarning` and renormalised (``RSAT_vertebrates.pfm`` motif ``cluster_2047``
        has a row ``0.2 0.2 0.2 0.2``: refusing it refused the whole database).
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
        probability rows summing to more than 1 + 0.02, truncated records.  Rows summing to less than
        1 - 0.02 are renormalised with a warning (:func:`warn_short_rows`).
    """
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"source must be a path or a release name, not {type(source).__name__}")
    src = os.fspath(source)
    if isinstance(src, bytes):
        src = os.fsdecode(src)
    if not os.path.exists(src):
        spec = parse_release(src)
        if spec is not None:
            if format not in (None, "jaspar"):
                raise MotifError(src, f"a motif format ({format!r}) makes no sense for a JASPAR release")
            motifs = read_release(src, spec)
            return select_motifs(motifs, select, src) if select else motifs
    if format is not None:
        _resolve_format(format, src, "")  # unknown format: fail before touching the file
    data = read_bytes(src)
    text = decode(data, src)
    if not text.strip():
        raise MotifError(src, "file is empty (0 motifs)")
    _refuse_fasta(text, src)
    fmt = _resolve_format(format, src, text)
    entry = cache.key(data, fmt, prob_tolerance)
    motifs = cache.load(entry, src)         # the same bytes read before by these readers: no parse
    if motifs is None:
        motifs = _PARSERS[fmt](text, src, prob_tolerance)
        cache.store(entry, motifs)
    motifs = select_motifs(motifs, select, src) if select else motifs
    warn_short_rows(motifs, src, prob_tolerance)
    return motifs


_BASES = re.compile(r"[ACGTUNRYSWKMBDHVacgtunryswkmbdhv]{4,}")


def _refuse_fasta(text: str, src: str) -> None:
    """A FASTA file given where motifs are expected (the arguments swapped): say so, instead of a row-length error
    on its first line of bases.  No motif format has a line of bases right after a ``>`` line."""
    lines = [(i, ln.strip()) for i, ln in enumerate(text.split("\n", 64)[:64], 1) if ln.strip()]
    if len(lines) >= 2 and lines[0][1].startswith(">") and _BASES.fullmatch(lines[1][1]):
        raise MotifError(src, "looks like a FASTA file of sequences (a '>' header, then a line of bases), not a "
                         "motif file", lines[1][0])


class ShortRowsWarning(UserWarning):
    """Probability rows that sum to less than 1: renormalised.  The CLI prints it as one line."""
    one_line = True


def warn_short_rows(motifs: list[Motif], src: str, prob_tolerance: float = PROB_TOLERANCE) -> None:
    """One warning for the probability rows of ``motifs`` that sum to less than ``1 - prob_tolerance``: they are
    renormalised (:func:`pipeline.motifs.motif_probabilities` divides every row by its sum), as MEME's and
    gimmemotifs' readers do, rather than refusing a whole database for one row (``RSAT_vertebrates.pfm``, record
    1164: a row of 0.2 0.2 0.2 0.2); the warning says so, so it is not done silently."""
    short = [(m, np.flatnonzero(m.matrix.sum(axis=1) < 1.0 - prob_tolerance - 1e-9)) for m in motifs
             if m.kind == "probabilities"]
    short = [(m, rows) for m, rows in short if rows.size]
    if short:
        import warnings  # noqa: PLC0415

        m, rows = short[0]
        n = sum(r.size for _, r in short)
        warnings.warn(ShortRowsWarning(
            f"{src}: {n:,} probability row(s) in {len(short):,} motif(s) sum to less than 1 - {prob_tolerance:g} "
            f"(first: record {m.record} ({m.id}) position {int(rows[0]) + 1} sums to "
            f"{float(m.matrix[rows[0]].sum()):.4g}); each is divided by its sum"), stacklevel=3)


def motifs_checksum(source: str | os.PathLike) -> str:
    """SHA-256 (hex) of the motif file's bytes, or of the release name for pyjaspar releases.

    For a release the hashed text is the source string as given after normalisation
    (``JASPAR2024:CORE:vertebrates``), so different collections or tax groups differ.
    """
    src = os.fspath(source)
    if not os.path.exists(src):
        spec = parse_release(src)
        if spec is not None:
            release, collection, taxa, sel = spec
            fields = [release, ",".join(sel)] if collection is None else [release, collection, ",".join(taxa or [])]
            if collection is not None and sel:
                fields.append(",".join(sel))
            name = ":".join(fields).rstrip(":")          # JASPAR2024:CORE:vertebrates as before
            return hashlib.sha256(name.encode()).hexdigest()
    h = hashlib.sha256()
    h.update(read_bytes(src))
    return h.hexdigest()
