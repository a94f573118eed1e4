/* SPDX-License-Identifier: MIT */
/*
 * The optional /metrics endpoint (docs/daemon.md, "Metrics endpoint"):
 * libmicrohttpd in its external-epoll mode, driven by the stats thread's
 * loop, so it reads exactly what the stats socket reads, inside the same
 * RCU read-side sections, and a peer of the metrics port can never hold
 * the main thread (the control socket, the reaper, the heartbeat).
 *
 * The main thread opens an endpoint (binds and listens: at setup, before
 * READY, and when a reload changes metrics_listen) and hands it over; the
 * stats thread takes it, closes the one it replaces, accepts connections
 * itself (the limits below: MHD only ever sees connections we admit) and
 * runs MHD.
 */
#ifndef RETRYD_METRICS_H
#define RETRYD_METRICS_H

#include <stdbool.h>
#include <stdint.h>

/* Connections at once, all peers; a newcomer beyond it closes the oldest
 * (one still sending its request first). */
#define METRICS_CONNECTIONS_MAX 32
/* Connections of one address (on loopback, usually every peer's): half,
 * so a newcomer of another address always finds room. */
#define METRICS_PER_IP_MAX (METRICS_CONNECTIONS_MAX / 2)
/* The request's headers must be whole metrics_request_timeout_ms after
 * the connection is accepted (a slowloris is cut off), the reply read
 * metrics_reply_timeout_ms after it was built (configuration keys,
 * core/config.h; libmicrohttpd's own timeout, a backstop, is taken from
 * the latter when the endpoint opens). */
/* Accepted per turn of the stats loop, after the requests that arrived
 * were read: half of one address's share, so that a newcomer sees two
 * turns' reads before as many newcomers after it as its address holds
 * could evict it (a scraper among slowloris peers of its own address). */
#define METRICS_ACCEPT_BATCH (METRICS_PER_IP_MAX / 2)

struct server;
struct config;
typedef struct metrics metrics;

/* Main thread: open the endpoint of @p c at setup, when it has one, and
 * hand it to the stats thread. -1 when it cannot listen. */
int metrics_setup(struct server *d);
/* Main thread, on reload from @p old to @p new: a changed metrics_listen
 * opens the new endpoint and hands it over (the old one closes), or turns
 * it off; when the new address cannot be bound, the old endpoint stays
 * and @p new is made to say so. */
void metrics_reload(struct server *d, const struct config *old,
                    struct config *new);

/* Stats thread. metrics_take() installs a handed-over endpoint into the
 * loop's epoll @p epfd (closing @p *cur); tags tell its descriptors'
 * events apart. */
void metrics_take(struct server *d, metrics **cur, int epfd,
                  uint64_t listen_tag, uint64_t mhd_tag);
void metrics_accept(metrics *m);
/* Run MHD (whatever is ready), then close connections past deadlines. */
void metrics_run(metrics *m);
/* Milliseconds until metrics_run() is due again; -1: nothing pending. */
int metrics_timeout_ms(metrics *m);
void metrics_close(metrics *m); /* accepts NULL */
/* Teardown, after the stats thread stopped: what was never taken. */
void metrics_drop_pending(struct server *d);

#endif
