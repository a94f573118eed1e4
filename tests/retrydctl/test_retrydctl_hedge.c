/* SPDX-License-Identifier: MIT */
/*
 * retrydctl request --hedge-after D and --hedge (docs/hedging.md): a safe
 * GET whose first execution stalls is answered by its hedge, and -v's
 * trail lists each attempt with its role; a request that may not be
 * hedged says why and waits its stall out; --max-hedges needs a policy.
 */
#include <stdio.h>
#include <string.h>

#include <criterion/criterion.h>

#include "harness.h"
#include "run.h"
#include "testsrv.h"

static testsrv *srv;
static run_result res;
static char url[256];

static void setup(void)
{
    cr_assert_eq(testsrv_start(FAULTSRV_PATH, NULL, &srv), 0);
}

static void teardown(void)
{
    testsrv_stop(srv);
}

TestSuite(retrydctl_hedge, .init = setup, .fini = teardown, .timeout = 60);

static char *at(const char *path)
{
    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", testsrv_port(srv),
             path);
    return url;
}

/* retrydctl request <args...>, without a daemon (a local budget), timed. */
#define REQUEST(ms, ...)                                                       \
    do {                                                                       \
        char *argv_[] = {RETRYDCTL_PATH, "request", __VA_ARGS__, NULL};        \
        long long t0_ = rd_now_ms();                                           \
        cr_assert_eq(run_program(argv_, 20000, &res), 0);                      \
        *(ms) = rd_now_ms() - t0_;                                             \
    } while (0)

Test(retrydctl_hedge, a_stalled_get_is_answered_by_its_hedge)
{
    long long ms;
    REQUEST(&ms, "--safe", "-v", "--hedge-after", "100ms",
            at("/stall-first?ms=10000&id=get"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect_lt(ms, 5000, "answered in %lld ms of a 10 s stall", ms);
    cr_expect_str_eq(res.out, "later execution\n", "the hedge's body, once");
    cr_expect(strstr(res.err, "attempt 1: sent_no_response/aborted") != NULL,
              "%s", res.err);
    cr_expect(strstr(res.err, "(first, +0.0ms) -> denied "
                              "(hedge_sibling_answered)") != NULL,
              "%s", res.err);
    cr_expect(strstr(res.err, "attempt 2: response_received/none status 200") !=
                  NULL,
              "%s", res.err);
    cr_expect(strstr(res.err, "(hedge, +") != NULL, "%s", res.err);
    cr_expect(strstr(res.err, "hedging: 1 hedge sent, one answered") != NULL,
              "%s", res.err);
    cr_expect(strstr(res.err,
                     "2 attempts of which 1 hedge, a hedge answered") != NULL,
              "%s", res.err);
    cr_expect_eq(testsrv_wait_count(srv, "get", 3, 300), 2);
}

Test(retrydctl_hedge, a_request_not_declared_safe_is_not_hedged_and_says_so)
{
    long long ms;
    REQUEST(&ms, "-d", "amount=10", "--hedge-after", "100ms",
            at("/stall-first?ms=1200&id=pay"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect_geq(ms, 1200, "the stall waited out");
    cr_expect(strstr(res.err, "not hedged (hedge_not_idempotent)") != NULL,
              "%s", res.err);
    cr_expect_eq(testsrv_wait_count(srv, "pay", 2, 300), 1);
}

Test(retrydctl_hedge, adaptive_hedging_waits_for_the_hosts_latency_picture)
{
    /* A process of its own, on a local budget: no picture has ever been
     * computed for this upstream, so no hedge goes out. */
    long long ms;
    REQUEST(&ms, "--safe", "-v", "--hedge", at("/stall-first?ms=800&id=adapt"));
    cr_expect_eq(res.exit_code, 0, "%s", res.err);
    cr_expect(strstr(res.err, "no hedge: hedge_no_picture") != NULL, "%s",
              res.err);
    cr_expect_eq(testsrv_wait_count(srv, "adapt", 2, 300), 1);
}

Test(retrydctl_hedge, max_hedges_needs_a_policy)
{
    long long ms;
    REQUEST(&ms, "--safe", "--max-hedges", "2", at("/ok?id=m"));
    cr_expect_eq(res.exit_code, 64, "%s", res.err);
    REQUEST(&ms, "--safe", "--hedge-after", "0", at("/ok?id=m"));
    cr_expect_eq(res.exit_code, 64, "a delay of 0: %s", res.err);
    REQUEST(&ms, "--safe", "--hedge", "--max-hedges", "5", at("/ok?id=m"));
    cr_expect_eq(res.exit_code, 64, "more than 4: %s", res.err);
    cr_expect_eq(testsrv_count(srv, "m"), 0);
}
