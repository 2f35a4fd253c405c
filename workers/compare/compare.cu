// COMPARE joint-distribution DPs (TFM-CUDA §4.5).

// COMPARE: one block per (row of A, row of B, shift).  The state grid (deficits of A and B still able to
// reach the loosest cut) lives in shared memory, double-buffered; each column is four shifted
// multiply-adds of the grid.  Three joint tails are read at the end (block reduction in double).
extern "C" __global__ void compare_joint(
    const int* __restrict__ ra_idx, const int* __restrict__ rb_idx, const int* __restrict__ shift,
    int n_combo,
    const int* __restrict__ m_a, const long long* __restrict__ off_a, const int* __restrict__ kdef_a,
    const float* __restrict__ prob_a, const int* __restrict__ cut_a,
    const int* __restrict__ m_b, const long long* __restrict__ off_b, const int* __restrict__ kdef_b,
    const float* __restrict__ prob_b, const int* __restrict__ cut_b,
    float bg0, float bg1, float bg2, float bg3,
    double* __restrict__ out)
{
    extern __shared__ float grid[];
    __shared__ double red[32];
    const float bg[4] = {bg0, bg1, bg2, bg3};
    for (int c = blockIdx.x; c < n_combo; c += gridDim.x) {
        const int ra = ra_idx[c], rb = rb_idx[c], s = shift[c];
        const int ma = m_a[ra], mb = m_b[rb];
        const int ca2 = cut_a[3 * ra + 2], cb2 = cut_b[3 * rb + 2];
        if (ca2 < 0 || cb2 < 0) {
            if (threadIdx.x < 3) out[3 * c + threadIdx.x] = 0.0;
            continue;
        }
        const int na = ca2 + 1, nb = cb2 + 1, nn = na * nb;
        float* cur = grid;
        float* nxt = grid + nn;
        for (int t = threadIdx.x; t < nn; t += blockDim.x) cur[t] = 0.0f;
        __syncthreads();
        if (threadIdx.x == 0) cur[nn - 1] = 1.0f;
        __syncthreads();
        const int start = s < 0 ? s : 0;
        const int L = max(ma, s + mb) - start;
        const int ia = -start, ib = s - start;
        for (int col = 0; col < L; ++col) {
            int da[4], db[4];
            float p[4];
            const int ja = col - ia, jb = col - ib;
            const bool inA = ja >= 0 && ja < ma, inB = jb >= 0 && jb < mb;
            for (int x = 0; x < 4; ++x) {
                bool ok = true;
                da[x] = 0;
                db[x] = 0;
                if (inA) {
                    const long long q = (off_a[ra] + ja) * 4 + x;
                    ok = ok && prob_a[q] > 0.0f;
                    da[x] = kdef_a[q];
                }
                if (inB) {
                    const long long q = (off_b[rb] + jb) * 4 + x;
                    ok = ok && prob_b[q] > 0.0f;
                    db[x] = kdef_b[q];
                }
                p[x] = ok ? bg[x] : 0.0f;
            }
            for (int t = threadIdx.x; t < nn; t += blockDim.x) {
                const int i = t / nb, j = t - i * nb;
                float acc = 0.0f;
#pragma unroll
                for (int x = 0; x < 4; ++x) {
                    const int ii = i + da[x], jj = j + db[x];
                    if (p[x] > 0.0f && ii < na && jj < nb) acc = fmaf(p[x], cur[ii * nb + jj], acc);
                }
                nxt[t] = acc;
            }
            __syncthreads();
            float* tmp = cur;
            cur = nxt;
            nxt = tmp;
        }
        for (int r = 0; r < 3; ++r) {
            const int cua = cut_a[3 * ra + r], cub = cut_b[3 * rb + r];
            const int qa = cua < 0 ? na : na - 1 - cua, qb = cub < 0 ? nb : nb - 1 - cub;
            double acc = 0.0;
            for (int t = threadIdx.x; t < nn; t += blockDim.x) {
                const int i = t / nb, j = t - i * nb;
                if (i >= qa && j >= qb) acc += (double)cur[t];
            }
            for (int o = 16; o > 0; o >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, o);
            if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = acc;
            __syncthreads();
            if (threadIdx.x == 0) {
                double tot = 0.0;
                for (int w = 0; w < (int)(blockDim.x >> 5); ++w) tot += red[w];
                out[3 * c + r] = tot;
            }
            __syncthreads();
        }
    }
}
