/* SPDX-License-Identifier: MIT */
/*
 * retryd_multi: the asynchronous driver of the attempt state machine
 * (attempt.h), over curl multi. Read docs/async.md first.
 *
 * retryd_execute runs the steps of a call back to back on its thread; here
 * each call advances whenever what it waits for arrives, and in between it
 * sits in one place that says what it waits for: its state. What each
 * state holds, and the one function that moves a call between them
 * (mstate), are in multi_state.h; this file drives the calls
 * through them. The caller's loop sees one timer: the earliest of
 * libcurl's, the calls' timers, the permit queues' polling and "at once"
 * when a completion is due.
 *
 * A transfer's timeouts are the multi's, not libcurl's: libcurl keeps two
 * timers per transfer (the connect and the whole-transfer timeout) in its
 * own lists, at about 1 200 instructions a keep-alive request, where the
 * multi's own timers (multi_state.c) cost a few dozen (docs/benchmarks.md).
 * transfer_due() ends a transfer whose time came as libcurl would have,
 * with CURLE_OPERATION_TIMEDOUT and the evidence its stages proved.
 * Completion callbacks run only from service(), outside every libcurl
 * call, so they may submit and cancel.
 */
#include <stdlib.h>
#include <stdio.h>

#include <curl/curl.h>

#include "base/clock.h"
#include "exec/attempt.h"
#include "exec/executor.h"
#include "exec/multi_run.h"
#include "exec/multi_state.h"
#include "exec/pool.h"
#include "exec/transfer.h"
#include "exec/validate.h"
#include "retryd/multi.h"

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

/* --- the state machine, driven -------------------------------------------- */

/* The multi's part of a new call @p k (its call set up): idle, with no
 * handle, timer, queue or hedge; a request's completion @p done, or a
 * hedge's @p parent. */
static void call_place(retryd_multi *m, retryd_call *k, retryd_call *parent,
                       retryd_done_fn done, void *done_ctx)
{
    k->m = m;
    k->parent = parent;
    k->done = done;
    k->done_ctx = done_ctx;
    k->h = NULL;
    k->state = S_IDLE;
    k->timer = T_NONE;
    k->pq = NULL;
    k->n_hedges = 0;
    k->hedge_armed = false;
    retryd__queue_init(&k->hedges);
    retryd__queue_init(&k->q);
}

static void serve_queues(retryd_multi *m);
static void attempt_over(retryd_multi *m, retryd_call *k);
static void hedge_consider(retryd_multi *m, retryd_call *k);
static void hedge_disarm(retryd_multi *m, retryd_call *k);
static void hedges_stop(retryd_multi *m, retryd_call *k, bool lost);

/* The call is over: @p err, and when @p with_result what its attempts
 * came to, with the response @p resp holds (its own, or a hedge's that
 * answered), none: no result. Its completion runs from complete(), from
 * the loop (never from inside submit). */
static void finish_with(retryd_multi *m, retryd_call *k, call *resp, int err,
                        bool with_result)
{
    k->err = err;
    k->result = NULL;
    if (with_result && k->c.n_att > 0 &&
        (k->result = retryd__call_result_from(&k->c, resp)) == NULL)
        k->err = RETRYD_ENOMEM;
    mstate(m, k, S_DONE);
}

static void finish(retryd_multi *m, retryd_call *k, int err, bool with_result)
{
    finish_with(m, k, &k->c, err, with_result);
}

/* After retryd__attempt_decide (@p r): a backoff, or done. */
static void decided(retryd_multi *m, retryd_call *k, int r)
{
    if (r == 1)
        mstate(m, k, S_BACKOFF);
    else
        finish(m, k, r, r == 0);
}

/* The transfer ended (or never ran) with @p rc: the attempt's evidence,
 * its permit back, its decision; then the queue may have a permit. */
static void end_attempt(retryd_multi *m, retryd_call *k, int rc)
{
    retryd__attempt_end(&k->c, k->h, rc);
    k->h = NULL;
    attempt_over(m, k);
    serve_queues(m);
}

/* With a permit and handle @p h: the body, the handle's options, and the
 * handle into the curl multi, whose loop runs the transfer, bounded by the
 * multi's timers (no libcurl timer: attempt_ns 0 to the transfer). */
static void begin_transfer(retryd_multi *m, retryd_call *k, easy *h)
{
    int rc = CURLE_OK; /* stays so when the body did not open */
    k->h = h;
    if (retryd__attempt_begin(&k->c, h) &&
        (rc = retryd__transfer_setup(&k->c, h, 0)) == CURLE_OK) {
        if (curl_multi_add_handle(m->curl, h->curl) == CURLM_OK) {
            mstate(m, k, S_TRANSFER);
            /* A hedgeable request's attempt is out: when its first hedge
             * is due (docs/hedging.md). */
            if (k->c.hedgeable) { /* never a hedge's own call */
                k->hedge_from = retryd__now_ns();
                hedge_consider(m, k);
            }
            return;
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
    attempt_over(m, k);
}

/*
 * A permit without waiting: the transfer begins, or the call waits in its
 * profile's queue (behind any call already there, which a permit given
 * back serves first) until a permit frees or its bulkhead deadline,
 * bounded by its own, passes. Inlined in both its callers (a request's
 * attempt, a hedge): out of line, every request pays the call.
 */
static inline __attribute__((always_inline)) void ask_permit(retryd_multi *m,
                                                             retryd_call *k)
{
    easy *h;
    permit_queue *q = retryd__multi_queue_of(m, k->c.p);
    int r = q == NULL ? RETRYD_ENOMEM
            : !retryd__queue_empty(&q->calls)
                ? RETRYD_EFULL
                : retryd__slot_try_take(k->c.p, &h);
    if (r == 0) {
        begin_transfer(m, k, h);
    } else if (r == RETRYD_EFULL) {
        k->pq = q;
        mstate(m, k, S_PERMIT);
    } else {
        unpermitted(m, k, r);
    }
}

/* The call's next attempt (S_ATTEMPT): its first, or the one after its
 * backoff. */
static void start_attempt(retryd_multi *m, retryd_call *k)
{
    int r = retryd__attempt_admit(&k->c);
    if (r == 1) { /* a host pushback: its hold is the timer */
        mstate(m, k, S_BACKOFF);
        return;
    }
    if (r != 0) { /* not sent (2): the log says why; or an error */
        finish(m, k, r == 2 ? 0 : r, r == 2);
        return;
    }
    r = retryd__attempt_open(&k->c);
    if (r < 0)
        finish(m, k, r, false);
    else
        ask_permit(m, k);
}

/* Queued calls of @p q take the permits that are free, oldest first,
 * until one is refused. */
static void serve_queue(retryd_multi *m, permit_queue *q)
{
    while (!retryd__queue_empty(&q->calls)) {
        retryd_call *k = of_q(retryd__queue_head(&q->calls));
        easy *h;
        int r = retryd__slot_try_take(q->p, &h);
        if (r == RETRYD_EFULL)
            return;
        mstate(m, k, S_ATTEMPT);
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
        RETRYD_QUEUE_FOREACH(it, &m->queues)
        serve_queue(m, RETRYD_QUEUE_DATA(it, permit_queue, node));
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
    mstate(m, k, S_ATTEMPT);
    unpermitted(m, k, RETRYD_ETIMEDOUT);
}

/* @p k's transfer, out of the curl multi already (k left S_TRANSFER), cut
 * off: its attempt ended as what its stages proved, failure aborted, with
 * the error @p why. */
static void transfer_cut(retryd_call *k, const char *why)
{
    easy *e = k->h;
    k->c.trace.cancelled = true;
    retryd__transfer_done(&k->c, e, &retryd__attempt_current(&k->c)->a,
                          CURLE_ABORTED_BY_CALLBACK);
    snprintf(k->c.errbuf, sizeof(k->c.errbuf), "%s", why);
    retryd__attempt_end(&k->c, e, CURLE_ABORTED_BY_CALLBACK);
    k->h = NULL;
}

/* --- hedging (docs/hedging.md) ------------------------------------------- *
 *
 * A hedge is a call of the multi's own, with its request as its parent: it
 * waits for a permit and transfers like any attempt, and its attempt
 * joins the request's log when it ends. Whichever attempt of a round
 * answers first (retryd__attempt_answers) is decided by the engine and the
 * others are stopped; one that ends without an answer while another still
 * runs is set aside, and the engine decides the round on the last one.
 */

static bool hedge_less(const retryd_heap_node *a, const retryd_heap_node *b)
{
    return RETRYD_HEAP_CDATA(a, retryd_call, hedge_node)->hedge_due <
           RETRYD_HEAP_CDATA(b, retryd_call, hedge_node)->hedge_due;
}

static void hedge_disarm(retryd_multi *m, retryd_call *k)
{
    if (!k->hedge_armed)
        return;
    retryd__heap_remove(&m->hedge_heap, &k->hedge_node, hedge_less);
    k->hedge_armed = false;
}

static void hedge_send(retryd_multi *m, retryd_call *k);

/* What the engine says of @p k's next hedge now: its timer for a WAIT, the
 * hedge for a SEND (its tokens are taken), nothing for a NO (the attempts
 * in flight go on; the result says why). */
static void hedge_consider(retryd_multi *m, retryd_call *k)
{
    int64_t now = retryd__now_ns();
    if (retryd__hedge_ask(&k->c, now - k->hedge_from) < 0)
        return;
    if (k->c.hedge_d.verdict == RETRYD_HEDGE_SEND) {
        hedge_send(m, k);
    } else if (k->c.hedge_d.verdict == RETRYD_HEDGE_WAIT) {
        k->hedge_due = now + k->c.hedge_d.delay_ns;
        k->hedge_armed = true;
        retryd__heap_insert(&m->hedge_heap, &k->hedge_node, hedge_less);
    }
}

/* @p h out of its parent's hedges, its attempts into the parent's log, its
 * call freed. */
static void hedge_free(retryd_multi *m, retryd_call *h)
{
    retryd_call *k = h->parent;
    retryd__queue_remove(&h->all);
    k->n_hedges--;
    /* Out of memory, the hedge's entry is lost; nothing else is. */
    if (h->c.n_att > 0)
        (void)retryd__call_adopt(&k->c, &h->c);
    mstate_hedge_gone(m, h);
    retryd__call_free_hedge(&h->c);
    retryd__multi_call_release(m, h);
}

static void hedge_send(retryd_multi *m, retryd_call *k)
{
    retryd_call *h = retryd__multi_call_alloc(m);
    if (h == NULL)
        return; /* out of memory: its tokens are spent, nothing is sent */
    retryd__call_init_hedge(&h->c, &k->c);
    call_place(m, h, k, NULL, NULL);
    retryd__queue_insert_tail(&k->hedges, &h->all);
    k->n_hedges++;
    mstate_hedge_born(h);
    if (retryd__attempt_open_hedge(&h->c) < 0) {
        hedge_free(m, h);
        return;
    }
    /* The next one's timer first: the hedge's own attempt may end (and
     * end the request) before ask_permit returns. */
    k->hedge_from = retryd__now_ns();
    hedge_consider(m, k);
    ask_permit(m, h);
}

/* Stop the attempt @p k runs or waits a permit for, @p why: a transfer
 * taken out of the curl multi (cut), a permit wait left (never sent).
 * Whether there was one; k is in S_ATTEMPT after. */
static bool attempt_stop(retryd_multi *m, retryd_call *k, const char *why)
{
    enum call_state was = k->state;
    if (was != S_ATTEMPT)
        mstate(m, k, S_ATTEMPT);
    if (was == S_TRANSFER)
        transfer_cut(k, why);
    else if (was == S_PERMIT)
        retryd__attempt_unpermitted(&k->c, RETRYD_ECANCELED);
    return was == S_TRANSFER || was == S_PERMIT;
}

/* Stop @p h's attempt and log it: set aside when a sibling answered
 * (@p lost), decided by the engine when the caller cancelled; then
 * freed. */
static void hedge_stop(retryd_multi *m, retryd_call *h, bool lost)
{
    (void)attempt_stop(m, h,
                       lost ? "stopped: another attempt of the request "
                              "answered first"
                            : "cancelled by the caller");
    if (lost)
        (void)retryd__attempt_set_aside(&h->c,
                                        RETRYD_RULE_HEDGE_SIBLING_ANSWERED);
    else
        (void)retryd__attempt_decide(&h->c);
    hedge_free(m, h);
}

static void hedges_stop(retryd_multi *m, retryd_call *k, bool lost)
{
    while (!retryd__queue_empty(&k->hedges))
        hedge_stop(
            m,
            RETRYD_QUEUE_DATA(retryd__queue_head(&k->hedges), retryd_call, all),
            lost);
}

/* A hedge of @p k answered first: k's own attempt, if still running, is
 * stopped and logged (it outlived the hedge: so the latency picture hears
 * of it); k is then held by the code. */
static void primary_lose(retryd_multi *m, retryd_call *k)
{
    /* A transfer cut off outlived the hedge (its trace says cancelled,
     * the caller did not). Else it was logged already. */
    if (attempt_stop(m, k, "stopped: a hedge of the request answered first"))
        (void)retryd__attempt_set_aside(&k->c,
                                        RETRYD_RULE_HEDGE_SIBLING_ANSWERED);
}

/* @p k's own attempt ended while hedges of it run. */
static void primary_over(retryd_multi *m, retryd_call *k)
{
    hedge_disarm(m, k);
    if (retryd__attempt_answers(&k->c)) {
        hedges_stop(m, k, true);
        decided(m, k, retryd__attempt_decide(&k->c));
        return;
    }
    if (retryd__attempt_set_aside(&k->c, RETRYD_RULE_HEDGE_SIBLING_RUNNING) <
        0) {
        hedges_stop(m, k, false);
        finish(m, k, RETRYD_ENOMEM, false);
        return;
    }
    mstate(m, k, S_HEDGED);
}

/* The hedge @p h decides its round: it answered, or it is the last of the
 * round. The rest stop, the engine decides it, and its request goes on
 * from there: a retry's backoff, or done with the hedge's response. */
static void hedge_decides(retryd_multi *m, retryd_call *h, bool answers)
{
    retryd_call *k = h->parent;
    retryd__queue_remove(&h->all); /* not among the siblings stopped */
    retryd__queue_init(&h->all);
    hedge_disarm(m, k);
    primary_lose(m, k);
    hedges_stop(m, k, true);
    retryd__queue_insert_tail(&k->hedges, &h->all);
    int r = retryd__attempt_decide(&h->c);
    if (r >= 0 && answers) {
        k->c.hedge_won = true;
        retryd_upstream_hedge_won(k->c.p->budget);
    }
    k->c.wait = h->c.wait; /* a retry's wait, and its next prev_delay */
    k->c.force_http11 |= h->c.force_http11;
    int a = h->c.n_att > 0 ? retryd__call_adopt(&k->c, &h->c) : 0;
    if (r == 1 && a == 0)
        mstate(m, k, S_BACKOFF);
    else
        finish_with(m, k, &h->c, r < 0 ? r : a, r >= 0 && a == 0);
    hedge_free(m, h);
}

/* A hedge's attempt ended. */
static void hedge_over(retryd_multi *m, retryd_call *h)
{
    retryd_call *k = h->parent;
    bool last = k->state == S_HEDGED && k->n_hedges == 1;
    bool answers = retryd__attempt_answers(&h->c);
    if (answers || last) {
        hedge_decides(m, h, answers);
        return;
    }
    (void)retryd__attempt_set_aside(&h->c, RETRYD_RULE_HEDGE_SIBLING_RUNNING);
    hedge_free(m, h);
}

/* An attempt of a hedged round ended: a hedge's, or one whose hedges still
 * run. Out of line, so that attempt_over, which every attempt of every
 * request passes, keeps the small frame of a plain attempt's path. */
static __attribute__((noinline)) void round_attempt_over(retryd_multi *m,
                                                         retryd_call *k)
{
    if (k->parent != NULL)
        hedge_over(m, k);
    else
        primary_over(m, k);
}

/* An attempt ended (or never went out): one of a hedged round, or a plain
 * one, which the engine decides. */
static void attempt_over(retryd_multi *m, retryd_call *k)
{
    if (k->parent != NULL || k->n_hedges > 0) {
        round_attempt_over(m, k);
        return;
    }
    hedge_disarm(m, k);
    decided(m, k, retryd__attempt_decide(&k->c));
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
    enum call_state was = k->state;
    k->c.cancelled = true; /* nothing more to the sink */
    /* Its hedges first, decided as cancelled like its own attempt, which
     * then comes last in the log. */
    hedge_disarm(m, k);
    hedges_stop(m, k, false);
    mstate(m, k, S_ATTEMPT);
    if (was != S_TRANSFER)
        return;
    transfer_cut(k, "cancelled by the caller");
    (void)retryd__attempt_decide(&k->c); /* out of memory: not logged */
    serve_queues(m);
}

/* Its completion runs, then the call is gone. */
static void complete(retryd_multi *m, retryd_call *k)
{
    mstate(m, k, S_IDLE);
    k->m = NULL; /* a late cancel finds it gone */
    k->done(k->done_ctx, k, k->err, k->result);
    retryd__call_free(&k->c);
    retryd__multi_call_release(m, k);
}

/* Stop @p k and complete it now with @p err (with what its attempts came
 * to when cancelled); one already over completes as it finished. */
static void abort_call(retryd_multi *m, retryd_call *k, int err)
{
    if (k->state != S_DONE) {
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
    while (!retryd__queue_empty(&m->all))
        abort_call(
            m, RETRYD_QUEUE_DATA(retryd__queue_head(&m->all), retryd_call, all),
            err);
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
    bool moved = !retryd__queue_empty(&m->done);
    while (!retryd__queue_empty(&m->done))
        complete(m, of_q(retryd__queue_head(&m->done)));
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
        mstate(m, k, S_ATTEMPT); /* out of the curl multi */
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
    int64_t end = multi_transfer_end(k);
    bool connecting = k->due < end;
    if (connecting && k->c.trace.prereq_calls > 0) {
        mstate(m, k, S_TRANSFER); /* its timer, to the transfer's end */
        return;
    }
    mstate(m, k, S_ATTEMPT); /* out of the curl multi */
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
    /* Each case moves the call out of its state, or (a connected
     * transfer) its timer later. */
    for (retryd_call *k;
         (k = retryd__multi_timer_first(m)) != NULL && k->due <= now;) {
        if (k->state == S_BACKOFF) {
            mstate(m, k, S_ATTEMPT);
            start_attempt(m, k);
        } else if (k->state == S_TRANSFER) {
            transfer_due(m, k);
        } else {
            permit_deadline(m, k);
        }
        moved = true;
    }
    for (retryd_heap_node *n; (n = retryd__heap_min(&m->hedge_heap)) != NULL;) {
        retryd_call *k = RETRYD_HEAP_DATA(n, retryd_call, hedge_node);
        if (k->hedge_due > now)
            break;
        hedge_disarm(m, k);
        hedge_consider(m, k);
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
    const retryd_call *t = retryd__multi_timer_first(m);
    if (t != NULL && (due < 0 || t->due < due))
        due = t->due;
    const retryd_heap_node *hn = retryd__heap_min(&m->hedge_heap);
    if (hn != NULL) {
        const retryd_call *hk = RETRYD_HEAP_CDATA(hn, retryd_call, hedge_node);
        if (due < 0 || hk->hedge_due < due)
            due = hk->hedge_due;
    }
    if (m->n_waiting > 0 && (due < 0 || m->poll_due < due))
        due = m->poll_due;
    return !retryd__queue_empty(&m->done) ? 0 : due;
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

static int on_socket(CURL *h, curl_socket_t fd, int what, void *ctx,
                     void *socketp)
{
    retryd_multi *m = ctx;
    (void)h;
    if (m->socket == NULL)
        return retryd__pollset_watch(&m->ps, fd, what);
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

/* One wait of retryd_multi_run: poll, then each ready descriptor (copied
 * first: an action changes the set), then whatever is due. */
static int run_once(retryd_multi *m, int ms)
{
    int n = retryd__pollset_wait(&m->ps, ms);
    if (n < 0)
        return n;
    int r = 0;
    for (int i = 0; i < n && r == 0; i++)
        r = curl_action(m, m->ps.ready[i].fd,
                        retryd__pollset_events(m->ps.ready[i].revents));
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
    retryd__queue_init(&m->all);
    retryd__queue_init(&m->done);
    retryd__heap_init(&m->heap);
    retryd__heap_init(&m->hedge_heap);
    retryd__queue_init(&m->line);
    retryd__queue_init(&m->queues);
    retryd__queue_init(&m->cache);
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
    for (retryd_queue *n; (n = retryd__queue_pop(&m->cache)) != NULL;)
        free(RETRYD_QUEUE_DATA(n, retryd_call, all));
    for (retryd_queue *n; (n = retryd__queue_pop(&m->queues)) != NULL;)
        free(RETRYD_QUEUE_DATA(n, permit_queue, node));
    retryd__pollset_free(&m->ps);
    free(m);
}

/* The request as this library reads it, validated, in a new call. */
static int new_call(retryd_multi *m, retryd_profile *p,
                    const retryd_request *caller_req, retryd_call **ret)
{
    const retryd_request *req;
    retryd_call *k = retryd__multi_call_alloc(m);
    if (k == NULL)
        return RETRYD_ENOMEM;
    /* As retryd_execute: read in place unless built against another
     * header; a copy lives in the call (docs/abi.md). */
    int r = RETRYD_OPTS_VIEW(req, &k->copy, caller_req, sizeof(size_t));
    if (r == 0 && retryd__validate_request(req) < 0)
        r = RETRYD_EINVAL;
    if (r < 0) {
        retryd__multi_call_release(m, k);
        return r;
    }
    r = retryd__call_init(&k->c, p, req);
    if (r < 0) {
        retryd__call_free(&k->c);
        retryd__multi_call_release(m, k);
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
    call_place(m, k, NULL, done, done_ctx);
    mstate(m, k, S_ATTEMPT); /* in flight */
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

/* --- retryd_execute's hedged requests (multi_run.h) ----------------------- */

typedef struct run_wait {
    bool done;
    int err;
    retryd_result *result;
} run_wait;

static void run_done(void *ctx, retryd_call *k, int err, retryd_result *result)
{
    run_wait *w = ctx;
    (void)k;
    w->done = true;
    w->err = err;
    w->result = result;
}

/* The client's idle multis, freed with it (retryd_client_free). */
static void free_idle_multis(retryd_client *client)
{
    while (client->idle_multis != NULL) {
        retryd_multi *m = client->idle_multis;
        client->idle_multis = m->next_idle;
        retryd_multi_free(m);
    }
}

int retryd__multi_execute(retryd_profile *p, const retryd_request *req,
                          retryd_result **ret)
{
    retryd_client *client = p->client;
    pthread_mutex_lock(&client->multis_lock);
    retryd_multi *m = client->idle_multis;
    if (m != NULL)
        client->idle_multis = m->next_idle;
    client->free_multis = free_idle_multis;
    pthread_mutex_unlock(&client->multis_lock);
    if (m == NULL) {
        int r = retryd_multi_new(client, NULL, &m);
        if (r < 0)
            return r;
    }
    run_wait w = {0};
    int r = retryd_multi_submit(m, p, req, run_done, &w, NULL);
    if (r == 0)
        r = retryd_multi_run(m, -1); /* until this request completed */
    pthread_mutex_lock(&client->multis_lock);
    m->next_idle = client->idle_multis;
    client->idle_multis = m;
    pthread_mutex_unlock(&client->multis_lock);
    if (r == 0 && !w.done)
        r = RETRYD_ECURL;
    if (r < 0 || w.err < 0) {
        retryd_result_free(w.result);
        return r < 0 ? r : w.err;
    }
    *ret = w.result;
    return 0;
}
