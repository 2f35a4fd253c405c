"""Numba kernels of :mod:`workers.distribution` (compiled lazily, cached on disk, no GIL).

The three inner loops of the exact score distributions: the lattice dynamic programme (``dp``), the exact
enumeration of distinct partial scores (``classes_step``) and the compression of the tail steps into
log-linear segments (``segments``).  Each does the same float64 operations in the same order as the
vectorised NumPy formulation it replaced (no fused multiply-add: numba does not contract without
``fastmath``), so thresholds and tables are bit-identical; running without the GIL lets the threads of
one Dask worker compute thresholds side by side.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def columns(allowed, prob, k):  # pragma: no cover - compiled
    """Per column, the distinct integer shifts (ascending) and their summed probabilities.

    Returns ``(ks, ps, n)``: ``ks[j, :n[j]]`` the shifts of column ``j`` and ``ps[j, :n[j]]`` their
    probabilities, added in letter order A C G T.
    """
    m = k.shape[0]
    ks = np.zeros((m, 4), dtype=np.int64)
    ps = np.zeros((m, 4), dtype=np.float64)
    n = np.zeros(m, dtype=np.int64)
    for j in range(m):
        c = 0
        for x in range(4):
            if not allowed[j, x]:
                continue
            kk = k[j, x]
            t = 0
            while t < c and ks[j, t] != kk:
                t += 1
            if t < c:
                ps[j, t] = ps[j, t] + prob[j, x]
            else:
                ks[j, c] = kk
                ps[j, c] = 0.0 + prob[j, x]
                c += 1
        # insertion sort by shift (at most 4 entries)
        for a in range(1, c):
            kv, pv = ks[j, a], ps[j, a]
            b = a - 1
            while b >= 0 and ks[j, b] > kv:
                ks[j, b + 1] = ks[j, b]
                ps[j, b + 1] = ps[j, b]
                b -= 1
            ks[j, b + 1] = kv
            ps[j, b + 1] = pv
        n[j] = c
    return ks, ps, n


@numba.njit(cache=True, nogil=True)
def dp(order, wlo, whi, ks, ps, nk, buf0, buf1):  # pragma: no cover - compiled
    """The pruned lattice DP: columns in ``order``, window ``[wlo[i], whi[i]]`` after step ``i``.

    ``buf0``/``buf1`` are scratch arrays at least as long as the widest window; the result is a view of
    one of them (``mass``, its lowest cell is ``wlo[-1]``).
    """
    arr = np.ones(1)
    lo = 0
    n_old = 1
    for i in range(order.size):
        j = order[i]
        nlo = wlo[i]
        size = whi[i] - nlo + 1
        new = buf0[:size] if i % 2 == 0 else buf1[:size]
        new[:] = 0.0
        for t in range(nk[j]):
            pp = ps[j, t]
            s = lo + ks[j, t] - nlo
            a0 = -s if s < 0 else 0
            if a0 >= n_old:
                continue
            dst = new[s + a0: s + n_old]
            src = arr[a0:n_old]
            for q in range(src.size):
                dst[q] += src[q] * pp
        arr = new
        lo = nlo
        n_old = size
    return arr


@numba.njit(cache=True, nogil=True)
def tail_sums(mass):  # pragma: no cover - compiled
    """``g[i] = mass[i] + mass[i+1] + ...`` summed from the top (as ``cumsum`` of the reversed array), ``g[n] = 0``."""
    n = mass.size
    g = np.empty(n + 1)
    g[n] = 0.0
    if n:
        g[n - 1] = mass[n - 1]
        for i in range(n - 2, -1, -1):
            g[i] = g[i + 1] + mass[i]
    return g


@numba.njit(cache=True, nogil=True)
def first_loose(upper, w, factor, skip):  # pragma: no cover - compiled
    """First ``i >= skip`` with ``upper[i] > upper[i + w] * factor`` (``upper`` past its end is 0);
    ``upper.size - 1`` when there is none."""
    n = upper.size
    for i in range(skip, n):
        lower = upper[i + w] if i + w < n else 0.0
        if upper[i] > lower * factor:
            return i
    return n - 1


@numba.njit(cache=True, nogil=True)
def classes_step(vals, pr, ks, ps, nk, bound, cap):  # pragma: no cover - compiled
    """One column of the exact enumeration: ``vals`` (ascending, distinct) × the column's shifts.

    Keeps the partial sums ``>= bound`` (they can still reach the lower bound), merges equal sums (their
    probabilities added in letter order) and returns ``(vals, pr, status)`` ascending; ``status`` is 1
    when more than ``cap`` distinct sums (or ``4 cap`` products) would be needed, 2 when none is left.
    """
    kmax = ks[nk - 1]
    # rows that can reach the bound with some letter: vals >= bound - kmax
    start = np.searchsorted(vals, bound - kmax)
    nv = vals.size - start
    if nv * nk > 4 * cap:
        return vals[:0], pr[:0], 1
    heads = np.empty(4, dtype=np.int64)
    total = 0
    for t in range(nk):
        a0 = start + np.searchsorted(vals[start:], bound - ks[t])
        heads[t] = a0
        total += vals.size - a0
    if total == 0:
        return vals[:0], pr[:0], 2
    out_v = np.empty(total, dtype=np.int64)
    out_p = np.empty(total, dtype=np.float64)
    c = 0
    n = vals.size
    while True:
        best = np.int64(0)
        found = False
        for t in range(nk):
            h = heads[t]
            if h < n:
                v = vals[h] + ks[t]
                if not found or v < best:
                    best = v
                    found = True
        if not found:
            break
        # letter (run) order, as a stable merge keeps them; summed as ``np.add.reduceat`` does:
        # the first term plus the (sequential) sum of the others
        first = 0.0
        rest = 0.0
        k = 0
        for t in range(nk):
            h = heads[t]
            if h < n and vals[h] + ks[t] == best:
                p = pr[h] * ps[t]
                if k == 0:
                    first = p
                else:
                    rest += p
                k += 1
                heads[t] = h + 1
        out_v[c] = best
        out_p[c] = first + rest if k > 1 else first
        c += 1
    if c > cap:
        return vals[:0], pr[:0], 1
    return out_v[:c], out_p[:c], 0


@numba.njit(cache=True, nogil=True)
def classes(order, rest, ks, ps, nk, lo_q, cap):  # pragma: no cover - compiled
    """The whole exact enumeration: ``classes_step`` over the columns in ``order``, the partial sums
    kept ``>= lo_q - rest[i]`` after step ``i``.  Returns ``(vals, pr, status)`` as the last step did
    (status 1: past ``cap``, 2: nothing left)."""
    vals = np.zeros(1, dtype=np.int64)
    pr = np.ones(1)
    for i in range(order.size):
        j = order[i]
        vals, pr, status = classes_step(vals, pr, ks[j], ps[j], nk[j], lo_q - rest[i], cap)
        if status != 0:
            return vals, pr, status
    return vals, pr, 0


@numba.njit(cache=True, nogil=True)
def _block_fit(x, y, xp, lk, n, st, h):  # pragma: no cover - compiled
    """Fit one log-linear upper envelope to steps ``st .. st+h-1`` (padded past ``n`` with the last
    step); returns ``(ok, a, b)``."""
    en = min(st + h - 1, n - 1)
    xs = x[st]
    ys = y[st]
    dx = x[en] - xs
    b = (y[en] - ys) / dx if dx > 0 else 0.0
    if b > 0.0:
        b = 0.0
    off = -np.inf
    for q in range(h):
        i = st + q
        if i < n:
            xr, yr = x[i], y[i]
        else:
            xr, yr = x[n - 1], y[n - 1]
        dev = xr - xs
        dev *= -b
        dev += yr
        dev -= ys
        if q == 0 or dev > off:
            off = dev
    ok = True
    for q in range(h):
        i = st + q
        if i >= n:
            continue                  # padding: log-kappa = inf, never fails
        xr, yr, xpr = x[i], y[i], xp[i]
        dev = xr - xs
        dev *= -b
        dev += yr
        dev -= ys
        w = xr - xpr
        w *= b
        w += dev
        w = off - w
        if not w <= lk[i]:
            ok = False
            break
    a = (ys + off) + b * (xp[st] - xs)
    return ok, a, b


@numba.njit(cache=True, nogil=True)
def segments(x, y, xp, lk, H):  # pragma: no cover - compiled
    """Blocks of ``H`` steps (then ``H/4``, ... down to 1 where a block fails) covered by one segment.

    ``xp[i]`` is the exclusive left edge of step ``i``, ``lk`` the allowed log excess.  Returns the
    start indices (ascending) and each segment's ``a`` (at its left edge) and slope ``b``.
    """
    n = x.size
    cap = n + 1
    out_s = np.empty(cap, dtype=np.int64)
    out_a = np.empty(cap, dtype=np.float64)
    out_b = np.empty(cap, dtype=np.float64)
    c = 0
    # depth-first over the block tree: ascending starts come out in order
    stack_s = np.empty(64, dtype=np.int64)
    stack_h = np.empty(64, dtype=np.int64)
    for st0 in range(0, n, H):
        sp = 0
        stack_s[0] = st0
        stack_h[0] = H
        sp = 1
        while sp:
            sp -= 1
            st = stack_s[sp]
            h = stack_h[sp]
            if h == 1:
                out_s[c] = st
                out_a[c] = y[st]
                out_b[c] = 0.0
                c += 1
                continue
            ok, a, b = _block_fit(x, y, xp, lk, n, st, h)
            if ok:
                out_s[c] = st
                out_a[c] = a
                out_b[c] = b
                c += 1
                continue
            nh = max(1, h // 4)
            # push the sub-blocks in reverse so that the lowest start is taken next
            for q in range(h - nh, -1, -nh):
                if st + q < n:
                    stack_s[sp] = st + q
                    stack_h[sp] = nh
                    sp += 1
    return out_s[:c], out_a[:c], out_b[:c]
