"""What one task computes on one device: NumPy, numba and CUDA (CuPy) code, one package per capability.

``scan`` (multi-PWM scanning of a block), ``distribution`` (exact score distributions, BUCKETSCOREDISTRIBUTION,
p-value tables), ``compare`` (COMPARE of two matrices over shifts and strands), ``discover`` (windows, Gibbs
chains, PROJECTION, EM, (l, d) refinement), ``composition`` (nucleotide-histogram comparison), ``enrich``
(dinucleotide shuffles for enrichment controls); ``backend``
(device resolution, array module, BLAS pinning, the per-device caches of CUDA modules and uploaded plans) and
``warmup`` serve them all.  Nothing here imports ``pipeline`` or builds a Dask graph.
"""
