// Host emulation of the CUDA features the discovery kernels use, so that workers/discover/discover.cu is
// tested without a GPU (tests/discover/test_discover_kernels.py): every lane is a thread, a warp's lanes meet at a
// std::barrier for __syncwarp and the shuffles/ballots (exchange through a per-warp buffer), blocks run
// one after another.  Only full-warp, warp-uniform use of the collectives is supported — which is what
// the kernels do (a warp either runs a collective with all 32 lanes or has left as a whole).
#pragma once
#include <algorithm>
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __forceinline__ inline
#define __restrict__ __restrict
#define __align__(n) alignas(n)

struct mg_dim { unsigned int x = 0, y = 0, z = 0; };
inline thread_local mg_dim threadIdx, blockIdx, blockDim, gridDim;

struct mg_warp {
    std::barrier<> bar{32};
    uint64_t buf[32];
};
inline thread_local mg_warp* mg_cur_warp = nullptr;
inline thread_local unsigned char* mg_cur_smem = nullptr;

#define MG_DYN_SMEM(type, name) type* name = reinterpret_cast<type*>(mg_cur_smem)

using std::min;
using std::max;

inline void __syncwarp(unsigned int = 0xffffffffu) { mg_cur_warp->bar.arrive_and_wait(); }

template <typename V>
inline V mg_exchange(V v, int src)
{
    mg_warp* w = mg_cur_warp;
    const int lane = threadIdx.x & 31;
    uint64_t raw = 0;
    std::memcpy(&raw, &v, sizeof(V));
    w->buf[lane] = raw;
    w->bar.arrive_and_wait();
    uint64_t got = w->buf[src & 31];
    w->bar.arrive_and_wait();
    V r;
    std::memcpy(&r, &got, sizeof(V));
    return r;
}
template <typename V> inline V __shfl_xor_sync(unsigned int, V v, int o) { return mg_exchange(v, (threadIdx.x & 31) ^ o); }
template <typename V> inline V __shfl_sync(unsigned int, V v, int src) { return mg_exchange(v, src); }

inline unsigned int __ballot_sync(unsigned int, int pred)
{
    mg_warp* w = mg_cur_warp;
    const int lane = threadIdx.x & 31;
    w->buf[lane] = pred ? 1 : 0;
    w->bar.arrive_and_wait();
    unsigned int m = 0;
    for (int k = 0; k < 32; ++k) m |= (unsigned int)(w->buf[k] & 1) << k;
    w->bar.arrive_and_wait();
    return m;
}

inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
inline int __ffs(unsigned int x) { return __builtin_ffs((int)x); }
inline int atomicAdd(int* a, int v) { return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }

template <typename... A, typename... B>
void mg_launch(void (*k)(A...), int grid, int block, long smem, B... args)
{
    const int nw = (block + 31) / 32;
    for (int bx = 0; bx < grid; ++bx) {
        std::vector<unsigned char> sh(smem > 0 ? smem : 16);
        std::vector<mg_warp> warps(nw);
        std::vector<std::thread> th;
        th.reserve(block);
        for (int t = 0; t < block; ++t)
            th.emplace_back([&, t] {
                threadIdx.x = t;
                blockIdx.x = bx;
                blockDim.x = block;
                gridDim.x = grid;
                mg_cur_warp = &warps[t / 32];
                mg_cur_smem = sh.data();
                k(args...);
            });
        for (auto& x : th) x.join();
    }
}
