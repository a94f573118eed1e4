/* SPDX-License-Identifier: MIT */
/*
 * retryd's policies on retryd's own code: the bucket arithmetic
 * (shared/bucket.h) and the host health (shared/health.h) run on a segment
 * in memory, formatted and validated by the segment code the daemon uses
 * (shared/segment.h), its upstream slot initialised as the daemon
 * initialises a registered one; the admission and the classification of an
 * attempt are the engine's (retryd_admit, retryd_health_classify). Only
 * the clock is the simulator's: every one of those functions takes the
 * time (a bucket_clock, a now_ns), so the library's hot paths are the ones
 * measured in docs/benchmarks.md, unchanged.
 *
 *   retryd           one budget per upstream per host (the segment)
 *   retryd-adaptive  the same with the host throttle on (docs/health.md:
 *                    K 2, a 30 s window, a quorum of 1)
 *   retryd-local     a process-local bucket per process: what the library
 *                    falls back to without a daemon
 *   retryd-fleet     retryd with the fleet tier (docs/fleet.md): the floor
 *                    is the fleet's, each host's part of it its share of
 *                    the tier's first attempts over the share window (equal
 *                    without traffic), as retryd__fleet_floor_share()
 *                    computes it in the daemon, written once per sync into
 *                    the host's segment as a fleet view that the real
 *                    refill reads (retryd__fleet_floor). What the daemons'
 *                    Redis round trip adds (a sync's delay, a lost one) is
 *                    left out: the view is in force from the first sync.
 *
 * What this leaves out, and why the figures do not need it: fair shares'
 * claims (docs/budget.md#fair-shares) divide a host's tokens among its
 * processes, not their number, and they need the daemon's heartbeat to
 * decay; the tallies here keep no claim, so the bucket is first come,
 * first served (the request's share of a short balance still applies, as
 * the library's withdrawal asks it). Pushback needs a Retry-After, which
 * no simulated server sends.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "retryd/common.h"
#include "shared/bucket.h"
#include "shared/fleet.h"
#include "shared/health.h"
#include "shared/segment.h"
#include "sim/policy.h"

/* Simulated time starts an hour into a monotonic clock: the segment's
 * words read 0 as "never" (a refill stamp, a probe, a share). */
#define CLOCK_BASE_NS (INT64_C(3600) * SIM_NS_PER_S)

/* One bucket as the library binds it: the slot, its ident, the tally. */
typedef struct rd_slot {
    seg_upstream *s;
    uint64_t ident;
    bucket_tally tally;
} rd_slot;

/* The fleet tier's share window, in sync intervals (the daemon's). */
#define FLEET_WINDOW 8

typedef struct rd_host {
    void *mem; /* the segment */
    seg_view view;
    rd_slot slot; /* the next tier's upstream */
    /* retryd-fleet: the host's first attempts (deposits) per interval of
     * the share window, the count at the last sync, and the window's sum
     * at the last sync (what the host tells the fleet). */
    uint64_t window[FLEET_WINDOW];
    uint64_t deposits_seen;
    uint64_t own;
} rd_host;

typedef struct rd_proc {
    /* Where this process's count in the rejecters ring is (health.h). */
    _Atomic uint64_t reject_epoch;
    seg_upstream *local; /* retryd-local: its own bucket */
    rd_slot slot;        /* retryd-local: bound to it */
} rd_proc;

static uint64_t now_of(const sim_world *w)
{
    return (uint64_t)(w->q.now + CLOCK_BASE_NS);
}

static uint64_t sim_clock_now(void *ctx)
{
    return now_of(ctx);
}

/* --host-floor in micro-tokens per second: each host's floor, or, for
 * retryd-fleet, the fleet's (what the hosts' shares add up to). */
static uint64_t floor_micro_of(const sim_world *w)
{
    uint64_t micro;
    if (!seg_tokens_to_micro(w->p.host_floor, SEG_MAX_FLOOR_MICRO, &micro))
        micro = SEG_DEFAULT_FLOOR_MICRO_PER_S;
    return micro;
}

static const rd_slot *slot_of(const sim_call *c)
{
    const rd_proc *p = c->proc->policy;
    if (p->local != NULL)
        return &p->slot;
    return &((const rd_host *)c->proc->host->policy)->slot;
}

/* --- the host's segment -------------------------------------------------- */

/* What the daemon registers an upstream with (owner_upstream_alloc): the
 * budget's parameters, one second of floor to start, share and health
 * parameters, and only then the ident that makes the slot active. */
static void register_upstream(seg_upstream *s, uint64_t floor_micro,
                              const health_params *hp, uint64_t now)
{
    const uint32_t gen = 1;
    memcpy(s->name, "next-tier", sizeof("next-tier"));
    retryd__bucket_init(s, gen, SEG_DEFAULT_RATIO_MICRO, floor_micro,
                        SEG_DEFAULT_CAP_MICRO, floor_micro, now);
    retryd__health_init(s, hp);
    atomic_store_explicit(&s->ident, seg_ident(gen, SEG_ACTIVE),
                          memory_order_release);
}

static health_params health_of(const sim_world *w)
{
    health_params hp = retryd__health_defaults;
    if (w->p.policy == &sim_policy_retryd_adaptive) {
        hp.flags |= SEG_HEALTH_THROTTLE; /* K 2, quorum 1: the defaults */
        hp.window_ns = (uint64_t)w->p.throttle_window_ns;
    }
    return hp;
}

static int rd_host_init(sim_world *w, sim_host *h)
{
    size_t size = retryd__segment_size(1, 1);
    rd_host *r = calloc(1, sizeof(*r));
    if (r == NULL)
        return -1;
    r->mem = aligned_alloc(4096, size);
    if (r->mem == NULL) {
        free(r);
        return -1;
    }
    memset(r->mem, 0, size);
    retryd__segment_format_zeroed(r->mem, 1, 1, w->p.seed, 0);
    if (retryd__segment_view(r->mem, size, &r->view) < 0) {
        free(r->mem);
        free(r);
        return -1;
    }
    seg_upstream *s = retryd__segment_upstream(&r->view, 0);
    health_params hp = health_of(w);
    register_upstream(s, floor_micro_of(w), &hp, now_of(w));
    r->slot = (rd_slot){s, atomic_load(&s->ident),
                        (bucket_tally){s->counters, false, NULL, NULL}};
    h->policy = r;
    return 0;
}

static void rd_host_free(sim_host *h)
{
    rd_host *r = h->policy;
    if (r != NULL)
        free(r->mem);
    free(r);
    h->policy = NULL;
}

static int rd_proc_init(sim_world *w, sim_proc *p)
{
    (void)w;
    free(p->policy);
    p->policy = calloc(1, sizeof(rd_proc));
    return p->policy ? 0 : -1;
}

static void rd_proc_free(sim_proc *p)
{
    rd_proc *r = p->policy;
    if (r != NULL)
        free(r->local);
    free(r);
    p->policy = NULL;
}

/* --- the process-local bucket -------------------------------------------- */

/* As retryd_upstream_open makes one: the library's defaults, one second
 * of floor, the health defaults. A restarted process makes a new one. */
static int local_init(sim_world *w, sim_proc *p)
{
    rd_proc_free(p);
    rd_proc *r = calloc(1, sizeof(*r));
    seg_upstream *s = aligned_alloc(SEG_LINE, sizeof(seg_upstream));
    if (r == NULL || s == NULL) {
        free(r);
        free(s);
        return -1;
    }
    memset(s, 0, sizeof(*s));
    health_params hp = retryd__health_defaults;
    register_upstream(s, SEG_DEFAULT_FLOOR_MICRO_PER_S, &hp, now_of(w));
    r->local = s;
    r->slot = (rd_slot){s, atomic_load(&s->ident),
                        (bucket_tally){s->counters, false, NULL, NULL}};
    p->policy = r;
    return 0;
}

/* --- the budget
 * --------------------------------------------------------------- */

static void rd_first(sim_world *w, sim_call *c)
{
    (void)w;
    const rd_slot *r = slot_of(c);
    (void)retryd__bucket_deposit(r->s, r->ident, &r->tally);
}

static bucket_clock clock_of(const sim_call *c)
{
    return (bucket_clock){sim_clock_now, c->proc->host->world};
}

static bool rd_peek(void *ctx)
{
    const sim_call *c = ctx;
    const rd_slot *r = slot_of(c);
    bucket_clock clk = clock_of(c);
    return retryd__bucket_peek(r->s, r->ident, &clk, &r->tally) == 1;
}

/* As retryd_upstream_withdraw_for: a request that took retries already
 * may take one more only within its share of a short balance. */
static int rd_take_for(void *ctx, uint32_t taken)
{
    const sim_call *c = ctx;
    const rd_slot *r = slot_of(c);
    bucket_clock clk = clock_of(c);
    if (taken > 0) {
        uint64_t seen =
            retryd__bucket_projected_balance(r->s, clk.now(clk.ctx));
        if (!retryd__share_request_ok(r->s, taken, seen)) {
            bucket_tally_add(&r->tally, SEG_C_DENIED_OVER_SHARE, 1);
            return RETRYD_EREQSHARE;
        }
    }
    return retryd__bucket_withdraw(r->s, r->ident, &clk, &r->tally);
}

static bool rd_take(void *ctx)
{
    return rd_take_for(ctx, 0) == 0;
}

static const retryd_budget_iface rd_budget = {sizeof(retryd_budget_iface),
                                              rd_peek, rd_take, rd_take_for};

/* --- host health
 * ------------------------------------------------------------------ */

/* As retryd_upstream_admit, for a first attempt (the sim's only
 * admission): the throttle's probability from the window, the engine's
 * admission, the slot's probe for a throttled one. */
static bool rd_admit(sim_world *w, sim_call *c)
{
    const rd_slot *r = slot_of(c);
    seg_upstream *s = r->s;
    uint64_t flags =
        atomic_load_explicit(&s->health_flags, memory_order_relaxed);
    if (!(flags & SEG_HEALTH_THROTTLE))
        return true;
    uint64_t now = now_of(w);
    health_view v;
    retryd__health_view(s, now, &v);
    if (v.probability == 0)
        return true;
    retryd_admit_facts f = {
        .sz = sizeof(f),
        .first_attempt = true,
        .throttle_probability = v.probability,
        .draw = sim_rng_unit(&w->jitter),
        .remaining_ns = c->deadline - w->q.now,
        .min_attempt_ns = w->p.min_attempt_ns,
    };
    retryd_admission a;
    int64_t wait;
    if (retryd_admit(&f, sim_rng_source, &w->jitter, &a, &wait) < 0 ||
        a != RETRYD_ADMIT_THROTTLED)
        return true;
    if (retryd__health_claim_probe(s, now))
        return true; /* the slot's one probe goes out */
    retryd__health_record(s, now, 1, 0);
    bucket_tally_add(&r->tally, SEG_C_THROTTLED, 1);
    return false;
}

/* As retryd_upstream_observe: the attempt counts in the window. */
static void rd_outcome(sim_world *w, sim_call *c, int status)
{
    const rd_slot *r = slot_of(c);
    retryd_health_count k =
        retryd_health_classify(status ? RETRYD_EVIDENCE_RESPONSE_RECEIVED
                                      : RETRYD_EVIDENCE_SENT_NO_RESPONSE,
                               status);
    if (k == RETRYD_HEALTH_NOT_COUNTED)
        return;
    uint64_t now = now_of(w);
    retryd__health_record(r->s, now, 1, k == RETRYD_HEALTH_ACCEPT);
    if (k == RETRYD_HEALTH_REJECT)
        retryd__health_reject(r->s, now,
                              &((rd_proc *)c->proc->policy)->reject_epoch);
}

/* The hooks of the policies on the host's segment (retryd, -adaptive,
 * -fleet): they differ in the throttle and the fleet sync alone. */
#define RD_HOST_HOOKS                                                          \
    .host_init = rd_host_init, .host_free = rd_host_free,                      \
    .proc_init = rd_proc_init, .proc_free = rd_proc_free, .first = rd_first,   \
    .outcome = rd_outcome, .budget = &rd_budget

const sim_policy sim_policy_retryd = {
    .name = "retryd",
    .what = "retryd: 10 %, 10/s, cap 100, one budget per host",
    .ratio = 0.1,
    .floor = 10,
    RD_HOST_HOOKS,
};

const sim_policy sim_policy_retryd_adaptive = {
    .name = "retryd-adaptive",
    .what = "retryd's host budget and host throttle (K 2, 30 s window)",
    .admit = rd_admit,
    RD_HOST_HOOKS,
};

/* --- the fleet tier
 * -------------------------------------------------------------- */

/* This sync's first attempts of host @p h, into its window at @p slot;
 * the window's sum goes to r->own and is returned. */
static uint64_t fleet_note(sim_host *h, size_t slot)
{
    rd_host *r = h->policy;
    uint64_t n = atomic_load_explicit(&r->slot.s->counters[SEG_C_DEPOSITS],
                                      memory_order_relaxed);
    r->window[slot] = n - r->deposits_seen;
    r->deposits_seen = n;
    r->own = 0;
    for (size_t i = 0; i < FLEET_WINDOW; i++)
        r->own += r->window[i];
    return r->own;
}

/* What the daemons of tier @p tier's hosts learn from each other: each
 * host's share of the fleet's floor, in force for two intervals. */
static void fleet_sync_tier(sim_world *w, uint32_t tier, size_t slot)
{
    uint64_t total = 0, fleet_floor = floor_micro_of(w);
    uint32_t hosts = w->p.hosts;
    for (uint32_t i = 0; i < hosts; i++)
        total += fleet_note(sim_host_at(w, tier, i), slot);
    uint64_t now = now_of(w);
    for (uint32_t i = 0; i < hosts; i++) {
        rd_host *r = sim_host_at(w, tier, i)->policy;
        fleet_view v = {
            .valid_until_ns = now + 2 * (uint64_t)SIM_FLEET_INTERVAL_NS,
            .flags = SEG_FLEET_FLOOR,
            .floor_micro_per_s =
                retryd__fleet_floor_share(fleet_floor, r->own, total, hosts),
            .synced_ns = now,
            .fleet_floor_micro_per_s = fleet_floor,
            .share_ppm = retryd__fleet_share_ppm(r->own, total, hosts),
            .hosts = hosts,
        };
        retryd__fleet_store(&r->slot.s->fleet, &v);
    }
}

static void rd_fleet_sync(sim_world *w)
{
    size_t slot = (size_t)(w->q.now / SIM_FLEET_INTERVAL_NS) % FLEET_WINDOW;
    for (uint32_t t = 0; t < w->p.layers; t++)
        fleet_sync_tier(w, t, slot);
}

const sim_policy sim_policy_retryd_fleet = {
    .name = "retryd-fleet",
    .what = "retryd with the fleet tier: 10 %, the fleet's 10/s split by "
            "traffic, cap 100",
    .ratio = 0.1,
    .floor = 10,
    .fleet_sync = rd_fleet_sync,
    RD_HOST_HOOKS,
};

const sim_policy sim_policy_retryd_local = {
    .name = "retryd-local",
    .what = "retryd's bucket, process-local (no daemon): 10 %, 10/s, cap 100",
    .per_process = true,
    .ratio = 0.1,
    .floor = 10,
    .proc_init = local_init,
    .proc_free = rd_proc_free,
    .first = rd_first,
    .outcome = rd_outcome,
    .budget = &rd_budget,
};
