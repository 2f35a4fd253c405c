"""Comparing one task's windows with the tests on the device asked for (the CPU or the GPU kernels)."""
from __future__ import annotations

import numpy as np

from workers.backend import resolve_device
from workers.composition.cpu import compare_cpu
from workers.composition.gpu import compare_gpu
from workers.composition.plan import CompositionPlan, Segments


def compare_block(codes: np.ndarray, segments: Segments, plan: CompositionPlan, device: str | None = "cpu",
                  hits: bool = True):
    """Compare every window starting in ``segments`` of ``codes`` with every test row of ``plan``.

    Parameters
    ----------
    codes : ndarray, shape (V,) uint8
        The task's sequence (A=0 C=1 G=2 T=3, else 4).
    segments : Segments
        Window starts that belong to this task.
    hits : bool
        False: count only.

    Returns
    -------
    counts : ndarray, shape (R,) int64
        Matching windows per row.
    found : CompositionHits or None
        The matches themselves (``hits=True``).
    """
    dev = resolve_device(device)
    codes = np.ascontiguousarray(codes, dtype=np.uint8)
    if dev == "gpu":
        return compare_gpu(codes, segments, plan, hits)
    return compare_cpu(codes, segments, plan, hits)
