"""The per-device caches of workers/backend.py: plans uploaded once per (plan, device) and forgotten with the
plan; CUDA sources compiled once per device."""
from __future__ import annotations

import gc
import threading
import time

import numpy as np
import pytest

from workers import backend


class Plan:
    """A stand-in owner: any weak-referenceable object holding host arrays."""

    def __init__(self, n):
        self.a = np.arange(n)


def test_on_device_uploads_once_per_plan_and_device():
    calls = []

    def upload(plan):
        calls.append(plan)
        time.sleep(0.05)                 # the other threads arrive while the first one builds
        return {"sum": int(plan.a.sum())}

    p, q = Plan(4), Plan(5)
    got = []
    threads = [threading.Thread(target=lambda: got.append(backend.on_device(p, upload, device=0))) for _ in range(6)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert len(calls) == 1 and all(g is got[0] for g in got) and got[0] == {"sum": 6}
    assert backend.on_device(p, upload, device=1) is not got[0]          # another device: its own upload
    assert backend.on_device(q, upload, device=0) == {"sum": 10}
    assert len(calls) == 3
    assert backend.on_device(p, upload, device=0) is got[0]               # kept


def test_on_device_forgets_a_plan_that_is_gone():
    p = Plan(3)
    backend.on_device(p, lambda plan: plan.a * 2, device=0)
    key = (id(p), 0)
    assert key in backend._uploads
    del p
    gc.collect()
    assert key not in backend._uploads


def test_on_device_keeps_nothing_when_the_upload_fails():
    p = Plan(3)

    def bad(plan):
        raise MemoryError("out of device memory")

    with pytest.raises(MemoryError):
        backend.on_device(p, bad, device=0)
    assert backend.on_device(p, lambda plan: "ok", device=0) == "ok"


@pytest.mark.gpu
def test_cuda_kernels_compile_once_per_device():
    from workers.scan import gpu

    a = backend.cuda_kernels(gpu.SOURCE, ("rescore_f64", "pvalue_of"))
    assert backend.cuda_kernels(gpu.SOURCE, ("rescore_f64", "pvalue_of")) is a
    name = f"scan_mma<2,{gpu.PG}>"
    k = backend.cuda_kernels(gpu.SOURCE, (name,), instantiate=(name,))
    assert set(k) == {name} and k is backend.cuda_kernels(gpu.SOURCE, (name,), instantiate=(name,))


def test_numba_blas_probe_skipped_only_for_the_probe():
    """With the console script's finder, numba's first kernel load leaves scipy.linalg unimported (numba then
    computes np.correlate without BLAS, the same values), while scipy.linalg imported by anyone afterwards, and
    numba's np.dot compiled afterwards, still work; without the finder the probe imports it (the saving is real)."""
    import subprocess
    import sys

    code = """
import sys
if sys.argv[1] == "skip":
    from workers.backend import skip_numba_blas_probe
    skip_numba_blas_probe()
import numpy as np, numba
from workers.warmup import warm
warm("cpu")
print("linalg", "scipy.linalg" in sys.modules)
a, v = np.arange(7.0), np.array([0.5, -1.0, 2.0])
corr = numba.njit(lambda a, v: np.correlate(a, v))(a, v)
assert np.allclose(corr, np.correlate(a, v)), corr
dot = numba.njit(lambda a: np.dot(a, a))(a)
assert dot == 91.0 and "scipy.linalg" in sys.modules
import scipy.linalg
print("ok", scipy.linalg.cython_blas.__name__)
"""
    # both interpreters at once: each loads numba's kernels and compiles two functions (~8 s apiece on the VM)
    procs = {mode: subprocess.Popen([sys.executable, "-c", code, mode], stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True) for mode in ("skip", "keep")}
    out = {}
    for mode, p in procs.items():
        stdout, stderr = p.communicate(timeout=300)
        assert p.returncode == 0, stderr[-2000:]
        out[mode] = stdout.split()
    assert out["skip"] == ["linalg", "False", "ok", "scipy.linalg.cython_blas"]
    assert out["keep"] == ["linalg", "True", "ok", "scipy.linalg.cython_blas"]


def test_retained_memory_is_reused_without_page_faults():
    """With retain_freed_memory, a block's columns allocated again after being freed take no new page faults
    (glibc reuses the pages it kept); with glibc's defaults every round faults them in again."""
    import subprocess
    import sys

    code = """
import sys, resource
import numpy as np
from workers.backend import retain_freed_memory
on = retain_freed_memory(sys.argv[1] == "on")
faults = []
for _ in range(4):
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    cols = [np.ones(2_400_000, np.float64) for _ in range(4)]    # a 2.4 M-hit block's float64 columns
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0)
    del cols
print(on, *faults)
"""
    import platform

    from workers.backend import retain_freed_memory

    if platform.libc_ver()[0] != "glibc":     # musl's mallopt does nothing, macOS has none: it says it is not in effect
        assert retain_freed_memory(True) is False
        return
    out = {}
    for mode in ("on", "off"):
        r = subprocess.run([sys.executable, "-c", code, mode], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stderr[-2000:]
        out[mode] = r.stdout.split()
    assert out["on"][0] == "True"                 # glibc takes both settings
    first = int(out["off"][1])                 # faults of a first round (the kernel may map several pages a fault)
    assert all(int(f) < first // 20 for f in out["on"][2:])          # rounds after the first: pages reused
    assert out["off"][0] == "False" and all(int(f) > first // 2 for f in out["off"][2:])


def test_numba_never_wraps_the_standard_streams():
    """Importing the kernels turns numba's colorama highlighting off (it swapped sys.stderr from compiling threads)."""
    import os
    import subprocess
    import sys

    code = ("import os; os.environ.pop('NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING', None); import workers.scan; "
            "import numba.core.errors as e; print(type(e.termcolor()).__name__)")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "NOPColorScheme", out.stderr


def test_new_machine_warm_up_compiles_in_two_processes(tmp_path):
    """On an empty numba cache, warm() starts one helper process, which compiles the scan's and the later steps' kernels
    into the cache while warm() compiles the thresholds': this process then loads every one of them (no cache miss but
    the probe's).  On the filled cache a second warm() starts no helper and compiles nothing."""
    import json
    import os
    import subprocess
    import sys

    code = """
import json, subprocess, sys
from numba.core.dispatcher import Dispatcher
started = []
popen = subprocess.Popen
subprocess.Popen = lambda args, **kw: started.append(args[1:]) or popen(args, **kw)
from workers.warmup import warm
warm("cpu")
import workers.scan.cpu_numba, workers.scan.counts_numba, workers.scan.distinct_numba, workers.scan.table_numba
import workers.distribution.exact_numba
def misses(mod, skip=()):
    return {n: sum(d.stats.cache_misses.values()) for n, d in vars(mod).items() if isinstance(d, Dispatcher)
            and n not in skip and sum(d.stats.cache_misses.values()) + sum(d.stats.cache_hits.values())}
late = {}
for m in (workers.scan.cpu_numba, workers.scan.counts_numba, workers.scan.distinct_numba, workers.scan.table_numba):
    late.update(misses(m, skip=("merge_two",)))
print(json.dumps([started, sorted(late.items()), sum(misses(workers.distribution.exact_numba).values()) > 0]))
"""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}
    first = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    started, late, thresholds_compiled = json.loads(first.stdout)
    assert started == [["-m", "workers.warmup"]] and thresholds_compiled
    assert len(late) >= 8 and all(n == 0 for _, n in late), late     # scan, q-value, counts, table kernels: loaded
    again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert again.returncode == 0, again.stderr[-2000:]
    started, late, thresholds_compiled = json.loads(again.stdout)
    assert started == [] and not thresholds_compiled and all(n == 0 for _, n in late)
