/* SPDX-License-Identifier: MIT */
/*
 * The fleet tier's block of each upstream slot, as the segment's owner
 * keeps it (docs/fleet.md): written by the main thread with what the fleet
 * wing learned, copied, and policed at every heartbeat like the rest of
 * the slot. The fleet wing's thread reads only the hold it must not
 * publish as this host's own (owner_fleet_hold_written).
 */
#ifndef RETRYD_SEGMENT_FLEET_SLOTS_H
#define RETRYD_SEGMENT_FLEET_SLOTS_H

#include <stdbool.h>
#include <stdint.h>

#include "segment/owner.h"
#include "shared/fleet.h"

/* The daemon's copy of one slot's block. */
typedef struct owner_fleet {
    fleet_view copy; /* main thread only */
    /* The highest floor share written since the ledger audit last looked
     * (audit.c): a claim may pay at any floor in force meanwhile. Main
     * thread only. */
    uint64_t floor_seen;
    /* The fleet's hold last written into the slot's pushback_until_ns
     * (coarse ns, 0 none), for the fleet thread to tell it from a hold
     * this host's own processes set. */
    _Atomic uint64_t hold_written;
} owner_fleet;

/* The copies, and every slot's block emptied: a view a previous daemon
 * wrote is not this one's to renew (owner_open()). */
int owner_fleet_open(owner *o);
void owner_fleet_free(owner *o); /* accepts a half-built owner */

/* Write @p v into slot @p slot, when it is still the ACTIVE slot of
 * generation @p gen (an upstream retired and its slot reused meanwhile
 * gets nothing of the old one's view). Main thread. */
void owner_fleet_write(owner *o, uint32_t slot, uint32_t gen,
                       const fleet_view *v);

/* Empty slot @p slot's block: a view the host stops applying (fallback).
 * What it remembers of the fleet's hold stays, as the hold stays in the
 * slot. Main thread. */
void owner_fleet_clear(owner *o, uint32_t slot);

/* owner_fleet_clear(), and the hold forgotten too: a slot given out or
 * retired, whose hold goes with it. Main thread. */
void owner_fleet_forget(owner *o, uint32_t slot);

/*
 * Hold every process's retries to slot @p slot's upstream until @p until_ns
 * (coarse), as a Retry-After seen here would, when the upstream's
 * pushback is on; no further ahead than its pushback_max. The latest
 * deadline wins, the host's own included. Main thread.
 */
void owner_fleet_hold(owner *o, uint32_t slot, uint32_t gen, uint64_t until_ns);

/* The fleet's hold last written into slot @p slot (0 none); any thread. */
uint64_t owner_fleet_hold_written(const owner *o, uint32_t slot);

/* Put slot @p slot's block back from the copy when a neighbour changed
 * it; true when it did. The heartbeat's (owner_police). */
bool owner_fleet_police(owner *o, uint32_t slot);

#endif
