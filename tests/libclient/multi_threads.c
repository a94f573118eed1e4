/* SPDX-License-Identifier: MIT */
/*
 * Two asynchronous executors on two threads share one profile (its handle
 * pool, its bulkhead of three permits, its budget) with a third thread
 * calling retryd_execute, against the real fault server. A plain program,
 * so the thread sanitizer build runs it: the handles move between the
 * threads' curl multis through the pool, and the multis' permit queues
 * find the permits the other threads give back. Each request must get the
 * answer it would get alone, no non-idempotent request may be executed
 * twice, and the budget must account for every deposit and retry.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "retryd/retryd.h"
#include "testsrv.h"

#define PER_MULTI 60
#define SYNC_ROUNDS 12
#define MS INT64_C(1000000)

/* No floor: the balance moves only by deposits (one per request) and
 * withdrawals (one per retry); PREPAID tokens mean none is refused. */
static const retryd_budget_params ledger = {sizeof(retryd_budget_params), 1, 0,
                                            1e6};
#define PREPAID 400

static testsrv *srv;
static retryd_client *client;
static retryd_profile *profile;
static atomic_long retries;

typedef struct kind {
    const char *path, *method;
    retryd_idempotency idem;
    retryd_outcome outcome;
    long executions;
} kind;

static const kind kinds[] = {
    {"/ok", "GET", RETRYD_IDEMPOTENCY_SAFE, RETRYD_OUTCOME_RESPONSE, 1},
    {"/status?code=503", "GET", RETRYD_IDEMPOTENCY_SAFE,
     RETRYD_OUTCOME_RESPONSE, 3},
    {"/close-after-read", "POST", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT,
     RETRYD_OUTCOME_AMBIGUOUS, 1},
    {"/seq?codes=503,200", "PUT", RETRYD_IDEMPOTENCY_IDEMPOTENT,
     RETRYD_OUTCOME_RESPONSE, 2},
    {"/hold?ms=20", "GET", RETRYD_IDEMPOTENCY_SAFE, RETRYD_OUTCOME_RESPONSE, 1},
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

typedef struct job {
    char id[32], path[96];
    const kind *k;
    retryd_request q;
    int calls, err;
    retryd_result *r;
} job;

static void check_result(const char *id, const kind *k, retryd_result *r)
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

static void on_done(void *ctx, retryd_call *call, int err, retryd_result *r)
{
    job *j = ctx;
    (void)call;
    j->calls++;
    j->err = err;
    j->r = r;
}

static void *multi_worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    static job jobs[2][PER_MULTI];
    retryd_multi *m;
    CHECK(retryd_multi_new(client, NULL, &m) == 0, "multi");
    for (int i = 0; i < PER_MULTI; i++) {
        job *j = &jobs[t][i];
        j->k = &kinds[(i + t) % N_KINDS];
        char id[32];
        snprintf(id, sizeof(id), "m%d-%d", t, i);
        snprintf(j->id, sizeof(j->id), "%s", id);
        snprintf(j->path, sizeof(j->path), "%s%cid=%s", j->k->path,
                 strchr(j->k->path, '?') ? '&' : '?', id);
        j->q = (retryd_request){.sz = sizeof(j->q),
                                .method = j->k->method,
                                .path = j->path,
                                .idempotency = j->k->idem,
                                .deadline_ns = 30000 * MS};
        CHECK(retryd_multi_submit(m, profile, &j->q, on_done, j, NULL) == 0,
              "submit %s", j->id);
    }
    int r = retryd_multi_run(m, 60000 * MS);
    CHECK(r == 0, "run: %s", retryd_strerror(r));
    for (int i = 0; i < PER_MULTI; i++) {
        job *j = &jobs[t][i];
        CHECK(j->calls == 1 && j->err == 0, "%s: %d completions, %s", j->id,
              j->calls, retryd_strerror(j->err));
        check_result(j->id, j->k, j->r);
        retryd_result_free(j->r);
    }
    retryd_multi_free(m);
    return NULL;
}

static void *sync_worker(void *arg)
{
    (void)arg;
    for (int i = 0; i < SYNC_ROUNDS; i++) {
        const kind *k = &kinds[i % N_KINDS];
        char id[32], path[96];
        snprintf(id, sizeof(id), "s-%d", i);
        snprintf(path, sizeof(path), "%s%cid=%s", k->path,
                 strchr(k->path, '?') ? '&' : '?', id);
        retryd_request q = {.sz = sizeof(q),
                            .method = k->method,
                            .path = path,
                            .idempotency = k->idem,
                            .deadline_ns = 30000 * MS};
        retryd_result *r;
        CHECK(retryd_execute(profile, &q, &r) == 0, "execute %s", id);
        check_result(id, k, r);
        retryd_result_free(r);
    }
    return NULL;
}

int main(void)
{
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
        .bulkhead = 3,
        .backoff = &(const retryd_backoff_policy){sizeof(retryd_backoff_policy),
                                                  RETRYD_JITTER_FULL, 1 * MS,
                                                  3 * MS, 1000 * MS},
        .budget = &ledger};
    CHECK(retryd_profile_new(client, &po, &profile) == 0, "profile");
    retryd_upstream *budget = retryd_profile_budget(profile);
    for (int i = 0; i < PREPAID; i++)
        CHECK(retryd_upstream_deposit(budget) == 0, "deposit");

    pthread_t th[3];
    for (int t = 0; t < 2; t++)
        CHECK(pthread_create(&th[t], NULL, multi_worker, (void *)(intptr_t)t) ==
                  0,
              "thread");
    CHECK(pthread_create(&th[2], NULL, sync_worker, NULL) == 0, "thread");
    for (int t = 0; t < 3; t++)
        pthread_join(th[t], NULL);

    long requests = 2 * PER_MULTI + SYNC_ROUNDS, spent = atomic_load(&retries);
    double balance = -1;
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
    printf("multi_threads: 2 multis x %d requests and %d retryd_execute "
           "calls on one profile with 3 permits: every answer as expected, "
           "%ld retries paid\n",
           PER_MULTI, SYNC_ROUNDS, spent);
    return 0;
}
