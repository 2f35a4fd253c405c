"""A scheduler plugin that SIGKILLs every worker process at a chosen stage of a run, from inside the scheduler.

Installed by the fault tests on a real standalone cluster (``dask scheduler`` + ``dask worker`` processes under
nannies, which start the killed workers again at new addresses): the kill happens in the scheduler's own event
loop at the exact transition named, so the stage is hit every time, not by a race with a polling test.
Imported by the scheduler process (``PYTHONPATH`` holds the repository root): only the standard library and
distributed.
"""
from __future__ import annotations

import os
import signal

from distributed.diagnostics.plugin import SchedulerPlugin


class KillWorkersAt(SchedulerPlugin):
    """Kill every worker once, when a task whose key starts with ``prefix`` reaches state ``finish``.

    ``prefix="scan-"`` with ``finish="memory"`` and ``last=True``: when the run's last block task has finished
    (no other ``scan-`` task is waiting or running), i.e. after every block's manifest entry is written."""

    name = "motifgrid-kill-workers-at"

    def __init__(self, prefix: str, finish: str = "processing", last: bool = False):
        self.prefix, self.finish, self.last = prefix, finish, last
        self.killed: list = []
        self.scheduler = None

    async def start(self, scheduler) -> None:
        self.scheduler = scheduler

    def transition(self, key, start, finish, *args, **kwargs) -> None:
        if self.killed or finish != self.finish or not str(key).startswith(self.prefix):
            return
        tasks = self.scheduler.tasks
        if self.last and any(str(k).startswith(self.prefix) and k != key and ts.state in ("waiting", "processing",
                                                                                          "no-worker", "queued")
                             for k, ts in tasks.items()):
            return
        for ws in list(self.scheduler.workers.values()):
            if ws.pid:
                try:
                    os.kill(ws.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                self.killed.append((ws.address, ws.pid, str(key)))


def killed(dask_scheduler=None) -> list:
    """What the plugin killed: ``[(worker address, pid, key), ...]`` (run on the scheduler)."""
    plugin = dask_scheduler.plugins.get(KillWorkersAt.name)
    return list(plugin.killed) if plugin is not None else []
