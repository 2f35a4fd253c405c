"""The window layout every discovery worker computes on (Gibbs chains, PROJECTION trials, EM, refinement).

A sequence set of ``T`` sequences is held as codes ``(T, Lmax)`` (A=0 C=1 G=2 T=3, anything else and the
padding past a sequence's end = 4).  For a motif width ``l`` the windows of sequence ``i`` are laid out on
one axis of length ``P``: the forward windows starting at ``0 .. Lmax-l`` and, with both strands, then the
reverse-complement windows at the same starts (window ``P/2 + p`` is the reverse complement of the forward
window at ``p``).  A window holding a code 4 is invalid (as in the scan); invalid windows are masked, never
dropped, so every array is rectangular and the same program runs on NumPy and CuPy.

One-hot rows of width ``4l`` (column ``4j + a`` is 1 when letter ``a`` is at motif position ``j``) make
the scoring of every window under a batch of matrices one GEMM: ``X (T*P, 4l) @ W.T (4l, C)``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Added to the score of an invalid window (a large negative finite number keeps exp() and max() NaN-free).
INVALID_SCORE = -1.0e30


@dataclass
class Windows:
    """Windows of one width over one sequence set, on one device.

    Attributes
    ----------
    l : int
        Motif width.
    both_strands : bool
    codes : numpy.ndarray, shape (T, P, l), uint8 (host)
        Letters of every window (reverse-complement windows already complemented and reversed).
    valid : numpy.ndarray, shape (T, P), bool (host)
    onehot : array, shape (T, P, 4l), float32 (``xp``)
    bias : array, shape (T, P, 1), float32 (``xp``); 0 for valid windows, ``INVALID_SCORE`` otherwise
    n_valid : numpy.ndarray, shape (T,), int64 (host); valid windows per sequence (both strands counted)
    dcodes : array, shape (T, P, l), uint8 (``xp``); ``codes`` on the device
    xp : module
        numpy or cupy.
    """
    l: int
    both_strands: bool
    codes: np.ndarray
    valid: np.ndarray
    onehot: object
    bias: object
    n_valid: np.ndarray
    dcodes: object
    xp: object

    @property
    def T(self) -> int:
        return int(self.codes.shape[0])

    @property
    def P(self) -> int:
        return int(self.codes.shape[1])

    @property
    def P_fwd(self) -> int:
        """Forward windows per sequence (start positions)."""
        return self.P // 2 if self.both_strands else self.P

    def subset(self, rows) -> "Windows":
        """The windows of the sequences ``rows`` only (same device)."""
        rows = np.asarray(rows)
        xr = self.xp.asarray(rows)
        return Windows(l=self.l, both_strands=self.both_strands, codes=self.codes[rows], valid=self.valid[rows],
                       onehot=self.onehot[xr], bias=self.bias[xr], n_valid=self.n_valid[rows],
                       dcodes=self.dcodes[xr], xp=self.xp)

    def position(self, w):
        """Window index → (start on the forward strand, strand 0 '+' / 1 '-')."""
        w = np.asarray(w)
        if not self.both_strands:
            return w, np.zeros_like(w)
        pf = self.P_fwd
        return np.where(w >= pf, w - pf, w), (w >= pf).astype(np.int8)


def window_codes(codes: np.ndarray, l: int, both_strands: bool) -> tuple[np.ndarray, np.ndarray]:
    """Letters ``(T, P, l)`` and validity ``(T, P)`` of every window of width ``l`` (host, NumPy).

    Parameters
    ----------
    codes : numpy.ndarray, shape (T, Lmax), uint8
    l : int
    both_strands : bool

    Returns
    -------
    win : numpy.ndarray, shape (T, P, l), uint8
        ``P = Lmax - l + 1`` forward windows, then (``both_strands``) as many reverse-complement ones.
    valid : numpy.ndarray, shape (T, P), bool
    """
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    T, L = codes.shape
    if l < 1 or l > L:
        raise ValueError(f"motif width {l} does not fit sequences of length {L}")
    fwd = np.lib.stride_tricks.sliding_window_view(codes, l, axis=1)          # (T, L-l+1, l)
    valid = (fwd < 4).all(axis=2)
    if both_strands:
        rc = np.where(fwd < 4, 3 - fwd, 4).astype(np.uint8)[:, :, ::-1]
        win = np.concatenate([fwd, rc], axis=1)
        valid = np.concatenate([valid, valid], axis=1)
    else:
        win = fwd
    return np.ascontiguousarray(win), valid


def make_windows(codes: np.ndarray, l: int, both_strands: bool, xp=np) -> Windows:
    """The :class:`Windows` of a sequence set for one width, with the one-hot rows on ``xp``'s device.

    Parameters
    ----------
    codes : numpy.ndarray, shape (T, Lmax), uint8
        Padded with code 4.
    l : int
    both_strands : bool
    xp : module
        numpy or cupy.

    Returns
    -------
    Windows
    """
    win, valid = window_codes(codes, l, both_strands)
    T, P, _ = win.shape
    onehot = np.zeros((T, P, l, 4), np.float32)
    ok = win < 4
    ti, pi, ji = np.nonzero(ok)
    onehot[ti, pi, ji, win[ti, pi, ji]] = 1.0
    onehot[~valid] = 0.0
    bias = np.where(valid, 0.0, INVALID_SCORE).astype(np.float32)[:, :, None]
    return Windows(l=l, both_strands=both_strands, codes=win, valid=valid,
                   onehot=xp.asarray(onehot.reshape(T, P, 4 * l)), bias=xp.asarray(bias),
                   n_valid=valid.sum(axis=1).astype(np.int64), dcodes=xp.asarray(win), xp=xp)


def background(codes: np.ndarray, both_strands: bool, pseudo: float = 1.0) -> np.ndarray:
    """Order-0 A C G T frequencies of a sequence set.

    Parameters
    ----------
    codes : array_like of uint8, any shape
        Code 4 is ignored.
    both_strands : bool
        Averaged with the complement.
    pseudo : float
        Added to every count.

    Returns
    -------
    numpy.ndarray, shape (4,), float64
    """
    c = np.bincount(np.asarray(codes).ravel(), minlength=5)[:4].astype(np.float64) + pseudo
    if both_strands:
        c = (c + c[::-1]) / 2
    return c / c.sum()


def consensus(ppm: np.ndarray) -> str:
    """The consensus string of a matrix.

    Parameters
    ----------
    ppm : array_like, shape (l, 4)

    Returns
    -------
    str
        The best letter of each column (the first wins ties).
    """
    return "".join("ACGT"[i] for i in np.argmax(np.asarray(ppm), axis=1))


def relative_entropy(ppm: np.ndarray, bg: np.ndarray) -> np.ndarray:
    """Information content per column, ``sum_x q log2(q/b)``.

    Parameters
    ----------
    ppm : array_like, shape (..., l, 4)
    bg : array_like, shape (4,)

    Returns
    -------
    numpy.ndarray, shape (..., l), float64
        Bits.
    """
    q = np.asarray(ppm, np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.where(q > 0, q * np.log2(q / np.asarray(bg, np.float64)), 0.0)
    return t.sum(axis=-1)
