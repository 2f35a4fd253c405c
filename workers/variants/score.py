"""The best window of motif rows on allele contexts, in two passes.

An allele's context is its sequence with ``flank`` bases of the genome on each side (N past a record's end); its edit
is ``[e0, e1)`` of the context (empty for the reference side of an insertion or the alternative side of a deletion).
A window of length ``m`` starting at ``s`` covers the edit when ``e0 - m < s < e1``: it overlaps the edited bases,
or, for an empty edit, holds both bases beside the junction.  Windows with an N are not scored (as in the scan).

``reaching``: which (allele, row) pairs have a covering window on either allele scoring at least the row's threshold;
a filter: every pair where one does is marked, a few within ``MARGIN`` below it may be too.  An SNV's two alleles are
tested in one pass over its ref context, a column holding the SNV counting the better of its two bases.  On the CPU
(MOODS's multi-matrix lookahead filtration, own implementation), each row has a block of ``q = min(m, Q)`` contiguous
columns (the most informative) whose q-grams are kept where their score plus the most the row's other columns can add
may reach the threshold, a necessary condition for any window of the row:

- most rows are *listed* (:func:`_listed`, alleles outside): under each q-gram the rows whose block it passes, with
  its score, so that each position near an edit visits only the few rows that may start a reaching window there; a
  row no longer than Q is then decided, a longer one's other columns added to the block's score one by one while the
  most the rest could add may still reach (MOODS's lookahead, float32; a margin keeps every window reaching in
  float64);
- rows whose block passes many q-grams (long, low-information ones) are *scanned* (:func:`_scanned`, rows outside):
  each covering window bounded by q-gram tables of blocks partitioning the row (quantized upper bounds), the first
  two without a branch, then the lookahead from the row's most informative columns.

The GPU keeps its kernels (``workers.variants.gpu``: every window's lookahead).  ``best_of``: the best covering window
of given (context, row) pairs, float64 sums in column order, the scan's rescoring, so a window scores the same here as
in a scan; the leftmost on ties."""
from __future__ import annotations

import numba
import numpy as np

from workers.backend import resolve_device

MARGIN = 1e-3           # the filter sums float32 in another order than the exact float64 sums: it keeps what is this
                        # close (a sum of <= 64 columns of |score| < 100 errs by < 4e-4 in float32)
Q = 7                   # the CPU filter's blocks: at most Q contiguous columns, 4^Q q-grams (a uint16 code)
TWO_BLOCKS = 2 * Q      # listed rows this long also test a second, disjoint block (a bitmap of 4^Q bits, 2 KB)
GROUPS = (8, 10, 12, 14, 17, 21)    # listed rows by length: m <= 8, 9-10, ..., 22 and longer (where blocks start)
DENSE = 0.05            # rows whose block passes this share of the q-grams (and longer than Q) are scanned


#: codes of the filter's contexts: 0-3 A C G T, 4 N (scores -1e30: the window fails), 5-10 an SNV's two bases (the
#: better of the two counts: AC AG AT CG CT GT), so that one pass over the ref context tests both alleles
PAIRS = ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3))
U64 = numba.uint64      # kernels index with unsigned integers where they can: no test for a negative index
PAIR_CODE = np.full((4, 4), -1, np.int64)
for _k, (_x, _y) in enumerate(PAIRS):
    PAIR_CODE[_x, _y] = PAIR_CODE[_y, _x] = 5 + _k


@numba.njit(cache=True, nogil=True)
def _qgrams(codes, gram, run):  # pragma: no cover - compiled
    # at each position: the Q-gram starting there (its first base in the high bits; bases past the end and N count
    # as A) and how many of its bases from the first are A C G T (at most Q)
    code = 0
    n_ok = 0
    for p in range(codes.size - 1, -1, -1):
        c = np.int64(codes[p])
        if c > 3:
            n_ok = 0
            c = 0
        else:
            n_ok = min(n_ok + 1, Q)
        code = (code >> 2) | (c << (2 * Q - 2))
        gram[p] = code
        run[p] = n_ok


@numba.njit(cache=True, nogil=True)
def _lookahead(codes, w, sorted32, order, rest, m, need):  # pragma: no cover - compiled
    # the window at ``w`` (unsigned) of a row longer than 6 (its ``sorted32``, ``order``, ``rest``): its six most
    # informative columns added without a branch (N and pair codes are columns of the matrix), then column by column
    # while the most the rest can add may reach ``need``
    acc = sorted32[0, codes[w + U64(order[0])]]
    acc += sorted32[1, codes[w + U64(order[1])]]
    acc += sorted32[2, codes[w + U64(order[2])]]
    acc += sorted32[3, codes[w + U64(order[3])]]
    acc += sorted32[4, codes[w + U64(order[4])]]
    acc += sorted32[5, codes[w + U64(order[5])]]
    if acc + rest[5] < need:
        return False
    for jj in range(6, m):
        acc += sorted32[jj, codes[w + U64(order[jj])]]
        if acc + rest[jj] < need:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _rest_of(codes, w, acc, sorted32, order, rest, m, need):  # pragma: no cover - compiled
    # the lookahead of a listed row's window at ``w`` from its first block's score ``acc`` (its first Q columns)
    for jj in range(Q, m):
        acc += sorted32[jj, codes[w + U64(order[jj])]]
        if acc + rest[jj] < need:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _bit(bits, k, g):  # pragma: no cover - compiled
    return (bits[k, g >> 3] >> (g & 7)) & 1


@numba.njit(cache=True, nogil=True)
def _visit(i, first, last, n_ok, p, lo, alt, e0, e1, size, codes, gram, lists, scores, sorted32, lengths, order, rest,
           need, block, sel, bits, out):  # pragma: no cover - compiled
    # the listed rows ``lists[first:last]`` of a q-gram at context position ``p``: each one's window whose first block
    # starts there, if it covers the edit and has no N in the block, then its second block's bit (either allele's, an
    # SNV), then the lookahead from the block's score (a row no longer than Q: the block is the window, its list
    # decided it)
    for k in range(first, last):
        r = lists[k]
        m = lengths[r]
        s = p - block[r, 0]
        if s < e0 - m + 1 or s < 0 or s > e1 - 1 or s > size - m or n_ok < min(m, Q) or out[i, r]:
            continue
        w = lo + s
        if sel[r] >= 0 and (_bit(bits, sel[r], gram[w + block[r, 1]])
                            | _bit(bits, sel[r], gram[w + alt + block[r, 1]])) == 0:
            continue
        if m <= Q or _rest_of(codes, U64(w), scores[k], sorted32[r], order[r], rest[r], m, need[r]):
            out[i, r] = True


@numba.njit(cache=True, nogil=True, parallel=True)
def _listed(codes, gram, run, starts, e0, e1, snv, sorted32, lengths, order, rest, need, block, sel, bits, span,
            lists, scores, out):  # pragma: no cover - compiled
    # the listed rows (MOODS's multi-matrix filtration), alleles outside: each position of a context near its edit
    # visits the rows whose first block passes the q-gram there (an SNV's positions whose q-gram holds it: the alt
    # q-gram's rows too), from the first group whose rows' first blocks may start there (``span[k]``: edit-relative;
    # q-gram g's rows of groups k.. are ``lists[lists[g * G + k]:lists[g * G + G]]``)
    n = snv.size
    G = span.shape[0]
    before, after = span[:, 0].min(), span[:, 1].max()
    for i in numba.prange(n):
        for side in range(2):
            if side == 1 and snv[i]:
                break                       # an SNV: both alleles were tested in the ref context's pass
            a = i + side * n
            lo = starts[a]
            size = starts[a + 1] - lo
            alt = starts[a + n] - lo if side == 0 and snv[i] else 0     # the alt context's offset (SNV)
            for p in range(max(e0[a] + before, 0), min(e1[a] - 1 + after, size - 1) + 1):
                k = 0
                while k < G and not e0[a] + span[k, 0] <= p <= e1[a] - 1 + span[k, 1]:
                    k += 1
                if k == G:
                    continue
                g = np.int64(gram[lo + p]) * G
                _visit(i, lists[g + k], lists[g + G], run[lo + p], p, lo, alt, e0[a], e1[a], size, codes, gram, lists,
                       scores, sorted32, lengths, order, rest, need, block, sel, bits, out)
                if alt and e0[a] - Q < p <= e0[a]:
                    g = np.int64(gram[lo + alt + p]) * G
                    _visit(i, lists[g + k], lists[g + G], run[lo + alt + p], p, lo, alt, e0[a], e1[a], size, codes,
                           gram, lists, scores, sorted32, lengths, order, rest, need, block, sel, bits, out)


@numba.njit(cache=True, nogil=True)
def _later(gram, w, alt, st, tables, acc):  # pragma: no cover - compiled
    # the stages after the first two of a scanned row's window at ``w``: whether its bound still reaches the level
    for j in range(10, 6 + 4 * st[0], 4):
        b, sh, t = U64(st[j]), U64(st[j + 1]), U64(st[j + 2])
        acc += np.int64(max(tables[t + (gram[w + b] >> sh)], tables[t + (gram[w + alt + b] >> sh)]))
        if acc < st[j + 3]:
            return False
    return True


@numba.njit(cache=True, nogil=True, parallel=True)
def _scanned(codes, gram, passes, sorted32, lengths, order, rest, need, scan, stages, tables,
             out):  # pragma: no cover - compiled
    # the scanned rows, rows outside: a row's tables and matrix stay in cache while every allele's context passes.  A
    # window's score is bounded by stages, each a q-gram table of one block of the row (quantized upper bounds, the
    # better of an SNV's two alleles), dropped once the bound cannot reach the row's level; then the lookahead.
    # ``stages[k]``: ``(count, level, then per stage: start, shift, table's offset, cut)``; ``out[k, i]``: row
    # ``scan[k]``, allele ``i``
    for k in numba.prange(scan.size):
        r = scan[k]
        m = lengths[r]
        st = stages[k]
        b0, b1, sh1, cut1 = U64(st[2]), U64(st[6]), U64(st[7]), st[9]
        t0, t1 = tables[st[4]:], tables[st[8]:]
        for c in range(passes.shape[0]):
            i, lo, alt = passes[c, 0], passes[c, 1], U64(passes[c, 2])
            e0, e1, size = passes[c, 3], passes[c, 4], passes[c, 5]
            if out[k, i]:
                continue                            # the allele's ref context reached
            for s in range(max(e0 - m + 1, 0), min(e1 - 1, size - m) + 1):
                w = U64(lo + s)                     # unsigned indices: no wraparound test
                acc = (np.int64(max(t0[gram[w + b0]], t0[gram[w + alt + b0]]))
                       + np.int64(max(t1[gram[w + b1] >> sh1], t1[gram[w + alt + b1] >> sh1])))
                if acc < cut1:                      # the first two stages without a branch: most windows end here
                    continue
                if _later(gram, w, alt, st, tables, acc) and _lookahead(codes, w, sorted32[r], order[r], rest[r], m,
                                                                       need[r]):
                    out[k, i] = True
                    break


@numba.njit(cache=True, nogil=True, parallel=True)
def _best_of(codes, starts, e0, e1, pwms, lengths, ctx, rows, best, where):  # pragma: no cover - compiled
    for i in numba.prange(ctx.size):
        a, r = ctx[i], rows[i]
        lo = starts[a]
        size = starts[a + 1] - lo
        m = lengths[r]
        top = -np.inf
        at = -1
        for s in range(max(e0[a] - m + 1, 0), min(e1[a] - 1, size - m) + 1):
            acc = 0.0
            for j in range(m):
                c = codes[lo + s + j]
                if c > 3:
                    acc = -np.inf
                    break
                acc += pwms[r, j, c]
            if acc > top:
                top = acc
                at = s
        best[i] = top
        where[i] = at


class Rows:
    """Motif rows laid out for the kernels: the matrices stacked (zero-padded; float64, and float32 for the filter),
    their lengths, each row's columns by decreasing spread (max - min) and the most the columns after each could add;
    given the thresholds ``alpha``, the CPU filter's lists and tables (``qgrams``, :func:`qgram_filter`; built once
    here, so a worker receives them with the rows)."""

    def __init__(self, pwms: list, alpha: np.ndarray | None = None):
        self.lengths = np.array([w.shape[0] for w in pwms], dtype=np.int64)
        width = int(self.lengths.max(initial=1))
        self.stack = np.zeros((len(pwms), width, 4), np.float64)
        self.order = np.zeros((len(pwms), width), np.int64)
        self.rest = np.zeros((len(pwms), width), np.float64)
        for r, w in enumerate(pwms):
            m = w.shape[0]
            self.stack[r, :m] = w
            o = np.argsort(-(w.max(1) - w.min(1)), kind="stable")
            self.order[r, :m] = o
            tail = np.cumsum(w.max(1)[o][::-1])[::-1]               # the most columns jj.. can add
            self.rest[r, :m - 1] = tail[1:]
        self.stack32 = np.zeros((len(pwms), width, 5 + len(PAIRS)), np.float32)
        self.stack32[:, :, :4] = self.stack
        self.stack32[:, :, 4] = -1e30
        for k, (x, y) in enumerate(PAIRS):
            self.stack32[:, :, 5 + k] = np.maximum(self.stack[:, :, x], self.stack[:, :, y])
        self.rest32 = (self.rest + MARGIN / 4).astype(np.float32)       # rounded up a little: never cuts a reacher
        self.alpha = None if alpha is None else np.ascontiguousarray(alpha, np.float64)
        self.qgrams = None if alpha is None else qgram_filter(self)


def _blocks(stack: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """``(R, 2)`` starts of each row's q-gram blocks: the ``min(m, Q)`` contiguous columns of the largest summed
    spread, and for rows of at least ``TWO_BLOCKS`` columns the best one disjoint from it (-1: none)."""
    R, width = stack.shape[:2]
    q = np.minimum(lengths, Q)
    spread = np.where(np.arange(width) < lengths[:, None], stack.max(2) - stack.min(2), 0.0)
    cum = np.concatenate([np.zeros((R, 1)), np.cumsum(spread, axis=1)], axis=1)
    at = np.arange(width)
    ends = np.minimum(at[None, :] + q[:, None], width)
    sums = np.take_along_axis(cum, ends, axis=1) - cum[:, :width]
    sums[at[None, :] > (lengths - q)[:, None]] = -np.inf                      # blocks past the row's end
    first = np.argmax(sums, axis=1)
    sums[np.abs(at[None, :] - first[:, None]) < q[:, None]] = -np.inf        # overlapping the first
    second = np.where((lengths >= TWO_BLOCKS) & np.isfinite(sums.max(axis=1)), np.argmax(sums, axis=1), -1)
    return np.stack([first, second], axis=1).astype(np.int64)


def _block_scores(stack: np.ndarray, r: np.ndarray, start: np.ndarray, q: int) -> np.ndarray:
    """``(len(r), 4^q)`` float64 scores of the q-grams of rows ``r``'s blocks of ``q`` columns from ``start`` (the
    first base in the high bits): the sums of the two halves' scores."""
    block = stack[r[:, None], start[:, None] + np.arange(q)]                  # (k, q, 4)

    def part(cols):
        score = np.zeros((r.size, 1))
        for j in cols:
            score = (score[:, :, None] + block[:, j, None, :]).reshape(r.size, -1)
        return score

    return (part(range(q // 2))[:, :, None] + part(range(q // 2, q))[:, None, :]).reshape(r.size, -1)


def _passing(stack: np.ndarray, lengths: np.ndarray, need: np.ndarray, qoff: np.ndarray, k: int,
             which: np.ndarray) -> np.ndarray:
    """``(R, 4^Q)`` bool: the Q-grams whose first ``min(m, Q)`` bases pass block ``k`` of each row of ``which``
    (none where the row has no such block): their score plus the most the row's other columns can add reaches
    ``need``."""
    R, width = stack.shape[:2]
    keep = np.zeros((R, 4 ** Q), np.bool_)
    colmax = np.where(np.arange(width) < lengths[:, None], stack.max(2), 0.0)
    q_of = np.minimum(lengths, Q)
    for q in range(1, Q + 1):
        rs = np.flatnonzero((q_of == q) & (qoff[:, k] >= 0) & which)
        for lo in range(0, rs.size, 32):                                      # 32 rows: 4 MB of float64 scores
            r = rs[lo:lo + 32]
            cols = qoff[r, k][:, None] + np.arange(q)
            other = colmax[r].sum(1) - np.take_along_axis(colmax[r], cols, axis=1).sum(1)
            got = _block_scores(stack, r, qoff[r, k], q) >= (need[r] - other)[:, None]
            keep[r] = np.repeat(got, 4 ** (Q - q), axis=1)                   # the bases past the row: any
    return keep


def _stages(stack: np.ndarray, m: int, need: float, b0: int) -> tuple[list, list]:
    """A scanned row's stages: its first block (from ``b0``), then the rest of its columns cut into blocks of at most
    Q by decreasing spread; each block's table of ``4^q`` upper bounds of its q-grams' scores in units of ``delta``
    above the block's least (uint8), and the ``(count, level, start, shift, table index, cut)`` the kernel reads:
    every window reaching ``need`` sums at least ``level`` units, so at least ``cut`` after each stage."""
    w = stack[:m]
    blocks = [(b0, min(m, Q))] + [(x, min(Q, b0 - x)) for x in range(0, b0, Q)]
    blocks += [(x, min(Q, m - x)) for x in range(b0 + Q, m, Q)]
    spread = w.max(1) - w.min(1)
    blocks[1:] = sorted(blocks[1:], key=lambda bq: -spread[bq[0]:bq[0] + bq[1]].sum())
    scores = [_block_scores(stack[None], np.zeros(1, np.int64), np.array([x]), q)[0] for x, q in blocks]
    low = np.array([t.min() for t in scores])
    delta = max(max(float(t.max() - t.min()) for t in scores) / 250.0, 1e-9)   # < 256 units: a uint8
    units = [np.ceil((t - t.min()) / delta).astype(np.uint8) for t in scores]
    top = np.array([int(u.max()) for u in units])
    level = int(np.ceil((need - low.sum()) / delta - 1e-6)) if np.isfinite(need) else 1 << 40
    after = np.concatenate([np.cumsum(top[::-1])[::-1][1:], [0]])              # the most the later stages add
    head = [len(blocks) - 1, level]
    for (x, q), cut in zip(blocks, level - after):
        head += [x, 2 * (Q - q), -1, int(cut)]
    return head, units


def _listing(stack, lengths, block, first, listed):
    """The listed rows' ``(span, lists, scores)`` (:func:`_listed`): groups of rows by length, in each the
    edit-relative positions where their first blocks start; per Q-gram the rows of each group whose first block it
    passes (by q-gram, group, row), and its score on each (float32 rounded up: an upper bound)."""
    group = np.searchsorted(np.array(GROUPS), lengths, side="right")
    present = np.unique(group[listed])
    listed = listed[np.argsort(group[listed], kind="stable")]                 # by group, then row
    k_of = np.searchsorted(present, group[listed])
    j, g = np.nonzero(first[listed])
    by = np.argsort(g, kind="stable")                                         # by q-gram, then group and row
    g, r = g[by], listed[j[by]]
    G = present.size
    heads = G * 4 ** Q + 1 + np.concatenate([[0], np.cumsum(np.bincount(g * G + k_of[j[by]], minlength=G * 4 ** Q))])
    score = np.zeros(r.size)
    for k in range(Q):                                                         # the block's columns in order
        col = np.minimum(block[r, 0] + k, stack.shape[1] - 1)
        score += np.where(k < np.minimum(lengths[r], Q), stack[r, col, (g >> (2 * (Q - 1 - k))) & 3], 0.0)
    up = score.astype(np.float32)
    up = np.where(up < score, np.nextafter(up, np.float32(np.inf)), up)
    span = np.array([((block[rs, 0] - lengths[rs] + 1).min(), block[rs, 0].max())
                     for rs in (listed[k_of == k] for k in range(G))], np.int64).reshape(-1, 2)
    return (span, np.concatenate([heads, r]).astype(np.int32),
            np.concatenate([np.zeros(heads.size, np.float32), up]).astype(np.float32))


def _staging(stack, lengths, need, block, scan):
    """The scanned rows' ``(stages, tables)`` (:func:`_scanned`, :func:`_stages`): their tables end to end."""
    stages = np.zeros((scan.size, 2 + 4 * (2 + (int(lengths.max(initial=0)) + Q - 1) // Q)), np.int64)
    tables, at = [], 0
    for k, r in enumerate(scan):
        head, units = _stages(stack[r], int(lengths[r]), float(need[r]), int(block[r, 0]))
        head[4::4] = at + np.concatenate([[0], np.cumsum([u.size for u in units])[:-1]])
        stages[k, :len(head)] = head
        tables += units
        at += sum(u.size for u in units)
    return stages, np.concatenate(tables) if tables else np.zeros(0, np.uint8)


def _lookahead_order(rows, block, listed):
    """``(order, sorted32, rest)`` of the kernels' lookaheads: a row's columns by decreasing spread (the
    :class:`Rows`'), but a listed row longer than Q its first block's columns first (their sum is its list entry's
    score), and the most the columns after each could add (rounded up a little)."""
    order = rows.order.copy()
    rest = rows.rest.copy()
    for r in listed[rows.lengths[listed] > Q]:
        m, b = int(rows.lengths[r]), int(block[r, 0])
        w = rows.stack[r, :m]
        others = np.array([j for j in rows.order[r, :m] if not b <= j < b + Q], np.int64)
        order[r, :m] = np.concatenate([np.arange(b, b + Q), others])
        rest[r, :m - 1] = np.cumsum(w.max(1)[order[r, :m]][::-1])[::-1][1:]
    return order, np.take_along_axis(rows.stack32, order[:, :, None], axis=1), (rest + MARGIN / 4).astype(np.float32)


def qgram_filter(rows) -> dict:
    """The CPU filter of :class:`Rows` with thresholds: each row's blocks (:func:`_blocks`; ``block``) and, for each,
    the q-grams whose score plus the most the row's other columns can add reaches ``alpha - MARGIN`` (float64), which
    every window reaching ``alpha`` passes (a row whose ``alpha`` is not finite: none).  Rows whose first block passes
    less than ``DENSE`` of the q-grams are listed (:func:`_listing`), the longer others scanned (``scan``,
    :func:`_staging`); ``bits[sel[r]]`` the bitmap of a listed row's second block (bit ``g & 7`` of byte ``g >> 3`` of
    q-gram ``g``, its first base in the high bits); the lookaheads' columns (:func:`_lookahead_order`)."""
    lengths = rows.lengths
    floor = np.where(np.isfinite(rows.stack), rows.stack, np.inf).min(axis=(1, 2), initial=0.0) - 1.0
    stack = np.maximum(rows.stack, floor[:, None, None])        # -inf (a letter never matching): a finite bound
    block = _blocks(stack, lengths) if lengths.size else np.zeros((0, 2), np.int64)
    need = np.where(np.isfinite(rows.alpha), rows.alpha, np.inf) - MARGIN
    first = _passing(stack, lengths, need, block, 0, np.ones(lengths.size, np.bool_))
    scanned = (first.mean(axis=1) >= DENSE) & (lengths > Q)
    has2 = (block[:, 1] >= 0) & ~scanned
    sel = np.where(has2, np.cumsum(has2) - 1, -1)
    bits = np.packbits(_passing(stack, lengths, need, block, 1, has2)[has2], axis=1, bitorder="little")
    span, lists, scores = _listing(stack, lengths, block, first, np.flatnonzero(~scanned))
    scan = np.flatnonzero(scanned)
    stages, tables = _staging(stack, lengths, need, block, scan)
    order, sorted32, rest = _lookahead_order(rows, block, np.flatnonzero(~scanned))
    return {"block": block, "sel": sel, "bits": bits.reshape(-1, 4 ** Q // 8), "span": span, "lists": lists,
            "scores": scores, "scan": scan, "stages": stages, "tables": tables, "order": order, "sorted32": sorted32,
            "rest": rest}


def _contig(codes, starts, e0, e1):
    return (np.ascontiguousarray(codes, np.uint8), np.ascontiguousarray(starts, np.int64),
            np.ascontiguousarray(e0, np.int64), np.ascontiguousarray(e1, np.int64))


def _passes(starts, e0, e1, snv) -> np.ndarray:
    """``(P, 6)``: the contexts a kernel passes over, by allele: ``(allele, context start, offset of the alt context
    (an SNV's merged ref context; else 0), e0, e1, size)``; an SNV's ref context, else both."""
    n = snv.size
    a = np.arange(2 * n).reshape(2, n).T.ravel()                            # ref, alt of each allele in turn
    a = a[~np.repeat(snv, 2) | (a < n)]
    alt = np.where(snv[a % n] & (a < n), starts[(a + n) % (2 * n)] - starts[a], 0)
    return np.stack([a % n, starts[a], alt, e0[a], e1[a], starts[a + 1] - starts[a]], axis=1)


def reaching(codes, starts, e0, e1, rows: Rows, device: str = "cpu") -> np.ndarray:
    """``(n, n_rows)`` bool for the ``n`` alleles whose ref contexts are ``0..n-1`` and alt contexts ``n..2n-1``: a
    covering window of the row on either allele may reach its threshold (every pair where one does is marked; a few
    within ``MARGIN`` below it may be too).  An SNV's two alleles are tested in one pass over its ref context."""
    codes, starts, e0, e1 = _contig(codes, starts, e0, e1)
    n = (starts.size - 1) // 2
    if n == 0:
        return np.zeros((0, rows.lengths.size), np.bool_)
    at_ref, at_alt = starts[:n] + e0[:n], starts[n:2 * n] + e0[n:]
    one = (e1[:n] - e0[:n] == 1) & (e1[n:] - e0[n:] == 1)
    one &= (codes[at_ref] < 4) & (codes[at_alt] < 4)
    merged = codes.copy()
    merged[at_ref[one]] = PAIR_CODE[codes[at_ref[one]], codes[at_alt[one]]]
    if resolve_device(device) == "gpu":
        from workers.variants.gpu import reaching_gpu  # noqa: PLC0415

        return reaching_gpu(merged, starts, e0, e1, one, rows, MARGIN)
    out = np.zeros((n, rows.lengths.size), np.bool_)
    need = np.where(np.isfinite(rows.alpha), rows.alpha, np.inf).astype(np.float32).astype(np.float64) - MARGIN
    gram, run = np.empty(codes.size, np.uint16), np.empty(codes.size, np.uint8)
    _qgrams(codes, gram, run)                           # the unmerged codes: each allele's own q-grams
    f = rows.qgrams
    common = (f["sorted32"], rows.lengths, f["order"], f["rest"], need)
    if f["span"].shape[0]:
        _listed(merged, gram, run, starts, e0, e1, one, *common, f["block"], f["sel"], f["bits"], f["span"],
                f["lists"], f["scores"], out)
    if f["scan"].size:
        part = np.zeros((f["scan"].size, n), np.bool_)
        _scanned(merged, gram, _passes(starts, e0, e1, one), *common, f["scan"], f["stages"], f["tables"], part)
        out[:, f["scan"]] = part.T
    return out


def best_of(codes, starts, e0, e1, rows: Rows, ctx: np.ndarray, row: np.ndarray, device: str = "cpu"):
    """``(score, start)`` of the best covering window of each (context ``ctx[i]``, row ``row[i]``) pair (``-inf`` and
    ``-1`` where none is scored: an edit beside a record's end, or Ns)."""
    if resolve_device(device) == "gpu":
        from workers.variants.gpu import best_of_gpu  # noqa: PLC0415

        return best_of_gpu(codes, starts, e0, e1, rows, ctx, row)
    best = np.empty(ctx.size, np.float64)
    where = np.empty(ctx.size, np.int64)
    _best_of(*_contig(codes, starts, e0, e1), rows.stack, rows.lengths, np.ascontiguousarray(ctx, np.int64),
             np.ascontiguousarray(row, np.int64), best, where)
    return best, where
