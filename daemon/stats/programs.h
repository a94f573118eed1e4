/* SPDX-License-Identifier: MIT */
/*
 * The program ledger (docs/metrics.md, "Attribution"): per program name
 * (owner_process_program's), the counters of its processes that exited,
 * so that a program's figures are exited + live and never go down when
 * one of its processes goes; and, from a sample a heartbeat, the retries
 * each program was granted per upstream over the last PROGRAMS_WINDOW_S
 * seconds, which names the program that drained an upstream.
 *
 * The main thread folds a slot as it is released (owner.on_released) and
 * samples on the heartbeat; the stats thread reads. One mutex orders
 * them, so a reader counts a process either live or folded, never both
 * and never neither. The ledger reads the segment, never writes it.
 *
 * In the daemon's memory only: a daemon restart starts it afresh, which
 * Prometheus reads as a counter reset (as it reads a process's restart).
 */
#ifndef RETRYD_STATS_PROGRAMS_H
#define RETRYD_STATS_PROGRAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "segment/owner.h"

/* Program names kept; the processes of any further name count under
 * PROGRAMS_OTHER. A name, once in, stays until the daemon stops: its
 * series must not vanish. */
#define PROGRAMS_MAX 1024
#define PROGRAMS_OTHER "(other)"
/* The drained-by window, in heartbeats (seconds). */
#define PROGRAMS_WINDOW_S 10
/* (program, upstream) pairs the window follows; a pair idle for a whole
 * window with no live process is forgotten. Grants of pairs beyond the
 * bound are not attributed. */
#define PROGRAMS_PAIRS_MAX 8192

typedef struct programs programs;

/* One program's figures: live processes, exited processes, and its
 * counters (exited + live). */
typedef struct program_row {
    char name[OWNER_PROGRAM_MAX];
    uint32_t processes;
    uint64_t exited;
    uint64_t t[SEG_COUNTERS];
} program_row;

/* The program with the most retries granted on one upstream in the
 * window, and every program's grants there. */
typedef struct program_drain {
    char name[OWNER_PROGRAM_MAX];
    uint64_t grants, window_grants;
} program_drain;

programs *programs_new(const owner *o);
void programs_free(programs *p);

/* owner.on_released: fold process slot @p slot's counters into its
 * program, before the slot is hidden and freed. Main thread. */
void programs_on_released(void *arg, uint32_t slot);
/* One sample of the window, on the heartbeat. Main thread. */
void programs_sample(programs *p);

/* Every program's row into @p rows (room for PROGRAMS_MAX + 1); their
 * number. Any thread registered with RCU, inside a read-side section. */
size_t programs_read(programs *p, program_row *rows);
/* Who drained upstream @p slot of generation @p gen in the window, as of
 * the last sample; false when no retry was granted there. */
bool programs_drained(programs *p, uint32_t slot, uint32_t gen,
                      program_drain *out);

#endif
