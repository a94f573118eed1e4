/* SPDX-License-Identifier: MIT */
/*
 * Many threads share one profile (its handle pool, its bulkhead of two
 * permits, its budget) against the real fault server. A plain program, so
 * the thread sanitizer build runs it. Each request must get the same
 * answer it would alone, no non-idempotent request may be executed twice,
 * and the budget must account for every deposit and retry
 * (multi_threads_harness.h).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

#include "multi_threads_harness.h"

#define THREADS 4
#define ROUNDS 25
#define PREPAID 200

/* Every request is a POST with a body; the idempotency decides. */
static const kind kinds[] = {
    {"/ok", "POST", RETRYD_IDEMPOTENCY_SAFE, RETRYD_OUTCOME_RESPONSE, 1},
    {"/status?code=503", "POST", RETRYD_IDEMPOTENCY_SAFE,
     RETRYD_OUTCOME_RESPONSE, 3},
    {"/close-after-read", "POST", RETRYD_IDEMPOTENCY_NON_IDEMPOTENT,
     RETRYD_OUTCOME_AMBIGUOUS, 1},
    {"/seq?codes=503,200", "POST", RETRYD_IDEMPOTENCY_IDEMPOTENT,
     RETRYD_OUTCOME_RESPONSE, 2},
};

static void *worker(void *arg)
{
    int t = (int)(intptr_t)arg;
    for (int i = 0; i < ROUNDS; i++) {
        const kind *k = &kinds[(i + t) % 4];
        char id[32], path[96];
        snprintf(id, sizeof(id), "t%d-%d", t, i);
        harness_path(path, sizeof(path), k, id);
        retryd_body *b;
        CHECK(retryd_body_new_bytes("x=1", 3, &b) == 0, "body");
        retryd_request q = {.sz = sizeof(q),
                            .method = k->method,
                            .path = path,
                            .body = b,
                            .idempotency = k->idem,
                            .deadline_ns = 30000 * MS};
        retryd_result *r;
        CHECK(retryd_execute(profile, &q, &r) == 0, "execute");
        harness_check(id, k, r);
        retryd_result_free(r);
        retryd_body_free(b);
    }
    return NULL;
}

int main(void)
{
    harness_open(2, PREPAID);
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t) == 0,
              "thread");
    for (int t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    long spent = harness_close(THREADS * ROUNDS, PREPAID);
    printf("executor_threads: %d threads x %d requests, shared profile with "
           "2 permits: every answer as expected, %ld retries paid\n",
           THREADS, ROUNDS, spent);
    return 0;
}
