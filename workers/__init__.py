"""What one task computes on one device: NumPy, numba and CUDA (CuPy) code, one package per capability.

``scan`` (multi-PWM scanning of a block), ``distribution`` (exact score distributions, BUCKETSCOREDISTRIBUTION,
p-value tables), ``compare`` (COMPARE of two matrices over shifts and strands), ``discover`` (windows, Gibbs
chains, PROJECTION, EM, (l, d) refinement), ``composition`` (nucleotide-histogram comparison), ``enrich``
(dinucleotide shuffles for enrichment controls); ``backend``
(device resolution, array module, BLAS pinning, the per-device caches of CUDA modules and uploaded plans) and
``warmup`` serve them all.  Nothing here imports ``pipeline`` or builds a Dask graph.
"""

import os as _os

# numba's error highlighting wraps sys.stdout and sys.stderr with colorama and later puts back the streams it saw
# (colorama's init/deinit), from whichever thread compiles: with kernels loaded on background threads, a stream saved
# in one place was put back over another (under pytest, a closed capture of an earlier test), and lines printed to
# sys.stderr were lost.  Set before numba's first import; a user's own setting is kept.
_os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")
