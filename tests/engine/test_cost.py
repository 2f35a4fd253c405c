"""--device auto's cost model (pipeline.engine.cost), with a timing table given (no GPU needed)."""
from __future__ import annotations

import pytest

from pipeline.engine.cost import Rates, estimate

# a GPU host's table: 5 s to start the GPU side, the GPU 300x a core's scoring rate
RATES = Rates(start_cpu=0.5, start_gpu=5.0, cpu_rate=3e10, gpu_rate=1e13, host_per_hit=3.5e-7, hit_factor=1.2)
COLS, ROWS = 16_570, 1_758          # 879 JASPAR vertebrates, both strands


@pytest.mark.parametrize("positions,device", [(150_000, "cpu"), (20_000_000, "cpu"), (53_000_000, "cpu"),
                                              (500_000_000, "gpu"), (3_100_000_000, "gpu")])
def test_small_jobs_stay_on_the_cpu_large_ones_go_to_the_gpu(positions, device):
    c = estimate(positions, COLS, ROWS, 1e-4, cores=16, gpus=1, rates=RATES)
    assert c.device == device
    assert c.seconds_gpu > c.seconds_cpu if device == "cpu" else c.seconds_gpu < c.seconds_cpu
    assert "--device auto: " + device.upper() in c.line()


def test_crossover_is_where_the_gpu_start_up_is_earned_back():
    """Host work per hit is the same on both paths: the choice turns on start-up against scoring time alone."""
    gain_per_position = COLS / (RATES.cpu_rate * 16) - COLS / RATES.gpu_rate
    crossover = (RATES.start_gpu - RATES.start_cpu) / gain_per_position
    below = estimate(int(crossover * 0.95), COLS, ROWS, 1e-4, 16, 1, RATES)
    above = estimate(int(crossover * 1.05), COLS, ROWS, 1e-4, 16, 1, RATES)
    assert (below.device, above.device) == ("cpu", "gpu")
    assert estimate(int(crossover * 1.05), COLS, ROWS, 1e-2, 16, 1, RATES).device == "gpu"   # hits cancel out


def test_more_cores_or_fewer_gpus_move_the_choice():
    big = 300_000_000
    assert estimate(big, COLS, ROWS, 1e-4, cores=16, gpus=1, rates=RATES).device == "gpu"
    assert estimate(big, COLS, ROWS, 1e-4, cores=2048, gpus=1, rates=RATES).device == "cpu"
    assert estimate(big, COLS, ROWS, 1e-4, cores=16, gpus=0, rates=RATES).device == "cpu"


def test_configured_rates_are_read():
    import dask.config

    with dask.config.set({"motifgrid.cost.start-gpu": 1e9}):
        assert Rates.from_config().start_gpu == 1e9
        assert estimate(3_100_000_000, COLS, ROWS, 1e-4, 16, 1).device == "cpu"


def test_a_scan_on_this_process_pays_the_threads_start():
    """A GPU scan on the command's own threads (no worker processes) starts in ``start_gpu_threads``: a job the
    process cluster's start would keep on the CPU goes to the GPU once its scoring earns that back."""
    from dataclasses import replace

    r = replace(RATES, start_gpu_threads=0.6)
    n = 53_000_000                                  # the 26,454 promoters
    assert estimate(n, COLS, ROWS, 1e-4, 16, 1, r).device == "cpu"
    t = estimate(n, COLS, ROWS, 1e-4, 16, 1, r, threads=True)
    assert t.device == "gpu" and t.seconds_gpu == pytest.approx(0.6 + n * COLS / 1e13 + 1.2e-4 * n * ROWS * 3.5e-7 / 16)


def test_positions_are_guessed_before_planning(tmp_path, chrx_slice):
    """The size a command decides its cluster by before reading its inputs: a store's length, a FASTA's size (x 4
    gzipped), None for a URL or a missing path; no GPU here, so no scan runs on the GPU threads."""
    import gzip

    from pipeline.cli.local import estimated_positions, gpu_on_threads
    from pipeline.io.genome import ingest

    fa = tmp_path / "s.fa"
    fa.write_text(">a\n" + chrx_slice[:50_000] + "\n")
    gz = tmp_path / "s.fa.gz"
    gz.write_bytes(gzip.compress(fa.read_bytes()))
    store = ingest(fa, tmp_path / "s.zarr", block_size=16_384, halo=40)
    assert estimated_positions(store.path) == store.total_length == 50_000
    assert estimated_positions(str(fa)) == fa.stat().st_size
    assert estimated_positions(str(gz)) == 4 * gz.stat().st_size
    assert estimated_positions("s3://bucket/x.fa") is None and estimated_positions(str(tmp_path / "no.fa")) is None
    kw = dict(scheduler=None, n_workers=None, device="cpu", threads_per_worker=None, processes=False, security=None)
    assert not gpu_on_threads(kw, str(fa))


@pytest.mark.parametrize("mode,command,gpu_processes,n_workers,visible,expected", [
    ("auto", True, "auto", None, 1, True),       # scan, enrich on a one-GPU machine: this process
    ("auto", False, "auto", None, 1, False),     # variants and the rest: worker processes
    ("true", False, "auto", None, 1, True),
    ("false", True, "auto", None, 1, False),
    ("auto", True, 2, None, 1, False),           # worker processes asked for by number
    ("auto", True, "auto", None, 2, False),      # two GPUs: a worker process each
    ("auto", True, "auto", 1, 4, True),          # --workers 1 of four GPUs
])
def test_which_local_gpu_clusters_are_this_process(mode, command, gpu_processes, n_workers, visible, expected):
    """``motifgrid.cluster.gpu-in-process`` (true, false, auto = the command's wish) on one GPU, unless worker
    processes are asked for by number or several GPUs are used."""
    import dask.config

    from pipeline.engine.cluster import gpu_in_this_process

    with dask.config.set({"motifgrid.cluster.gpu-in-process": mode, "motifgrid.cluster.gpu-processes": gpu_processes}):
        assert gpu_in_this_process(n_workers, visible, command=command) is expected
