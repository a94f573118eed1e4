/* SPDX-License-Identifier: MIT */
/*
 * Threads recording into one health window at once, and rotating its slots
 * at once: no event is lost or counted twice (docs/health.md). A plain
 * program, so that the thread sanitizer build runs it too. Each round,
 * every thread records PER_ROUND events stamped with the same slot; a
 * barrier ends the round, so every slot's rotation is raced by all
 * threads, and every word of the ring is rotated three times.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "check.h"
#include "shared/health.h"

#define S UINT64_C(1000000000)
#define T0 (UINT64_C(1000) * S)
#define THREADS 4
#define ROUNDS 24
#define PER_ROUND 2000

static seg_upstream slot;
static const health_params on = {
    .flags = SEG_HEALTH_THROTTLE,
    .k_micro = 2 * SEG_MICRO,
    .window_ns = 2 * S,
    .min_processes = 1,
    .pushback_max_ns = 10 * S,
};
static pthread_barrier_t round_barrier;

static void *recorder(void *arg)
{
    uint64_t slot_ns = on.window_ns / SEG_HEALTH_SLOTS;
    /* Each thread stands for a process: its own record of where its
     * rejecter count is. */
    _Atomic uint64_t mine = 0;
    (void)arg;
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t now = T0 + (uint64_t)r * slot_ns;
        for (int i = 0; i < PER_ROUND; i++) {
            retryd__health_record(&slot, now, 1, (unsigned)(i & 1));
            if (i % 100 == 0)
                retryd__health_reject(&slot, now, &mine);
        }
        pthread_barrier_wait(&round_barrier);
    }
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    memset(&slot, 0, sizeof(slot));
    retryd__health_init(&slot, &on);
    pthread_barrier_init(&round_barrier, NULL, THREADS);
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, recorder, NULL) == 0, "thread");
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&round_barrier);

    health_view v;
    uint64_t slot_ns = on.window_ns / SEG_HEALTH_SLOTS;
    retryd__health_view(&slot, T0 + (ROUNDS - 1) * slot_ns, &v);
    /* The window holds the last 8 rounds, whole. */
    uint64_t want = (uint64_t)SEG_HEALTH_SLOTS * THREADS * PER_ROUND;
    CHECK(v.requests == want, "%llu requests in the window, want %llu",
          (unsigned long long)v.requests, (unsigned long long)want);
    CHECK(v.accepts == want / 2, "%llu accepts, want %llu",
          (unsigned long long)v.accepts, (unsigned long long)want / 2);
    /* Each thread counted once, in the last round's slot. */
    CHECK(v.rejecters == THREADS, "%llu rejecters, want %d",
          (unsigned long long)v.rejecters, THREADS);
    printf("health_threads: %d threads, %d rounds: %llu requests, %llu "
           "accepts, %llu rejecters in the window, as recorded\n",
           THREADS, ROUNDS, (unsigned long long)v.requests,
           (unsigned long long)v.accepts, (unsigned long long)v.rejecters);
    return 0;
}
