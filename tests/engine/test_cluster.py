"""Local clusters: thread defaults, the worker warm-up plugin, the once-per-process BLAS pin."""
from __future__ import annotations

import threading
import time

import dask.config
import pytest

from pipeline.engine.cluster import ClusterError, cpu_count, get_client, gpu_processes, gpu_worker_slots, gpu_worker_threads


def test_gpu_worker_threads_share_the_cores():
    with dask.config.set({"motifgrid.cluster.gpu-threads": None}):
        assert gpu_worker_threads(1) == max(2, cpu_count())
        assert gpu_worker_threads(10 ** 6) == 2                      # never fewer than 2
        assert gpu_worker_threads(2) == max(2, cpu_count() // 2)
    with dask.config.set({"motifgrid.cluster.gpu-threads": 12}):
        assert gpu_worker_threads(4) == 12


def test_gpu_worker_slots_cover_every_gpu_first():
    """k processes per GPU: the first workers take one GPU each (a cluster scaled to fewer still covers them all),
    the first process of a GPU is named by it as dask-cuda names its workers, and names never repeat."""
    assert gpu_worker_slots([0], 1) == [(0, 0)]
    slots = gpu_worker_slots([2, 3], 3)
    assert slots == [(2, 2), (3, 3), ("2-1", 2), ("3-1", 3), ("2-2", 2), ("3-2", 3)]
    assert len({name for name, _ in slots}) == 6
    assert [d for _, d in gpu_worker_slots(["GPU-a", "GPU-b"], 2)] == ["GPU-a", "GPU-b"] * 2


def test_gpu_processes_setting():
    with dask.config.set({"motifgrid.cluster.gpu-processes": 4}):
        assert gpu_processes() == 4
    with dask.config.set({"motifgrid.cluster.gpu-processes": "auto"}):     # the packaged default
        assert gpu_processes(1) == min(4, max(1, cpu_count() // 4))
        assert gpu_processes(2) == min(2, max(1, cpu_count() // 8))
        assert gpu_processes(4) == gpu_processes(10 ** 6) == 1
    for bad in (0, "two"):
        with dask.config.set({"motifgrid.cluster.gpu-processes": bad}), pytest.raises(ClusterError, match="gpu-processes"):
            gpu_processes()


def test_cpu_threads_option():
    with get_client(device="cpu", threads_per_worker=3, quiet=True) as (client, dev):
        assert dev == "cpu"
        assert sum(client.nthreads().values()) == 3


def test_local_cluster_with_dashboard_closes_cleanly():
    """The in-process cluster of a large job (dashboard on) closes without an error: with bokeh 3.10, distributed
    2026.7's scheduler stops its dashboard synchronously inside its running loop, the stop raises, and the close
    waited 10 s and failed with "join timed out" after the scan had finished (dask/distributed#9350; bokeh is
    pinned below 3.10 in pyproject.toml)."""
    with get_client(device="cpu", threads_per_worker=2, quiet=True, dashboard=True) as (client, dev):
        assert client.submit(lambda x: x + 1, 1).result() == 2


def test_workers_warm_up_when_they_join(tmp_path):
    """Every worker of a cluster from get_client runs workers.warmup.warm (thresholds + scan kernels) once."""
    from distributed import Client, LocalCluster

    def done():
        import workers.warmup as w
        return bool(w._done.get("cpu"))

    # separate worker processes: their state starts empty, so the plugin must be what warms them
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as cl, Client(cl) as c:
        assert not any(c.run(done).values())
        from pipeline.engine.cluster import _register_warmup
        _register_warmup(c, "cpu")
        deadline = time.time() + 60
        while not all(c.run(done).values()) and time.time() < deadline:
            time.sleep(0.2)
        assert all(c.run(done).values())


def test_blas_pin_once_per_process(monkeypatch):
    """limit_blas_threads does its (slow, GIL-hungry) library walk once; later calls return at once."""
    import workers.backend as b

    calls = []
    monkeypatch.setattr(b, "_blas_limit", {"n": None})
    tp = pytest.importorskip("threadpoolctl")
    real = tp.threadpool_limits
    monkeypatch.setattr(tp, "threadpool_limits", lambda n: (calls.append(n), real(n))[1])
    ts = [threading.Thread(target=b.limit_blas_threads, args=(1,)) for _ in range(8)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    b.limit_blas_threads(1)
    assert calls == [1]
    b.limit_blas_threads(2)
    assert calls == [1, 2]
    b.limit_blas_threads(1)


def test_gc_threshold_setting():
    import gc

    from pipeline.engine.cluster import ClusterError
    from workers.backend import gc_threshold_setting, set_gc_threshold

    assert gc_threshold_setting([50000, 20, 100]) == (50000, 20, 100)
    assert gc_threshold_setting(0) is None and gc_threshold_setting([]) is None
    for bad in ("abc", [1, 2, 3, 4], [-1], [10, -2], ["x"]):
        with pytest.raises(ValueError, match="gc-threshold"):
            gc_threshold_setting(bad)
    with dask.config.set({"motifgrid.cluster.gc-threshold": [9000, 7]}):
        before = gc.get_threshold()
        try:
            assert set_gc_threshold() == (9000, 7) and gc.get_threshold()[:2] == (9000, 7)
        finally:
            gc.set_threshold(*before)
    with dask.config.set({"motifgrid.cluster.gc-threshold": "nonsense"}):
        with pytest.raises(ClusterError, match="gc-threshold"), get_client(device="cpu", quiet=True):
            pass


def test_worker_processes_take_the_clients_gc_threshold():
    """The warm-up plugin carries the client's setting to worker processes (which may not load motifgrid's
    configuration defaults)."""
    import gc

    from distributed import Client, LocalCluster

    from pipeline.engine.cluster import _register_warmup
    from workers.backend import gc_threshold_setting

    with dask.config.set({"motifgrid.cluster.gc-threshold": [12345, 6, 7]}), \
            LocalCluster(n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
                         dashboard_address=":0") as cl, Client(cl) as c:
        assert list(c.run(gc.get_threshold).values())[0] != (12345, 6, 7)
        _register_warmup(c, "cpu", gc_threshold_setting())       # as get_client passes it
        assert list(c.run(gc.get_threshold).values()) == [(12345, 6, 7)]


def test_retain_freed_memory_setting():
    """motifgrid.cluster.retain-freed-memory: auto keeps freed memory on GPU workers only; true/false for all."""
    import dask.config

    from pipeline.engine.cluster import on_for_device

    key = "motifgrid.cluster.retain-freed-memory"
    assert dask.config.get(key) == "auto"
    assert (on_for_device(key, "gpu"), on_for_device(key, "cpu")) == (True, False)
    for value, want in ((True, True), ("true", True), (False, False), ("false", False)):
        with dask.config.set({key: value}):
            assert (on_for_device(key, "gpu"), on_for_device(key, "cpu")) == (want, want)


def test_warm_up_setting(monkeypatch):
    """motifgrid.cluster.warm-up: false starts no kernel-loading thread on the workers (the other settings still
    apply); true (the default) starts one."""
    import time

    import dask.config

    from pipeline.engine.cluster import get_client
    from workers import warmup

    calls = []
    monkeypatch.setattr(warmup, "_warm_quietly", lambda device, sync=None: calls.append(device))
    for setting, want in ((False, []), (True, ["cpu"])):
        calls.clear()
        with dask.config.set({"motifgrid.cluster.warm-up": setting}), \
                get_client(n_workers=1, threads_per_worker=1, dashboard=False, quiet=True) as (client, _):
            client.submit(sum, [1, 2]).result()
            time.sleep(0.2)
        assert calls == want


def test_gpu_sync_setting(monkeypatch):
    """motifgrid.cluster.gpu-sync (blocking by default) goes to the workers' warm-up, which applies it on GPU workers
    only, before its kernels open the CUDA context; a policy CUDA has not is refused; without a CUDA driver nothing
    changes (False)."""
    import ctypes.util

    import dask.config

    from pipeline.engine.cluster import _register_warmup
    from workers import warmup
    from workers.backend import set_gpu_sync

    class Client:
        def register_plugin(self, plugin):
            self.plugin = plugin

    c = Client()
    assert dask.config.get("motifgrid.cluster.gpu-sync") == "blocking"
    _register_warmup(c, "gpu")
    assert c.plugin.gpu_sync == "blocking"
    with dask.config.set({"motifgrid.cluster.gpu-sync": "spin"}):
        _register_warmup(c, "gpu")
    assert c.plugin.gpu_sync == "spin"
    calls = []
    monkeypatch.setattr(warmup, "set_gpu_sync", calls.append)
    warmup.start("gpu", load_kernels=False, gpu_sync="blocking")
    warmup.start("cpu", load_kernels=False, gpu_sync="blocking")
    assert calls == ["blocking"]
    order = []
    monkeypatch.setattr(warmup, "set_gpu_sync", lambda p: order.append(("sync", p)))
    monkeypatch.setattr(warmup, "warm", lambda d: order.append(("warm", d)))
    monkeypatch.setattr(warmup, "_warm_io", lambda: None)
    warmup._warm_quietly("gpu", "yield")
    assert order == [("sync", "yield"), ("warm", "gpu")]
    with pytest.raises(ValueError, match="one of auto, spin, yield, blocking"):
        set_gpu_sync("fast")
    if ctypes.util.find_library("cuda") is None:
        assert set_gpu_sync("blocking") is False


def test_worker_processes_skip_numba_blas_probe():
    """Worker processes of their own get the console script's finder for numba's BLAS probe; an in-process
    worker (the user's own process) does not."""
    from distributed import Client, LocalCluster

    from pipeline.engine.cluster import _register_warmup

    def has_finder():
        import sys as s

        from workers.backend import _NoBlasProbe
        return any(isinstance(f, _NoBlasProbe) for f in s.meta_path)

    before = has_finder()
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None) as cl, \
            Client(cl) as c:
        _register_warmup(c, "cpu")
        assert list(c.run(has_finder).values()) == [True]
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None) as cl, \
            Client(cl) as c:
        _register_warmup(c, "cpu")
        assert has_finder() == before


def test_forkserver_workers_start_with_kernels_loaded():
    """motifgrid.cluster.start-method: forkserver forks local worker processes from one server that loaded the CPU
    kernels (workers.preload): with the warm-up thread off, a fresh worker has them all the same, and computes.
    Run in a subprocess: a forkserver's preload is fixed once per process."""
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent("""
        import dask.config
        from pipeline.engine.cluster import get_client, prestart_workers

        def loaded():
            from workers import warmup
            return bool(warmup._done.get("cpu"))

        if __name__ == "__main__":
            with dask.config.set({"motifgrid.cluster.start-method": "forkserver", "motifgrid.cluster.warm-up": False}):
                prestart_workers(gpu=True)      # the GPU preload: CuPy and dask-cuda, absent here, are skipped
                with get_client(n_workers=1, device="cpu", processes=True, dashboard=False, quiet=True) as (c, _):
                    print("loaded", list(c.run(loaded).values()), "sum", c.submit(sum, [1, 2]).result())
            with dask.config.set({"motifgrid.cluster.start-method": "spawn", "motifgrid.cluster.warm-up": False}):
                with get_client(n_workers=1, device="cpu", processes=True, dashboard=False, quiet=True) as (c, _):
                    print("spawned", list(c.run(loaded).values()))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "loaded [True] sum 3" in r.stdout
    assert "spawned [False]" in r.stdout


def test_start_method_setting_checked():
    from pipeline.engine.cluster import _start_method, prestart_workers

    with dask.config.set({"motifgrid.cluster.start-method": "fork"}), pytest.raises(ClusterError, match="start-method"):
        prestart_workers(gpu=False)
    with dask.config.set({"motifgrid.cluster.start-method": "spawn"}):
        prestart_workers(gpu=False)                # nothing to start
    with dask.config.set({"motifgrid.cluster.start-method": "auto"}):
        assert _start_method() == "forkserver"    # Linux


def test_scan_with_worker_processes_started_beside_the_planning(tmp_path, chrx_slice):
    """`scan --device cpu --processes` starts its cluster on a thread while it plans (pipeline.cli.local.EarlyCluster):
    the hits equal the in-process run's; a planning error (a malformed motif file) is one clear line, and the early
    cluster is closed (the command returns); a plainly missing input starts no cluster."""
    import gzip

    from pipeline.cli.command import main
    from pipeline.io.genome import ingest
    from pipeline.scan.read import read_hits
    from tests.conftest import DATA
    from tests.scan.test_scan_pipeline import table_rows

    fa = tmp_path / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        f.write(">chrD\n" + "\n".join(chrx_slice[i:i + 60] for i in range(0, 40_000, 60)) + "\n")
    store = ingest(fa, tmp_path / "g.zarr", block_size=8_000, halo=40)
    motifs = str(DATA / "jaspar2024_subset.jaspar")
    common = ["--pvalue", "1e-3", "--no-progress", "--device", "cpu"]
    assert main(["scan", store.path, motifs, "--out", str(tmp_path / "ref"), *common]) == 0
    processes = ["--processes", "--workers", "1"]
    assert main(["scan", store.path, motifs, "--out", str(tmp_path / "p"), *common, *processes]) == 0
    want = table_rows(read_hits(str(tmp_path / "ref")))
    assert len(want) > 50 and table_rows(read_hits(str(tmp_path / "p"))) == want
    assert main(["scan", store.path, str(tmp_path / "missing.jaspar"), "--out", str(tmp_path / "q"), *common,
                 *processes]) == 2                  # plainly missing: no early cluster, the error at once
    bad = tmp_path / "bad.jaspar"
    bad.write_text(">MA9999.1 X\nA [ 1 2 ]\nC [ 1 2 ]\nG [ 1 ]\nT [ 1 2 ]\n")
    assert main(["scan", store.path, str(bad), "--out", str(tmp_path / "q"), *common, *processes]) == 2


def test_switch_interval_lowered_only_while_a_local_cluster_starts():
    """``motifgrid.cluster.start-switch-interval``: the GIL switch interval is lowered while the local cluster
    starts (its scheduler waits on threads that plan beside it) and Python's is back once the client is yielded."""
    import sys

    import pipeline.engine.cluster as pc

    seen = []
    real = pc._local_cluster

    def spy(*args):
        seen.append(sys.getswitchinterval())
        return real(*args)

    before = sys.getswitchinterval()
    pc._local_cluster = spy
    try:
        with dask.config.set({"motifgrid.cluster.start-switch-interval": 0.0005}):
            with pc.get_client(device="cpu", quiet=True, dashboard=False) as (client, _):
                inside = sys.getswitchinterval()
    finally:
        pc._local_cluster = real
    assert seen == [min(before, 0.0005)]
    assert inside == before == sys.getswitchinterval()


def test_quiet_client_silences_tornado_even_when_distributed_is_imported_late():
    """A quiet client's process logs no tornado tracebacks after the one-line error (seen in CI: distributed,
    imported inside get_client, reset the logger's level to ERROR)."""
    import subprocess
    import sys

    code = ("import logging\n"
            "from pipeline.engine.cluster import get_client\n"
            "with get_client(n_workers=1, threads_per_worker=1, device='cpu', quiet=True, dashboard=False):\n"
            "    print(logging.getLogger('tornado.application').getEffectiveLevel())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == str(50), out.stdout


def test_quiet_client_of_a_scheduler_logs_nothing_of_distributed():
    """get_client(scheduler=..., quiet=True) silences this process's distributed loggers while it is open, as a quiet
    local cluster does (a failed scan closes its client with gathers in flight, which distributed would log around the
    command's one-line error), and gives their level back after; not quiet, they are left alone."""
    import logging

    from distributed import LocalCluster

    from pipeline.engine.cluster import get_client

    dlog = logging.getLogger("distributed")
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                      silence_logs=False) as cl:
        before = dlog.level
        with get_client(scheduler=cl.scheduler_address, quiet=True) as (client, _):
            assert dlog.level == logging.CRITICAL
            assert client.submit(sum, [1, 2]).result() == 3
        assert dlog.level == before
        with get_client(scheduler=cl.scheduler_address) as (client, _):
            assert dlog.level == before


def _listener(greeting: bytes | None):
    """A TCP server on 127.0.0.1 that is no Dask scheduler: it accepts, sends ``greeting`` (None: nothing) and
    holds the connection 20 s (a client that waits without a limit fails then with another message)."""
    import socket

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()

    def hold(conn):
        if greeting is not None:
            conn.sendall(greeting)
        time.sleep(20)
        conn.close()

    def serve():
        while True:
            threading.Thread(target=hold, args=(srv.accept()[0],), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    return f"tcp://127.0.0.1:{srv.getsockname()[1]}"


@pytest.mark.parametrize("greeting,msg", [
    (None, "no Dask scheduler answered at tcp://127.0.0.1:.* within 1s"),   # a dashboard's HTTP port: silent
    (b"SSH-2.0-OpenSSH_9.6p1 Debian-3\r\n", "answered, but not as a Dask scheduler"),   # read as a huge frame
])
def test_an_address_that_is_no_scheduler_is_refused_in_one_line(greeting, msg):
    addr = _listener(greeting)
    t = time.perf_counter()
    with dask.config.set({"motifgrid.cluster.handshake-timeout": 1}), pytest.raises(ClusterError, match=msg):
        with get_client(scheduler=addr, quiet=True):
            pass
    assert time.perf_counter() - t < 15          # not the 20 s the server holds the connection


def test_refused_and_unknown_addresses_say_so():
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]                    # bound, not listening: refused
    with dask.config.set({"motifgrid.cluster.handshake-timeout": 1}), pytest.raises(ClusterError,
                                                                                 match="connection refused"):
        with get_client(scheduler=f"tcp://127.0.0.1:{port}"):
            pass
    s.close()
    with pytest.raises(ClusterError, match="host name 'no-such-host.invalid' is not known"):
        with get_client(scheduler="tcp://no-such-host.invalid:8786"):
            pass


def test_quiet_client_drops_only_the_abandoned_gathers_traceback():
    """Ctrl-C during a gather (the q-value step) left asyncio's "Task exception was never retrieved ... AllExit"
    traceback above the command's one "interrupted" line; a quiet client drops that record and no other."""
    import asyncio
    import gc
    import io
    import logging

    from distributed.client import AllExit

    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    logging.getLogger("asyncio").addHandler(handler)
    try:
        with get_client(n_workers=1, threads_per_worker=1, device="cpu", quiet=True, dashboard=False):
            pass

        async def main():
            async def abandoned():
                raise AllExit()

            async def real():
                raise ValueError("a real error")
            tasks = [asyncio.ensure_future(abandoned()), asyncio.ensure_future(real())]
            await asyncio.sleep(0.01)
            del tasks
            gc.collect()
        asyncio.run(main())
        gc.collect()
    finally:
        logging.getLogger("asyncio").removeHandler(handler)
    text = buf.getvalue()
    assert "a real error" in text and "AllExit" not in text, text


def test_thread_client_runs_tasks_as_a_client_would():
    """:class:`ThreadClient`: futures nested in a task's arguments are its inputs (a task never runs before them,
    even on one thread), keyword arguments go to every task of ``map``, results gather nested, a failed task's
    error is its future's, and ``as_completed`` yields each future once with its result or error."""
    from pipeline.engine.thread_client import ThreadClient

    client = ThreadClient(1, memory_limit=2 ** 30)
    try:
        order = []

        def step(name, delay=0.0):
            time.sleep(delay)
            order.append(name)
            return name

        a = client.submit(step, "a", delay=0.05)
        b = client.submit(step, "b")
        both = client.submit(lambda xs, d: (xs, d), [a, (b,)], {"k": a}, key="both-1")
        assert both.key == "both-1" and both.result() == (["a", ("b",)], {"k": "a"})
        assert order == ["a", "b"]
        squares = client.map(lambda x, power: x ** power, [1, 2, 3], power=2)
        assert client.gather({"s": squares}) == {"s": [1, 4, 9]}

        def boom():
            raise ValueError("bad block")

        bad = client.submit(boom)
        seen = {f.key: (f.status, r) for f, r in client.as_completed([bad, squares[0]])}
        assert seen[squares[0].key] == ("finished", 1)
        assert seen[bad.key][0] == "error" and isinstance(seen[bad.key][1], ValueError)
        from concurrent.futures import CancelledError

        slow, later = client.submit(time.sleep, 0.2), client.submit(step, "never")
        assert later.cancel() and later.status == "cancelled"
        (f, r), = client.as_completed([later])
        assert f is later and isinstance(r, CancelledError)        # as distributed yields a cancelled future
        slow.result()
        assert client.scatter(order) is order                  # one process: nothing copied
        assert client.run(len, "abc") == {client.address: 3}
        assert client.nthreads() == {client.address: 1}
        assert client.scheduler_info()["workers"][client.address]["memory_limit"] == 2 ** 30
    finally:
        client.close()


def test_thread_client_task_run_stops_at_the_first_failure():
    """``TaskRun`` on a :class:`ThreadClient`: the first failed task raises the caller's one-line error and the tasks
    not yet started are cancelled (they never run)."""
    from pipeline.engine.dataset import TaskRun
    from pipeline.engine.thread_client import ThreadClient

    ran = []

    def task(ctx, i):
        if i == 0:
            time.sleep(0.05)
            raise OSError("disk full")
        time.sleep(0.01)
        ran.append(i)
        return i

    client = ThreadClient(1)
    try:
        run = TaskRun(client, task, {"ctx": 1}, [(i,) for i in range(50)], name="t", key=lambda i: i)
        with pytest.raises(RuntimeError, match="disk full"):
            for _ in run.results(lambda e: RuntimeError(f"a task failed: {e}")):
                pass
    finally:
        client.close()
    assert len(ran) < 10


def test_get_client_threads_only():
    """``threads_only``: this process's threads for a local CPU job, as many as asked for."""
    from pipeline.engine.thread_client import ThreadClient

    with get_client(device="cpu", threads_only=True, threads_per_worker=3) as (client, device):
        assert isinstance(client, ThreadClient) and device == "cpu"
        assert client.nthreads() == {client.address: 3}
        assert client.submit(sum, [1, 2]).result() == 3
