/* SPDX-License-Identifier: MIT */
/*
 * The upstream table's changes (upstreams.c): registration by a client,
 * retirement, the configuration applied at startup and reload, adoption
 * of an existing segment's upstreams. Main thread only; the stats wing
 * may not call these (tests/layers).
 */
#ifndef RETRYD_SEGMENT_UPSTREAMS_H
#define RETRYD_SEGMENT_UPSTREAMS_H

#include "daemon.h"

/* Registration, shared by the control handler, startup and reload. It
 * refuses a malformed name (RETRYD_EINVAL), so a client's name is checked
 * here; the configuration and an adopted segment check their own. */
int daemon_register(server *d, const char *name, const budget_params *given,
                    reg_entry *ret);

/* daemon_register() for a client of @p uid: a new upstream is refused
 * (RETRYD_EFULL, *@p ret_quota set) once that user registered
 * upstreams_per_uid of them, so one user cannot take the whole table. */
int daemon_register_for(server *d, uid_t uid, const char *name,
                        const budget_params *given, reg_entry *ret,
                        bool *ret_quota);

int daemon_retire(server *d, const char *name);

/* Heartbeat: retire the upstreams a client registered that no attached
 * process has an entry for and whose counters have not moved for
 * upstream_idle_retire, so that a user's registrations do not hold the
 * table (and its upstreams_per_uid) forever. Configured ones stay. */
void daemon_retire_idle(server *d, uint64_t now_ns);
/* Configured upstreams get the configuration's parameters (registered if
 * new); any other registered upstream keeps its own. */
void daemon_apply_config(server *d);
void daemon_adopt_upstreams(server *d);

#endif
