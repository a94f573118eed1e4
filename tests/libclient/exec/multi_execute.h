/* SPDX-License-Identifier: MIT */
/*
 * retryd_execute() through the asynchronous executor, for suites written
 * against the blocking one. tests/CMakeLists.txt compiles such a suite a
 * second time with -include this header and
 * -Dretryd_execute=retryd_test_multi_execute, so that every assertion of
 * the suite holds for both executors: the call is submitted to one multi,
 * which retryd_multi_run() drives until its completion has run.
 *
 * The multi is the calling thread's (a multi belongs to one thread; the
 * suites' background threads get their own), kept across calls so that
 * connections are kept as a loop's would be, and bound to the suite's
 * `client` (exec_fixture.h), declared here too: a second tentative
 * definition of the same static object.
 */
#ifndef RETRYD_TEST_MULTI_EXECUTE_H
#define RETRYD_TEST_MULTI_EXECUTE_H

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "retryd/retryd.h"

static retryd_client *client;

typedef struct multi_execute_wait {
    bool done;
    int err;
    retryd_result *result;
} multi_execute_wait;

/* Each thread's multi (a multi belongs to one thread), freed when the
 * thread ends, or at exit for the main thread. */
static _Thread_local retryd_multi *multi_execute_multi;
static _Thread_local retryd_client *multi_execute_client;
static pthread_key_t multi_execute_key;
static pthread_once_t multi_execute_once = PTHREAD_ONCE_INIT;

static void multi_execute_free(void)
{
    retryd_multi_free(multi_execute_multi);
    multi_execute_multi = NULL;
}

static void multi_execute_thread_end(void *m)
{
    retryd_multi_free(m);
}

static void multi_execute_init(void)
{
    (void)pthread_key_create(&multi_execute_key, multi_execute_thread_end);
    (void)atexit(multi_execute_free);
}

static void multi_execute_done(void *ctx, retryd_call *call, int err,
                               retryd_result *result)
{
    multi_execute_wait *w = ctx;
    (void)call;
    w->done = true;
    w->err = err;
    w->result = result;
}

/* The suite's retryd_execute: the same contract, through a multi. */
int retryd_test_multi_execute(retryd_profile *p, const retryd_request *req,
                              retryd_result **ret)
{
    multi_execute_wait w = {0};
    if (multi_execute_multi == NULL || multi_execute_client != client) {
        /* A new client (a new test): a new multi for its profiles. */
        pthread_once(&multi_execute_once, multi_execute_init);
        multi_execute_free();
        if (retryd_multi_new(client, NULL, &multi_execute_multi) < 0)
            return RETRYD_ENOMEM;
        multi_execute_client = client;
        (void)pthread_setspecific(multi_execute_key, multi_execute_multi);
    }
    if (ret == NULL)
        return RETRYD_EINVAL;
    retryd_call *call;
    int r = retryd_multi_submit(multi_execute_multi, p, req, multi_execute_done,
                                &w, &call);
    if (r < 0)
        return r;
    /* Bounded: no executor test waits a minute for one call. */
    r = retryd_multi_run(multi_execute_multi, INT64_C(60000000000));
    if (!w.done)
        retryd_multi_cancel(multi_execute_multi, call); /* w is ours */
    if (r < 0 || w.err < 0) {
        retryd_result_free(w.result);
        return r < 0 ? r : w.err;
    }
    *ret = w.result;
    return 0;
}

#endif
