/* SPDX-License-Identifier: MIT */
/* The one eviction order of the stats wing's two endpoints. */
#ifndef RETRYD_STATS_EVICT_H
#define RETRYD_STATS_EVICT_H

#include <stdbool.h>
#include <stdint.h>

/* The eviction order of the stats socket's and /metrics's connections
 * when places run out: whether one (@p answered: its request is in;
 * accepted at @p at_ns) goes before another (@p other_answered,
 * @p other_at_ns): one still sending its request before one being
 * answered, then the oldest. */
static inline bool daemon_evict_before(bool answered, uint64_t at_ns,
                                       bool other_answered,
                                       uint64_t other_at_ns)
{
    return (other_answered && !answered) ||
           (other_answered == answered && at_ns < other_at_ns);
}

#endif
