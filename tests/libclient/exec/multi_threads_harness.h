/* SPDX-License-Identifier: MIT */
/*
 * What the threaded executor programs (executor_threads, multi_threads)
 * share: the real fault server, a local-only client with one profile that
 * the threads share, the kinds of request and what each must come to, and
 * the budget's ledger, checked at the end.
 *
 * The ledger has no floor, so the balance moves only by deposits (ratio 1:
 * one token per request) and withdrawals (one per retry); the tokens
 * prepaid before the threads start mean no retry is ever refused. The
 * client is local-only, so the budget is the process-local bucket; the
 * shared segment's per-thread counter lanes are budget_conservation's
 * subject.
 */
#ifndef RETRYD_MULTI_THREADS_HARNESS_H
#define RETRYD_MULTI_THREADS_HARNESS_H

#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "retryd/retryd.h"
#include "testsrv.h"

#define MS INT64_C(1000000)

/* A kind of request: where it goes and what it must come to. */
typedef struct kind {
    const char *path, *method;
    retryd_idempotency idem;
    retryd_outcome outcome;
    long executions; /* times the server runs it, = attempts */
} kind;

static testsrv *srv;
static retryd_client *client;
static retryd_profile *profile;
static atomic_long retries; /* attempts beyond the first, over all requests */

/* The server, the client and the shared profile: @p bulkhead permits, 3
 * attempts, 1 to 3 ms backoffs, @p prepaid tokens already deposited. */
static void harness_open(uint32_t bulkhead, int prepaid)
{
    static const retryd_budget_params ledger = {sizeof(retryd_budget_params), 1,
                                                0, 1e6};
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .flags = RETRYD_HOST_LOCAL_ONLY};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    CHECK(testsrv_start(FAULTSRV_PATH, NULL, &srv) == 0, "fault server");
    CHECK(retryd_client_new(&co, &client) == 0, "client");
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    retryd_profile_opts po = {
        .sz = sizeof(po),
        .base_url = base,
        .max_attempts = 3,
        .bulkhead = bulkhead,
        .backoff = &(const retryd_backoff_policy){sizeof(retryd_backoff_policy),
                                                  RETRYD_JITTER_FULL, 1 * MS,
                                                  3 * MS, 1000 * MS},
        .budget = &ledger};
    CHECK(retryd_profile_new(client, &po, &profile) == 0, "profile");
    retryd_upstream *budget = retryd_profile_budget(profile);
    for (int i = 0; i < prepaid; i++)
        CHECK(retryd_upstream_deposit(budget) == 0, "deposit");
    double balance = -1;
    CHECK(retryd_upstream_balance(budget, &balance) == 0 && balance == prepaid,
          "balance %f before the threads, expected %d", balance, prepaid);
}

/* @p k's path with "id=@p id" added to its query, into @p path. */
static void harness_path(char *path, size_t size, const kind *k, const char *id)
{
    snprintf(path, size, "%s%cid=%s", k->path, strchr(k->path, '?') ? '&' : '?',
             id);
}

/* Request @p id of kind @p k came to what it must, executed as often as it
 * must; its retries are counted. */
static void harness_check(const char *id, const kind *k, retryd_result *r)
{
    CHECK(retryd_result_outcome(r) == k->outcome, "%s: %s", id,
          retryd_outcome_name(retryd_result_outcome(r)));
    long n = testsrv_wait_count(srv, id, k->executions, 5000);
    CHECK(n == k->executions, "%s: %ld executions, expected %ld", id, n,
          k->executions);
    long attempts = (long)retryd_result_attempt_count(r);
    CHECK(attempts == k->executions, "%s: %ld attempts", id, attempts);
    atomic_fetch_add(&retries, attempts - 1);
}

/* After the threads: the budget accounts for @p requests deposits and
 * every retry; everything closed, the server exits cleanly. The retries
 * paid. */
static long harness_close(long requests, int prepaid)
{
    long spent = atomic_load(&retries);
    double balance = -1;
    CHECK(retryd_upstream_balance(retryd_profile_budget(profile), &balance) ==
                  0 &&
              balance == (double)(prepaid + requests - spent),
          "balance %f, expected %d prepaid + %ld requests - %ld retries",
          balance, prepaid, requests, spent);
    retryd_profile_free(profile);
    retryd_client_free(client);
    int status;
    CHECK(testsrv_terminate(srv, 10000, &status) == 0 && status == 0,
          "the fault server exits cleanly");
    testsrv_stop(srv);
    return spent;
}

#endif
