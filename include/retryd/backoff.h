/* SPDX-License-Identifier: MIT */
/*
 * retryd: backoff between attempts, and the Retry-After header.
 */
#ifndef RETRYD_BACKOFF_H
#define RETRYD_BACKOFF_H

#include <stddef.h>
#include <stdint.h>

#include "retryd/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** How a wait is drawn between 0 (or the base) and its exponential bound. */
typedef enum retryd_jitter {
    /** wait = uniform(0, min(max, base * 2^(retry-1))) */
    RETRYD_JITTER_FULL = 0,
    /** wait = min(max, uniform(base, prev * 3)) */
    RETRYD_JITTER_DECORRELATED = 1,
} retryd_jitter;

/** A profile's backoff; plain data owned by the caller. Nanoseconds. */
typedef struct retryd_backoff_policy {
    size_t sz; /**< sizeof(retryd_backoff_policy) (docs/abi.md) */
    retryd_jitter jitter;
    int64_t base_ns; /**< first bound, > 0 */
    int64_t max_ns;  /**< max-backoff: no wait exceeds it */
    /** The longest Retry-After waited for. A longer one denies the retry
     * (rule retry_after_exceeds_max); it is never cut to a shorter wait. */
    int64_t max_retry_after_ns;
} retryd_backoff_policy;

/** retryd's defaults: full jitter, 100 ms base, 10 s max, Retry-After 60 s. */
RETRYD_EXPORT extern const retryd_backoff_policy retryd_backoff_default;

/**
 * A source of uniformly distributed 64-bit words. Called from the thread
 * that decides; it must be safe for that use (a per-thread or per-request
 * state, or a function that is itself thread-safe).
 */
typedef uint64_t (*retryd_random_fn)(void *ctx);

/**
 * The default random source: a per-thread xoshiro256** generator seeded
 * from getrandom(2) on first use in each thread. No lock; @p ctx is unused.
 */
RETRYD_EXPORT uint64_t retryd_random_default(void *ctx);

/**
 * The wait before retry number @p retry (1 for the first retry).
 *
 * @param policy   NULL for retryd_backoff_default.
 * @param prev_ns  the previous wait, for decorrelated jitter (0 before any).
 * @param random   NULL for retryd_random_default.
 * @param ret_ns   a wait in [0, policy->max_ns]; written only on success.
 * @return 0, or RETRYD_EINVAL / RETRYD_EOPTS for a policy whose sz is
 *         wrong (docs/abi.md).
 */
RETRYD_EXPORT int retryd_backoff_delay(const retryd_backoff_policy *policy,
                                       uint32_t retry, int64_t prev_ns,
                                       retryd_random_fn random,
                                       void *random_ctx, int64_t *ret_ns);

/**
 * Parse a Retry-After field value (RFC 9110, section 10.2.3): delta-seconds,
 * or an HTTP-date in any of its three forms (IMF-fixdate, RFC 850, asctime).
 * Leading and trailing whitespace is ignored; nothing else is tolerated.
 *
 * @param value   the field value, not necessarily NUL-terminated.
 * @param len     its length in bytes.
 * @param now     the current time, seconds since the epoch (UTC); a date in
 *                the past means "retry now" (0).
 * @param max_ns  values above it are clamped to it (>= 0).
 * @param ret_ns  the wait in nanoseconds; written only on success.
 * @return 0, or RETRYD_ENOENT for a value that means "absent": empty,
 *         garbage, negative, an impossible date, or one that overflows.
 */
RETRYD_EXPORT int retryd_retry_after_parse(const char *value, size_t len,
                                           int64_t now, int64_t max_ns,
                                           int64_t *ret_ns);

#ifdef __cplusplus
}
#endif

#endif /* RETRYD_BACKOFF_H */
