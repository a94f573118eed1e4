/* SPDX-License-Identifier: MIT */
/* Who may use the daemon's sockets (daemon/core/peer.h). */
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <unistd.h>

#include "core/peer.h"

static bool group_allowed(gid_t g, const config *c, bool stats)
{
    if (stats && c->has_stats_group && c->stats_group == g)
        return true;
    for (size_t i = 0; i < c->n_allow_groups; i++)
        if (c->allow_groups[i] == g)
            return true;
    return false;
}

bool daemon_peer_allowed(int fd, uid_t uid, gid_t gid, const config *c,
                         bool stats)
{
    gid_t groups[256];
    socklen_t len = sizeof(groups);

    if (uid == 0 || uid == geteuid())
        return true;
    for (size_t i = 0; i < c->n_allow_users; i++)
        if (c->allow_users[i] == uid)
            return true;
    if (group_allowed(gid, c, stats))
        return true;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) < 0)
        return false;
    for (size_t g = 0; g < len / sizeof(gid_t); g++)
        if (group_allowed(groups[g], c, stats))
            return true;
    return false;
}
