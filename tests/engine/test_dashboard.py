"""The live dashboard, for real: a scan (``motifgrid scan --scheduler``, a subprocess) runs on a local
cluster reachable over TCP while
- this test follows the progress the scan publishes on the scheduler, as a second client would;
- the Dask dashboard is loaded over HTTP (``/status``, ``/individual-progress``, ``/json/counts.json``,
  ``/info/main/workers.html``, ``/metrics``);
- ``notebooks/dashboard.ipynb`` runs headless (nbclient, the ``python3`` kernel) and draws it live;
then ``notebooks/explore_hits.ipynb`` plots the finished Parquet dataset — run from a ``notebooks/`` folder too, where
it finds ``motifgrid-demo/hits`` above it. Both notebooks run as well on a peak set (500 CTCF peaks, one contig
each), where the explorer draws the largest contigs only.
"""
from __future__ import annotations

import gzip
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter

import pytest

from pipeline.io.genome import ingest
from pipeline.scan.graph import run_scan
from pipeline.scan.read import read_hits
from tests.conftest import DATA, ROOT

MOTIFS = str(DATA / "jaspar2024_subset.jaspar")
nbclient = pytest.importorskip("nbclient", reason="the notebook tests need the notebooks extra (nbclient)")
nbformat = pytest.importorskip("nbformat")
pytest.importorskip("logomaker")
pytest.importorskip("matplotlib")


@pytest.fixture(scope="module")
def genome(tmp_path_factory, chrx_2mb):
    d = tmp_path_factory.mktemp("dash-genome")
    fa = d / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        for name, s in (("chrX_a", chrx_2mb[:1_400_000]), ("chrX_b", chrx_2mb[1_400_000:])):
            f.write(f">{name}\n" + "\n".join(s[i:i + 80] for i in range(0, len(s), 80)) + "\n")
    return ingest(fa, d / "g.zarr", block_size=16_384, halo=40)


@pytest.fixture(scope="module")
def cluster():
    """Scheduler and one worker (2 threads) in this process, reachable on loopback TCP with a dashboard."""
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp://", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0", silence_logs=logging.CRITICAL) as cl, Client(cl) as c:
        yield cl, c


def _execute(path, env: dict, timeout: float = 240, cwd=ROOT):
    """Run a notebook headless with the installed ``python3`` kernel in ``cwd``; return it with its outputs (the
    kernel is stopped once the last cell has run: a graceful shutdown waited ~2 s more per notebook)."""
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=timeout, shutdown_kernel="immediate",
                                     resources={"metadata": {"path": str(cwd)}})
    from tests.conftest import subprocess_env

    client.execute(env=subprocess_env(**env))
    return nb


def _texts(nb) -> str:
    out = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            out.append(o.get("text", ""))
            out.append(o.get("data", {}).get("text/plain", ""))
    return "\n".join(out)


def _images(nb) -> int:
    return sum("image/png" in o.get("data", {}) for c in nb.cells for o in c.get("outputs", []))


def _get(url: str):
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read().decode("utf-8", "replace")


@pytest.fixture(scope="module")
def live(genome, cluster, tmp_path_factory):
    """One real scan, watched three ways at once (this process, HTTP, the dashboard notebook)."""
    from pipeline.engine.progress import read_progress

    cl, client = cluster
    out = tmp_path_factory.mktemp("dash-run") / "hits"
    addr = cl.scheduler_address
    t0 = time.time()
    nb_result = {}

    def run_notebook():
        try:
            nb_result["nb"] = _execute(ROOT / "notebooks" / "dashboard.ipynb", {
                "MOTIFGRID_SCHEDULER": addr, "MOTIFGRID_AFTER": repr(t0), "MOTIFGRID_REFRESH": "0.2",
                "MOTIFGRID_WAIT": "120"})
        except Exception as e:          # reported by the test that needs the notebook
            nb_result["error"] = e

    clients0 = len(cl.scheduler.clients)
    th = threading.Thread(target=run_notebook, daemon=True)
    th.start()
    deadline = time.time() + 90      # the notebook's kernel connects to the scheduler: then start the scan
    while len(cl.scheduler.clients) <= clients0 and th.is_alive() and time.time() < deadline:
        time.sleep(0.05)
    from tests.conftest import subprocess_env

    env = subprocess_env(DASK_MOTIFGRID__SCAN__MIN_TASK_POSITIONS="1",
               DASK_MOTIFGRID__PROGRESS__INTERVAL="0.05")
    log = tempfile.TemporaryFile("w+")
    p = subprocess.Popen([sys.executable, "-m", "pipeline.cli", "scan", genome.path, MOTIFS, "--pvalue", "1e-3",
                          "--out", str(out), "--scheduler", addr, "--no-progress"], env=env, stdout=log,
                         stderr=subprocess.STDOUT, cwd=ROOT)
    port = client.scheduler_info()["services"]["dashboard"]
    base = f"http://127.0.0.1:{port}"
    states, http = [], {}
    while p.poll() is None or not states or states[-1]["state"] == "running":
        st = read_progress(client, check_client=False)
        if st is not None and st["started"] >= t0:
            states.append(st)
            if st["state"] == "running" and not http and st["blocks_done"] < st["blocks_total"]:
                for path in ("/metrics", "/json/counts.json", "/info/main/workers.html", "/status",
                             "/individual-progress"):
                    before = read_progress(client, check_client=False)
                    http[path] = (*_get(base + path), before["state"], before["blocks_done"])
        if p.poll() is not None and (st is None or st["state"] != "running"):
            break
        time.sleep(0.05)
    rc = p.wait(timeout=120)
    log.seek(0)
    th.join(timeout=180)
    return {"rc": rc, "log": log.read(), "states": states, "http": http, "out": out, "nb": nb_result, "t0": t0}


def test_progress_published_and_consistent(live):
    """The published state moves forward while the scan runs and ends equal to what the scan wrote."""
    import pyarrow.parquet as pq

    assert live["rc"] == 0, live["log"]
    states, out = live["states"], live["out"]
    running = [s for s in states if s["state"] == "running"]
    # at least two distinct points while running (a quiet machine scans the 123 blocks in a couple of seconds)
    assert len({s["blocks_done"] for s in running}) >= 2, [s["blocks_done"] for s in states]
    for a, b in zip(states, states[1:]):
        assert b["blocks_done"] >= a["blocks_done"] and b["hits"] >= a["hits"] and b["updated"] >= a["updated"]
    final = states[-1]
    summary = json.loads((out / "_summary.json").read_text())
    assert final["state"] == "finished" and final["scan_id"] == summary["scan_id"]
    assert final["out"] == str(out) and final["finished"] >= final["started"] >= live["t0"]
    assert final["blocks_done"] == final["blocks_total"] == summary["blocks"] == 123
    assert final["hits"] == summary["hits"] and final["positions_done"] == summary["positions"]
    assert final["scores_done"] == summary["scores"] and final["rate"]["scores_per_s"] > 0
    # hits per contig and along the genome, from the dataset itself
    t = read_hits(str(out), columns=["chrom", "start", "motif_id"])
    per_chrom = Counter(t.column("chrom").to_pylist())
    assert {c["name"]: c["hits"] for c in final["contigs"]} == dict(per_chrom)
    starts = t.column("start").to_pylist()
    for c in final["contigs"]:
        assert sum(c["track"]) == c["hits"] and c["blocks_done"] == c["blocks_total"]
        mine = [s for s, ch in zip(starts, t.column("chrom").to_pylist()) if ch == c["name"]]
        assert list(c["track"]) == [sum(1 for s in mine if i * final["track_bin"] <= s < (i + 1) * final["track_bin"])
                              for i in range(len(c["track"]))]
    # top motifs = the motif summary's largest counts, with their scanned probability matrices
    ms = pq.read_table(out / "_motif_summary.parquet").to_pylist()
    by_id = {m["motif_id"]: m for m in ms}
    assert [m["hits"] for m in final["top_motifs"]] == sorted((m["hits"] for m in ms), reverse=True)[:10]
    for m in final["top_motifs"]:
        assert (m["hits_plus"], m["hits_minus"]) == (by_id[m["id"]]["hits_plus"], by_id[m["id"]]["hits_minus"])
        assert all(abs(sum(row) - 1) < 1e-3 for row in m["ppm"])


def test_dask_dashboard_over_http_while_scanning(live):
    http = live["http"]
    assert set(http) == {"/metrics", "/json/counts.json", "/info/main/workers.html", "/status",
                         "/individual-progress"}, live["states"][-1]
    code, body, state, done = http["/metrics"]
    assert code == 200 and state == "running" and done < 123
    assert "dask_scheduler_workers" in body and 'task_prefix_name="scan"' in body     # our tasks, by prefix
    code, body, *_ = http["/json/counts.json"]
    assert code == 200 and json.loads(body)["workers"] == 1
    code, body, *_ = http["/info/main/workers.html"]
    assert code == 200 and "tcp://127.0.0.1:" in body
    for page in ("/status", "/individual-progress"):
        code, body, *_ = http[page]
        assert code == 200 and "bokeh" in body.lower()


def test_dashboard_notebook_live(live):
    if "error" in live["nb"]:
        raise live["nb"]["error"]
    nb = live["nb"]["nb"]
    text = _texts(nb)
    assert "finished: 123/123 blocks" in text, text
    assert "live updates while running:" in text, text
    assert _images(nb) >= 1
    final = live["states"][-1]
    assert f"{final['hits']:,} hits in {live['out']}" in text


def _concurrently(**runs) -> dict:
    """Notebooks run at the same time, each in its own kernel (a kernel's start and its plots use one core): their
    results (or the error each raised, raised again by the test that reads it)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(runs)) as ex:
        futures = {k: ex.submit(_execute, *args, **kw) for k, (args, kw) in runs.items()}
        return {k: f.exception() or f.result() for k, f in futures.items()}


def _notebook(results: dict, key: str):
    nb = results[key]
    if isinstance(nb, BaseException):
        raise nb
    return nb


@pytest.fixture(scope="module")
def explored(live, tmp_path_factory):
    """``explore_hits.ipynb`` on the live scan's dataset, twice at once: given by MOTIFGRID_HITS, and found from a
    ``notebooks/`` folder (a copy of the dataset at ``motifgrid-demo/hits`` above it)."""
    d = tmp_path_factory.mktemp("explore")
    shutil.copytree(live["out"], d / "motifgrid-demo" / "hits")
    (d / "notebooks").mkdir()
    nb = ROOT / "notebooks" / "explore_hits.ipynb"
    return d, _concurrently(given=((nb, {"MOTIFGRID_HITS": str(live["out"])}), {}),
                            found=((nb, {"MOTIFGRID_HITS": ""}), {"cwd": d / "notebooks"}))


def test_explore_notebook(live, explored):
    nb = _notebook(explored[1], "given")
    text = _texts(nb)
    summary = json.loads((live["out"] / "_summary.json").read_text())
    assert f"{summary['hits']:,} hits (summary: {summary['hits']:,})" in text
    assert "positions in " in text and _images(nb) >= 4
    last = nb.cells[-1]["outputs"][-1]["data"]
    assert "site (motif strand)" in last["text/plain"]


def test_explore_notebook_from_the_notebooks_folder(live, explored):
    """Jupyter starts a notebook's kernel in the notebook's folder: the default dataset (``motifgrid-demo/hits``,
    where ``motifgrid demo`` run in the repository root puts it) is looked for there and in the folders above."""
    d, results = explored
    nb = _notebook(results, "found")
    summary = json.loads((live["out"] / "_summary.json").read_text())
    assert f"{d / 'motifgrid-demo' / 'hits'}: {summary['hits']:,} hits" in _texts(nb)


def _png_height(nb, cell: int) -> int:
    """Height in pixels of the (last) image a cell drew (the PNG header's IHDR)."""
    import base64
    import struct

    png = [o["data"]["image/png"] for o in nb.cells[cell]["outputs"] if "image/png" in o.get("data", {})][-1]
    return struct.unpack(">II", base64.b64decode(png)[16:24])[1]


@pytest.fixture(scope="module")
def peaks(cluster, tmp_path_factory):
    """500 CTCF ChIP-seq peaks of 200 bp (tests/data/README.md), one contig each, ingested and scanned on the test
    scheduler (its progress published there)."""
    _, client = cluster
    d = tmp_path_factory.mktemp("peaks")
    store = ingest(DATA / "ctcf_gm12878_top500.fa.gz", d / "peaks.zarr")
    out = d / "hits"
    run_scan(store.path, MOTIFS, str(out), pvalue=1e-4, client=client, progress=False,
             command=f"motifgrid scan {store.path} {MOTIFS} --out {out}")
    return store, out


@pytest.fixture(scope="module")
def peaks_notebooks(peaks, cluster):
    """Both notebooks on the finished peak-set scan, at once: the explorer, and the dashboard of that scan (its
    progress published on the test scheduler)."""
    cl, _ = cluster
    _, out = peaks
    summary = json.loads((out / "_summary.json").read_text())
    return _concurrently(
        explore=((ROOT / "notebooks" / "explore_hits.ipynb", {"MOTIFGRID_HITS": str(out)}), {}),
        dashboard=((ROOT / "notebooks" / "dashboard.ipynb", {"MOTIFGRID_SCHEDULER": cl.scheduler_address,
                                                              "MOTIFGRID_SCAN_ID": summary["scan_id"],
                                                              "MOTIFGRID_WAIT": "30"}), {}))


def test_explore_notebook_peak_set(peaks, peaks_notebooks):
    """One panel per contig for the 8 largest contigs (a panel for each of 500 peaks took 12 minutes), then the
    hits per contig as a histogram."""
    store, out = peaks
    chroms = Counter(read_hits(str(out), columns=["chrom"]).column("chrom").to_pylist())
    assert len(store.records) == 500 and len(chroms) > 100
    nb = _notebook(peaks_notebooks, "explore")
    text = _texts(nb)
    assert f"{len(chroms):,} contigs with hits; hits along the 8 largest drawn" in text, text
    assert "(MAX_CONTIGS = 8), positions in bp" in text, text        # peaks of a few hundred bp: not on an Mb axis
    cell = next(i for i, c in enumerate(nb.cells) if "MAX_CONTIGS]" in c.source)
    assert _png_height(nb, cell) < 100 * 1.8 * 12      # 8 panels and the histogram (1.8 in each, 100 dpi), not 500
    assert "site (motif strand)" in nb.cells[-1]["outputs"][-1]["data"]["text/plain"]


def test_dashboard_notebook_peak_set(peaks, peaks_notebooks):
    """The dashboard of a finished scan of 500 contigs (200 listed one by one, the rest summed)."""
    _, out = peaks
    summary = json.loads((out / "_summary.json").read_text())
    nb = _notebook(peaks_notebooks, "dashboard")
    text = _texts(nb)
    assert f"finished: {summary['blocks']}/{summary['blocks']} blocks" in text, text
    assert f"{summary['hits']:,} hits in {out}" in text and _images(nb) >= 1


def test_dashboard_notebook_without_a_scheduler_says_so_in_one_line(tmp_path):
    """dashboard.ipynb where no scheduler answers: within seconds, one line saying so and how to start a scan that
    publishes its progress (it waited 30 s and showed a coloured traceback)."""
    import socket
    import time

    s = socket.socket()
    s.bind(("127.0.0.1", 0))                     # bound, not listening: refused
    address = f"tcp://127.0.0.1:{s.getsockname()[1]}"
    t0 = time.time()
    with pytest.raises(nbclient.exceptions.CellExecutionError):
        nb = nbformat.read(ROOT / "notebooks" / "dashboard.ipynb", as_version=4)
        client = nbclient.NotebookClient(nb, kernel_name="python3", timeout=120, shutdown_kernel="immediate",
                                         resources={"metadata": {"path": str(tmp_path)}})
        from tests.conftest import subprocess_env

        client.execute(env=subprocess_env(MOTIFGRID_SCHEDULER=address))
    s.close()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert len(errors) == 1 and errors[0]["ename"] == "NoScheduler", errors
    line, = errors[0]["traceback"]
    assert line.startswith(f"NoScheduler: no Dask scheduler answers at {address} (connection refused")
    assert "motifgrid scan ... --processes" in line and "\x1b[" not in line
    assert time.time() - t0 < 30
