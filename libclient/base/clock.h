/* SPDX-License-Identifier: MIT */
/*
 * The library's and the daemon's clocks, in nanoseconds. Both are vDSO
 * reads of a few nanoseconds; neither enters the kernel.
 *
 * Both read the host's monotonic time, whatever time namespace the process
 * is in: a namespace's monotonic offset (a container's clock set ahead or
 * behind, time_namespaces(7)) is taken away. Refill stamps and the
 * daemon's heartbeat in the segment are compared across processes; a
 * process ahead of the others read one cap's refill per stamp, and the
 * daemon reset its "future" stamps as damage every second.
 */
#ifndef RETRYD_CLOCK_H
#define RETRYD_CLOCK_H

#include <stdint.h>
#include <time.h>

/* This process's time namespace's CLOCK_MONOTONIC offset against the
 * host's (/proc/self/timens_offsets, read once when the library or the
 * daemon is loaded; 0 in the host's namespace or without the file). */
extern int64_t retryd__clock_offset_ns;

/* CLOCK_MONOTONIC_COARSE: ticking every 1-4 ms, far finer than any
 * budget floor needs, and what bucket refills are stamped with. */
static inline uint64_t retryd__clock_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec -
           (uint64_t)retryd__clock_offset_ns;
}

/* CLOCK_MONOTONIC: for deadlines and timeouts, which need better than the
 * coarse clock's milliseconds. */
static inline uint64_t retryd__clock_monotonic_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * UINT64_C(1000000000) + (uint64_t)ts.tv_nsec -
           (uint64_t)retryd__clock_offset_ns;
}

/* CLOCK_REALTIME in milliseconds since the epoch: for what is shown to
 * people or shared with other hosts (the daemon's stamps in the segment,
 * the fleet tier's intervals), never for a deadline. */
static inline uint64_t retryd__clock_realtime_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The same, signed: the executor's deadlines, where a time left may go
 * negative. */
static inline int64_t retryd__now_ns(void)
{
    return (int64_t)retryd__clock_monotonic_ns();
}

/* @p t + @p d for a duration d >= 0, saturating at INT64_MAX: a caller's
 * "no deadline" (INT64_MAX) must not overflow into the past. */
static inline int64_t retryd__add_sat(int64_t t, int64_t d)
{
    return d > INT64_MAX - t ? INT64_MAX : t + d;
}

#endif
