/* SPDX-License-Identifier: MIT */
/*
 * Many threads share one profile (its handle pool, its bulkhead of two
 * permits, its budget) against the real fault server. A plain program, so
 * the thread sanitizer build runs it. Each request must get the same
 * answer it would alone, no non-idempotent request may be executed twice,
 * and the budget must account for every deposit and retry. The client is
 * local-only, so the budget is the process-local bucket; the shared
 * segment's per-thread counter lanes are budget_conservation's subject.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "retryd/retryd.h"
#include "testsrv.h"

#define THREADS 4
#define ROUNDS 25
#define MS INT64_C(1000000)

/* No floor, so the balance moves only by deposits (ratio 1: one token
 * per request) and withdrawals (one per retry). PREPAID tokens deposited
 * before the threads start mean no retry is ever refused. */
static const retryd_budget_params ledger = {sizeof(retryd_budget_params), 1, 0,
                                            1e6};
#define PREPAID 200

static testsrv *srv;
static retryd_profile *profile;
static atomic_long retries; /* attempts beyond the first, over all requests */

typedef struct kind {
    const char *path;
    retryd_idempotency idem;
    retryd_outcome outcome;
    long executions;
} kind;

static const kind kinds[] = {
    {"/ok", RETRYD_IDEMPOTENCY_SAFE, RETRYD_OUTCOME_RESPONSE, 1},
    {"/status?code=503", RETRYD_IDEMPOTENCY_SAFE, RETRYD_OUTCOME_RESPONSE, 3},
    {"/close-after-read", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT,
     RETRYD_OUTCOME_AMBIGUOUS, 1},
    {"/seq?codes=503,200", RETRYD_IDEMPOTENCY_IDEMPOTENT,
     RETRYD_OUTCOME_RESPONSE, 2},
};

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        const kind *k = &kinds[(i + t) % 4];
        char id[32], path[96];
        snprintf(id, sizeof(id), "t%d-%d", t, i);
        snprintf(path, sizeof(path), "%s%cid=%s", k->path,
                 strchr(k->path, '?') ? '&' : '?', id);
        retryd_body *b;
        CHECK(retryd_body_new_bytes("x=1", 3, &b) == 0, "body");
        retryd_request q = {.sz = sizeof(q),
                            .method = "POST",
                            .path = path,
                            .body = b,
                            .idempotency = k->idem,
                            .deadline_ns = 30000 * MS};
        retryd_result *r;
        CHECK(retryd_execute(profile, &q, &r) == 0, "execute");
        CHECK(retryd_result_outcome(r) == k->outcome, "%s: %s", id,
              retryd_outcome_name(retryd_result_outcome(r)));
        long n = testsrv_count(srv, id);
        CHECK(n == k->executions, "%s: %ld executions, expected %ld", id, n,
              k->executions);
        long attempts = (long)retryd_result_attempt_count(r);
        CHECK(attempts == k->executions, "%s: %ld attempts", id, attempts);
        atomic_fetch_add(&retries, attempts - 1);
        retryd_result_free(r);
        retryd_body_free(b);
    }
    return NULL;
}

int main(void)
{
    const retryd_host_opts ho = {.sz = sizeof(ho),
                                 .flags = RETRYD_HOST_LOCAL_ONLY};
    const retryd_client_opts co = {.sz = sizeof(co), .host = &ho};
    retryd_client *client;
    CHECK(testsrv_start(FAULTSRV_PATH, NULL, &srv) == 0, "fault server");
    CHECK(retryd_client_new(&co, &client) == 0, "client");
    char base[64];
    snprintf(base, sizeof(base), "http://127.0.0.1:%d", testsrv_port(srv));
    retryd_profile_opts po = {
        .sz = sizeof(po),
        .base_url = base,
        .max_attempts = 3,
        .bulkhead = 2,
        .backoff = &(const retryd_backoff_policy){sizeof(retryd_backoff_policy),
                                                  RETRYD_JITTER_FULL, 1 * MS,
                                                  3 * MS, 1000 * MS},
        .budget = &ledger};
    CHECK(retryd_profile_new(client, &po, &profile) == 0, "profile");
    retryd_upstream *budget = retryd_profile_budget(profile);
    double balance = -1;
    for (int i = 0; i < PREPAID; i++)
        CHECK(retryd_upstream_deposit(budget) == 0, "deposit");
    CHECK(retryd_upstream_balance(budget, &balance) == 0 && balance == PREPAID,
          "balance %f before the threads, expected %d", balance, PREPAID);

    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0,
              "thread");
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);

    long requests = THREADS * ROUNDS, spent = atomic_load(&retries);
    CHECK(retryd_upstream_balance(budget, &balance) == 0 &&
              balance == (double)(PREPAID + requests - spent),
          "balance %f, expected %d prepaid + %ld requests - %ld retries",
          balance, PREPAID, requests, spent);
    retryd_profile_free(profile);
    retryd_client_free(client);
    int status;
    CHECK(testsrv_terminate(srv, 10000, &status) == 0 && status == 0,
          "the fault server exits cleanly");
    testsrv_stop(srv);
    printf("executor_threads: %d threads x %d requests, shared profile with "
           "2 permits: every answer as expected, %ld retries paid\n",
           THREADS, ROUNDS, spent);
    return 0;
}
