/* SPDX-License-Identifier: MIT */
/*
 * The simulator's random streams: the library's generator (xoshiro256**,
 * base/xoshiro.h) on states of the simulator's own, seeded from the run's
 * seed, so that the same seed gives the same numbers (the library's own
 * state is per thread and seeded from getrandom(2): no seed replays it).
 * Each purpose draws from its own stream (arrivals, jitter, load
 * balancing), so that a policy that draws more jitter does not shift
 * another policy's arrivals: every policy of a comparison sees the same
 * traffic.
 */
#ifndef RETRYD_SIM_RNG_H
#define RETRYD_SIM_RNG_H

#include <stdint.h>

#include "base/xoshiro.h"

typedef struct sim_rng {
    uint64_t s[4];
} sim_rng;

/* The streams of a run: the engine's draws, the balancing, then one per
 * process of the top layer for its arrivals (process n of all hosts, in
 * order, is SIM_STREAM_ARRIVALS + n). The storm benchmark's real clients
 * draw their arrivals from the same streams, so that the simulator is
 * given the very arrivals the real run had. */
enum {
    SIM_STREAM_JITTER = 1,
    SIM_STREAM_LB = 2,
    SIM_STREAM_ARRIVALS = 1000,
};

/* Stream @p stream of seed @p seed. */
void sim_rng_seed(sim_rng *r, uint64_t seed, uint64_t stream);

static inline uint64_t sim_rng_next(sim_rng *r)
{
    return retryd__xoshiro_next(r->s);
}

/* Uniform in [0, 1). */
static inline double sim_rng_unit(sim_rng *r)
{
    return (double)(sim_rng_next(r) >> 11) * 0x1p-53;
}

/* Uniform in [0, n) for n > 0. */
static inline uint64_t sim_rng_below(sim_rng *r, uint64_t n)
{
    return (uint64_t)(sim_rng_unit(r) * (double)n);
}

/* An exponential draw of mean @p mean_ns: the gap between two arrivals of
 * a Poisson stream. */
int64_t sim_rng_exp_ns(sim_rng *r, double mean_ns);

/* A retryd_random_fn over a stream (@p ctx is the sim_rng): what the
 * decision engine draws its jitter from in the simulator. */
uint64_t sim_rng_source(void *ctx);

#endif
