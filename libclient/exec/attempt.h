/* SPDX-License-Identifier: MIT */
/*
 * The attempt state machine (attempt.c), one implementation for both
 * executors. A request is a `call`; each attempt goes through the same
 * steps whichever driver runs it:
 *
 *   retryd__attempt_admit      the host's health (docs/health.md): send,
 *                              hold (the driver waits c->hold and asks
 *                              again), or not sent (the call is done)
 *   retryd__attempt_open       the next log entry, the first attempt's
 *                              deposit, the attempt's clocks
 *   (a permit and a handle)    the driver's: retryd__slot_take blocks
 *                              (retryd_execute), retryd__slot_try_take
 *                              does not (the multi queues the call)
 *   retryd__attempt_unpermitted  no permit in time: NOT_SENT pool_timeout
 *   retryd__attempt_begin      the body opened; false: no transfer
 *   (the transfer)             the driver's: retryd__transfer_perform, or
 *                              retryd__transfer_setup, curl_multi and
 *                              retryd__transfer_done
 *   retryd__attempt_end        the body closed, the permit and handle back,
 *                              the evidence and the error text
 *   retryd__attempt_decide     the facts, the engine, the statistics, the
 *                              log: done, or a retry after c->wait
 *   (the wait)                 the driver's: nanosleep, or a timer; nothing
 *                              is held while it runs
 *   retryd__call_result_from   the result, once done
 *
 * So the drivers differ only in how they wait (a thread, or an event
 * loop), never in what an attempt proves or what the engine is told.
 */
#ifndef RETRYD_ATTEMPT_H
#define RETRYD_ATTEMPT_H

#include <stdbool.h>
#include <stdint.h>

#include "exec/call.h"
#include "exec/executor.h"
#include "retryd/client.h"

/*
 * Set up @p c for @p req (already validated, and of this library's size)
 * through @p p: the URL, the deadline, the key. 0 or RETRYD_ENOMEM; either
 * way retryd__call_free() is then due.
 */
int retryd__call_init(struct call *c, retryd_profile *p,
                      const retryd_request *req);

/* Whatever the call still holds: error texts not handed to a result, the
 * URL, buffers moved to the heap. */
void retryd__call_free(struct call *c);

/*
 * Ask the host's health about the attempt about to open: 0, open it; 1, a
 * host pushback holds it (wait c->hold, then ask again); 2, it is not
 * sent and the call is done, with a result (a throttled first attempt, or
 * a hold past the deadline); or RETRYD_ENOMEM.
 */
int retryd__attempt_admit(struct call *c);

/*
 * Open the next attempt: its log entry (wait_before_ns = c->wait), its
 * per-attempt state cleared, the budget's deposit on the first, c->start,
 * c->attempt_ns and c->permit_deadline (bulkhead_wait_ns, bounded by the
 * deadline). 0 or RETRYD_ENOMEM.
 */
int retryd__attempt_open(struct call *c);

/* No permit (@p err: RETRYD_ETIMEDOUT, or RETRYD_ENOMEM for the handle):
 * the attempt ends NOT_SENT, pool_timeout (io when out of memory). */
void retryd__attempt_unpermitted(struct call *c, int err);

/* With a permit and handle @p h: open the body (a MIME body as a curl_mime
 * of h). True: run the transfer; false: the body failed, end the attempt
 * at once with CURLE_OK. */
bool retryd__attempt_begin(struct call *c, easy *h);

/* The transfer ended with libcurl's @p rc (or never ran): the body closed,
 * the permit and @p h given back (h not reused after a failure), the
 * evidence, the error text, the duration. */
void retryd__attempt_end(struct call *c, easy *h, int rc);

/*
 * The engine's decision on the attempt just ended, counted in the
 * upstream's statistics, and the attempt logged. 0: the call is done
 * (retryd__call_result_from); 1: a retry was granted, to start after c->wait
 * ns; negative: RETRYD_ENOMEM, or the engine's error.
 */
int retryd__attempt_decide(struct call *c);

/* The attempt being run now: the log entry retryd__attempt_open made. */
static inline attempt_rec *retryd__attempt_current(struct call *c)
{
    return &c->att[c->n_att];
}

/* The result of a call @p c whose last attempt is logged (n_att >= 1), with
 * the response (headers, body, reason) of @p resp: c's own, or a hedge's
 * that answered it; a held-back body goes to the sink. NULL when out of
 * memory. */
retryd_result *retryd__call_result_from(struct call *c, struct call *resp);

/*
 * retryd_execute without hedging, on the calling thread (@p req validated
 * and of this library's size): each step in turn, the permit waited for
 * on the profile's condition variable, the transfer in curl_easy_perform,
 * the backoff slept. 0 or RETRYD_ENOMEM; *ret the result.
 */
int retryd__execute_blocking(retryd_profile *p, const retryd_request *req,
                             retryd_result **ret);

/* --- hedging (docs/hedging.md) -------------------------------------------
 *
 * A hedged request is driven by the multi (multi.c; retryd_execute runs it
 * on one of the client's, see retryd__multi_execute). Its own call runs
 * the first attempt of each round as usual; each hedge runs in a call of
 * its own (retryd__call_init_hedge) whose one attempt joins the request's
 * log when it ends. An attempt that ends while a sibling still runs either
 * answers the request (retryd__attempt_answers: it is decided, the
 * siblings are stopped) or is set aside until the last one ends, which the
 * engine decides.
 */

bool retryd__hedge_wanted_slow(retryd_profile *p, const retryd_request *req);

/* Whether @p req (validated) through @p p is to be hedged: a policy
 * applies (the request's, else the profile's) and the engine's
 * request-wide rules allow it (safely idempotent, replayable, no sink). */
static inline bool retryd__hedge_wanted(retryd_profile *p,
                                        const retryd_request *req)
{
    if (req->hedge == NULL && p->hedge.mode == RETRYD_HEDGE_OFF)
        return false;
    return retryd__hedge_wanted_slow(p, req);
}

/* Ask about a hedge of @p c's attempt in flight, @p elapsed_ns after it
 * (or the last hedge) went out: the answer in c->hedge_d; SEND counted in
 * c->hedges (its tokens were taken). 0 or the engine's error. */
int retryd__hedge_ask(struct call *c, int64_t elapsed_ns);

/* Set up @p leg for a hedge of @p owner's request: the owner's request,
 * URL, key, credentials (borrowed), deadline and engine inputs; storage
 * of its own. retryd__call_free_hedge() is due. */
void retryd__call_init_hedge(struct call *leg, struct call *owner);

/* retryd__call_free() for a call set up by retryd__call_init_hedge(): what
 * it borrowed stays its owner's. */
void retryd__call_free_hedge(struct call *leg);

/* Open the hedge's attempt: numbered by its owner, role HEDGE, its
 * clocks. 0 or RETRYD_ENOMEM. */
int retryd__attempt_open_hedge(struct call *leg);

/* Whether the attempt just ended answers its request while a sibling
 * still runs (retryd_hedge_answers()). */
bool retryd__attempt_answers(struct call *c);

/* Log the attempt just ended with @p rule (HEDGE_SIBLING_RUNNING: it ended
 * without an answer; HEDGE_SIBLING_ANSWERED: stopped because a sibling
 * answered), not asking the engine: its evidence counted, and the host's
 * health told what it found when it ended on its own. 0 or ENOMEM. */
int retryd__attempt_set_aside(struct call *c, retryd_rule rule);

/* Move @p leg's logged attempts into its owner @p o's log, before the
 * owner's open attempt if any. 0 or RETRYD_ENOMEM. */
int retryd__call_adopt(struct call *o, struct call *leg);

#endif
