"""Parsed motif files cached on disk, keyed by their bytes: a command reading the same database again skips the parse.

Reading a motif file is a line scan of our own plus Biopython's parser, checked against each other
(:mod:`pipeline.motifs.records`): 0.28 s for the 879 JASPAR 2024 vertebrates on the 2-core VM (Biopython's import
0.08 of it), about a fifth of a warm scan of 300 peaks (docs/benchmarks.md, issue 16, session 9).  The motifs of a file
depend only on its bytes, the format, the probability tolerance, this package's motif readers and Biopython's
version: all five are in the key, so any change to one of them reads the file again.  Entries are ``.npz`` files
of plain arrays (no pickle): the matrices laid end to end and the other fields as JSON text.  The cache lives beside
the thresholds' (``motifgrid.motifs.cache-dir``, default ``~/.cache/motifgrid/motifs``; ``""`` or
``MOTIFGRID_NO_CACHE=1`` turn it off); an unreadable or unwritable entry only means a parse.
"""
from __future__ import annotations

import functools
import hashlib
import io
import json
import os
from pathlib import Path

import numpy as np

from pipeline.motifs.model import Motif


def cache_dir() -> Path | None:
    """The cache folder, or None when caching is off."""
    from pipeline.io.storage import cache_dir as user_cache_dir  # noqa: PLC0415

    return user_cache_dir("motifgrid.motifs.cache-dir", "~/.cache/motifgrid/motifs")


@functools.lru_cache(maxsize=1)
def _readers_version() -> str:
    """This package's motif readers (their source) and Biopython's version, hashed."""
    from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

    h = hashlib.sha256()
    for path in sorted(Path(__file__).parent.glob("*.py")):
        h.update(path.read_bytes())
    try:
        h.update(version("biopython").encode())
    except PackageNotFoundError:
        pass
    return h.hexdigest()[:16]


def key(data: bytes, fmt: str, prob_tolerance: float) -> str:
    """The entry name of a file's bytes read as ``fmt`` with ``prob_tolerance``."""
    h = hashlib.sha256(data)
    h.update(repr((fmt, float(prob_tolerance), _readers_version())).encode())
    return h.hexdigest()


def load(name: str, src: str) -> list[Motif] | None:
    """The cached motifs of entry ``name`` (their ``source`` set to ``src``), or None."""
    d = cache_dir()
    if d is None:
        return None
    try:
        with np.load(d / f"{name}.npz", allow_pickle=False) as z:
            values, lengths, meta = z["values"], z["lengths"], json.loads(z["meta"].tobytes().decode())
    except (OSError, ValueError, KeyError):
        return None
    motifs, at = [], 0
    for m, (mid, mname, kind, nsites, record) in zip(lengths.tolist(), meta):
        matrix = values[at:at + m].copy()
        matrix.flags.writeable = False
        motifs.append(Motif(id=mid, name=mname, matrix=matrix, kind=kind, nsites=nsites, source=src, record=record))
        at += m
    return motifs


def store(name: str, motifs: list[Motif]) -> None:
    """Write entry ``name`` (atomically: a temporary name, then a rename); errors ignored."""
    d = cache_dir()
    if d is None or not motifs:
        return
    meta = [[m.id, m.name, m.kind, m.nsites, m.record] for m in motifs]
    buf = io.BytesIO()
    np.savez(buf, values=np.concatenate([np.asarray(m.matrix, np.float64) for m in motifs]),
             lengths=np.array([m.length for m in motifs], np.int64),
             meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    tmp = d / f".{name}.{os.getpid()}.tmp"
    try:
        d.mkdir(parents=True, exist_ok=True)
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, d / f"{name}.npz")
    except OSError:
        tmp.unlink(missing_ok=True)
