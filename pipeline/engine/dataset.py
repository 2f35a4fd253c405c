"""Computing and writing a result dataset the way every graph does it (scan, composition, compare).

The tasks: :class:`TaskRun` scatters the graph's context to every worker once, submits one task per unit
of work, hands back each result as it arrives, releases finished tasks, cancels the rest on the first
error and sweeps the temporaries of killed writers; a graph module says only what its tasks are and what
it adds up from their results.

The files: one Parquet file per unit of work, written by the worker that computed it under a temporary
dot-name and renamed into place, in ``OUT/chrom/<record>/`` or ``OUT/packed/`` (:func:`partition_dir`; names
percent-encoded, never raw paths); a
manifest entry per finished unit (``OUT/_manifest/<id>.json``, written after the data), ``OUT/_run.json``
with the parameters (checked by ``--resume``), and a summary whose presence marks a finished run.

``OUT`` may be a local path or an fsspec URL (``s3://bucket/hits``): see :mod:`pipeline.io.storage` (on an
object store a PUT is atomic, so parts are written in place).
"""
from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa

from pipeline.io import storage


def partition_dir(out: str, chrom: str | None) -> str:
    """``OUT/chrom/<percent-encoded record name>`` for the files of blocks that hold one record (chromosomes),
    ``OUT/packed`` for blocks shared by several (peaks, promoters, scaffolds): folders grow with the blocks of
    work, not with the records, and a whole-genome dataset keeps a folder per chromosome.  Not hive partitions:
    ``chrom`` is a column of every file."""
    if chrom is None:
        return storage.join(out, "packed")
    return storage.join(out, "chrom", folder_name(chrom))


def folder_name(name: str) -> str:
    """A record name as one folder name: percent-encoded, a leading ``.`` or ``_`` too (Parquet dataset readers
    skip such folders, and ``.`` / ``..`` are no names)."""
    enc = quote(name, safe="")
    return f"%{ord(enc[0]):02X}{enc[1:]}" if enc[:1] in (".", "_") else enc


def atomic_write_bytes(path: str, data: bytes) -> None:
    storage.atomic_write_bytes(path, data)


def abspath(out: str) -> str:
    """An absolute local path, or the URL unchanged."""
    return out if storage.is_url(out) else os.path.abspath(out)


def table_tsv(table: pa.Table) -> bytes:
    """A table as tab-separated text with a header; floats in ``repr`` (they read back exactly)."""
    cols = table.column_names
    lines = ["\t".join(cols)]
    for row in zip(*(table.column(c).to_pylist() for c in cols)):
        lines.append("\t".join(repr(v) if isinstance(v, float) else str(v) for v in row))
    return ("\n".join(lines) + "\n").encode()


def write_part(out: str, chrom: str | None, part_id: str, table: pa.Table, metadata: dict, dict_columns: list,
               stats_columns: list, compression: str = "zstd", column_encoding: dict | None = None) -> str:
    """Write ``table`` as ``part-<part_id>.parquet`` in :func:`partition_dir` ``(out, chrom)``, atomically, with
    ``metadata`` added to its key-value metadata; return the path relative to ``out``.  ``dict_columns`` (those
    present) get dictionary pages; ``column_encoding``: Parquet encodings of non-dictionary columns
    (``pyarrow.parquet.write_table``)."""
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    dict_columns = [c for c in dict_columns if c in table.column_names]
    pdir = partition_dir(out, chrom)
    storage.makedirs(pdir)
    name = f"part-{part_id}.parquet"
    storage.write_parquet(table, storage.join(pdir, name), compression=compression, use_dictionary=dict_columns,
                          write_statistics=stats_columns, column_encoding=column_encoding)
    return f"{pdir[len(out.rstrip('/')) + 1:]}/{name}"


def write_manifest_entry(out: str, entry_id: str, entry: dict) -> None:
    atomic_write_bytes(storage.join(out, "_manifest", f"{entry_id}.json"), json.dumps(entry).encode())


def manifest_paths(out: str) -> list[str]:
    """Paths of the manifest entries (``*.json``) of ``out``."""
    mdir = storage.join(out, "_manifest")
    return [storage.join(mdir, n) for n in storage.listdir(mdir) if n.endswith(".json") and not n.startswith(".")]


def iter_manifest(out: str, key: str | None = None, drop_torn: bool = False):
    """The finished entries of ``OUT/_manifest/`` (dicts).  A torn entry (unreadable, or without ``key``) is
    skipped, and deleted with ``drop_torn`` so that its unit is redone."""
    for p in manifest_paths(out):
        try:
            e = json.loads(storage.read_bytes(p))
            if key is not None:
                e[key]
        except (ValueError, KeyError, FileNotFoundError):
            if drop_torn:
                storage.remove(p)
            continue
        yield e


def read_manifest(out: str):
    """Every finished entry (dicts), torn ones removed."""
    return list(iter_manifest(out, drop_torn=True))


def remove_temporaries(out: str) -> None:
    """Temporary files left by a writer that was killed (worker or client) or failed (full disk); object
    stores have none (a PUT is all or nothing)."""
    if storage.is_url(out):
        return
    for pattern in ("chrom/*/.part-*.tmp-*", "packed/.part-*.tmp-*", "_manifest/.*.tmp-*",
                    "_counts/.*.tmp-*", ".*.tmp-*"):
        for tmp in Path(out).glob(pattern):
            try:
                tmp.unlink()
            except OSError:
                pass


#: the ``_run.json`` key that marks each kind of dataset (``--overwrite`` replaces only a dataset of its kind)
_FORMAT_KEYS = {"hits dataset": "hits_format", "composition dataset": "composition_format",
                "variants dataset": "vcf_checksum"}
#: files of a dataset beside its underscored ones and partition folders (--overwrite removes them with it)
_OWN_FILES = {"variants dataset": {"variants.tsv", "variants.vcf"}}


def _run_params_of(out: str) -> dict | None:
    try:
        d = json.loads(storage.read_bytes(storage.join(out, "_run.json")))
    except (ValueError, FileNotFoundError, IsADirectoryError):
        return None
    return d if isinstance(d, dict) else None


def check_output(out: str, resume: bool, kind: str, error=RuntimeError, dataset: str = "hits dataset",
                 overwrite: bool = False) -> None:
    """Refuse an output folder that cannot be used, without creating or removing anything.  With ``overwrite``
    the folder must be a motifgrid ``dataset`` (finished or not) holding nothing else."""
    if resume and overwrite:
        raise error(f"{out}: --resume completes the {kind} there, --overwrite replaces it: give one of them")
    only = f"; --overwrite replaces only a motifgrid {dataset}" if overwrite else ""
    if storage.exists(out) and not storage.isdir(out):
        raise error(f"{out}: exists and is not a directory{only}")
    if storage.exists(storage.join(out, "_run.json")):
        params = _run_params_of(out)
        key = _FORMAT_KEYS.get(dataset)
        if params is None or (key is not None and key not in params):
            what = "an unreadable _run.json" if params is None else "a motifgrid dataset of another kind"
            raise error(f"{out}: holds {what}, not a {dataset}; choose another output{only}")
        if overwrite:
            other = [n for n in storage.listdir(out) if not n.startswith(("_", ".", "chrom")) and n != "packed"
                     and n not in _OWN_FILES.get(dataset, ())]
            if other:
                raise error(f"{out}: --overwrite would remove files that are not part of the {dataset} "
                            f"({', '.join(other[:3])}{' ...' if len(other) > 3 else ''}); move them out first")
        elif storage.exists(storage.join(out, "_summary.json")):
            if not resume:
                raise error(f"{out}: holds a finished {kind}; pass --overwrite to replace it with a new one, "
                            "or choose another output")
        elif not resume:
            raise error(f"{out}: holds an unfinished {kind}; pass --resume to complete it, --overwrite to replace "
                        "it with a new one, or choose another output")
    elif storage.listdir(out):
        raise error(f"{out}: exists, is not empty and is not a motifgrid {dataset}{only}")


def _remove_dataset(out: str) -> None:
    """Remove the dataset in ``out`` (checked by :func:`check_output`): its summary first (it no longer looks
    finished), its ``_run.json`` last (an interrupted removal leaves an unfinished dataset, not a foreign folder)."""
    import shutil  # noqa: PLC0415

    storage.remove(storage.join(out, "_summary.json"))
    for name in storage.listdir(out):
        if name == "_run.json":
            continue
        path = storage.join(out, name)
        if storage.is_url(path):
            fs, p = storage.url_to_fs(path)
            fs.rm(p, recursive=True)
        elif os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    storage.remove(storage.join(out, "_run.json"))


#: datasets that ``--overwrite`` moved out of the way, by the absolute path of their folder: the hidden sibling
#: holding them until the new run is under way (:func:`discard_replaced`) or has stopped before (:func:`restore_replaced`)
_replaced: dict = {}
#: output folders where this process wrote a new run's ``_run.json``, by absolute path, until the run is under way:
#: the bytes written and whether the folder was there before (:func:`restore_replaced` takes such a claim back)
_claimed: dict = {}


#: output folders this process writes, by real path: the open lock file of each (:func:`lock_output`)
_locks: dict = {}


def _lock_path(path: str) -> str | None:
    """The lock file of the output folder at real path ``path``, in the user's cache (the folder itself may not
    exist yet, and a file in it would be part of the dataset); None where that cache cannot be written."""
    import hashlib  # noqa: PLC0415

    root = os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "motifgrid", "locks")
    try:
        os.makedirs(root, exist_ok=True)
    except OSError:
        return None
    return os.path.join(root, hashlib.sha256(path.encode()).hexdigest()[:32] + ".lock")


def lock_output(out: str, error=RuntimeError) -> None:
    """Refuse an output folder that another motifgrid run on this machine is writing, and hold it until
    :func:`release_output` (or this process's end: the kernel drops the lock, ``kill -9`` included).  Two runs in one
    folder (a second started with the first's own advice, ``--resume``) removed each other's files; the first then
    ended with a misleading error.  ``flock`` on a file in the user's cache keyed by the folder's real path: runs on
    other hosts of a shared file system are not seen, nor are object stores."""
    import fcntl  # noqa: PLC0415
    import socket  # noqa: PLC0415

    if storage.is_url(out):
        return
    path = os.path.realpath(out)
    lock = None if path in _locks else _lock_path(path)
    if lock is None:
        return
    f = open(lock, "a+")            # noqa: SIM115 - held open while the run writes
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.seek(0)
        who = f.read().strip() or "another process"
        f.close()
        raise error(f"{out}: another motifgrid run is writing it ({who}); wait for it to end, or choose another "
                    "output") from None
    f.seek(0)
    f.truncate()
    f.write(f"pid {os.getpid()} on {socket.gethostname()}, since {time.strftime('%Y-%m-%d %H:%M:%S')}")
    f.flush()
    _locks[path] = f


def release_output(out: str) -> None:
    """Let other runs write ``out`` again (:func:`lock_output`)."""
    f = _locks.pop(os.path.realpath(out), None) if not storage.is_url(out) else None
    if f is not None:
        f.close()


def check_inputs_outside(out: str, inputs, error=RuntimeError) -> None:
    """Refuse, for ``--overwrite``, an input that lies inside the output folder it would remove (a scan of the
    store a FASTA scan kept in ``HITS/_genome.zarr``, into ``HITS``).  ``inputs``: local paths, or None."""
    if storage.is_url(out):
        return
    root = os.path.realpath(out)
    for path in inputs:
        if path is None or storage.is_url(str(path)) or not os.path.exists(path):
            continue
        if os.path.commonpath([root, os.path.realpath(path)]) == root:
            raise error(f"{path}: lies inside {out}, which --overwrite would remove; write to another folder, "
                        "or move it out first")


def _set_aside(out: str) -> bool:
    """Rename the dataset that ``--overwrite`` replaces to a hidden sibling of its folder, kept until the new run
    is under way: a run stopped before (its cluster never started, an interruption) gets it back.  False where it
    cannot be (an object store; a rename refused): it is then removed at once."""
    if storage.is_url(out):
        return False
    path = os.path.abspath(out)
    aside = os.path.join(os.path.dirname(path), f".{os.path.basename(path)}.motifgrid-replaced-{uuid.uuid4().hex[:8]}")
    try:
        os.rename(path, aside)
    except OSError:
        return False
    _replaced[path] = aside
    return True


def discard_replaced(out: str) -> None:
    """The run in ``out`` is under way: remove the dataset it replaces (on a thread the interpreter waits for at
    exit: a large dataset takes a while)."""
    _claimed.pop(os.path.abspath(out), None)
    aside = _replaced.pop(os.path.abspath(out), None) if not storage.is_url(out) else None
    if aside is not None:
        import shutil  # noqa: PLC0415
        import threading  # noqa: PLC0415

        threading.Thread(target=shutil.rmtree, args=(aside,), kwargs={"ignore_errors": True},
                         name="motifgrid-replaced").start()


def restore_replaced(out: str) -> None:
    """The run in ``out`` stopped before it got under way: remove what it claimed (``_run.json``, the manifest
    folder, a FASTA's store) and put the dataset it was to replace back.  A new run's folder that holds only its
    claim (no FASTA ingested into it) is taken back too, so that the same command runs again as it is (a scheduler
    that could not be reached); one holding an ingested FASTA stays, for ``--resume`` to reuse."""
    aside = _replaced.pop(os.path.abspath(out), None) if not storage.is_url(out) else None
    claim = _claimed.pop(os.path.abspath(out), None)
    release_output(out)
    if aside is None:
        if claim is not None:
            _take_back_claim(os.path.abspath(out), *claim)
        return
    import shutil  # noqa: PLC0415

    path = os.path.abspath(out)
    try:
        shutil.rmtree(path, ignore_errors=True)
        os.rename(aside, path)
    except OSError:
        pass                    # left beside it, under its hidden name


def _take_back_claim(path: str, run_json: bytes, existed: bool) -> None:
    """Remove the ``_run.json`` and empty ``_manifest`` that :func:`open_run` wrote in ``path``, and the folder if
    it made it; nothing where the folder holds anything else or another ``_run.json``."""
    try:
        names = set(os.listdir(path))
        if (names != {"_run.json", "_manifest"} or os.listdir(os.path.join(path, "_manifest"))
                or storage.read_bytes(os.path.join(path, "_run.json")) != run_json):
            return
        os.unlink(os.path.join(path, "_run.json"))
        os.rmdir(os.path.join(path, "_manifest"))
        if not existed:
            os.rmdir(path)
    except OSError:
        pass


def open_run(out: str, params: dict, resume: bool, kind: str = "scan", error=RuntimeError,
             key: str = "block", dataset: str = "hits dataset", overwrite: bool = False) -> set:
    """Open the output folder of a run: create it with its ``_run.json``, or (``resume``) check that it holds
    a run of the same ``params``; return the ``key`` of every unit already finished.  With ``overwrite`` an
    existing dataset is set aside here (:func:`_set_aside`), when the new run is about to write its ``_run.json``,
    or removed where it cannot be."""
    run_file = storage.join(out, "_run.json")
    check_output(out, resume, kind, error, dataset, overwrite)
    if overwrite and storage.exists(run_file) and not _set_aside(out):
        _remove_dataset(out)
    if storage.exists(run_file):
        old = json.loads(storage.read_bytes(run_file))
        diff = [k for k in params if old.get(k) != params[k]]
        if diff:
            raise error(f"{out}: --resume with different parameters ({', '.join(diff)}) than the run it holds")
    else:
        mdir = storage.join(out, "_manifest")
        existed = storage.exists(out)
        try:
            storage.makedirs(mdir)
            data = json.dumps(params, indent=1).encode()
            atomic_write_bytes(run_file, data)
            if not storage.is_url(out):
                _claimed[os.path.abspath(out)] = (data, existed)
        except OSError as e:
            if not storage.is_url(out):
                try:
                    os.rmdir(mdir)          # leave nothing that looks like a dataset
                except OSError:
                    pass
            raise error(f"{out}: cannot create the output folder "
                        f"({os.strerror(e.errno) if e.errno else e})") from None
    done = {e[key] for e in iter_manifest(out, key, drop_torn=True)}
    remove_temporaries(out)
    return done


def check_writable(out: str, error=RuntimeError) -> None:
    """``error`` when ``out`` cannot be created or written (its nearest existing folder refuses a new entry: a
    read-only or immutable folder, a full disk), found by making and removing a probe folder there — so that a command
    says so before it starts a cluster (composition did after).  Object-store URLs are not probed."""
    if storage.is_url(out):
        return
    import tempfile  # noqa: PLC0415

    d = os.path.abspath(out)
    while not os.path.isdir(d):
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".motifgrid-probe-", dir=d))
    except OSError as e:
        raise error(f"{out}: cannot create the output folder ({os.strerror(e.errno) if e.errno else e})") from None


def scheduler_lost(client) -> bool:
    """Whether ``client`` has lost its scheduler (a thread client never has): calls to the scheduler would wait."""
    return getattr(client, "status", "running") != "running"


class TaskCancelled(RuntimeError):
    """A task the scheduler cancelled rather than ran (every worker gone with the data it needed)."""


class Progress:
    """Units done / total and hits so far, on the console (rich), or nothing; a context manager that closes it."""

    def __init__(self, console, total, enabled, label: str = "scan", unit: str = "blocks"):
        self.bar = None
        if not enabled:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn  # noqa: PLC0415

        self.bar = RichProgress(TextColumn(label), BarColumn(), MofNCompleteColumn(), TextColumn(unit),
                                TextColumn("[bold]{task.fields[hits]:,}[/] hits"), TimeElapsedColumn(),
                                console=console, transient=False)
        self.task = self.bar.add_task(label, total=total, hits=0)
        self.bar.start()

    def update(self, n, hits):
        if self.bar:
            self.bar.update(self.task, advance=n, hits=hits)

    def close(self):
        if self.bar:
            self.bar.stop()

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class TaskRun:
    """``task(context, *args)`` for every ``args`` of ``work``, on ``client``'s workers.

    The context (plans, tables, the store handle: what every task needs) is scattered to each worker once
    instead of travelling with every task; task keys read ``<name>-<key(args)>-<random>`` (the task stream
    and :mod:`pipeline.cli.bench` find a graph's tasks by the prefix).  Submitted on construction, in the order
    of ``work``.  ``len()`` is the number of tasks not yet finished.

    Workers may all leave at once (a nanny restarting them, preemption, the OOM killer): the scattered context
    leaves with them, and the scheduler cancels the tasks that needed it.  Those tasks are submitted again, with the
    context scattered again to the workers that have joined since (at most ``motifgrid.cluster.rescatters``
    times a run; a finished task's output is on disk and is not redone).
    """

    def __init__(self, client, task, context, work: list, *, name: str, key):
        self.futures: dict = {}
        self._client, self._task, self._context, self._name, self._key = client, task, context, name, key
        self._args: dict = {}                       # task key -> (its args, the context future it was given)
        self.rescattered = 0
        # distributed's as_completed, or the client's own (pipeline.engine.thread_client: no distributed imported)
        self._as_completed = client.as_completed if getattr(client, "threads_only", False) else None
        self.t_scattered = time.perf_counter()      # when the context reached every worker (the tasks follow)
        if not work:
            return
        self._ctx = self._scatter()
        self.t_scattered = time.perf_counter()
        for args in work:
            self._submit(args)

    def _scatter(self):
        # straight to the workers where this process started them (a local cluster: no firewall between): through
        # the scheduler, which shares this process's event loop, each copy is received and sent again (a 40 MB
        # context to 4 worker processes on the VM: 0.27-0.68 s, direct 0.21-0.23 s; docs/benchmarks.md)
        client = self._client
        direct = True if getattr(client, "cluster", None) is not None else None
        return client.scatter(self._context, broadcast=True, hash=False, direct=direct)

    def _submit(self, args):
        f = self._client.submit(self._task, self._ctx, *args, pure=False,
                                key=f"{self._name}-{self._key(*args)}-{uuid.uuid4().hex[:6]}")
        self.futures[f.key] = f
        self._args[f.key] = (args, self._ctx)
        return f

    def __len__(self) -> int:
        return len(self.futures)

    def _again(self, fut):
        """``fut``'s task submitted again when it was cancelled because its context was lost (scattered again, once
        for all such tasks), or None: cancelled for another reason, the client has lost its scheduler, or the run
        has scattered its context too often."""
        import dask.config  # noqa: PLC0415

        client = self._client
        if self._as_completed is not None or scheduler_lost(client):
            return None
        args, given = self._args[fut.key]
        if given.status == "finished":              # its context is there: cancelled on purpose
            return None
        if given is self._ctx:                      # lost with the workers that held it: scattered again
            if self.rescattered >= int(dask.config.get("motifgrid.cluster.rescatters", default=3)):
                return None
            wait = float(dask.config.get("motifgrid.cluster.wait-for-workers", default=120))
            try:
                client.wait_for_workers(1, timeout=wait)
            except TimeoutError:
                return None
            self._ctx = self._scatter()
            self.rescattered += 1
        self.futures.pop(fut.key)
        del self._args[fut.key]
        return self._submit(args)

    def results(self, failure, out: str | None = None):
        """Each task's result, as the tasks finish.

        A finished task is released at once: its output is on disk, and a worker lost later must not make the
        scheduler recompute (and rewrite) it.  The first failed task cancels every other and raises
        ``failure(its exception)`` (one line for the user, raised from None); leaving the loop early cancels
        the tasks still running.  After the last result, the temporary files of writers killed mid-write (a
        task that ran again elsewhere) are removed from ``out``.
        """
        if not self.futures:
            return
        if self._as_completed is not None:
            finished = self._as_completed(list(self.futures.values()))
        else:
            from distributed import as_completed  # noqa: PLC0415

            finished = as_completed(list(self.futures.values()), with_results=True, raise_errors=False)
        try:
            for fut, res in finished:
                if fut.status == "error":
                    raise failure(fut.exception()) from None
                # cancelled by the scheduler (the workers holding its context all left): submitted again where it
                # can be, else a cancellation, not a result.  A result that came back counts though its future's
                # status may no longer say "finished" (its worker killed since: "lost", the scheduler recomputing
                # it; test_faults saw the run fail on such a block)
                if isinstance(res, BaseException):
                    again = self._again(fut)
                    if again is None:
                        raise failure(TaskCancelled(self._why_cancelled(res))) from None
                    finished.add(again)
                    continue
                self._args.pop(fut.key, None)
                self.futures.pop(fut.key).release()
                yield res
        finally:
            for f in self.futures.values():
                f.cancel()
        if out is not None:
            remove_temporaries(out)

    def _why_cancelled(self, res) -> str:
        client = self._client
        if scheduler_lost(client):
            address = getattr(getattr(client, "scheduler", None), "address", None) or "its address"
            return f"the connection to the scheduler at {address} was lost (did the scheduler stop?)"
        if self.rescattered:
            return f"every worker left {self.rescattered + 1} times during the run: {res}"
        return f"the cluster cancelled it (did every worker leave the scheduler?): {res}"
