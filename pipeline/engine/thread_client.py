"""A client of this process's threads: a small scan without a Dask cluster.

A local scan of a few hundred peaks computes for a fraction of a second; starting an in-process Dask cluster for it
(importing ``distributed``, its scheduler, worker and event loop, then closing them) cost about a quarter of the
whole command (0.2-0.3 s of 1.3 s for 300 peaks x 879 motifs on the 2-core VM; 0.5-0.7 s of the 26,454 fly
promoters' 8-10 s; docs/benchmarks.md, issue 16).  :func:`pipeline.engine.cluster.get_client` yields a
:class:`ThreadClient` instead for a local CPU scan of at most ``motifgrid.scan.threads-max-positions`` positions
without the dashboard (no ``--scheduler``, no ``--processes``).  It offers the part of ``distributed.Client`` that
the scan's steps call (``submit``, ``map``, ``gather``, ``scatter``, ``run``,
``nthreads``, ``scheduler_info``) on one ``ThreadPoolExecutor``, so the same tasks run, with the same results, as
on an in-process ``LocalCluster``: one worker, this process, all its threads.

Tasks are run in the order they were submitted (the pool's queue), and a task's arguments may hold the futures of
earlier tasks (nested in lists, tuples and dicts, as Dask resolves them): a task waits for those before it runs.
An earlier task never waits for a later one, so the pool cannot deadlock however few threads it has.  Nothing
imports ``distributed`` here; nothing is published for other clients to follow (none can reach this process).
"""
from __future__ import annotations

import os
import uuid
from concurrent.futures import FIRST_COMPLETED, CancelledError, Future, ThreadPoolExecutor, wait
from types import SimpleNamespace


def address() -> str:
    """The one worker's address: this process (what a task's kept pairs are filed under)."""
    return f"threads://{os.getpid()}"


class ThreadFuture:
    """A submitted task: ``key``, ``status`` ("pending", "finished", "error", "cancelled"), ``result()``,
    ``exception()``, ``cancel()``, ``release()`` — what the scan's steps use of a ``distributed.Future``."""

    __slots__ = ("key", "_f")

    def __init__(self, key: str, f: Future):
        self.key = key
        self._f = f

    @property
    def status(self) -> str:
        if self._f.cancelled():
            return "cancelled"
        if not self._f.done():
            return "pending"
        return "error" if self._f.exception() is not None else "finished"

    def result(self, timeout: float | None = None):
        return self._f.result(timeout)

    def exception(self, timeout: float | None = None):
        return self._f.exception(timeout)

    def cancel(self) -> bool:
        return self._f.cancel()

    def release(self) -> None:
        """Nothing to tell a scheduler: the result goes when the last reference to this future does."""


def _resolve(x):
    """``x`` with every :class:`ThreadFuture` in it (nested in lists, tuples, dicts) replaced by its result."""
    if isinstance(x, ThreadFuture):
        return x.result()
    if type(x) in (list, tuple):       # (exactly: a named tuple or an array subclass is data, passed as it is)
        return type(x)(_resolve(v) for v in x)
    if type(x) is dict:
        return {k: _resolve(v) for k, v in x.items()}
    return x


def _call(fn, args, kwargs):
    return fn(*_resolve(args), **_resolve(kwargs))


class ThreadClient:
    """``distributed.Client``'s calls used by a scan, on ``threads`` threads of this process.

    Parameters
    ----------
    threads : int
        Threads of the pool (the tasks' kernels release the GIL).
    memory_limit : int
        Bytes reported as the one worker's memory limit (what an in-process ``LocalCluster`` reports: the
        machine's memory); the q-value reduction sizes its tasks by it.
    """

    threads_only = True          # nothing to publish: no other client can reach this process (pipeline.engine.progress)

    def __init__(self, threads: int, memory_limit: int = 0):
        self._threads = max(1, int(threads))
        self._memory_limit = int(memory_limit)
        self.id = f"threads-{uuid.uuid4().hex[:8]}"
        self.address = address()
        self.scheduler = SimpleNamespace(address=self.address)
        self._pool = ThreadPoolExecutor(self._threads, thread_name_prefix="motifgrid-task")

    # ------------------------------------------------------------------------------ what the workers are
    def nthreads(self) -> dict:
        return {self.address: self._threads}

    def scheduler_info(self) -> dict:
        return {"workers": {self.address: {"nthreads": self._threads, "memory_limit": self._memory_limit}}}

    # ------------------------------------------------------------------------------ tasks
    def submit(self, fn, *args, key: str | None = None, pure=None, workers=None, allow_other_workers=None,
               **kwargs) -> ThreadFuture:
        """``fn(*args, **kwargs)`` on a thread (``pure``, ``workers``: one worker here, nothing to choose)."""
        key = key or f"{getattr(fn, '__name__', 'task')}-{uuid.uuid4().hex[:8]}"
        return ThreadFuture(key, self._pool.submit(_call, fn, args, kwargs))

    def map(self, fn, *iterables, key=None, pure=None, workers=None, allow_other_workers=None,
            **kwargs) -> list:
        """One task per item of ``iterables`` (zipped); ``kwargs`` go to every task."""
        return [self.submit(fn, *args, **kwargs) for args in zip(*iterables)]

    def gather(self, futures):
        """The results of ``futures`` (one future, or futures nested in lists, tuples, dicts)."""
        return _resolve(futures)

    def scatter(self, data, broadcast=None, hash=None, direct=None):  # noqa: A002 - distributed's name
        """``data`` itself: the tasks run in this process and read it where it is (nothing is copied)."""
        return data

    def run(self, fn, *args, **kwargs) -> dict:
        """``fn(*args, **kwargs)`` on the one worker, this process: ``{address: result}``."""
        return {self.address: fn(*args, **kwargs)}

    def as_completed(self, futures: list):
        """``(future, result or exception)`` as each finishes (a cancelled one with its ``CancelledError``), as
        ``distributed.as_completed(futures, with_results=True, raise_errors=False)`` yields them."""
        pending = {f._f: f for f in futures}
        while pending:
            done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
            for raw in done:
                f = pending.pop(raw)
                if raw.cancelled():
                    yield f, CancelledError(f.key)
                else:
                    exc = raw.exception()
                    yield f, exc if exc is not None else raw.result()

    def close(self) -> None:
        """Tasks not started are dropped; those running finish (a thread cannot be stopped)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
