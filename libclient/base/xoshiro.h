/* SPDX-License-Identifier: MIT */
/*
 * xoshiro256** (Blackman and Vigna, 2018) and the splitmix64 that seeds
 * it: one copy of the generator for whoever keeps a state. The engine's
 * default random source (decide/backoff.c) keeps one per thread, seeded
 * from getrandom(2); the storm simulator (sim/rng.h) keeps one per stream,
 * seeded from its run's seed, so that a seed replays a run. Inline, so
 * that the backoff's draw stays in line in the engine's hot path.
 */
#ifndef RETRYD_BASE_XOSHIRO_H
#define RETRYD_BASE_XOSHIRO_H

#include <stdint.h>

/* The next word of splitmix64 from @p x, which it advances: four of them
 * make a full, never all-zero, xoshiro state from one seed word. */
static inline uint64_t retryd__splitmix64(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

static inline uint64_t retryd__xoshiro_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

/* The next word of the generator whose state is @p s (not all zero). */
static inline uint64_t retryd__xoshiro_next(uint64_t s[4])
{
    uint64_t out = retryd__xoshiro_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = retryd__xoshiro_rotl(s[3], 45);
    return out;
}

#endif
