/* SPDX-License-Identifier: MIT */
/*
 * The asynchronous driver's calls and where each one is: the states, and
 * the one function that moves a call between them with the timers and
 * lists they are made of (multi.c drives the calls; multi_state.c holds
 * the out-of-line rest). Internal to the executor.
 *
 * Where a call is is its state, and only mstate() moves it from
 * one to another: it takes the call out of the old state's places and
 * puts it into the new one's, so that what follows holds wherever the
 * code looks at a call:
 *
 *   S_IDLE      not in flight (new, completed, or in the cache): in no
 *               list but the cache, no timer;
 *   S_ATTEMPT   held by the code driving it (an attempt opening, ending
 *               or being decided): in m->all only;
 *   S_PERMIT    in its profile's permit queue, counted in n_waiting, and
 *               timed at its bulkhead deadline;
 *   S_TRANSFER  its easy handle in the curl multi (a permit held), timed
 *               at its connect deadline, then at its transfer's end;
 *   S_BACKOFF   timed at the end of its wait;
 *   S_HEDGED    its own attempt ended without an answer while hedges of
 *               it still run: no timer, no list, it waits for them;
 *   S_DONE      in the done list, its completion due from the loop.
 *
 * Every request in flight (any state but S_IDLE) is in m->all. A hedge
 * (docs/hedging.md) is a call too, moved through the same states by the
 * same function, but it is its request's, not the caller's: it is in its
 * parent's list of hedges instead of m->all, enters and leaves at
 * S_ATTEMPT (mstate_hedge_born, mstate_hedge_gone) and never reaches
 * S_DONE (its attempt joins the parent's log, and the parent completes). The
 * next hedge of a request is due at a timer of its own, in the multi's
 * hedge heap, whatever state its first attempt is in.
 */
#ifndef RETRYD_EXEC_MULTI_STATE_H
#define RETRYD_EXEC_MULTI_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>

#include "base/clock.h"
#include "base/heap.h"
#include "base/macros.h"
#include "base/queue.h"
#include "exec/call.h"
#include "exec/pollset.h"
#include "retryd/multi.h"

#include <stdlib.h>

/* How often queued calls ask again for a permit another thread or multi
 * may have given back: the bulkhead's condition variable wakes only
 * threads, and a loop cannot wait on it. */
#define PERMIT_POLL_NS (2 * INT64_C(1000000))

enum call_state {
    S_IDLE,
    S_ATTEMPT,
    S_PERMIT,
    S_TRANSFER,
    S_BACKOFF,
    S_HEDGED,
    S_DONE
};

/* Where a timed call's timer is: the heap, or the transfers' line. */
enum call_timer { T_NONE, T_HEAP, T_LINE };

/* The calls of one profile waiting for its permits, oldest first. */
typedef struct permit_queue {
    retryd_profile *p;
    retryd_queue calls; /* their q */
    retryd_queue node;  /* in m->queues */
} permit_queue;

struct retryd_call {
    call c; /* the state machine's; first, so e->call leads back here */
    retryd_multi *m; /* NULL once its completion has run */
    retryd_done_fn done;
    void *done_ctx;
    retryd_request copy; /* a caller's request of another size, at ours */
    easy *h;             /* S_TRANSFER: the handle in the curl multi */
    enum call_state state;
    enum call_timer timer;
    int err;               /* S_DONE: what done gets */
    retryd_result *result; /* S_DONE */
    int64_t due; /* S_PERMIT: bulkhead deadline; S_BACKOFF: end; S_TRANSFER:
                  * the connect deadline, then transfer_end() */
    int64_t transfer_start;     /* S_TRANSFER: when its deadlines were armed */
    permit_queue *pq;           /* S_PERMIT: the queue it waits in */
    retryd_heap_node heap_node; /* T_HEAP */
    retryd_queue all; /* in flight: in m->all; S_IDLE: perhaps m->cache */
    /* S_PERMIT: its permit queue; S_DONE: the done list; S_TRANSFER: the
     * timer line, when its timer is there (T_LINE). */
    retryd_queue q;
    /* Hedging (docs/hedging.md). A hedge: the request it belongs to (its
     * `all` is in the parent's hedges). A request: its hedges running,
     * and its next hedge's timer (in m->hedge_heap while armed), counted
     * from hedge_from, when its attempt (or last hedge) went out. */
    struct retryd_call *parent;
    retryd_queue hedges;
    size_t n_hedges;
    retryd_heap_node hedge_node;
    int64_t hedge_due, hedge_from;
    bool hedge_armed;
};

struct retryd_multi {
    retryd_client *client;
    CURLM *curl;
    retryd_socket_fn socket;
    void *socket_ctx;
    retryd_timer_fn timer;
    void *timer_ctx;
    int64_t curl_due; /* libcurl's timer (monotonic ns), -1: none */
    int64_t told;     /* the caller's timer as set: 0 at once, -1 none */
    int64_t poll_due; /* the permit queues' next poll */
    bool in_cb;       /* inside a socket or timer callback */
    bool servicing;   /* inside service(): completions may run */
    bool closing;     /* freeing or failing: no submit */
    bool timer_failed, serving, serve_again;
    size_t in_flight; /* the calls in m->all */
    /* Transfers in the curl multi now, and the most there ever were: the
     * idle connections libcurl may keep (keep_connections). */
    size_t transfers, max_transfers;
    retryd_queue all;    /* every call in flight, newest first */
    retryd_queue done;   /* S_DONE calls, in the order they finished */
    retryd_heap heap;    /* timers on due */
    retryd_queue line;   /* transfer timers added in order of due */
    retryd_queue queues; /* permit_queue, one per profile used */
    size_t n_waiting;    /* S_PERMIT calls */
    retryd_queue cache;  /* S_IDLE calls kept for the next submit */
    size_t n_cache;
    pollset ps; /* retryd_multi_run's own, kept by the socket callback */
    retryd_heap hedge_heap; /* requests' next hedges, on hedge_due */
    /* A client's idle multi, for retryd_execute's hedged requests
     * (retryd__multi_execute): the next in its list. */
    struct retryd_multi *next_idle;
};

static inline retryd_call *of_call(call *c)
{
    return RETRYD_CONTAINER_OF(c, retryd_call, c);
}

/* The call whose q is @p n. */
static inline retryd_call *of_q(retryd_queue *n)
{
    return RETRYD_QUEUE_DATA(n, retryd_call, q);
}

/* When the transfer times out: the attempt's time from its start. */
static inline int64_t multi_transfer_end(const retryd_call *k)
{
    return retryd__add_sat(k->transfer_start, k->c.attempt_ns);
}

/* --- timers -------------------------------------------------------------- */

static inline bool due_less(const retryd_heap_node *a,
                            const retryd_heap_node *b)
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
static inline void timer_add(retryd_multi *m, retryd_call *k)
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

static inline void timer_remove(retryd_multi *m, retryd_call *k)
{
    if (k->timer == T_HEAP)
        retryd__heap_remove(&m->heap, &k->heap_node, due_less);
    else if (k->timer == T_LINE)
        retryd__queue_remove(&k->q);
    k->timer = T_NONE;
}

/* --- where a call is: mstate() ------------------------------------------ */

#define TO(s) (1u << (s))
/* The states each state may move to. S_TRANSFER to itself: the connect
 * deadline passed on a connected transfer, whose timer moves on to the
 * transfer's end. A hedge's first and last moves are its own
 * (mstate_hedge_born, mstate_hedge_gone). */
static const unsigned legal_moves[] = {
    [S_IDLE] = TO(S_ATTEMPT),
    [S_ATTEMPT] = TO(S_PERMIT) | TO(S_TRANSFER) | TO(S_BACKOFF) | TO(S_HEDGED) |
                  TO(S_DONE),
    [S_PERMIT] = TO(S_ATTEMPT),
    [S_TRANSFER] = TO(S_ATTEMPT) | TO(S_TRANSFER),
    [S_BACKOFF] = TO(S_ATTEMPT),
    [S_HEDGED] = TO(S_ATTEMPT),
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
static inline void keep_connections(retryd_multi *m)
{
    if (++m->transfers <= m->max_transfers)
        return;
    m->max_transfers = m->transfers;
    if (m->max_transfers > 5)
        curl_multi_setopt(m->curl, CURLMOPT_MAXCONNECTS,
                          (long)m->max_transfers);
}

/* Out of the places of state @p from, on the way to @p to. */
static inline void leave_state(retryd_multi *m, retryd_call *k,
                               enum call_state from, enum call_state to)
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
    case S_HEDGED:
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
static inline void enter_state(retryd_multi *m, retryd_call *k,
                               enum call_state from, enum call_state to)
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
    case S_HEDGED:
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
        /* A backoff, or a host pushback's hold (attempt_admit). */
        k->due = retryd__now_ns() + (k->c.hold > 0 ? k->c.hold : k->c.wait);
        break;
    case S_DONE:
        retryd__queue_insert_tail(&m->done, &k->q);
        return;
    }
    timer_add(m, k);
}

/*
 * The one place a call changes state (curl's mstate() in lib/multi.c is
 * the model): out of the places of its state, into those of @p to (a timer
 * at the new state's deadline, its list). The caller sets what the new
 * state reads first: k->pq for S_PERMIT, the handle in the curl multi for
 * S_TRANSFER. A move the table does not allow is a bug that would leave a
 * call in two lists or none, so it stops the process, in every build: the
 * check is a table lookup, a few times a request.
 *
 * Inline, here, for the same reason as the rest of this part: each caller
 * names its target state, and the compiler keeps only that state's entry.
 */
static inline void mstate(retryd_multi *m, retryd_call *k, enum call_state to)
{
    enum call_state from = k->state;
    if (!(legal_moves[from] & (1u << to)))
        abort();
    leave_state(m, k, from, to);
    k->state = to;
    enter_state(m, k, from, to);
}

/*
 * A hedge (docs/hedging.md) enters the machine at S_ATTEMPT and leaves it
 * from there, its attempt ended and logged, straight to S_IDLE, in no list
 * of the multi's on either side: its `all` is in its parent's hedges,
 * which multi.c keeps. These two moves are a hedge's alone; mstate() and
 * its table are every request's, which pays for no test of them.
 */
static inline void mstate_hedge_born(retryd_call *h)
{
    if (h->state != S_IDLE || h->parent == NULL)
        abort();
    h->state = S_ATTEMPT;
}

static inline void mstate_hedge_gone(retryd_multi *m, retryd_call *h)
{
    if (h->state != S_ATTEMPT || h->parent == NULL)
        abort();
    timer_remove(m, h); /* none: S_ATTEMPT has no timer */
    h->state = S_IDLE;
}

/* --- the rest, in multi_state.c ----------------------------------------- */

/* The call whose timer is due first, or NULL. */
retryd_call *retryd__multi_timer_first(const retryd_multi *m);

/* Profile @p p's permit queue, made on first use; NULL: no memory. */
permit_queue *retryd__multi_queue_of(retryd_multi *m, retryd_profile *p);

/* A call's memory: a cached one, or malloc's (not zeroed); NULL: none. */
retryd_call *retryd__multi_call_alloc(retryd_multi *m);

/* @p k (S_IDLE, its call freed) back to the cache, or freed. */
void retryd__multi_call_release(retryd_multi *m, retryd_call *k);

#endif
