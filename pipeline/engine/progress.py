"""Live progress of a scan, published on the Dask scheduler so that any client can follow it.

The client that runs the scan (``pipeline.scan.graph.execute_scan``) keeps a small JSON-like state and
stores it in the scheduler's metadata (``Client.set_metadata``), at most every
``motifgrid.progress.interval`` seconds and once more at the end::

    scheduler.task_metadata["motifgrid"] = {"latest": SCAN_ID, "scans": {SCAN_ID: STATE, ...}}

Any other client connected to the same scheduler (a notebook, ``dask`` tooling, a script) reads it
with :func:`read_progress` / :func:`follow`; nothing is pushed to anyone (unlike pub/sub, a client
that connects late still sees the whole state), and the state stays on the scheduler after the scan
ends.  The fields are listed in ``docs/formats.md`` ("Scan progress").

This module only moves plain numbers; it never touches the hits themselves.
"""
from __future__ import annotations

import datetime as _dt
import math
import time
import uuid

import numpy as np

from pipeline.engine.dataset import abspath, scheduler_lost

#: root key of motifgrid's entries in the scheduler's metadata
METADATA_KEY = "motifgrid"
PROGRESS_FORMAT = 1
MAX_CONTIGS = 200          # contigs listed one by one (longest first); the rest are summed into one entry
MAX_BINS = 2000            # bins of the hits track along the genome, all listed contigs together
TOP_MOTIFS = 10            # motifs with the most hits, with their probability matrices (for logos)
ENDED = ("finished", "failed")


def _iso(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).isoformat(timespec="seconds")


def _ppm(pwm: np.ndarray, background: np.ndarray) -> list:
    """Probability matrix scanned (pseudocount included), rows of A C G T, 4 digits."""
    p = np.asarray(background, float) * np.exp2(np.asarray(pwm, float))
    p /= p.sum(axis=1, keepdims=True)
    return np.round(p, 4).tolist()


class ScanProgress:
    """Publisher of one scan's state.  Every method is cheap and never raises: a scheduler that
    cannot be reached only turns publishing off (the scan goes on)."""

    def __init__(self, client, job, device: str = "cpu", command: str = "", interval: float | None = None):
        import dask.config  # noqa: PLC0415

        self.client = client
        self.job = job
        self.scan_id = uuid.uuid4().hex[:12]
        self.interval = float(dask.config.get("motifgrid.progress.interval", default=0.5)
                              if interval is None else interval)
        # (a client of this process's threads has no scheduler: no other client could follow it)
        self.enabled = (client is not None and not getattr(client, "threads_only", False)
                        and bool(dask.config.get("motifgrid.progress.publish", default=True)))
        self._last = 0.0
        self._prev = None          # (time, blocks, hits, positions) at the previous publication
        now = time.time()
        self.state = {
            "format": PROGRESS_FORMAT, "scan_id": self.scan_id, "state": "thresholds", "message": "",
            "out": abspath(job.out), "genome": job.store.path, "motifs": job.mset.source,
            "motif_count": len(job.mset.ids), "pvalue": job.pvalue, "device": device, "command": command,
            "client": getattr(client, "id", ""),
            "started": now, "started_iso": _iso(now), "updated": now, "finished": None, "finished_iso": None,
            "tasks_started": None, "blocks_total": 0, "blocks_done": 0, "blocks_skipped": len(job.done),
            "positions_total": 0, "positions_done": 0, "hits": 0, "rows": 0, "scores_done": 0,
            "elapsed": 0.0, "rate": {"blocks_per_s": 0.0, "hits_per_s": 0.0, "scores_per_s": 0.0},
            "rate_recent": {"blocks_per_s": 0.0, "hits_per_s": 0.0, "scores_per_s": 0.0, "window_s": 0.0},
            "contigs": [], "track_bin": 0, "top_motifs": [],
        }
        self._publish(force=True, latest=True)

    # -------------------------------------------------------------------------------- scan side
    def running(self, plan, blocks: list, todo: list, manifest: list, positions: dict | None = None) -> None:
        """Tasks are about to be submitted: ``blocks`` all scannable blocks, ``todo`` those of this
        run, ``manifest`` the entries of blocks finished by earlier runs (``--resume``); ``positions``: the window
        starts each block scans (block id -> count; default its core)."""
        self._positions = positions or {b.block_id: b.core_end - b.start for b in blocks}
        store = self.job.store
        B = store.block_size
        self.rows = plan.n_rows
        self._row_motif = np.asarray(plan.row_motif)
        self._row_strand = np.asarray(plan.row_strand)
        self._row_hits = np.zeros(plan.n_rows, np.int64)
        rec = store.records
        first = rec.offsets // B                                           # each record's first block
        n_blocks = np.where(rec.lengths > 0, (rec.offsets + np.maximum(rec.lengths, 1) - 1) // B - first + 1, 0)
        by_len = np.argsort(-rec.lengths, kind="stable").tolist()
        listed = sorted(by_len[:MAX_CONTIGS])
        self._k = max(1, math.ceil(int(n_blocks[listed].sum()) / MAX_BINS))   # blocks per track bin
        self._where = {}                                                   # record number -> entry index
        contigs = []
        for i in listed:
            self._where[i] = len(contigs)
            contigs.append({"name": rec.names[i], "length": int(rec.lengths[i]), "blocks_total": 0, "blocks_done": 0,
                            "hits": 0, "track": [0] * math.ceil(int(n_blocks[i]) / self._k)})
        if len(listed) < len(rec):
            rest = by_len[MAX_CONTIGS:]
            contigs.append({"name": f"({len(rest)} other contigs)", "length": int(rec.lengths[rest].sum()),
                            "blocks_total": 0, "blocks_done": 0, "hits": 0, "track": []})
        self._other = len(contigs) - 1 if len(listed) < len(rec) else None
        # a block is shown on the record its core starts with (a block of packed peaks: the first of them)
        self._owner = {b.block_id: rec.overlapping(b.start, b.core_end)[0] for b in blocks}
        self._first = first
        for b in blocks:       # bins holding a block still to scan start empty (None), all-N bins at 0
            e = contigs[self._where.get(self._owner[b.block_id], self._other)]
            e["blocks_total"] += 1
            if e["track"]:
                e["track"][min(b.index - int(first[self._owner[b.block_id]]), len(e["track"]) * self._k - 1)
                           // self._k] = None
        self._blocks = {b.block_id: b for b in blocks}
        st = self.state
        st.update(state="running", blocks_total=len(blocks), rows=int(plan.n_rows), contigs=contigs,
                  track_bin=int(self._k * B), positions_total=int(sum(self._positions.values())),
                  blocks_this_run=len(todo))
        for e in manifest:
            self._add_block(e["block"], e["hits"], e.get("row_hits", []), this_run=False)
        self._hits0 = st["hits"]
        self._t0 = time.time()
        st["tasks_started"] = self._t0
        self._prev = (self._t0, st["blocks_done"], st["hits"], st["positions_done"])
        self._top()
        self._publish(force=True)

    def task_done(self, res: dict) -> None:
        """A task's statistics (``pipeline.scan.task.scan_task``): count its blocks, publish when due."""
        hits_by_block = dict((b, h) for b, h in res.get("block_hits", []))
        for bid, h in hits_by_block.items():
            self._add_block(bid, h, [], this_run=True)
        if res.get("row_hits") is not None:          # (n_rows,) int64: one buffer, cheap to send
            self._row_hits += res["row_hits"]
        if time.time() - self._last >= self.interval:
            self._top()
            self._publish()

    def finished(self, summary: dict) -> None:
        self._end("finished", "")

    def failed(self, exc: BaseException) -> None:
        # the scheduler may be stopping too (scancel, a time limit: SLURM signals every process of the job at once):
        # a client that has lost it does not wait on it (set_metadata waited until SLURM's SIGKILL, and the command's
        # one "interrupted" line was never printed)
        if scheduler_lost(self.client):
            self.enabled = False
        msg = str(exc) or type(exc).__name__
        self._end("failed", msg.splitlines()[0] if msg else "", timeout=2.0)

    # -------------------------------------------------------------------------------- internals
    def _add_block(self, block_id: str, hits: int, row_hits, this_run: bool) -> None:
        b = self._blocks.get(block_id)
        if b is None:
            return
        st = self.state
        st["blocks_done"] += 1
        st["hits"] += int(hits)
        if this_run:
            st["positions_done"] += self._positions.get(block_id, 0)
        for r, c in row_hits:
            self._row_hits[r] += c
        r = self._owner[block_id]
        e = st["contigs"][self._where.get(r, self._other)]
        e["blocks_done"] += 1
        e["hits"] += int(hits)
        if e["track"]:
            i = min(b.index - int(self._first[r]), len(e["track"]) * self._k - 1) // self._k
            e["track"][i] = (e["track"][i] or 0) + int(hits)

    def _top(self) -> None:
        mset = self.job.mset
        if not hasattr(self, "_row_hits"):
            return
        n = len(mset.ids)
        plus = np.bincount(self._row_motif[self._row_strand == 0], self._row_hits[self._row_strand == 0], n)
        minus = np.bincount(self._row_motif[self._row_strand == 1], self._row_hits[self._row_strand == 1], n)
        tot = plus + minus
        order = np.argsort(-tot, kind="stable")[:TOP_MOTIFS]
        if not hasattr(self, "_ppms"):
            self._ppms = {}
        top = []
        for i in order:
            if tot[i] == 0:
                break
            if i not in self._ppms:
                self._ppms[i] = _ppm(mset.pwms[i], mset.background)
            top.append({"id": mset.ids[i], "name": mset.names[i], "hits": int(tot[i]), "hits_plus": int(plus[i]),
                        "hits_minus": int(minus[i]), "ppm": self._ppms[i]})
        self.state["top_motifs"] = top

    def _rates(self, now: float) -> None:
        st = self.state
        st["updated"] = now
        st["elapsed"] = now - st["started"]
        st["scores_done"] = int(st["positions_done"]) * int(st.get("rows", 0))
        if st.get("tasks_started"):
            dt = max(now - st["tasks_started"], 1e-9)
            done_run = st["blocks_done"] - st["blocks_skipped"]
            st["rate"] = {"blocks_per_s": done_run / dt, "hits_per_s": self._hits_run() / dt,
                          "scores_per_s": st["scores_done"] / dt}
            t, b, h, p = self._prev
            w = now - t
            if w >= self.interval and w > 0:     # shorter windows (the final publication) keep the last rates
                st["rate_recent"] = {"blocks_per_s": (st["blocks_done"] - b) / w, "hits_per_s": (st["hits"] - h) / w,
                                     "scores_per_s": (st["positions_done"] - p) * st["rows"] / w, "window_s": w}
                self._prev = (now, st["blocks_done"], st["hits"], st["positions_done"])

    def _hits_run(self) -> int:
        if not hasattr(self, "_hits0"):
            return self.state["hits"]
        return self.state["hits"] - self._hits0

    def _end(self, state: str, message: str, timeout: float | None = None) -> None:
        now = time.time()
        self._top()
        self.state.update(state=state, message=message, finished=now, finished_iso=_iso(now))
        self._publish(force=True, timeout=timeout)

    def _publish(self, force: bool = False, latest: bool = False, timeout: float | None = None) -> None:
        now = time.time()
        if not self.enabled or (not force and now - self._last < self.interval):
            return
        self._rates(now)
        self._last = now
        try:
            self._set([METADATA_KEY, "scans", self.scan_id], self.state, timeout)
            if latest:
                self._set([METADATA_KEY, "latest"], self.scan_id, timeout)
        except Exception:          # the scheduler went away: the scan reports its own error, if any
            self.enabled = False

    def _set(self, key: list, value, timeout: float | None) -> None:
        if timeout is None:
            self.client.set_metadata(key, value)
        else:                      # Client.set_metadata, bounded (distributed's own call, with a callback timeout)
            self.client.sync(self.client.scheduler.set_metadata, keys=key, value=value, callback_timeout=timeout)


# ------------------------------------------------------------------------------------ notebooks
class NoScheduler(RuntimeError):
    """No Dask scheduler answers where a notebook looks: one line in Jupyter (IPython renders
    ``_render_traceback_`` instead of the traceback)."""

    def _render_traceback_(self) -> list:
        return [f"{type(self).__name__}: {self}"]


def connect(address: str | None = None, scheduler_file: str | None = None, timeout: float = 5.0):
    """A ``distributed.Client`` of the scheduler at ``address`` (or in ``scheduler_file``), or :class:`NoScheduler`
    within ``timeout`` s saying so and how to start a scan that publishes its progress (a notebook waited 30 s and
    showed a coloured traceback)."""
    import dask.config  # noqa: PLC0415

    from pipeline.engine.cluster import ClusterError, connect_scheduler, scheduler_address  # noqa: PLC0415

    where = address or scheduler_file
    try:
        with dask.config.set({"motifgrid.cluster.handshake-timeout": timeout}):
            return connect_scheduler(scheduler_address(address, scheduler_file), None)
    except ClusterError as e:
        raise NoScheduler(f"no Dask scheduler answers at {where} ({str(e).split(': ', 1)[-1]}); start a scan that "
                          "publishes its progress there — `motifgrid scan ... --processes` prints its scheduler: "
                          "address, or `dask scheduler` + `dask worker` and `motifgrid scan ... --scheduler ADDRESS` "
                          "— and set MOTIFGRID_SCHEDULER (or this notebook's SCHEDULER) to it") from None


# ------------------------------------------------------------------------------------ readers
def latest_scan_id(client) -> str | None:
    """Id of the scan started last on this scheduler, or None."""
    return client.get_metadata([METADATA_KEY, "latest"], default=None)


def client_connected(client, client_id: str) -> bool | None:
    """Whether the client that runs a scan is still connected to the scheduler (None: cannot tell)."""
    if not client_id:
        return None
    try:
        ids = client.run_on_scheduler(_scheduler_clients)
    except Exception:
        return None
    return client_id in ids


def _scheduler_clients(dask_scheduler=None):
    return list(dask_scheduler.clients)


def read_progress(client, scan_id: str | None = None, check_client: bool = True) -> dict | None:
    """The published state of a scan (the latest one by default), or None if there is none.

    With ``check_client`` the state gets ``client_connected`` (is the scanning client still there?) and
    ``abandoned`` (True when it is gone while the state still says running: the scan was interrupted
    and is finished with ``--resume``)."""
    scan_id = scan_id or latest_scan_id(client)
    if not scan_id:
        return None
    st = client.get_metadata([METADATA_KEY, "scans", scan_id], default=None)
    if st is None:
        return None
    st = dict(st)
    if check_client:
        conn = client_connected(client, st.get("client", ""))
        st["client_connected"] = conn
        st["abandoned"] = st.get("state") not in ENDED and conn is False
    return st


def wait_for_scan(client, scan_id: str | None = None, timeout: float = 600.0, poll: float = 0.5,
                  after: float | None = None) -> dict:
    """Block until a scan (``scan_id``, else the latest one, started after ``after`` if given) is published."""
    deadline = time.time() + timeout
    while True:
        st = read_progress(client, scan_id, check_client=False)
        if st is not None and (after is None or st["started"] >= after):
            return read_progress(client, st["scan_id"])
        if time.time() >= deadline:
            raise TimeoutError(f"no motifgrid scan was published on {client.scheduler.address} within {timeout:g} s")
        time.sleep(poll)


def follow(client, scan_id: str | None = None, interval: float = 1.0, timeout: float | None = None):
    """Yield the state of a scan every ``interval`` seconds until it is finished, failed or abandoned
    (its client gone), or ``timeout`` seconds have passed; the last state yielded is the final one."""
    t_end = None if timeout is None else time.time() + timeout
    scan_id = scan_id or latest_scan_id(client)
    while True:
        st = read_progress(client, scan_id)
        if st is None:
            raise KeyError(f"no motifgrid scan {scan_id!r} on this scheduler")
        yield st
        if st["state"] in ENDED or st.get("abandoned") or (t_end is not None and time.time() >= t_end):
            return
        time.sleep(interval)


def format_line(st: dict) -> str:
    """One line: state, blocks, hits, rates."""
    r = (st.get("rate_recent") if st.get("state") == "running" else st.get("rate")) or {}
    state = "abandoned (client gone; finish it with --resume)" if st.get("abandoned") else st["state"]
    return (f"scan {st['scan_id']} {state}: {st['blocks_done']}/{st['blocks_total']} blocks, {st['hits']:,} hits, "
            f"{r.get('hits_per_s', 0):,.0f} hits/s, {r.get('scores_per_s', 0):.3g} window scores/s, "
            f"{st['elapsed']:.1f} s → {st['out']}")
