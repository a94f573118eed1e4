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

/* The environment's socket paths, or the defaults (the options of
 * ctl_opts.h override them). */
void ctl_sockets_init(ctl_sockets *ret);

/* Room for the reason a quiet call writes. */
#define CTL_ERR_MAX 256

/* Fetch statistics; *ret is freed with retryd__stats_reply__free_unpacked.
 * Prints the reason and returns a negative code on failure. */
int ctl_fetch_stats(const ctl_sockets *s, bool processes,
                    Retryd__StatsReply **ret);

/* ctl_fetch_stats without a word on stderr: the reason goes to @p err
 * (retrydctl top shows it in its window). */
int ctl_fetch_stats_quiet(const ctl_sockets *s, bool processes,
                          Retryd__StatsReply **ret, char *err, size_t len);

/* A hello on the control socket and nothing else: 0 when the daemon
 * answers and serves this user (its version in @p version), RETRYD_EPERM
 * when the socket or the daemon refuses it, another negative code when
 * nothing answers; the reason in @p err. Prints nothing. */
int ctl_hello(const char *control, char *version, size_t vlen, char *err,
              size_t len);

/* One control request after a hello; prints the reason on failure. */
int ctl_control(const ctl_sockets *s, const Retryd__ControlRequest *req);

int ctl_stats_main(int argc, char **argv);
int ctl_upstreams_main(int argc, char **argv);
int ctl_drain_main(int argc, char **argv);
int ctl_retire_main(int argc, char **argv);

#endif
