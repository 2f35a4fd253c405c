"""Where a local cluster's start-up goes, from the command's start (issue 18: GPU start-up <= 2 s).

    python benchmarks/gpu_startup.py [--device gpu|cpu] [--processes]

Runs what ``motifgrid scan --device gpu`` runs before its first task — the workers' forkserver started first
(:func:`pipeline.engine.cluster.prestart_workers`), then :func:`pipeline.engine.cluster.get_client` — and prints one JSON line of
seconds from the script's start (its interpreter start excluded):
``prestart`` (the server asked for), ``client_imports`` (distributed and the cluster module here), ``server_ready``
(its imports and CPU kernels done: ``workers.preload.READY_AT``, seen from a worker), ``workers_created`` (first and
last worker process), ``workers_joined`` (the scheduler's add-worker events, first and last), ``get_client``
(it returned: every worker joined), ``warm`` (each worker's warm-up thread done, including its CUDA context and GPU
kernels: ``workers.warmup.done_at``), ``close``.  Environment settings (``DASK_MOTIFGRID__CLUSTER__...``) apply.
"""
from __future__ import annotations

import time

T0 = time.time()

import argparse  # noqa: E402
import json  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _worker_times(device: str) -> dict:
    """Runs on each worker: its process's and its server's creation, the server's readiness, its warm-up's end."""
    import os  # noqa: PLC0415

    import psutil  # noqa: PLC0415

    import workers.warmup as wu  # noqa: PLC0415

    for _ in range(600):                       # the warm-up thread: wait for it (up to 60 s)
        if device in wu.done_at:
            break
        time.sleep(0.1)
    me = psutil.Process(os.getpid())
    pre = sys.modules.get("workers.preload")
    return {"created": me.create_time(), "parent_created": me.parent().create_time(),
            "server_ready": getattr(pre, "READY_AT", None), "warm": wu.done_at.get(device)}


def _clock_offset() -> float:
    """psutil's process creation times minus ``time.time()`` (they count from the boot time, which Linux gives in
    whole seconds): measured on a child started now."""
    import subprocess  # noqa: PLC0415

    import psutil  # noqa: PLC0415

    before = time.time()
    child = subprocess.Popen(["sleep", "0.2"])
    after = time.time()
    created = psutil.Process(child.pid).create_time()
    child.wait()
    return created - (before + after) / 2


def one_run(device: str, processes: bool) -> dict:
    t = {}
    off = _clock_offset()
    from pipeline.engine.cluster import get_client, prestart_workers  # noqa: PLC0415

    prestart_workers(gpu=device == "gpu") if (device == "gpu" or processes) else None
    t["prestart"] = time.time()
    import distributed  # noqa: PLC0415, F401

    t["client_imports"] = time.time()
    with get_client(device=device, processes=processes, quiet=True, dashboard=False) as (client, dev):
        t["get_client"] = time.time()
        events = [ts for ts, msg in client.get_events("all")
                  if isinstance(msg, dict) and msg.get("action") == "add-worker"]
        per = list(client.run(_worker_times, dev).values()) if (dev == "gpu" or processes) else []
        t["warm_wait_end"] = time.time()
    t["close"] = time.time()
    out = {k: round(v - T0, 3) for k, v in t.items()}
    if events:
        out["workers_joined"] = [round(min(events) - T0, 3), round(max(events) - T0, 3)]
    if per:
        out["workers"] = len(per)
        out["server_created"] = round(min(p["parent_created"] for p in per) - off - T0, 3)
        ready = [p["server_ready"] for p in per if p["server_ready"]]
        out["server_ready"] = round(min(ready) - T0, 3) if ready else None
        out["workers_created"] = [round(min(p["created"] for p in per) - off - T0, 3),
                                  round(max(p["created"] for p in per) - off - T0, 3)]
        warm = [p["warm"] for p in per if p["warm"]]
        out["warm"] = [round(min(warm) - T0, 3), round(max(warm) - T0, 3)] if warm else None
    out["device"] = dev
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="gpu", choices=["gpu", "cpu"])
    ap.add_argument("--processes", action="store_true", help="CPU worker processes (forked) instead of threads")
    a = ap.parse_args()
    print(json.dumps(one_run(a.device, a.processes)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
