/* SPDX-License-Identifier: MIT */
/*
 * The fleet tier in retrydctl's views (docs/fleet.md): stats' table and
 * JSON, doctor's check and top's header share these, so each says the
 * same of the link and of an upstream's part.
 */
#ifndef RETRYD_CTL_FLEET_H
#define RETRYD_CTL_FLEET_H

#include <stdbool.h>
#include <stddef.h>

#include "retryd.pb-c.h"

/* One line on the link ("fleet 'NAME' as HOST through redis ADDR: STATE
 * ..."), into @p out; "" when the reply has no fleet. */
void ctl_fleet_summary(const Retryd__StatsReply *r, char *out, size_t len);

/* An upstream's part ("fleet: floor 2.50/s = 12.5% of 20.00 ..."), into
 * @p out; "" when it takes no part. */
void ctl_fleet_upstream_line(const Retryd__UpstreamStats *u, char *out,
                             size_t len);

/* The "fleet" members of stats --json: the daemon's (null when off) and
 * an upstream's (null when it takes no part). */
void ctl_fleet_json(const Retryd__StatsReply *r);
void ctl_fleet_json_upstream(const Retryd__UpstreamStats *u);

/* Whether the reply's fleet is in fallback (false without one). */
bool ctl_fleet_fallback(const Retryd__StatsReply *r);

#endif
