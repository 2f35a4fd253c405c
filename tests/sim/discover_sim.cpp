// The discovery kernels built for the host (tests/sim/cuda_sim.h), one C entry point per kernel taking the
// launch shape first and then exactly the kernel's arguments.
#define MG_SIM
#include "cuda_sim.h"
#include "../../workers/discover/discover.cu"

typedef unsigned long long u64;
typedef unsigned char u8;

extern "C" {
void sim_gibbs_chains(int g, int b, long s, const u64* wcode, const u8* valid, const int* vtab, const int* nvalid,
                      int T, int P, int l, const float* LW, const double* F, int* pos, int* best_pos, int* counts_out,
                      double* score_out, int* steps_out, int C, long long first, int random_starts, int max_steps,
                      int first_check, int every, int limit, int sample, u64 seed)
{
    mg_launch(gibbs_chains, g, b, s, wcode, valid, vtab, nvalid, T, P, l, LW, F, pos, best_pos, counts_out, score_out,
              steps_out, C, first, random_starts, max_steps, first_check, every, limit, sample, seed);
}

void sim_ld_proxy(int g, int b, long s, const u64* wcode, const u8* valid, int T, int P, int l, const u64* cons, int C,
                  int dthr, int* cnt_out, int* tot_out)
{
    mg_launch(ld_proxy, g, b, s, wcode, valid, T, P, l, cons, C, dthr, cnt_out, tot_out);
}

void sim_ld_climb(int g, int b, long s, const u64* wcode, const u8* valid, int T, int P, int l, u64* cons, int C, int d,
                  int max_moves, int* cnt_out, int* tot_out, int* moves_out)
{
    mg_launch(ld_climb, g, b, s, wcode, valid, T, P, l, cons, C, d, max_moves, cnt_out, tot_out, moves_out);
}

void sim_shift_consensus(int g, int b, long s, const u64* wcode, const u8* valid, int T, int P, int Pf, int both, int l,
                         const int* pos, const u8* use, int C, const int* shifts, int ns, u64* out, int* nsites_out)
{
    mg_launch(shift_consensus, g, b, s, wcode, valid, T, P, Pf, both, l, pos, use, C, shifts, ns, out, nsites_out);
}
}
