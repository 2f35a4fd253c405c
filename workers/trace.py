"""Wall-clock marks of a command's phases, for profiling the whole command (``MOTIFGRID_TRACE=FILE``).

Each :func:`mark` appends one JSON line ``{"mark": name, "t": epoch seconds, "pid": ..., **extra}`` to FILE; the
command's worker processes inherit the variable, so their marks (warm-up done, first task) land in the same file.
Nothing is done when the variable is unset.  ``benchmarks/device_whole.sh`` reads the file back against the time the
command was launched (docs/benchmarks.md, issue 49).
"""
from __future__ import annotations

import json
import os
import time

_PATH = os.environ.get("MOTIFGRID_TRACE")
_once: set = set()


def enabled() -> bool:
    return bool(_PATH)


def mark(name: str, t: float | None = None, once: bool = False, **extra) -> None:
    """Record ``name`` at epoch time ``t`` (default: now); ``once``: only the first call of this name in this
    process (a worker's first task)."""
    if not _PATH or (once and name in _once):
        return
    _once.add(name)
    line = json.dumps({"mark": name, "t": time.time() if t is None else t, "pid": os.getpid(), **extra})
    try:
        with open(_PATH, "a") as f:          # one short write: lines of several processes do not interleave
            f.write(line + "\n")
    except OSError:
        pass


def mark_perf(name: str, perf: float, **extra) -> None:
    """``name`` at a ``time.perf_counter()`` reading of this process."""
    if _PATH:
        mark(name, time.time() - (time.perf_counter() - perf), **extra)
