/* SPDX-License-Identifier: MIT */
/*
 * examples/event_loop.c (libuv and the asynchronous executor) against a
 * fault server: every request ends as expected, and the held reads were
 * all in flight at once on the example's one thread: the server saw the
 * last of them arrive before it answered the first (it holds each for
 * HOLD_MS), which no one-at-a-time client can do. The lost payment was
 * executed once; the read that failed once, twice (its backoff a timer).
 */
#include <stdint.h>

#include "example_test.h"
#include "srv_log.h"

#define HOLDS 20
#define HOLD_MS 1000

int main(void)
{
#ifdef EVENT_LOOP_MISSING
    CHECK_SKIP("examples/event_loop.c is not built: %s", EVENT_LOOP_MISSING);
#else
    ex_start_server();
    ex_no_daemon();
    char *argv[] = {EXAMPLE_PATH, ex.base, "20", NULL};
    int rc = ex_run(argv);
    CHECK(rc == 0, "exit %d:\n%s%s", rc, ex.res.out, ex.res.err);

    unsigned long in_flight, n, resp, fail, amb, unexpected, errors;
    CHECK(sscanf(ex_need_line("in flight: "), "in flight: %lu", &in_flight) ==
              1,
          "in flight");
    CHECK(in_flight == HOLDS + 2, "%lu in flight after submitting", in_flight);
    CHECK(sscanf(ex_need_line("requests "),
                 "requests %lu: response %lu, failure %lu, ambiguous %lu; "
                 "unexpected %lu, errors %lu",
                 &n, &resp, &fail, &amb, &unexpected, &errors) == 6,
          "summary");
    CHECK(n == HOLDS + 2 && resp == HOLDS + 1 && fail == 0 && amb == 1 &&
              unexpected == 0 && errors == 0,
          "%s", ex.res.out);

    int64_t t[HOLDS + 1];
    long k = srv_log_times(ex.srv, "ev-hold", t, HOLDS + 1);
    CHECK(k == HOLDS, "%ld held reads executed", k);
    int64_t first = t[0], last = t[0];
    for (long i = 1; i < k; i++) {
        first = t[i] < first ? t[i] : first;
        last = t[i] > last ? t[i] : last;
    }
    CHECK(last - first < HOLD_MS,
          "the held reads arrived over %lld ms: not all in flight at once",
          (long long)(last - first));
    CHECK(ex_count("ev-pay") == 1, "a payment executed twice");
    CHECK(ex_count("ev-seq") == 2, "the failed read was not retried");
    printf("event_loop: %d reads in flight at once, arrived within %lld ms\n",
           HOLDS, (long long)(last - first));
    return 0;
#endif
}
