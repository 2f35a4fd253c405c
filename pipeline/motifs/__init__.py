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
package has checked the file, and its result is then checked against that scan (same number of
records, same ids, same values), because ``Bio.motifs`` drops or invents records silently on some
malformed inputs.  MEME, HOMER and gimmemotifs pfm files are read by the small strict parsers here,
because the ``Bio.motifs`` readers for them are wrong for real files (see ``records._BIO_NOTES``).

PWM model
---------
:func:`motif_probabilities` and :func:`pwm_from_motif` follow FIMO's defaults (MEME suite 5.4.1: pseudocount
0.1, scores in bits; FIMO's default background is MEME's NRDB, ``read_background("nrdb")``); see
:mod:`pipeline.motifs.model`.

Modules
-------
``sniff``: :func:`read_motifs`, format detection, :func:`motifs_checksum`; ``jaspar``, ``meme``, ``transfac``,
``rows`` (HOMER, pfm): one reader per format family; ``releases``: pyjaspar's JASPAR releases; ``selectors``:
:func:`select_motifs`; ``records``: what the readers share (the line scan's record, strict numbers, validation,
the ``Bio.motifs`` cross-check); ``sources``: a file's bytes and text; ``model``: :class:`Motif`,
:class:`MotifError`, the PPM/PWM model; ``background``: :func:`read_background`; ``writers``: MEME and JASPAR text.
"""
from pipeline.motifs.background import read_background
from pipeline.motifs.model import (DEFAULT_NSITES, NRDB_DNA, PROB_FLOOR, PROB_TOLERANCE, LogOddsWarning, Motif,
                                   MotifError, SharedIdWarning, duplicate_ids, minus_strand_pwm, motif_probabilities,
                                   pwm_from_motif, reverse_complement, warn_logodds_only, warn_shared_ids)
from pipeline.motifs.releases import JASPAR_COLLECTIONS
from pipeline.motifs.selectors import select_motifs
from pipeline.motifs.sniff import FORMATS, motifs_checksum, read_motifs
from pipeline.motifs.writers import format_jaspar, format_meme

__all__ = [
    "DEFAULT_NSITES",
    "FORMATS",
    "JASPAR_COLLECTIONS",
    "Motif",
    "MotifError",
    "NRDB_DNA",
    "PROB_FLOOR",
    "PROB_TOLERANCE",
    "duplicate_ids",
    "LogOddsWarning",
    "SharedIdWarning",
    "format_jaspar",
    "format_meme",
    "minus_strand_pwm",
    "motif_probabilities",
    "motifs_checksum",
    "pwm_from_motif",
    "warn_logodds_only",
    "warn_shared_ids",
    "read_background",
    "read_motifs",
    "reverse_complement",
    "select_motifs",
]
