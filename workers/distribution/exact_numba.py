"""Numba kernels of :mod:`workers.distribution` (compiled lazily, cached on disk, no GIL).

The inner loops of the exact score distributions: the lattice dynamic programme (``dp``), the exact
enumeration of distinct partial scores (``classes_step``), the compression of the tail steps into
log-linear segments (``segments``) and the meet in the middle's half words (``extend_half``).  Each does
the same float64 operations in the same order as the vectorised NumPy formulation it replaced (no fused
multiply-add: numba does not contract without ``fastmath``), so thresholds and tables are bit-identical;
running without the GIL lets the threads of one Dask worker compute thresholds side by side.
"""
from __future__ import annotations

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _pairwise_block(a, lo, n):  # pragma: no cover - compiled
    """NumPy's pairwise sum of ``a[lo:lo+n]`` for ``n <= 128``: sequential below 8, else 8 accumulators."""
    if n < 8:
        res = 0.0
        for i in range(n):
            res += a[lo + i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - (n % 8):
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@numba.njit(cache=True, nogil=True)
def pairwise_sum(a, lo, n):  # pragma: no cover - compiled
    """``a[lo:lo+n].sum()`` exactly as NumPy adds a contiguous float64 array: blocks of at most 128 summed by
    ``_pairwise_block``, halves (cut at a multiple of 8) added as NumPy's recursion adds them.  The recursion
    runs on an explicit stack: numba's on-disk cache of self-recursive functions can crash when loaded.

    Parameters
    ----------
    a : ndarray, shape (>= lo + n,), float64
    lo, n : int

    Returns
    -------
    float
        The sum, bit-identical to NumPy's.
    """
    if n <= 128:
        return _pairwise_block(a, lo, n)
    st_lo = np.empty(64, dtype=np.int64)
    st_n = np.empty(64, dtype=np.int64)
    st_stage = np.zeros(64, dtype=np.int64)
    vals = np.empty(64)
    nv = 0
    st_lo[0] = lo
    st_n[0] = n
    sp = 1
    while sp:
        t = sp - 1
        L = st_lo[t]
        N = st_n[t]
        if N <= 128:
            vals[nv] = _pairwise_block(a, L, N)
            nv += 1
            sp -= 1
            continue
        n2 = N // 2
        n2 -= n2 % 8
        if st_stage[t] == 0:            # left half first
            st_stage[t] = 1
            st_lo[sp] = L
            st_n[sp] = n2
            st_stage[sp] = 0
            sp += 1
        elif st_stage[t] == 1:          # then the right half
            st_stage[t] = 2
            st_lo[sp] = L + n2
            st_n[sp] = N - n2
            st_stage[sp] = 0
            sp += 1
        else:                           # both done: left + right
            vals[nv - 2] = vals[nv - 2] + vals[nv - 1]
            nv -= 1
            sp -= 1
    return vals[0]


@numba.njit(cache=True, nogil=True)
def prepare(w, bg):  # pragma: no cover - compiled
    """The per-matrix part of :func:`workers.distribution.lattice.prepare_matrix`.

    Column maxima and minima are exact; the scores add them in column order and ``abs_sum`` adds as NumPy's
    ``sum`` does, so the result equals the NumPy formulation bit for bit.

    Parameters
    ----------
    w : ndarray, shape (m, 4), float64
    bg : ndarray, shape (4,), float64
        Normalised and validated.

    Returns
    -------
    wz, prob : ndarray, shape (m, 4), float64
        Scores and probabilities, 0 where a letter cannot occur (``bg = 0`` or ``-inf``).
    allowed : ndarray, shape (m, 4), bool
    dead : bool
        A column allows no letter.
    max_score, min_score, abs_sum : float
    bad : bool
        ``w`` holds NaN or +inf.
    """
    m = w.shape[0]
    wz = np.zeros((m, 4))
    prob = np.zeros((m, 4))
    allowed = np.zeros((m, 4), dtype=np.bool_)
    cmax = np.empty(m)
    cmin = np.empty(m)
    amax = np.empty(m)
    dead = False
    bad = False
    for j in range(m):
        hi = -np.inf
        lo = np.inf
        ab = 0.0
        anyok = False
        for x in range(4):
            v = w[j, x]
            if np.isnan(v) or v == np.inf:
                bad = True
            ok = (v > -np.inf) and (v < np.inf) and bg[x] > 0
            allowed[j, x] = ok
            if ok:
                wz[j, x] = v
                prob[j, x] = bg[x]
                anyok = True
                if v > hi:
                    hi = v
                if v < lo:
                    lo = v
            a = abs(wz[j, x])
            if a > ab:
                ab = a
        cmax[j] = hi
        cmin[j] = lo
        amax[j] = ab
        if not anyok:
            dead = True
    if dead:
        return wz, prob, allowed, True, -np.inf, -np.inf, pairwise_sum(amax, 0, m), bad
    max_score = 0.0
    min_score = 0.0
    for j in range(m):
        max_score += cmax[j]
        min_score += cmin[j]
        amax[j] = max(abs(cmax[j]), abs(cmin[j]))
    return wz, prob, allowed, False, max_score, min_score, pairwise_sum(amax, 0, m), bad


@numba.njit(cache=True, nogil=True)
def lattice(pwm, allowed, eps, nearest):  # pragma: no cover - compiled
    """:func:`workers.distribution.lattice.integer_lattice` without the widening.

    Per column the integer shifts ``k = rint(pwm/eps - centre)``, the centre of the shortest arc covering
    the fractional parts of the allowed letters (``nearest``: plain rounding); ``d_lo``/``d_hi`` add the
    row minima/maxima of ``pwm - eps*k`` as NumPy's ``sum`` does.  Same operations, same order as the
    NumPy formulation (sort of at most 4 parts, first largest gap), so the same bits.

    Parameters
    ----------
    pwm : ndarray, shape (m, 4), float64
    allowed : ndarray, shape (m, 4), bool
    eps : float
    nearest : bool

    Returns
    -------
    k : ndarray, shape (m, 4), int64
        0 where a letter is not allowed.
    d_lo, d_hi : float
    kmin, kmax : ndarray, shape (m,), int64
    """
    m = pwm.shape[0]
    k = np.zeros((m, 4), dtype=np.int64)
    dmin = np.empty(m)
    dmax = np.empty(m)
    kmin = np.empty(m, dtype=np.int64)
    kmax = np.empty(m, dtype=np.int64)
    fs = np.empty(4)
    y = np.empty(4)
    for j in range(m):
        for x in range(4):
            y[x] = pwm[j, x] / eps
        center = 0.0
        if not nearest:
            n = 0
            for x in range(4):
                if allowed[j, x]:
                    f = y[x] - np.floor(y[x])
                    b = n                          # insertion sort, ascending
                    while b > 0 and fs[b - 1] > f:
                        fs[b] = fs[b - 1]
                        b -= 1
                    fs[b] = f
                    n += 1
            last = fs[max(n - 1, 0)]
            best = -np.inf
            gi = 0
            for i in range(3):                      # gaps between neighbours (-1 past the allowed ones)
                g = fs[i + 1] - fs[i] if i + 1 < n else -1.0
                if g > best:
                    best = g
                    gi = i
            wrap = fs[0] + 1.0 - last
            if wrap > best:
                best = wrap
                gi = 3
            arc = 1.0 - best
            start = fs[0] if gi == 3 else fs[gi + 1]
            center = start + 0.5 * arc
        lo_d = np.inf
        hi_d = -np.inf
        lo_k = np.iinfo(np.int64).max
        hi_k = np.iinfo(np.int64).min
        for x in range(4):
            if not allowed[j, x]:
                continue
            kk = np.int64(np.rint(y[x] if nearest else y[x] - center))
            k[j, x] = kk
            d = pwm[j, x] - eps * kk
            lo_d = min(lo_d, d)
            hi_d = max(hi_d, d)
            lo_k = min(lo_k, kk)
            hi_k = max(hi_k, kk)
        dmin[j] = lo_d
        dmax[j] = hi_d
        kmin[j] = lo_k
        kmax[j] = hi_k
    return k, pairwise_sum(dmin, 0, m), pairwise_sum(dmax, 0, m), kmin, kmax


@numba.njit(cache=True, nogil=True)
def columns(allowed, prob, k):  # pragma: no cover - compiled
    """Per column, the distinct integer shifts (ascending) and their summed probabilities.

    Parameters
    ----------
    allowed : ndarray, shape (m, 4), bool
    prob : ndarray, shape (m, 4), float64
    k : ndarray, shape (m, 4), int64

    Returns
    -------
    ks : ndarray, shape (m, 4), int64
        ``ks[j, :n[j]]``: the shifts of column ``j``.
    ps : ndarray, shape (m, 4), float64
        ``ps[j, :n[j]]``: their probabilities, added in letter order A C G T.
    n : ndarray, shape (m,), int64
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

    Parameters
    ----------
    order : ndarray, shape (m,), int64
    wlo, whi : ndarray, shape (m,), int64
        Cells kept after each step.
    ks, ps, nk : ndarray
        :func:`columns`.
    buf0, buf1 : ndarray, shape (>= widest window,), float64
        Scratch.

    Returns
    -------
    ndarray, shape (whi[-1] - wlo[-1] + 1,), float64
        ``P(K = wlo[-1] + i)``: a view of one of the scratch arrays.
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
    """Tail sums from the top (as ``cumsum`` of the reversed array).

    Parameters
    ----------
    mass : ndarray, shape (n,), float64

    Returns
    -------
    ndarray, shape (n + 1,), float64
        ``g[i] = mass[i] + mass[i+1] + ...``; ``g[n] = 0``.
    """
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
    """The first cell whose bracket is too wide.

    Parameters
    ----------
    upper : ndarray, shape (n,), float64
        Tail sums (0 past the end).
    w : int
        Bracket width in cells.
    factor : float
    skip : int

    Returns
    -------
    int
        The first ``i >= skip`` with ``upper[i] > upper[i + w] * factor``; ``n - 1`` when there is none.
    """
    n = upper.size
    for i in range(skip, n):
        lower = upper[i + w] if i + w < n else 0.0
        if upper[i] > lower * factor:
            return i
    return n - 1


@numba.njit(cache=True, nogil=True)
def classes_step(vals, pr, ks, ps, nk, bound, cap):  # pragma: no cover - compiled
    """One column of the exact enumeration: ``vals`` (ascending, distinct) × the column's shifts.

    Keeps the partial sums ``>= bound`` (they can still reach the lower bound) and merges equal sums (their
    probabilities added in letter order).

    Parameters
    ----------
    vals : ndarray, shape (v,), int64
    pr : ndarray, shape (v,), float64
    ks, ps : ndarray, shape (4,)
        The column's shifts and probabilities (:func:`columns`); ``nk`` of them.
    nk : int
    bound : int
    cap : int

    Returns
    -------
    vals : ndarray, int64
        Ascending, distinct.
    pr : ndarray, float64
    status : int
        0; 1 when more than ``cap`` distinct sums (or ``4 cap`` products) would be needed; 2 when none is left.
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
    """The whole exact enumeration: :func:`classes_step` over the columns in ``order``.

    Parameters
    ----------
    order : ndarray, shape (m,), int64
    rest : ndarray, shape (m,), int64
        Partial sums kept ``>= lo_q - rest[i]`` after step ``i``.
    ks, ps, nk : ndarray
        :func:`columns` of the integer grid.
    lo_q : int
    cap : int

    Returns
    -------
    vals, pr, status
        As the last step returned them (status 1: past ``cap``, 2: nothing left).
    """
    vals = np.zeros(1, dtype=np.int64)
    pr = np.ones(1)
    for i in range(order.size):
        j = order[i]
        vals, pr, status = classes_step(vals, pr, ks[j], ps[j], nk[j], lo_q - rest[i], cap)
        if status != 0:
            return vals, pr, status
    return vals, pr, 0


@numba.njit(cache=True, nogil=True)
def classes_setup(pwm, allowed, q):  # pragma: no cover - compiled
    """Integer grid of the exact enumeration.

    Parameters
    ----------
    pwm : ndarray, shape (m, 4), float64
    allowed : ndarray, shape (m, 4), bool
    q : float
        Grid step.

    Returns
    -------
    Q : ndarray, shape (m, 4), int64
        ``rint(pwm/q)``, 0 where disallowed.
    order : ndarray, shape (m,), int64
        Columns by decreasing range ``qmax - qmin`` (stable, as ``np.argsort(kind="stable")``).
    rest : ndarray, shape (m,), int64
        Sum of the maxima of the columns after step ``i``.
    """
    m = pwm.shape[0]
    Q = np.zeros((m, 4), dtype=np.int64)
    qmax = np.empty(m, dtype=np.int64)
    rng = np.empty(m, dtype=np.int64)
    for j in range(m):
        hi = np.iinfo(np.int64).min
        lo = np.iinfo(np.int64).max
        for x in range(4):
            if allowed[j, x]:
                v = np.int64(np.rint(pwm[j, x] / q))
                Q[j, x] = v
                hi = max(hi, v)
                lo = min(lo, v)
        qmax[j] = hi
        rng[j] = hi - lo
    order = np.empty(m, dtype=np.int64)
    for j in range(m):                       # stable insertion sort by decreasing range
        b = j
        while b > 0 and rng[order[b - 1]] < rng[j]:
            order[b] = order[b - 1]
            b -= 1
        order[b] = j
    rest = np.zeros(m, dtype=np.int64)
    for i in range(m - 2, -1, -1):
        rest[i] = rest[i + 1] + qmax[order[i + 1]]
    return Q, order, rest


@numba.njit(cache=True, nogil=True)
def classes_finish(vals, pr, tie_q, q):  # pragma: no cover - compiled
    """Tie classes of the enumerated scores: a class breaks where consecutive values differ by more than ``tie_q``.

    Parameters
    ----------
    vals : ndarray, shape (v,), int64
        Ascending.
    pr : ndarray, shape (v,), float64
    tie_q : float
        The tie width in grid units.
    q : float
        Grid step.

    Returns
    -------
    vmin, vmax, mass : ndarray, shape (c,), float64
        Each class's lowest and highest score and its probability (first + pairwise sum of the others, as
        ``np.add.reduceat``).
    rtail : ndarray, shape (c,), float64
        Tail mass summed from the top, top class first.
    """
    n = vals.size
    nc = 1
    for i in range(1, n):
        if vals[i] - vals[i - 1] > tie_q:
            nc += 1
    starts = np.empty(nc, dtype=np.int64)
    starts[0] = 0
    c = 1
    for i in range(1, n):
        if vals[i] - vals[i - 1] > tie_q:
            starts[c] = i
            c += 1
    vmin = np.empty(nc)
    vmax = np.empty(nc)
    mass = np.empty(nc)
    for k in range(nc):
        s = starts[k]
        e = starts[k + 1] if k + 1 < nc else n
        vmin[k] = vals[s] * q
        vmax[k] = vals[e - 1] * q
        mass[k] = pr[s] + pairwise_sum(pr, s + 1, e - s - 1)
    # the tail from the top, stored top first: the caller takes it reversed (``[::-1]``), the layout of the
    # NumPy formulation's ``cumsum(mass[::-1])[::-1]``, because NumPy's ``log`` rounds differently (by an ulp,
    # now and then) on strided and contiguous arrays and the tables are logs of these tails
    rtail = np.empty(nc)
    rtail[0] = mass[nc - 1]
    for k in range(1, nc):
        rtail[k] = rtail[k - 1] + mass[nc - 1 - k]
    return vmin, vmax, mass, rtail


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


@numba.njit(cache=True, nogil=True, error_model="numpy")
def lattice_steps(upper, w, ib, eps, c_start, d_hi, rel_tol, kscale):  # pragma: no cover - compiled
    """The tail table's steps from the lattice cells ``c_start .. c_start + ib - 1`` of one level.

    One pass instead of NumPy's temporaries (these levels hold up to ~10^6 cells for long matrices).

    Parameters
    ----------
    upper : ndarray, shape (n,), float64
        ``G(c)`` for ``c = c_start ..`` (0 past the top).
    w : int
        Bracket width in cells: ``G(c + w)`` is the lower bound of the step of cell ``c``.
    ib : int
        Cells used (``<= n - 1``).
    eps, c_start, d_hi : float, int, float
        The lattice: cell ``c`` ends at score ``eps * c + d_hi``.
    rel_tol : float
    kscale : float
        Factor on each step's allowed relative excess.

    Returns
    -------
    x, y, lk : ndarray, shape (ib,), float64
        Step breakpoints, ``log G(c)``, and the allowed log excess of each step (as :func:`segments` takes it).
    """
    n = upper.size
    x = np.empty(ib)
    y = np.empty(ib)
    lk = np.empty(ib)
    for i in range(ib):
        x[i] = eps * float(c_start + i) + d_hi
        u = upper[i]
        y[i] = np.log(u)
        lo = upper[i + w] if i + w < n else 0.0
        k = (1.0 + rel_tol) * lo / u - 1.0
        if k < 1e-7:
            k = 1e-7
        lk[i] = np.log1p(k * kscale) * 0.999
    return x, y, lk


@numba.njit(cache=True, nogil=True)
def segments(x, y, x_first, lk, H):  # pragma: no cover - compiled
    """Blocks of ``H`` steps (then ``H/4``, ... down to 1 where a block fails) covered by one segment.

    Parameters
    ----------
    x, y : ndarray, shape (n,), float64
        Step breakpoints and log p-value bounds.
    x_first : float
        Exclusive left edge of the first step (step ``i > 0`` starts at ``x[i-1]``).
    lk : ndarray, shape (n,), float64
        Allowed log excess per step.
    H : int

    Returns
    -------
    x0 : ndarray, shape (s,), float64
        Exclusive left edge of each segment, ascending.
    a, b : ndarray, shape (s,), float64
        Each segment's log bound at its left edge and its slope.
    """
    n = x.size
    xp = np.empty(n)
    if n:
        xp[0] = x_first
        for i in range(1, n):         # (a slice assignment compiles numba's shape-mismatch message: ~3.5 s)
            xp[i] = x[i - 1]
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
    return xp[out_s[:c]], out_a[:c], out_b[:c]


@numba.njit(cache=True, nogil=True)
def extend_half(s, q, w, pr, rest, bound):  # pragma: no cover - compiled
    """One column more for a half of :mod:`workers.distribution.band`: every word ``(s[i], q[i])`` followed by each
    letter ``(w[a], pr[a])``, kept where ``s[i] + w[a] + rest >= bound``, in the order (and with the float64
    operations) of NumPy's ``(s[:, None] + w).ravel()`` masked — one pass, no temporaries."""
    n, k = s.size, w.size
    out_s = np.empty(n * k)
    out_q = np.empty(n * k)
    c = 0
    for i in range(n):
        for a in range(k):
            v = s[i] + w[a]
            if v + rest >= bound:
                out_s[c] = v
                out_q[c] = q[i] * pr[a]
                c += 1
    return out_s[:c].copy(), out_q[:c].copy()
