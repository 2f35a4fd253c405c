"""Order-0 backgrounds: :func:`read_background` (uniform, MEME's NRDB, the genome's, ``a,c,g,t`` or a
MEME-style background file)."""
from __future__ import annotations

import os

import numpy as np

from pipeline.motifs.model import NRDB_DNA, MotifError
from pipeline.motifs.records import is_number, number
from pipeline.motifs.sources import decode, read_bytes


def read_background(spec: str | None, genome_background=None) -> np.ndarray:
    """Order-0 A C G T background.

    Parameters
    ----------
    spec : str or None
        ``None`` or ``"uniform"``: 0.25 each.  ``"nrdb"``: MEME's NRDB DNA frequencies, FIMO's
        default background (see ``NRDB_DNA``).  ``"genome"``: ``genome_background`` (required;
        counts or frequencies).  ``"a,c,g,t"``: 4 comma-separated numbers.  Otherwise a path to a
        MEME-style background file: ``#`` comments, lines ``A 0.3`` (order-0 letters; lines for
        higher orders such as ``AA 0.09`` are ignored).
    genome_background : array_like, shape (4,), optional

    Returns
    -------
    numpy.ndarray, shape (4,), float64
        Sums to 1, all > 0.

    Raises
    ------
    MotifError
        Bad spec or file (with the file's name and line).
    """
    if spec is None or spec == "uniform":
        return np.full(4, 0.25)
    if spec == "nrdb":
        return NRDB_DNA.copy()
    if spec == "genome":
        if genome_background is None:
            raise MotifError("background", "'genome' background asked for but no genome "
                             "background was given")
        vals, where, line = np.asarray(genome_background, dtype=np.float64), "genome background", None
    elif not os.path.exists(spec) and "," in spec:
        parts = [t.strip() for t in spec.split(",")]
        if len(parts) != 4 or not all(is_number(t) for t in parts):
            raise MotifError(spec, "background must be 4 comma-separated numbers (A,C,G,T)")
        vals, where, line = np.array([float(t) for t in parts]), spec, None
    else:
        if not os.path.exists(spec):
            raise MotifError(spec, "background is not 'uniform', 'genome', 4 comma-separated "
                             "numbers or an existing file")
        text = decode(read_bytes(spec), spec)
        found: dict[str, float] = {}
        line = None
        for i, raw in enumerate(text.split("\n"), 1):
            s = raw.split("#", 1)[0].strip()
            if not s:
                continue
            words = s.split()
            if len(words) != 2:
                raise MotifError(spec, f"expected 'LETTER FREQUENCY', got {s[:40]!r}", i)
            key = words[0].upper()
            if len(key) != 1:
                continue  # higher-order Markov entries
            if key not in "ACGT":
                raise MotifError(spec, f"letter {words[0]!r} is not one of A C G T", i)
            if key in found:
                raise MotifError(spec, f"letter {key!r} given twice", i)
            found[key] = number(words[1], spec, i)
            line = i
        missing = [b for b in "ACGT" if b not in found]
        if missing:
            raise MotifError(spec, f"background file lacks {' '.join(missing)}")
        vals, where = np.array([found[b] for b in "ACGT"]), spec
    if vals.shape != (4,) or not np.all(np.isfinite(vals)) or np.any(vals <= 0):
        raise MotifError(where, f"background must be 4 finite values > 0 (A C G T), got "
                         f"{vals.tolist()}", line)
    total = float(vals.sum())
    if abs(total - 1.0) > BACKGROUND_TOLERANCE and spec != "genome":
        import warnings  # noqa: PLC0415

        scaled = ",".join(f"{v:.4g}" for v in vals / total)
        warnings.warn(BackgroundWarning(f"{where}: the background sums to {total:.4g}, not 1: each value is divided by "
                                        f"the sum (A,C,G,T = {scaled})"), stacklevel=2)
    return vals / total


#: how far from 1 a background's sum may be (values rounded to 2-3 digits) before its renormalisation is said
BACKGROUND_TOLERANCE = 0.01


class BackgroundWarning(UserWarning):
    """A background whose values do not sum to 1: renormalised.  The CLI prints it as one line."""
    one_line = True
