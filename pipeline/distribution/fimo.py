"""``--like fimo``: FIMO 5.4.1's motif model, so that a scan reports FIMO's hits, scores and p-values.

What FIMO (MEME suite 5.4.1, ``fimo`` with default options) does, and where (file names of its source):

* **Background** (``motif-in.c:set_pseudo_bg``): MEME's NRDB DNA frequencies unless ``--bfile`` is given
  (a background line in the motif file is *not* used by default), normalised to sum 1; when both strands
  are scanned, each base's frequency is averaged with its complement's
  (``alphabet.c:average_freq_with_complement``); then ``normalize_frequencies(bg, 0.0000005)`` adds
  5e-7 to every base and renormalises.  The result is the background of the log-odds *and* of the
  p-values.
* **Probabilities** (``motif-in.c:post_process_motif``, ``motif.c``): each row is normalised unless it
  already sums to 1 within 1e-5; then ``p' = (p*N + pseudo*bg) / (N + pseudo)`` with
  ``pseudo = --motif-pseudo`` (0.1) and ``N = nsites`` stored in a C ``int`` (truncated; 20 when the
  motif gives none).  ``pseudo = 0`` leaves the matrix unchanged.
* **Log-odds** (``pssm.c:build_motif_pssm``): ``my_log2(p'/bg)`` with MEME's ``my_log2`` (``log(x) *
  1.44269504``, and ``1e-300`` for a zero probability: a letter the motif never shows scores about 0,
  not -inf, when ``pseudo = 0``).
* **Integer lattice, p-values, hit test, reverse strand**: :mod:`workers.distribution.fimo_lattice`.  The reverse
  strand is scored with the reverse-complement motif under the same (symmetric) background, so its
  integers are the forward ones reversed and complemented; ``--norc`` (here ``--strand +``) scans the
  forward strand only, with the background not averaged.
* **Windows** holding a letter outside A C G T (N, IUPAC codes) are skipped, as motifgrid does.  FIMO
  reads U as T; motifgrid's stores code U like N (so such windows are not reported).

Count matrices (JASPAR, TRANSFAC, ...) go through the same rules as their MEME conversion
(:func:`pipeline.motifs.format_meme`: probabilities = counts / row sum, ``nsites`` = the largest row
sum).  A MEME motif given only as a log-odds matrix is refused: FIMO rebuilds probabilities for it from
the motif file's own background, which is not kept here.

Not reproduced: FIMO's ``--max-stored-scores`` (100,000; beyond it FIMO drops its weakest hits and
lowers the threshold), ``--text``, priors (``--psp``), q-values (computed elsewhere) and the output
order.
"""
from __future__ import annotations

import math

import numpy as np

from workers.distribution.fimo_lattice import LatticeMatrix, meme_log2, scale_pssm

__all__ = ["LIKES", "STRANDS", "fimo_background", "fimo_probabilities", "fimo_matrix"]

LIKES = ("fimo",)                  # conventions --like can follow
STRANDS = ("both", "+", "-")       # --strand choices
BG_PSEUDO = 0.0000005              # motif-in.c set_pseudo_bg: normalize_frequencies(..., 0.0000005)
ROW_TOLERANCE = 0.00001            # motif-in.c post_process_motif: normalize_motif(motif, 0.00001)
DEFAULT_SITES = 20                 # motif.c DEFAULT_SITE_COUNT


def _normalise(v: list[float], tol: float) -> list[float]:
    """``array.c:normalize_subarray``: divide by the sum unless it is within ``tol`` of 1."""
    total = 0.0
    for x in v:
        total += x
    if not (1.0 - tol > total or 1.0 + tol < total):
        return list(v)
    return [x / total for x in v]


def fimo_background(background, both_strands: bool) -> np.ndarray:
    """The A C G T background FIMO scores and computes p-values with.

    Parameters
    ----------
    background : array_like, shape (4,)
        The background asked for (NRDB by default in FIMO; ``pipeline.motifs.read_background``).
    both_strands : bool
        Averaged with its complement when both strands are scanned.

    Returns
    -------
    numpy.ndarray, shape (4,), float64
    """
    bg = _normalise([float(x) for x in np.asarray(background, dtype=np.float64).reshape(4)], 0.0)
    if both_strands:
        at, cg = (bg[0] + bg[3]) / 2.0, (bg[1] + bg[2]) / 2.0
        bg = [at, cg, cg, at]
    total = BG_PSEUDO * 4
    for x in bg:
        total += x
    return np.array(_normalise([(x + BG_PSEUDO) / total for x in bg], 0.0))


def fimo_probabilities(motif, background: np.ndarray, pseudocount: float = 0.1) -> np.ndarray:
    """FIMO's letter probabilities of ``motif`` with its pseudocount rule (module docstring).

    Parameters
    ----------
    motif : pipeline.motifs.Motif
        kind "counts" or "probabilities".
    background : numpy.ndarray, shape (4,)
        From :func:`fimo_background`.
    pseudocount : float

    Returns
    -------
    numpy.ndarray, shape (m, 4), float64
    """
    from pipeline.motifs import MotifError  # noqa: PLC0415

    if motif.kind == "logodds":
        raise MotifError(motif.source, f"motif {motif.id} has only a log-odds matrix; --like fimo needs letter "
                         "probabilities or counts", record=motif.record)
    bg = [float(x) for x in background]
    # C: int sites = (num_sites > 0 ? num_sites : DEFAULT_SITE_COUNT), a fractional nsites truncated
    sites = int(motif.nsites) if motif.nsites is not None and motif.nsites > 0 else DEFAULT_SITES
    total = sites + pseudocount
    out = []
    for row in np.asarray(motif.matrix, dtype=np.float64).tolist():
        p = _normalise(row, ROW_TOLERANCE)
        if pseudocount != 0:
            p = [((p[a] * sites) + (pseudocount * bg[a])) / total for a in range(4)]
        out.append(p)
    return np.array(out)


def fimo_matrix(motif, background: np.ndarray, pseudocount: float = 0.1) -> LatticeMatrix:
    """FIMO's integer-scaled PSSM of ``motif`` (forward strand).

    Parameters
    ----------
    motif : pipeline.motifs.Motif
    background : numpy.ndarray, shape (4,)
        From :func:`fimo_background`.
    pseudocount : float

    Returns
    -------
    LatticeMatrix
    """
    if not (math.isfinite(pseudocount) and pseudocount >= 0):
        raise ValueError(f"pseudocount must be a finite number >= 0, got {pseudocount!r}")
    p = fimo_probabilities(motif, background, pseudocount)
    bg = [float(x) for x in background]
    logodds = [[meme_log2(row[a] / bg[a]) for a in range(4)] for row in p.tolist()]
    return scale_pssm(logodds)
