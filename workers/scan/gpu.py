"""GPU scan of one block (CuPy; CUDA source in ``workers/scan/scan_mma.cu``).

One launch per length tile of the plan runs the tensor-core kernel: scores of all windows against all
rows of the tile, thresholded in registers; only candidates (a few per thousand scores at most) are
written, compacted through an atomic counter.  A second kernel rescores the candidates in float64 in
column order, so hits are identical to the CPU path.  The full score matrix never exists in memory.

Per device, the plan's tables (fp16 fragments of every tile, float64 matrices, thresholds, p-value
tail tables) are uploaded once (:func:`workers.backend.on_device`) and kept while the plan lives, which
is the whole scan on a worker; they are read-only.  A worker runs several tasks at once (so that reading
and writing overlap the GPU): each thread has its own CUDA stream, candidate buffers and counter on each
device, so the blocks of different threads overlap on the GPU too (one block's copies with another's
kernels) and no lock is held around the device work.
"""
from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np

from workers.backend import cuda_kernels, on_device
from workers.distribution.pvalue_table import EXP_TABLE
from workers.scan.distinct import score_runs
from workers.scan.plan import BlockHits, ScanPlan, folded, stacked_weights

SOURCE = Path(__file__).parent / "scan_mma.cu"
PG = 2                       # 16-window groups per warp iteration (B fragments reused PG times)
THREADS = 128
MAX_NCH = 16                 # motifs up to 64 columns on the GPU path
SLACK = 1e-3                 # bits added to the fp16 rounding bound (fp32 accumulation error is < 1e-5)


def _cupy():
    import cupy  # noqa: PLC0415

    return cupy


def _scan_kernel(nch: int):
    """The tensor-core kernel for tiles of ``nch`` 4-column chunks (one template instantiation per width)."""
    name = f"scan_mma<{nch},{PG}>"
    return cuda_kernels(SOURCE, (name,), instantiate=(name,))[name]


def rescore_kernels() -> tuple:
    """The float64 rescoring and p-value kernels of the current device.

    Returns
    -------
    rescore_f64, pvalue_of : cupy.RawKernel
        Compiled from ``scan_mma.cu`` without any ``scan_mma`` instantiation.
    """
    k = cuda_kernels(SOURCE, ("rescore_f64", "pvalue_of"))
    return k["rescore_f64"], k["pvalue_of"]


def fragments(P16: np.ndarray, nch: int) -> np.ndarray:
    """B fragments in lane order.

    Parameters
    ----------
    P16 : ndarray, shape (4 * nch * 4, c) float16
        Rows ``4*j + x`` (motif column j, base x), columns = tile rows (zero-padded to a multiple of 8).
    nch : int
        4-column chunks of the tile.

    Returns
    -------
    ndarray, shape (nch, c // 8, 32, 4) float16
        ``[kk, nt, lane]`` holds b0..b3 of lane ``lane`` for chunk ``kk`` and row group ``nt``.
    """
    c = P16.shape[1]
    nt = c // 8
    out = np.zeros((nch, nt, 32, 4), dtype=np.float16)
    lane = np.arange(32)
    g, t = lane >> 2, lane & 3
    for kk in range(nch):
        for i, kofs in enumerate((0, 1, 8, 9)):
            k = 2 * t + kofs                       # k within the 16-wide chunk
            j = 4 * kk + k // 4                    # motif column
            x = k % 4                              # base
            for ntile in range(nt):
                out[kk, ntile, :, i] = P16[4 * j + x, ntile * 8 + g]
    return out


class _DeviceTables:
    """Everything of a plan that lives on one GPU."""

    def __init__(self, plan: ScanPlan):
        cp = _cupy()
        self.tiles = []
        for tile in plan.tiles:
            L = tile.length
            nch = -(-L // 4)
            if nch > MAX_NCH:
                raise ValueError(f"motifs longer than {4 * MAX_NCH} columns are not supported on the GPU path")
            c = len(tile.rows)
            cpad = -(-c // 8) * 8
            # exact folded values (w - alpha/m), in float64, and their fp16 rounding
            exact = folded(plan, tile.rows, nch * 4, cpad)
            P16 = exact.astype(np.float16)
            err = np.abs(P16.astype(np.float64) - exact).max(axis=1).sum(axis=0)        # (cpad,)
            thr = -(err + SLACK)
            frag = fragments(P16.reshape(nch * 16, cpad), nch)
            self.tiles.append(dict(
                nch=nch, ntiles=cpad // 8, ncols=c,
                bfrag=cp.asarray(frag.view(np.uint32).reshape(-1, 2)),
                cand_thr=cp.asarray(thr[:c].astype(np.float32)),
                rows=cp.asarray(tile.rows.astype(np.int32)),
            ))
        if plan.n_rows:
            weights, starts, _ = stacked_weights(plan)          # (sum m, 4) float64, row r from starts[r]
            flat, offs = weights.reshape(-1), 4 * starts
        else:
            flat, offs = np.zeros(1), np.zeros(0, dtype=np.int64)
        self.pwm = cp.asarray(flat.astype(np.float64))
        self.pwm_off = cp.asarray(offs)
        self.lengths = cp.asarray(plan.lengths.astype(np.int32))
        self.thresholds = cp.asarray(plan.thresholds.astype(np.float64))
        dev = cp.cuda.Device()
        self.grid = dev.attributes["MultiProcessorCount"] * 8
        pt = plan.pvalues
        self.pvalues = None if pt is None else tuple(cp.asarray(x) for x in (
            pt.x0, pt.a, pt.b, pt.bounds, pt.top, pt.top_zero, pt.alpha, pt.cap, EXP_TABLE))   # pvalue_of's, in order
        self.pair_families = None if pt is None or plan.pair_families is None else cp.asarray(
            np.asarray(plan.pair_families, np.int32))
        cp.cuda.Stream.null.synchronize()     # uploaded before any thread's stream reads them
        self._local = threading.local()

    def state(self) -> "_ThreadState":
        """This thread's stream and candidate buffers on this device."""
        st = getattr(self._local, "state", None)
        if st is None:
            st = self._local.state = _ThreadState()
        return st


class _ThreadState:
    """One thread's CUDA stream, candidate buffers and counter (on the current device)."""

    def __init__(self):
        cp = _cupy()
        self.stream = cp.cuda.Stream(non_blocking=True)
        with self.stream:
            self.counter = cp.zeros(1, dtype=np.uint32)
            self.grow(1 << 20)

    def grow(self, need: int) -> None:
        cp = _cupy()
        self.capacity = min(int(need * 1.25) + 1024, (1 << 32) - 1)      # the counter is 32-bit
        with self.stream:
            self.cand_pos = cp.empty(self.capacity, dtype=np.int32)
            self.cand_row = cp.empty(self.capacity, dtype=np.int32)


def device_tables(plan: ScanPlan) -> _DeviceTables:
    """The plan's tables on the current device.

    Parameters
    ----------
    plan : ScanPlan

    Returns
    -------
    _DeviceTables
        fp16 fragments and candidate bounds per tile, stacked float64 matrices, thresholds and p-value tail
        tables as CuPy arrays, and each thread's stream and buffers; uploaded by the first thread that asks
        (:func:`workers.backend.on_device`), then kept while the plan lives.
    """
    return on_device(plan, _DeviceTables)


def candidates(codes_d, n: int, plan: ScanPlan):
    """The tensor-core pass of every tile, on this thread's stream: the windows within the fp16 rounding bound
    of a row's threshold.

    Parameters
    ----------
    codes_d : cupy.ndarray, shape (>= n + plan.max_length - 1,), uint8
    n : int
        Window starts ``0 .. n - 1``.
    plan : ScanPlan

    Returns
    -------
    pos, row : cupy.ndarray, shape (k,), int32
        Candidate window starts and plan rows, unordered: views of this thread's buffers, valid until its next
        call.
    """
    T = device_tables(plan)
    S = T.state()
    L = np.int64(codes_d.size)
    with S.stream:
        while True:
            S.counter.fill(0)
            for tile in T.tiles:
                kern = _scan_kernel(tile["nch"])
                per_iter = 16 * PG
                need_warps = -(-n // per_iter)
                blocks = max(1, min(T.grid, -(-need_warps // (THREADS // 32))))
                kern((blocks,), (THREADS,), (codes_d, L, np.int64(n), tile["bfrag"], np.int32(tile["ntiles"]),
                                             tile["cand_thr"], tile["rows"], np.int32(tile["ncols"]), T.lengths,
                                             S.cand_pos, S.cand_row, S.counter, np.uint32(S.capacity)))
            count = int(S.counter.get()[0])
            if count <= S.capacity:
                return S.cand_pos[:count], S.cand_row[:count]
            S.grow(count)


def scan_gpu(codes: np.ndarray, n_positions: int, plan: ScanPlan) -> BlockHits:
    """The GPU scan of one block row: twin of :func:`workers.scan.cpu.scan_cpu`, the same hits.

    Parameters
    ----------
    codes : ndarray or cupy.ndarray, shape (>= n_positions + plan.max_length - 1,), uint8
    n_positions : int
    plan : ScanPlan
        Motifs up to 64 columns; with ``plan.pvalues`` each hit's p-value is computed on the device.

    Returns
    -------
    BlockHits
        Host arrays (page-locked buffers), sorted by (row, position); ``pvalue`` set when the plan has p-values.
    """
    n = int(n_positions)
    if n <= 0 or not plan.tiles:
        return BlockHits.empty()
    T = device_tables(plan)
    with T.state().stream:
        return _scan(codes, n, plan, T)


def _scan(codes, n: int, plan: ScanPlan, T: _DeviceTables) -> BlockHits:
    cp = _cupy()
    codes_d = cp.asarray(codes) if not isinstance(codes, cp.ndarray) else codes
    pos, row = candidates(codes_d, n, plan)
    if pos.size == 0:
        return BlockHits.empty()
    rescore, pvalue_of = rescore_kernels()
    score = cp.empty(pos.size, dtype=np.float64)
    hit = cp.empty(pos.size, dtype=np.uint8)
    rescore(((pos.size + 255) // 256,), (256,), (codes_d, np.int64(codes_d.size), pos, row, np.uint32(pos.size),
                                                 T.pwm, T.pwm_off, T.lengths, T.thresholds, score, hit))
    keep = cp.flatnonzero(hit)
    pos, row, score = pos[keep], row[keep], score[keep]
    # (row, position) order through one 64-bit radix argsort (pos, row >= 0; cupy.lexsort compares tuples)
    order = cp.argsort((row.astype(np.int64) << 32) | pos.astype(np.int64))
    pos, row, score = pos[order], row[order], score[order]
    pv = None
    if T.pvalues is not None and pos.size:
        pv = cp.empty(pos.size, dtype=np.float64)
        pvalue_of(((pos.size + 255) // 256,), (256,), (row, score, np.uint32(pos.size), *T.pvalues, pv))
    # to the host through page-locked buffers (CuPy's pinned pool): one async copy each on this thread's
    # stream, then one wait; pageable copies cost ten times more (docs/benchmarks.md, the GPU end-to-end
    # table, change 6).  The buffers go back to the pool when the arrays
    # (and the Arrow table built on them) are freed, so nothing is reused while a caller holds it.
    dev = [pos.astype(np.int64), row, score, pv]
    if plan.count_scores:                  # the q-values' pairs, counted here: a fifth of the hits to keep
        dev += list(score_runs(row, score, pv))
    out = [None if x is None else _to_host(x) for x in dev]
    kept = (T.pair_families[row], pv) if T.pair_families is not None and pv is not None else None
    cp.cuda.get_current_stream().synchronize()       # the device arrays stay referenced until here
    return BlockHits(out[0], out[1], out[2], out[3], tuple(out[4:]) if plan.count_scores else None, kept)


def _to_host(x):
    """Start an asynchronous copy of 1-D device array ``x`` (current stream) into a new pinned host array.

    The pinned buffer's size is rounded up to a power of two (at least 64 KiB): CuPy's pinned pool reuses only
    freed blocks of the same size, and the hit counts of blocks differ, so exact sizes would leave a new buffer in
    the pool for nearly every block; rounded, a thread finds the same few sizes block after block, and
    :func:`reserve_pinned` can make them before the first block needs them."""
    import cupyx  # noqa: PLC0415

    t0 = time.perf_counter()
    h = cupyx.empty_pinned(pinned_capacity(x.nbytes) // x.itemsize, dtype=x.dtype)[: x.size]
    _alloc.seconds = getattr(_alloc, "seconds", 0.0) + time.perf_counter() - t0
    _cupy().asnumpy(x, out=h, blocking=False)
    return h


def pinned_capacity(nbytes: int) -> int:
    """The bytes of the pinned buffer that holds ``nbytes``: the next power of two, at least 64 KiB."""
    return 1 << max(16, (max(int(nbytes), 1) - 1).bit_length())


#: per thread: seconds spent allocating pinned buffers (page-locking is slow: a scan task's step)
_alloc = threading.local()


def take_pinned_seconds() -> float:
    """Seconds this thread spent allocating pinned host buffers since the last call."""
    s = getattr(_alloc, "seconds", 0.0)
    _alloc.seconds = 0.0
    return s


#: most page-locked bytes :func:`pinned_sizes` asks a thread to make ahead (a genome at p = 1e-4: 144 MB)
PINNED_AHEAD_MAX = 256 << 20


def pinned_sizes(hits: int) -> list:
    """The pinned buffers (bytes) one thread's block of about ``hits`` hits copies them into (:func:`_scan`: positions,
    scores and p-values 8 bytes a hit, rows 4), for that count and for half of it: a block's count varies
    around what is expected, and each half-size step is another power of two of :func:`pinned_capacity`.  None
    (an empty list) past :data:`PINNED_AHEAD_MAX` a thread: a permissive p-value's blocks are not made ahead."""
    n = max(1, int(hits))
    sizes = [8 * n, 8 * n, 8 * n, 4 * n, 4 * n, 4 * n, 4 * n, 2 * n]
    return sizes if sum(pinned_capacity(b) for b in sizes) <= PINNED_AHEAD_MAX else []


def reserve_pinned(sizes: list, copies: int) -> float:
    """Put ``copies`` pinned buffers of each of ``sizes`` bytes (rounded as :func:`pinned_capacity`; a size given
    twice: two buffers a copy) into CuPy's pinned pool, allocated from ``copies`` threads at once and freed: a
    worker's threads then find them there.

    Page-locking host memory costs the driver ~0.1-0.3 ms a MB, and a fresh worker's first wave of blocks allocated
    every buffer its hits needed (tens of MB a thread at p = 1e-4) at the same moment; reserved while the
    thresholds are computed, before any block is scanned, that time is off the scan's path.  Returns seconds."""
    import cupyx  # noqa: PLC0415
    from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415

    t0 = time.perf_counter()
    caps = sorted((pinned_capacity(s) for s in sizes), reverse=True)       # each size once a copy, repeats kept

    def one(_):
        return [cupyx.empty_pinned(c, dtype=np.uint8) for c in caps]

    with ThreadPoolExecutor(max(1, copies)) as pool:
        held = list(pool.map(one, range(copies)))
    del held                                      # back to the pool, kept there for the blocks
    return time.perf_counter() - t0
