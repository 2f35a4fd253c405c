"""A motif file's text: its bytes (one clear error for a missing, unreadable or directory path), gzip
decompression, decoding (UTF-8 with or without BOM, else Latin-1; universal newlines), and its stem (the id of a
bare matrix or an anonymous TRANSFAC record)."""
from __future__ import annotations

import gzip
import zlib
from pathlib import Path

from pipeline.motifs.model import MotifError


def file_stem(src: str) -> str:
    """The file name without ``.gz`` and its last extension (``arnt.jaspar.gz`` → ``arnt``)."""
    name = Path(src).name
    for ext in (".gz",):
        if name.endswith(ext):
            name = name[: -len(ext)]
    stem, dot, ext = name.rpartition(".")
    return stem if dot and stem else name


def read_bytes(src: str) -> bytes:
    """The file's bytes; a missing, unreadable or directory path is a MotifError."""
    p = Path(src)
    if not p.exists():
        raise MotifError(src, "no such file")
    if p.is_dir():
        raise MotifError(src, "is a directory, not a motif file")
    try:
        return p.read_bytes()
    except OSError as e:
        raise MotifError(src, f"cannot read: {e.strerror or e}") from None


def decode(data: bytes, src: str) -> str:
    """Text of a motif file's bytes: gunzipped when gzip, UTF-8 (BOM dropped) else Latin-1, ``\n`` newlines."""
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as e:
            raise MotifError(src, f"corrupt gzip data: {e}") from None
    if b"\x00" in data[:65536]:
        raise MotifError(src, "binary file, not a motif text file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("latin-1")
    return text.replace("\r\n", "\n").replace("\r", "\n")
