// Motif discovery on the GPU (workers/discover/gpu.py): Gibbs chains, the (l, d) proxy and the (l, d) local
// search, each a single launch for a whole batch.
//
// Windows are packed: window p of sequence i is wcode[i * P + p], letter j in bits 2j..2j+1 (A=0 C=1 G=2 T=3,
// l <= 32), valid[i * P + p] = 0 where the window holds an N (its code is 0 and it never enters a count).
// The number of mismatches of two packed words is popc((x | x >> 1) & 0x5555...) with x = a ^ b.
//
// The same source compiles on the host for the tests (MG_SIM: lanes are threads, see tests/cuda_sim.h).
#ifndef MG_SIM
#define MG_DYN_SMEM(type, name) extern __shared__ __align__(16) type name[]
#endif

#define MG_FULL 0xffffffffu
#define MG_LOW2 0x5555555555555555ULL

__device__ __forceinline__ int mg_mismatch(unsigned long long a, unsigned long long b)
{
    const unsigned long long x = a ^ b;
    return __popcll((x | (x >> 1)) & MG_LOW2);
}

__device__ __forceinline__ unsigned long long mg_mix(unsigned long long x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

// A uniform number in (0, 1) from (seed, chain, a, b): counter-based, so no generator state.
__device__ __forceinline__ float mg_uniform(unsigned long long seed, long long chain, long long a, long long b)
{
    unsigned long long h = mg_mix(seed ^ mg_mix((unsigned long long)chain * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL));
    h = mg_mix(h ^ ((unsigned long long)a * 0xd1b54a32d192ed03ULL));
    h = mg_mix(h ^ ((unsigned long long)b * 0x8cb92ba72f3d8dd7ULL));
    return ((float)(h >> 40) + 0.5f) * (1.0f / 16777216.0f);
}

__device__ __forceinline__ double mg_warp_sum(double v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(MG_FULL, v, o);
    return v;
}

__device__ __forceinline__ int mg_warp_min(int v)
{
    for (int o = 16; o > 0; o >>= 1) v = min(v, __shfl_xor_sync(MG_FULL, v, o));
    return v;
}

// ------------------------------------------------------------------------------------------------ Gibbs
// One warp per chain, the whole run in one launch (Yu & Xu's G-processes; the seed's checkpoints become warps
// that leave when their chain has finished, and the block scheduler hands the SM to the next chains).
//
// Per step (sequence i = step % T): lanes j < l take the chain's site in i out of the counts (correcting
// value, seed eq. 3, from the table F), the warp scores all P windows of i under the log-odds W of the
// (T-1)-site profile (lane per window, W in shared memory), takes the best window (ties: the first) or a
// Gumbel-max draw from the posterior, and lanes j < l add it (eq. 2).  W[4j + b] = LW[b][count] is kept
// in step with the counts, so only the 2l changed entries are touched per step.
//
// LW: (4, T + 1) float32, LW[b][c] = log((c + a b_b) / (T - 1 + a)) - log b_b; F: (4, T + 1) float64,
// F[b][c] = q log2(q / b_b) with q = (c + a b_b) / (T + a).  The chain score is sum F / l.
// pos: (C, T) int32, the starting windows (in) and the reported ones (out); with random_starts != 0 the
// starts are drawn here from (seed, first + c, i) uniformly among the valid windows of i (vtab/nvalid).
// best_pos: (C, T) scratch of the stochastic update (the best alignment seen).
extern "C" __global__ void gibbs_chains(
    const unsigned long long* __restrict__ wcode, const unsigned char* __restrict__ valid,
    const int* __restrict__ vtab, const int* __restrict__ nvalid,
    int T, int P, int l,
    const float* __restrict__ LW, const double* __restrict__ F,
    int* __restrict__ pos, int* __restrict__ best_pos,
    int* __restrict__ counts_out, double* __restrict__ score_out, int* __restrict__ steps_out,
    int C, long long first, int random_starts, int max_steps, int first_check, int every, int limit,
    int sample, unsigned long long seed)
{
    MG_DYN_SMEM(int, smem);
    const int lane = threadIdx.x & 31;
    const int wib = threadIdx.x >> 5;
    const long long c = (long long)blockIdx.x * (blockDim.x >> 5) + wib;
    if (c >= C) return;                               // whole warps only: C is per warp
    const int L4 = 4 * l;
    const int T1 = T + 1;
    int* cnt = smem + wib * 2 * L4;
    float* W = (float*)(cnt + L4);
    int* mypos = pos + c * T;
    int* mybest = best_pos + c * T;

    if (random_starts) {
        for (int i = lane; i < T; i += 32) {
            const int nv = nvalid[i];
            int k = (int)(mg_uniform(seed, first + c, -1, i) * (float)(nv > 0 ? nv : 1));
            if (k >= nv) k = nv > 0 ? nv - 1 : 0;
            mypos[i] = nv > 0 ? vtab[(long long)i * P + k] : 0;
        }
    }
    for (int k = lane; k < L4; k += 32) cnt[k] = 0;
    __syncwarp();
    for (int i = lane; i < T; i += 32) {
        const long long w = (long long)i * P + mypos[i];
        if (valid[w]) {
            const unsigned long long code = wcode[w];
            for (int j = 0; j < l; ++j) atomicAdd(&cnt[4 * j + (int)((code >> (2 * j)) & 3ULL)], 1);
        }
    }
    __syncwarp();
    double score = 0.0;
    for (int k = lane; k < L4; k += 32) {
        const int b = k & 3;
        score += F[b * T1 + cnt[k]];
        W[k] = LW[b * T1 + cnt[k]];
    }
    score = mg_warp_sum(score) / l;
    double best_score = score;
    if (sample)
        for (int i = lane; i < T; i += 32) mybest[i] = mypos[i];
    __syncwarp();

    int still = 0, step = 0, next_check = first_check;
    while (step < max_steps) {
        const int i = step % T;
        const long long row = (long long)i * P;
        const int old = mypos[i];
        double dd = 0.0;
        if (lane < l && valid[row + old]) {            // correcting value of the removed site (eq. 3)
            const int b = (int)((wcode[row + old] >> (2 * lane)) & 3ULL);
            const int k = 4 * lane + b;
            const int c0 = cnt[k];
            dd += F[b * T1 + c0 - 1] - F[b * T1 + c0];
            cnt[k] = c0 - 1;
            W[k] = LW[b * T1 + c0 - 1];
        }
        __syncwarp();
        float bs = -3.0e38f;                               // below every score (invalid: -1e30)
        int bp = P;
        for (int p = lane; p < P; p += 32) {
            const unsigned long long code = wcode[row + p];
            float s = 0.0f;
            for (int j = 0; j < l; ++j) s += W[4 * j + (int)((code >> (2 * j)) & 3ULL)];
            if (!valid[row + p]) s = -1.0e30f;
            if (sample) s -= logf(-logf(mg_uniform(seed, first + c, step, p)));
            if (s > bs) { bs = s; bp = p; }
        }
        for (int o = 16; o > 0; o >>= 1) {                 // best window, ties to the first
            const float os = __shfl_xor_sync(MG_FULL, bs, o);
            const int op = __shfl_xor_sync(MG_FULL, bp, o);
            if (os > bs || (os == bs && op < bp)) { bs = os; bp = op; }
        }
        const int nw = bp;
        if (lane < l && valid[row + nw]) {             // correcting value of the added site (eq. 2)
            const int b = (int)((wcode[row + nw] >> (2 * lane)) & 3ULL);
            const int k = 4 * lane + b;
            const int c0 = cnt[k];
            dd += F[b * T1 + c0 + 1] - F[b * T1 + c0];
            cnt[k] = c0 + 1;
            W[k] = LW[b * T1 + c0 + 1];
        }
        dd = mg_warp_sum(dd);
        score += dd / l;                                   // eq. 4
        if (lane == 0) mypos[i] = nw;
        __syncwarp();
        ++step;
        if (sample) {
            if (score > best_score + 1e-12) {
                best_score = score;
                still = 0;
                for (int q = lane; q < T; q += 32) mybest[q] = mypos[q];
            } else {
                ++still;
            }
        } else {
            still = (nw != old) ? 0 : still + 1;
        }
        if (step >= next_check || step >= max_steps) {     // the seed's checkpoints
            next_check = step + every;
            if (still >= limit) break;
        }
        __syncwarp();
    }
    __syncwarp();
    if (sample) {                                          // report the best alignment seen
        for (int k = lane; k < L4; k += 32) cnt[k] = 0;
        __syncwarp();
        for (int i = lane; i < T; i += 32) {
            const int p = mybest[i];
            mypos[i] = p;
            const long long w = (long long)i * P + p;
            if (valid[w]) {
                const unsigned long long code = wcode[w];
                for (int j = 0; j < l; ++j) atomicAdd(&cnt[4 * j + (int)((code >> (2 * j)) & 3ULL)], 1);
            }
        }
        __syncwarp();
        score = best_score;
    }
    for (int k = lane; k < L4; k += 32) counts_out[c * L4 + k] = cnt[k];
    if (lane == 0) {
        score_out[c] = score;
        steps_out[c] = step;
    }
}

// ------------------------------------------------------------------------------------------------ (l, d)
// For every consensus (packed): sequences whose closest valid window is within dthr mismatches, and the sum
// over sequences of min(closest distance, l) (l + 1 where a sequence has no valid window, capped to l).
// Thread per consensus; all threads of a warp read the same window (broadcast).
extern "C" __global__ void ld_proxy(
    const unsigned long long* __restrict__ wcode, const unsigned char* __restrict__ valid, int T, int P, int l,
    const unsigned long long* __restrict__ cons, int C, int dthr, int* __restrict__ cnt_out,
    int* __restrict__ tot_out)
{
    const long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const unsigned long long q = cons[c];
    int cnt = 0, tot = 0;
    for (int i = 0; i < T; ++i) {
        const long long row = (long long)i * P;
        int best = l + 1;
        for (int p = 0; p < P; ++p) {
            const int d = mg_mismatch(wcode[row + p], q);
            if (valid[row + p] && d < best) best = d;
        }
        cnt += best <= dthr;
        tot += min(best, l);
    }
    cnt_out[c] = cnt;
    tot_out[c] = tot;
}

// The (l, d) local search of workers/discover/refine_numba.local_search for many starts at once, one warp per start:
// climb by single-letter changes to a local optimum of (sequences within d ↑, summed capped distance ↓),
// the best move first, ties to the first (position, letter); at most max_moves moves.
// Per sequence the warp finds the closest distance dmin; only windows within dmin + 1 can give a
// neighbour's closest distance (one letter moves a distance by at most 1), so lane j (= motif position)
// takes those windows one by one (ballot) and keeps mind[b] for its 4 letters: O(P) per sequence and move.
extern "C" __global__ void ld_climb(
    const unsigned long long* __restrict__ wcode, const unsigned char* __restrict__ valid, int T, int P, int l,
    unsigned long long* __restrict__ cons, int C, int d, int max_moves, int* __restrict__ cnt_out,
    int* __restrict__ tot_out, int* __restrict__ moves_out)
{
    const int lane = threadIdx.x & 31;
    const long long s = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (s >= C) return;
    unsigned long long q = cons[s];
    int cur_cnt = 0, cur_tot = 0, moves = 0;
    while (true) {
        int ncnt[4] = {0, 0, 0, 0}, ntot[4] = {0, 0, 0, 0};
        int qj = (int)((q >> (2 * (lane < l ? lane : 0))) & 3ULL);
        cur_cnt = 0;
        cur_tot = 0;
        for (int i = 0; i < T; ++i) {
            const long long row = (long long)i * P;
            int dmin = l + 1;
            for (int p = lane; p < P; p += 32) {
                const int dd = mg_mismatch(wcode[row + p], q);
                if (valid[row + p] && dd < dmin) dmin = dd;
            }
            dmin = mg_warp_min(dmin);
            int mind[4] = {l + 1, l + 1, l + 1, l + 1};
            if (dmin <= l) {
                for (int p0 = 0; p0 < P; p0 += 32) {
                    const int p = p0 + lane;
                    unsigned long long code = 0;
                    int dd = l + 2;
                    if (p < P && valid[row + p]) {
                        code = wcode[row + p];
                        dd = mg_mismatch(code, q);
                    }
                    unsigned int near = __ballot_sync(MG_FULL, dd <= dmin + 1);
                    while (near) {
                        const int src = __ffs(near) - 1;
                        near &= near - 1;
                        const unsigned long long w = __shfl_sync(MG_FULL, code, src);
                        const int wd = __shfl_sync(MG_FULL, dd, src);
                        if (lane < l) {
                            const int a = (int)((w >> (2 * lane)) & 3ULL);
                            const int bj = wd - (a != qj ? 1 : 0);
                            for (int b = 0; b < 4; ++b) {
                                const int v = bj + (a != b ? 1 : 0);
                                if (v < mind[b]) mind[b] = v;
                            }
                        }
                    }
                }
            }
            cur_cnt += dmin <= d;
            cur_tot += min(dmin, l);
            for (int b = 0; b < 4; ++b) {
                ncnt[b] += mind[b] <= d;
                ntot[b] += min(mind[b], l);
            }
        }
        // best move over (position = lane, letter b != current), ties to the first (j, b)
        int bk = -1, bt = 0, bm = 1 << 30;             // bm = 4 j + b
        if (lane < l) {
            for (int b = 0; b < 4; ++b) {
                if (b == qj) continue;
                if (bk < 0 || ncnt[b] > bk || (ncnt[b] == bk && ntot[b] < bt)) {
                    bk = ncnt[b];
                    bt = ntot[b];
                    bm = 4 * lane + b;
                }
            }
        }
        for (int o = 16; o > 0; o >>= 1) {
            const int ok = __shfl_xor_sync(MG_FULL, bk, o);
            const int ot = __shfl_xor_sync(MG_FULL, bt, o);
            const int om = __shfl_xor_sync(MG_FULL, bm, o);
            const bool better = ok > bk || (ok == bk && (ot < bt || (ot == bt && om < bm)));
            if (better) { bk = ok; bt = ot; bm = om; }
        }
        if (moves >= max_moves || !(bk > cur_cnt || (bk == cur_cnt && bt < cur_tot))) break;
        const int j = bm >> 2, b = bm & 3;
        q = (q & ~(3ULL << (2 * j))) | ((unsigned long long)b << (2 * j));
        cur_cnt = bk;
        cur_tot = bt;
        ++moves;
    }
    if (lane == 0) {
        cons[s] = q;
        cnt_out[s] = cur_cnt;
        tot_out[s] = cur_tot;
        moves_out[s] = moves;
    }
}

// Consensus of each model's sites moved by each of the ns shifts along the motif (workers.discover.refine.shifted_
// consensus): pos (C, T) is the model's window per sequence, use (T) the sequences that count; a site moved off
// its sequence or onto an N is left out; ties go to the first letter.  Warp per model, lane j < l counts the
// letters of motif position j.  out (C, ns) packed consensus, nsites_out (C, ns) sites used (0: none).
extern "C" __global__ void shift_consensus(
    const unsigned long long* __restrict__ wcode, const unsigned char* __restrict__ valid, int T, int P, int Pf,
    int both, int l, const int* __restrict__ pos, const unsigned char* __restrict__ use, int C,
    const int* __restrict__ shifts, int ns, unsigned long long* __restrict__ out, int* __restrict__ nsites_out)
{
    const int lane = threadIdx.x & 31;
    const long long c = (long long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (c >= C) return;
    for (int s = 0; s < ns; ++s) {
        const int delta = shifts[s];
        int n4[4] = {0, 0, 0, 0};
        int nsites = 0;
        for (int i = 0; i < T; ++i) {
            if (!use[i]) continue;
            const int p = pos[c * T + i];
            const int rev = (both && p >= Pf) ? 1 : 0;
            const int pf = rev ? p - Pf : p;
            const int q = rev ? pf - delta : pf + delta;
            if (q < 0 || q >= Pf) continue;
            const long long w = (long long)i * P + q + (rev ? Pf : 0);
            if (!valid[w]) continue;
            ++nsites;
            if (lane < l) {
                const int a = (int)((wcode[w] >> (2 * lane)) & 3ULL);
                for (int b = 0; b < 4; ++b) n4[b] += (a == b);
            }
        }
        unsigned long long v = 0;
        if (lane < l) {
            int bb = 0;
            for (int b = 1; b < 4; ++b)
                if (n4[b] > n4[bb]) bb = b;
            v = (unsigned long long)bb << (2 * lane);
        }
        for (int o = 16; o > 0; o >>= 1) v |= __shfl_xor_sync(MG_FULL, v, o);
        if (lane == 0) {
            out[c * ns + s] = v;
            nsites_out[c * ns + s] = nsites;
        }
    }
}
