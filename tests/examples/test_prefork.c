/* SPDX-License-Identifier: MIT */
/*
 * examples/prefork.c against a fault server and a real retryd: four
 * worker processes, each with a client of its own, spend from one bucket.
 * The retries they report add up to what the daemon granted, stay within
 * what one bucket allows (cap + ratio x the outage's first attempts: 12),
 * which four buckets of their own would exceed (24), and are at least the
 * cap the healthy phase left in it; the server executed exactly what the
 * workers report.
 */
#include "example_test.h"

#define WORKERS 4
#define HEALTHY 8
#define OUTAGE 4
#define CAP 4
#define BOUND (CAP + WORKERS * OUTAGE / 2) /* ratio 0.5 */

int main(void)
{
    ex_start_server();
    ex_start_daemon();
    char *argv[] = {EXAMPLE_PATH, ex.base, "4", NULL};
    int rc = ex_run(argv);
    CHECK(rc == 0, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);

    unsigned attempts = 0, granted = 0, denied = 0;
    for (unsigned w = 0; w < WORKERS; w++) {
        char prefix[32], shared[16];
        unsigned requests, a, g, d;
        snprintf(prefix, sizeof(prefix), "worker %u ", w);
        CHECK(sscanf(ex_need_line(prefix),
                     "worker %*u (pid %*d): budget %15[a-z]; outage: %u "
                     "requests, %u attempts, %u retries granted, %u refused "
                     "by the budget",
                     shared, &requests, &a, &g, &d) == 5,
              "worker %u's line:\n%s", w, ex.res.out);
        CHECK(strcmp(shared, "shared") == 0, "worker %u: %s", w, shared);
        CHECK(requests == OUTAGE && a == OUTAGE + g, "worker %u", w);
        CHECK(ex_countf("prefork-fail-%u", w) == (long)a,
              "worker %u: the server counted other attempts", w);
        attempts += a, granted += g, denied += d;
    }
    CHECK(ex_count("prefork-ok") == WORKERS * HEALTHY, "healthy phase");
    CHECK(granted >= CAP && granted <= BOUND,
          "%u retries granted: one bucket allows %d to %d\n%s", granted, CAP,
          BOUND, ex.res.out);
    CHECK(ex_line("ok") != NULL, "%s", ex.res.out);

    /* The daemon's side of the same bucket. */
    CHECK(ex_stat("prefork-example", "retries_granted") == granted, "granted");
    CHECK(ex_stat("prefork-example", "budget_exhausted") == denied, "denied");
    CHECK(ex_stat("prefork-example", "deposits") ==
              WORKERS * (HEALTHY + OUTAGE),
          "deposits");
    CHECK(ex_stat("prefork-example", "cap") == CAP, "cap");
    printf("prefork: %d workers, %u retries granted from one bucket "
           "(allowed %d to %d)\n",
           WORKERS, granted, CAP, BOUND);
    return 0;
}
