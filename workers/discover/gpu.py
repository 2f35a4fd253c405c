"""Motif discovery kernels on the GPU (CUDA source: ``workers/discover/discover.cu``).

Each kernel does a whole batch in one launch, so the device is never waiting on Python:

* ``gibbs_chains`` — every Gibbs chain is one warp that runs its whole chain (all sweeps, checkpoints,
  the incremental correcting-value score) inside the kernel; finished warps leave and the block scheduler
  fills the SM with the next chains.  One launch per batch instead of ~60 small array operations per step.
* ``shift_consensus`` — the consensus of each model's sites at phase shifts (:func:`workers.discover.refine.
  shifted_consensus` for many models at once).
* ``ld_proxy`` / ``ld_climb`` — the (l, d) proxy and the (l, d) local search (:mod:`workers.discover.refine`) for many
  consensus strings at once, on windows packed 2 bits a letter (mismatches by popcount).

The host code is written against an array module ``xp`` and a kernel launcher, so the same code runs on
CuPy with :class:`CupyKernels`, and in the tests on NumPy with the kernels compiled for the host
(``tests/sim``): the CUDA source itself is tested without a GPU.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from workers.backend import cuda_kernels, to_numpy
from workers.discover.windows import Windows

SOURCE = Path(__file__).parent / "discover.cu"
KERNELS = ("gibbs_chains", "ld_proxy", "ld_climb", "shift_consensus")
#: Widest motif the packed kernels take (2 bits a letter in 64 bits).
MAX_WIDTH = 32
#: Warps (chains, models, starts) per block.
WARPS = 4
SHIFTS = (-2, -1, 0, 1, 2)

class CupyKernels:
    """The kernels of ``discover.cu`` compiled by NVRTC for the current device, once per device
    (:func:`workers.backend.cuda_kernels`)."""

    def __init__(self):
        import cupy  # noqa: PLC0415

        self.xp = cupy
        self._kernels = cuda_kernels(SOURCE, KERNELS)

    def launch(self, name: str, grid: int, block: int, smem: int, *args) -> None:
        self._kernels[name]((int(grid),), (int(block),), args, shared_mem=int(smem))


def kernels_for(xp, kernels=None):
    """The kernel launcher for arrays of ``xp``.

    Parameters
    ----------
    xp : module
        numpy or cupy.
    kernels : object, optional
        A launcher with ``launch(name, grid, block, smem, *args)`` (the tests pass the host build, ``tests/sim``).

    Returns
    -------
    object
        ``kernels`` when given, else :class:`CupyKernels` (NumPy arrays without a launcher: ValueError).
    """
    if kernels is not None:
        return kernels
    if xp is np:
        raise ValueError("the discovery kernels need CuPy arrays (or a host kernel set in the tests)")
    return CupyKernels()


# ------------------------------------------------------------------------------------ packing
def pack_words(codes: np.ndarray) -> np.ndarray:
    """Words packed 2 bits a letter.

    Parameters
    ----------
    codes : array_like, shape (..., l), uint8
        Letter codes 0..3 (codes > 3 are packed as 0); ``l <= 32``.

    Returns
    -------
    ndarray, shape (...), uint64
        Letter ``j`` in bits ``2j, 2j+1``.
    """
    codes = np.asarray(codes)
    l = codes.shape[-1]
    if l > MAX_WIDTH:
        raise ValueError(f"packed words hold at most {MAX_WIDTH} letters, got {l}")
    c = np.where(codes < 4, codes, 0).astype(np.uint64)
    return (c << (2 * np.arange(l, dtype=np.uint64))).sum(axis=-1, dtype=np.uint64)


def unpack_words(words, l: int) -> np.ndarray:
    """Packed words back to letter codes.

    Parameters
    ----------
    words : array_like of uint64, any shape (flattened)
    l : int

    Returns
    -------
    ndarray, shape (n, l), uint8
    """
    w = np.asarray(words, np.uint64).reshape(-1, 1)
    return ((w >> (2 * np.arange(l, dtype=np.uint64))) & np.uint64(3)).astype(np.uint8)


@dataclass
class Packed:
    """Packed windows of one :class:`Windows` on its device."""
    wcode: object        # (T, P) uint64
    valid: object        # (T, P) uint8
    vtab: object         # (T, P) int32: the valid window indices of each sequence first
    nvalid: object       # (T,) int32
    T: int
    P: int
    Pf: int
    both: int
    l: int


def packed(win: Windows) -> Packed:
    """The packed windows of ``win`` on its device (built once, cached on the object).

    Parameters
    ----------
    win : Windows
        Of width ``l <= 32``.

    Returns
    -------
    Packed
        ``wcode (T, P)`` uint64 (0 for invalid windows), ``valid (T, P)`` uint8, ``vtab (T, P)`` int32 (each
        sequence's valid window indices first), ``nvalid (T,)`` int32, on ``win.xp``.
    """
    cached = win.__dict__.get("_packed")
    if cached is not None:
        return cached
    xp = win.xp
    T, P = win.T, win.P
    vt = np.zeros((T, P), np.int32)
    for i in range(T):
        v = np.flatnonzero(win.valid[i])
        vt[i, :v.size] = v
    pk = Packed(wcode=xp.asarray(np.where(win.valid, pack_words(win.codes), 0).astype(np.uint64)),
                valid=xp.asarray(win.valid.astype(np.uint8)), vtab=xp.asarray(vt),
                nvalid=xp.asarray(win.n_valid.astype(np.int32)), T=T, P=P, Pf=win.P_fwd,
                both=int(win.both_strands), l=win.l)
    win.__dict__["_packed"] = pk
    return pk


def _grid(n: int, per: int) -> int:
    return max(1, -(-int(n) // per))


# ------------------------------------------------------------------------------------ Gibbs
def chain_tables(T: int, bg: np.ndarray, pseudocount: float) -> tuple[np.ndarray, np.ndarray]:
    """The Gibbs kernel's tables, as the NumPy path computes them (so its float32 log-odds are bit-identical).

    Parameters
    ----------
    T : int
        Sequences.
    bg : ndarray, shape (4,), float64
    pseudocount : float

    Returns
    -------
    LW : ndarray, shape (4, T + 1), float32
        Log-odds of a letter seen ``c`` times among ``T - 1`` sites.
    F : ndarray, shape (4, T + 1), float64
        ``q log2(q/b)`` of a letter seen ``c`` times among ``T`` (the score's terms).
    """
    bg = np.asarray(bg, np.float64)
    c = np.arange(T + 1, dtype=np.float64)[None, :]
    b = bg[:, None]
    LW = (np.log((c + pseudocount * b) / (T - 1 + pseudocount)) - np.log(b)).astype(np.float32)
    q = (c + pseudocount * b) / (T + pseudocount)
    F = np.where(q > 0, q * np.log2(np.maximum(q, 1e-300) / b), 0.0)
    return np.ascontiguousarray(LW), np.ascontiguousarray(F)


def run_chains_device(win: Windows, bg: np.ndarray, n_chains: int, *, starts=None, first: int = 0, seed: int = 0,
                      update: str = "best", max_sweeps: int = 20, max_steps: int | None = None,
                      pseudocount: float = 1.0, patience: int = 3, kernels=None) -> dict:
    """Run Gibbs chains in one launch, one warp each (see :func:`workers.discover.gibbs.run_chains` for the
    algorithm).

    Parameters
    ----------
    win : Windows
        Of width ``l <= 32``.
    bg : ndarray, shape (4,), float64
    n_chains : int
        Chains (ignored when ``starts`` is given).
    starts : array_like, shape (C, T), int, optional
        Starting windows; without them they are drawn in the kernel from ``(seed, first + chain, sequence)``,
        uniformly among the valid windows, so a chain's start does not depend on how chains are batched.
    first : int
        Global index of the first chain.
    seed : int
    update : {"best", "sample"}
    max_sweeps : int
    max_steps : int, optional
    pseudocount : float
    patience : int
        As :func:`workers.discover.gibbs.run_chains`.
    kernels : object, optional
        Launcher (:func:`kernels_for`).

    Returns
    -------
    dict of str to device arrays
        ``pos (C, T)`` int32 (the reported alignment), ``counts (C, 4l)`` int32, ``score (C,)`` float64,
        ``steps (C,)`` int32.
    """
    xp = win.xp
    k = kernels_for(xp, kernels)
    pk = packed(win)
    T, l = pk.T, pk.l
    if l > MAX_WIDTH:
        raise ValueError(f"the GPU Gibbs kernel takes widths up to {MAX_WIDTH}, got {l}")
    C = int(n_chains if starts is None else starts.shape[0])
    sample = update == "sample"
    LW, F = chain_tables(T, bg, pseudocount)
    LW, F = xp.asarray(LW), xp.asarray(F)
    if starts is None:
        pos = xp.zeros((C, T), np.int32)
    else:
        pos = xp.asarray(np.asarray(starts), dtype=np.int32).copy()
    best = xp.zeros((C, T) if sample else (1,), np.int32)
    counts = xp.zeros((C, 4 * l), np.int32)
    score = xp.zeros(C, np.float64)
    steps = xp.zeros(C, np.int32)
    limit = T if not sample else patience * T
    k.launch("gibbs_chains", _grid(C, WARPS), 32 * WARPS, WARPS * 2 * 4 * l * 4,
             pk.wcode, pk.valid, pk.vtab, pk.nvalid, np.int32(T), np.int32(pk.P), np.int32(l), LW, F, pos, best,
             counts, score, steps, np.int32(C), np.int64(first), np.int32(starts is None),
             np.int32(max_sweeps * T if max_steps is None else max_steps), np.int32(2 * T), np.int32(max(1, T // 2)), np.int32(limit),
             np.int32(sample), np.uint64(seed & 0xFFFFFFFFFFFFFFFF))
    return {"pos": pos, "counts": counts, "score": score, "steps": steps}


def consensus_keys(xp, counts, l: int, bg: np.ndarray, pseudocount: float):
    """Packed consensus of each chain's profile (argmax with its pseudocount, the first letter on ties).

    Parameters
    ----------
    xp : module
    counts : array, shape (C, 4l), int
    l : int
    bg : ndarray, shape (4,), float64
    pseudocount : float

    Returns
    -------
    array, shape (C,), uint64 (on ``xp``)
    """
    prof = counts.reshape(-1, l, 4).astype(np.float64) + pseudocount * xp.asarray(np.asarray(bg, np.float64))
    arg = xp.argmax(prof, axis=2).astype(np.uint64)
    return (arg << xp.asarray((2 * np.arange(l)).astype(np.uint64))).sum(axis=1, dtype=np.uint64)


# ------------------------------------------------------------------------------------ (l, d)
def shift_consensus_device(win: Windows, pos, use=None, shifts=SHIFTS, kernels=None):
    """Packed consensus of each model's sites moved by each phase shift (:func:`workers.discover.refine.
    shifted_consensus` for many models at once).

    Parameters
    ----------
    win : Windows
    pos : array_like, shape (C, T), int
        Each model's window per sequence.
    use : array_like, shape (T,), bool, optional
        Sequences that count (default: those with a valid window).
    shifts : sequence of int
    kernels : object, optional

    Returns
    -------
    cons : array, shape (C, len(shifts)), uint64
    nsites : array, shape (C, len(shifts)), int32
        Sites left at each shift (0: no consensus there).  Both on the device.
    """
    xp = win.xp
    k = kernels_for(xp, kernels)
    pk = packed(win)
    pos = xp.ascontiguousarray(xp.asarray(pos, dtype=np.int32))
    C = int(pos.shape[0])
    use = xp.asarray((np.asarray(win.n_valid) > 0) if use is None else np.asarray(use), dtype=np.uint8)
    sh = xp.asarray(np.asarray(shifts, np.int32))
    out = xp.zeros((C, len(shifts)), np.uint64)
    ns = xp.zeros((C, len(shifts)), np.int32)
    if C:
        k.launch("shift_consensus", _grid(C, WARPS), 32 * WARPS, 0, pk.wcode, pk.valid, np.int32(pk.T),
                 np.int32(pk.P), np.int32(pk.Pf), np.int32(pk.both), np.int32(pk.l), pos, use, np.int32(C), sh,
                 np.int32(len(shifts)), out, ns)
    return out, ns


def ld_proxy_device(win: Windows, cons, dthr: int, kernels=None):
    """The (l, d) proxy of many consensus strings (popcount of the XOR of packed words).

    Parameters
    ----------
    win : Windows
    cons : array_like, shape (C,), uint64
        Packed consensus strings.
    dthr : int
        Mismatches allowed.
    kernels : object, optional

    Returns
    -------
    count : array, shape (C,), int32
        Sequences with a valid window within ``dthr``.
    total : array, shape (C,), int32
        Summed closest distance, capped at ``l``.  Both on the device.
    """
    xp = win.xp
    k = kernels_for(xp, kernels)
    pk = packed(win)
    cons = xp.ascontiguousarray(xp.asarray(cons, dtype=np.uint64))
    C = int(cons.size)
    cnt = xp.zeros(C, np.int32)
    tot = xp.zeros(C, np.int32)
    if C:
        k.launch("ld_proxy", _grid(C, 128), 128, 0, pk.wcode, pk.valid, np.int32(pk.T), np.int32(pk.P),
                 np.int32(pk.l), cons, np.int32(C), np.int32(dthr), cnt, tot)
    return cnt, tot


def ld_climb_device(win: Windows, cons, d: int, max_moves: int | None = None, kernels=None):
    """The (l, d) local search (:func:`workers.discover.refine.ld_local_search`) from every packed start at once.

    Parameters
    ----------
    win : Windows
    cons : array_like, shape (C,), uint64
        Packed starting strings.
    d : int
    max_moves : int, optional
        Default ``4 l``.
    kernels : object, optional

    Returns
    -------
    cons : array, shape (C,), uint64
        The optima reached.
    count, total, moves : array, shape (C,), int32
        Sequences within ``d``, summed capped distance, moves made.  All on the device.
    """
    xp = win.xp
    k = kernels_for(xp, kernels)
    pk = packed(win)
    cons = xp.array(xp.asarray(cons, dtype=np.uint64), copy=True)
    C = int(cons.size)
    cnt = xp.zeros(C, np.int32)
    tot = xp.zeros(C, np.int32)
    mv = xp.zeros(C, np.int32)
    if C:
        k.launch("ld_climb", _grid(C, WARPS), 32 * WARPS, 0, pk.wcode, pk.valid, np.int32(pk.T), np.int32(pk.P),
                 np.int32(pk.l), cons, np.int32(C), np.int32(d),
                 np.int32(4 * pk.l if max_moves is None else max_moves), cnt, tot, mv)
    return cons, cnt, tot, mv


@dataclass
class Climbed:
    """Distinct local optima of the (l, d) objective, best first (host arrays).

    cons : (R, l) uint8; count : (R,) sequences within d; total : (R,) summed capped distance;
    starts : distinct starting strings climbed.
    """
    cons: np.ndarray
    count: np.ndarray
    total: np.ndarray
    starts: int


def climb_from_sites(win: Windows, pos, d: int, keep: int, use=None, kernels=None) -> Climbed:
    """Climb from the shifted consensus of every model's sites and keep the best distinct optima.

    Parameters
    ----------
    win : Windows
    pos : array_like, shape (C, T), int
        Each model's window per sequence.
    d : int
    keep : int
    use : array_like, shape (T,), bool, optional
    kernels : object, optional

    Returns
    -------
    Climbed
        At most ``keep`` optima, ordered by count ↓, total ↑, then the packed string (deterministic).
    """
    xp = win.xp
    cons, ns = shift_consensus_device(win, pos, use=use, kernels=kernels)
    starts = xp.unique(cons[ns > 0])
    out, cnt, tot, _ = ld_climb_device(win, starts, d, kernels=kernels)
    return best_distinct(win.l, to_numpy(out), to_numpy(cnt), to_numpy(tot), keep, int(starts.size))


def best_distinct(l: int, cons: np.ndarray, cnt: np.ndarray, tot: np.ndarray, keep: int, n_starts: int) -> Climbed:
    """The best distinct optima of a climb.

    Parameters
    ----------
    l : int
    cons : ndarray, shape (C,), uint64
    cnt, tot : ndarray, shape (C,), int
    keep : int
    n_starts : int
        Distinct starting strings (reported).

    Returns
    -------
    Climbed
        Count ↓, total ↑, then the packed string.
    """
    cons, cnt, tot = np.asarray(cons, np.uint64), np.asarray(cnt, np.int64), np.asarray(tot, np.int64)
    u, first = np.unique(cons, return_index=True)
    cnt, tot = cnt[first], tot[first]
    order = np.lexsort((u, tot, -cnt))[:keep]
    return Climbed(cons=unpack_words(u[order], l), count=cnt[order], total=tot[order], starts=n_starts)


def best_windows_device(win: Windows, ppm: np.ndarray, bg: np.ndarray, memory_budget: int = 1 << 26):
    """The best window of every sequence under each model: one GEMM of the one-hot windows per chunk of
    models, then an argmax along the windows.

    Parameters
    ----------
    win : Windows
    ppm : ndarray, shape (K, l, 4), float
    bg : ndarray, shape (4,), float64
    memory_budget : int
        Score entries per chunk at most.

    Returns
    -------
    array, shape (K, T), int32
        On ``win.xp``'s device.
    """
    xp = win.xp
    T, P, l = win.T, win.P, win.l
    ppm = np.asarray(ppm, np.float64)
    K = ppm.shape[0]
    lo = np.log(np.maximum(ppm.reshape(K, 4 * l), 1e-12)) - np.tile(np.log(np.asarray(bg, np.float64)), l)
    X = win.onehot.reshape(T * P, 4 * l)
    out = xp.zeros((K, T), np.int32)
    per = max(1, memory_budget // max(1, T * P))
    all_valid = bool(win.valid.all())
    for a in range(0, K, per):
        S = (xp.asarray(lo[a:a + per].astype(np.float32)) @ X.T).reshape(-1, T, P)
        if not all_valid:
            S += win.bias[:, :, 0][None]
        out[a:a + per] = xp.argmax(S, axis=2).astype(np.int32)
    return out
