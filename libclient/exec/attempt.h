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
 *   retryd__call_result        the result, once done
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
 * (retryd__call_result); 1: a retry was granted, to start after c->wait
 * ns; negative: RETRYD_ENOMEM, or the engine's error.
 */
int retryd__attempt_decide(struct call *c);

/* The attempt being run now: the log entry retryd__attempt_open made. */
static inline attempt_rec *retryd__attempt_current(struct call *c)
{
    return &c->att[c->n_att];
}

/* The result of a call whose last attempt is logged (n_att >= 1); a
 * held-back body goes to the sink. NULL when out of memory. */
retryd_result *retryd__call_result(struct call *c);

#endif
