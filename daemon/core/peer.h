/* SPDX-License-Identifier: MIT */
#ifndef RETRYD_CORE_PEER_H
#define RETRYD_CORE_PEER_H

#include <stdbool.h>
#include <sys/types.h>

#include "core/config.h"

/* Whether a peer may use a socket: root, our own user, a listed user, or
 * a member (primary or supplementary) of a listed group or, on the stats
 * socket, of stats_group. The one check both sockets make. */
bool daemon_peer_allowed(int fd, uid_t uid, gid_t gid, const config *c,
                         bool stats);

#endif
