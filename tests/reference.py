"""Independent references for the tests: plain float64 loops, no shared code with the scanners."""
from __future__ import annotations

import numpy as np

CODE = {c: i for i, c in enumerate("ACGT")}


def naive_scan(seq: str, pwms: list, thresholds: list):
    """Every window of ``seq`` (a str) scored by every (pwm, threshold) with plain Python loops in float64.

    Returns a sorted list of (pos, row, score) for windows without non-ACGT letters scoring >= threshold.
    """
    s = seq.upper()
    out = []
    for r, (w, t) in enumerate(zip(pwms, thresholds)):
        m = len(w)
        for i in range(len(s) - m + 1):
            acc = 0.0
            ok = True
            for j in range(m):
                c = CODE.get(s[i + j])
                if c is None:
                    ok = False
                    break
                acc += float(w[j][c])
            if ok and acc >= t:
                out.append((i, r, acc))
    out.sort()
    return out


def brute_force_pvalue(pwm: np.ndarray, bg: np.ndarray, alpha: float, tie: float = 1e-9) -> float:
    """P(score >= alpha - tie) by enumerating all 4^m words (m <= 11).

    Scores within ``tie`` bits are one score: the same real score summed in another column order can
    differ by an ulp, so an attained score's p-value counts its ties.
    """
    m = pwm.shape[0]
    scores = np.zeros(1)
    probs = np.ones(1)
    for j in range(m):
        scores = (scores[:, None] + pwm[j][None, :]).ravel()
        probs = (probs[:, None] * bg[None, :]).ravel()
    return float(probs[scores >= alpha - tie].sum())
