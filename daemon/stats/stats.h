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

/* stats.c: the stats thread. It serves many readers at once (its own
 * epoll), each with a deadline; when all STATS_CONNECTIONS_MAX are taken
 * the oldest is closed for the newcomer. */
#define STATS_CONNECTIONS_MAX 64
/* The request must arrive stats_request_timeout_ms after the connection
 * is accepted, the reply be read stats_reply_timeout_ms after it was built
 * (configuration keys, core/config.h). */
/* Reply bytes waiting for all readers together; a request that would go
 * over gets an error instead. */
#define STATS_OUTPUT_TOTAL_MAX (64u * 1024 * 1024)
int stats_start(server *d);
void stats_stop(server *d);

#endif
