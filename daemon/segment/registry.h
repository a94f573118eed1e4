/* SPDX-License-Identifier: MIT */
/*
 * The daemon's name-to-slot registry: an RCU hash table (liburcu cds_lfht,
 * memb flavour). Readers (the stats thread, the control handlers) look up
 * and iterate inside rcu_read_lock(); the one writer (the main thread:
 * registration, retirement, reload) adds, replaces and removes entries and
 * frees old ones through call_rcu().
 */
#ifndef RETRYD_REGISTRY_H
#define RETRYD_REGISTRY_H

#include <stdint.h>

#include <urcu/rculfhash.h>
#include <urcu/urcu-memb.h> /* struct rcu_head */

#include "core/config.h"

typedef struct reg_entry {
    struct cds_lfht_node node;
    struct rcu_head rcu;
    char name[SEG_NAME_MAX + 1];
    uint32_t slot;
    uint32_t generation;
    budget_params params;
    /* The user whose process registered it, against upstreams_per_uid;
     * -1 for the configuration's and an adopted segment's. */
    int64_t owner_uid;
} reg_entry;

typedef struct registry registry;

int registry_new(registry **ret);
void registry_free(registry *r); /* no reader may remain */

/* Readers: inside urcu_memb_read_lock(). */
reg_entry *registry_lookup(registry *r, const char *name);
/* Calls @p fn for each entry; stops when it returns non-zero. */
void registry_for_each(registry *r, int (*fn)(const reg_entry *, void *),
                       void *arg);

/* The writer. A new entry is a private copy until published. */
int registry_add(registry *r, const reg_entry *e);
int registry_replace(registry *r, reg_entry *old, const reg_entry *e);
int registry_remove(registry *r, reg_entry *old);
unsigned long registry_count(registry *r);

#endif
