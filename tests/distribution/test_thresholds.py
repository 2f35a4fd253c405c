"""pipeline/distribution/thresholds.py: the Dask fan-out equals the serial loop; the thresholds table."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from pipeline.distribution.thresholds import compute_thresholds, thresholds_table
from workers.distribution import pvalue_to_score

DATA = Path(__file__).resolve().parents[1] / "data"
BG = np.array([0.3, 0.2, 0.2, 0.3])


def _pwms() -> tuple[list[str], list[str], list[np.ndarray]]:
    ids, names, mats, rows = [], [], [], None
    for line in (DATA / "jaspar2024_subset.jaspar").read_text().splitlines():
        if line.startswith(">"):
            f = line[1:].split()
            ids.append(f[0])
            names.append(f[1] if len(f) > 1 else f[0])
            rows = []
            mats.append(rows)
        elif line.strip():
            rows.append([float(x) for x in line.split("[")[1].split("]")[0].split()])
    pwms = []
    for r in mats:
        c = np.array(r).T
        ppm = (c + 0.025) / (c.sum(axis=1, keepdims=True) + 0.1)
        pwms.append(np.log2(ppm / 0.25))
    return ids, names, pwms


def test_serial_loop_matches_worker_function():
    _, _, pwms = _pwms()
    got = compute_thresholds(pwms[:4], BG, 1e-4)
    assert got == [pvalue_to_score(w, BG, 1e-4) for w in pwms[:4]]
    assert compute_thresholds([], BG, 1e-4) == []


def test_distributed_equals_serial():
    from distributed import Client, LocalCluster, get_task_stream

    _, _, pwms = _pwms()
    pwms = pwms + [w[::-1, ::-1].copy() for w in pwms]       # 24 matrices, both strands
    serial = compute_thresholds(pwms, BG, 1e-5, client=None, cache=False)
    with LocalCluster(processes=False, n_workers=1, threads_per_worker=2,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        with get_task_stream(client) as ts:
            dist = compute_thresholds(pwms, BG, 1e-5, client=client, batch=5, cache=False)   # 5 batches
        assert sum("_threshold_batch" in str(x["key"]) for x in ts.data) == 5
        with get_task_stream(client) as ts:
            current = compute_thresholds(pwms[:6], BG, 1e-5, batch=2, cache=False)   # the current client
        assert sum("_threshold_batch" in str(x["key"]) for x in ts.data) == 3
    assert len(dist) == len(pwms)
    assert dist == serial                                      # order preserved, tables identical
    assert current == serial[:6]
    for t, w in zip(dist, pwms):
        assert t.max_score == pytest.approx(w.max(axis=1).sum())


def test_thresholds_table():
    from pipeline.io.schema import THRESHOLDS_SCHEMA

    ids, names, pwms = _pwms()
    pwms, ids, names = pwms[:3], ids[:3], names[:3]
    tables = compute_thresholds(pwms, BG, 1e-4, table=False)
    tables = [x for t in tables for x in (t, t)]
    rid = [i for i in ids for _ in (0, 1)]
    rname = [n for n in names for _ in (0, 1)]
    t = thresholds_table(rid, rname, [0, 1] * 3, tables)
    assert t.column_names == ["motif_id", "motif_name", "strand", "threshold", "pvalue",
                              "pvalue_low", "pvalue_high", "reachable", "requested_pvalue", "method",
                              "score_error", "n_slices", "n_buckets", "seed_bound"]
    assert set(t.column("method").to_pylist()) == {"exact"}
    assert t.column("strand").to_pylist() == ["+", "-"] * 3
    assert t.column("threshold").to_pylist() == [x.threshold for x in tables]
    assert t.column("pvalue_high").to_pylist() == [x.pvalue_bounds[1] for x in tables]
    # MA0006.2 (m = 5) cannot reach 1e-4: +inf threshold, p-value 0
    assert ids[1] == "MA0006.2"
    row = t.slice(2, 1).to_pylist()[0]
    assert row["reachable"] is False and row["threshold"] == math.inf and row["pvalue"] == 0.0
    t2 = thresholds_table(rid, rname, ["+", "-"] * 3, tables,
                          lengths=[w.shape[0] for w in pwms for _ in (0, 1)])
    assert t2.schema == THRESHOLDS_SCHEMA
    assert t2.column("length").to_pylist()[:2] == [pwms[0].shape[0]] * 2
    with pytest.raises(ValueError):
        thresholds_table(rid[:-1], rname, [0, 1] * 3, tables)


def _cache_rows(cache) -> dict:
    import sqlite3

    con = sqlite3.connect(cache / "thresholds.sqlite3")
    try:
        return dict(con.execute("SELECT key, value FROM entries").fetchall())
    finally:
        con.close()


def _cache_put(cache, key: str, value: bytes) -> None:
    import sqlite3

    con = sqlite3.connect(cache / "thresholds.sqlite3")
    with con:
        con.execute("UPDATE entries SET value = ? WHERE key = ?", (value, key))
    con.close()


def test_disk_cache_hits_misses_and_survives_corruption(tmp_path):
    from pipeline.distribution.thresholds import compute_thresholds

    rng = np.random.default_rng(5)
    pwms = [rng.normal(0, 1.2, (int(m), 4)) for m in (6, 9, 12)]
    bg = np.array([0.3, 0.2, 0.2, 0.3])
    cold = compute_thresholds(pwms, bg, 1e-4, cache=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["thresholds.sqlite3"]     # one file, whatever the matrices
    rows = _cache_rows(tmp_path)
    sets = [k for k in rows if k.startswith("set-")]
    entries = sorted(k for k in rows if not k.startswith("set-"))
    assert len(entries) == 3 and len(sets) == 1               # an entry per matrix, and the whole call in one row
    warm = compute_thresholds(pwms, bg, 1e-4, cache=tmp_path)
    assert warm == cold
    _cache_put(tmp_path, sets[0], rows[sets[0]][:-16])         # a torn set: the entries are read instead
    _cache_put(tmp_path, entries[0], b"not floats")            # a torn entry is recomputed, not trusted
    _cache_put(tmp_path, entries[1], rows[entries[1]][:-16])   # truncated entry
    again = compute_thresholds(pwms, bg, 1e-4, cache=tmp_path)
    assert again == cold
    assert _cache_rows(tmp_path)[entries[1]] == rows[entries[1]]   # recomputed entries overwrite the torn ones
    assert compute_thresholds(pwms[:2], bg, 1e-4, cache=tmp_path) == cold[:2]    # another set of the same entries
    other = compute_thresholds(pwms, bg, 1e-5, cache=tmp_path)   # another p-value is another key
    assert len([k for k in _cache_rows(tmp_path) if not k.startswith("set-")]) == 6
    assert [t.threshold for t in other] != [t.threshold for t in cold]


def test_disk_cache_not_a_database_or_read_only(tmp_path):
    """A cache file that is not SQLite is set aside and a new one made; a read-only cache is read, not written,
    and never fails the run."""
    import os
    import stat

    from pipeline.distribution.thresholds import compute_thresholds

    pwms, bg = [np.random.default_rng(6).normal(0, 1.2, (8, 4))], np.full(4, 0.25)
    cold = compute_thresholds(pwms, bg, 1e-4, cache=tmp_path, table=False)
    db = tmp_path / "thresholds.sqlite3"
    db.write_bytes(b"garbage " * 100)
    assert compute_thresholds(pwms, bg, 1e-4, cache=tmp_path, table=False) == cold
    assert len(list(tmp_path.glob("thresholds.sqlite3.unreadable-*"))) == 1
    assert compute_thresholds(pwms, bg, 1e-4, cache=tmp_path, table=False) == cold
    assert len(_cache_rows(tmp_path)) == 2                     # the new file holds the entry and the set
    if os.geteuid() == 0:
        return                                                 # root writes through any mode bits
    os.chmod(tmp_path, stat.S_IRUSR | stat.S_IXUSR)
    os.chmod(db, stat.S_IRUSR)
    try:
        assert compute_thresholds(pwms, bg, 1e-4, cache=tmp_path, table=False) == cold
        assert compute_thresholds(pwms, bg, 1e-5, cache=tmp_path, table=False)[0].threshold > cold[0].threshold
    finally:
        os.chmod(tmp_path, stat.S_IRWXU)
        os.chmod(db, stat.S_IRUSR | stat.S_IWUSR)


def test_early_on_threads_equals_serial():
    """Early: the batches on a thread pool (longest first) give the serial loop's thresholds, in input order."""
    from pipeline.distribution.thresholds import Early, compute_thresholds

    _, _, pwms = _pwms()
    pwms = pwms + [w[::-1, ::-1].copy() for w in pwms]
    serial = compute_thresholds(pwms, BG, 1e-5, client=None, cache=False)
    early = Early(lambda pool: compute_thresholds(pwms, BG, 1e-5, client=pool, cache=False), threads=3, beside=1)
    assert early.result() == serial


def test_early_leaves_the_callers_core_until_asked():
    """``beside=1``: one of two threads runs until ``result()`` is asked for, then both; errors reach the caller."""
    import threading
    import time

    from pipeline.distribution.thresholds import Early

    lock, running, seen = threading.Lock(), [0], {"before": 0, "after": 0}
    opened = threading.Event()

    def task():
        with lock:
            running[0] += 1
            key = "after" if opened.is_set() else "before"
            seen[key] = max(seen[key], running[0])
        time.sleep(0.02)
        with lock:
            running[0] -= 1
        return 1

    early = Early(lambda pool: sum(f.result() for f in [pool.submit(task) for _ in range(60)]), threads=2, beside=1)
    time.sleep(0.2)
    opened.set()
    assert early.result() == 60
    assert seen["before"] == 1 and seen["after"] == 2

    def boom(pool):
        raise ValueError("bad matrix")

    with pytest.raises(ValueError, match="bad matrix"):
        Early(boom, threads=2).result()


def test_early_cancel_drops_the_batches_not_started():
    import concurrent.futures
    import time

    from pipeline.distribution.thresholds import Early

    ran = []

    def task(i):
        time.sleep(0.01)
        ran.append(i)

    early = Early(lambda pool: [f.result() for f in [pool.submit(task, i) for i in range(200)]], threads=1)
    deadline = time.monotonic() + 30          # some batches started (a fixed 50 ms was too short on a loaded machine)
    while not ran and time.monotonic() < deadline:
        time.sleep(0.005)
    early.cancel()
    with pytest.raises(concurrent.futures.CancelledError):
        early.result()
    assert 0 < len(ran) < 200


def test_cache_writer_started_before_a_waiter_can_join_it(monkeypatch, tmp_path):
    """A background cache writer is listed only once started: a waiter on another thread (the scan's end, the
    exit) never joins a thread not yet started (RuntimeError), however slow the start."""
    import threading
    import time
    from types import SimpleNamespace

    import pipeline.distribution.thresholds as T

    class SlowStart(threading.Thread):
        def start(self):
            time.sleep(0.3)
            super().start()

    monkeypatch.setattr(T, "threading", SimpleNamespace(Thread=SlowStart))
    errors = []

    def waiter():
        time.sleep(0.1)                               # while the writer's start is under way
        try:
            T.wait_for_cache_writes()
        except RuntimeError as e:
            errors.append(e)

    w = threading.Thread(target=waiter)
    w.start()
    T._store_in_background(tmp_path / "cache", [])
    w.join()
    T.wait_for_cache_writes()
    assert not errors, errors


def test_thresholds_without_tables_equal_and_served_by_entries_with_tables(tmp_path, monkeypatch):
    """``table=False`` gives the thresholds of ``table=True`` (every matrix of the JASPAR subset, one p-value a call, a
    skewed background) without tail tables; a cache filled with tables serves it without computing.  A later p-value
    of a call without tables (which may start from an earlier p-value's lattice) has an entry of its own."""
    import pipeline.distribution.thresholds as th

    _, _, pwms = _pwms()
    for p in (1e-4, 1e-5):
        full = th.compute_thresholds(pwms, BG, p, cache=tmp_path)
        bare = th.compute_thresholds(pwms, BG, p, cache=False, table=False)
        for a, b in zip(full, bare):
            assert (a.threshold, a.reachable, a.pvalue, a.pvalue_bounds) == (b.threshold, b.reachable, b.pvalue,
                                                                               b.pvalue_bounds)
            assert not a.reachable or (a.has_table and not b.has_table)
    pair = th.compute_thresholds_many(pwms, BG, [1e-4, 1e-5], cache=False, table=False)

    def computed(*a, **k):
        raise AssertionError("computed, not read from the cache")
    with monkeypatch.context() as m:
        m.setattr(th, "_compute", computed)
        assert th.compute_thresholds(pwms, BG, 1e-5, cache=tmp_path, table=False) == \
            th.compute_thresholds(pwms, BG, 1e-5, cache=tmp_path)
    assert th.compute_thresholds_many(pwms, BG, [1e-4, 1e-5], cache=tmp_path, table=False) == pair
    rows = _cache_rows(tmp_path)
    assert th.compute_thresholds_many(pwms, BG, [1e-4, 1e-5], cache=tmp_path, table=False) == pair   # read back
    assert _cache_rows(tmp_path) == rows
