/* SPDX-License-Identifier: MIT */
/*
 * Where the asynchronous driver's calls are (multi_state.h): the one
 * function that moves a call between states, the timers and the permit
 * queues it moves them through, and the cache of finished calls.
 */
#include "exec/multi_state.h"

#include <stdlib.h>

#define CALL_CACHE 64 /* finished calls kept for the next submit */

/* --- timers -------------------------------------------------------------- */

static bool due_less(const retryd_heap_node *a, const retryd_heap_node *b)
{
    return RETRYD_HEAP_CDATA(a, retryd_call, heap_node)->due <
           RETRYD_HEAP_CDATA(b, retryd_call, heap_node)->due;
}

/*
 * A transfer's timer goes into a list instead when it is due no earlier
 * than the list's last: one profile's transfers fall due in the order they
 * started (now plus the same timeout), and the heap would sift log n
 * levels each time a transfer ends near its top. Any other timer goes into
 * the heap. The earliest timer is the earlier of the heap's top and the
 * list's head. A transfer is in no other list, so the line uses q.
 */
static void timer_add(retryd_multi *m, retryd_call *k)
{
    retryd_queue *last = retryd__queue_last(&m->line);
    if (k->state == S_TRANSFER &&
        (last == &m->line || k->due >= of_q(last)->due)) {
        k->timer = T_LINE;
        retryd__queue_insert_tail(&m->line, &k->q);
        return;
    }
    k->timer = T_HEAP;
    retryd__heap_insert(&m->heap, &k->heap_node, due_less);
}

static void timer_remove(retryd_multi *m, retryd_call *k)
{
    if (k->timer == T_HEAP)
        retryd__heap_remove(&m->heap, &k->heap_node, due_less);
    else if (k->timer == T_LINE)
        retryd__queue_remove(&k->q);
    k->timer = T_NONE;
}

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

/* --- where a call is: retryd__mstate() ----------------------------------- */

#define TO(s) (1u << (s))
/* The states each state may move to. S_TRANSFER to itself: the connect
 * deadline passed on a connected transfer, whose timer moves on to the
 * transfer's end. */
static const unsigned legal_moves[] = {
    [S_IDLE] = TO(S_ATTEMPT),
    [S_ATTEMPT] = TO(S_PERMIT) | TO(S_TRANSFER) | TO(S_BACKOFF) | TO(S_DONE),
    [S_PERMIT] = TO(S_ATTEMPT),
    [S_TRANSFER] = TO(S_ATTEMPT) | TO(S_TRANSFER),
    [S_BACKOFF] = TO(S_ATTEMPT),
    [S_DONE] = TO(S_IDLE),
};
#undef TO

/*
 * libcurl keeps idle connections for four times the transfers in its multi
 * at the moment one is given back, so the end of a burst would close the
 * connections the burst opened, and the next burst open them again. The
 * multi keeps as many as it ever ran transfers at once (at least
 * libcurl's easy default, 5), as the blocking executor's pooled handles
 * each keep theirs.
 */
static void keep_connections(retryd_multi *m)
{
    if (++m->transfers <= m->max_transfers)
        return;
    m->max_transfers = m->transfers;
    if (m->max_transfers > 5)
        curl_multi_setopt(m->curl, CURLMOPT_MAXCONNECTS,
                          (long)m->max_transfers);
}

/* Out of the places of state @p from, on the way to @p to. */
static void leave_state(retryd_multi *m, retryd_call *k, enum call_state from,
                        enum call_state to)
{
    switch (from) {
    case S_PERMIT:
        retryd__queue_remove(&k->q);
        k->pq = NULL;
        m->n_waiting--;
        break;
    case S_TRANSFER:
        if (to == S_TRANSFER)
            break; /* only its timer moves */
        curl_multi_remove_handle(m->curl, k->h->curl);
        m->transfers--;
        break;
    case S_DONE:
        retryd__queue_remove(&k->q);
        break;
    case S_IDLE:
    case S_ATTEMPT:
    case S_BACKOFF:
        break;
    }
    timer_remove(m, k);
}

/*
 * Into the places of state @p to, come from @p from. A transfer's
 * deadlines are counted as libcurl would count them, from its start:
 * connected within the profile's connect timeout, done within the
 * attempt's time; the timer holds the earlier, transfer_due the rest. A
 * backoff counts from now, as retryd_execute sleeps from now: a
 * Retry-After is a floor from the answer that carried it.
 */
static void enter_state(retryd_multi *m, retryd_call *k, enum call_state from,
                        enum call_state to)
{
    int64_t now;
    switch (to) {
    case S_IDLE:
        retryd__queue_remove(&k->all);
        m->in_flight--;
        return;
    case S_ATTEMPT:
        if (from == S_IDLE) {
            retryd__queue_insert_head(&m->all, &k->all);
            m->in_flight++;
        }
        return;
    case S_PERMIT:
        retryd__queue_insert_tail(&k->pq->calls, &k->q);
        if (m->n_waiting++ == 0)
            m->poll_due = retryd__now_ns() + PERMIT_POLL_NS;
        k->due = k->c.permit_deadline;
        break;
    case S_TRANSFER:
        if (from == S_TRANSFER) {
            k->due = multi_transfer_end(k);
            break;
        }
        keep_connections(m);
        now = retryd__now_ns();
        k->transfer_start = now;
        k->due = k->c.p->connect_timeout_ns < k->c.attempt_ns
                     ? now + k->c.p->connect_timeout_ns
                     : multi_transfer_end(k);
        break;
    case S_BACKOFF:
        k->due = retryd__now_ns() + k->c.wait;
        break;
    case S_DONE:
        retryd__queue_insert_tail(&m->done, &k->q);
        return;
    }
    timer_add(m, k);
}

/*
 * The one place a call changes state (curl's mstate() in lib/multi.c is
 * the model). A move the table does not allow is a bug that would leave a
 * call in two lists or none, so it stops the process, in every build: the
 * check is a table lookup, a few times a request.
 */
void retryd__mstate(retryd_multi *m, retryd_call *k, enum call_state to)
{
    enum call_state from = k->state;
    if (!(legal_moves[from] & (1u << to)))
        abort();
    leave_state(m, k, from, to);
    k->state = to;
    enter_state(m, k, from, to);
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
