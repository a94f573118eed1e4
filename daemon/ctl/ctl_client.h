/* SPDX-License-Identifier: MIT */
/* retrydctl: talking to the daemon's sockets. */
#ifndef RETRYD_CTL_CLIENT_H
#define RETRYD_CTL_CLIENT_H

#include <stdbool.h>

#include "retryd.pb-c.h"

#define CTL_DEFAULT_STATS_SOCKET "/run/retryd/stats.sock"
#define CTL_STATS_SOCKET_ENV "RETRYD_STATS_SOCKET"

/* Socket paths from --control-socket / --stats-socket, the environment,
 * or the defaults. */
typedef struct ctl_sockets {
    const char *control;
    const char *stats;
} ctl_sockets;

/* Parses the common socket options out of argv (removing them). */
void ctl_sockets_from_args(int *argc, char **argv, ctl_sockets *ret);

/* Fetch statistics; *ret is freed with retryd__stats_reply__free_unpacked.
 * Prints the reason and returns a negative code on failure. */
int ctl_fetch_stats(const ctl_sockets *s, bool processes,
                    Retryd__StatsReply **ret);

/* One control request after a hello; prints the reason on failure. */
int ctl_control(const ctl_sockets *s, const Retryd__ControlRequest *req);

int ctl_stats_main(int argc, char **argv);
int ctl_upstreams_main(int argc, char **argv);
int ctl_drain_main(int argc, char **argv);
int ctl_retire_main(int argc, char **argv);

#endif
