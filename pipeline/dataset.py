"""Writing a result dataset the way every graph does it (scan, composition).

One Parquet file per unit of work, written by the worker that computed it under a temporary dot-name and
renamed into place, in a hive ``chrom=`` partition (names percent-encoded, never raw paths); a manifest
entry per finished unit (``OUT/_manifest/<id>.json``, written after the data), ``OUT/_run.json`` with the
parameters (checked by ``--resume``), and a summary whose presence marks a finished run.
"""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from urllib.parse import quote

import pyarrow as pa
import pyarrow.parquet as pq


def partition_dir(out: str, chrom: str) -> str:
    return os.path.join(out, "chrom=" + quote(chrom, safe=""))


def atomic_write_bytes(path: str, data: bytes) -> None:
    tmp = f"{os.path.dirname(path)}/.{os.path.basename(path)}.tmp-{uuid.uuid4().hex}"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def write_parquet_atomic(table: pa.Table, path: str, **kw) -> None:
    """Write ``table`` to ``path`` as zstd Parquet under a temporary dot-name, then rename it into place
    (readers never see a partial file; a killed writer leaves only ``.NAME.tmp-*``)."""
    d, name = os.path.split(path)
    tmp = os.path.join(d, f".{name}.tmp-{uuid.uuid4().hex}")
    try:
        pq.write_table(table, tmp, compression="zstd", **kw)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def write_part(out: str, chrom: str, part_id: str, table: pa.Table, metadata: dict, dict_columns: list,
               stats_columns: list) -> str:
    """Write ``table`` (without the partition column) as ``OUT/chrom=<chrom>/part-<part_id>.parquet``,
    atomically, with ``metadata`` added to its key-value metadata; return the path relative to ``out``."""
    table = table.replace_schema_metadata({**(table.schema.metadata or {}), **metadata})
    pdir = partition_dir(out, chrom)
    os.makedirs(pdir, exist_ok=True)
    final = os.path.join(pdir, f"part-{part_id}.parquet")
    tmp = os.path.join(pdir, f".part-{part_id}.parquet.tmp-{uuid.uuid4().hex}")
    pq.write_table(table, tmp, compression="zstd", use_dictionary=dict_columns, write_statistics=stats_columns)
    os.replace(tmp, final)
    return os.path.relpath(final, out)


def write_manifest_entry(out: str, entry_id: str, entry: dict) -> None:
    atomic_write_bytes(os.path.join(out, "_manifest", f"{entry_id}.json"), json.dumps(entry).encode())


def read_manifest(out: str):
    """Every finished entry (dicts), torn ones removed."""
    entries = []
    for p in Path(out, "_manifest").glob("*.json"):
        try:
            entries.append(json.loads(p.read_text()))
        except ValueError:
            p.unlink()
    return entries


def check_output(out: str, resume: bool, kind: str, error=RuntimeError, dataset: str = "hits dataset") -> None:
    """Refuse an output folder that cannot be used, without creating anything."""
    outp = Path(out)
    if outp.exists() and not outp.is_dir():
        raise error(f"{out}: exists and is not a directory")
    if (outp / "_run.json").exists():
        if not resume:
            state = "a finished" if (outp / "_summary.json").exists() else "an unfinished"
            raise error(f"{out}: holds {state} {kind}; pass --resume to complete it, or choose another output")
    elif outp.exists() and any(outp.iterdir()):
        raise error(f"{out}: exists, is not empty and is not a motifgrid {dataset}")


def prepare_output(out: str, params: dict, resume: bool, kind: str = "scan", error=RuntimeError,
                   key: str = "block", dataset: str = "hits dataset") -> set:
    """Create or check the output folder; return the ``key`` of every unit already finished."""
    outp = Path(out)
    run_file = outp / "_run.json"
    check_output(out, resume, kind, error, dataset)
    if run_file.exists():
        old = json.loads(run_file.read_text())
        diff = [k for k in params if old.get(k) != params[k]]
        if diff:
            raise error(f"{out}: --resume with different parameters ({', '.join(diff)}) than the run it holds")
    else:
        try:
            (outp / "_manifest").mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise error(f"{out}: cannot create the output folder ({e.strerror})") from None
        atomic_write_bytes(str(run_file), json.dumps(params, indent=1).encode())
    done = set()
    for p in (outp / "_manifest").glob("*.json"):
        try:
            done.add(json.loads(p.read_text())[key])
        except (ValueError, KeyError):
            p.unlink()          # a torn entry: redo that unit
    for tmp in outp.glob("chrom=*/.part-*.tmp-*"):
        tmp.unlink()           # left by a killed writer
    return done


class Progress:
    """Units done / total and hits so far, on the console (rich), or nothing."""

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
