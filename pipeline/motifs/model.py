"""The motif record and the PWM model: :class:`Motif`, :class:`MotifError`, FIMO's pseudocount rule
(:func:`motif_probabilities`), log-odds matrices in bits (:func:`pwm_from_motif`), reverse complements, and the
constants they use (MEME's NRDB background, the probability tolerance, the site count default).

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

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from pipeline import MotifgridError

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
        self.motif_id = motif_id
        where = self.source or "<motifs>"
        if line is not None:
            where += f" line {line}"
        if record is not None:
            where += f" record {record}"
            if motif_id:
                where += f" ({motif_id})"
        self.where = where
        super().__init__(self.with_hint(hint))

    def __reduce__(self):
        """Pickled with its fields (it crosses processes: Dask workers, ``enrich``'s input reader)."""
        return type(self), (self.source, self.problem, self.line, self.record, self.motif_id, self.hint)

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


class SharedIdWarning(UserWarning):
    """Matrices that share an id: where results are keyed by id (a scan's q-value families) they count as one.
    The CLI prints it as one line (``one_line``)."""
    one_line = True


def duplicate_ids(motifs: list[Motif]) -> dict[str, int]:
    """Ids that occur more than once in ``motifs``, with their counts (read_motifs keeps both)."""
    return {k: v for k, v in Counter(m.id for m in motifs).items() if v > 1}


def _first_few(items: list, n: int = 5) -> str:
    """``items`` as text for a warning: the first ``n``, then an ellipsis."""
    return ", ".join(items[:n]) + (" …" if len(items) > n else "")


def warn_shared_ids(source, motifs: list[Motif], keyed: str, stacklevel: int = 3) -> None:
    """One :class:`SharedIdWarning` when matrices of ``source`` share an id (HOMER files name motifs by their
    consensus); ``keyed`` says what the command's results key by id, and so what the shared ids merge."""
    dups = duplicate_ids(motifs)
    if dups:
        import warnings  # noqa: PLC0415

        shown = _first_few([f"{k} ×{v}" for k, v in dups.items()])
        warnings.warn(SharedIdWarning(f"{source}: {len(dups):,} motif id(s) name more than one matrix ({shown}); "
                                      f"{keyed}; give them distinct ids to tell them apart"), stacklevel=stacklevel)


class LogOddsWarning(UserWarning):
    """Motifs given as a log-odds matrix only: scored as written.  The CLI prints it as one line."""
    one_line = True


def warn_logodds_only(source, motifs: list[Motif], stacklevel: int = 3) -> None:
    """One :class:`LogOddsWarning` when motifs of ``source`` have no probabilities (a MEME file's ``log-odds
    matrix`` alone): they are scored as written, and MEME writes ``100 * log2(p / bg)`` (:func:`pwm_from_motif`),
    so their scores are not bits like the others', and neither the background nor the pseudocount changes them."""
    ids = [m.id for m in motifs if m.kind == "logodds"]
    if ids:
        import warnings  # noqa: PLC0415

        warnings.warn(LogOddsWarning(f"{source}: {len(ids):,} motif(s) have a log-odds matrix only "
                                     f"({_first_few(ids)}): they are scored as written (MEME writes 100 x log2 odds, "
                                     "so their scores are not in bits like the others'), whatever the background "
                                     "and pseudocount; give their letter-probability matrices to score them in bits"),
                      stacklevel=stacklevel)


def check_background(background) -> np.ndarray:
    """An A C G T background (4 finite values > 0) normalised to sum 1; ValueError otherwise."""
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
    bg = check_background(background)
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
    bg = check_background(background)
    p = motif_probabilities(motif, bg, pseudocount)
    return np.log2(np.maximum(p, PROB_FLOOR) / bg)


def minus_strand_pwm(pwm: np.ndarray, background: np.ndarray) -> np.ndarray:
    """The ``-`` strand's scoring matrix of a log-odds matrix ``pwm = log2(p / bg)`` (bits), applied to the
    forward strand's windows: the reverse-complement motif against the same background,
    ``log2(rc(p) / bg) = rc(pwm) + log2(complement(bg) / bg)`` per column.  A window ``w`` then scores its
    log-likelihood ratio ``log2(P(w | a site on the - strand) / P(w | background))``.  For a strand-symmetric
    background (A = T, C = G: uniform, FIMO's, most genomes) it is ``reverse_complement(pwm)``, which MOODS scores
    whatever the background; under another one that matrix would be the motif against the complemented background
    (a palindrome would score a window differently on its two strands).

    Parameters
    ----------
    pwm : numpy.ndarray, shape (m, 4)
        ``pwm_from_motif`` of a motif with probabilities under ``background``.
    background : numpy.ndarray, shape (4,)

    Returns
    -------
    numpy.ndarray, shape (m, 4), float64
    """
    bg = np.asarray(background, dtype=np.float64)
    return reverse_complement(pwm) + np.log2(bg[::-1] / bg)


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
