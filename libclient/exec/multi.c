/* SPDX-License-Identifier: MIT */
/*
 * retryd_multi: the asynchronous driver of the attempt state machine
 * (attempt.h), over curl multi. Read docs/async.md first.
 *
 * retryd_execute runs the steps of a call back to back on its thread; here
 * each call advances whenever what it waits for arrives, and in between it
 * sits in one place that says what it waits for:
 *
 *   S_PERMIT    in its profile's permit queue, and in the timer heap at
 *               its bulkhead deadline (the attempt is open, nothing held);
 *   S_TRANSFER  its easy handle in the curl multi (a permit held), and
 *               in the timers (timer_add) at its connect or transfer
 *               deadline;
 *   S_BACKOFF   in the timer heap at the end of its wait (nothing held);
 *   S_DONE      in the done list, its completion due from the loop.
 *
 * The caller's loop sees one timer: the earliest of libcurl's, the heap's
 * top, the permit queues' polling and "at once" when a completion is due.
 * A transfer's timeouts are the multi's, not libcurl's: libcurl keeps two
 * timers per transfer (the connect and the whole-transfer timeout) in its
 * own lists, at about 1 200 instructions a keep-alive request, where the
 * multi's own timers (timer_add) cost a few dozen (docs/benchmarks.md).
 * transfer_due() ends a transfer whose time came as libcurl would have,
 * with CURLE_OPERATION_TIMEDOUT and the evidence its stages proved.
 * Completion callbacks run only from service(), outside every libcurl
 * call, so they may submit and cancel.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "base/clock.h"
#include "base/macros.h"
#include "exec/attempt.h"
#include "exec/call.h"
#include "exec/executor.h"
#include "exec/pool.h"
#include "exec/transfer.h"
#include "exec/validate.h"
#include "retryd/multi.h"

/* How often queued calls ask again for a permit another thread or multi
 * may have given back: the bulkhead's condition variable wakes only
 * threads, and a loop cannot wait on it. */
#define PERMIT_POLL_NS (2 * INT64_C(1000000))
#define NO_HEAP SIZE_MAX
#define CALL_CACHE 64 /* finished calls kept for the next submit */

_Static_assert(RETRYD_POLL_IN == CURL_POLL_IN &&
                   RETRYD_POLL_OUT == CURL_POLL_OUT &&
                   RETRYD_POLL_INOUT == CURL_POLL_INOUT &&
                   RETRYD_POLL_REMOVE == CURL_POLL_REMOVE,
               "socket callback values are libcurl's");
_Static_assert(RETRYD_CSELECT_IN == CURL_CSELECT_IN &&
                   RETRYD_CSELECT_OUT == CURL_CSELECT_OUT &&
                   RETRYD_CSELECT_ERR == CURL_CSELECT_ERR &&
                   RETRYD_SOCKET_TIMEOUT == CURL_SOCKET_TIMEOUT,
               "readiness values are libcurl's");

enum call_state { S_PERMIT, S_TRANSFER, S_BACKOFF, S_DONE };

struct retryd_call {
    call c; /* the state machine's; first, so e->call leads back here */
    retryd_multi *m; /* NULL once its completion has run */
    retryd_done_fn done;
    void *done_ctx;
    retryd_request copy; /* a caller's request of another size, at ours */
    easy *h;             /* S_TRANSFER: the handle in the curl multi */
    enum call_state state;
    int err;               /* S_DONE: what done gets */
    retryd_result *result; /* S_DONE */
    int64_t due; /* S_PERMIT: bulkhead deadline; S_BACKOFF: end; S_TRANSFER:
                  * the connect deadline, then transfer_end() */
    int64_t transfer_start;   /* S_TRANSFER: when its deadlines were armed */
    size_t heap_i;            /* in m->heap, or NO_HEAP */
    bool in_line;             /* in m->line instead (q_prev, q_next) */
    retryd_call *prev, *next; /* m->all: every call in flight */
    /* A permit queue, the done list, or (S_TRANSFER) the timer line. */
    retryd_call *q_prev, *q_next;
};

typedef struct call_list {
    retryd_call *head, *tail;
} call_list;

/* The calls of one profile waiting for its permits, oldest first. */
typedef struct permit_queue {
    retryd_profile *p;
    call_list l;
} permit_queue;

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
    size_t in_flight;
    /* Transfers in the curl multi now, and the most there ever were: the
     * idle connections libcurl may keep (keep_connections). */
    size_t transfers, max_transfers;
    retryd_call *all;
    call_list done;
    retryd_call **heap; /* a binary min-heap on due */
    size_t n_heap, cap_heap;
    call_list line; /* transfer timers added in order of due */
    permit_queue *queues;
    size_t n_queues, n_waiting;
    retryd_call *cache;
    size_t n_cache;
    /* retryd_multi_run's own poll set, kept by the socket callback */
    struct pollfd *pfd, *ready;
    size_t n_pfd, cap_pfd;
    size_t *slot_of_fd; /* fd -> index in pfd + 1, 0: not watched */
    size_t cap_fd;
};

static retryd_call *of_call(call *c)
{
    return RETRYD_CONTAINER_OF(c, retryd_call, c);
}

/* --- the timer heap -------------------------------------------------------
 */

static void heap_set(retryd_multi *m, size_t i, retryd_call *k)
{
    m->heap[i] = k;
    k->heap_i = i;
}

static void heap_up(retryd_multi *m, size_t i)
{
    retryd_call *k = m->heap[i];
    while (i > 0 && m->heap[(i - 1) / 2]->due > k->due) {
        heap_set(m, i, m->heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(m, i, k);
}

static void heap_down(retryd_multi *m, size_t i)
{
    retryd_call *k = m->heap[i];
    for (size_t child; (child = 2 * i + 1) < m->n_heap; i = child) {
        if (child + 1 < m->n_heap &&
            m->heap[child + 1]->due < m->heap[child]->due)
            child++;
        if (m->heap[child]->due >= k->due)
            break;
        heap_set(m, i, m->heap[child]);
    }
    heap_set(m, i, k);
}

static int heap_push(retryd_multi *m, retryd_call *k)
{
    if (m->n_heap == m->cap_heap) {
        size_t cap = m->cap_heap ? 2 * m->cap_heap : 64;
        retryd_call **h = realloc(m->heap, cap * sizeof(*h));
        if (h == NULL)
            return RETRYD_ENOMEM;
        m->heap = h;
        m->cap_heap = cap;
    }
    m->heap[m->n_heap] = k;
    heap_up(m, m->n_heap++);
    return 0;
}

static void heap_remove(retryd_multi *m, retryd_call *k)
{
    size_t i = k->heap_i;
    if (i == NO_HEAP)
        return;
    k->heap_i = NO_HEAP;
    retryd_call *last = m->heap[--m->n_heap];
    if (last == k)
        return;
    heap_set(m, i, last);
    heap_up(m, i);
    heap_down(m, last->heap_i);
}

/* --- lists ---------------------------------------------------------------- */

static void list_push(call_list *l, retryd_call *k)
{
    k->q_next = NULL;
    k->q_prev = l->tail;
    if (l->tail)
        l->tail->q_next = k;
    else
        l->head = k;
    l->tail = k;
}

static void list_unlink(call_list *l, retryd_call *k)
{
    if (k->q_prev)
        k->q_prev->q_next = k->q_next;
    else
        l->head = k->q_next;
    if (k->q_next)
        k->q_next->q_prev = k->q_prev;
    else
        l->tail = k->q_prev;
    k->q_prev = k->q_next = NULL;
}

/*
 * A transfer's timer goes into a list instead when it is due no earlier
 * than the list's last: one profile's transfers fall due in the order they
 * started (now plus the same timeout), and the heap would sift log n
 * levels each time a transfer ends near its top. Any other timer goes into
 * the heap. The earliest timer is the earlier of the heap's top and the
 * list's head. A transfer is in no other list, so the line uses q_prev and
 * q_next.
 */
static int timer_add(retryd_multi *m, retryd_call *k)
{
    if (k->state != S_TRANSFER ||
        (m->line.tail != NULL && k->due < m->line.tail->due))
        return heap_push(m, k);
    k->in_line = true;
    list_push(&m->line, k);
    return 0;
}

static void timer_remove(retryd_multi *m, retryd_call *k)
{
    if (!k->in_line) {
        heap_remove(m, k);
        return;
    }
    k->in_line = false;
    list_unlink(&m->line, k);
}

/* The earliest timer, or NULL. */
static retryd_call *timer_first(const retryd_multi *m)
{
    retryd_call *h = m->n_heap > 0 ? m->heap[0] : NULL;
    if (m->line.head == NULL || (h != NULL && h->due < m->line.head->due))
        return h;
    return m->line.head;
}

static permit_queue *queue_of(retryd_multi *m, retryd_profile *p)
{
    for (size_t i = 0; i < m->n_queues; i++)
        if (m->queues[i].p == p)
            return &m->queues[i];
    permit_queue *q =
        realloc(m->queues, (m->n_queues + 1) * sizeof(*m->queues));
    if (q == NULL)
        return NULL;
    m->queues = q;
    q[m->n_queues] = (permit_queue){.p = p};
    return &q[m->n_queues++];
}

/* --- calls ---------------------------------------------------------------- */

static retryd_call *call_alloc(retryd_multi *m)
{
    retryd_call *k = m->cache;
    if (k != NULL) {
        m->cache = k->next;
        m->n_cache--;
        return k;
    }
    /* Not zeroed: call_init sets what it reads, and the large first
     * buffers are only sized (call.h). */
    return malloc(sizeof(*k));
}

static void call_release(retryd_multi *m, retryd_call *k)
{
    if (m->n_cache >= CALL_CACHE) {
        free(k);
        return;
    }
    k->next = m->cache;
    m->cache = k;
    m->n_cache++;
}

static void link_call(retryd_multi *m, retryd_call *k)
{
    k->prev = NULL;
    k->next = m->all;
    if (m->all)
        m->all->prev = k;
    m->all = k;
    m->in_flight++;
}

static void unlink_call(retryd_multi *m, retryd_call *k)
{
    if (k->prev)
        k->prev->next = k->next;
    else
        m->all = k->next;
    if (k->next)
        k->next->prev = k->prev;
    m->in_flight--;
}

/* --- the state machine, driven -------------------------------------------- */

static void serve_queues(retryd_multi *m);

/* The call is over: @p err, and when @p with_result what its attempts
 * came to (none: no result). Its completion runs from complete(). */
static void finish(retryd_multi *m, retryd_call *k, int err, bool with_result)
{
    timer_remove(m, k);
    k->state = S_DONE;
    k->err = err;
    k->result = NULL;
    if (with_result && k->c.n_att > 0 &&
        (k->result = retryd__call_result(&k->c)) == NULL)
        k->err = RETRYD_ENOMEM;
}

/* Over, its completion due from the loop (never from inside submit). */
static void finish_later(retryd_multi *m, retryd_call *k, int err)
{
    finish(m, k, err, err == 0);
    list_push(&m->done, k);
}

/* After retryd__attempt_decide (@p r): a backoff timer, or done. */
static void decided(retryd_multi *m, retryd_call *k, int r)
{
    if (r == 1) {
        /* From now, as retryd_execute sleeps from now: a Retry-After is
         * a floor from the answer that carried it. */
        k->state = S_BACKOFF;
        k->due = retryd__now_ns() + k->c.wait;
        if (timer_add(m, k) == 0)
            return;
        r = RETRYD_ENOMEM;
    }
    finish_later(m, k, r);
}

/* The transfer ended (or never ran) with @p rc: the attempt's evidence,
 * its permit back, its decision; then the queue may have a permit. */
static void end_attempt(retryd_multi *m, retryd_call *k, int rc)
{
    retryd__attempt_end(&k->c, k->h, rc);
    k->h = NULL;
    decided(m, k, retryd__attempt_decide(&k->c));
    serve_queues(m);
}

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

/* When the transfer times out: the attempt's time from its start. */
static int64_t transfer_end(const retryd_call *k)
{
    return retryd__add_sat(k->transfer_start, k->c.attempt_ns);
}

/* The transfer's deadlines, as libcurl would count them from its start:
 * connected within the profile's connect timeout, done within the
 * attempt's time. The timers hold the earlier; transfer_due the rest. */
static int arm_transfer(retryd_multi *m, retryd_call *k)
{
    int64_t now = retryd__now_ns();
    int64_t connect_ns = k->c.p->connect_timeout_ns;
    k->transfer_start = now;
    k->due = connect_ns < k->c.attempt_ns ? now + connect_ns : transfer_end(k);
    return timer_add(m, k);
}

/* With a permit and handle @p h: the body, the handle's options, and the
 * handle into the curl multi, whose loop runs the transfer, bounded by the
 * multi's timers (no libcurl timer: attempt_ns 0 to the transfer). */
static void begin_transfer(retryd_multi *m, retryd_call *k, easy *h)
{
    int rc = CURLE_OK; /* stays so when the body did not open */
    k->h = h;
    k->state = S_TRANSFER;
    if (retryd__attempt_begin(&k->c) &&
        (rc = retryd__transfer_setup(&k->c, h, 0)) == CURLE_OK) {
        if (arm_transfer(m, k) == 0) {
            if (curl_multi_add_handle(m->curl, h->curl) == CURLM_OK) {
                keep_connections(m);
                return;
            }
            timer_remove(m, k);
        }
        rc = CURLE_OUT_OF_MEMORY;
        retryd__transfer_done(&k->c, h, &retryd__attempt_current(&k->c)->a, rc);
    }
    end_attempt(m, k, rc);
}

/* No permit (@p err), or none in time: the attempt ends NOT_SENT and is
 * decided, as retryd_execute's does. */
static void unpermitted(retryd_multi *m, retryd_call *k, int err)
{
    retryd__attempt_unpermitted(&k->c, err);
    decided(m, k, retryd__attempt_decide(&k->c));
}

static void leave_queue(retryd_multi *m, retryd_call *k)
{
    list_unlink(&queue_of(m, k->c.p)->l, k); /* found: it is queued */
    m->n_waiting--;
    timer_remove(m, k);
}

/*
 * A permit without waiting: the transfer begins, or the call waits in its
 * profile's queue (behind any call already there, which a permit given
 * back serves first) until a permit frees or its bulkhead deadline,
 * bounded by its own, passes.
 */
static void ask_permit(retryd_multi *m, retryd_call *k)
{
    easy *h;
    permit_queue *q = queue_of(m, k->c.p);
    int r = q == NULL   ? RETRYD_ENOMEM
            : q->l.head ? RETRYD_EFULL
                        : retryd__slot_try_take(k->c.p, &h);
    if (r == 0) {
        begin_transfer(m, k, h);
        return;
    }
    if (r == RETRYD_EFULL) {
        k->due = k->c.permit_deadline;
        if (timer_add(m, k) == 0) {
            list_push(&q->l, k);
            if (m->n_waiting++ == 0)
                m->poll_due = retryd__now_ns() + PERMIT_POLL_NS;
            return;
        }
        r = RETRYD_ENOMEM;
    }
    unpermitted(m, k, r);
}

/* The call's next attempt: its first, or the one after its backoff. */
static void start_attempt(retryd_multi *m, retryd_call *k)
{
    int r = retryd__attempt_open(&k->c);
    if (r < 0) {
        finish_later(m, k, r);
        return;
    }
    k->state = S_PERMIT;
    ask_permit(m, k);
}

/* Queued calls of queue @p i take the permits that are free, oldest
 * first, until one is refused. */
static void serve_queue(retryd_multi *m, size_t i)
{
    for (;;) {
        retryd_call *k = m->queues[i].l.head;
        easy *h;
        if (k == NULL)
            return;
        int r = retryd__slot_try_take(m->queues[i].p, &h);
        if (r == RETRYD_EFULL)
            return;
        leave_queue(m, k);
        if (r == 0)
            begin_transfer(m, k, h);
        else
            unpermitted(m, k, r);
    }
}

/* Permits given back go to the queues. Flattened: a transfer that ends
 * at once gives its permit back from inside, and asks again. */
static void serve_queues(retryd_multi *m)
{
    /* Closing: a queued call is about to be completed, not started. */
    if (m->n_waiting == 0 || m->closing)
        return;
    if (m->serving) {
        m->serve_again = true;
        return;
    }
    m->serving = true;
    do {
        m->serve_again = false;
        for (size_t i = 0; i < m->n_queues; i++)
            serve_queue(m, i);
    } while (m->serve_again);
    m->serving = false;
}

/* A bulkhead deadline passed: the oldest waiters take what is free (this
 * call among them, perhaps); if it still has none, NOT_SENT pool_timeout. */
static void permit_deadline(retryd_multi *m, retryd_call *k)
{
    serve_queues(m);
    if (k->state != S_PERMIT)
        return;
    leave_queue(m, k);
    unpermitted(m, k, RETRYD_ETIMEDOUT);
}

/* --- stopping and completing ---------------------------------------------- */

/*
 * Whatever @p k waits for, it stops. A transfer is taken out of the curl
 * multi and its attempt ended as what its stages proved, failure aborted,
 * then decided like any other (a payment that may have executed is
 * ambiguous: the engine never retries an aborted attempt); a permit or
 * backoff wait just ends.
 */
static void stop(retryd_multi *m, retryd_call *k)
{
    k->c.cancelled = true; /* nothing more to the sink */
    if (k->state == S_PERMIT) {
        leave_queue(m, k);
        return;
    }
    if (k->state == S_BACKOFF) {
        timer_remove(m, k);
        return;
    }
    easy *h = k->h;
    timer_remove(m, k);
    curl_multi_remove_handle(m->curl, h->curl);
    m->transfers--;
    k->c.trace.cancelled = true;
    retryd__transfer_done(&k->c, h, &retryd__attempt_current(&k->c)->a,
                          CURLE_ABORTED_BY_CALLBACK);
    snprintf(k->c.errbuf, sizeof(k->c.errbuf), "cancelled by the caller");
    retryd__attempt_end(&k->c, h, CURLE_ABORTED_BY_CALLBACK);
    k->h = NULL;
    (void)retryd__attempt_decide(&k->c); /* out of memory: not logged */
    serve_queues(m);
}

/* Its completion runs, then the call is gone. */
static void complete(retryd_multi *m, retryd_call *k)
{
    unlink_call(m, k);
    k->m = NULL; /* a late cancel finds it gone */
    k->done(k->done_ctx, k, k->err, k->result);
    retryd__call_free(&k->c);
    call_release(m, k);
}

/* Stop @p k and complete it now with @p err (with what its attempts came
 * to when cancelled); one already over completes as it finished. */
static void abort_call(retryd_multi *m, retryd_call *k, int err)
{
    if (k->state == S_DONE) {
        list_unlink(&m->done, k);
    } else {
        stop(m, k);
        finish(m, k, err, err == RETRYD_ECANCELED);
    }
    complete(m, k);
}

/* Every call in flight completes with @p err; submits are refused
 * meanwhile, so a completion cannot keep the loop going. */
static int abort_all(retryd_multi *m, int err)
{
    bool was = m->closing;
    m->closing = true;
    while (m->all != NULL)
        abort_call(m, m->all, err);
    m->closing = was;
    m->timer_failed = false;
    return err;
}

/* --- libcurl and the caller's loop -----------------------------------------
 */

static int curl_action(retryd_multi *m, int fd, int events)
{
    int running;
    CURLMcode mc = curl_multi_socket_action(m->curl, fd, events, &running);
    /* The timer fired once; libcurl sets the next one when its earliest
     * changed. Should it not have (a timer it thinks unchanged), ask. */
    long ms;
    if (fd == CURL_SOCKET_TIMEOUT && m->curl_due < 0 &&
        curl_multi_timeout(m->curl, &ms) == CURLM_OK && ms >= 0)
        m->curl_due = retryd__now_ns() + (int64_t)ms * 1000000;
    return mc == CURLM_OK ? 0 : RETRYD_ECURL;
}

/* Completions due, each run once, outside every libcurl call. */
static bool deliver(retryd_multi *m)
{
    bool moved = m->done.head != NULL;
    for (retryd_call *k; (k = m->done.head) != NULL;) {
        list_unlink(&m->done, k);
        complete(m, k);
    }
    return moved;
}

/* Finished transfers: each attempt ends, is decided, and moves on; a
 * call it finished completes. */
static bool read_messages(retryd_multi *m)
{
    bool moved = false;
    CURLMsg *msg;
    int left;
    while ((msg = curl_multi_info_read(m->curl, &left)) != NULL) {
        if (msg->msg != CURLMSG_DONE)
            continue;
        CURL *h = msg->easy_handle;
        int rc = msg->data.result; /* msg is gone once h is removed */
        char *priv = NULL;
        curl_easy_getinfo(h, CURLINFO_PRIVATE, &priv);
        easy *e = (easy *)(void *)priv;
        retryd_call *k = of_call(e->call);
        timer_remove(m, k);
        curl_multi_remove_handle(m->curl, h);
        m->transfers--;
        retryd__transfer_done(&k->c, e, &retryd__attempt_current(&k->c)->a, rc);
        end_attempt(m, k, rc);
        /* Its completion at once: the caller usually frees the result
         * there, so results do not pile up (and out of malloc's
         * per-thread cache) while the other messages are read. */
        deliver(m);
        moved = true;
    }
    return moved;
}

/*
 * A transfer's deadline came. At the connect deadline, a transfer that
 * libcurl has asked to send (the pre-request callback: connected, TLS
 * done) runs on to its end; any other stops as libcurl's own timeout
 * would stop it: out of the curl multi, CURLE_OPERATION_TIMEDOUT, libcurl's
 * wording, and the evidence its stages proved (NOT_SENT while connecting).
 */
static void transfer_due(retryd_multi *m, retryd_call *k)
{
    easy *h = k->h;
    int64_t end = transfer_end(k);
    bool connecting = k->due < end;
    if (connecting && k->c.trace.prereq_calls > 0) {
        k->due = end;
        if (timer_add(m, k) == 0)
            return;
        /* Without memory for its timer it cannot be bounded: it ends. */
    }
    curl_multi_remove_handle(m->curl, h->curl);
    m->transfers--;
    snprintf(h->errbuf, sizeof(h->errbuf),
             "%s timed out after %lld milliseconds",
             connecting ? "Connection" : "Operation",
             (long long)((retryd__now_ns() - k->transfer_start) / 1000000));
    retryd__transfer_done(&k->c, h, &retryd__attempt_current(&k->c)->a,
                          CURLE_OPERATION_TIMEDOUT);
    end_attempt(m, k, CURLE_OPERATION_TIMEDOUT);
}

/* Timers whose time came: backoffs end, transfers and bulkhead waits time
 * out, and the permit queues are polled for permits given back
 * elsewhere. */
static bool expire(retryd_multi *m, int64_t now)
{
    bool moved = false;
    for (retryd_call *k; (k = timer_first(m)) != NULL && k->due <= now;) {
        timer_remove(m, k);
        if (k->state == S_BACKOFF)
            start_attempt(m, k);
        else if (k->state == S_TRANSFER)
            transfer_due(m, k);
        else
            permit_deadline(m, k);
        moved = true;
    }
    if (m->n_waiting > 0 && m->poll_due <= now) {
        m->poll_due = now + PERMIT_POLL_NS;
        serve_queues(m);
    }
    return moved;
}

/* The one timer the caller's loop sees: the earliest of libcurl's, the
 * heap's, the queues' poll, and "at once" for a completion due. */
static int64_t next_due(const retryd_multi *m)
{
    int64_t due = m->curl_due;
    const retryd_call *t = timer_first(m);
    if (t != NULL && (due < 0 || t->due < due))
        due = t->due;
    if (m->n_waiting > 0 && (due < 0 || m->poll_due < due))
        due = m->poll_due;
    return m->done.head != NULL ? 0 : due;
}

/* Tell the caller's timer when it changed: 0 at once, -1 none, else the
 * milliseconds rounded up, so it never fires before what it waits for. */
static void sync_timer(retryd_multi *m)
{
    int64_t now = retryd__now_ns(), due = next_due(m);
    if (due > 0 && due <= now)
        due = 0;
    if (due == m->told)
        return;
    m->told = due;
    if (m->timer == NULL)
        return;
    long ms = due <= 0 ? (long)due : (long)((due - now + 999999) / 1000000);
    m->in_cb = true;
    if (m->timer(m->timer_ctx, ms) != 0)
        m->timer_failed = true;
    m->in_cb = false;
}

/*
 * Everything due: libcurl's timer once, then finished transfers, expired
 * waits and completions until nothing moves (bounded all the same). 0 or
 * RETRYD_ECURL.
 *
 * libcurl's timer runs once per service, first: a transfer that a
 * completion or an expired wait adds here starts at the loop's next turn
 * (the timer is told "at once"), after the sockets that became ready in
 * between have been read, as in a loop that drives libcurl directly.
 * Started here instead, before those sockets' transfers had given their
 * connections back, new transfers found the idle connections deeper in
 * libcurl's connection list, and libcurl walks that list up to the
 * connection twice a request (the search for an idle one, and the sweep
 * for connect-only connections at curl_multi_remove_handle): about 2 200
 * instructions a request at 100 in flight (docs/benchmarks.md).
 */
static int service(retryd_multi *m)
{
    int r = 0;
    m->servicing = true;
    if (m->curl_due >= 0 && m->curl_due <= retryd__now_ns()) {
        m->curl_due = -1;
        r = curl_action(m, CURL_SOCKET_TIMEOUT, 0);
    }
    /* After libcurl failed, one round still ends what had finished, as
     * before; the caller then completes the rest with RETRYD_ECURL. */
    for (int round = 0, moved = 1; moved && round < (r == 0 ? 64 : 1);
         round++) {
        int64_t now = retryd__now_ns();
        moved = read_messages(m);
        moved |= expire(m, now);
        moved |= deliver(m);
    }
    m->servicing = false;
    sync_timer(m);
    return r;
}

/* --- retryd_multi_run's poll set -------------------------------------------
 */

static int grow_pollset(retryd_multi *m, int fd)
{
    if ((size_t)fd >= m->cap_fd) {
        size_t cap = m->cap_fd ? m->cap_fd : 64;
        while (cap <= (size_t)fd)
            cap *= 2;
        size_t *s = realloc(m->slot_of_fd, cap * sizeof(*s));
        if (s == NULL)
            return RETRYD_ENOMEM;
        memset(s + m->cap_fd, 0, (cap - m->cap_fd) * sizeof(*s));
        m->slot_of_fd = s;
        m->cap_fd = cap;
    }
    if (m->n_pfd == m->cap_pfd) {
        size_t cap = m->cap_pfd ? 2 * m->cap_pfd : 16;
        struct pollfd *p = realloc(m->pfd, cap * sizeof(*p));
        if (p == NULL)
            return RETRYD_ENOMEM;
        m->pfd = p;
        if ((p = realloc(m->ready, cap * sizeof(*p))) == NULL)
            return RETRYD_ENOMEM;
        m->ready = p;
        m->cap_pfd = cap;
    }
    return 0;
}

/* libcurl's socket callback when the multi runs itself: the poll set. */
static int watch(retryd_multi *m, int fd, int what)
{
    if (fd < 0)
        return -1;
    size_t slot = (size_t)fd < m->cap_fd ? m->slot_of_fd[fd] : 0;
    short ev = (short)((what & CURL_POLL_IN ? POLLIN : 0) |
                       (what & CURL_POLL_OUT ? POLLOUT : 0));
    if (what == CURL_POLL_REMOVE) {
        if (slot == 0)
            return 0;
        struct pollfd last = m->pfd[--m->n_pfd];
        m->slot_of_fd[fd] = 0;
        if (slot - 1 < m->n_pfd) {
            m->pfd[slot - 1] = last;
            m->slot_of_fd[last.fd] = slot;
        }
        return 0;
    }
    if (slot == 0) {
        if (grow_pollset(m, fd) < 0)
            return -1;
        slot = ++m->n_pfd;
        m->slot_of_fd[fd] = slot;
        m->pfd[slot - 1].fd = fd;
    }
    m->pfd[slot - 1].events = ev;
    return 0;
}

static int on_socket(CURL *h, curl_socket_t fd, int what, void *ctx,
                     void *socketp)
{
    retryd_multi *m = ctx;
    (void)h;
    if (m->socket == NULL)
        return watch(m, fd, what);
    m->in_cb = true;
    int r = m->socket(m->socket_ctx, fd, what, socketp);
    m->in_cb = false;
    return r;
}

static int on_curl_timer(CURLM *cm, long ms, void *ctx)
{
    retryd_multi *m = ctx;
    (void)cm;
    m->curl_due = ms < 0 ? -1 : retryd__now_ns() + (int64_t)ms * 1000000;
    return 0;
}

static int events_of(short revents)
{
    return (revents & (POLLIN | POLLHUP | POLLERR) ? CURL_CSELECT_IN : 0) |
           (revents & (POLLOUT | POLLERR) ? CURL_CSELECT_OUT : 0) |
           (revents & POLLERR ? CURL_CSELECT_ERR : 0);
}

/* One wait of retryd_multi_run: poll, then each ready descriptor (copied
 * first: an action changes the set), then whatever is due. */
static int run_once(retryd_multi *m, int ms)
{
    int n = poll(m->pfd, m->n_pfd, ms);
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    size_t k = 0;
    for (size_t i = 0; i < m->n_pfd && k < (size_t)n; i++)
        if (m->pfd[i].revents != 0)
            m->ready[k++] = m->pfd[i];
    int r = 0;
    for (size_t i = 0; i < k && r == 0; i++)
        r = curl_action(m, m->ready[i].fd, events_of(m->ready[i].revents));
    if (m->told >= 0 && m->told <= retryd__now_ns())
        m->told = -1; /* its own timer fired */
    return r < 0 ? r : service(m);
}

static int wait_ms(const retryd_multi *m, int64_t now, int64_t end)
{
    int64_t until = m->told;
    if (end >= 0 && (until < 0 || end < until))
        until = end;
    if (until < 0)
        return -1;
    if (until <= now)
        return 0;
    int64_t ms = (until - now + 999999) / 1000000;
    return ms > 1000000 ? 1000000 : (int)ms;
}

/* --- the public calls ------------------------------------------------------
 */

int retryd_multi_new(retryd_client *client, const retryd_multi_opts *opts,
                     retryd_multi **ret)
{
    retryd_multi_opts o = {0};
    if (client == NULL || ret == NULL)
        return RETRYD_EINVAL;
    if (opts != NULL) {
        int r = RETRYD_COPY_OPTS(&o, opts, sizeof(size_t));
        if (r < 0)
            return r;
    }
    if ((o.socket == NULL) != (o.timer == NULL))
        return RETRYD_EINVAL;
    retryd_multi *m = calloc(1, sizeof(*m));
    if (m == NULL)
        return RETRYD_ENOMEM;
    if ((m->curl = curl_multi_init()) == NULL) {
        free(m);
        return RETRYD_ECURL;
    }
    m->client = client;
    m->socket = o.socket;
    m->socket_ctx = o.socket_ctx;
    m->timer = o.timer;
    m->timer_ctx = o.timer_ctx;
    m->curl_due = m->told = -1;
    curl_multi_setopt(m->curl, CURLMOPT_MAXCONNECTS, 5L); /* keep_connections */
    curl_multi_setopt(m->curl, CURLMOPT_SOCKETFUNCTION, on_socket);
    curl_multi_setopt(m->curl, CURLMOPT_SOCKETDATA, m);
    curl_multi_setopt(m->curl, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(m->curl, CURLMOPT_TIMERDATA, m);
    /* One request per connection at a time, as with retryd_execute: the
     * HTTP/2 proofs (stream ids, REFUSED_STREAM, GOAWAY) are libcurl
     * texts that reach the debug callback of whichever transfer is
     * current on the connection, so a multiplexed stream could lose the
     * proof that it was not processed (docs/async.md). */
    curl_multi_setopt(m->curl, CURLMOPT_PIPELINING, (long)CURLPIPE_NOTHING);
    *ret = m;
    return 0;
}

void retryd_multi_free(retryd_multi *m)
{
    if (m == NULL)
        return;
    abort_all(m, RETRYD_ECANCELED);
    curl_multi_cleanup(m->curl); /* its connections, through on_socket */
    for (retryd_call *k; (k = m->cache) != NULL;) {
        m->cache = k->next;
        free(k);
    }
    free(m->heap);
    free(m->queues);
    free(m->pfd);
    free(m->ready);
    free(m->slot_of_fd);
    free(m);
}

/* The request as this library reads it, validated, in a new call. */
static int new_call(retryd_multi *m, retryd_profile *p,
                    const retryd_request *caller_req, retryd_call **ret)
{
    const retryd_request *req;
    retryd_call *k = call_alloc(m);
    if (k == NULL)
        return RETRYD_ENOMEM;
    /* As retryd_execute: read in place unless built against another
     * header; a copy lives in the call (docs/abi.md). */
    int r = RETRYD_OPTS_VIEW(req, &k->copy, caller_req, sizeof(size_t));
    if (r == 0 && retryd__validate_request(req) < 0)
        r = RETRYD_EINVAL;
    if (r < 0) {
        call_release(m, k);
        return r;
    }
    r = retryd__call_init(&k->c, p, req);
    if (r < 0) {
        retryd__call_free(&k->c);
        call_release(m, k);
        return r;
    }
    *ret = k;
    return 0;
}

int retryd_multi_submit(retryd_multi *m, retryd_profile *p,
                        const retryd_request *req, retryd_done_fn done,
                        void *done_ctx, retryd_call **ret_call)
{
    retryd_call *k;
    if (m == NULL || p == NULL || req == NULL || done == NULL || m->in_cb ||
        m->closing || p->client != m->client)
        return RETRYD_EINVAL;
    int r = new_call(m, p, req, &k);
    if (r < 0)
        return r;
    k->m = m;
    k->done = done;
    k->done_ctx = done_ctx;
    k->h = NULL;
    k->heap_i = NO_HEAP;
    k->in_line = false;
    k->q_prev = k->q_next = NULL;
    link_call(m, k);
    if (ret_call != NULL)
        *ret_call = k;
    start_attempt(m, k);
    if (!m->servicing) /* else service() tells the timer once, at its end */
        sync_timer(m);
    return 0;
}

int retryd_multi_cancel(retryd_multi *m, retryd_call *k)
{
    if (m == NULL || m->in_cb)
        return RETRYD_EINVAL;
    if (k == NULL || k->m != m)
        return RETRYD_ENOENT;
    abort_call(m, k, RETRYD_ECANCELED);
    if (!m->servicing) /* else service() tells the timer at its end */
        sync_timer(m);
    return 0;
}

int retryd_multi_socket_action(retryd_multi *m, int fd, int events,
                               int *ret_running)
{
    int r = 0;
    if (m == NULL || m->in_cb || m->servicing)
        return RETRYD_EINVAL;
    if (m->timer_failed)
        r = RETRYD_ECURL;
    else if (fd == RETRYD_SOCKET_TIMEOUT)
        m->told = -1; /* it fired, and fires once */
    else
        r = curl_action(m, fd, events);
    if (r == 0)
        r = service(m);
    if (r < 0) {
        abort_all(m, r);
        sync_timer(m);
    }
    if (ret_running != NULL)
        *ret_running = (int)m->in_flight;
    return r;
}

int retryd_multi_assign(retryd_multi *m, int fd, void *socketp)
{
    if (m == NULL)
        return RETRYD_EINVAL;
    return curl_multi_assign(m->curl, fd, socketp) == CURLM_OK ? 0
                                                               : RETRYD_ENOENT;
}

int retryd_multi_run(retryd_multi *m, int64_t timeout_ns)
{
    if (m == NULL || m->socket != NULL || m->in_cb || m->servicing)
        return RETRYD_EINVAL;
    int64_t end =
        timeout_ns < 0 ? -1 : retryd__add_sat(retryd__now_ns(), timeout_ns);
    int r = service(m);
    while (r == 0 && m->in_flight > 0) {
        int64_t now = retryd__now_ns();
        if (end >= 0 && now >= end)
            return RETRYD_ETIMEDOUT;
        r = run_once(m, wait_ms(m, now, end));
    }
    if (r == RETRYD_ECURL)
        abort_all(m, r);
    return r;
}

size_t retryd_multi_in_flight(const retryd_multi *m)
{
    return m ? m->in_flight : 0;
}
