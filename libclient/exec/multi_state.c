/* SPDX-License-Identifier: MIT */
/*
 * The out-of-line part of where the asynchronous driver's calls are
 * (multi_state.h): the earliest timer, the permit queues made on first
 * use, and the cache of finished calls.
 */
#include "exec/multi_state.h"

#include <stdlib.h>

#define CALL_CACHE 64 /* finished calls kept for the next submit */

/* --- timers -------------------------------------------------------------- */

/* The earliest timer, or NULL. */
retryd_call *retryd__multi_timer_first(const retryd_multi *m)
{
    retryd_heap_node *top = retryd__heap_min(&m->heap);
    retryd_call *h = NULL;
    if (top != NULL)
        h = RETRYD_HEAP_DATA(top, retryd_call, heap_node);
    retryd_queue *l = retryd__queue_head(&m->line);
    if (l == &m->line || (h != NULL && h->due < of_q(l)->due))
        return h;
    return of_q(l);
}

/* --- calls and queues ---------------------------------------------------- */

permit_queue *retryd__multi_queue_of(retryd_multi *m, retryd_profile *p)
{
    RETRYD_QUEUE_FOREACH(it, &m->queues)
    {
        permit_queue *q = RETRYD_QUEUE_DATA(it, permit_queue, node);
        if (q->p == p)
            return q;
    }
    permit_queue *q = malloc(sizeof(*q));
    if (q == NULL)
        return NULL;
    q->p = p;
    retryd__queue_init(&q->calls);
    retryd__queue_insert_tail(&m->queues, &q->node);
    return q;
}

retryd_call *retryd__multi_call_alloc(retryd_multi *m)
{
    retryd_queue *n = retryd__queue_pop(&m->cache);
    if (n != NULL) {
        m->n_cache--;
        return RETRYD_QUEUE_DATA(n, retryd_call, all);
    }
    /* Not zeroed: call_init sets what it reads, and the large first
     * buffers are only sized (call.h). */
    return malloc(sizeof(retryd_call));
}

void retryd__multi_call_release(retryd_multi *m, retryd_call *k)
{
    if (m->n_cache >= CALL_CACHE) {
        free(k);
        return;
    }
    retryd__queue_insert_head(&m->cache, &k->all);
    m->n_cache++;
}
