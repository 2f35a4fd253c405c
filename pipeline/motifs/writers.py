"""Writers: MEME minimal (version 4) and JASPAR bracket text of motifs, read back by
:func:`~pipeline.motifs.sniff.read_motifs` (tested round trips)."""
from __future__ import annotations

import re

import numpy as np

from pipeline.motifs.model import DEFAULT_NSITES, Motif, check_background


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
    bg = np.full(4, 0.25) if background is None else check_background(background)
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
