/* SPDX-License-Identifier: MIT */
/*
 * The fleet tier in a stats reply (docs/fleet.md): the link's state, which
 * the fleet thread keeps in the server, and each upstream's part, read
 * from its slot's fleet block. Reads only.
 */
#ifndef RETRYD_STATS_FLEET_H
#define RETRYD_STATS_FLEET_H

#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"

/* The reply's fleet message and the strings it points to. */
typedef struct stats_fleet {
    Retryd__FleetStatus st;
    char state[16];
    char redis[FLEET_ADDRESS_MAX];
    char name[FLEET_NAME_MAX + 1];
    char host_id[FLEET_HOST_ID_MAX + 1];
    char error[FLEET_ERROR_MAX];
} stats_fleet;

/* The link's state into @p sf, and @p rep->fleet pointed at it when
 * configuration @p c has a [fleet] section. A link with no sync for two
 * intervals is said to be in fallback whatever its thread last wrote
 * (its clients are: the views lapsed). */
void stats_fleet_fill(server *d, const config *c, stats_fleet *sf,
                      Retryd__StatsReply *rep);

/* Upstream @p e's part, from slot @p s at @p now_ns (coarse), into
 * @p out; false when the upstream takes no part in the fleet tier. */
bool stats_upstream_fleet(const reg_entry *e, seg_upstream *s, uint64_t now_ns,
                          Retryd__UpstreamFleet *out);

#endif
