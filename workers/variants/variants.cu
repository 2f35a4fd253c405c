// Variant effects on the GPU: the twins of workers/variants/score.py's numba kernels (same sums, same order).
// (NVRTC: no standard headers; long long and unsigned char as the other kernels of the project)

#define NCODES 11   // A C G T, N, the six pairs of an SNV's two bases

// One thread per (allele, row): blockIdx.y the row, its matrix in shared memory; threads along the alleles.
extern "C" __global__ void var_reaching(const unsigned char* codes, const long long* starts, const long long* e0,
                                        const long long* e1, const unsigned char* snv, int n, const float* pwms,
                                        const int* lengths, const int* order, const float* rest,
                                        const float* alpha, int width, float margin, unsigned char* out, int n_rows) {
    extern __shared__ float sh[];
    float* w = sh;                               // width * NCODES
    float* rs = sh + width * NCODES;             // width
    int* od = (int*)(rs + width);                // width
    const int r = blockIdx.y;
    const int m = lengths[r];
    for (int k = threadIdx.x; k < width * NCODES; k += blockDim.x) w[k] = pwms[(size_t)r * width * NCODES + k];
    for (int k = threadIdx.x; k < width; k += blockDim.x) {
        rs[k] = rest[(size_t)r * width + k];
        od[k] = order[(size_t)r * width + k];
    }
    __syncthreads();
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const float need = alpha[r] - margin;
    bool hit = false;
    for (int side = 0; side < 2 && !hit; ++side) {
        if (side == 1 && snv[i]) break;         // an SNV: both alleles were tested in the ref context's pass
        const long long a = i + (long long)side * n;
        const long long lo = starts[a], size = starts[a + 1] - lo;
        long long s0 = e0[a] - m + 1;
        if (s0 < 0) s0 = 0;
        long long s1 = e1[a] - 1;
        if (s1 > size - m) s1 = size - m;
        for (long long s = s0; s <= s1 && !hit; ++s) {
            const unsigned char* c = codes + lo + s;
            float acc = 0.0f;
            bool ok = true;
            for (int jj = 0; jj < m; ++jj) {
                const int j = od[jj];
                acc += w[j * NCODES + c[j]];
                if (acc + rs[jj] < need) { ok = false; break; }
            }
            hit = ok;
        }
    }
    out[(size_t)i * n_rows + r] = hit;
}

// One thread per (context, row) pair: the best covering window, float64 in column order (-inf / -1 for none).
extern "C" __global__ void var_best(const unsigned char* codes, const long long* starts, const long long* e0, const long long* e1,
                                    const double* pwms, const int* lengths, int width, const long long* ctx,
                                    const long long* rows, long long k, double* best, long long* where) {
    const long long t = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (t >= k) return;
    const long long a = ctx[t], r = rows[t];
    const int m = lengths[r];
    const double* w = pwms + (size_t)r * width * 4;
    const long long lo = starts[a], size = starts[a + 1] - lo;
    long long s0 = e0[a] - m + 1;
    if (s0 < 0) s0 = 0;
    long long s1 = e1[a] - 1;
    if (s1 > size - m) s1 = size - m;
    double top = __longlong_as_double(0xfff0000000000000LL);
    long long at = -1;
    for (long long s = s0; s <= s1; ++s) {
        double acc = 0.0;
        for (int j = 0; j < m; ++j) {
            const unsigned char c = codes[lo + s + j];
            if (c > 3) { acc = __longlong_as_double(0xfff0000000000000LL); break; }
            acc += w[j * 4 + c];
        }
        if (acc > top) { top = acc; at = s; }
    }
    best[t] = top;
    where[t] = at;
}
