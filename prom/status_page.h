/* SPDX-License-Identifier: MIT */
/*
 * The status page of the metrics listener's GET / (docs/operating.md,
 * "The status page"): one HTML document rendered from a stats reply, for a
 * person with a browser, as HAProxy's stats page or nginx's stub_status
 * are. No external asset and no script: the styles are inline and each
 * upstream's balance history is an inline SVG, so the page reads the same
 * in a text browser, behind a proxy or from a saved file.
 *
 * It lives beside the Prometheus renderer (prom.h) because it is another
 * view of the same reply and needs the engine's denial names, which the
 * daemon reaches only through this layer. Nothing here does I/O but write
 * to the FILE it is given.
 *
 * The history is the page's own memory: the daemon adds one sample each
 * STATUS_HISTORY_INTERVAL_MS (the stats thread, which owns it); the page
 * draws the last STATUS_HISTORY_POINTS of each upstream's balance, and its
 * rates are over the last interval. It holds at most
 * STATUS_HISTORY_UPSTREAMS upstreams (a fixed size, whatever a neighbour
 * registers); the page says when one has none.
 */
#ifndef RETRYD_STATUS_PAGE_H
#define RETRYD_STATUS_PAGE_H

#include <stdint.h>
#include <stdio.h>

#include "retryd.pb-c.h"

#define STATUS_HISTORY_INTERVAL_MS 1000
#define STATUS_HISTORY_POINTS 300 /* five minutes */
#define STATUS_HISTORY_UPSTREAMS 64

typedef struct status_history status_history;

/* A history with nothing in it, or NULL (out of memory). */
status_history *status_history_new(void);
void status_history_free(status_history *h); /* accepts NULL */

/* Record @p r (its upstreams' balances and counters) as the sample taken
 * at @p now_ns (a monotonic clock). Upstreams gone from @p r are
 * forgotten. */
void status_history_add(status_history *h, const Retryd__StatsReply *r,
                        uint64_t now_ns);

/* Write the page of @p r (with processes, when it has them) and the
 * history @p h (NULL: none) to @p out; @p where is the listener's address,
 * for the title. Returns 0, or -1 when a write failed. */
int status_page_render(FILE *out, const Retryd__StatsReply *r,
                       const status_history *h, const char *where);

#endif
