/* SPDX-License-Identifier: MIT */
/*
 * The asynchronous driver's calls and where each one is (multi.c drives
 * them, multi_state.c keeps them). Internal to the executor.
 *
 * Where a call is is its state, and only retryd__mstate() moves it from
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
 *   S_DONE      in the done list, its completion due from the loop.
 *
 * Every call in flight (any state but S_IDLE) is in m->all.
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

/* How often queued calls ask again for a permit another thread or multi
 * may have given back: the bulkhead's condition variable wakes only
 * threads, and a loop cannot wait on it. */
#define PERMIT_POLL_NS (2 * INT64_C(1000000))

enum call_state { S_IDLE, S_ATTEMPT, S_PERMIT, S_TRANSFER, S_BACKOFF, S_DONE };

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

/* Moves @p k to state @p to: out of the places of its state, into those of
 * @p to (a timer at the new state's deadline, its list). A move the
 * states do not allow aborts the process. S_TRANSFER to S_TRANSFER moves a
 * connected transfer's timer from its connect deadline to its end. The
 * caller sets what the new state reads first: k->pq for S_PERMIT, the
 * handle in the curl multi for S_TRANSFER. */
void retryd__mstate(retryd_multi *m, retryd_call *k, enum call_state to);

/* The call whose timer is due first, or NULL. */
retryd_call *retryd__multi_timer_first(const retryd_multi *m);

/* Profile @p p's permit queue, made on first use; NULL: no memory. */
permit_queue *retryd__multi_queue_of(retryd_multi *m, retryd_profile *p);

/* A call's memory: a cached one, or malloc's (not zeroed); NULL: none. */
retryd_call *retryd__multi_call_alloc(retryd_multi *m);

/* @p k (S_IDLE, its call freed) back to the cache, or freed. */
void retryd__multi_call_release(retryd_multi *m, retryd_call *k);

#endif
