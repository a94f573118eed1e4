/* SPDX-License-Identifier: MIT */
/*
 * Backoff between attempts, and the default random source.
 *
 * The two jitter formulas are those of Marc Brooker, "Exponential Backoff And
 * Jitter", AWS Architecture Blog, 4 March 2015:
 *
 *   full jitter:         sleep = random_between(0, min(cap, base * 2 **
 * attempt)) decorrelated jitter: sleep = min(cap, random_between(base, sleep *
 * 3))
 *
 * Full jitter spreads a burst of clients evenly over the window; decorrelated
 * jitter grows the window from the previous sleep rather than from the attempt
 * number, and keeps waits at least `base` apart.
 */
#include <stdbool.h>
#include <string.h>
#include <sys/random.h>

#include "base/macros.h"
#include "base/xoshiro.h"
#include "decide/decide.h"
#include "retryd/backoff.h"
#include "retryd/common.h"

const retryd_backoff_policy retryd_backoff_default = {
    .sz = sizeof(retryd_backoff_policy),
    .jitter = RETRYD_JITTER_FULL,
    .base_ns = 100 * 1000 * 1000LL,
    .max_ns = 10 * 1000 * 1000 * 1000LL,
    .max_retry_after_ns = 60 * 1000 * 1000 * 1000LL,
};

/*
 * xoshiro256** (base/xoshiro.h): fast, small state, good enough for jitter.
 * One state per thread, so no lock and no sharing between threads.
 */
typedef struct rng_state {
    uint64_t s[4];
    bool seeded;
} rng_state;

static _Thread_local rng_state tls_rng;

static void rng_seed(rng_state *st)
{
    uint64_t seed = 0;

    /* A failed getrandom (seccomp, very old kernel) still leaves a usable,
     * per-thread-distinct seed: the state's own address. Jitter only needs
     * to decorrelate clients, not to be secret. */
    if (getrandom(&seed, sizeof(seed), GRND_NONBLOCK) != (ssize_t)sizeof(seed))
        seed = (uint64_t)(uintptr_t)st ^ 0x5deece66dULL;
    for (int i = 0; i < 4; i++)
        st->s[i] = retryd__splitmix64(&seed);
    st->seeded = true;
}

/* The next word of this thread's generator; inline in the backoff below,
 * the engine's hot path, and behind retryd_random_default(). */
static inline uint64_t rng_next(void)
{
    rng_state *st = &tls_rng;

    if (!st->seeded)
        rng_seed(st);
    return retryd__xoshiro_next(st->s);
}

uint64_t retryd_random_default(void *ctx)
{
    (void)ctx;
    return rng_next();
}

/*
 * A uniform integer in [0, span], by Lemire's multiply-shift (no division;
 * the bias is below span / 2^64, far below anything a wait can show).
 */
static int64_t uniform_upto(uint64_t r, int64_t span)
{
    __extension__ typedef unsigned __int128 u128;

    return (int64_t)(((u128)r * ((uint64_t)span + 1)) >> 64);
}

static int64_t full_jitter_cap(int64_t base, int64_t max, uint32_t retry)
{
    uint32_t shift = retry > 0 ? retry - 1 : 0;

    /* base * 2^shift, saturating at max without ever overflowing. */
    if (shift >= 62 || base > (max >> shift))
        return max;
    return base << shift;
}

/* The delay under a policy already known to be this library's size. */
int64_t retryd__backoff_delay(const retryd_backoff_policy *p, uint32_t retry,
                              int64_t prev_ns, retryd_random_fn random,
                              void *random_ctx)
{
    uint64_t r = random ? random(random_ctx) : rng_next();
    int64_t base = p->base_ns > 0 ? p->base_ns : 1;
    int64_t max = p->max_ns > 0 ? p->max_ns : 0;

    if (base > max)
        return max;
    if (p->jitter == RETRYD_JITTER_DECORRELATED) {
        int64_t prev = prev_ns > base ? prev_ns : base;
        /* prev * 3 saturates at max: above it the min() would cut anyway. */
        int64_t hi = prev > max / 3 ? max : prev * 3;
        int64_t d = base + uniform_upto(r, hi - base);
        return d < max ? d : max;
    }
    return uniform_upto(r, full_jitter_cap(base, max, retry));
}

int retryd_backoff_delay(const retryd_backoff_policy *policy, uint32_t retry,
                         int64_t prev_ns, retryd_random_fn random,
                         void *random_ctx, int64_t *ret_ns)
{
    retryd_backoff_policy local;
    const retryd_backoff_policy *p = &retryd_backoff_default;

    if (ret_ns == NULL)
        return RETRYD_EINVAL;
    if (policy != NULL) {
        int r = RETRYD_OPTS_VIEW(p, &local, policy, RETRYD_BACKOFF_MIN_SZ);
        if (r < 0)
            return r;
    }
    *ret_ns = retryd__backoff_delay(p, retry, prev_ns, random, random_ctx);
    return 0;
}
