/* SPDX-License-Identifier: MIT */
/*
 * The Prometheus text exposition (format 0.0.4) of a stats reply: the one
 * renderer behind `retrydctl stats --prometheus` and the daemon's /metrics
 * endpoint, so both always print the same families. It names denial
 * reasons and evidence with the engine's stable names, but its header
 * includes no decision header (the daemon may include it).
 */
#ifndef RETRYD_PROM_H
#define RETRYD_PROM_H

#include <stdio.h>

#include "retryd.pb-c.h"

/* How per-process series are labelled. */
typedef enum prom_per_process {
    PROM_PER_PROGRAM, /* program="...", summed over its processes (bounded) */
    PROM_PER_PID,     /* pid="..." and program="...": one series a process */
    PROM_PER_NONE,    /* no per-process series */
} prom_per_process;

/* "program", "pid" or "none" to the mode; -1 for anything else. */
int prom_per_process_parse(const char *s);

/* Write @p r to @p out. Returns 0, or -1 when a write failed. */
int prom_render(FILE *out, const Retryd__StatsReply *r, prom_per_process mode);

#endif
