/* SPDX-License-Identifier: MIT */
/*
 * The fleet wing's own state (fleet.h): the thread's (sync.c) and the
 * outcome it hands to the main thread (apply.c). Private to the wing.
 */
#ifndef RETRYD_FLEET_STATE_H
#define RETRYD_FLEET_STATE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "daemon.h"
#include "fleet/link.h"
#include "fleet/records.h"

/* One upstream's outcome of a sync. */
typedef struct fleet_result {
    uint32_t slot, gen;
    bool ready;            /* the host is in the interval it read */
    fleet_view view;       /* the times and the hold are the main thread's */
    uint64_t hold_unix_ms; /* the fleet's hold ends then; 0 none */
    bool pushback;         /* fleet_pushback: the host obeys the hold */
} fleet_result;

/* A sync's outcome, handed over whole. */
typedef struct fleet_batch {
    bool ok;            /* false: fallback, every view goes */
    uint64_t synced_ns; /* CLOCK_MONOTONIC of the sync's start */
    uint64_t interval_ns;
    size_t n;
    fleet_result r[];
} fleet_batch;

/* What the thread keeps per upstream slot between syncs. */
typedef struct fleet_up {
    uint32_t gen; /* the slot's generation this is about; 0: nothing yet */
    bool primed;  /* last_* hold a sample */
    uint64_t last_deposits, last_granted;
    uint64_t fa_ring[FLEET_SHARE_SYNCS], rg_ring[FLEET_SHARE_SYNCS];
    unsigned ring_pos;
    /* What this host added to the last two intervals' hashes. */
    uint64_t pub_bucket[2];
    fleet_gauges pub[2];
} fleet_up;

/* An upstream a sync is about (gathered inside one RCU section). */
typedef struct fleet_item {
    uint32_t slot, gen;
    char name[SEG_NAME_MAX + 1];
    budget_params params;
    fleet_gauges own;
    uint64_t hold_unix_ms; /* this host's own hold; 0 none */
    bool published;
} fleet_item;

struct fleet {
    server *d;
    pthread_t thread;
    bool running;
    int wake_fd; /* eventfd: the thread has a batch (main loop's epoll) */
    int kick_fd; /* eventfd: the configuration changed */
    int stop_fd; /* eventfd: stop, whatever the thread waits for */
    _Atomic bool stopping;
    /* The hand-over: the latest batch the main thread has not taken. */
    pthread_mutex_t lock;
    fleet_batch *ready;
    /* The thread's own, from here on. */
    fleet_conf conf; /* the [fleet] section it links with */
    fleet_link link;
    uint64_t next_connect_ns, backoff_ns;
    uint64_t last_bucket;
    fleet_up *ups;     /* one per upstream slot */
    fleet_item *items; /* one per upstream slot, at most */
    uint64_t (*totals)[SEG_COUNTERS];
    redisReply **replies;
    fleet_pipe pipe;
    bool *applied; /* main thread: slots given a view by the last batch */
};

/* sync.c: the thread. */
void *fleet_thread_main(void *arg);

/* Hand @p b to the main thread (a newer batch replaces one not taken). */
void fleet_post(struct fleet *f, fleet_batch *b);

#endif
