"""Where a scan reads from: a genome store as given, or a FASTA ingested into a staged store that moves into
``HITS/_genome.zarr`` once the output is claimed (stale staged stores of dead processes removed); BED regions of a
store; block sizes for inputs scanned at once."""
from __future__ import annotations

import json
import os
import time

from pipeline.io import storage
from pipeline.io.genome import GenomeStore
from pipeline.io.regions import Regions
from pipeline.scan.motif_set import ScanError


GENOME_IN_HITS = "_genome.zarr"      # where a scan keeps the store of a FASTA it was given


def is_fasta(source) -> bool:
    return not storage.is_url(source) and os.path.isfile(source)


def open_source(source: str, out: str, resume: bool, overwrite: bool, halo: int | None = None, *,
                kind: str = "scan", dataset: str = "hits dataset", error=ScanError):
    """(store, staged): a genome store as given; a FASTA ingested into a temporary store beside ``out`` (moved into
    ``out`` by :func:`place_store` once the output is claimed), or on ``--resume`` the one ``out`` already holds.
    ``halo``: the longest motif's length - 1 where the motifs are known, for a FASTA's store to hold it (its halo is
    the larger of it and the default).  ``kind``, ``dataset``, ``error``: the command's (``motifgrid variants``
    reads its genome so too)."""
    if not is_fasta(source):
        return GenomeStore(source), None
    from pipeline.engine.dataset import check_output  # noqa: PLC0415
    from pipeline.io.fasta import sniff_fasta  # noqa: PLC0415
    from pipeline.io.genome import DEFAULT_HALO, file_checksum, ingest  # noqa: PLC0415

    try:
        sniff_fasta(source, error=ScanError)
    except ScanError as e:
        raise ScanError(f"{source}: neither a genome store nor a FASTA file ({str(e).split(': ', 1)[-1]})") from None
    check_output(out, resume, kind, error, dataset, overwrite=overwrite)       # refused before any ingest
    kept = storage.join(out, GENOME_IN_HITS)
    if resume and storage.exists(storage.join(kept, "zarr.json")):
        store = GenomeStore(kept)
        if store.checksum != file_checksum(source):
            raise ScanError(f"{source}: changed since the scan in {out} ingested it ({kept}); "
                            "--overwrite to scan it anew")
        return store, None
    import tempfile  # noqa: PLC0415

    parent = os.path.dirname(os.path.abspath(out)) if not storage.is_url(out) else None
    try:
        if parent:
            os.makedirs(parent, exist_ok=True)
            _remove_stale_stores(parent)
        tmp = tempfile.mkdtemp(prefix=f"{_STAGE_PREFIX}{_host_tag()}-{os.getpid()}-", dir=parent)
    except OSError as e:                # named by the user's path, not the staging folder's (/proc/.motifgrid-...)
        raise ScanError(f"--out {out}: cannot write beside it, in {parent or 'the current folder'} "
                        f"({os.strerror(e.errno) if e.errno else e})") from None
    try:
        staged = ingest(source, os.path.join(tmp, GENOME_IN_HITS), block_size=_auto_block_size(source),
                        halo=max(DEFAULT_HALO, halo or 0))
    except OSError as e:
        remove_tree(tmp)
        if isinstance(e, (FileNotFoundError, PermissionError)) and e.filename and os.path.abspath(
                str(e.filename)) == os.path.abspath(str(source)):
            raise
        raise ScanError(f"--out {out}: cannot write the FASTA's genome store beside it, in {parent} "
                        f"({os.strerror(e.errno) if e.errno else e})") from None
    except BaseException:               # a bad FASTA, or Ctrl-C during the ingest: no temporary store left behind
        remove_tree(tmp)
        raise
    from pathlib import Path  # noqa: PLC0415

    return staged, Path(staged.path)


_STAGE_PREFIX = ".motifgrid-scan-genome-"


def remove_tree(path) -> None:
    """``path`` removed, again while it reappears: an ingest interrupted by Ctrl-C or SIGTERM may still have a chunk
    write in flight on zarr's I/O thread, which recreates a folder the first removal emptied (a loaded CI machine
    once kept a temporary store so)."""
    import shutil  # noqa: PLC0415

    for _ in range(40):
        shutil.rmtree(path, ignore_errors=True)
        if not os.path.exists(path):
            return
        time.sleep(0.05)


def _host_tag() -> str:
    import re  # noqa: PLC0415
    import socket  # noqa: PLC0415

    return re.sub(r"[^A-Za-z0-9.]", "_", socket.gethostname())[:40] or "host"


def _remove_stale_stores(parent: str) -> None:
    """Remove the stores of FASTAs being ingested beside an output (``.motifgrid-scan-genome-HOST-PID-*``) whose
    process on this host is gone: a scan killed with SIGKILL (or a power cut) during its ingest left one, 13-15 MB
    for a million peaks, that nothing else removes.  Other hosts' (a shared file system) are left alone."""
    import shutil  # noqa: PLC0415

    mine = f"{_STAGE_PREFIX}{_host_tag()}-"
    try:
        names = [n for n in os.listdir(parent) if n.startswith(mine)]
    except OSError:
        return
    for name in names:
        pid = name[len(mine):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)            # no error: alive, its ingest may be running
        except ProcessLookupError:
            shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
        except OSError:
            pass                            # alive, not ours to signal


def place_store(staged, out: str) -> GenomeStore:
    """Move (or upload) the store of a FASTA into the claimed output folder."""
    from pipeline.io.genome import upload_store  # noqa: PLC0415

    dest = storage.join(out, GENOME_IN_HITS)
    if storage.is_url(out):
        upload_store(staged, dest)
    else:
        os.replace(staged, dest)
    return GenomeStore(dest)


def _auto_block_size(fasta: str) -> int:
    """Block size for a FASTA scanned directly (:func:`block_size_for` its estimated bases)."""
    return block_size_for(os.path.getsize(fasta) * (4 if open(fasta, "rb").read(2) == b"\x1f\x8b" else 1))


def block_size_for(bases: int) -> int:
    """Block size of a store made to be scanned at once: the default for genomes; for small inputs (a few hundred
    peaks) blocks small enough that every core gets work, at least 64 Ki positions (a block has a fixed cost)."""
    from pipeline.io.genome import DEFAULT_BLOCK_SIZE  # noqa: PLC0415

    per_core = int(bases) // (2 * (os.cpu_count() or 1))
    size = 1 << 16
    while size < per_core and size < DEFAULT_BLOCK_SIZE:
        size <<= 1
    return size


def read_regions(path: str, store: GenomeStore) -> Regions:
    from pipeline.io.genome import file_checksum  # noqa: PLC0415
    from pipeline.io.regions import read_bed  # noqa: PLC0415

    bed = read_bed(path, store.records)
    bed.checksum = file_checksum(path)
    return bed
