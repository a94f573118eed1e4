/* SPDX-License-Identifier: MIT */
/*
 * The event queue: a binary min-heap in an array, each event knowing its
 * place (index) so that a timeout can be taken out when its response
 * arrives first. An array rather than the library's pointer heap
 * (base/heap.h): a storm keeps hundreds of thousands of events pending,
 * and finding the last position by walking pointers from the top is what
 * a simulator of tens of millions of events would spend its time on.
 */
#include "sim/events.h"

#include <stdlib.h>

void sim_queue_init(sim_queue *q)
{
    *q = (sim_queue){0};
}

void sim_queue_free(sim_queue *q)
{
    free(q->heap);
    *q = (sim_queue){0};
}

static bool before(const sim_event *a, const sim_event *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void put(sim_queue *q, size_t i, sim_event *e)
{
    q->heap[i] = e;
    e->index = i + 1;
}

static void sift_up(sim_queue *q, size_t i)
{
    sim_event *e = q->heap[i];
    while (i > 0) {
        size_t up = (i - 1) / 2;
        if (!before(e, q->heap[up]))
            break;
        put(q, i, q->heap[up]);
        i = up;
    }
    put(q, i, e);
}

static void sift_down(sim_queue *q, size_t i)
{
    sim_event *e = q->heap[i];
    for (;;) {
        size_t l = 2 * i + 1, least = l;
        if (l >= q->n)
            break;
        if (l + 1 < q->n && before(q->heap[l + 1], q->heap[l]))
            least = l + 1;
        if (!before(q->heap[least], e))
            break;
        put(q, i, q->heap[least]);
        i = least;
    }
    put(q, i, e);
}

static bool grow(sim_queue *q)
{
    size_t cap = q->cap ? 2 * q->cap : 1024;
    sim_event **h = realloc(q->heap, cap * sizeof(*h));
    if (h == NULL)
        return false;
    q->heap = h;
    q->cap = cap;
    return true;
}

void sim_cancel(sim_queue *q, sim_event *e)
{
    if (e->index == 0)
        return;
    size_t i = e->index - 1;
    sim_event *last = q->heap[--q->n];
    e->index = 0;
    if (last == e)
        return;
    put(q, i, last);
    sift_down(q, i);
    sift_up(q, last->index - 1);
}

void sim_schedule(sim_queue *q, sim_event *e, int64_t at, sim_fire_fn fn)
{
    sim_cancel(q, e);
    if (q->n == q->cap && !grow(q)) {
        q->failed = true;
        return;
    }
    e->at = at < q->now ? q->now : at;
    e->seq = q->seq++;
    e->fire = fn;
    put(q, q->n++, e);
    sift_up(q, q->n - 1);
}

void sim_run_until(sim_queue *q, int64_t until, void *ctx)
{
    while (q->n > 0 && !q->failed && q->heap[0]->at <= until) {
        sim_event *e = q->heap[0];
        sim_event *last = q->heap[--q->n];
        e->index = 0;
        if (last != e) {
            put(q, 0, last);
            sift_down(q, 0);
        }
        q->now = e->at;
        e->fire(ctx, e);
    }
    if (!q->failed && until > q->now)
        q->now = until;
}
