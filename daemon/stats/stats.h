/* SPDX-License-Identifier: MIT */
/*
 * The stats wing: the stats thread and its socket (stats.c), the snapshot
 * that socket and /metrics both read (snapshot.c), the /metrics endpoint
 * (metrics.c). The wing only reads the segment and the registry: the
 * layer gate (tests/layers) refuses a reference from it to anything that
 * changes upstreams or slots.
 */
#ifndef RETRYD_STATS_H
#define RETRYD_STATS_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"

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

/* stats.c: the stats thread. It serves many readers at once (its own
 * epoll), each with a deadline; when all STATS_CONNECTIONS_MAX are taken
 * the oldest is closed for the newcomer. */
#define STATS_CONNECTIONS_MAX 64
/* The request must arrive this soon after the connection is accepted. */
#define STATS_REQUEST_TIMEOUT_MS 1000
/* The reply must be read this soon after it was built. */
#define STATS_REPLY_TIMEOUT_MS 5000
/* Reply bytes waiting for all readers together; a request that would go
 * over gets an error instead. */
#define STATS_OUTPUT_TOTAL_MAX (64u * 1024 * 1024)
int stats_start(server *d);
void stats_stop(server *d);

/* Per Counters message: denials (index 0 unused, as the proto's
 * Counters.denied is indexed by denial reason), then evidence. */
#define STATS_DENIED (SEG_C_DENIED_COUNT + 1)
#define STATS_NUMBERS (STATS_DENIED + SEG_C_EVIDENCE_COUNT)

typedef struct stats_build {
    const server *d;
    uint64_t (*totals)[SEG_COUNTERS];
    Retryd__UpstreamStats *ups;
    Retryd__UpstreamStats **up_ptrs;
    /* Copies: a registry entry may be freed once the read section ends,
     * before the reply is packed. */
    char (*names)[SEG_NAME_MAX + 1];
    Retryd__Params *params;
    Retryd__Counters *counters;
    uint64_t *numbers; /* denied and evidence arrays */
    size_t n, cap;
} stats_build;

/* A stats reply and the arrays it points into, copied out of one RCU
 * read-side section: what the stats socket packs and /metrics renders.
 * Only threads registered with RCU (the stats thread) take one. */
typedef struct stats_snapshot {
    Retryd__StatsReply rep;
    Retryd__SegmentHealth health;
    stats_build b;
    Retryd__ProcessStats *ps;
    Retryd__ProcessStats **pptr;
    Retryd__Counters *pcs;
    uint64_t *pnum;
    char (*programs)[OWNER_PROGRAM_MAX];
} stats_snapshot;
int stats_snapshot_take(server *d, bool processes, stats_snapshot *s);
void stats_snapshot_free(stats_snapshot *s);

#endif
