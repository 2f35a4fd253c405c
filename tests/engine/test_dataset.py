"""The task runner every result graph uses (pipeline.engine.dataset.TaskRun), on a real local Dask cluster."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field

import pytest

from pipeline.engine.dataset import TaskRun


@pytest.fixture(scope="module")
def client():
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cl, \
            Client(cl) as c:
        yield c


@dataclass
class Ctx:                       # a context is one object (a dict would be scattered value by value)
    bad: int | None = None
    slow: int | None = None
    release: threading.Event = field(default_factory=threading.Event)


def _square(ctx: Ctx, x: int) -> int:
    if x == ctx.bad:
        raise ValueError(f"no {x}")
    if x == ctx.slow:
        ctx.release.wait(30)
    return x * x


class Failed(RuntimeError):
    pass


def test_results_as_they_finish_with_the_context_scattered_once(client, tmp_path, monkeypatch):
    ctx = Ctx()
    tmp = tmp_path / "chrom" / "x" / ".part-a.parquet.tmp-1234"       # a writer killed mid-write
    tmp.parent.mkdir(parents=True)
    tmp.write_bytes(b"half")
    scattered, submitted = [], []
    scatter, submit = client.scatter, client.submit
    monkeypatch.setattr(client, "scatter", lambda *a, **k: scattered.append(scatter(*a, **k)) or scattered[-1])
    monkeypatch.setattr(client, "submit", lambda f, c, *a, **k: submitted.append(c) or submit(f, c, *a, **k))
    run = TaskRun(client, _square, ctx, [(x,) for x in range(6)], name="sq", key=lambda x: f"n{x}")
    assert len(run) == 6 and all(k.startswith("sq-n") for k in run.futures)
    assert len(scattered) == 1 and all(c is scattered[0] for c in submitted) and len(submitted) == 6
    got = sorted(run.results(Failed, out=str(tmp_path)))
    assert got == [0, 1, 4, 9, 16, 25] and len(run) == 0
    assert not tmp.exists()


def test_first_error_cancels_the_rest_and_raises_one_line(client):
    ctx = Ctx(bad=1, slow=4)
    run = TaskRun(client, _square, ctx, [(x,) for x in (1, 4)], name="sq2", key=lambda x: x)
    with pytest.raises(Failed, match=r"^ValueError: no 1$") as e:
        for _ in run.results(lambda exc: Failed(f"{type(exc).__name__}: {exc}")):
            pass
    assert e.value.__cause__ is None and e.value.__suppress_context__
    slow = next(f for k, f in run.futures.items() if k.startswith("sq2-4-"))
    ctx.release.set()
    assert slow.cancelled() or slow.status == "cancelled"


def test_no_work_submits_nothing(client):
    run = TaskRun(client, _square, Ctx(), [], name="none", key=str)
    assert len(run) == 0 and list(run.results(Failed)) == []


def test_a_task_the_cluster_cancels_raises_one_line(client):
    """A task the scheduler cancels instead of running (every worker gone with the data it needed) ends the
    results with ``failure(TaskCancelled)``; the caller's loop used to get the cancellation error as a result and
    fail on it with a TypeError traceback."""
    ctx = Ctx(slow=4)
    run = TaskRun(client, _square, ctx, [(4,)], name="sq3", key=lambda x: x)
    client.cancel(list(run.futures.values()), reason="the test's workers left")
    with pytest.raises(Failed, match=r"^TaskCancelled: the cluster cancelled it \(did every worker leave the "
                                     r"scheduler\?\): .*") as e:
        for _ in run.results(lambda exc: Failed(f"{type(exc).__name__}: {exc}")):
            pass
    assert e.value.__cause__ is None and e.value.__suppress_context__
    ctx.release.set()
