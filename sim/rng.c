/* SPDX-License-Identifier: MIT */
/* The simulator's random streams; see rng.h. */
#include "sim/rng.h"

#include <math.h>

void sim_rng_seed(sim_rng *r, uint64_t seed, uint64_t stream)
{
    /* Streams of one seed start far apart: splitmix64 never repeats a
     * state within 2^64 steps, and the stream number is mixed in first. */
    uint64_t x = seed ^ (stream * UINT64_C(0xd1b54a32d192ed03));
    for (int i = 0; i < 4; i++)
        r->s[i] = retryd__splitmix64(&x);
}

int64_t sim_rng_exp_ns(sim_rng *r, double mean_ns)
{
    /* 1 - u is in (0, 1]: the logarithm is finite. */
    double gap = -log(1.0 - sim_rng_unit(r)) * mean_ns;
    return gap < 1.0 ? 1 : (int64_t)gap;
}

uint64_t sim_rng_source(void *ctx)
{
    return sim_rng_next(ctx);
}
