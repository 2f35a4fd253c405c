"""The CUDA discovery kernels (workers/discover/discover.cu) against the NumPy/numba references.

Each check runs twice: on the host build of the CUDA source (tests/sim: lanes as threads, no GPU needed,
skipped without a C++ compiler) and, where there is one, on the GPU through CuPy.  What must be equal is
tested as equal: the (l, d) proxy, the local search and the shifted consensus are integer computations
(identical); a Gibbs step takes the best window of the same float32 log-odds, so it equals the NumPy step
except where two windows tie in exact arithmetic (then the float32 summation order decides — a float64
recomputation shows the tie); chain scores equal a float64 recomputation of the reported alignment.
"""
from __future__ import annotations

import numpy as np
import pytest

from pipeline.io.genome import encode
from tests.planted import planted_instance
from tests.sim import compiler
from workers.discover import gpu as dg
from workers.discover.gibbs import profile_score, random_starts, run_chains
from workers.discover.refine import ld_local_search, ld_score, shifted_consensus
from workers.discover.windows import make_windows

TIE = 1e-5


@pytest.fixture(params=["host", pytest.param("gpu", marks=pytest.mark.gpu)])
def kset(request):
    """(array module, kernel launcher) of the kernels under test."""
    if request.param == "host":
        if compiler() is None:
            pytest.skip("no C++ compiler for the host build of the CUDA kernels")
        from tests.sim import SimKernels

        return np, SimKernels()
    import cupy

    return cupy, dg.CupyKernels()


def instance(l, d, t, n, seed, both, n_run=None):
    pi = planted_instance(l, d, t=t, n=n, seed=seed)
    codes = np.stack([encode(s) for s in pi.sequences])
    if n_run:
        codes[1, 5:5 + n_run] = 4                    # windows over an N are invalid
    return pi, codes


def windows_pair(codes, l, both, xp):
    return make_windows(codes, l, both), make_windows(codes, l, both, xp=xp)


def f64_scores(win, pos, i, bg, pc=1.0):
    """Float64 score of every window of sequence i under the chain's profile without its site in i."""
    cnt = sum(win.onehot[s, pos[s]].astype(np.float64) for s in range(win.T) if s != i)
    bg4 = np.tile(bg, win.l)
    w = np.log((cnt + pc * bg4) / (win.T - 1 + pc)) - np.log(bg4)
    return np.where(win.valid[i], win.onehot[i].astype(np.float64) @ w, -np.inf)


def host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


@pytest.mark.parametrize("both", [False, True])
def test_gibbs_step_equals_numpy_except_exact_ties(kset, both):
    xp, K = kset
    pi, codes = instance(8, 1, 6, 60, 4, both, n_run=4)
    wc, wd = windows_pair(codes, 8, both, xp)
    bg = np.array([0.3, 0.2, 0.2, 0.3])
    starts = random_starts(wc, 48, np.random.default_rng(0))
    for steps in (1, 4):                                  # from the same state: the same next windows
        a = run_chains(wc, starts, bg, max_steps=steps)
        b = run_chains(wd, starts, bg, max_steps=steps, kernels=K)
        prev = run_chains(wc, starts, bg, max_steps=steps - 1).positions if steps > 1 else starts
        i = (steps - 1) % wc.T
        for c in range(48):
            if (a.positions[c, :i] != b.positions[c, :i]).any():
                continue                                  # diverged at an earlier tie
            sc = f64_scores(wc, prev[c], i, bg)
            top = sc.max()
            assert sc[b.positions[c, i]] >= top - TIE     # the kernel takes a best window
            runner = np.max(np.where(np.abs(sc - top) > TIE, sc, -np.inf))
            if top - runner > TIE and (sc >= top - TIE).sum() == 1:
                assert b.positions[c, i] == a.positions[c, i]
    # whole runs: scores are exact, converged chains are fixed points, retirement at the same checkpoints
    a = run_chains(wc, starts, bg, max_sweeps=8)
    b = run_chains(wd, starts, bg, max_sweeps=8, kernels=K)
    cnt = np.stack([np.stack([(wc.codes[np.arange(wc.T), b.positions[c]] == x).sum(axis=0) for x in range(4)], 1)
                    for c in range(48)])
    valid_site = wc.valid[np.arange(wc.T)[None, :], b.positions].all()
    assert valid_site
    np.testing.assert_allclose(b.score, profile_score(cnt, wc.T, bg, 1.0), atol=1e-9)
    np.testing.assert_allclose(b.ppm, (cnt + bg) / (wc.T + 1.0), atol=1e-12)
    same = (a.positions == b.positions).all(axis=1)
    assert same.mean() >= 0.75                            # divergence only from exact ties (checked above)
    np.testing.assert_array_equal(a.steps[same], b.steps[same])
    T = wc.T
    checks = {2 * T + k * max(1, T // 2) for k in range(40)} | {8 * T}
    assert set(b.steps.tolist()) <= checks
    for c in np.flatnonzero(b.steps < 8 * T)[:12]:
        for i in range(T):
            sc = f64_scores(wc, b.positions[c], i, bg)
            assert sc[b.positions[c, i]] >= sc.max() - TIE


def test_gibbs_sample_and_kernel_starts(kset):
    xp, K = kset
    pi, codes = instance(8, 1, 6, 60, 5, True, n_run=6)
    wc, wd = windows_pair(codes, 8, True, xp)
    bg = np.full(4, 0.25)
    r = dg.run_chains_device(wd, bg, 40, update="sample", max_sweeps=6, seed=7, kernels=K)
    pos, counts, score = host(r["pos"]), host(r["counts"]), host(r["score"])
    assert wc.valid[np.arange(wc.T)[None, :], pos].all()
    cnt = np.stack([np.stack([(wc.codes[np.arange(wc.T), pos[c]] == x).sum(axis=0) for x in range(4)], 1)
                    for c in range(40)])
    np.testing.assert_array_equal(counts.reshape(40, 8, 4), cnt)
    np.testing.assert_allclose(score, profile_score(cnt, wc.T, bg, 1.0), atol=1e-9)   # the best alignment seen
    # starts drawn in the kernel: valid, uniform-ish, and the same however the chains are batched
    s_all = host(dg.run_chains_device(wd, bg, 64, max_steps=0, seed=3, kernels=K)["pos"])
    s_b = host(dg.run_chains_device(wd, bg, 32, first=32, max_steps=0, seed=3, kernels=K)["pos"])
    np.testing.assert_array_equal(s_all[32:], s_b)
    assert wc.valid[np.arange(wc.T)[None, :], s_all].all()
    assert len({tuple(x) for x in s_all}) == 64


def test_ld_proxy_climb_and_shifts_equal_reference(kset):
    xp, K = kset
    pi, codes = instance(9, 2, 7, 70, 8, True, n_run=5)
    codes[4, :] = 4                                       # a sequence without any valid window
    wc, wd = windows_pair(codes, 9, True, xp)
    rng = np.random.default_rng(2)
    cons = rng.integers(0, 4, (24, 9)).astype(np.uint8)
    cons[0] = [("ACGT".index(ch)) for ch in pi.motif]
    cnt, tot = dg.ld_proxy_device(wd, dg.pack_words(cons), 3, kernels=K)
    ref = np.array([ld_score(wc, c, 3) for c in cons])
    np.testing.assert_array_equal(host(cnt), ref[:, 0])
    np.testing.assert_array_equal(host(tot), ref[:, 1])
    out, c2, t2, _ = dg.ld_climb_device(wd, dg.pack_words(cons), 2, kernels=K)
    got = dg.unpack_words(host(out), 9)
    for k in range(24):
        rc, rcnt, rtot = ld_local_search(wc, cons[k], 2)
        np.testing.assert_array_equal(got[k], rc)
        assert (host(c2)[k], host(t2)[k]) == (rcnt, rtot)
    pos = random_starts(wc, 16, rng)
    use = wc.n_valid > 0
    use[2] = False
    sc, ns = dg.shift_consensus_device(wd, pos, use=use, kernels=K)
    sc, ns = host(sc), host(ns)
    for k in range(16):
        ref = shifted_consensus(wc, pos[k], use)
        mine = [dg.unpack_words(sc[k, s:s + 1], 9)[0] for s in range(5) if ns[k, s] > 0]
        assert len(ref) == len(mine)
        for x, y in zip(ref, mine):
            np.testing.assert_array_equal(x, y)


def test_pack_round_trip():
    rng = np.random.default_rng(0)
    w = rng.integers(0, 4, (50, 32)).astype(np.uint8)
    np.testing.assert_array_equal(dg.unpack_words(dg.pack_words(w), 32), w)
    a, b = dg.pack_words(w[:25]), dg.pack_words(w[25:])
    x = a ^ b
    mm = [bin(int(v)).count("1") for v in (x | (x >> np.uint64(1))) & np.uint64(0x5555555555555555)]
    assert mm == (w[:25] != w[25:]).sum(axis=1).tolist()
