"""Where a command writes: ``-o`` files (standard output, streams, files outside any motifgrid output folder),
local output folders, the unfinished-scan warning; the commands' console (stderr)."""
from __future__ import annotations

import os
import sys

from pipeline.cli.args import UserError


def make_console():
    """The commands' console (stderr).  Written to a file or a pipe (a SLURM log, `2>&1 | grep`), it wraps nothing:
    rich's default there is 80 columns, which cut lines such as "... window scores/s" / "(... column scores/s)" in two
    and broke grep."""
    from rich.console import Console  # noqa: PLC0415

    return Console(stderr=True, soft_wrap=not sys.stderr.isatty())


def check_out_file(path: str, overwrite: bool | None = None) -> None:
    """An output file (``-o``): ``-`` (standard output), a stream (FIFO, device), or a file in an existing folder,
    not a folder itself, nor inside a motifgrid output folder; written by :func:`pipeline.io.storage.open_output`.
    ``overwrite=False``: an existing file is refused."""
    from pipeline.io import storage  # noqa: PLC0415

    if storage.is_url(path):
        raise UserError(f"-o {path}: give a local file name, or - for standard output")
    try:
        kind, target = storage.output_target(path)
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder; give a file name") from None
    d = os.path.dirname(target)
    if kind == "file" and not os.path.isdir(d):
        raise UserError(f"{path}: cannot write it, the folder {d} does not exist")
    if kind != "file":
        return
    refuse_inside_output(path, d)
    if overwrite is False and os.path.exists(target):      # (a dangling link: its target is written)
        raise UserError(f"{path}: exists; --overwrite to replace it")


def refuse_inside_output(path: str, folder: str) -> None:
    """UserError when ``folder``, where ``path`` would be written, is or lies in a motifgrid output folder: a file
    there becomes part of the dataset (Parquet readers took ``H/hits.bed`` as theirs)."""
    inside = _output_folder_of(folder)
    if inside is not None:
        raise UserError(f"{path}: inside the motifgrid output folder {inside}; write it elsewhere (readers of that "
                        "folder take every file in it as theirs)")


def _output_folder_of(folder: str) -> str | None:
    """The motifgrid output folder (one holding a ``_run.json``) that ``folder`` is or lies in, or None."""
    d = os.path.abspath(folder)
    while True:
        if os.path.isfile(os.path.join(d, "_run.json")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def check_local_out(a) -> None:
    """Only ingest, scan and export take object-store URLs (pipeline/io/storage.py) so far."""
    from pipeline.io import storage  # noqa: PLC0415

    if getattr(a, "out", None) and storage.is_url(a.out):
        raise UserError(f"--out {a.out}: motifgrid {a.cmd} writes to a local (or shared) folder; "
                        "object-store URLs are taken by ingest, scan and export")


def warn_unfinished(hits: str) -> None:
    """One line on stderr when ``hits`` is a scan that has not finished (interrupted, or running): its finished
    blocks' hits only, and no q-values yet."""
    from pipeline.io import storage  # noqa: PLC0415

    if storage.exists(storage.join(hits, "_run.json")) and not storage.exists(storage.join(hits, "_summary.json")):
        print(f"motifgrid export: warning: {hits} is an unfinished scan: only the hits of its finished blocks, without "
              "q-values (rerun its scan with --resume to complete it)", file=sys.stderr)
