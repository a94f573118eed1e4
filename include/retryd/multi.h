/* SPDX-License-Identifier: MIT */
/*
 * retryd: the asynchronous executor, driven by the caller's event loop.
 *
 * The same requests as retryd_execute() (the same evidence proofs, the same
 * veto of libcurl's own re-sends, the same decision engine, host budget,
 * result object and three outcomes: both executors run one attempt state
 * machine), without holding a thread for them: a retryd_multi runs any
 * number of requests on the thread that drives it. Backoff waits are
 * timers, and no connection and no bulkhead permit is held while one runs.
 * docs/async.md tells how.
 *
 * It is integrated the way libcurl's curl_multi_socket_action() is:
 *
 *   - the socket callback says which descriptors to watch for what
 *     (RETRYD_POLL_IN / _OUT / _INOUT, or _REMOVE to stop watching one);
 *   - the timer callback asks for one timer, which replaces the previous
 *     one and fires once: call
 *     retryd_multi_socket_action(m, RETRYD_SOCKET_TIMEOUT, 0, ...) when it
 *     expires (-1: delete the timer; 0: as soon as possible, but from the
 *     loop, not from inside the callback). It is the earliest of libcurl's
 *     own timer, the backoff waits, the bulkhead waits' deadlines and the
 *     permit queue's polling (docs/async.md);
 *   - when a watched descriptor is ready, call
 *     retryd_multi_socket_action(m, fd, RETRYD_CSELECT_IN / _OUT / _ERR).
 *
 * A caller without a loop calls retryd_multi_run(), which waits itself.
 *
 * A request that finds every bulkhead permit of its profile taken waits in
 * the multi's queue, holding nothing, until a permit frees or its bulkhead
 * wait (bounded by its deadline) runs out: then its attempt is NOT_SENT,
 * pool_timeout, as with retryd_execute(). The queue is served when a
 * request of the same multi gives a permit back, and polled every 2 ms
 * for permits given back elsewhere (other threads, other multis).
 *
 * Threads: a retryd_multi belongs to the thread that uses it, like a
 * libcurl multi handle: every retryd_multi_* call for one multi, and every
 * callback it makes, happens on that thread. Different threads use
 * different multis; they may share a client and profiles (which are
 * thread-safe), and so share each profile's bulkhead, handle pool and
 * budget with each other and with retryd_execute() callers.
 *
 * Callbacks: the completion callback may submit and cancel requests of
 * its multi (and use others); the socket and timer callbacks may only
 * watch descriptors and set the timer (the socket callback may call
 * retryd_multi_assign()), and any other retryd_multi_* call for the multi
 * from inside them fails with RETRYD_EINVAL. No callback may free its
 * multi.
 */
#ifndef RETRYD_MULTI_H
#define RETRYD_MULTI_H

#include <stddef.h>
#include <stdint.h>

#include "retryd/client.h"
#include "retryd/common.h"

#ifdef __cplusplus
extern "C" {
#endif

/** An asynchronous executor: owned by one thread. */
typedef struct retryd_multi retryd_multi;
/** One submitted request, owned by its multi until its completion callback
 * has returned. */
typedef struct retryd_call retryd_call;

/** What to watch a descriptor for (socket callback): libcurl's values. */
#define RETRYD_POLL_IN 1
#define RETRYD_POLL_OUT 2
#define RETRYD_POLL_INOUT 3
#define RETRYD_POLL_REMOVE 4

/** What a descriptor is ready for (retryd_multi_socket_action). */
#define RETRYD_CSELECT_IN 0x01
#define RETRYD_CSELECT_OUT 0x02
#define RETRYD_CSELECT_ERR 0x04

/** The descriptor to pass when the timer expired. */
#define RETRYD_SOCKET_TIMEOUT (-1)

/**
 * Watch @p fd for @p what (RETRYD_POLL_*), replacing what it was watched
 * for. @p socketp is what the caller attached with retryd_multi_assign()
 * (still the caller's), or NULL. Return 0; -1 says the descriptor cannot
 * be watched, and libcurl then aborts every transfer in progress, as
 * CURLMOPT_SOCKETFUNCTION documents.
 */
typedef int (*retryd_socket_fn)(void *ctx, int fd, int what, void *socketp);

/**
 * Set the one timer to fire once in @p timeout_ms (0: at once, from the
 * loop; -1: delete it). Return 0, or -1 when it could not be set: the next
 * retryd_multi_socket_action() then completes every request in flight with
 * RETRYD_ECURL and returns RETRYD_ECURL.
 */
typedef int (*retryd_timer_fn)(void *ctx, long timeout_ms);

/**
 * A request is finished; after this returns, @p call is gone.
 *
 * @p err is 0 and @p result its result, whatever the outcome, exactly as
 * retryd_execute() would have returned it.
 *
 * @p err is RETRYD_ECANCELED (retryd_multi_cancel(), or the multi freed):
 * @p result holds the attempts made so far, or is NULL when none was. An
 * attempt whose transfer was stopped is in it with the evidence its stages
 * proved (a request that may have reached the server says so) and failure
 * `aborted`, and was decided by the engine like any other (so a payment
 * that may have executed is ambiguous); a cancelled backoff leaves the
 * last attempt's granted retry untaken (its token is spent).
 *
 * @p err is RETRYD_ENOMEM or RETRYD_ECURL: @p result is NULL.
 *
 * A non-NULL @p result is owned by the caller from now on:
 * retryd_result_free().
 */
typedef void (*retryd_done_fn)(void *ctx, retryd_call *call, int err,
                               retryd_result *result);

/** Options of retryd_multi_new(); zero-initialise, then set sz. */
typedef struct retryd_multi_opts {
    size_t sz; /**< sizeof(retryd_multi_opts) (docs/abi.md) */
    /** The loop's callbacks; both NULL for a multi that only
     * retryd_multi_run() drives. */
    retryd_socket_fn socket;
    void *socket_ctx;
    retryd_timer_fn timer;
    void *timer_ctx;
} retryd_multi_opts;

/**
 * Create an asynchronous executor for @p client's profiles (borrowed: the
 * client must outlive the multi).
 * @param opts  NULL: no callbacks (retryd_multi_run() only). Read during
 *              the call.
 * @param ret   the multi, owned by the caller: retryd_multi_free().
 * @return 0, RETRYD_EINVAL (one callback without the other, a bad sz),
 *         RETRYD_EOPTS (a field this library does not know is set),
 *         RETRYD_ENOMEM, RETRYD_ECURL.
 */
RETRYD_EXPORT int retryd_multi_new(retryd_client *client,
                                   const retryd_multi_opts *opts,
                                   retryd_multi **ret);

/**
 * Free a multi and its connections: every request still in it completes
 * with RETRYD_ECANCELED first (its callback runs; a finished request whose
 * completion was pending completes as it finished). Not from inside a
 * callback. Accepts NULL.
 */
RETRYD_EXPORT void retryd_multi_free(retryd_multi *m);

/**
 * Submit @p req through @p profile (borrowed: a profile of the multi's
 * client, which must outlive the request). Its first attempt starts at
 * once when a permit is free (the transfer itself runs from the loop);
 * @p done is called exactly once, from a later retryd_multi_* call, never
 * from inside this one. @p req and everything it points to (path,
 * headers, body, key, sink and refresh contexts) stay the caller's and must
 * stay valid until then, as with retryd_execute() for its duration.
 *
 * @param ret_call  NULL, or where to store the call (for cancelling); the
 *                  multi owns it, and it is gone once @p done returned.
 * @return 0, RETRYD_EINVAL (bad request, as retryd_execute(); no @p done;
 *         a profile of another client; from inside a socket or timer
 *         callback; while the multi is being freed), RETRYD_EOPTS,
 *         RETRYD_ENOMEM. On failure @p done is never called.
 */
RETRYD_EXPORT int retryd_multi_submit(retryd_multi *m, retryd_profile *profile,
                                      const retryd_request *req,
                                      retryd_done_fn done, void *done_ctx,
                                      retryd_call **ret_call);

/**
 * Cancel a request whose @p done has not been called yet: a transfer stops
 * (its attempt is recorded with what it proved: see retryd_done_fn), a
 * backoff or bulkhead wait ends, and @p done is called from inside this
 * call with RETRYD_ECANCELED (or, for a request that had finished and
 * whose completion was pending, as it finished); @p call (the multi's) is
 * gone once this returns 0.
 * @return 0; RETRYD_ENOENT when @p call is not in flight in @p m;
 *         RETRYD_EINVAL from inside a socket or timer callback.
 */
RETRYD_EXPORT int retryd_multi_cancel(retryd_multi *m, retryd_call *call);

/**
 * Hand readiness to the multi: @p fd with @p events (RETRYD_CSELECT_*, or
 * 0 to let libcurl find out), or RETRYD_SOCKET_TIMEOUT when the timer
 * expired. Completion callbacks run from here.
 * @param ret_running  NULL, or the number of requests still in flight.
 * @return 0; RETRYD_ECURL when libcurl failed or the timer callback did
 *         (every request in flight then completed with RETRYD_ECURL);
 *         RETRYD_EINVAL from inside a callback.
 */
RETRYD_EXPORT int retryd_multi_socket_action(retryd_multi *m, int fd,
                                             int events, int *ret_running);

/** Attach @p socketp (the caller's) to @p fd, handed back to the socket
 * callback (as curl_multi_assign()); also from inside the socket callback.
 * 0, or RETRYD_ENOENT for a descriptor the multi does not use. */
RETRYD_EXPORT int retryd_multi_assign(retryd_multi *m, int fd, void *socketp);

/**
 * Run until no request is in flight, or @p timeout_ns has passed (< 0: no
 * limit), waiting in poll() itself: for a caller without a loop.
 * Completion callbacks run from here (and may submit more).
 * @return 0 when idle, RETRYD_ETIMEDOUT with requests still in flight,
 *         RETRYD_EINVAL (a multi with loop callbacks, or from inside a
 *         callback), RETRYD_ECURL, RETRYD_ENOMEM.
 */
RETRYD_EXPORT int retryd_multi_run(retryd_multi *m, int64_t timeout_ns);

/** Requests in flight: submitted, their completion not yet called. */
RETRYD_EXPORT size_t retryd_multi_in_flight(const retryd_multi *m);

#ifdef __cplusplus
}
#endif

#endif /* RETRYD_MULTI_H */
