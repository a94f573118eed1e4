/* SPDX-License-Identifier: MIT */
/*
 * The world: its tiers, hosts and processes, the open-loop arrivals, the
 * scheduled changes to the deepest layer (down, halved), the crash loops,
 * the objects' free lists and the per-second bins. One run, from nothing
 * to the end of its duration.
 */
#include <stddef.h>
#include <stdlib.h>

#include "base/macros.h"
#include "sim/policy.h"
#include "sim/sim.h"

/* --- objects ------------------------------------------------------------- */

/* Calls and requests come from blocks of this many, freed together at the
 * end: whatever is still in flight then (at a server, on the wire) goes
 * with its block. */
#define BLOCK_OBJECTS 4096

typedef struct sim_block {
    struct sim_block *next;
    max_align_t objects[];
} sim_block;

/* A new block of BLOCK_OBJECTS objects of @p size bytes, or NULL. */
static void *block_new(sim_world *w, size_t size)
{
    sim_block *b = malloc(sizeof(*b) + BLOCK_OBJECTS * size);
    if (b == NULL) {
        w->failed = true;
        return NULL;
    }
    b->next = w->blocks;
    w->blocks = b;
    return b->objects;
}

sim_call *sim_call_alloc(sim_world *w)
{
    if (w->free_calls == NULL) {
        sim_call *b = block_new(w, sizeof(*b));
        if (b == NULL)
            return NULL;
        for (size_t i = 0; i < BLOCK_OBJECTS; i++) {
            b[i].next_free = w->free_calls;
            w->free_calls = &b[i];
        }
    }
    sim_call *c = w->free_calls;
    w->free_calls = c->next_free;
    *c = (sim_call){0};
    sim_event_init(&c->ev);
    retryd__queue_init(&c->link);
    return c;
}

void sim_call_release(sim_world *w, sim_call *c)
{
    c->next_free = w->free_calls;
    w->free_calls = c;
}

sim_req *sim_req_alloc(sim_world *w)
{
    if (w->free_reqs == NULL) {
        sim_req *b = block_new(w, sizeof(*b));
        if (b == NULL)
            return NULL;
        for (size_t i = 0; i < BLOCK_OBJECTS; i++) {
            b[i].next_free = w->free_reqs;
            w->free_reqs = &b[i];
        }
    }
    sim_req *r = w->free_reqs;
    w->free_reqs = r->next_free;
    *r = (sim_req){0};
    sim_event_init(&r->ev);
    retryd__queue_init(&r->link);
    return r;
}

void sim_req_release(sim_world *w, sim_req *r)
{
    r->next_free = w->free_reqs;
    w->free_reqs = r;
}

sim_bin *sim_bin_now(sim_world *w)
{
    size_t i = (size_t)(w->q.now / SIM_BIN_NS);
    return i < w->n_bins ? &w->bins[i] : NULL;
}

/* --- tier 0: arrivals and crashes ---------------------------------------- */

static void on_arrival(void *ctx, sim_event *e)
{
    sim_world *w = ctx;
    sim_proc *p = RETRYD_CONTAINER_OF(e, sim_proc, arrival);
    double mean_ns = (double)SIM_NS_PER_S * w->p.processes / w->p.rate;
    sim_schedule(&w->q, e, w->q.now + sim_rng_exp_ns(&p->arrivals, mean_ns),
                 on_arrival);
    sim_call_start(w, p, NULL);
}

static void on_crash(void *ctx, sim_event *e)
{
    sim_world *w = ctx;
    sim_proc *p = RETRYD_CONTAINER_OF(e, sim_proc, crash);
    sim_proc_kill_calls(w, p);
    if (sim_measuring(w))
        w->restarts++;
    /* It comes back at once, with what a new process has: its own state
     * made afresh, the host's (the segment) as it was. */
    if (w->p.policy->proc_init != NULL && w->p.policy->proc_init(w, p) < 0)
        w->failed = true;
    sim_schedule(&w->q, e, w->q.now + w->p.restart_period_ns, on_crash);
}

/* --- the deepest layer's schedule ---------------------------------------- */

static void on_halve(void *ctx, sim_event *e)
{
    sim_world *w = ctx;
    (void)e;
    sim_server_set_active(w, &w->deepest, w->deepest.workers / 2);
}

static void on_restore(void *ctx, sim_event *e)
{
    sim_world *w = ctx;
    (void)e;
    sim_server_set_active(w, &w->deepest, w->deepest.workers);
}

static void on_down(void *ctx, sim_event *e)
{
    (void)e;
    ((sim_world *)ctx)->deepest.down = true;
}

static void on_up(void *ctx, sim_event *e)
{
    (void)e;
    ((sim_world *)ctx)->deepest.down = false;
}

static void on_fleet_sync(void *ctx, sim_event *e)
{
    sim_world *w = ctx;
    w->p.policy->fleet_sync(w);
    sim_schedule(&w->q, e, w->q.now + SIM_FLEET_INTERVAL_NS, on_fleet_sync);
}

static void schedule_changes(sim_world *w)
{
    const sim_params *p = &w->p;
    if (p->policy->fleet_sync != NULL)
        sim_schedule(&w->q, &w->fleet_sync, 0, on_fleet_sync);
    if (p->halve_to_ns > p->halve_from_ns) {
        sim_schedule(&w->q, &w->halve_on, p->halve_from_ns, on_halve);
        sim_schedule(&w->q, &w->halve_off, p->halve_to_ns, on_restore);
    }
    if (p->down_to_ns > p->down_from_ns) {
        sim_schedule(&w->q, &w->down_on, p->down_from_ns, on_down);
        sim_schedule(&w->q, &w->down_off, p->down_to_ns, on_up);
    }
}

/* --- building
 * ----------------------------------------------------------------- */

static int build_proc(sim_world *w, sim_host *h, uint32_t i)
{
    sim_proc *p = &h->procs[i];
    *p = (sim_proc){.host = h};
    retryd__queue_init(&p->calls);
    sim_event_init(&p->arrival);
    sim_event_init(&p->crash);
    if (w->p.policy->proc_init != NULL && w->p.policy->proc_init(w, p) < 0)
        return -1;
    if (h->tier != 0)
        return 0;
    uint64_t n = (uint64_t)h->index * w->p.processes + i;
    sim_rng_seed(&p->arrivals, w->p.seed, SIM_STREAM_ARRIVALS + n);
    double mean_ns = (double)SIM_NS_PER_S * w->p.processes / w->p.rate;
    sim_schedule(&w->q, &p->arrival, sim_rng_exp_ns(&p->arrivals, mean_ns),
                 on_arrival);
    if (w->p.restart_period_ns > 0) {
        /* Staggered: the host's processes crash one after another over a
         * period, not all at once. */
        uint64_t all = (uint64_t)w->p.hosts * w->p.processes;
        int64_t first = (int64_t)((double)w->p.restart_period_ns *
                                  ((double)n + 0.5) / (double)all);
        sim_schedule(&w->q, &p->crash, first, on_crash);
    }
    return 0;
}

static int build_host(sim_world *w, uint32_t tier, uint32_t index)
{
    sim_host *h = sim_host_at(w, tier, index);
    h->world = w;
    h->tier = tier;
    h->index = index;
    /* Intermediate servers are asynchronous and unbounded: waiting for
     * the tier below holds no worker. */
    sim_server_init(&h->server, tier, h, 0, 0, 0);
    h->procs = calloc(w->p.processes, sizeof(*h->procs));
    if (h->procs == NULL)
        return -1;
    if (w->p.policy->host_init != NULL && w->p.policy->host_init(w, h) < 0)
        return -1;
    for (uint32_t i = 0; i < w->p.processes; i++)
        if (build_proc(w, h, i) < 0)
            return -1;
    return 0;
}

static int build(sim_world *w)
{
    const sim_params *p = &w->p;
    sim_queue_init(&w->q);
    sim_rng_seed(&w->jitter, p->seed, SIM_STREAM_JITTER);
    sim_rng_seed(&w->lb, p->seed, SIM_STREAM_LB);
    sim_server_init(&w->deepest, p->layers, NULL, p->workers, p->service_ns,
                    p->queue);
    sim_event_init(&w->halve_on);
    sim_event_init(&w->halve_off);
    sim_event_init(&w->down_on);
    sim_event_init(&w->down_off);
    sim_event_init(&w->fleet_sync);
    w->n_bins = (size_t)((p->duration_ns + SIM_BIN_NS - 1) / SIM_BIN_NS);
    w->bins = calloc(w->n_bins, sizeof(*w->bins));
    w->hosts = calloc((size_t)p->layers * p->hosts, sizeof(*w->hosts));
    if (w->bins == NULL || w->hosts == NULL)
        return -1;
    for (uint32_t t = 0; t < p->layers; t++)
        for (uint32_t h = 0; h < p->hosts; h++)
            if (build_host(w, t, h) < 0)
                return -1;
    schedule_changes(w);
    return 0;
}

int sim_world_run(sim_world *w, const sim_params *p)
{
    *w = (sim_world){.p = *p};
    if (build(w) < 0) {
        w->failed = true;
        return -1;
    }
    /* Second by second, so that a run out of memory stops soon. */
    for (int64_t t = SIM_BIN_NS; !w->failed && !w->q.failed; t += SIM_BIN_NS) {
        int64_t until = t < p->duration_ns ? t : p->duration_ns;
        sim_run_until(&w->q, until, w);
        if (until == p->duration_ns)
            break;
    }
    if (w->q.failed)
        w->failed = true;
    return w->failed ? -1 : 0;
}

/* --- freeing
 * ---------------------------------------------------------------------- */

void sim_world_free(sim_world *w)
{
    size_t n = w->hosts ? (size_t)w->p.layers * w->p.hosts : 0;
    for (size_t i = 0; i < n; i++) {
        sim_host *h = &w->hosts[i];
        for (uint32_t j = 0; h->procs != NULL && j < w->p.processes; j++)
            if (w->p.policy->proc_free != NULL)
                w->p.policy->proc_free(&h->procs[j]);
        free(h->procs);
        if (w->p.policy->host_free != NULL)
            w->p.policy->host_free(h);
    }
    while (w->blocks != NULL) {
        sim_block *b = w->blocks;
        w->blocks = b->next;
        free(b);
    }
    free(w->hosts);
    free(w->bins);
    sim_queue_free(&w->q);
    w->hosts = NULL;
    w->bins = NULL;
    w->free_calls = NULL;
    w->free_reqs = NULL;
}
