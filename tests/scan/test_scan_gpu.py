"""GPU scan worker against the CPU/float64 path: 1, 879 and 10,000 motifs on real sequence (marker: gpu)."""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.io.genome import encode
from tests.conftest import DATA, SHARED, NO_SHARED
from workers.scan import make_plan, scan_block

pytestmark = pytest.mark.gpu


def plan_for(pwms, pvalue=1e-4):
    from workers.distribution import pvalue_to_score

    rows, thr, mi, st = [], [], [], []
    for i, w in enumerate(pwms):
        t = pvalue_to_score(w, np.full(4, 0.25), pvalue)
        for s, ww in ((0, w), (1, w[::-1, ::-1].copy())):
            rows.append(ww)
            thr.append(t.threshold if t.reachable else np.inf)
            mi.append(i)
            st.append(s)
    return make_plan(rows, np.array(thr), np.array(mi), np.array(st))


def jaspar_pwms(path):
    from pipeline.motifs import pwm_from_motif, read_motifs

    return [pwm_from_motif(m, np.full(4, 0.25), 0.1) for m in read_motifs(path)]


def block_codes(seq_text, n, halo=64, n_runs=True):
    assert len(seq_text) >= n
    seq = list(seq_text[:n])
    if n_runs:
        for a in range(1000, n - 200, 37_000):
            seq[a:a + 150] = "N" * 150
    codes = np.full(n + halo, 4, np.uint8)
    codes[:n] = encode("".join(seq))
    return codes


def same(a, b):
    return (np.array_equal(a.pos, b.pos) and np.array_equal(a.row, b.row) and np.array_equal(a.score, b.score))


def compare(plan, codes, n, min_hits=1):
    g = scan_block(codes, n, plan, device="gpu")
    c = scan_block(codes, n, plan, device="cpu")
    assert len(c) >= min_hits
    assert same(g, c), f"gpu {len(g)} hits, cpu {len(c)}"
    return len(g)


def test_one_motif(chrx_slice):
    plan = plan_for(jaspar_pwms(DATA / "jaspar2024_subset.jaspar")[:1], pvalue=1e-3)
    compare(plan, block_codes(chrx_slice, 300_000), 300_000)


def test_subset_all_lengths_block_border(chrx_slice):
    """Lengths 5..33; windows that run into the halo and past n are handled like the CPU."""
    plan = plan_for(jaspar_pwms(DATA / "jaspar2024_subset.jaspar"), pvalue=1e-3)
    codes = block_codes(chrx_slice, 250_000)
    for n in (250_000, 249_999, 131_071, 17):
        compare(plan, codes, n, min_hits=1 if n > 1000 else 0)


@pytest.mark.skipif(SHARED is None, reason="JASPAR 2024 vertebrates: " + NO_SHARED)
def test_879_jaspar_vertebrates(chrx_2mb):
    plan = plan_for(jaspar_pwms(SHARED / "motifs" / "JASPAR2024_CORE_vertebrates_non-redundant.jaspar"))
    assert plan.n_rows > 1500 and len(plan.tiles) > 4
    print("879 motifs:", compare(plan, block_codes(chrx_2mb, 1_000_000), 1_000_000), "hits")


def test_10000_motifs(chrx_slice):
    """10,000 matrices (real JASPAR columns resampled into motifs of 4..35 columns), more than one tile per length."""
    base = jaspar_pwms(DATA / "jaspar2024_subset.jaspar")
    cols = np.vstack(base)
    rng = np.random.default_rng(11)
    pwms = [cols[rng.integers(0, len(cols), int(m))] for m in rng.integers(4, 36, 10_000)]
    rows, thr, mi, st = [], [], [], []
    for i, w in enumerate(pwms):                 # thresholds near the top: cheap and a few hits per motif
        hi, lo = w.max(1).sum(), w.min(1).sum()
        rows.append(w)
        thr.append(hi - 0.18 * (hi - lo))
        mi.append(i)
        st.append(0)
    plan = make_plan(rows, np.array(thr), np.array(mi), np.array(st))
    print("10,000 motifs:", compare(plan, block_codes(chrx_slice, 200_000), 200_000), "hits")


def test_gpu_cluster_dataset_equals_cpu(tmp_path, chrx_2mb):
    """A scan on a dask-cuda cluster (several tasks at once per GPU) writes exactly the CPU run's dataset."""
    import gzip

    import dask.config
    import pyarrow as pa
    from dask_cuda import LocalCUDACluster
    from distributed import Client, LocalCluster

    from pipeline.engine.cluster import get_client
    from pipeline.io.genome import ingest
    from pipeline.scan.graph import run_scan
    from pipeline.scan.read import read_hits

    fa = tmp_path / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        f.write(">a\n" + chrx_2mb[:1_500_000] + "\n>b\n" + chrx_2mb[1_500_000:] + "\n")
    store = ingest(fa, tmp_path / "g.zarr", block_size=100_000, halo=40)
    motifs = str(DATA / "jaspar2024_subset.jaspar")
    with LocalCUDACluster(n_workers=1, threads_per_worker=6) as cl, Client(cl) as c:
        run_scan(store.path, motifs, str(tmp_path / "gpu"), pvalue=1e-4, client=c, device="gpu", progress=False)
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False) as cl, Client(cl) as c:
        run_scan(store.path, motifs, str(tmp_path / "cpu"), pvalue=1e-4, client=c, device="cpu", progress=False)
    # two worker processes on one GPU (motifgrid.cluster.gpu-processes), each keeping its own hits' pairs
    with dask.config.set({"motifgrid.cluster.gpu-processes": 2}), \
            get_client(device="gpu", n_workers=1, threads_per_worker=3, quiet=True) as (c, dev):
        assert dev == "gpu" and sorted(map(str, c.nthreads().values())) == ["3", "3"]
        assert len(set(c.run(lambda: __import__("os").environ["CUDA_VISIBLE_DEVICES"].split(",")[0]).values())) == 1
        run_scan(store.path, motifs, str(tmp_path / "gpu2"), pvalue=1e-4, client=c, device="gpu", progress=False)

    def rows(path):
        t = read_hits(str(path))
        t = pa.table({k: (v.cast(pa.string()) if pa.types.is_dictionary(v.type) else v)
                      for k, v in zip(t.column_names, t.columns)})
        return t.sort_by([(k, "ascending") for k in ("chrom", "start", "motif_id", "strand")]).to_pylist()

    g, c = rows(tmp_path / "gpu"), rows(tmp_path / "cpu")
    assert len(c) > 1000 and g == c
    assert rows(tmp_path / "gpu2") == c
    import json

    steps = {d: json.loads((tmp_path / d / "_summary.json").read_text())["task_seconds_by_step"]
             for d in ("gpu", "cpu")}
    assert steps["gpu"]["pinned"] > 0 and steps["cpu"]["pinned"] == 0      # page-locking timed on the GPU path
    print("cluster GPU == CPU:", len(g), "hits")


def test_threads_scan_side_by_side_and_segments(chrx_2mb):
    """Eight threads scan different blocks at once (each on its own stream and buffers): every result equals
    the CPU's; with the p-value tables on the plan the device's segment search equals the host's."""
    from concurrent.futures import ThreadPoolExecutor

    from workers.distribution import pvalue_to_score
    from workers.distribution.pvalue_table import PvalueTable

    pwms = jaspar_pwms(DATA / "jaspar2024_subset.jaspar")
    rows, tabs, mi, st = [], [], [], []
    for i, w in enumerate(pwms):
        t = pvalue_to_score(w, np.full(4, 0.25), 1e-4)
        for s, ww in ((0, w), (1, w[::-1, ::-1].copy())):
            rows.append(ww)
            tabs.append(t)
            mi.append(i)
            st.append(s)
    thr = np.array([t.threshold if t.reachable else np.inf for t in tabs])
    plan = make_plan(rows, thr, np.array(mi), np.array(st))
    plan.pvalues = PvalueTable.from_thresholds([t for t in tabs if t.reachable])
    n = 120_000
    blocks = [block_codes(chrx_2mb[k * n:(k + 1) * n + 64], n) for k in range(16)]
    want = [scan_block(b, n, plan, device="cpu") for b in blocks]
    with ThreadPoolExecutor(8) as ex:
        for _ in range(3):
            got = list(ex.map(lambda b: scan_block(b, n, plan, device="gpu"), blocks))
            assert all(same(g, w) for g, w in zip(got, want))
    assert sum(len(w) for w in want) > 1000
    for g in got:           # the device's p-values (pvalue_of, its exp_det) are the host's lookup to the bit
        assert g.pvalue is not None
        assert np.array_equal(g.pvalue, plan.pvalues.lookup(g.row, g.score), equal_nan=True)


def test_n_windows_are_never_candidates(chrx_slice):
    """A block that is mostly N (the padding after a long record, an N run of the assembly): its windows holding
    an N are not candidates of the tensor-core pass (an all-zero one-hot once passed every row's test: a 3.1 Gb
    store gave 4.4e9 candidates for one block), and the hits equal the CPU's."""
    from workers.scan.gpu import candidates

    import cupy as cp

    plan = plan_for(jaspar_pwms(DATA / "jaspar2024_subset.jaspar"), pvalue=1e-3)
    n = 400_000
    codes = np.full(n + 64, 4, np.uint8)
    codes[:50_000] = encode(chrx_slice[:50_000])                  # a record's end, then padding
    codes[200_000:230_000] = encode(chrx_slice[60_000:90_000])    # a record between two N runs
    hits = compare(plan, codes, n)
    pos, _ = candidates(cp.asarray(codes), n, plan)
    assert pos.size < 20 * hits + 1000, f"{pos.size} candidates for {hits} hits"


@pytest.mark.parametrize("with_counts", [False, True])
def test_qvalue_pairs_on_gpu_equal_cpu(with_counts):
    """The q-values' distinct (family, p-value, count) pairs sorted by CuPy equal the numba kernel's, on families
    out of order, heavy ties and merged counts; and equal counting every pair in Python."""
    from collections import Counter

    from workers.scan.distinct import distinct_pairs

    rng = np.random.default_rng(11)
    fam = np.repeat(rng.permutation(300), rng.integers(0, 4000, 300))
    p = rng.choice(10 ** rng.uniform(-12, -4, 20_000), fam.size)
    count = rng.integers(1, 5, fam.size) if with_counts else None
    g = distinct_pairs(fam, p, count, device="gpu")
    c = distinct_pairs(fam, p, count, device="cpu")
    for a, b in zip(g, c):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    want = Counter()
    for f, q, n in zip(fam.tolist(), p.tolist(), (count if with_counts else np.ones(fam.size, int)).tolist()):
        want[(f, q)] += n
    keys = sorted(want)
    assert list(zip(g[0].tolist(), g[1].tolist())) == keys and g[2].tolist() == [want[k] for k in keys]
    if not with_counts:                     # several block files' columns at once (a collect task)
        from workers.scan.distinct import distinct_pairs_of

        cols = [(fam[a:b], p[a:b]) for a, b in ((0, 1000), (1000, 50_000), (50_000, fam.size))]
        for a, b in zip(distinct_pairs_of(cols, device="gpu"), distinct_pairs_of(iter(cols), device="cpu")):
            assert np.array_equal(a, b)
    print("q-value pairs GPU == CPU:", fam.size, "items,", g[0].size, "pairs")


def test_kept_pairs_on_the_device_equal_the_host():
    """A GPU worker's kept (family, p-value) pairs (host arrays uploaded together, and device arrays kept where the
    scan made them; one sort on the device) collect to the CPU worker's (numba)."""
    import cupy as cp

    from workers.scan import kept_pairs

    rng = np.random.default_rng(12)
    files = {f"b{i}": (rng.integers(0, 50, 30_000), rng.choice(10 ** rng.uniform(-9, -4, 3000), 30_000))
             for i in range(4)}
    for dev in ("gpu", "cpu"):
        for i, (rel, (f, p)) in enumerate(files.items()):
            if dev == "gpu" and i % 2:                      # as BlockHits.device_pairs: int32, float64 on the device
                f, p = cp.asarray(f.astype(np.int32)), cp.asarray(p)
            assert kept_pairs.keep(f"run-{dev}", rel, f, p, 10**9)
    g = kept_pairs.collect("run-gpu", sorted(files), "gpu")
    c = kept_pairs.collect("run-cpu", sorted(files), "cpu")
    for a, b in zip(g, c):
        assert a.dtype == b.dtype and np.array_equal(a, b)
    assert kept_pairs.held("run-gpu") == (0, False) and c[2].sum() == 120_000
    print("kept pairs on the device == host:", g[0].size, "pairs")


def test_gpu_sync_policy_reaches_the_context_and_scans_the_same(chrx_slice):
    """workers.backend.set_gpu_sync changes how this process's threads wait for the device (read back from the
    driver's primary context), before or after CuPy opened it; the hits are the CPU's under each policy."""
    import ctypes

    from workers.backend import GPU_SYNC, set_gpu_sync

    cuda = ctypes.CDLL("libcuda.so.1")

    def policy_bits():
        dev, flags, active = ctypes.c_int(), ctypes.c_uint(), ctypes.c_int()
        assert cuda.cuDeviceGet(ctypes.byref(dev), 0) == 0
        assert cuda.cuDevicePrimaryCtxGetState(dev, ctypes.byref(flags), ctypes.byref(active)) == 0
        return flags.value & 0x7, active.value

    plan = plan_for(jaspar_pwms(DATA / "jaspar2024_subset.jaspar"), pvalue=1e-3)
    codes = block_codes(chrx_slice, 200_000)
    try:
        for policy in ("blocking", "spin", "blocking"):
            assert set_gpu_sync(policy)
            bits, active = policy_bits()
            assert bits == GPU_SYNC[policy] and active        # the context was open already (earlier tests)
            compare(plan, codes, 200_000)
    finally:
        set_gpu_sync("auto")
    assert policy_bits()[0] == GPU_SYNC["auto"]


def test_reserved_pinned_buffers_are_those_the_blocks_take():
    """reserve_pinned leaves buffers of the power-of-two sizes in CuPy's pinned pool, and a block's hits of any count
    in the reserved range are copied into them (the pool's free blocks go down, nothing new is page-locked)."""
    import cupy as cp

    from workers.scan.gpu import _to_host, pinned_capacity, pinned_sizes, reserve_pinned, take_pinned_seconds

    pool = cp.get_default_pinned_memory_pool()
    pool.free_all_blocks()
    n = 1_000_000
    reserve_pinned(pinned_sizes(n), copies=2)
    assert pool.n_free_blocks() == 2 * len(pinned_sizes(n))
    for hits in (n, int(0.7 * n)):        # the expected count, and fewer
        free = pool.n_free_blocks()
        pos = cp.arange(hits, dtype=cp.int64) * 3
        row = cp.arange(hits, dtype=cp.int32) % 7
        take_pinned_seconds()
        h_pos, h_row = _to_host(pos), _to_host(row)
        cp.cuda.get_current_stream().synchronize()
        assert take_pinned_seconds() > 0
        assert pool.n_free_blocks() == free - 2, hits             # both from the pool
        assert h_pos.size == hits and (h_pos == np.arange(hits) * 3).all() and (h_row == np.arange(hits) % 7).all()
        assert h_pos.base.nbytes == pinned_capacity(8 * hits)
        del h_pos, h_row                                            # back to the pool for the next block


def test_a_small_gpu_command_runs_on_this_process_and_equals_cpu(tmp_path, chrx_2mb, capfd):
    """``motifgrid scan FASTA --device gpu`` of a small input runs on the command's own threads (no worker processes:
    their start, scatter and close were half of a 200 kb scan on one H200), its kept pairs giving the q-values; the
    hits, q-values and summaries are the CPU run's."""
    import json

    import pyarrow.parquet as pq

    from pipeline.cli.command import main
    from pipeline.scan.read import read_hits
    from tests.scan.test_scan_pipeline import table_rows

    fa = tmp_path / "s.fa"
    fa.write_text(">a\n" + chrx_2mb[:200_000] + "\n>b\n" + chrx_2mb[300_000:420_000] + "\n")
    motifs = str(DATA / "jaspar2024_subset.jaspar")
    for dev in ("gpu", "cpu"):
        assert main(["scan", str(fa), motifs, "--out", str(tmp_path / dev), "--device", dev, "--pvalue", "1e-3",
                     "--no-progress"]) == 0
        said = capfd.readouterr()
        assert ("the GPU from" if dev == "gpu" else "CPU thread(s), no cluster") in said.out + said.err
    s = {d: json.loads((tmp_path / d / "_summary.json").read_text()) for d in ("gpu", "cpu")}
    assert s["gpu"]["device"] == "gpu" and s["gpu"]["hits"] == s["cpu"]["hits"] > 1000
    q = s["gpu"]["qvalues"]
    assert q["kept_pairs"] and q["kept_pairs_fallback"] is None, q     # the pairs kept in this process
    g, c = (table_rows(read_hits(str(tmp_path / d))) for d in ("gpu", "cpu"))
    assert g == c
    q = {d: pq.read_table(tmp_path / d / "_qvalues.parquet").to_pylist() for d in ("gpu", "cpu")}
    assert q["gpu"] == q["cpu"] and len(q["cpu"]) > 100
    print("small GPU command on threads == CPU:", len(g), "hits;", s["gpu"]["qvalues"])


def test_one_gpu_local_cluster_is_this_process_and_equals_cpu(tmp_path, chrx_2mb):
    """On a one-GPU machine the local GPU cluster is this process's threads (``motifgrid.cluster.gpu-in-process``),
    with the scheduler's dashboard; its dataset and q-values are the CPU run's.  ``--processes`` keeps worker
    processes."""
    import gzip
    import os

    import dask.config
    import pyarrow.parquet as pq

    from pipeline.engine.cluster import get_client
    from pipeline.io.genome import ingest
    from pipeline.scan.graph import run_scan
    from pipeline.scan.read import read_hits
    from tests.scan.test_scan_pipeline import table_rows

    import cupy
    if cupy.cuda.runtime.getDeviceCount() != 1:
        pytest.skip("one visible GPU")
    fa = tmp_path / "g.fa.gz"
    with gzip.open(fa, "wt") as f:
        f.write(">a\n" + chrx_2mb[:700_000] + "\n")
    store = ingest(fa, tmp_path / "g.zarr", block_size=100_000, halo=40)
    motifs = str(DATA / "jaspar2024_subset.jaspar")
    with dask.config.set({"motifgrid.cluster.gpu-in-process": True}), \
            get_client(device="gpu", quiet=True) as (c, dev):
        assert dev == "gpu" and set(c.run(os.getpid).values()) == {os.getpid()}
        res = run_scan(store.path, motifs, str(tmp_path / "gpu"), pvalue=1e-4, client=c, device="gpu", progress=False)
        assert res.qvalues["kept_pairs"] and res.qvalues["kept_pairs_fallback"] is None
    with get_client(device="gpu", quiet=True, processes=True) as (c, dev):
        assert os.getpid() not in set(c.run(os.getpid).values())
    with get_client(device="cpu", quiet=True) as (c, dev):
        run_scan(store.path, motifs, str(tmp_path / "cpu"), pvalue=1e-4, client=c, device="cpu", progress=False)
    assert table_rows(read_hits(str(tmp_path / "gpu"))) == table_rows(read_hits(str(tmp_path / "cpu")))
    q = [pq.read_table(tmp_path / d / "_qvalues.parquet").to_pylist() for d in ("gpu", "cpu")]
    assert q[0] == q[1] and len(q[0]) > 10
