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

    a = backend.cuda_kernels(gpu.SOURCE, ("rescore_f64", "segment_index"))
    assert backend.cuda_kernels(gpu.SOURCE, ("rescore_f64", "segment_index")) is a
    name = f"scan_mma<2,{gpu.PG}>"
    k = backend.cuda_kernels(gpu.SOURCE, (name,), instantiate=(name,))
    assert set(k) == {name} and k is backend.cuda_kernels(gpu.SOURCE, (name,), instantiate=(name,))
