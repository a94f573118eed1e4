/* SPDX-License-Identifier: MIT */
/* The default random source keeps one generator per thread: two threads
 * draw different sequences and share no state (the thread sanitizer build
 * runs this too). */
#include <pthread.h>
#include <stdint.h>

#include "check.h"
#include "retryd/backoff.h"

enum { DRAWS = 4096, THREADS = 4 };

static uint64_t drawn[THREADS][DRAWS];

static void *draw(void *arg)
{
    uint64_t *out = arg;
    for (int i = 0; i < DRAWS; i++)
        out[i] = retryd_random_default(NULL);
    return NULL;
}

int main(void)
{
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, draw, drawn[i]) == 0, "create");
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    for (int a = 0; a < THREADS; a++)
        for (int b = 0; b < a; b++) {
            int same = 0;
            for (int i = 0; i < DRAWS; i++)
                same += drawn[a][i] == drawn[b][i];
            CHECK(same < 2, "threads %d and %d drew %d equal words", a, b,
                  same);
        }
    return 0;
}
