/* SPDX-License-Identifier: MIT */
/* The stats snapshot (snapshot.c): what the stats socket packs and
 * /metrics renders. */
#ifndef RETRYD_STATS_SNAPSHOT_H
#define RETRYD_STATS_SNAPSHOT_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "stats/fleet_stats.h"
#include "stats/programs.h"

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
    Retryd__UpstreamHealth *health;
    Retryd__UpstreamHedge *hedge;
    uint64_t *numbers; /* denied and evidence arrays */
    Retryd__DrainedBy *drained;
    Retryd__UpstreamFleet *fleet; /* docs/fleet.md */
    char (*drained_names)[OWNER_PROGRAM_MAX];
    size_t n, cap;
} stats_build;

/* A stats reply and the arrays it points into, copied out of one RCU
 * read-side section: what the stats socket packs and /metrics renders.
 * Only threads registered with RCU (the stats thread) take one. */
typedef struct stats_snapshot {
    Retryd__StatsReply rep;
    Retryd__SegmentHealth health;
    char finding[384]; /* health.last_finding's bytes */
    stats_build b;
    Retryd__ProcessStats *ps;
    Retryd__ProcessStats **pptr;
    Retryd__Counters *pcs;
    uint64_t *pnum;
    char (*programs)[OWNER_PROGRAM_MAX];
    /* Per program (programs.h): the ledger's rows and their messages. */
    program_row *rows;
    stats_fleet fleet; /* the fleet tier's link (fleet_stats.h) */
    Retryd__ProgramStats *prs;
    Retryd__ProgramStats **prptr;
    Retryd__Counters *prc;
    uint64_t *prnum;
} stats_snapshot;
int stats_snapshot_take(server *d, bool processes, stats_snapshot *s);
void stats_snapshot_free(stats_snapshot *s);

#endif
