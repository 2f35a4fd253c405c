"""A FASTA chunk parsed into codes in one compiled pass (numba, no GIL).

:class:`pipeline.io.fasta.FastaReader` reads a FASTA a chunk of whole lines at a time; finding the headers, dropping the
line ends, checking every byte for a nucleotide code and encoding the letters took six NumPy passes and Python per
record (0.9 s for 100,000 peaks of 37.6 Mb on the VM), all holding the GIL beside whatever the command starts at the
same time (a GPU cluster's scheduler and nannies run on its event loop).  Compiled on first use, cached on disk
(``cache=True``), like :mod:`workers.enrich.fasta_numba`.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def parse_chunk(a, code, valid, space):  # pragma: no cover - compiled
    """Headers and codes of one chunk of whole FASTA lines.

    Parameters
    ----------
    a : ndarray, shape (n,), uint8
        The chunk's bytes.
    code : ndarray, shape (256,), uint8
        Code of each byte (A=0 C=1 G=2 T=3, anything else 4).
    valid : ndarray, shape (256,), bool
        Bytes a sequence may hold.
    space : ndarray, shape (256,), bool
        Bytes dropped from a sequence (whitespace).

    Returns
    -------
    codes : ndarray, shape (c,), uint8
        Every sequence byte's code, whitespace dropped (a view of a buffer of the chunk's size).
    head : ndarray, shape (h,), int64
        Where each header line starts (its ``>``), for a ``>`` that starts a line.
    stop : ndarray, shape (h,), int64
        Where each header line ends (its line end, or ``n``).
    starts : ndarray, shape (h,), int64
        How many codes precede each header (the codes of its record start there).
    bad : int
        Index in ``codes`` of the first byte that ``valid`` refuses, or -1.
    bad_byte : int
        That byte (0 when none).
    """
    n = a.size
    h = 0
    for i in range(n):
        if a[i] == 62 and (i == 0 or a[i - 1] == 10):
            h += 1
    head = np.empty(h, np.int64)
    stop = np.empty(h, np.int64)
    starts = np.empty(h, np.int64)
    codes = np.empty(n, np.uint8)
    c = 0
    k = 0
    bad = -1
    bad_byte = 0
    i = 0
    while i < n:
        b = a[i]
        if b == 62 and (i == 0 or a[i - 1] == 10):
            head[k] = i
            starts[k] = c
            j = i + 1
            while j < n and a[j] != 10:
                j += 1
            stop[k] = j
            k += 1
            i = j + 1
            continue
        if not space[b]:
            if bad < 0 and not valid[b]:
                bad = c
                bad_byte = b
            codes[c] = code[b]
            c += 1
        i += 1
    return codes[:c], head, stop, starts, bad, bad_byte
