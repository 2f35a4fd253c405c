// Multi-PWM scan on tensor cores, threshold fused, candidates compacted on the device.
//
// For a tile of motif rows padded to NCH*4 columns, the scores of 16 windows against 8 rows are one
// chain of NCH mma.sync.m16n8k16 (fp16 in, fp32 accumulate):
//   A (16x16, row-major) = one-hot of 4 sequence positions of 16 consecutive windows, built in registers
//                          straight from the uint8 codes (code 4 = N gives an all-zero one-hot);
//   B (16x8, col-major)  = the matching 4 columns of 8 rows, each entry w[j,x] - alpha/m in fp16,
//                          prepared on the host already in fragment order (one 8-byte load per lane);
//   C (16x8, fp32)       = score - alpha (approximately) for 16 windows x 8 rows.
// A window is a candidate when C >= -margin[row], margin being the row's exact fp16 rounding bound
// (+ slack), and it holds no N: an all-zero one-hot adds nothing, so a window of N's (padding, N runs) would
// pass every row's test (0 >= -margin) and a block of them give ~10^9 candidates; the N check reads the
// window's codes only for windows whose score passed.  Candidates go to a global list through one atomic
// each and are rescored exactly in float64 by rescore_f64 below, so the reported hits equal the CPU/float64
// reference bit for bit.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .f16): g = lane>>2, t = lane&3
//   A: a0a1 (row g,   k 2t..2t+1)  a2a3 (row g+8, k 2t..2t+1)  a4a5 (row g, k 2t+8..)  a6a7 (row g+8, k 2t+8..)
//   B: b0b1 (k 2t..2t+1, n g)      b2b3 (k 2t+8..2t+9, n g)
//   C: c0c1 (row g, n 2t..2t+1)    c2c3 (row g+8, n 2t..2t+1)
// Column k of a 16-wide chunk kk is sequence offset 4*kk + k/4 and base k%4.

#include <cuda_fp16.h>

__device__ __forceinline__ unsigned int code_at(const unsigned char* __restrict__ codes, long long len, long long i) {
    return (i < len) ? (unsigned int)__ldg(codes + i) : 4u;
}

// two fp16 one-hot entries: bases x0 and x0+1 at one sequence position
__device__ __forceinline__ unsigned int onehot2(unsigned int b, unsigned int x0) {
    unsigned int lo = (b == x0) ? 0x3C00u : 0u;
    unsigned int hi = (b == x0 + 1u) ? 0x3C00u : 0u;
    return lo | (hi << 16);
}

__device__ __forceinline__ bool no_n(const unsigned char* __restrict__ codes, long long len, long long pos, int m) {
    for (int j = 0; j < m; ++j)
        if (code_at(codes, len, pos + j) > 3u) return false;
    return true;
}

__device__ __forceinline__ void emit(float c, float thr, long long pos, long long n, int col, int ncols,
                                     const int* __restrict__ tile_rows, const int* __restrict__ lengths,
                                     const unsigned char* __restrict__ codes, long long codes_len,
                                     int* __restrict__ cand_pos, int* __restrict__ cand_row,
                                     unsigned int* __restrict__ counter, unsigned int capacity) {
    if (c >= thr && pos < n && col < ncols && no_n(codes, codes_len, pos, __ldg(lengths + tile_rows[col]))) {
        unsigned int idx = atomicAdd(counter, 1u);
        if (idx < capacity) {
            cand_pos[idx] = (int)pos;
            cand_row[idx] = tile_rows[col];
        }
    }
}

template <int NCH, int PG>
__global__ void __launch_bounds__(128) scan_mma(
        const unsigned char* __restrict__ codes, long long codes_len, long long n,
        const uint2* __restrict__ bfrag, int ntiles, const float* __restrict__ cand_thr,
        const int* __restrict__ tile_rows, int ncols, const int* __restrict__ lengths,
        int* __restrict__ cand_pos, int* __restrict__ cand_row, unsigned int* __restrict__ counter,
        unsigned int capacity) {
    const int lane = threadIdx.x & 31;
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const long long nwarps = ((long long)gridDim.x * blockDim.x) >> 5;
    const int g = lane >> 2, t = lane & 3;
    const unsigned int x0 = (unsigned int)((t & 1) * 2);
    const int o0 = t >> 1, o1 = 2 + (t >> 1);

    for (long long base = warp * (16 * PG); base < n; base += nwarps * (16 * PG)) {
        unsigned int a[PG][NCH][4];
#pragma unroll
        for (int q = 0; q < PG; ++q) {
#pragma unroll
            for (int kk = 0; kk < NCH; ++kk) {
                const long long s0 = base + q * 16 + g + 4 * kk;
                const long long s1 = s0 + 8;
                a[q][kk][0] = onehot2(code_at(codes, codes_len, s0 + o0), x0);
                a[q][kk][1] = onehot2(code_at(codes, codes_len, s1 + o0), x0);
                a[q][kk][2] = onehot2(code_at(codes, codes_len, s0 + o1), x0);
                a[q][kk][3] = onehot2(code_at(codes, codes_len, s1 + o1), x0);
            }
        }
        for (int nt = 0; nt < ntiles; ++nt) {
            float c[PG][4];
#pragma unroll
            for (int q = 0; q < PG; ++q) { c[q][0] = c[q][1] = c[q][2] = c[q][3] = 0.f; }
#pragma unroll
            for (int kk = 0; kk < NCH; ++kk) {
                const uint2 b = __ldg(bfrag + ((long long)kk * ntiles + nt) * 32 + lane);
#pragma unroll
                for (int q = 0; q < PG; ++q) {
                    asm volatile(
                        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                        "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                        : "+f"(c[q][0]), "+f"(c[q][1]), "+f"(c[q][2]), "+f"(c[q][3])
                        : "r"(a[q][kk][0]), "r"(a[q][kk][1]), "r"(a[q][kk][2]), "r"(a[q][kk][3]),
                          "r"(b.x), "r"(b.y));
                }
            }
            const int col0 = nt * 8 + 2 * t, col1 = col0 + 1;
            const float thr0 = (col0 < ncols) ? __ldg(cand_thr + col0) : 3.0e38f;
            const float thr1 = (col1 < ncols) ? __ldg(cand_thr + col1) : 3.0e38f;
#pragma unroll
            for (int q = 0; q < PG; ++q) {
                const long long r0 = base + q * 16 + g, r1 = r0 + 8;
                emit(c[q][0], thr0, r0, n, col0, ncols, tile_rows, lengths, codes, codes_len, cand_pos, cand_row, counter, capacity);
                emit(c[q][1], thr1, r0, n, col1, ncols, tile_rows, lengths, codes, codes_len, cand_pos, cand_row, counter, capacity);
                emit(c[q][2], thr0, r1, n, col0, ncols, tile_rows, lengths, codes, codes_len, cand_pos, cand_row, counter, capacity);
                emit(c[q][3], thr1, r1, n, col1, ncols, tile_rows, lengths, codes, codes_len, cand_pos, cand_row, counter, capacity);
            }
        }
    }
}

// Exact float64 rescoring of candidates, in column order (bit-identical to the CPU path); windows with a
// code > 3 are rejected.  hit[i] = 1 when the window scores >= its row's threshold.
extern "C" __global__ void rescore_f64(
        const unsigned char* __restrict__ codes, long long codes_len,
        const int* __restrict__ cand_pos, const int* __restrict__ cand_row, unsigned int ncand,
        const double* __restrict__ pwm, const long long* __restrict__ pwm_off,
        const int* __restrict__ lengths, const double* __restrict__ thresholds,
        double* __restrict__ score, unsigned char* __restrict__ hit) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= ncand) return;
    const int r = cand_row[i];
    const long long p = cand_pos[i];
    const int m = lengths[r];
    const double* w = pwm + pwm_off[r];
    double acc = 0.0;
    bool ok = true;
    for (int j = 0; j < m; ++j) {
        const unsigned int c = code_at(codes, codes_len, p + j);
        if (c > 3u) { ok = false; break; }
        acc = __dadd_rn(acc, w[4 * j + c]);
    }
    score[i] = acc;
    hit[i] = (ok && acc >= thresholds[r]) ? 1 : 0;
}

// exp(t) as workers/distribution/pvalue_table.py: exp_det computes it, operation for operation, in the same order,
// every product and sum rounded on its own (__dmul_rn / __dadd_rn: never contracted into a fused multiply-add, as
// the host's are not), the same tables (exp2_64 = EXP_TABLE, 2**(i/64); powers of two from their bits, as the
// host's exact POW2_TABLE): the GPU's p-values are the CPU's to the bit.
__device__ __forceinline__ double pow2_bits(long long q) {
    return __longlong_as_double((q + 1023LL) << 52);
}

__device__ __forceinline__ double exp_det(double t, const double* __restrict__ exp2_64) {
    t = fmin(fmax(t, -746.0), 709.75);
    const double k = floor(__dadd_rn(__dmul_rn(t, 92.33248261689366), 0.5));
    const double r = __dsub_rn(__dsub_rn(t, __dmul_rn(k, 0.010830424696223417)), __dmul_rn(k, 2.572804622327669e-14));
    double e = __dadd_rn(0.041666666666666664, __dmul_rn(r, 0.008333333333333333));
    e = __dadd_rn(0.16666666666666666, __dmul_rn(r, e));
    e = __dadd_rn(0.5, __dmul_rn(r, e));
    e = __dadd_rn(1.0, __dmul_rn(r, e));
    e = __dmul_rn(r, e);
    const long long ki = (long long)k;
    const double f = exp2_64[ki & 63];
    const double v = __dadd_rn(f, __dmul_rn(f, e));
    const long long q = ki >> 6, q1 = q >> 1;
    return __dmul_rn(__dmul_rn(v, pow2_bits(q1)), pow2_bits(q - q1));
}

// Score -> p-value of each hit (workers/distribution/pvalue_table.py, PvalueTable.lookup): the last segment j of
// row r's range [bounds[r, 0], bounds[r, 1]) with x0[j] < score (the host's binary search, the same comparisons),
// then exp_det(a[j] + b[j] (min(score, top[r]) - x0[j])), at most 1, at most cap[r] from the row's threshold alpha[r]
// up, 0 above a zero top, NaN below the table.
extern "C" __global__ void pvalue_of(
        const int* __restrict__ rows, const double* __restrict__ scores, unsigned int n,
        const double* __restrict__ x0, const double* __restrict__ a, const double* __restrict__ b,
        const long long* __restrict__ bounds, const double* __restrict__ top,
        const unsigned char* __restrict__ top_zero, const double* __restrict__ alpha, const double* __restrict__ cap,
        const double* __restrict__ exp2_64, double* __restrict__ out) {
    const unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const int r = rows[i];
    const double s = scores[i];
    const long long lo = bounds[2 * r];
    long long L = lo, H = bounds[2 * r + 1];     // (R, 2) row-major: [start, end) of row r
    while (L < H) {
        const long long mid = (L + H) >> 1;
        if (x0[mid] < s) L = mid + 1; else H = mid;
    }
    const long long j = L - 1;
    if (j < lo) { out[i] = nan(""); return; }
    const double tp = top[r];
    const double sc = s < tp ? s : tp;
    double v = exp_det(__dadd_rn(a[j], __dmul_rn(b[j], __dsub_rn(sc, x0[j]))), exp2_64);
    if (v > 1.0) v = 1.0;
    if (s >= alpha[r] && v > cap[r]) v = cap[r];
    if (top_zero[r] && s > tp) v = 0.0;
    out[i] = v;
}
