/* SPDX-License-Identifier: MIT */
/*
 * Servers. A request travels a hop, then the server takes it: a free
 * worker serves it (the service time), or it waits in a first-come,
 * first-served queue, or, the queue full, it is turned away at once with a
 * 503. A served request is answered a hop later; one at an intermediate
 * tier first becomes a call to the tier below (simulated in client.c),
 * answered 200 when that call got a response and 503 when it did not.
 *
 * Nothing here looks at whether the caller still waits: a request whose
 * caller timed out is still queued, still served, still calls the tier
 * below. That work is what a real server does without deadline
 * propagation, and what keeps an overload going after its cause is gone.
 */
#include "base/macros.h"
#include "sim/sim.h"

void sim_server_init(sim_server *s, uint32_t tier, sim_host *host,
                     uint32_t workers, int64_t service_ns, uint32_t queue)
{
    *s = (sim_server){
        .tier = tier,
        .host = host,
        .workers = workers,
        .active = workers,
        .service_ns = service_ns,
        .queue_cap = queue,
    };
    retryd__queue_init(&s->waiting);
}

static bool is_deepest(const sim_world *w, const sim_server *s)
{
    return s->tier == w->p.layers;
}

static void on_delivered(void *ctx, sim_event *e)
{
    sim_world *w = ctx;
    sim_req *r = RETRYD_CONTAINER_OF(e, sim_req, ev);
    sim_call *c = r->caller;
    int status = r->status;
    sim_req_release(w, r);
    if (c != NULL)
        sim_call_answer(w, c, status);
}

void sim_req_respond(sim_world *w, sim_req *r, int status)
{
    r->status = status;
    sim_schedule(&w->q, &r->ev, w->q.now + w->p.latency_ns, on_delivered);
}

static void start(sim_world *w, sim_server *s, sim_req *r);

/* Serve the queue while workers are free. */
static void dispatch(sim_world *w, sim_server *s)
{
    while (s->busy < s->active && s->queued > 0) {
        sim_req *r =
            RETRYD_QUEUE_DATA(retryd__queue_pop(&s->waiting), sim_req, link);
        s->queued--;
        start(w, s, r);
    }
}

/* Which of an intermediate host's processes takes a request: any, at
 * random. */
static sim_proc *pick_proc(sim_world *w, sim_host *h)
{
    return &h->procs[sim_rng_below(&w->lb, w->p.processes)];
}

static void on_served(void *ctx, sim_event *e)
{
    sim_world *w = ctx;
    sim_req *r = RETRYD_CONTAINER_OF(e, sim_req, ev);
    sim_server *s = r->srv;
    if (s->workers > 0)
        s->busy--;
    if (is_deepest(w, s))
        sim_req_respond(w, r, 200);
    else
        sim_call_start(w, pick_proc(w, s->host), r);
    dispatch(w, s);
}

static void start(sim_world *w, sim_server *s, sim_req *r)
{
    if (s->workers > 0)
        s->busy++;
    sim_schedule(&w->q, &r->ev, w->q.now + s->service_ns, on_served);
}

static void count_arrival(sim_world *w, const sim_server *s, const sim_req *r)
{
    if (sim_measuring(w)) {
        w->tiers[s->tier].arrivals++;
        w->tiers[s->tier].retries += r->attempt > 1;
    }
    sim_bin *b = is_deepest(w, s) ? sim_bin_now(w) : NULL;
    if (b != NULL) {
        b->deepest++;
        b->retries += r->attempt > 1;
    }
}

static void on_arrived(void *ctx, sim_event *e)
{
    sim_world *w = ctx;
    sim_req *r = RETRYD_CONTAINER_OF(e, sim_req, ev);
    sim_server *s = r->srv;
    count_arrival(w, s, r);
    if (s->down) {
        if (w->p.down_mode == SIM_DOWN_503) {
            sim_req_respond(w, r, 503);
        } else if (r->caller != NULL) {
            r->lost = true; /* its caller's timeout frees it */
        } else {
            sim_req_release(w, r);
        }
        return;
    }
    if (s->workers == 0 || s->busy < s->active) {
        start(w, s, r);
        return;
    }
    if (s->queued < s->queue_cap) {
        retryd__queue_insert_tail(&s->waiting, &r->link);
        s->queued++;
        sim_bin *b = sim_bin_now(w);
        if (b != NULL && s->queued > b->queue_max)
            b->queue_max = s->queued;
        return;
    }
    sim_req_respond(w, r, 503);
}

void sim_req_send(sim_world *w, sim_req *r)
{
    sim_schedule(&w->q, &r->ev, w->q.now + w->p.latency_ns, on_arrived);
}

void sim_req_abandon(sim_world *w, sim_req *r)
{
    r->caller = NULL;
    if (r->lost)
        sim_req_release(w, r);
}

void sim_server_set_active(sim_world *w, sim_server *s, uint32_t active)
{
    s->active = active;
    dispatch(w, s);
}
