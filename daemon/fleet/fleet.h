/* SPDX-License-Identifier: MIT */
/*
 * The fleet wing (docs/fleet.md): the daemon's link to the fleet's Redis,
 * in a thread of its own, so that neither the main loop nor any client
 * ever waits on Redis. Once per sync interval the thread publishes, per
 * upstream that takes part, this host's counts into the fleet's keys and
 * reads back the fleet's sums in one round trip; the main thread then
 * writes what follows for this host (its share of the fleet floor, the
 * other hosts' throttle windows, the fleet's hold) into each slot's fleet
 * block. A sync that fails, or none in two intervals, and the host is on
 * its own budgets again.
 *
 * The thread only reads the segment and the registry (inside RCU read-side
 * sections); everything it learns reaches the segment through the main
 * thread (fleet_wake()), the segment's one writer.
 */
#ifndef RETRYD_FLEET_H_WING
#define RETRYD_FLEET_H_WING

#include <stddef.h>
#include <stdint.h>

#include "daemon.h"

/* Start the thread when the configuration has a [fleet] section (nothing
 * otherwise); its wake descriptor joins the main loop's epoll @p epfd.
 * 0 or a negative code. */
int fleet_start(server *d, int epfd);

/* Stop the thread and empty every slot's fleet block; accepts a daemon
 * whose fleet never started. */
void fleet_stop(server *d);

/* Main thread: the fleet thread said a sync's outcome is ready
 * (WATCH_FLEET): write it into the slots. */
void fleet_wake(server *d);

/* Main thread, after a reload published a new configuration: start, stop
 * or re-link the thread as the [fleet] section now says. */
void fleet_reconfigure(server *d, int epfd);

/*
 * Log in to @p c's Redis and try every command a sync sends on a key of
 * the fleet's namespace, within @p timeout_ns: 0 it works; RETRYD_EPERM
 * Redis refused (a wrong password, an unknown user, an ACL that forbids a
 * command or the keys, a Redis too old for them), with its words in
 * @p err; RETRYD_EIO or RETRYD_ETIMEDOUT it could not be reached (nothing
 * known). For the start, a reload and --check-config.
 */
int fleet_login_check(const fleet_conf *c, uint64_t timeout_ns, char *err,
                      size_t err_len);

/* Whether two [fleet] sections reach Redis the same way (address,
 * credentials): a reload that changes this must log in anew. */
bool fleet_same_link(const fleet_conf *a, const fleet_conf *b);

#endif
