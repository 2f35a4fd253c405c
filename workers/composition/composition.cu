// Nucleotide-histogram comparison on the GPU (see workers/composition/plan.py for the geometry).
//
// pre    : (V + 1) int4 prefix counts (A, C, G, N) of the task's sequence (inclusive scans, as the seed)
// mask   : (V) uint8, 1 where a window may start (block cores)
// box    : per length index li, 6 ints: lo_a lo_c lo_g dim_a dim_c dim_g; box_off[li] places its cells
// A window of length L starting at p has the cell (a - lo_a, c - lo_c, g - lo_g) when it holds no N and
// falls in the box; cells are row-major with g fastest, so for fixed (a, c) a g-interval is contiguous.

extern "C" {

__device__ __forceinline__ long long window_cell(const int4* __restrict__ pre, const unsigned char* __restrict__ mask,
                                                 int V, int p, int L, const int* __restrict__ b, long long base)
{
    if (p >= V || p + L > V || !mask[p]) return -1;
    const int4 x = pre[p];
    const int4 y = pre[p + L];
    if (y.w != x.w) return -1;                                  // holds an N (or a separator)
    const int a = y.x - x.x - b[0], c = y.y - x.y - b[1], g = y.z - x.z - b[2];
    if ((unsigned)a >= (unsigned)b[3] || (unsigned)c >= (unsigned)b[4] || (unsigned)g >= (unsigned)b[5]) return -1;
    return base + ((long long)a * b[4] + c) * b[5] + g;
}

// One thread per (window start p, length index blockIdx.y): count windows per cell.  Lanes of a warp
// that fall in the same cell (neighbouring windows often do) add once, through their leader.
__global__ void comp_hist(const int4* __restrict__ pre, const unsigned char* __restrict__ mask, int V,
                          const int* __restrict__ lengths, const int* __restrict__ dmax,
                          const int* __restrict__ box, const long long* __restrict__ box_off,
                          unsigned int* __restrict__ hist)
{
    const int li = blockIdx.y;
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    const long long cell = dmax[li] >= 0 ? window_cell(pre, mask, V, p, lengths[li], box + 6 * li, box_off[li]) : -1;
    const unsigned group = __match_any_sync(0xffffffffu, (unsigned long long)cell);
    const int lane = threadIdx.x & 31;
    if (cell >= 0 && lane == __ffs(group) - 1) atomicAdd(hist + cell, (unsigned)__popc(group));
}

// Same windows, placed at their slot of the counting sort (cursor starts at each cell's offset).
__global__ void comp_scatter(const int4* __restrict__ pre, const unsigned char* __restrict__ mask, int V,
                             const int* __restrict__ lengths, const int* __restrict__ dmax,
                             const int* __restrict__ box, const long long* __restrict__ box_off,
                             unsigned long long* __restrict__ cursor, int* __restrict__ order)
{
    const int li = blockIdx.y;
    const int p = blockIdx.x * blockDim.x + threadIdx.x;
    const long long cell = dmax[li] >= 0 ? window_cell(pre, mask, V, p, lengths[li], box + 6 * li, box_off[li]) : -1;
    const unsigned group = __match_any_sync(0xffffffffu, (unsigned long long)cell);
    const int lane = threadIdx.x & 31;
    const int leader = __ffs(group) - 1;
    unsigned long long slot = 0;
    if (cell >= 0 && lane == leader) slot = atomicAdd(cursor + cell, (unsigned long long)__popc(group));
    slot = __shfl_sync(group, slot, leader);
    if (cell >= 0) order[slot + __popc(group & ((1u << lane) - 1u))] = p;
}

__device__ __forceinline__ bool g_interval(int da, int dc, int dmax, int* lo, int* hi)
{
    const int r = dmax - abs(da) - abs(dc);
    const int s = da + dc;
    if (r < abs(s)) return false;
    *lo = -((r + s) / 2);                                       // r + s >= 0 and r - s >= 0 here
    *hi = (r - s) / 2;
    return true;
}

// One (da, dc) row of a test's L1 ball inside its length's box b: cells [*base + *glo, *base + *ghi];
// false when that row is empty.
__device__ __forceinline__ bool cell_span(int ha, int hc, int hg, int da, int dc, int dmax,
                                          const int* __restrict__ b, long long box_base,
                                          long long* base, int* glo, int* ghi)
{
    const int a = ha + da - b[0], c = hc + dc - b[1];
    if (a < 0 || a >= b[3] || c < 0 || c >= b[4]) return false;
    int lo, hi;
    if (!g_interval(da, dc, dmax, &lo, &hi)) return false;
    *glo = max(hg + lo - b[2], 0);
    *ghi = min(hg + hi - b[2], b[5] - 1);
    *base = box_base + ((long long)a * b[4] + c) * b[5];
    return *glo <= *ghi;
}

// One thread per test row: windows in its L1 ball, one (da, dc) row of cells at a time.
__global__ void comp_rows(const int* __restrict__ row_hist, const int* __restrict__ row_li, int R,
                          const int* __restrict__ dmaxs, const int* __restrict__ box,
                          const long long* __restrict__ box_off, const long long* __restrict__ off,
                          long long* __restrict__ counts)
{
    const int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= R) return;
    const int li = row_li[j];
    const int dmax = dmaxs[li];
    long long tot = 0;
    if (dmax >= 0) {
        const int* b = box + 6 * li;
        const int ha = row_hist[3 * j], hc = row_hist[3 * j + 1], hg = row_hist[3 * j + 2];
        const int k = dmax / 2;
        for (int da = -k; da <= k; ++da) {
            for (int dc = -k; dc <= k; ++dc) {
                long long base;
                int glo, ghi;
                if (cell_span(ha, hc, hg, da, dc, dmax, b, box_off[li], &base, &glo, &ghi))
                    tot += off[base + ghi + 1] - off[base + glo];
            }
        }
    }
    counts[j] = tot;
}

// One warp per test row: its matches written at row_out[j] onwards, in (da, dc, g, slot) order.
__global__ void comp_emit(const int4* __restrict__ pre, const int* __restrict__ row_hist,
                          const int* __restrict__ row_li, int R, const int* __restrict__ lengths,
                          const int* __restrict__ dmaxs, const int* __restrict__ box,
                          const long long* __restrict__ box_off, const long long* __restrict__ off,
                          const int* __restrict__ order, const long long* __restrict__ row_out,
                          int* __restrict__ out_row, int* __restrict__ out_pos, int* __restrict__ out_d)
{
    const int j = (int)((blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5);
    const int lane = threadIdx.x & 31;
    if (j >= R) return;                                         // whole warps leave together
    const int li = row_li[j];
    const int dmax = dmaxs[li];
    if (dmax < 0) return;
    const int L = lengths[li];
    const int* b = box + 6 * li;
    const int ha = row_hist[3 * j], hc = row_hist[3 * j + 1], hg = row_hist[3 * j + 2];
    const int k = dmax / 2;
    long long o = row_out[j];
    for (int da = -k; da <= k; ++da) {
        for (int dc = -k; dc <= k; ++dc) {
            long long base;
            int glo, ghi;
            if (!cell_span(ha, hc, hg, da, dc, dmax, b, box_off[li], &base, &glo, &ghi)) continue;
            const long long q0 = off[base + glo], q1 = off[base + ghi + 1];
            for (long long q = q0 + lane; q < q1; q += 32) {
                const int p = order[q];
                const int4 x = pre[p];
                const int4 y = pre[p + L];
                const int dA = y.x - x.x - ha, dC = y.y - x.y - hc, dG = y.z - x.z - hg;
                const long long w = o + (q - q0);
                out_row[w] = j;
                out_pos[w] = p;
                out_d[w] = abs(dA) + abs(dC) + abs(dG) + abs(dA + dC + dG);
            }
            o += q1 - q0;
        }
    }
}

}  // extern "C"
