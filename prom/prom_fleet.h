/* SPDX-License-Identifier: MIT */
/* The fleet tier's Prometheus families (prom_fleet.c), rendered by
 * prom_render() after the others; nothing when the reply has no fleet. */
#ifndef RETRYD_PROM_FLEET_H
#define RETRYD_PROM_FLEET_H

#include <stdio.h>

#include "retryd.pb-c.h"

void prom_render_fleet(FILE *out, const Retryd__StatsReply *r);

#endif
