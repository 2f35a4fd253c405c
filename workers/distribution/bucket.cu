// BUCKETSCOREDISTRIBUTION slice histograms (TFM-CUDA §4.4).

// One slice of l columns: every word's background probability added to the bucket of its score.
// Thread = one prefix (the first l - mu columns); its inner loop walks the 4^mu suffixes tabulated in
// shared memory, so all threads of a warp do the same work on neighbouring words (no divergence).
// Buckets: a shared-memory histogram (atomicAdd on doubles) flushed once per block, or global atomics
// when the histogram does not fit.
extern "C" __global__ void bucket_slice_hist(
    const double* __restrict__ sc, const double* __restrict__ pr, int l, int mu,
    double lo, double inv_delta, int ncell, long long n_outer, int use_shared,
    double* __restrict__ out)
{
    extern __shared__ double sh[];
    const int ns = 1 << (2 * mu);
    double* ss = sh;
    double* sp = sh + ns;
    double* hist = sh + 2 * ns;
    const int lp = l - mu;
    for (int t = threadIdx.x; t < ns; t += blockDim.x) {
        double s = 0.0, p = 1.0;
        int x = t;
        for (int j = l - 1; j >= lp; --j) {
            int d = x & 3;
            x >>= 2;
            s += sc[4 * j + d];
            p *= pr[4 * j + d];
        }
        ss[t] = s;
        sp[t] = p;
    }
    if (use_shared)
        for (int t = threadIdx.x; t < ncell; t += blockDim.x) hist[t] = 0.0;
    __syncthreads();
    double* H = use_shared ? hist : out;
    const int top = ncell - 1;
    for (long long o = (long long)blockIdx.x * blockDim.x + threadIdx.x; o < n_outer;
         o += (long long)gridDim.x * blockDim.x) {
        double s = 0.0, p = 1.0;
        long long x = o;
        for (int j = lp - 1; j >= 0; --j) {
            int d = (int)(x & 3);
            x >>= 2;
            s += sc[4 * j + d];
            p *= pr[4 * j + d];
        }
        if (p == 0.0) continue;
        const double base = s - lo;
        for (int t = 0; t < ns; ++t) {
            const double q = sp[t];
            if (q == 0.0) continue;
            const double v = (base + ss[t]) * inv_delta;
            int k = v > 0.0 ? (int)v : 0;
            if (k > top) k = top;
            atomicAdd(&H[k], p * q);
        }
    }
    if (use_shared) {
        __syncthreads();
        for (int t = threadIdx.x; t < ncell; t += blockDim.x)
            if (hist[t] != 0.0) atomicAdd(&out[t], hist[t]);
    }
}
