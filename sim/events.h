/* SPDX-License-Identifier: MIT */
/*
 * The simulator's clock and event queue (docs/storms.md).
 *
 * Time is simulated nanoseconds, advanced only by taking the next event.
 * Events are embedded in the objects they concern (a call's timeout, a
 * request's arrival), so scheduling allocates nothing, and an event can be
 * cancelled from its object alone. Ties are broken by the order in which
 * events were scheduled, never by an address, so that the same seed gives
 * the same run on any machine.
 */
#ifndef RETRYD_SIM_EVENTS_H
#define RETRYD_SIM_EVENTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_NS_PER_MS INT64_C(1000000)
#define SIM_NS_PER_S INT64_C(1000000000)

struct sim_event;

/* What an event does when its time comes; @p ctx is the queue's. */
typedef void (*sim_fire_fn)(void *ctx, struct sim_event *e);

typedef struct sim_event {
    int64_t at;   /* when it fires */
    uint64_t seq; /* scheduling order: breaks ties */
    size_t index; /* its place in the heap + 1; 0 when not scheduled */
    sim_fire_fn fire;
} sim_event;

/* A min-heap of events by (at, seq), in an array that grows. */
typedef struct sim_queue {
    sim_event **heap;
    size_t n, cap;
    int64_t now;  /* the time of the event being fired */
    uint64_t seq; /* the next scheduling number */
    bool failed;  /* the heap could not grow: the run stops */
} sim_queue;

void sim_queue_init(sim_queue *q);
void sim_queue_free(sim_queue *q);

/* An event not scheduled. */
static inline void sim_event_init(sim_event *e)
{
    e->index = 0;
}

/* Schedule @p e to fire @p fn at @p at (now, if earlier); an event already
 * scheduled is moved. When the heap cannot grow the queue is marked failed
 * and stops: a run that lost an event would print wrong figures. */
void sim_schedule(sim_queue *q, sim_event *e, int64_t at, sim_fire_fn fn);

/* Take @p e out of the queue, if it is in it. */
void sim_cancel(sim_queue *q, sim_event *e);

/* Fire events in order until the next one is after @p until (or none is
 * left, or the queue failed), with @p ctx; the clock ends at @p until. */
void sim_run_until(sim_queue *q, int64_t until, void *ctx);

#endif
