/* SPDX-License-Identifier: MIT */
/*
 * The client side of the host budget: the attachment (mapping + process
 * slot + control connection), the upstream handles and their bindings to
 * shared slots. Internal to libretryd. docs/budget.md explains the life of
 * a handle; this header only names the parts.
 */
#ifndef RETRYD_HOST_H
#define RETRYD_HOST_H

#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include <urcu/urcu-bp.h>
#include <urcu/rculfhash.h>

#include "shared/bucket.h"
#include "shared/health.h"
#include "shared/hedge.h"
#include "retryd/budget_decide.h"
#include "shared/segment.h"

/* A mapped segment (view.hdr, view.size) and this process's slot in it.
 * Never unmapped while the host lives: bindings may still point into it. */
typedef struct attachment {
    seg_view view;
    uint32_t proc_slot;
    uint64_t proc_ident; /* the slot's ident when the daemon gave it to us */
    seg_process *proc;
    uint64_t generation;
    struct attachment *next_old;
} attachment;

/* An upstream handle's place in an attachment. Immutable once published;
 * replaced (never freed before the host) when the handle rebinds. */
typedef struct binding {
    attachment *att;
    seg_upstream *slot;
    uint64_t ident;
    int entry; /* in the process slot; -1 counts into the slot's counters */
    /* Where a thread of each counter lane counts (retryd__thread_lane()),
     * worked out from entry when bound: the hot path then picks its tally
     * with one indexed load instead of the address arithmetic. */
    bucket_tally lanes[SEG_PROC_LANES];
    /* Where this process's count among the slot's rejecters is
     * (retryd__health_reject); the one mutable field. */
    _Atomic uint64_t reject_epoch;
    struct binding *next_old;
} binding;

struct retryd_upstream {
    struct cds_lfht_node node;
    retryd_host *host;
    char name[SEG_NAME_MAX + 1];
    bool has_params;
    uint64_t ratio_micro, floor_micro_per_s, cap_micro;
    /* The process-local bucket, used while no shared slot is bound. */
    seg_upstream local;
    _Atomic uint64_t local_counters[SEG_COUNTERS];
    _Atomic uint64_t local_reject_epoch; /* the local slot's rejecters */
    _Atomic(binding *) bind;
    binding *old_bindings;         /* under host->lock */
    _Atomic uint64_t next_bind_ns; /* no rebind attempt before this */
    struct retryd_upstream *next_all;
};

struct retryd_host {
    pthread_mutex_t lock; /* the slow path: attach, register, rebind */
    char socket_path[108];
    char client_name[64];
    int timeout_ms;
    unsigned flags;
    _Atomic(attachment *) att; /* NULL: not attached (local budgets) */
    attachment *old_atts;      /* under lock */
    int ctl_fd;                /* -1 when not connected; under lock */
    /* The daemon may have tied a process slot to ctl_fd (an attach was
     * sent on it): its hang-up releases that slot. Under lock. */
    bool ctl_holds_slot;
    /* A retired attachment whose slot a successor daemon may have kept
     * for us (the one that would have released it died first): asked
     * back at the next attach. Under lock. */
    attachment *resume;
    _Atomic uint64_t next_attach_ns;
    _Atomic bool local_draining;
    /* What the last attach attempt found (retryd_share_status). */
    _Atomic int share;
    struct cds_lfht *names;
    struct retryd_upstream *all; /* under lock */
    struct retryd_host *next_host;
};

/* Slow path, under host->lock: make sure the host is attached; 0 or a
 * negative code (RETRYD_ENOTCONN when no daemon answers). */
int retryd__host_attach_locked(retryd_host *h);

/* Slow path, under host->lock: register @p up with the daemon and return
 * the slot it got. */
int retryd__host_register_locked(retryd_host *h, retryd_upstream *up,
                                 uint32_t *ret_slot, uint32_t *ret_gen);

/*
 * The counter lane of the calling thread: 0 (shared) or 1..3 (its own).
 * Read on every withdrawal and deposit, so the lane lives in initial-exec
 * TLS (one %fs-relative load, no __tls_get_addr call) and only the first
 * call of a thread leaves the header.
 */
extern _Thread_local int retryd__tls_lane
    __attribute__((tls_model("initial-exec"), visibility("hidden")));
int retryd__thread_lane_slow(void);

static inline int retryd__thread_lane(void)
{
    int lane = retryd__tls_lane;
    return __builtin_expect(lane >= 0, 1) ? lane : retryd__thread_lane_slow();
}

/*
 * The slot the handle's health and hedging live on now: its binding's
 * shared slot while that is current and not retired, else its
 * process-local one. Never binds (the budget's operations do: the first
 * attempt's deposit comes first).
 */
static inline seg_upstream *retryd__upstream_slot(retryd_upstream *up)
{
    binding *b = atomic_load_explicit(&up->bind, memory_order_acquire);
    if (__builtin_expect(b != NULL, 1) &&
        b->att == atomic_load_explicit(&up->host->att, memory_order_acquire) &&
        bucket_ident_ok(b->slot, b->ident))
        return b->slot;
    return &up->local;
}

/* peek() and take() of the engine's view of a budget, for both versions
 * of it (upstream.c, upstream_budget_v1.c). */
bool retryd__budget_peek(void *ctx);
bool retryd__budget_take(void *ctx);

#endif /* RETRYD_HOST_H */
