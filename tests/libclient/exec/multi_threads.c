/* SPDX-License-Identifier: MIT */
/*
 * Two asynchronous executors on two threads share one profile (its handle
 * pool, its bulkhead of three permits, its budget) with a third thread
 * calling retryd_execute, against the real fault server. A plain program,
 * so the thread sanitizer build runs it: the handles move between the
 * threads' curl multis through the pool, and the multis' permit queues
 * find the permits the other threads give back. Each request must get the
 * answer it would get alone, no non-idempotent request may be executed
 * twice, and the budget must account for every deposit and retry
 * (multi_threads_harness.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "multi_threads_harness.h"

#define PER_MULTI 60
#define SYNC_ROUNDS 12
#define PREPAID 400

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
        harness_path(j->path, sizeof(j->path), j->k, id);
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
        harness_check(j->id, j->k, j->r);
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
        harness_path(path, sizeof(path), k, id);
        retryd_request q = {.sz = sizeof(q),
                            .method = k->method,
                            .path = path,
                            .idempotency = k->idem,
                            .deadline_ns = 30000 * MS};
        retryd_result *r;
        CHECK(retryd_execute(profile, &q, &r) == 0, "execute %s", id);
        harness_check(id, k, r);
        retryd_result_free(r);
    }
    return NULL;
}

int main(void)
{
    harness_open(3, PREPAID);
    pthread_t th[3];
    for (int t = 0; t < 2; t++)
        CHECK(pthread_create(&th[t], NULL, multi_worker, (void *)(intptr_t)t) ==
                  0,
              "thread");
    CHECK(pthread_create(&th[2], NULL, sync_worker, NULL) == 0, "thread");
    for (int t = 0; t < 3; t++)
        pthread_join(th[t], NULL);
    long spent = harness_close(2 * PER_MULTI + SYNC_ROUNDS, PREPAID);
    printf("multi_threads: 2 multis x %d requests and %d retryd_execute "
           "calls on one profile with 3 permits: every answer as expected, "
           "%ld retries paid\n",
           PER_MULTI, SYNC_ROUNDS, spent);
    return 0;
}
