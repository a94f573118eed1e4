/*
 * The daemon's side of the segment: creating or adopting it, allocating
 * and retiring upstream slots, allocating process slots and folding a gone
 * process's counters into its upstreams. Only the daemon's main thread
 * calls the writers; the stats thread calls owner_collect().
 */
#ifndef RETRYD_OWNER_H
#define RETRYD_OWNER_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "shared/segment.h"

typedef struct owner {
    int fd;
    void *map;
    size_t size;
    seg_view view;
    uint64_t generation;
} owner;

/*
 * Open the segment at c->segment_path: adopt a compatible one (same layout,
 * same capacities, owned by us and not accessible to others), keeping its
 * balances and counters; otherwise retire it (unlink) and create a new one.
 * *ret_adopted tells which. The file is mode 0600: clients receive it only
 * as a descriptor, over the control socket, after authorisation.
 */
int owner_open(owner *o, const config *c, bool *ret_adopted, char *why,
               size_t why_len);
void owner_close(owner *o); /* unmaps; the file stays for the next server */

void owner_heartbeat(owner *o);
void owner_set_draining(owner *o, bool on);
bool owner_draining(const owner *o);

/* A new upstream slot: parameters, name, initial balance (one second of
 * floor), then published ACTIVE. RETRYD_EFULL when none is free. */
int owner_upstream_alloc(owner *o, const char *name, const budget_params *p,
                         uint32_t *ret_slot, uint32_t *ret_gen);
/* New parameters; a balance above a lowered cap is clamped to it at once
 * (counted as discarded). */
void owner_upstream_set_params(owner *o, uint32_t slot, const budget_params *p);
/* Retire: a new generation, so handles to the old one can spend nothing. */
void owner_upstream_retire(owner *o, uint32_t slot);

int owner_process_alloc(owner *o, pid_t pid, uint64_t start_time, uid_t uid,
                        uint32_t *ret_slot);
/* Whether @p slot is active and held by this pid and start time. */
bool owner_process_matches(const owner *o, uint32_t slot, pid_t pid,
                           uint64_t start_time);
/* Fold the slot's counters into the upstreams and free it. Waits for RCU
 * readers of the process table (the stats thread) in between. */
void owner_process_release(owner *o, uint32_t slot);

/* Totals: per upstream slot (a zeroed array of capacity x SEG_COUNTERS)
 * the slot's own counters plus every active process's entries for it;
 * slots from the high-water mark on are left as they are. Returns the
 * number of active process slots summed. Call inside an RCU read-side
 * section. */
unsigned owner_collect(const owner *o, uint64_t (*per_upstream)[SEG_COUNTERS]);
/* One process slot's totals over its entries and lanes. */
void owner_process_totals(const owner *o, uint32_t slot,
                          uint64_t out[SEG_COUNTERS]);

#endif
