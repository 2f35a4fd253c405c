"""Where stores and datasets live: local paths or any fsspec URL (``s3://``, ``gs://``, ``memory://`` ...).

Workers that share no file system with the client read the genome store and write their Parquet parts
through the URL.  Credentials and endpoints come from each process's environment, as the backend defines
them (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_ENDPOINT_URL`` for S3-compatible servers ...),
plus ``motifgrid.storage.options`` in dask.config (``{protocol: {fsspec options}}``), which the scheduler
does not ship to remote workers: set it where the workers run too.

Atomicity: a local file is written under a hidden temporary name, flushed and renamed; an object store
PUT (single or multipart) only becomes visible complete, so it is written in place.  :func:`open_output`
is the one way a command writes an output file (``-o``): ``-`` is standard output, a FIFO or device is
written straight into, a symbolic link keeps being a link (its target is replaced), and only a regular
file is ever renamed over.
"""
from __future__ import annotations

import contextlib
import os
import posixpath
import re
import stat
import sys
import uuid
from pathlib import Path

__all__ = ["is_url", "url_to_fs", "storage_options", "arrow_source", "read_parquet", "read_parquet_schema", "join",
           "atomic_write_bytes", "open_output", "output_target", "write_parquet", "exists", "isdir", "makedirs",
           "listdir", "remove", "read_bytes", "glob"]


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def is_url(path) -> bool:
    """True for ``scheme://...`` (``file://`` included); False for plain local paths."""
    return bool(_SCHEME.match(os.fspath(path)))


def _options(protocol: str) -> dict:
    import dask.config  # noqa: PLC0415

    opts = dask.config.get("motifgrid.storage.options", default={}) or {}
    return dict(opts.get(protocol, {}))


def storage_options(path) -> dict | None:
    """fsspec options configured for the URL's protocol (for libraries that open URLs themselves: zarr)."""
    return (_options(os.fspath(path).split("://", 1)[0]) or None) if is_url(path) else None


def arrow_source(path):
    """``(filesystem, path)`` for pyarrow: ``(None, path)`` locally (pyarrow's own, fastest), fsspec for URLs."""
    return url_to_fs(path) if is_url(path) else (None, os.fspath(path))


def url_to_fs(path):
    """``(fsspec filesystem, path inside it)``; a local path gives the local file system."""
    import fsspec  # noqa: PLC0415

    s = os.fspath(path)
    if not is_url(s):
        return fsspec.filesystem("file"), os.path.abspath(s)
    protocol = s.split("://", 1)[0]
    return fsspec.core.url_to_fs(s, **_options(protocol))


def join(base, *parts) -> str:
    s = os.fspath(base)
    if is_url(s):
        return posixpath.join(s.rstrip("/"), *parts)
    return os.path.join(s, *parts)


def exists(path) -> bool:
    if not is_url(path):
        return os.path.exists(path)
    fs, p = url_to_fs(path)
    return fs.exists(p)


def isdir(path) -> bool:
    if not is_url(path):
        return os.path.isdir(path)
    fs, p = url_to_fs(path)
    return fs.isdir(p)


def makedirs(path) -> None:
    if not is_url(path):
        os.makedirs(path, exist_ok=True)
        return
    fs, p = url_to_fs(path)
    fs.makedirs(p, exist_ok=True)        # a no-op on object stores (prefixes need no creation)


def listdir(path) -> list[str]:
    """Names (not paths) of the entries of a folder; [] when it does not exist."""
    if not is_url(path):
        try:
            return sorted(os.listdir(path))
        except FileNotFoundError:
            return []
    fs, p = url_to_fs(path)
    try:
        return sorted(posixpath.basename(x.rstrip("/")) for x in fs.ls(p, detail=False))
    except FileNotFoundError:
        return []


def glob(pattern) -> list[str]:
    """Paths matching a glob (URLs keep their scheme)."""
    if not is_url(pattern):
        import glob as _glob  # noqa: PLC0415

        return sorted(_glob.glob(os.fspath(pattern)))
    fs, p = url_to_fs(pattern)
    scheme = os.fspath(pattern).split("://", 1)[0]
    return sorted(f"{scheme}://{x}" for x in fs.glob(p))


def remove(path) -> None:
    if not is_url(path):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        return
    fs, p = url_to_fs(path)
    try:
        fs.rm(p)
    except FileNotFoundError:
        pass


def read_bytes(path) -> bytes:
    if not is_url(path):
        with open(path, "rb") as f:
            return f.read()
    fs, p = url_to_fs(path)
    return fs.cat_file(p)


#: names of this process's standard output: written to through ``sys.stdout``, never opened or renamed over
STDOUT_NAMES = ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


def output_target(path) -> tuple[str, str]:
    """How :func:`open_output` writes ``path``: ``("stdout", "-")``, ``("stream", path)`` for a FIFO, device
    or anything under /dev (but /dev/shm) or /proc, or leading there (written straight into), or ``("file",
    target)`` for a regular file or a new name (written atomically); ``target`` is where a symbolic link leads,
    so the link stays a link."""
    s = os.fspath(path)
    if s in STDOUT_NAMES:
        return "stdout", "-"
    if _through_devices(s):
        return "stream", s
    target = os.path.realpath(s)                 # follows every link, dangling ones included
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return "file", target
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(21, "is a folder; give a file name", s)
    return ("file" if stat.S_ISREG(mode) else "stream"), target


def _through_devices(path: str) -> bool:
    """True when ``path`` or a link it leads through is under /dev (but /dev/shm) or /proc: /dev/stderr, /dev/fd/N
    and /proc/self/fd/N lead to whatever the process has open there, a regular file too, which must be written
    into, never replaced by a rename (``realpath`` would name that file)."""
    p = os.path.abspath(path)
    for _ in range(40):                          # the kernel's own limit on links followed
        if p.startswith(("/dev/", "/proc/")) and not p.startswith("/dev/shm/"):
            return True
        if not os.path.islink(p):
            return False
        p = os.path.normpath(os.path.join(os.path.dirname(p), os.readlink(p)))
    return False


@contextlib.contextmanager
def open_output(path, mode: str = "w", durable: bool = True):
    """A file object to write a command's output to (``mode`` ``"w"`` or ``"wb"``), see :func:`output_target`.

    A regular file (or the target of a link to one) is written under a hidden temporary name beside it,
    flushed (to the disk too unless ``durable`` is False), given the old file's permissions and renamed onto it
    when the block ends without an error: readers see the old file or the whole new one.  Standard output and
    streams get the data as written."""
    kind, target = output_target(path)
    if kind == "stdout":
        if "b" in mode:
            sys.stdout.flush()
        stream = sys.stdout.buffer if "b" in mode else sys.stdout
        yield stream
        stream.flush()
        return
    if kind == "stream":                  # a FIFO, /dev/null, a terminal: nothing to rename, nothing to replace
        with open(target, mode) as f:
            yield f
        return
    tmp = os.path.join(os.path.dirname(target), f".{os.path.basename(target)}.tmp-{uuid.uuid4().hex}")
    try:
        with open(tmp, mode) as f:
            yield f
            f.flush()
            if durable:
                os.fsync(f.fileno())
        try:
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        except FileNotFoundError:
            pass
        os.replace(tmp, target)
    except BaseException:
        _unlink_quietly(tmp)        # a full disk or a read-only folder leaves no torn file behind
        raise


def atomic_write_bytes(path, data: bytes, durable: bool = True) -> None:
    """Write ``data`` so that readers see the old file, or the whole new one (:func:`open_output` locally).
    ``durable=False`` skips the fsync: for files that live only within one run (a reduction's parts), where an
    fsync each queued them behind the hits' write-back (13 -> 30 thread-s for a genome's q-value parts,
    docs/benchmarks.md, session 8)."""
    s = os.fspath(path)
    if not is_url(s):
        with open_output(s, "wb", durable=durable) as f:
            f.write(data)
        return
    fs, p = url_to_fs(s)
    fs.pipe_file(p, data)


def cache_dir(key: str, default: str):
    """A user cache folder (``pathlib.Path``) from dask config ``key`` (``default`` when unset; ``~`` expanded), or
    None when caching is off: the key set to ``""``, or ``MOTIFGRID_NO_CACHE`` in the environment."""
    import dask.config  # noqa: PLC0415

    if os.environ.get("MOTIFGRID_NO_CACHE"):
        return None
    d = dask.config.get(key, default=default)
    return Path(os.path.expanduser(d)) if d else None


def write_parquet(table, path, **kwargs) -> None:
    """``pyarrow.parquet.write_table`` to a local path (temporary name, then rename) or a URL."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    s = os.fspath(path)
    if not is_url(s):
        tmp = f"{os.path.dirname(s)}/.{os.path.basename(s)}.tmp-{uuid.uuid4().hex}"
        try:
            pq.write_table(table, tmp, **kwargs)
            os.replace(tmp, s)
        except BaseException:
            _unlink_quietly(tmp)
            raise
        return
    fs, p = url_to_fs(s)
    pq.write_table(table, p, filesystem=fs, **kwargs)


def write_parquet_chunks(tables, schema, path, empty=None, row_group_size: int | None = None, **kwargs) -> None:
    """Write the tables of an iterator as the row groups of one Parquet file (bounded memory: one chunk at a
    time), atomically as :func:`write_parquet`; ``empty`` (a table of ``schema``) is written when there is none.
    A table longer than ``row_group_size`` rows (default: pyarrow's, 1 Mi) is split into several row groups."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    s = os.fspath(path)
    local = not is_url(s)
    target = f"{os.path.dirname(s)}/.{os.path.basename(s)}.tmp-{uuid.uuid4().hex}" if local else s
    fs, p = (None, target) if local else url_to_fs(s)
    try:
        with pq.ParquetWriter(p, schema, filesystem=fs, **kwargs) as w:
            written = False
            for t in tables:
                if t.num_rows:
                    w.write_table(t, row_group_size=row_group_size)
                    written = True
            if not written and empty is not None:
                w.write_table(empty)
        if local:
            os.replace(target, s)
    except BaseException:
        if local:
            _unlink_quietly(target)
        raise


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def read_parquet(path, **kwargs):
    """One Parquet file (local path or URL) as a table; ``kwargs`` as ``pyarrow.parquet.ParquetFile.read``.
    ``ParquetFile`` rather than ``read_table``, whose dataset machinery costs more a file than reading it, on
    exports of many small files (docs/benchmarks.md, the export table)."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    fs, p = arrow_source(path)
    if fs is None:
        return pq.ParquetFile(p).read(**kwargs)
    with fs.open(p, "rb") as f:
        return pq.ParquetFile(f).read(**kwargs)


def read_parquet_schema(path):
    """The Arrow schema (with its key-value metadata) of one Parquet file, local or URL."""
    import pyarrow.parquet as pq  # noqa: PLC0415

    fs, p = arrow_source(path)
    return pq.read_schema(p, filesystem=fs)
